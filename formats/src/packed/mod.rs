//! Packed batches (`docs/FORMAT.md`, *Packed batches: versions 6 and 7*): a frame-log batch's
//! records coded against each other, about 5 bytes a frame instead of 40-55, unpacked back to
//! the same bytes. Pure: no I/O.
//!
//! Each record becomes a tag byte and a few varints: timestamps as differences, ids as "the
//! next one" or "the innermost open frame", labels interned in the batch. Nothing carries from
//! one batch to the next, so a damaged batch costs only itself.

use crate::record::{EXT_HEADER_LEN, FRAME_END_LEN, FRAME_START_HEADER_LEN, RecordType};
use crate::varint::{get_varint, unzigzag, zigzag};

pub use crate::batch::PACKED_BATCH_TYPE;

mod coder;
pub use coder::{CODED_PLAIN_LIMIT, Coder, thread_info_first};

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
const LAST: u8 = 3;
/// End tag bit: the id is the innermost open frame's.
const END_IS_TOP: u8 = 1;
/// Other-form bits.
const OTHER_WORKER: u8 = 1 << 5;
const OTHER_TYPE_FOLLOWS: u8 = 31;

/// Open frames, innermost last: a fixed array, so pushing and popping never allocate.
struct Stack {
    items: [(u32, u32); STACK_DEPTH],
    len: usize,
}

impl Stack {
    #[inline(always)]
    fn push(&mut self, open: (u32, u32)) {
        if self.len == STACK_DEPTH {
            self.drop_bottom();
        }
        self.items[self.len] = open;
        self.len += 1;
    }

    #[cold]
    fn drop_bottom(&mut self) {
        self.items.copy_within(1.., 0);
        self.len -= 1;
    }

    /// Removes the topmost entry with frame `id`, if any.
    #[inline(always)]
    fn remove(&mut self, id: u32) {
        let len = self.len;
        if len > 0 && self.items[len - 1].0 == id {
            self.len -= 1;
        } else {
            self.remove_below(id);
        }
    }

    /// [`Stack::remove`] of an entry under the top.
    #[inline(never)]
    fn remove_below(&mut self, id: u32) {
        let len = self.len;
        if let Some(i) = self.items[..len].iter().rposition(|&(open, _)| open == id) {
            self.items.copy_within(i + 1..len, i);
            self.len -= 1;
        }
    }

    #[inline(always)]
    fn top(&self) -> Option<(u32, u32)> {
        self.len.checked_sub(1).map(|i| self.items[i])
    }
}

/// The last FrameStart's fields, as every coder and decoder of a batch keeps them
/// (`docs/FORMAT.md`, *Packed body*: `last_start`, `last_category`, `last_context`,
/// `last_parent`).
#[derive(Clone, Copy, Default)]
struct LastStart {
    id: u32,
    category: u8,
    context: u32,
    parent: u32,
}

impl LastStart {
    /// After a record of type `kind`: a start's fields are kept (its parent only for type 6).
    #[inline(always)]
    fn after(&mut self, kind: u8, id: u32, context: u32, parent: u32, category: u8) {
        if kind == START || kind == START_WITH_PARENT {
            self.id = id;
            self.category = category;
            self.context = context;
            if kind == START_WITH_PARENT {
                self.parent = parent;
            }
        }
    }
}

/// What encoder and decoder both know at each record of a batch.
struct State {
    worker: u8,
    last_time: u64,
    last: LastStart,
    /// Open frames: (id, context).
    stack: Stack,
}

impl State {
    fn new(worker: u8, timestamp: u64) -> Self {
        Self {
            worker,
            last_time: timestamp,
            last: LastStart::default(),
            stack: Stack {
                items: [(0, 0); STACK_DEPTH],
                len: 0,
            },
        }
    }

    /// The one rule both sides apply after every record, whatever its form.
    #[inline(always)]
    fn after(&mut self, kind: u8, id: u32, context: u32, parent: u32, category: u8) {
        self.last.after(kind, id, context, parent, category);
        match kind {
            START | START_WITH_PARENT => self.stack.push((id, context)),
            END => self.stack.remove(id),
            THREAD_INFO => self.stack.len = 0,
            _ => {}
        }
    }

