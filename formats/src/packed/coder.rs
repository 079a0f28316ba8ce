//! Packing on the recording thread: a thread's records coded into a packed body as they are
//! made, straight into its buffer, so that the writer frames the buffer without reading it
//! (`docs/FORMAT.md`, *Packed batches*). The body is the batch's records after its
//! `thread_info`, which the writer packs in front ([`thread_info_first`]) with the header's
//! timestamp the coder was given. No allocation: a recording thread may be inside the
//! program's allocator.

use super::{
    BATCH, CONTEXT_SHIFT, END, END_IS_TOP, FORM_END, FORM_OTHER, FORM_START, FORM_START_PARENT,
    FROM_TOP, GIVEN, LAST, LabelKey, LastStart, OTHER_TYPE_FOLLOWS, OTHER_WORKER, OWN,
    PACKED_BATCH_TYPE, PARENT_SHIFT, Packer, SAME_CATEGORY, SEQUENTIAL_ID, START,
    START_WITH_PARENT, THREAD_INFO, start_fields, u32_at,
};
use crate::record::{EXT_HEADER_LEN, FRAME_END_LEN, FRAME_START_HEADER_LEN};
use crate::varint::zigzag;
use crate::{FRAME_START_PARENT_HEADER_LEN, MAX_FRAMES_BATCH_LEN, ThreadInfo};

/// What a coded body may unpack to: a batch's records take at most
/// [`MAX_FRAMES_BATCH_LEN`], and the `thread_info` in front takes up to 16 + 255 of it.
pub const CODED_PLAIN_LIMIT: usize = MAX_FRAMES_BATCH_LEN - EXT_HEADER_LEN - u8::MAX as usize;

/// Labels a coder remembers, by [`LabelKey::slot`]; a forgotten one is defined again (the
/// format allows it).
const SLOTS: usize = 64;
/// Bytes a coder keeps of its labels longer than 16 (their middles, to compare them).
const ARENA: usize = 4096;

/// A label the coder defined in its body.
#[derive(Clone, Copy)]
struct Known {
    key: LabelKey,
    /// Its index in the body's label table.
    index: u64,
    /// Where the arena holds its bytes 8 to `len - 8` (labels over 16 bytes).
    middle: (u16, u16),
    /// The body it was defined in ([`Coder::body`]); another body's is not known.
    body: u64,
}

/// What a coder follows of the decoder's state (`docs/FORMAT.md`, *Packed body*): all of it
/// but the stack of open frames, of which it knows only whether the frame started last is
/// its top. Less to keep on the recording thread; the stack's other entries would only make
/// a nested frame's end a byte shorter.
struct Tracked {
    worker: u8,
    last_time: u64,
    last: LastStart,
    /// The frame started last while no end (nor `thread_info`) came since: the top of the
    /// decoder's stack.
    open: Option<u32>,
}

impl Tracked {
    fn new(worker: u8, base: u64) -> Self {
        Self {
            worker,
            last_time: base,
            last: LastStart::default(),
            open: None,
        }
    }

    /// How a start of frame `id` in `context` names its context. (Never the top of the stack:
    /// when the coder knows it, it is the frame started last, whose context is the last one.)
    #[inline(always)]
    fn context_mode(&self, id: u32, context: u32) -> u8 {
        if context == self.last.context {
            LAST
        } else if context == id {
            OWN
        } else {
            GIVEN
        }
    }

    /// How a start with parent names `parent` (0: none).
    #[inline(always)]
    fn parent_mode(&self, parent: u32) -> u8 {
        if parent == self.last.parent && parent != 0 {
            LAST
        } else if parent == 0 {
            OWN
        } else if Some(parent) == self.open {
            FROM_TOP
        } else {
            GIVEN
        }
    }

    /// After a record, as the decoder's rule (`State::after`) goes, but for the stack.
    #[inline(always)]
    fn after(&mut self, kind: u8, id: u32, context: u32, parent: u32, category: u8) {
        self.last.after(kind, id, context, parent, category);
        match kind {
            START | START_WITH_PARENT => self.open = Some(id),
            END | THREAD_INFO => self.open = None,
            _ => {}
        }
    }
}

