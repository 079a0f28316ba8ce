//! Packed batches (`docs/FORMAT.md`, *Packed batches: versions 6 and 7*): a frame-log batch's
//! records coded against each other, about 5 bytes a frame instead of 40-55, unpacked back to
//! the same bytes. Pure: no I/O.
//!
//! Each record becomes a tag byte and a few varints: timestamps as differences, ids as "the
//! next one" or "the innermost open frame", labels interned in the batch. Nothing carries from
//! one batch to the next, so a damaged batch costs only itself.

use crate::record::{EXT_HEADER_LEN, FRAME_END_LEN, RecordType};
use crate::varint::{get_varint, put_varint, unzigzag, zigzag};

/// The `type` byte of a packed batch's header record.
pub const PACKED_BATCH_TYPE: u8 = 12;

/// Open frames a batch's stack keeps; deeper ones are dropped from the bottom.
const STACK_DEPTH: usize = 64;

const START: u8 = RecordType::Start as u8;
const END: u8 = RecordType::End as u8;
const START_WITH_PARENT: u8 = RecordType::StartWithParent as u8;
const THREAD_INFO: u8 = RecordType::ThreadInfo as u8;
const BATCH: u8 = RecordType::Batch as u8;

/// Tag forms (the top two bits).
const FORM_END: u8 = 0b00 << 6;
const FORM_START_PARENT: u8 = 0b01 << 6;
const FORM_START: u8 = 0b10 << 6;
const FORM_OTHER: u8 = 0b11 << 6;
/// Start tag bits.
const SEQUENTIAL_ID: u8 = 1;
const CONTEXT_SHIFT: u8 = 1;
const PARENT_SHIFT: u8 = 3;
const SAME_CATEGORY: u8 = 1 << 5;
/// Context and parent modes (two bits each).
const FROM_TOP: u8 = 0;
const OWN: u8 = 1;
const GIVEN: u8 = 2;
/// End tag bit: the id is the innermost open frame's.
const END_IS_TOP: u8 = 1;
/// Other-form bits.
const OTHER_WORKER: u8 = 1 << 5;
const OTHER_TYPE_FOLLOWS: u8 = 31;

/// What encoder and decoder both know at each record of a batch.
struct State {
    worker: u8,
    last_time: u64,
    last_start: u32,
    last_category: u8,
    /// Open frames: (id, context), innermost last.
    stack: Vec<(u32, u32)>,
}

impl State {
    fn new(worker: u8, timestamp: u64) -> Self {
        Self {
            worker,
            last_time: timestamp,
            last_start: 0,
            last_category: 0,
            stack: Vec::with_capacity(STACK_DEPTH),
        }
    }

    /// The one rule both sides apply after every record, whatever its form.
    #[inline]
    fn after(&mut self, kind: u8, id: u32, context: u32, category: u8) {
        match kind {
            START | START_WITH_PARENT => {
                self.last_start = id;
                self.last_category = category;
                if self.stack.len() == STACK_DEPTH {
                    self.stack.remove(0);
                }
                self.stack.push((id, context));
            }
            END => {
                if let Some(i) = self.stack.iter().rposition(|&(open, _)| open == id) {
                    self.stack.remove(i);
                }
            }
            THREAD_INFO => self.stack.clear(),
            _ => {}
        }
    }