    #[inline(always)]
    fn top(&self) -> Option<(u32, u32)> {
        self.stack.top()
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

/// Slots of the encoder's label lookup (a power of two).
const LOOKUP_BITS: u32 = 8;

/// A label as the encoder compares it: its length and its first and last 8 bytes (zero-padded
/// under 8), which are all of its bytes up to 16 long, so most labels compare in three words.
#[derive(Clone, Copy, PartialEq, Eq)]
struct LabelKey {
    first: u64,
    last: u64,
    len: usize,
}

impl LabelKey {
    #[inline(always)]
    fn of(label: &[u8]) -> Self {
        let len = label.len();
        // Loads that overlap, not bytes stored one at a time and read back as a word (which
        // stalls on store forwarding): a short label's bytes, zero-padded.
        let (first, last) = if len >= 8 {
            let first = u64::from_le_bytes(label[..8].try_into().expect("8 bytes"));
            let last = u64::from_le_bytes(label[len - 8..].try_into().expect("8 bytes"));
            (first, last)
        } else if len >= 4 {
            let lo = u32::from_le_bytes(label[..4].try_into().expect("4 bytes"));
            let hi = u32::from_le_bytes(label[len - 4..].try_into().expect("4 bytes"));
            (u64::from(lo) | u64::from(hi) << (8 * (len - 4)), 0)
        } else if len > 0 {
            let (a, b, c) = (label[0], label[len / 2], label[len - 1]);
            (
                u64::from(a) | u64::from(b) << (8 * (len / 2)) | u64::from(c) << (8 * (len - 1)),
                0,
            )
        } else {
            (0, 0)
        };
        Self { first, last, len }
    }

    /// Its lookup slot: labels often share a prefix ("stress/level-1", "stress/level-2") and
    /// differ at the end, so both ends count.
    #[inline]
    fn slot(&self) -> usize {
        let h = (self.first ^ self.last.rotate_left(29) ^ self.len as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - LOOKUP_BITS)) as usize
    }
}

/// A packed record's bytes on their way to the output, gathered in a register and stored
/// eight at a time. (Bytes stored one at a time and then copied with wide loads stall on
/// store forwarding; stores through the output `Vec` make the compiler reload its fields
/// after each byte; a copy of a variable length is a call.)
struct Put {
    /// Bytes not stored yet, the first in the low byte.
    acc: u64,
    /// How many: 0 to 7.
    len: u32,
}

impl Put {
    #[inline(always)]
    fn new(tag: u8) -> Self {
        Self {
            acc: u64::from(tag),
            len: 1,
        }
    }

    #[inline(always)]
    fn byte(&mut self, out: &mut Vec<u8>, b: u8) {
        self.acc |= u64::from(b) << (8 * self.len);
        self.len += 1;
        if self.len == 8 {
            out.extend_from_slice(&self.acc.to_le_bytes());
            (self.acc, self.len) = (0, 0);
        }
    }

    #[inline(always)]
    fn varint(&mut self, out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            self.byte(out, v as u8 | 0x80);
            v >>= 7;
        }
        self.byte(out, v as u8);
    }

    /// Stores the bytes gathered: eight, cut back to those put.
    #[inline(always)]
    fn done(self, out: &mut Vec<u8>) {
        let at = out.len();
        out.extend_from_slice(&self.acc.to_le_bytes());
        out.truncate(at + self.len as usize);
    }
}

/// Packs the records of one batch into a packed body, one run of whole records at a time (a
/// writer packs the `thread_info` it puts in front of a thread's buffer, then the buffer, into
/// one batch without joining them first).
pub struct Packer {
    st: State,
    labels: LabelTable,
    count: u32,
    /// Where the packed body starts in the output.
    start: usize,
}

/// The encoder's side of a batch's label table.
struct LabelTable {
    /// Each label's key, and where its bytes are in the output.
    entries: Vec<(LabelKey, usize)>,
    /// Label slot ([`LabelKey::slot`]) to its table index + 1 (0: none). A label whose slot
    /// holds another is added to the table again (the format allows it): a few bytes, no
    /// search.
    lookup: [u16; 1 << LOOKUP_BITS],
    /// The label of the last start and its table index: a thread's frames often repeat one
    /// label (a loop's body), and then no table is looked at.
    last: (LabelKey, u64),
}

impl LabelTable {
    fn new() -> Self {
        Self {
            entries: Vec::new(),
            lookup: [0; 1 << LOOKUP_BITS],
            // No label has this length (at most 255 bytes).
            last: (
                LabelKey {
                    first: 0,
                    last: 0,
                    len: usize::MAX,
                },
                0,
            ),
        }
    }

    /// The table index of `label` (whose key is `key`) if the batch defined it already; it
    /// is then the last label.
    #[inline]
    fn find(&mut self, key: LabelKey, label: &[u8], out: &[u8]) -> Option<u64> {
        // The key holds all of a label up to 16 bytes; past that, the middle is compared.
        let same = |entries: &[(LabelKey, usize)], k: u64| {
            let (known, at) = entries[k as usize];
            let n = key.len;
            known == key && (n <= 16 || out[at + 8..at + n - 8] == label[8..n - 8])
        };
        let (last, k) = self.last;
        if last == key && same(&self.entries, k) {
            return Some(k);
        }
        let k = match self.lookup[key.slot()] {
            0 => return None,
            k => u64::from(k) - 1,
        };
        same(&self.entries, k).then(|| {
            self.last = (key, k);
            k
        })
    }

    /// Adds the label whose key is `key` and whose bytes are at `at` in the output; returns
    /// its index.
    fn add(&mut self, key: LabelKey, at: usize) -> u64 {
        let k = self.entries.len();
        self.entries.push((key, at));
        if let Ok(slot) = u16::try_from(k + 1) {
            self.lookup[key.slot()] = slot;
        }
        self.last = (key, k as u64);
        k as u64
    }
}

impl Packer {
    /// A packer for a body coded against the header's `worker` and `timestamp`, appended to
    /// `out` from its current end.
    pub fn new(worker: u8, timestamp: u64, out: &[u8]) -> Self {
        Self {
            st: State::new(worker, timestamp),
            labels: LabelTable::new(),
            count: 0,
            start: out.len(),
        }
    }