/// Codes one thread's records into packed bodies, one body per buffer: see the module docs.
pub struct Coder {
    st: Tracked,
    /// The timestamp the body is coded against.
    base: u64,
    /// The worker the coder codes for (a record of another changes `st.worker`).
    worker: u8,
    /// Which body this is (counts resets): remembered labels of earlier bodies are stale.
    body: u64,
    /// Labels defined in this body: the next new label's index.
    defined: u64,
    slots: [Known; SLOTS],
    /// The last start's label.
    last_label: Known,
    arena: [u8; ARENA],
    arena_len: usize,
    /// Bytes the records coded so far unpack to.
    plain: usize,
}

/// A packed record's bytes before they are copied out (the longest: a start with every
/// field given, 53 bytes before its label).
struct Head {
    buf: [u8; 64],
    len: usize,
}

impl Head {
    #[inline(always)]
    fn new(tag: u8) -> Self {
        let mut buf = [0; 64];
        buf[0] = tag;
        Self { buf, len: 1 }
    }

    #[inline(always)]
    fn byte(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    #[inline(always)]
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.byte(v as u8 | 0x80);
            v >>= 7;
        }
        self.byte(v as u8);
    }

    /// Copies the head and then `tail` to the front of `out`; their length, or `None` if
    /// `out` is too short.
    #[inline(always)]
    fn write(&self, out: &mut [u8], tail: &[u8]) -> Option<usize> {
        let n = self.len + tail.len();
        let dst = out.get_mut(..n)?;
        dst[..self.len].copy_from_slice(&self.buf[..self.len]);
        dst[self.len..].copy_from_slice(tail);
        Some(n)
    }
}

/// `v` as a varint in the low bytes of a word, and its length, if it takes at most 3 bytes
/// (a difference under about 1 ms between a thread's records).
#[inline(always)]
fn short_varint(v: u64) -> Option<(u64, u32)> {
    if v < 1 << 7 {
        Some((v, 1))
    } else if v < 1 << 14 {
        Some((v & 0x7f | 0x80 | (v >> 7) << 8, 2))
    } else if v < 1 << 21 {
        Some((
            v & 0x7f | 0x80 | ((v >> 7) & 0x7f | 0x80) << 8 | (v >> 14) << 16,
            3,
        ))
    } else {
        None
    }
}

/// Writes the first `n` (at most 8) bytes of `bytes` to the front of `out`: all eight when
/// `out` has room (one store; what follows the `n` is free space), else only the `n`.
#[inline(always)]
fn put_short(out: &mut [u8], bytes: u64, n: usize) -> Option<usize> {
    if let Some(w) = out.get_mut(..8) {
        w.copy_from_slice(&bytes.to_le_bytes());
    } else {
        out.get_mut(..n)?.copy_from_slice(&bytes.to_le_bytes()[..n]);
    }
    Some(n)
}

impl Coder {
    /// A coder for worker `worker`'s records, its body coded against `base` (the header's
    /// timestamp, which the body's `thread_info` also carries).
    pub fn new(worker: u8, base: u64) -> Self {
        let stale = Known {
            key: LabelKey {
                first: 0,
                last: 0,
                len: usize::MAX,
            },
            index: 0,
            middle: (0, 0),
            body: 0,
        };
        Self {
            st: Tracked::new(worker, base),
            base,
            worker,
            body: 1,
            defined: 0,
            slots: [stale; SLOTS],
            last_label: stale,
            arena: [0; ARENA],
            arena_len: 0,
            plain: 0,
        }
    }

    /// Starts a new body (for a new buffer), coded against `base`.
    pub fn reset(&mut self, base: u64) {
        self.st = Tracked::new(self.worker, base);
        self.base = base;
        self.body += 1;
        self.defined = 0;
        self.arena_len = 0;
        self.plain = 0;
    }

