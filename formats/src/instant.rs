//! Records that are not frames: plot values (type 7), messages (type 8) and a frame's
//! allocation counts (type 9), `docs/FORMAT.md`, *Plots, messages and allocations*.
//!
//! Each is an extension record (`id u32, worker u8, type u8, timestamp u64, payload_size u16,
//! payload`), so readers that predate them skip them. This module holds their payload layouts:
//! [`crate::decode_record`] and the compact decoder both read payloads through
//! [`Plot::from_payload`], [`Message::from_payload`] and [`FrameAlloc::from_payload`].

use crate::bson_check::check_document;
use crate::varint::get_varint;

/// Plot payload bytes before the series name (value, mode, unit).
pub const PLOT_FIXED: usize = 10;
/// Message payload bytes before the text (context, level, text size).
pub const MESSAGE_FIXED: usize = 7;
/// Longest message text a record holds, in bytes (writers cut longer texts).
pub const MAX_MESSAGE_TEXT: usize = 4096;
/// Longest frame-allocation payload: four varints of at most 10 bytes.
pub const MAX_FRAME_ALLOC_PAYLOAD: usize = 40;

/// The unit of a plot series (unknown values are kept and shown as plain numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlotUnit(pub u8);

impl PlotUnit {
    /// A count: no unit.
    pub const COUNT: PlotUnit = PlotUnit(0);
    /// Bytes.
    pub const BYTES: PlotUnit = PlotUnit(1);
    /// Percent (0 to 100).
    pub const PERCENT: PlotUnit = PlotUnit(2);
    /// Nanoseconds.
    pub const NANOS: PlotUnit = PlotUnit(3);

    /// The unit's name as the CLI prints it (`count`, `bytes`, `percent`, `ns`, or `unit-N`).
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match self.0 {
            0 => "count".into(),
            1 => "bytes".into(),
            2 => "percent".into(),
            3 => "ns".into(),
            n => format!("unit-{n}").into(),
        }
    }
}

/// How the program produced a plot series' values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PlotMode {
    /// The program set each value.
    #[default]
    Value,
    /// The program added deltas; each value is their running sum.
    Summed,
}

/// One value of a named series (type 7): the series' value from `timestamp` on.
#[derive(Debug, Clone, Copy)]
pub struct Plot<'a> {
    /// Writing process's worker id.
    pub worker: u8,
    /// When the value was taken, ns since the Unix epoch.
    pub timestamp: u64,
    /// The series' value (never a delta; NaN is a gap).
    pub value: f64,
    /// Whether the value is set or a running sum of deltas.
    pub mode: PlotMode,
    /// The series' unit.
    pub unit: PlotUnit,
    /// The series' name, 1 to 255 bytes of UTF-8.
    pub name: &'a str,
}

// Bitwise equality, so that a NaN value reads back equal to itself.
impl PartialEq for Plot<'_> {
    fn eq(&self, o: &Self) -> bool {
        (self.worker, self.timestamp, self.mode, self.unit, self.name)
            == (o.worker, o.timestamp, o.mode, o.unit, o.name)
            && self.value.to_bits() == o.value.to_bits()
    }
}
impl Eq for Plot<'_> {}

impl<'a> Plot<'a> {
    /// The plot a type 7 payload holds; `None` if it does not have the documented shape.
    pub fn from_payload(worker: u8, timestamp: u64, payload: &'a [u8]) -> Option<Plot<'a>> {
        let (fixed, name) = payload.split_at_checked(PLOT_FIXED)?;
        if name.is_empty() || name.len() > u8::MAX as usize {
            return None;
        }
        Self::with_name(worker, timestamp, fixed, std::str::from_utf8(name).ok()?)
    }

    /// The plot of a payload's fixed part (value, mode, unit) and its name, checked already
    /// (a reader that keeps names it has checked once need not check them again); `None` if
    /// the fixed part does not have the documented shape.
    #[inline]
    pub fn with_name(worker: u8, timestamp: u64, fixed: &[u8], name: &'a str) -> Option<Plot<'a>> {
        let mode = match *fixed.get(8)? {
            0 => PlotMode::Value,
            1 => PlotMode::Summed,
            _ => return None,
        };
        Some(Plot {
            worker,
            timestamp,
            value: f64::from_le_bytes(fixed.get(..8)?.try_into().ok()?),
            mode,
            unit: PlotUnit(*fixed.get(9)?),
            name,
        })
    }

    /// The payload's fixed part (value, mode, unit); the name follows it.
    pub fn fixed_payload(&self) -> [u8; PLOT_FIXED] {
        let mut b = [0u8; PLOT_FIXED];
        b[..8].copy_from_slice(&self.value.to_le_bytes());
        b[8] = matches!(self.mode, PlotMode::Summed) as u8;
        b[9] = self.unit.0;
        b
    }

    /// The name as encoded: cut to 255 bytes at a character boundary.
    pub fn encoded_name(&self) -> &'a str {
        crate::truncate_label(self.name)
    }
}

/// The severity of a message (unknown values are kept and shown as numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Level(pub u8);

impl Level {
    /// An error.
    pub const ERROR: Level = Level(1);
    /// A warning.
    pub const WARN: Level = Level(2);
    /// Information.
    pub const INFO: Level = Level(3);
    /// Debugging detail.
    pub const DEBUG: Level = Level(4);
    /// Tracing detail.
    pub const TRACE: Level = Level(5);