    /// Records packed so far: the header's `count`.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Packs `records`, whole records, appending to `out`. Returns false if they do not split
    /// into whole records by their length fields, or hold batch framing; `out` is then cut
    /// back to where the body started and this packer must not be used again.
    pub fn push(&mut self, records: &[u8], out: &mut Vec<u8>) -> bool {
        if self.push_all(records, out).is_none() {
            out.truncate(self.start);
            return false;
        }
        true
    }

    fn push_all(&mut self, records: &[u8], out: &mut Vec<u8>) -> Option<()> {
        // Packed records are mostly far shorter than their plain form.
        out.reserve(records.len() / 4 + 64);
        let mut rest = records;
        while !rest.is_empty() {
            let kind = *rest.get(5)?;
            let len = match kind {
                START => FRAME_START_HEADER_LEN + *rest.get(19)? as usize,
                END => FRAME_END_LEN,
                _ => EXT_HEADER_LEN + u16::from_le_bytes([*rest.get(14)?, *rest.get(15)?]) as usize,
            };
            if len > rest.len() {
                return None;
            }
            let (r, tail) = rest.split_at(len);
            rest = tail;
            self.count += 1;
            if !self.usual(r, kind, out) {
                self.one(r, kind, out)?;
            }
        }
        Some(())
    }

    /// Packs the whole record `r` of type `kind` if it is one of a recorder's usual two, in
    /// their usual shape, with one- or two-byte fields: the end of the innermost open frame,
    /// or the next start inside it (or beside the last start) with the last label and
    /// category. False, with nothing done, for anything else ([`Packer::one`] then packs it;
    /// both code what the format says, this one without asking the general questions).
    #[inline(always)]
    fn usual(&mut self, r: &[u8], kind: u8, out: &mut Vec<u8>) -> bool {
        let st = &mut self.st;
        if r[4] != st.worker {
            return false;
        }
        let id = u32_at(r, 0);
        let ts = u64::from_le_bytes(r[6..14].try_into().expect("8 bytes"));
        let time = zigzag(ts.wrapping_sub(st.last_time) as i64);
        if time >= 0x80 {
            return false;
        }
        let top = st.top();
        if kind == END {
            if top.is_none_or(|(t, _)| t != id) {
                return false;
            }
            out.extend_from_slice(&[FORM_END | END_IS_TOP, time as u8]);
            st.last_time = ts;
            st.stack.len -= 1;
            return true;
        }
        // A start with parent whose `payload_size` holds a label (`start_fields`).
        if kind != START_WITH_PARENT || r.len() < 25 {
            return false;
        }
        let (context, parent, category) = (u32_at(r, 16), u32_at(r, 20), r[24]);
        let label = &r[25..];
        if id != st.last.id.wrapping_add(1) || category != st.last.category {
            return false;
        }
        let cmode = if top.is_some_and(|(_, c)| c == context) {
            FROM_TOP
        } else if context == st.last.context && context != id {
            LAST
        } else {
            return false;
        };
        let pmode = if top.is_some_and(|(t, _)| t == parent) {
            FROM_TOP
        } else if parent == st.last.parent && parent != 0 {
            LAST
        } else {
            return false;
        };
        let (last, k) = self.labels.last;
        let n = label.len();
        if k >= 0x80 || n > 16 || last.len != n || LabelKey::of(label) != last {
            return false;
        }
        let tag = FORM_START_PARENT
            | SEQUENTIAL_ID
            | cmode << CONTEXT_SHIFT
            | pmode << PARENT_SHIFT
            | SAME_CATEGORY;
        out.extend_from_slice(&[tag, time as u8, k as u8]);
        st.last_time = ts;
        st.after(START_WITH_PARENT, id, context, parent, category);
        true
    }