    /// The timestamp this body is coded against: its header's and its `thread_info`'s.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Bytes the records coded into this body so far unpack to.
    pub fn plain_len(&self) -> usize {
        self.plain
    }

    /// Whether the coder's `slots[i]` (or its last label, for `SLOTS`) is the label `label`
    /// (whose key is `key`), read field by field (no copy of a `Known`: a copy of one just
    /// stored stalls on store forwarding).
    #[inline(always)]
    fn is(&self, k: &Known, key: &LabelKey, label: &[u8]) -> bool {
        let n = label.len();
        k.key.len == key.len
            && k.key.first == key.first
            && k.key.last == key.last
            && k.body == self.body
            && (n <= 16 || self.arena[k.middle.0 as usize..k.middle.1 as usize] == label[8..n - 8])
    }

    /// The body's index of `label` if this coder defined it and remembers it.
    #[inline(always)]
    fn find(&mut self, key: &LabelKey, label: &[u8]) -> Option<u64> {
        if self.is(&self.last_label, key, label) {
            return Some(self.last_label.index);
        }
        self.find_slot(key, label)
    }

    /// [`Coder::find`] of a label other than the last one.
    #[inline(never)]
    fn find_slot(&mut self, key: &LabelKey, label: &[u8]) -> Option<u64> {
        let i = key.slot() % SLOTS;
        if self.is(&self.slots[i], key, label) {
            self.last_label = self.slots[i];
            return Some(self.last_label.index);
        }
        None
    }

    /// Defines `label` as the body's next label (it was written inline), remembering it when
    /// the arena has room for its middle.
    fn define(&mut self, key: LabelKey, label: &[u8]) {
        let index = self.defined;
        self.defined += 1;
        let n = label.len();
        let middle = if n <= 16 {
            (0, 0)
        } else if self.arena_len + n - 16 <= ARENA {
            let at = self.arena_len;
            self.arena[at..at + n - 16].copy_from_slice(&label[8..n - 8]);
            self.arena_len += n - 16;
            (at as u16, (at + n - 16) as u16)
        } else {
            return;
        };
        let k = Known {
            key,
            index,
            middle,
            body: self.body,
        };
        self.slots[key.slot() % SLOTS] = k;
        self.last_label = k;
    }

