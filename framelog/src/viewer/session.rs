//! One viewer's stream: reads the log at the viewer's own pace (as far as its credit allows)
//! and answers its data requests. No sockets here: messages in, encoded messages out, so the
//! logic is tested directly and the HTTP side only moves bytes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use formats::protocol::viewer::{
    DamageNote, DataAnswer, MAX_RECORDS_BYTES, ReadFrom, StreamStatus, ToViewer,
};
use formats::{FileKind, FrameKey, Record};

use crate::data_store::DataStore;
use crate::error::Result;
use crate::reader::{LogReader, Position};

/// How often the writers of the log are looked up (a lock probe per worker slot file).
const WRITERS_EVERY: Duration = Duration::from_secs(1);
/// Least time between two Status messages that only report progress.
const STATUS_EVERY: Duration = Duration::from_secs(1);
/// Record bytes read per step, so damage is reported close to where it was found and one
/// step never holds the viewer's thread long.
const STEP: usize = 256 << 10;

/// The server side of one viewer: its position in the log, its credit, its data lookups.
pub struct ViewerSession {
    dir: PathBuf,
    reader: Option<LogReader>,
    /// Whether the viewer asked for records (the log is opened at the next step: it may not
    /// exist yet when nothing has recorded into it).
    started: bool,
    /// Records before this time are skipped when the viewer asked to start at a time.
    from_time: Option<u64>,
    credit: i64,
    data: Option<DataStore>,
    writers: Vec<u8>,
    writers_checked: Option<Instant>,
    /// Records were sent after the writers were last looked up.
    sent_since_probe: bool,
    last_status: Option<(Instant, StreamStatus)>,
    buf: Vec<u8>,
    /// The records of the step being sent (kept for their buffers).
    step_records: StepRecords,
}

impl ViewerSession {
    /// A session on the log in `dir`; nothing is read before the viewer's Read.
    pub fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            reader: None,
            started: false,
            from_time: None,
            credit: 0,
            data: None,
            writers: Vec::new(),
            writers_checked: None,
            sent_since_probe: false,
            last_status: None,
            buf: Vec::new(),
            step_records: StepRecords::default(),
        }
    }

    /// Whether the viewer reads Records version 2 (recorded parents); by default it gets
    /// every start without its parent, as version 1 carries.
    pub fn send_parents(&mut self, parents: bool) {
        self.step_records.parents = parents;
    }

    /// Starts (or restarts) the stream.
    pub fn read(&mut self, from: ReadFrom) {
        self.reader = None;
        self.started = true;
        self.from_time = match from {
            ReadFrom::Start => None,
            ReadFrom::Time(t) => Some(t),
        };
        self.last_status = None;
    }

    /// Adds credit: record bytes the viewer is ready for.
    pub fn credit(&mut self, bytes: u32) {
        self.credit = self.credit.saturating_add(i64::from(bytes));
    }

    /// Whether the stream may send now (started and with credit).
    pub fn can_send(&self) -> bool {
        self.started && self.credit > 0
    }

    /// Reads what the credit allows and passes each encoded message to `send` (Records,
    /// Damage, then Status when it says something new). Returns whether it delivered records
    /// (so the caller knows whether to wait for the log to grow).
    ///
    /// Errors are the log's (it does not exist yet, a segment cannot be read); the stream
    /// tries again at the next step.
    pub fn step(&mut self, send: &mut dyn FnMut(Vec<u8>)) -> Result<bool> {
        if !self.started {
            return Ok(false);
        }
        if self.reader.is_none() {
            self.reader = Some(LogReader::open(&self.dir)?);
        }
        let reader = self.reader.as_mut().expect("opened above");
        let mut sent_any = false;
        if self.credit > 0 {
            let from_time = self.from_time;
            let budget = STEP.min(usize::try_from(self.credit).unwrap_or(STEP));
            // The step's records with their positions, sent once the step's damage is known,
            // so each Damage goes out between the records before and after it (a viewer
            // places damage by the newest time it read before the note).
            let step = &mut self.step_records;
            step.clear();
            let read = reader.read_some(budget, |pos, rec| {
                if let Some(t) = from_time
                    && skip_before(&rec, t)
                {
                    return;
                }
                step.push(pos, &rec);
            });
            let mut damage: Vec<(Position, Vec<u8>)> = reader
                .take_damage()
                .into_iter()
                .map(|d| {
                    let file = d
                        .path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let at = Position {
                        segment: FileKind::FrameLog.parse_file_name(&file).unwrap_or(0),
                        offset: d.offset,
                    };
                    let mut out = Vec::new();
                    ToViewer::Damage(DamageNote {
                        offset: d.offset,
                        len: d.len,
                        file,
                        why: d.why.to_string(),
                    })
                    .encode(&mut out);
                    (at, out)
                })
                .collect();
            damage.sort_by_key(|(at, _)| (at.segment, at.offset));
            let used = step.send(damage, &mut self.buf, send);
            sent_any = used > 0;
            self.credit -= used;
            read?;
        }
        self.sent_since_probe |= sent_any;
        self.send_status(!sent_any, send)?;
        Ok(sent_any)
    }

    /// Sends a Status if it changed: at once when the stream caught up or the writers
    /// changed, at most once a second for progress alone.
    ///
    /// A caught-up Status lists the writers as looked up after the records it follows were
    /// sent, so a viewer may take a writer it does not list for stopped: a process that
    /// started writing since the last look is listed, not mistaken for one that stopped.
    fn send_status(&mut self, idle: bool, send: &mut dyn FnMut(Vec<u8>)) -> Result<()> {
        let now = Instant::now();
        if (idle && self.sent_since_probe)
            || self
                .writers_checked
                .is_none_or(|t| now.duration_since(t) >= WRITERS_EVERY)
        {
            self.writers = crate::worker::writing_workers(&self.dir)?;
            self.writers_checked = Some(now);
            self.sent_since_probe = false;
        }
        let Some(reader) = self.reader.as_ref() else {
            return Ok(());
        };
        let caught_up = idle && !reader.has_new_bytes();
        let status = StreamStatus {
            caught_up,
            read: reader.bytes_read(),
            total: reader.total_bytes()?.max(reader.bytes_read()),
            pruned: reader.pruned_segments(),
            writers: self.writers.clone(),
        };
        let due = match &self.last_status {
            None => true,
            Some((at, last)) => {
                (status.caught_up && !last.caught_up)
                    || status.writers != last.writers
                    || status.pruned != last.pruned
                    || (status != *last && now.duration_since(*at) >= STATUS_EVERY)
            }
        };
        if due {
            let mut out = Vec::new();
            ToViewer::Status(status.clone()).encode(&mut out);
            send(out);
            self.last_status = Some((now, status));
        }
        Ok(())
    }

    /// Answers a DataRequest: the frame's merged data, looked up on demand.
    pub fn data(&mut self, request: u32, key: FrameKey) -> Vec<u8> {
        let mut doc = Vec::new();
        let answer = match self.lookup(key) {
            Ok(Some(d)) if d.to_writer(&mut doc).is_ok() => DataAnswer::Found(&doc),
            Ok(None) => DataAnswer::None,
            // Damaged, deleted by retention, or unreadable: the viewer says the data is lost.
            _ => DataAnswer::Lost,
        };
        let mut out = Vec::new();
        ToViewer::DataReply { request, answer }.encode(&mut out);
        out
    }

    fn lookup(&mut self, key: FrameKey) -> Result<Option<bson::Document>> {
        if self.data.is_none() {
            self.data = Some(DataStore::open(&self.dir)?);
        }
        let store = self.data.as_mut().expect("opened above");
        if !store.contains(key) {
            // Data written since the last look: read the new index entries.
            store.refresh()?;
        }
        store.get(key)
    }

    /// Whether the log may have grown past what this session has read.
    pub fn has_new_bytes(&self) -> bool {
        self.reader.as_ref().is_some_and(|r| r.has_new_bytes())
    }
}