    /// Packs the whole record `r` of type `kind`.
    #[inline]
    fn one(&mut self, r: &[u8], kind: u8, out: &mut Vec<u8>) -> Option<()> {
        let st = &mut self.st;
        let (id, rw) = (u32_at(r, 0), r[4]);
        let ts = u64::from_le_bytes(r[6..14].try_into().expect("8 bytes"));
        let time = zigzag(ts.wrapping_sub(st.last_time) as i64);
        st.last_time = ts;
        let start = start_fields(r);
        match start {
            Some((context, parent, category, label)) if rw == st.worker => {
                let top = st.top();
                let mut tag = if parent.is_some() {
                    FORM_START_PARENT
                } else {
                    FORM_START
                };
                let sequential = id == st.last.id.wrapping_add(1);
                if sequential {
                    tag |= SEQUENTIAL_ID;
                }
                let cmode = match top {
                    Some((_, c)) if c == context => FROM_TOP,
                    _ if context == id => OWN,
                    _ if context == st.last.context => LAST,
                    _ => GIVEN,
                };
                tag |= cmode << CONTEXT_SHIFT;
                let pmode = match (parent, top) {
                    (None, _) => FROM_TOP,
                    (Some(p), Some((t, _))) if p == t => FROM_TOP,
                    (Some(0), _) => OWN,
                    (Some(p), _) if p == st.last.parent => LAST,
                    (Some(_), _) => GIVEN,
                };
                tag |= pmode << PARENT_SHIFT;
                let same_category = category == st.last.category;
                if same_category {
                    tag |= SAME_CATEGORY;
                }
                let key = LabelKey::of(label);
                let known = self.labels.find(key, label, out);
                let mut s = Put::new(tag);
                s.varint(out, time);
                if !sequential {
                    let d = i64::from(id) - i64::from(st.last.id) - 1;
                    s.varint(out, zigzag(d));
                }
                if cmode == GIVEN {
                    s.varint(out, u64::from(context));
                }
                if let (GIVEN, Some(p)) = (pmode, parent) {
                    s.varint(out, zigzag(i64::from(id) - i64::from(p)));
                }
                if !same_category {
                    s.byte(out, category);
                }
                match known {
                    Some(k) => {
                        s.varint(out, k);
                        s.done(out);
                    }
                    None => {
                        s.varint(out, self.labels.entries.len() as u64);
                        s.byte(out, label.len() as u8);
                        s.done(out);
                        self.labels.add(key, out.len());
                        out.extend_from_slice(label);
                    }
                }
                st.after(kind, id, context, parent.unwrap_or(0), category);
            }
            None if kind == END && rw == st.worker => {
                if st.top().is_some_and(|(t, _)| t == id) {
                    let mut s = Put::new(FORM_END | END_IS_TOP);
                    s.varint(out, time);
                    s.done(out);
                } else {
                    let mut s = Put::new(FORM_END);
                    s.varint(out, time);
                    s.varint(out, zigzag(i64::from(id) - i64::from(st.last.id)));
                    s.done(out);
                }
                st.after(END, id, 0, 0, 0);
            }
            _ => {
                if kind == BATCH || kind == PACKED_BATCH_TYPE {
                    // Framing inside a body is not a record a reader delivers.
                    return None;
                }
                let mut tag = FORM_OTHER | kind.min(OTHER_TYPE_FOLLOWS);
                let new_worker = rw != st.worker;
                if new_worker {
                    tag |= OTHER_WORKER;
                }
                let mut s = Put::new(tag);
                if kind >= OTHER_TYPE_FOLLOWS {
                    s.byte(out, kind);
                }
                if new_worker {
                    s.byte(out, rw);
                    st.worker = rw;
                }
                s.varint(out, time);
                s.varint(out, u64::from(id));
                s.varint(out, (r.len() - FRAME_END_LEN) as u64);
                s.done(out);
                out.extend_from_slice(&r[FRAME_END_LEN..]);
                let (context, parent, category) = match start {
                    Some((c, p, g, _)) => (c, p.unwrap_or(0), g),
                    None => (0, 0, 0),
                };
                st.after(kind, id, context, parent, category);
            }
        }
        Some(())
    }
}

/// Packs `records`, the whole records of one batch (a plain batch's body), appending the
/// packed body to `out`. `worker` and `timestamp` are the header's fields the packed body is
/// coded against. Returns the number of records, or `None` if `records` does not split into
/// whole records by their length fields (then `out` is as it was: write the plain batch).
pub fn pack(worker: u8, timestamp: u64, records: &[u8], out: &mut Vec<u8>) -> Option<u32> {
    let mut p = Packer::new(worker, timestamp, out);
    p.push(records, out).then(|| p.count())
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
    let end = Unpacker::new(worker, timestamp).unpack_from(body, 0, count, out)?;
    if end < body.len() {
        return Err(format!(
            "{} bytes after the batch's {count} records",
            body.len() - end
        ));
    }
    Ok(())
}

/// A packed body's decoder that can stop after some records and go on later: for a body
/// still being written (a recording thread's buffer, [`Coder`]), unpacked a piece at a time.
pub struct Unpacker {
    st: State,
    /// The label table: ranges of the body.
    labels: Vec<(usize, usize)>,
}

impl Unpacker {
    /// A decoder at the start of a body coded against the header's `worker` and `timestamp`.
    pub fn new(worker: u8, timestamp: u64) -> Self {
        Self {
            st: State::new(worker, timestamp),
            labels: Vec::new(),
        }
    }