    /// Codes a FrameStart (type 6 with `parent`, 0 for none; type 0 without) to the front of
    /// `out`; the bytes written, or `None` (nothing changed) if they do not fit `out`, the
    /// body would unpack to more than [`CODED_PLAIN_LIMIT`], or the label is over 255 bytes.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    pub fn start(
        &mut self,
        id: u32,
        timestamp: u64,
        context: u32,
        parent: Option<u32>,
        category: u8,
        label: &[u8],
        out: &mut [u8],
    ) -> Option<usize> {
        let n = label.len();
        let (kind, form, fixed) = match parent {
            Some(_) => (
                START_WITH_PARENT,
                FORM_START_PARENT,
                FRAME_START_PARENT_HEADER_LEN,
            ),
            None => (START, FORM_START, FRAME_START_HEADER_LEN),
        };
        if n > u8::MAX as usize || self.plain + fixed + n > CODED_PLAIN_LIMIT {
            return None;
        }
        let st = &self.st;
        let time = zigzag(timestamp.wrapping_sub(st.last_time) as i64);
        let sequential = id == st.last.id.wrapping_add(1);
        let cmode = st.context_mode(id, context);
        let pmode = parent.map_or(FROM_TOP, |p| st.parent_mode(p));
        let same_category = category == st.last.category;
        let mut tag = form | cmode << CONTEXT_SHIFT | pmode << PARENT_SHIFT;
        if sequential {
            tag |= SEQUENTIAL_ID;
        }
        if same_category {
            tag |= SAME_CATEGORY;
        }
        let key = LabelKey::of(label);
        let known = self.find(&key, label);
        let usual = match (known, short_varint(time)) {
            (Some(k), Some(t))
                if k < 0x80 && sequential && same_category && cmode != GIVEN && pmode != GIVEN =>
            {
                Some((k, t))
            }
            _ => None,
        };
        let written = match usual {
            // The usual start: a tag, the time in a byte or three, the label's index.
            Some((k, (t, tn))) => put_short(
                out,
                u64::from(tag) | t << 8 | k << (8 * (tn + 1)),
                tn as usize + 2,
            )?,
            None => {
                let st = &self.st;
                let mut h = Head::new(tag);
                h.varint(time);
                if !sequential {
                    h.varint(zigzag(i64::from(id) - i64::from(st.last.id) - 1));
                }
                if cmode == GIVEN {
                    h.varint(u64::from(context));
                }
                if let (GIVEN, Some(p)) = (pmode, parent) {
                    h.varint(zigzag(i64::from(id) - i64::from(p)));
                }
                if !same_category {
                    h.byte(category);
                }
                match known {
                    Some(k) => {
                        h.varint(k);
                        h.write(out, &[])?
                    }
                    None => {
                        h.varint(self.defined);
                        h.byte(n as u8);
                        let written = h.write(out, label)?;
                        self.define(key, label);
                        written
                    }
                }
            }
        };
        self.st.last_time = timestamp;
        self.st
            .after(kind, id, context, parent.unwrap_or(0), category);
        self.plain += fixed + n;
        Some(written)
    }

    /// Codes a FrameStart with parent (type 6; `parent` 0 for none) as [`Coder::start`] does,
    /// with a short path for a recording thread's usual start: the next id, with the last
    /// start's label and category, in its context (or a context of its own), beside it (or
    /// inside it, or a root).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub fn start_with_parent(
        &mut self,
        id: u32,
        timestamp: u64,
        context: u32,
        parent: u32,
        category: u8,
        label: &[u8],
        out: &mut [u8],
    ) -> Option<usize> {
        let st = &self.st;
        let n = label.len();
        let (cmode, pmode) = (st.context_mode(id, context), st.parent_mode(parent));
        if id == st.last.id.wrapping_add(1)
            && category == st.last.category
            && cmode != GIVEN
            && pmode != GIVEN
            && self.last_label.index < 0x80
            && self.plain + FRAME_START_PARENT_HEADER_LEN + n <= CODED_PLAIN_LIMIT
            && self.is(&self.last_label, &LabelKey::of(label), label)
            && let Some((t, tn)) = short_varint(zigzag(timestamp.wrapping_sub(st.last_time) as i64))
        {
            let tag = FORM_START_PARENT
                | SEQUENTIAL_ID
                | cmode << CONTEXT_SHIFT
                | pmode << PARENT_SHIFT
                | SAME_CATEGORY;
            let k = self.last_label.index;
            let written = put_short(
                out,
                u64::from(tag) | t << 8 | k << (8 * (tn + 1)),
                tn as usize + 2,
            )?;
            let st = &mut self.st;
            st.last_time = timestamp;
            st.last.id = id;
            st.last.context = context;
            st.last.parent = parent;
            st.open = Some(id);
            self.plain += FRAME_START_PARENT_HEADER_LEN + n;
            return Some(written);
        }
        self.start(id, timestamp, context, Some(parent), category, label, out)
    }

    /// Codes a FrameEnd to the front of `out`; as [`Coder::start`].
    #[inline(always)]
    pub fn end(&mut self, id: u32, timestamp: u64, out: &mut [u8]) -> Option<usize> {
        if self.st.open == Some(id)
            && self.plain + FRAME_END_LEN <= CODED_PLAIN_LIMIT
            && let Some((t, tn)) =
                short_varint(zigzag(timestamp.wrapping_sub(self.st.last_time) as i64))
        {
            let written = put_short(
                out,
                u64::from(FORM_END | END_IS_TOP) | t << 8,
                tn as usize + 1,
            )?;
            self.st.last_time = timestamp;
            self.st.open = None;
            self.plain += FRAME_END_LEN;
            return Some(written);
        }
        self.end_slow(id, timestamp, out)
    }

    /// [`Coder::end`] in general.
    #[inline(never)]
    fn end_slow(&mut self, id: u32, timestamp: u64, out: &mut [u8]) -> Option<usize> {
        if self.plain + FRAME_END_LEN > CODED_PLAIN_LIMIT {
            return None;
        }
        let st = &self.st;
        let time = zigzag(timestamp.wrapping_sub(st.last_time) as i64);
        let written = if st.open == Some(id) {
            if let Some((t, tn)) = short_varint(time) {
                put_short(
                    out,
                    u64::from(FORM_END | END_IS_TOP) | t << 8,
                    tn as usize + 1,
                )?
            } else {
                let mut h = Head::new(FORM_END | END_IS_TOP);
                h.varint(time);
                h.write(out, &[])?
            }
        } else {
            let mut h = Head::new(FORM_END);
            h.varint(time);
            h.varint(zigzag(i64::from(id) - i64::from(st.last.id)));
            h.write(out, &[])?
        };
        self.st.last_time = timestamp;
        self.st.after(END, id, 0, 0, 0);
        self.plain += FRAME_END_LEN;
        Some(written)
    }

    /// Codes `r`, one whole plain record of any type but batch framing, to the front of
    /// `out`; as [`Coder::start`] (`None` also for a record that is not whole, or framing).
    pub fn record(&mut self, r: &[u8], out: &mut [u8]) -> Option<usize> {
        if crate::batch::record_len(r)? != r.len() {
            return None;
        }
        let (id, rw, kind) = (u32_at(r, 0), r[4], r[5]);
        let timestamp = u64::from_le_bytes(r[6..14].try_into().expect("8 bytes"));
        if rw == self.st.worker {
            if kind == END {
                return self.end(id, timestamp, out);
            }
            match start_fields(r) {
                Some((context, Some(parent), category, label)) => {
                    return self
                        .start_with_parent(id, timestamp, context, parent, category, label, out);
                }
                Some((context, None, category, label)) => {
                    return self.start(id, timestamp, context, None, category, label, out);
                }
                None => {}
            }
        }
        if kind == BATCH || kind == PACKED_BATCH_TYPE || self.plain + r.len() > CODED_PLAIN_LIMIT {
            return None;
        }
        // Any other record, verbatim after its prefix (as `Packer` codes it).
        let mut tag = FORM_OTHER | kind.min(OTHER_TYPE_FOLLOWS);
        let new_worker = rw != self.st.worker;
        if new_worker {
            tag |= OTHER_WORKER;
        }
        let mut h = Head::new(tag);
        if kind >= OTHER_TYPE_FOLLOWS {
            h.byte(kind);
        }
        if new_worker {
            h.byte(rw);
        }
        h.varint(zigzag(timestamp.wrapping_sub(self.st.last_time) as i64));
        h.varint(u64::from(id));
        h.varint((r.len() - FRAME_END_LEN) as u64);
        let written = h.write(out, &r[FRAME_END_LEN..])?;
        self.st.worker = rw;
        self.st.last_time = timestamp;
        let (context, parent, category) =
            start_fields(r).map_or((0, 0, 0), |(c, p, g, _)| (c, p.unwrap_or(0), g));
        self.st.after(kind, id, context, parent, category);
        self.plain += r.len();
        Some(written)
    }
}

/// Appends `info` packed as the first record of a body whose header has `info.worker` and
/// `info.timestamp`: what a writer puts in front of a [`Coder`]'s body coded against that
/// timestamp. The header's `count` is then 1 more than the records coded.
pub fn thread_info_first(info: ThreadInfo<'_>, out: &mut Vec<u8>) {
    // On the stack: a writer calls this once a batch, and allocates nothing for it.
    let mut plain = [0u8; EXT_HEADER_LEN + u8::MAX as usize];
    let n = info
        .encode(&mut plain)
        .expect("a name of at most 255 bytes fits");
    let mut p = Packer::new(info.worker, info.timestamp, out);
    let packed = p.push(&plain[..n], out);
    debug_assert!(packed, "a thread_info is one whole record");
}