/// Whether a record lies before `t` and can be left out of a stream asked to start at `t`.
/// Ends and names are kept: an end may belong to a frame started after `t` elsewhere, and
/// names say which thread and process records belong to.
fn skip_before(rec: &Record<'_>, t: u64) -> bool {
    matches!(rec, Record::Start(s) if s.timestamp < t)
}

/// The records one step read, with their positions, before they are sent.
#[derive(Default)]
struct StepRecords {
    /// Keep recorded parents (the viewer reads Records version 2).
    parents: bool,
    /// Encoded records, back to back.
    bytes: Vec<u8>,
    /// Each record's position and where its bytes end in `bytes`.
    records: Vec<(Position, usize)>,
}

impl StepRecords {
    /// Sends records `recs` (their bytes `bytes`) as one Records message, if any.
    fn message(
        &self,
        recs: std::ops::Range<usize>,
        bytes: std::ops::Range<usize>,
        out: &mut Vec<u8>,
        send: &mut dyn FnMut(Vec<u8>),
    ) {
        if recs.is_empty() {
            return;
        }
        let first = self.records[recs.start].0;
        out.clear();
        ToViewer::Records {
            segment: first.segment,
            offset: first.offset,
            count: recs.len() as u32,
            records: &self.bytes[bytes],
        }
        .encode(out);
        send(std::mem::take(out));
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.records.clear();
    }

    fn push(&mut self, pos: Position, rec: &Record<'_>) {
        if self.parents {
            rec.encode_to_vec(&mut self.bytes);
        } else {
            rec.without_parent().encode_to_vec(&mut self.bytes);
        }
        self.records.push((pos, self.bytes.len()));
    }

    /// Sends the records as Records messages of at most [`MAX_RECORDS_BYTES`], each of
    /// `damage` (sorted by position) just before the first record after it; returns the
    /// record bytes sent (the credit used).
    fn send(
        &self,
        damage: Vec<(Position, Vec<u8>)>,
        out: &mut Vec<u8>,
        send: &mut dyn FnMut(Vec<u8>),
    ) -> i64 {
        let mut damage = damage.into_iter().peekable();
        // The message being gathered: records `first..`, bytes `start..end`.
        let (mut first, mut start, mut end) = (0usize, 0usize, 0usize);
        for (i, &(pos, rec_end)) in self.records.iter().enumerate() {
            let before = |at: &Position| (at.segment, at.offset) < (pos.segment, pos.offset);
            let damage_first = damage.peek().is_some_and(|(at, _)| before(at));
            if damage_first || rec_end - start > MAX_RECORDS_BYTES {
                self.message(first..i, start..end, out, send);
                (first, start) = (i, end);
            }
            while let Some((_, note)) = damage.next_if(|(at, _)| before(at)) {
                send(note);
            }
            end = rec_end;
        }
        self.message(first..self.records.len(), start..end, out, send);
        // Damage after the last record read (at the end of what was written so far).
        for (_, note) in damage {
            send(note);
        }
        self.bytes.len() as i64
    }
}