    /// The level's name (`error`, `warn`, `info`, `debug`, `trace`, or `level-N`).
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match self.0 {
            1 => "error".into(),
            2 => "warn".into(),
            3 => "info".into(),
            4 => "debug".into(),
            5 => "trace".into(),
            n => format!("level-{n}").into(),
        }
    }

    /// The level a name means (as `name` prints it, case-insensitive), if any.
    pub fn from_name(name: &str) -> Option<Level> {
        let n = name.to_ascii_lowercase();
        let l = match n.as_str() {
            "error" => Level::ERROR,
            "warn" | "warning" => Level::WARN,
            "info" => Level::INFO,
            "debug" => Level::DEBUG,
            "trace" => Level::TRACE,
            _ => Level(n.strip_prefix("level-")?.parse().ok()?),
        };
        Some(l)
    }
}

/// A log message (type 8): an instant on its thread's lane, inside frame `frame` if not 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    /// The innermost frame open on the thread when it was written (same worker), or 0.
    pub frame: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// When it was written, ns since the Unix epoch.
    pub timestamp: u64,
    /// The frame's context, or 0.
    pub context: u32,
    /// Its severity.
    pub level: Level,
    /// The text, at most 4,096 bytes of UTF-8 (longer texts are cut when encoded).
    pub text: &'a str,
    /// Structured fields: one BSON document, or `None`.
    pub fields: Option<&'a [u8]>,
}

impl<'a> Message<'a> {
    /// The message a type 8 payload holds; `None` if it does not have the documented shape
    /// (including fields that are not exactly one well-formed BSON document).
    pub fn from_payload(
        frame: u32,
        worker: u8,
        timestamp: u64,
        payload: &'a [u8],
    ) -> Option<Message<'a>> {
        let (fixed, rest) = payload.split_at_checked(MESSAGE_FIXED)?;
        let text_size = u16::from_le_bytes([fixed[5], fixed[6]]) as usize;
        if text_size > MAX_MESSAGE_TEXT {
            return None;
        }
        let (text, fields) = rest.split_at_checked(text_size)?;
        let fields = if fields.is_empty() {
            None
        } else {
            check_document(fields).ok()?;
            Some(fields)
        };
        Some(Message {
            frame,
            worker,
            timestamp,
            context: u32::from_le_bytes(fixed[..4].try_into().ok()?),
            level: Level(fixed[4]),
            text: std::str::from_utf8(text).ok()?,
            fields,
        })
    }

    /// The text as encoded: cut to 4,096 bytes at a character boundary.
    pub fn encoded_text(&self) -> &'a str {
        let t = self.text;
        if t.len() <= MAX_MESSAGE_TEXT {
            return t;
        }
        let mut end = MAX_MESSAGE_TEXT;
        while !t.is_char_boundary(end) {
            end -= 1;
        }
        &t[..end]
    }

    /// The fields as encoded: left out when they would not fit the payload.
    pub fn encoded_fields(&self) -> &'a [u8] {
        let f = self.fields.unwrap_or_default();
        if MESSAGE_FIXED + self.encoded_text().len() + f.len() > u16::MAX as usize {
            return &[];
        }
        f
    }

    /// The payload's fixed part (context, level, text size); the text and fields follow it.
    pub fn fixed_payload(&self) -> [u8; MESSAGE_FIXED] {
        let mut b = [0u8; MESSAGE_FIXED];
        b[..4].copy_from_slice(&self.context.to_le_bytes());
        b[4] = self.level.0;
        b[5..].copy_from_slice(&(self.encoded_text().len() as u16).to_le_bytes());
        b
    }

    /// The payload's length as encoded.
    pub fn payload_len(&self) -> usize {
        MESSAGE_FIXED + self.encoded_text().len() + self.encoded_fields().len()
    }
}

/// What a frame's own code allocated and freed while it ran (type 9). Inclusive, like time:
/// a frame's counts include those of the frames nested in it; for an asynchronous frame
/// they are summed over the polls of its future.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameAlloc {
    /// The frame's id (same worker).
    pub id: u32,
    /// Writing process's worker id.
    pub worker: u8,
    /// The frame's end time, ns since the Unix epoch.
    pub timestamp: u64,
    /// Allocations (and reallocations).
    pub allocs: u64,
    /// Bytes allocated.
    pub alloc_bytes: u64,
    /// Frees.
    pub frees: u64,
    /// Bytes freed.
    pub freed_bytes: u64,
}