    fn top(&self) -> Option<(u32, u32)> {
        self.stack.last().copied()
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// A FrameStart's (context, parent, category, label), wherever its layout keeps them; `None`
/// for other records and for a type 6 record whose `payload_size` is out of bounds.
#[inline]
fn start_fields(r: &[u8]) -> Option<(u32, Option<u32>, u8, &[u8])> {
    match r[5] {
        START => Some((u32_at(r, 14), None, r[18], &r[20..])),
        START_WITH_PARENT if (9..=264).contains(&(r.len() - EXT_HEADER_LEN)) => {
            Some((u32_at(r, 16), Some(u32_at(r, 20)), r[24], &r[25..]))
        }
        _ => None,
    }
}

/// Packs `records`, the whole records of one batch (a plain batch's body), appending the
/// packed body to `out`. `worker` and `timestamp` are the header's fields the packed body is
/// coded against. Returns the number of records, or `None` if `records` does not split into
/// whole records by their length fields (then `out` is as it was: write the plain batch).
pub fn pack(worker: u8, timestamp: u64, records: &[u8], out: &mut Vec<u8>) -> Option<u32> {
    let mark = out.len();
    // A packed record is never longer than its plain form plus a few bytes of varints.
    out.reserve(records.len() + 64);
    let mut st = State::new(worker, timestamp);
    let mut labels: Vec<&[u8]> = Vec::new();
    let mut pos = 0;
    let mut count = 0u32;
    while pos < records.len() {
        let Some(len) = crate::batch::record_len(&records[pos..]) else {
            out.truncate(mark);
            return None;
        };
        let Some(r) = records.get(pos..pos + len) else {
            out.truncate(mark);
            return None;
        };
        pos += len;
        count += 1;
        let (id, rw, kind) = (u32_at(r, 0), r[4], r[5]);
        let ts = u64::from_le_bytes(r[6..14].try_into().expect("8 bytes"));
        let time = zigzag(ts.wrapping_sub(st.last_time) as i64);
        st.last_time = ts;
        let start = start_fields(r);
        match (kind, start) {
            (_, Some((context, parent, category, label))) if rw == st.worker => {
                let top = st.top();
                let mut tag = if parent.is_some() {
                    FORM_START_PARENT
                } else {
                    FORM_START
                };
                let sequential = id == st.last_start.wrapping_add(1);
                if sequential {
                    tag |= SEQUENTIAL_ID;
                }
                let cmode = match top {
                    Some((_, c)) if c == context => FROM_TOP,
                    _ if context == id => OWN,
                    _ => GIVEN,
                };
                tag |= cmode << CONTEXT_SHIFT;
                let pmode = match (parent, top) {
                    (None, _) => FROM_TOP,
                    (Some(p), Some((t, _))) if p == t => FROM_TOP,
                    (Some(0), _) => OWN,
                    (Some(_), _) => GIVEN,
                };
                tag |= pmode << PARENT_SHIFT;
                let same_category = category == st.last_category;
                if same_category {
                    tag |= SAME_CATEGORY;
                }
                out.push(tag);
                put_varint(out, time);
                if !sequential {
                    let d = i64::from(id) - i64::from(st.last_start) - 1;
                    put_varint(out, zigzag(d));
                }
                if cmode == GIVEN {
                    put_varint(out, u64::from(context));
                }
                if let (GIVEN, Some(p)) = (pmode, parent) {
                    put_varint(out, zigzag(i64::from(id) - i64::from(p)));
                }
                if !same_category {
                    out.push(category);
                }
                match labels.iter().position(|&l| l == label) {
                    Some(k) => put_varint(out, k as u64),
                    None => {
                        put_varint(out, labels.len() as u64);
                        out.push(label.len() as u8);
                        out.extend_from_slice(label);
                        labels.push(label);
                    }
                }
                st.after(kind, id, context, category);
            }
            (END, _) if rw == st.worker => {
                if st.top().is_some_and(|(t, _)| t == id) {
                    out.push(FORM_END | END_IS_TOP);
                    put_varint(out, time);
                } else {
                    out.push(FORM_END);
                    put_varint(out, time);
                    put_varint(out, zigzag(i64::from(id) - i64::from(st.last_start)));
                }
                st.after(END, id, 0, 0);
            }
            _ => {
                if kind == BATCH || kind == PACKED_BATCH_TYPE {
                    // Framing inside a body is not a record a reader delivers.
                    out.truncate(mark);
                    return None;
                }
                let mut tag = FORM_OTHER | kind.min(OTHER_TYPE_FOLLOWS);
                let new_worker = rw != st.worker;
                if new_worker {
                    tag |= OTHER_WORKER;
                }
                out.push(tag);
                if kind >= OTHER_TYPE_FOLLOWS {
                    out.push(kind);
                }
                if new_worker {
                    out.push(rw);
                    st.worker = rw;
                }
                put_varint(out, time);
                put_varint(out, u64::from(id));
                put_varint(out, (len - FRAME_END_LEN) as u64);
                out.extend_from_slice(&r[FRAME_END_LEN..]);
                let (context, category) = match start {
                    Some((c, _, g, _)) => (c, g),
                    None => (0, 0),
                };
                st.after(kind, id, context, category);
            }
        }
    }
    Some(count)
}

/// Unpacks a packed body into `out` (cleared first): exactly `count` whole records, the bytes
/// the plain batch held. `worker` and `timestamp` are the packed header's. The error says why
/// the body does not unpack (the batch is then damaged).
pub fn unpack(
    worker: u8,
    timestamp: u64,
    count: u32,
    body: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    out.clear();
    out.reserve(crate::batch::MAX_FRAMES_BATCH_LEN.min(body.len().saturating_mul(16)));
    let mut st = State::new(worker, timestamp);
    // The label table: ranges of `body`.
    let mut labels: Vec<(usize, usize)> = Vec::new();
    let mut buf = body;
    let max = crate::batch::MAX_FRAMES_BATCH_LEN;
    let cut = || "the packed body ends inside a record".to_owned();
    for n in 0..count {
        if out.len() > max {
            return Err(format!("unpacks to more than {max} bytes"));
        }
        let (&tag, rest) = buf
            .split_first()
            .ok_or_else(|| format!("the packed body ends after {n} of {count} records"))?;
        buf = rest;
        let form = tag & 0b11 << 6;
        // The other form names its type, and maybe a new worker, before its time.
        let mut other_kind = 0;
        if form == FORM_OTHER {
            other_kind = tag & OTHER_TYPE_FOLLOWS;
            if other_kind == OTHER_TYPE_FOLLOWS {
                let (&k, rest) = buf.split_first().ok_or_else(cut)?;
                buf = rest;
                other_kind = k;
            }
            if tag & OTHER_WORKER != 0 {
                let (&w, rest) = buf.split_first().ok_or_else(cut)?;
                buf = rest;
                st.worker = w;
            }
        }
        let varint = |buf: &mut &[u8]| get_varint(buf).ok_or_else(cut);
        let time = varint(&mut buf)?;
        let ts = st.last_time.wrapping_add(unzigzag(time) as u64);
        st.last_time = ts;
        let head = |out: &mut Vec<u8>, id: u32, w: u8, kind: u8| {
            out.extend_from_slice(&id.to_le_bytes());
            out.push(w);
            out.push(kind);
            out.extend_from_slice(&ts.to_le_bytes());
        };
        let narrow = |v: i64, what: &str| {
            u32::try_from(v).map_err(|_| format!("a {what} outside 0 to {}", u32::MAX))
        };
        match form {
            FORM_END => {
                if tag & !END_IS_TOP & 0b0011_1111 != 0 {
                    return Err(format!("an end's tag {tag:#04x} has unknown bits"));
                }
                let id = if tag & END_IS_TOP != 0 {
                    st.top()
                        .ok_or("an end names the innermost open frame, and none is open")?
                        .0
                } else {
                    let d = unzigzag(varint(&mut buf)?);
                    narrow(i64::from(st.last_start) + d, "frame id")?
                };
                head(out, id, st.worker, END);
                st.after(END, id, 0, 0);
            }
            form @ (FORM_START | FORM_START_PARENT) => {
                let id = if tag & SEQUENTIAL_ID != 0 {
                    st.last_start.wrapping_add(1)
                } else {
                    let d = unzigzag(varint(&mut buf)?);
                    narrow(i64::from(st.last_start) + 1 + d, "frame id")?
                };
                let top = st.top();
                let no_top = || "a start refers to the innermost open frame, and none is open";
                let context = match (tag >> CONTEXT_SHIFT) & 0b11 {
                    FROM_TOP => top.ok_or_else(no_top)?.1,
                    OWN => id,
                    GIVEN => narrow(varint(&mut buf)? as i64, "context")?,
                    _ => return Err(format!("a start's tag {tag:#04x} has context mode 3")),
                };
                let pmode = (tag >> PARENT_SHIFT) & 0b11;
                let parent = match (form, pmode) {
                    (FORM_START, FROM_TOP) => None,
                    (FORM_START, _) => {
                        return Err(format!(
                            "a parentless start's tag {tag:#04x} has parent bits"
                        ));
                    }
                    (_, FROM_TOP) => Some(top.ok_or_else(no_top)?.0),
                    (_, OWN) => Some(0),
                    (_, GIVEN) => {
                        let d = unzigzag(varint(&mut buf)?);
                        Some(narrow(i64::from(id) - d, "parent id")?)
                    }
                    _ => return Err(format!("a start's tag {tag:#04x} has parent mode 3")),
                };
                let category = if tag & SAME_CATEGORY != 0 {
                    st.last_category
                } else {
                    let (&c, rest) = buf.split_first().ok_or_else(cut)?;
                    buf = rest;
                    c
                };
                let k = varint(&mut buf)?;
                let (from, to) = match usize::try_from(k) {
                    Ok(k) if k < labels.len() => labels[k],
                    Ok(k) if k == labels.len() => {
                        let (&size, rest) = buf.split_first().ok_or_else(cut)?;
                        if rest.len() < size as usize {
                            return Err(cut());
                        }
                        let from = body.len() - rest.len();
                        buf = &rest[size as usize..];
                        labels.push((from, from + size as usize));
                        (from, from + size as usize)
                    }
                    _ => return Err(format!("label {k} is past the batch's {}", labels.len())),
                };
                let label = &body[from..to];
                match parent {
                    None => {
                        head(out, id, st.worker, START);
                        out.extend_from_slice(&context.to_le_bytes());
                        out.push(category);
                        out.push(label.len() as u8);
                    }
                    Some(p) => {
                        head(out, id, st.worker, START_WITH_PARENT);
                        out.extend_from_slice(&(9 + label.len() as u16).to_le_bytes());
                        out.extend_from_slice(&context.to_le_bytes());
                        out.extend_from_slice(&p.to_le_bytes());
                        out.push(category);
                    }
                }
                out.extend_from_slice(label);
                let kind = if parent.is_some() {
                    START_WITH_PARENT
                } else {
                    START
                };
                st.after(kind, id, context, category);
            }
            _ => {
                if other_kind == BATCH || other_kind == PACKED_BATCH_TYPE {
                    return Err(format!("a record of type {other_kind} (batch framing)"));
                }
                let id = narrow(varint(&mut buf)? as i64, "id")?;
                let n = usize::try_from(varint(&mut buf)?).map_err(|_| cut())?;
                if buf.len() < n || n > max {
                    return Err(cut());
                }
                let at = out.len();
                head(out, id, st.worker, other_kind);
                out.extend_from_slice(&buf[..n]);
                buf = &buf[n..];
                let r = &out[at..];
                // Its own length fields must say exactly what was given.
                if crate::batch::record_len(r) != Some(r.len()) {
                    return Err(format!(
                        "a record of type {other_kind} whose length fields do not give its {} bytes",
                        r.len()
                    ));
                }
                let (context, category) = start_fields(r).map_or((0, 0), |(c, _, g, _)| (c, g));
                st.after(other_kind, id, context, category);
            }
        }
    }
    if !buf.is_empty() {
        return Err(format!(
            "{} bytes after the batch's {count} records",
            buf.len()
        ));
    }
    if out.len() > max {
        return Err(format!("unpacks to more than {max} bytes"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Category, Extension, FrameEnd, FrameStart, Parent, Record, ThreadInfo};
    use proptest::prelude::*;

    fn round_trip(worker: u8, timestamp: u64, records: &[u8]) -> Vec<u8> {
        let mut packed = Vec::new();
        let count = pack(worker, timestamp, records, &mut packed).expect("whole records");
        let mut back = Vec::new();
        unpack(worker, timestamp, count, &packed, &mut back).expect("unpacks");
        assert_eq!(
            back, records,
            "unpacked bytes differ from the records packed"
        );
        packed
    }

    /// A thread's frames as the stress example records them: a root with nested empty
    /// children, ids one after another, one label each, 20-40 ns apart.
    fn stress_like(frames: u32) -> Vec<u8> {
        let mut v = Vec::new();
        let t0 = 1_700_000_000_000_000_000u64;
        Record::ThreadInfo(ThreadInfo {
            worker: 3,
            thread: 1,
            timestamp: t0,
            name: "stress-0",
        })
        .encode_to_vec(&mut v);
        let mut t = t0;
        let start = |v: &mut Vec<u8>, id, t, parent, label| {
            let s = FrameStart {
                id,
                worker: 3,
                timestamp: t,
                context: 1,
                category: Category::FUNCTION,
                label,
                parent,
            };
            Record::Start(s).encode_to_vec(v);
        };
        start(&mut v, 1, t, Parent::Root, "stress/root");
        for id in 2..frames + 2 {
            t += 17 + u64::from(id % 23);
            start(&mut v, id, t, Parent::Frame(1), "stress/empty");
            t += 15 + u64::from(id % 7);
            Record::End(FrameEnd {
                id,
                worker: 3,
                timestamp: t,
            })
            .encode_to_vec(&mut v);
        }
        v
    }

    #[test]
    fn a_stress_frame_packs_to_under_six_bytes() {
        let records = stress_like(1_000);
        let packed = round_trip(3, 1_700_000_000_000_100_000, &records);
        let per_frame = packed.len() as f64 / 1_000.0;
        assert!(
            per_frame < 6.0,
            "{per_frame} bytes a frame ({} raw)",
            records.len() / 1_000
        );
    }

    #[test]
    fn an_empty_batch_and_a_foreign_record_round_trip() {
        round_trip(0, 0, &[]);
        let mut v = Vec::new();
        // Another worker's end, a type the format does not define yet, a far timestamp.
        Record::End(FrameEnd {
            id: 9,
            worker: 7,
            timestamp: u64::MAX,
        })
        .encode_to_vec(&mut v);
        Record::Unknown(Extension {
            id: 4,
            worker: 7,
            kind: 200,
            timestamp: 0,
            payload: b"xyz",
        })
        .encode_to_vec(&mut v);
        round_trip(1, 5, &v);
    }

    #[test]
    fn batch_framing_inside_a_body_is_not_packed() {
        let mut v = Vec::new();
        let head = crate::BatchHeader::for_records(0, 0, &[], 0).encode();
        v.extend_from_slice(&head);
        assert_eq!(pack(0, 0, &v, &mut Vec::new()), None);
        // Nor a cut record.
        let records = stress_like(3);
        let mut out = vec![1, 2];
        assert_eq!(pack(0, 0, &records[..records.len() - 1], &mut out), None);
        assert_eq!(out, [1, 2], "the output is left as it was");
    }

    /// Any record sequence: starts of both types with parents and contexts anywhere, ends of
    /// open and unknown frames, thread changes, workers changing, other records.
    fn record_strategy() -> impl Strategy<Value = Vec<u8>> {
        let one = (
            0u8..8,
            0u32..40,
            0u8..3,
            any::<u64>(),
            0u32..40,
            0u32..6,
            0u8..4,
            "[a-c]{0,3}",
        );
        proptest::collection::vec(one, 0..120).prop_map(|items| {
            let mut v = Vec::new();
            let mut t = 1_000u64;
            for (kind, id, worker, jitter, context, parent, category, label) in items {
                t = if jitter % 5 == 0 {
                    jitter
                } else {
                    t.wrapping_add(jitter % 2_000)
                };
                let parent = match parent {
                    0 => Parent::Root,
                    1 => Parent::NotRecorded,
                    p => Parent::Frame(id.wrapping_sub(p)),
                };
                let start = |parent| FrameStart {
                    id,
                    worker,
                    timestamp: t,
                    context,
                    category: Category(category),
                    label: &label,
                    parent,
                };
                let rec = match kind {
                    0 => Record::Start(start(Parent::NotRecorded)),
                    1 | 2 => Record::Start(start(parent)),
                    3 | 4 => Record::End(FrameEnd {
                        id,
                        worker,
                        timestamp: t,
                    }),
                    5 => Record::ThreadInfo(ThreadInfo {
                        worker,
                        thread: id,
                        timestamp: t,
                        name: &label,
                    }),
                    6 => Record::Unknown(Extension {
                        id,
                        worker,
                        kind: 30 + category,
                        timestamp: t,
                        payload: label.as_bytes(),
                    }),
                    _ => Record::Dropped(crate::Dropped {
                        worker,
                        timestamp: t,
                        count: u64::from(id),
                    }),
                };
                rec.encode_to_vec(&mut v);
            }
            v
        })
    }

    proptest! {
        #[test]
        fn any_records_unpack_to_the_same_bytes(
            records in record_strategy(),
            worker in 0u8..3,
            timestamp in any::<u64>(),
        ) {
            round_trip(worker, timestamp, &records);
        }

        /// Damage inside a packed body: an error or some records, never a panic, never more
        /// than a batch may hold.
        #[test]
        fn damaged_bodies_never_panic(
            records in record_strategy(),
            at in any::<prop::sample::Index>(),
            bits in 1u8..=255,
            cut in any::<prop::sample::Index>(),
        ) {
            let mut packed = Vec::new();
            let count = pack(0, 0, &records, &mut packed).unwrap();
            let mut out = Vec::new();
            if !packed.is_empty() {
                let mut flipped = packed.clone();
                let i = at.index(flipped.len());
                flipped[i] ^= bits;
                if unpack(0, 0, count, &flipped, &mut out).is_ok() {
                    prop_assert!(out.len() <= crate::MAX_FRAMES_BATCH_LEN);
                }
                let short = &packed[..cut.index(packed.len())];
                prop_assert!(unpack(0, 0, count, short, &mut out).is_err());
            }
            // A wrong count is refused.
            prop_assert!(unpack(0, 0, count + 1, &packed, &mut out).is_err());
        }
    }
}