    /// Unpacks the `count` packed records of `body` that begin at byte `at`, appending their
    /// plain bytes to `out`; returns the byte after the last. The bytes before `at` must be
    /// the records this decoder unpacked so far (later records may name their labels). The
    /// error says why the body does not unpack there.
    pub fn unpack_from(
        &mut self,
        body: &[u8],
        at: usize,
        count: u32,
        out: &mut Vec<u8>,
    ) -> Result<usize, String> {
        let Self { st, labels } = self;
        let mut buf = body
            .get(at..)
            .ok_or("the body is shorter than where to go on")?;
        let from_len = out.len();
        let max = crate::batch::MAX_FRAMES_BATCH_LEN;
        let cut = || "the packed body ends inside a record".to_owned();
        for n in 0..count {
            if out.len() - from_len > max {
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
            // A rebuilt record's fixed part, appended with one copy.
            let mut rec = [0u8; 25];
            let head = |rec: &mut [u8; 25], id: u32, w: u8, kind: u8| {
                rec[..4].copy_from_slice(&id.to_le_bytes());
                rec[4] = w;
                rec[5] = kind;
                rec[6..14].copy_from_slice(&ts.to_le_bytes());
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
                        narrow(i64::from(st.last.id) + d, "frame id")?
                    };
                    head(&mut rec, id, st.worker, END);
                    out.extend_from_slice(&rec[..FRAME_END_LEN]);
                    st.after(END, id, 0, 0, 0);
                }
                form @ (FORM_START | FORM_START_PARENT) => {
                    let id = if tag & SEQUENTIAL_ID != 0 {
                        st.last.id.wrapping_add(1)
                    } else {
                        let d = unzigzag(varint(&mut buf)?);
                        narrow(i64::from(st.last.id) + 1 + d, "frame id")?
                    };
                    let top = st.top();
                    let no_top = || "a start refers to the innermost open frame, and none is open";
                    let context = match (tag >> CONTEXT_SHIFT) & 0b11 {
                        FROM_TOP => top.ok_or_else(no_top)?.1,
                        OWN => id,
                        GIVEN => narrow(varint(&mut buf)? as i64, "context")?,
                        _ => st.last.context,
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
                        (_, _) => Some(st.last.parent),
                    };
                    let category = if tag & SAME_CATEGORY != 0 {
                        st.last.category
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
                            head(&mut rec, id, st.worker, START);
                            rec[14..18].copy_from_slice(&context.to_le_bytes());
                            rec[18] = category;
                            rec[19] = label.len() as u8;
                            out.extend_from_slice(&rec[..FRAME_START_HEADER_LEN]);
                        }
                        Some(p) => {
                            head(&mut rec, id, st.worker, START_WITH_PARENT);
                            rec[14..16].copy_from_slice(&(9 + label.len() as u16).to_le_bytes());
                            rec[16..20].copy_from_slice(&context.to_le_bytes());
                            rec[20..24].copy_from_slice(&p.to_le_bytes());
                            rec[24] = category;
                            out.extend_from_slice(&rec[..25]);
                        }
                    }
                    // Labels are short: a copy of a fixed 32 bytes, cut back, where the body has
                    // them (a fixed-size copy is a few stores; a variable one is a call).
                    match body.get(from..from + 32) {
                        Some(wide) if to - from <= 32 => {
                            let at = out.len();
                            out.extend_from_slice(wide);
                            out.truncate(at + (to - from));
                        }
                        _ => out.extend_from_slice(label),
                    }
                    let kind = if parent.is_some() {
                        START_WITH_PARENT
                    } else {
                        START
                    };
                    st.after(kind, id, context, parent.unwrap_or(0), category);
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
                    head(&mut rec, id, st.worker, other_kind);
                    out.extend_from_slice(&rec[..FRAME_END_LEN]);
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
                    let (context, parent, category) =
                        start_fields(r).map_or((0, 0, 0), |(c, p, g, _)| (c, p.unwrap_or(0), g));
                    st.after(other_kind, id, context, parent, category);
                }
            }
        }
        if out.len() - from_len > max {
            return Err(format!("unpacks to more than {max} bytes"));
        }
        Ok(body.len() - buf.len())
    }
}

/// `batches` (whole batches, as [`crate::check_batches`] accepts) with every packed batch
/// made plain (its records under a new header and checksum), plain ones as they are: for a
/// segment that does not take packed batches. Errors with the offset of a batch whose header
/// does not hold or whose body does not unpack.
pub fn unpack_framed(batches: &[u8]) -> Result<Vec<u8>, u64> {
    let mut each = Vec::new();
    crate::check_batches(batches, |h, body| each.push((*h, body)))?;
    let mut out = Vec::with_capacity(batches.len().saturating_mul(4));
    let mut records = Vec::new();
    for (h, body) in each {
        let at = body.start - crate::BATCH_RECORD_LEN;
        if h.packed {
            unpack(h.worker, h.timestamp, h.count, &batches[body], &mut records)
                .map_err(|_| at as u64)?;
            let head = crate::BatchHeader::for_records(h.worker, h.timestamp, &records, h.count);
            out.extend_from_slice(&head.encode());
            out.extend_from_slice(&records);
        } else {
            out.extend_from_slice(&batches[at..body.end]);
        }
    }
    Ok(out)
}

/// The records of a verified frame-log batch ([`crate::Unit::Batch`]) whose body starts at position
/// `body_at` of its segment, each with its position: a plain batch's records where they lie, a
/// packed one's unpacked into `scratch`, at `body_at + i` (`docs/FORMAT.md`, *Packed batches*).
/// A packed body that does not unpack is the batch's damage, whole.
pub fn batch_records<'a>(
    body: &'a [u8],
    packed: Option<&crate::BatchHeader>,
    body_at: u64,
    scratch: &'a mut Vec<u8>,
) -> Result<BatchRecords<'a>, crate::DamageKind> {
    match packed {
        None => Ok(BatchRecords {
            iter: crate::RecordIter::new(body, body_at),
            len: body.len(),
            packed_at: None,
        }),
        Some(h) => {
            unpack(h.worker, h.timestamp, h.count, body, scratch)
                .map_err(crate::DamageKind::BadPacked)?;
            Ok(BatchRecords {
                len: scratch.len(),
                iter: crate::RecordIter::new(scratch, 0),
                packed_at: Some((body_at, 0)),
            })
        }
    }
}

/// The records of one batch with their positions: see [`batch_records`].
pub struct BatchRecords<'a> {
    iter: crate::RecordIter<'a>,
    /// Bytes of the batch's (unpacked) records.
    len: usize,
    /// A packed batch's body position and the next record's index.
    packed_at: Option<(u64, u64)>,
}