impl FrameAlloc {
    /// The counts a type 9 payload holds; `None` unless it is exactly four varints.
    pub fn from_payload(id: u32, worker: u8, timestamp: u64, payload: &[u8]) -> Option<FrameAlloc> {
        let mut p = payload;
        let mut v = [0u64; 4];
        for x in &mut v {
            *x = get_varint(&mut p)?;
        }
        if !p.is_empty() {
            return None;
        }
        Some(FrameAlloc {
            id,
            worker,
            timestamp,
            allocs: v[0],
            alloc_bytes: v[1],
            frees: v[2],
            freed_bytes: v[3],
        })
    }

    /// The payload: four varints, in a fixed buffer, and its length. Never allocates.
    pub fn payload(&self) -> ([u8; MAX_FRAME_ALLOC_PAYLOAD], usize) {
        let mut b = [0u8; MAX_FRAME_ALLOC_PAYLOAD];
        let n = crate::varint::put_varints(
            &mut b,
            [self.allocs, self.alloc_bytes, self.frees, self.freed_bytes],
        );
        (b, n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_payload_round_trips_and_refuses_bad_shapes() {
        let p = Plot {
            worker: 3,
            timestamp: 9,
            value: -2.5,
            mode: PlotMode::Summed,
            unit: PlotUnit::BYTES,
            name: "queue depth",
        };
        let mut payload = p.fixed_payload().to_vec();
        payload.extend_from_slice(p.name.as_bytes());
        assert_eq!(Plot::from_payload(3, 9, &payload), Some(p));
        // No name, a mode that is neither 0 nor 1, a name that is not UTF-8.
        assert_eq!(Plot::from_payload(3, 9, &payload[..PLOT_FIXED]), None);
        let mut bad = payload.clone();
        bad[8] = 2;
        assert_eq!(Plot::from_payload(3, 9, &bad), None);
        let mut bad = payload.clone();
        bad[PLOT_FIXED] = 0xff;
        assert_eq!(Plot::from_payload(3, 9, &bad), None);
        // NaN reads back as itself (a gap in the series, not an error).
        let nan = Plot {
            value: f64::NAN,
            ..p
        };
        let mut payload = nan.fixed_payload().to_vec();
        payload.extend_from_slice(b"x");
        assert_eq!(
            Plot::from_payload(3, 9, &payload),
            Some(Plot { name: "x", ..nan })
        );
    }

    #[test]
    fn message_text_is_cut_at_a_char_boundary_and_big_fields_are_left_out() {
        let long = "€".repeat(2000); // 6,000 bytes
        let m = Message {
            frame: 1,
            worker: 0,
            timestamp: 5,
            context: 1,
            level: Level::WARN,
            text: &long,
            fields: None,
        };
        assert_eq!(m.encoded_text().len(), 4095);
        let fields = vec![0u8; 70_000];
        let m = Message {
            fields: Some(&fields),
            ..m
        };
        assert!(m.encoded_fields().is_empty());
        assert!(m.payload_len() <= u16::MAX as usize);
    }

    #[test]
    fn message_fields_must_be_one_bson_document() {
        let doc = bson::to_vec(&bson::doc! { "user": 42 }).unwrap();
        let m = Message {
            frame: 7,
            worker: 1,
            timestamp: 5,
            context: 3,
            level: Level::INFO,
            text: "cache miss",
            fields: Some(&doc),
        };
        let mut payload = m.fixed_payload().to_vec();
        payload.extend_from_slice(m.text.as_bytes());
        payload.extend_from_slice(&doc);
        assert_eq!(Message::from_payload(7, 1, 5, &payload), Some(m));
        payload.push(0);
        assert_eq!(Message::from_payload(7, 1, 5, &payload), None);
        // A text size past the payload.
        let mut short = m.fixed_payload().to_vec();
        short.extend_from_slice(b"cache");
        assert_eq!(Message::from_payload(7, 1, 5, &short), None);
    }

    #[test]
    fn frame_alloc_is_exactly_four_varints() {
        let a = FrameAlloc {
            id: 4,
            worker: 2,
            timestamp: 11,
            allocs: 40_000,
            alloc_bytes: 3 << 20,
            frees: 0,
            freed_bytes: u64::MAX,
        };
        let (b, n) = a.payload();
        assert_eq!(FrameAlloc::from_payload(4, 2, 11, &b[..n]), Some(a));
        assert_eq!(FrameAlloc::from_payload(4, 2, 11, &b[..n - 1]), None);
        let mut more = b[..n].to_vec();
        more.push(0);
        assert_eq!(FrameAlloc::from_payload(4, 2, 11, &more), None);
    }
}