impl BatchRecords<'_> {
    /// Bytes of the batch's records not delivered as whole records so far (after the last
    /// record: bytes of a verified batch that are not a whole record, written wrong).
    pub fn left_over(&self) -> usize {
        self.len - self.iter.consumed()
    }
}

impl<'a> Iterator for BatchRecords<'a> {
    type Item = Result<(u64, crate::Record<'a>), crate::DecodeError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let item = self.iter.next()?;
        Some(match &mut self.packed_at {
            None => item,
            Some((at, i)) => {
                let pos = *at + *i;
                *i += 1;
                item.map(|(_, rec)| (pos, rec))
                    .map_err(|e| crate::DecodeError::new(pos, e.kind))
            }
        })
    }
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

    /// The children of a frame that began in an earlier batch (a request's, a main loop's):
    /// the first names its parent and context, the others cost what they would with the
    /// parent in the batch.
    #[test]
    fn children_of_a_frame_from_an_earlier_batch_pack_as_small() {
        let mut v = Vec::new();
        let mut t = 1_700_000_000_000_000_000u64;
        for id in 5_000_000..5_001_000u32 {
            t += 30;
            Record::Start(FrameStart {
                id,
                worker: 3,
                timestamp: t,
                context: 77,
                category: Category::FUNCTION,
                label: "versus/empty",
                parent: Parent::Frame(4_000_000),
            })
            .encode_to_vec(&mut v);
            t += 20;
            Record::End(FrameEnd {
                id,
                worker: 3,
                timestamp: t,
            })
            .encode_to_vec(&mut v);
        }
        let packed = round_trip(3, 1_700_000_000_000_000_000, &v);
        let per_frame = packed.len() as f64 / 1_000.0;
        assert!(per_frame < 6.0, "{per_frame} bytes a frame");
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
            "[a-c]{0,3}|[ab]{15,22}",
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

    #[test]
    fn labels_sharing_a_prefix_or_a_lookup_slot_round_trip_and_are_not_repeated_needlessly() {
        // 600 distinct labels (more than the lookup's slots), used twice each in turn.
        let mut v = Vec::new();
        let names: Vec<String> = (0..600).map(|i| format!("stress/level-{i}")).collect();
        for round in 0..2u32 {
            for (i, name) in names.iter().enumerate() {
                let id = round * 1_000 + i as u32 + 1;
                Record::Start(FrameStart {
                    id,
                    worker: 0,
                    timestamp: u64::from(id) * 10,
                    context: 1,
                    category: Category::FUNCTION,
                    label: name,
                    parent: Parent::NotRecorded,
                })
                .encode_to_vec(&mut v);
            }
        }
        let packed = round_trip(0, 0, &v);
        // Each label is written once a round at most; slot clashes only cost a second copy.
        let label_bytes: usize = names.iter().map(|n| n.len()).sum();
        assert!(
            packed.len() < 2 * label_bytes + 1_200 * 8,
            "{} bytes",
            packed.len()
        );
        // Four labels that repeat: written once each.
        let mut v = Vec::new();
        for id in 1..=400u32 {
            let label = ["a/x", "a/y", "stress/level-1", "stress/level-2"][id as usize % 4];
            Record::Start(FrameStart {
                id,
                worker: 0,
                timestamp: u64::from(id),
                context: 1,
                category: Category::FUNCTION,
                label,
                parent: Parent::NotRecorded,
            })
            .encode_to_vec(&mut v);
        }
        let packed = round_trip(0, 0, &v);
        assert!(
            packed.len() < 400 * 4 + 40,
            "{} bytes for 400 starts",
            packed.len()
        );
    }

    #[test]
    fn framed_packed_batches_unpack_to_plain_ones_and_damage_names_its_batch() {
        let records = stress_like(50);
        let plain = crate::BatchHeader::for_records(3, 9, &records, 102);
        let mut batches = plain.encode().to_vec();
        batches.extend_from_slice(&records);
        let mut body = Vec::new();
        let count = pack(3, 9, &records, &mut body).unwrap();
        let at = batches.len();
        batches.extend_from_slice(&crate::BatchHeader::for_packed(3, 9, &body, count).encode());
        batches.extend_from_slice(&body);
        let out = unpack_framed(&batches).unwrap();
        let mut twice = plain.encode().to_vec();
        twice.extend_from_slice(&records);
        assert_eq!(out, [twice.clone(), twice].concat());
        // A packed body that does not unpack (its last byte cut off, header made to agree).
        let cut = &body[..body.len() - 1];
        batches.truncate(at);
        batches.extend_from_slice(&crate::BatchHeader::for_packed(3, 9, cut, count).encode());
        batches.extend_from_slice(cut);
        assert_eq!(unpack_framed(&batches), Err(at as u64));
    }

    /// Records as a recorder's thread writes them: frames opened and closed in a random walk
    /// (ends mostly of the innermost frame), children of the open frame or of a frame from an
    /// earlier batch, a few labels and categories, times a few ns to a few µs apart.
    fn recorder_like() -> impl Strategy<Value = Vec<u8>> {
        let step = (any::<bool>(), 0u64..300, 0usize..4, 0u8..3, 0u8..10);
        proptest::collection::vec(step, 0..300).prop_map(|steps| {
            let labels = [
                "a",
                "db/query",
                "stress/level-1",
                "stress/level-2-and-longer",
            ];
            let mut v = Vec::new();
            let (mut t, mut next_id) = (1_000u64, 500u32);
            let mut open: Vec<(u32, u32)> = Vec::new();
            for (opens, dt, label, category, odd) in steps {
                t += if odd == 0 { dt * 1_000 } else { dt };
                if opens || open.is_empty() {
                    let (parent, context) = match open.last() {
                        Some(&(p, c)) if odd != 1 => (p, c),
                        // A frame from an earlier batch, or a root of its own.
                        _ if odd == 2 => (0, next_id),
                        _ => (77, 9),
                    };
                    let id = if odd == 3 { next_id + 5 } else { next_id };
                    next_id = id + 1;
                    Record::Start(FrameStart {
                        id,
                        worker: 1,
                        timestamp: t,
                        context,
                        category: Category(category),
                        label: labels[label],
                        parent: if parent == 0 {
                            Parent::Root
                        } else {
                            Parent::Frame(parent)
                        },
                    })
                    .encode_to_vec(&mut v);
                    open.push((id, context));
                } else {
                    let i = if odd == 4 { 0 } else { open.len() - 1 };
                    let (id, _) = open.remove(i);
                    let worker = if odd == 5 { 2 } else { 1 };
                    Record::End(FrameEnd {
                        id,
                        worker,
                        timestamp: t,
                    })
                    .encode_to_vec(&mut v);
                }
            }
            v
        })
    }

    /// Codes `records` (whole plain records) with a [`Coder`] against `base`, each into the
    /// room left in a buffer of `room` bytes; the body with its `thread_info` in front, its
    /// record count, and the plain bytes it should unpack to.
    fn coded(worker: u8, base: u64, records: &[u8]) -> (Vec<u8>, u32, Vec<u8>) {
        let info = ThreadInfo {
            worker,
            thread: 7,
            timestamp: base,
            name: "coded",
        };
        let mut body = Vec::new();
        thread_info_first(info, &mut body);
        let mut plain = Vec::new();
        Record::ThreadInfo(info).encode_to_vec(&mut plain);
        plain.extend_from_slice(records);
        let mut coder = Coder::new(worker, base);
        let mut buf = vec![0u8; records.len() * 2 + 64];
        let (mut at, mut count, mut rest) = (0, 1, records);
        while !rest.is_empty() {
            let len = crate::batch::record_len(rest).unwrap();
            let n = coder
                .record(&rest[..len], &mut buf[at..])
                .expect("a whole record codes");
            at += n;
            count += 1;
            rest = &rest[len..];
        }
        body.extend_from_slice(&buf[..at]);
        (body, count, plain)
    }

    #[test]
    fn a_label_key_holds_a_short_labels_bytes_zero_padded() {
        for n in 0..=20usize {
            let label: Vec<u8> = (1..=n as u8).collect();
            let k = LabelKey::of(&label);
            let mut first = [0u8; 8];
            let m = n.min(8);
            first[..m].copy_from_slice(&label[..m]);
            let mut last = [0u8; 8];
            if n >= 8 {
                last.copy_from_slice(&label[n - 8..]);
            }
            assert_eq!(
                (k.first, k.last, k.len),
                (u64::from_le_bytes(first), u64::from_le_bytes(last), n),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn records_a_few_microseconds_apart_code_as_they_pack() {
        // Times 100 ns to 1 ms apart: the coder's short path writes their differences in
        // two or three bytes, as varints.
        let mut v = Vec::new();
        let (mut t, mut id) = (5_000u64, 10u32);
        for gap in [
            100u64, 2_000, 8_191, 8_192, 500_000, 1_048_575, 1_048_576, 9,
        ] {
            t += gap;
            Record::Start(FrameStart {
                id,
                worker: 1,
                timestamp: t,
                context: 3,
                category: Category::FUNCTION,
                label: "gap",
                parent: Parent::Frame(3),
            })
            .encode_to_vec(&mut v);
            t += gap;
            Record::End(FrameEnd {
                id,
                worker: 1,
                timestamp: t,
            })
            .encode_to_vec(&mut v);
            id += 1;
        }
        let (body, count, plain) = coded(1, 5_000, &v);
        let mut back = Vec::new();
        unpack(1, 5_000, count, &body, &mut back).unwrap();
        assert_eq!(back, plain);
    }

    #[test]
    fn a_coded_stress_frame_takes_five_bytes() {
        let records = stress_like(1000);
        let (body, count, plain) = coded(3, 1_700_000_000_000_000_000, &records);
        let mut back = Vec::new();
        unpack(3, 1_700_000_000_000_000_000, count, &body, &mut back).unwrap();
        assert_eq!(back, plain);
        // 1,000 frames: a start of three bytes and an end of two, past the first few.
        assert!(body.len() < 1000 * 5 + 80, "{} bytes", body.len());
    }

    #[test]
    fn a_coder_stops_before_its_body_would_unpack_past_a_batch_and_changes_nothing() {
        let mut coder = Coder::new(1, 0);
        let mut buf = vec![0u8; 1 << 20];
        let (mut at, mut id) = (0, 1u32);
        loop {
            let start = coder.start(id, u64::from(id) * 10, id, Some(0), 0, b"x", &mut buf[at..]);
            let Some(n) = start else { break };
            at += n;
            match coder.end(id, u64::from(id) * 10 + 5, &mut buf[at..]) {
                Some(n) => at += n,
                None => break,
            }
            id += 1;
        }
        assert!(coder.plain_len() <= CODED_PLAIN_LIMIT);
        assert!(coder.plain_len() + FRAME_START_HEADER_LEN + 6 > CODED_PLAIN_LIMIT);
        // Too little room: nothing written, nothing changed (the same record codes the same
        // where there is room).
        let mut fresh = Coder::new(1, 0);
        let mut small = [0u8; 2];
        assert_eq!(fresh.start(5, 9, 5, Some(0), 0, b"label", &mut small), None);
        let mut a = [0u8; 64];
        let n = fresh.start(5, 9, 5, Some(0), 0, b"label", &mut a).unwrap();
        let mut b = [0u8; 64];
        let m = Coder::new(1, 0)
            .start(5, 9, 5, Some(0), 0, b"label", &mut b)
            .unwrap();
        assert_eq!(a[..n], b[..m]);
    }

    #[test]
    fn a_coder_reset_starts_a_body_that_unpacks_alone() {
        let records = stress_like(50);
        let mut coder = Coder::new(3, 100);
        let mut buf = vec![0u8; 4096];
        let mut rest = &records[..];
        while !rest.is_empty() {
            let len = crate::batch::record_len(rest).unwrap();
            coder.record(&rest[..len], &mut buf).unwrap();
            rest = &rest[len..];
        }
        // Labels of the body before are not named in the next one.
        coder.reset(5_000);
        let (body, count, plain) = coded(3, 5_000, &records);
        let mut again = Vec::new();
        thread_info_first(
            ThreadInfo {
                worker: 3,
                thread: 7,
                timestamp: 5_000,
                name: "coded",
            },
            &mut again,
        );
        let mut rest = &records[..];
        let mut at = 0;
        while !rest.is_empty() {
            let len = crate::batch::record_len(rest).unwrap();
            at += coder.record(&rest[..len], &mut buf[at..]).unwrap();
            rest = &rest[len..];
        }
        again.extend_from_slice(&buf[..at]);
        assert_eq!(again, body);
        let mut back = Vec::new();
        unpack(3, 5_000, count, &again, &mut back).unwrap();
        assert_eq!(back, plain);
    }

    proptest! {
        /// A recording thread's records coded as they are made unpack to the same bytes.
        #[test]
        fn coded_records_unpack_to_the_same_bytes(
            records in recorder_like(),
            base in any::<u64>(),
        ) {
            let (body, count, plain) = coded(1, base, &records);
            let mut back = Vec::new();
            unpack(1, base, count, &body, &mut back).unwrap();
            prop_assert_eq!(back, plain);
        }

        #[test]
        fn any_records_coded_unpack_to_the_same_bytes(
            records in record_strategy(),
            worker in 0u8..3,
            base in any::<u64>(),
        ) {
            let (body, count, plain) = coded(worker, base, &records);
            let mut back = Vec::new();
            unpack(worker, base, count, &body, &mut back).unwrap();
            prop_assert_eq!(back, plain);
        }

        /// A body unpacked a piece at a time (as a writer steals from a buffer being
        /// written) gives the records of the body unpacked at once.
        #[test]
        fn a_body_unpacked_in_pieces_is_the_body_unpacked_at_once(
            records in recorder_like(),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
        ) {
            let (body, count, plain) = coded(1, 42, &records);
            let mut cuts: Vec<u32> = cuts.iter().map(|c| c.index(count as usize + 1) as u32).collect();
            cuts.push(count);
            cuts.sort_unstable();
            let mut u = Unpacker::new(1, 42);
            let (mut at, mut done) = (0, 0);
            let mut pieces = Vec::new();
            for cut in cuts {
                let mut piece = Vec::new();
                at = u.unpack_from(&body, at, cut - done, &mut piece).unwrap();
                done = cut;
                pieces.extend_from_slice(&piece);
            }
            prop_assert_eq!(at, body.len());
            prop_assert_eq!(pieces, plain);
        }
    }

    proptest! {
        /// The recorder's usual records (most take the coder's short path) come back as they
        /// were, and as small as the general path makes them.
        #[test]
        fn recorder_like_records_unpack_to_the_same_bytes(records in recorder_like()) {
            round_trip(1, 900, &records);
        }

        /// A batch packed a run of records at a time is the batch packed at once.
        #[test]
        fn packing_in_two_pushes_is_packing_at_once(
            records in record_strategy(),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut ends = vec![0];
            let mut at = 0;
            while at < records.len() {
                at += crate::batch::record_len(&records[at..]).unwrap();
                ends.push(at);
            }
            let split = ends[cut.index(ends.len())];
            let mut whole = vec![9];
            let count = pack(2, 7, &records, &mut whole).unwrap();
            let mut parts = vec![9];
            let mut p = Packer::new(2, 7, &parts);
            prop_assert!(p.push(&records[..split], &mut parts));
            prop_assert!(p.push(&records[split..], &mut parts));
            prop_assert_eq!(p.count(), count);
            prop_assert_eq!(parts, whole);
        }

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
