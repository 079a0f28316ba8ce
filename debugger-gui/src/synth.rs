//! Synthetic logs: a deterministic web-server-like workload written with
//! [`framelog::LogWriter`], for tests, benchmarks and the offline demo.
//!
//! Each request is an HTTP frame with auth, one or two "User: Select" database queries
//! (sometimes two running concurrently in one context, as async code does), and a template
//! with a nested partial; every tenth unit of work is a background job sending an email.
//! Records are buffered per thread and flushed as batches that open with a ThreadInfo record,
//! the way a real writer interleaves threads.

use std::path::Path;

use bson::{Binary, DateTime, doc, oid::ObjectId, spec::BinarySubtype};
use formats::{Category, FrameEnd, FrameKey, FrameStart, Record, ThreadInfo};
use framelog::{DataBatch, LogWriter, WriterOptions};

/// What to generate.
#[derive(Clone, Debug)]
pub struct SynthOptions {
    /// Stop after about this many frames.
    pub frames: u64,
    /// Threads the work is spread over.
    pub threads: u32,
    /// Random seed.
    pub seed: u64,
    /// First timestamp (ns since the Unix epoch).
    pub start_ns: u64,
    /// Attach BSON data to database frames (SQL, parameters, a date, an ObjectId, bytes).
    pub with_data: bool,
    /// Process name written in the worker info.
    pub process_name: String,
    /// Idle time between two units of work on one thread (ns, lower and upper bound).
    pub gap_ns: (u64, u64),
    /// Also write a "queue depth" plot value every tenth frame and a message (in its frame)
    /// every hundredth, as a program using plots and messages would (issue 30).
    pub instants: bool,
}

impl Default for SynthOptions {
    fn default() -> Self {
        Self {
            frames: 10_000,
            threads: 4,
            seed: 1,
            start_ns: 1_700_000_000_000_000_000,
            with_data: true,
            process_name: "synth-server".into(),
            gap_ns: (5_000, 200_000),
            instants: false,
        }
    }
}

/// A small xorshift generator (deterministic, no dependency).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo).max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

struct ThreadBuf {
    clock: u64,
    bytes: Vec<u8>,
}

/// Generates the workload, handing encoded frame-log batches to `frames_out` and data
/// entries to `data_out`. Returns the number of frames generated.
pub fn generate(
    opts: &SynthOptions,
    worker: u8,
    first_id: u32,
    mut frames_out: impl FnMut(&[u8]),
    mut data_out: impl FnMut(FrameKey, &[u8]),
) -> u64 {
    let mut g = Generator::new(opts, worker, first_id);
    let mut batch = Vec::new();
    while g.frames() < opts.frames {
        g.unit(&mut data_out, &mut batch);
        if batch.len() > 1 << 20 {
            frames_out(&batch);
            batch.clear();
        }
    }
    g.flush_all(&mut batch);
    if !batch.is_empty() {
        frames_out(&batch);
    }
    g.frames()
}

/// Writes a synthetic log into `dir` (created if needed); returns the frames written.
pub fn write_log(dir: impl AsRef<Path>, opts: &SynthOptions) -> framelog::Result<u64> {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            process_name: Some(opts.process_name.clone()),
            ..Default::default()
        },
    )?;
    // Ids: enough for every frame the generator may produce (it overshoots by one unit).
    let first = w.reserve_ids(u32::try_from(opts.frames + 64).unwrap_or(u32::MAX))?;
    let mut result = Ok(());
    let mut data = DataBatch::new();
    let frames = generate(
        opts,
        w.worker(),
        first,
        |bytes| {
            if result.is_ok() {
                result = w.append_frames(bytes);
            }
        },
        |key, doc| data.push(key, doc),
    );
    result?;
    if !data.is_empty() {
        w.append_data(&data)?;
    }
    Ok(frames)
}

/// Writes a synthetic log as [`write_log`] does, then compacts it whole, as a big log's
/// sealed segments are (the writer's background compaction stops when it is dropped, leaving
/// a log compacted to a different extent each time).
pub fn write_compacted_log(dir: impl AsRef<Path>, opts: &SynthOptions) -> framelog::Result<u64> {
    let frames = write_log(&dir, opts)?;
    framelog::compact::compact_log(
        dir.as_ref(),
        &framelog::compact::CompactOptions {
            all: true,
            ..Default::default()
        },
    )?;
    Ok(frames)
}

/// A resumable workload generator (see the module docs).
pub struct Generator {
    rng: Rng,
    worker: u8,
    next_id: u32,
    frames: u64,
    threads: Vec<ThreadBuf>,
    with_data: bool,
    doc: Vec<u8>,
    gap: (u64, u64),
    units: u64,
    instants: bool,
}

impl Generator {
    /// A generator for `worker` whose first frame id is `first_id`.
    pub fn new(opts: &SynthOptions, worker: u8, first_id: u32) -> Self {
        Self {
            rng: Rng(opts.seed.max(1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
            worker,
            next_id: first_id,
            frames: 0,
            threads: (0..opts.threads.max(1))
                .map(|t| ThreadBuf {
                    clock: opts.start_ns + t as u64 * 1_000,
                    bytes: Vec::with_capacity(1 << 16),
                })
                .collect(),
            with_data: opts.with_data,
            doc: Vec::new(),
            gap: opts.gap_ns,
            units: 0,
            instants: opts.instants,
        }
    }

    /// Frames generated so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The next frame id to use.
    pub fn next_id(&self) -> u32 {
        self.next_id
    }

    /// Continues with ids from `id` (after reserving a new range).
    pub fn set_next_id(&mut self, id: u32) {
        self.next_id = id;
    }

    /// The earliest clock among the threads (ns).
    pub fn min_clock(&self) -> u64 {
        self.threads.iter().map(|t| t.clock).min().unwrap_or(0)
    }

    /// Moves every thread's clock forward to at least `t` (idle until then).
    pub fn catch_up(&mut self, t: u64) {
        for th in &mut self.threads {
            th.clock = th.clock.max(t);
        }
    }

    /// Runs one unit of work (a request, or every tenth a job) on the thread that is
    /// furthest behind; full thread buffers are flushed into `out`.
    pub fn unit(&mut self, data_out: &mut impl FnMut(FrameKey, &[u8]), out: &mut Vec<u8>) {
        let th = (0..self.threads.len())
            .min_by_key(|&t| self.threads[t].clock)
            .unwrap_or(0);
        if self.units % 10 == 9 {
            self.job(th, data_out);
        } else {
            self.request(th, data_out);
        }
        self.units += 1;
        let (lo, hi) = self.gap;
        self.advance(th, lo, hi);
        if self.threads[th].bytes.len() > 48 << 10 {
            self.flush(th, out);
        }
    }

    /// Flushes every thread's buffer into `out`.
    pub fn flush_all(&mut self, out: &mut Vec<u8>) {
        for th in 0..self.threads.len() {
            self.flush(th, out);
        }
    }

    fn flush(&mut self, th: usize, out: &mut Vec<u8>) {
        let t = &mut self.threads[th];
        if t.bytes.is_empty() {
            return;
        }
        let name = format!("worker-{th}");
        Record::ThreadInfo(ThreadInfo {
            worker: self.worker,
            thread: th as u32 + 1,
            timestamp: t.clock,
            name: &name,
        })
        .encode_to_vec(out);
        out.extend_from_slice(&t.bytes);
        t.bytes.clear();
    }

    fn advance(&mut self, th: usize, lo_ns: u64, hi_ns: u64) {
        let d = self.rng.range(lo_ns, hi_ns);
        self.threads[th].clock += d;
    }

    fn begin(&mut self, th: usize, label: &str, cat: Category, ctx: Option<u32>) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let t = &mut self.threads[th];
        let rec = FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker: self.worker,
            timestamp: t.clock,
            context: ctx.unwrap_or(id),
            category: cat,
            label,
        };
        let start = t.bytes.len();
        t.bytes.resize(start + rec.encoded_len(), 0);
        rec.encode(&mut t.bytes[start..]);
        self.frames += 1;
        if self.instants {
            self.instants(th, id, ctx.unwrap_or(id));
        }
        id
    }

    /// A plot value every tenth frame, a message in the frame every hundredth.
    #[cold]
    fn instants(&mut self, th: usize, id: u32, context: u32) {
        let t = &mut self.threads[th];
        if self.frames.is_multiple_of(10) {
            Record::Plot(formats::Plot {
                worker: self.worker,
                timestamp: t.clock,
                value: (self.frames / 10 % 64) as f64,
                mode: formats::PlotMode::Value,
                unit: formats::PlotUnit::COUNT,
                name: "queue depth",
            })
            .encode_to_vec(&mut t.bytes);
        }
        if self.frames.is_multiple_of(100) {
            let text = format!("cache miss for user {}", self.frames / 100 % 1000);
            Record::Message(formats::Message {
                frame: id,
                worker: self.worker,
                timestamp: t.clock,
                context,
                level: formats::Level::INFO,
                text: &text,
                fields: None,
            })
            .encode_to_vec(&mut t.bytes);
        }
    }

    fn end(&mut self, th: usize, id: u32) {
        let t = &mut self.threads[th];
        let start = t.bytes.len();
        t.bytes.resize(start + formats::FRAME_END_LEN, 0);
        FrameEnd {
            id,
            worker: self.worker,
            timestamp: t.clock,
        }
        .encode(&mut t.bytes[start..]);
    }

    fn query(&mut self, id: u32, table: &str, data_out: &mut impl FnMut(FrameKey, &[u8])) {
        if !self.with_data {
            return;
        }
        let user = self.rng.range(1, 100_000) as i64;
        let mut oid = [0u8; 12];
        oid[..8].copy_from_slice(&self.rng.next().to_be_bytes());
        oid[8..].copy_from_slice(&(id.to_be_bytes()));
        let d = doc! {
            "sql": format!("SELECT id, name, email FROM {table} WHERE id = $1 LIMIT 1"),
            "params": [user],
            "rows": (self.rng.range(0, 3)) as i32,
            "database": { "name": "app", "pool": "primary", "replica": false },
            "issuedAt": DateTime::from_millis(1_700_000_000_000 + (id as i64 % 86_400_000)),
            "requestId": ObjectId::from_bytes(oid),
            "hash": Binary { subtype: BinarySubtype::Generic, bytes: user.to_le_bytes().to_vec() },
        };
        self.doc.clear();
        if d.to_writer(&mut self.doc).is_ok() {
            data_out(FrameKey::new(self.worker, id), &self.doc);
        }
    }

    fn request(&mut self, th: usize, data_out: &mut impl FnMut(FrameKey, &[u8])) {
        const ROUTES: [&str; 4] = [
            "GET /users/:id",
            "GET /orders",
            "POST /orders",
            "GET /health",
        ];
        let route = ROUTES[(self.rng.next() % ROUTES.len() as u64) as usize];
        let root = self.begin(th, route, Category::HTTP, None);
        let ctx = Some(root);
        self.advance(th, 2_000, 15_000);
        let auth = self.begin(th, "auth/verify-token", Category::FUNCTION, ctx);
        self.advance(th, 5_000, 40_000);
        self.end(th, auth);
        self.advance(th, 1_000, 5_000);
        if self.rng.chance(30) {
            // Two queries awaited concurrently by one async handler.
            let a = self.begin(th, "User: Select", Category::DATABASE, ctx);
            self.query(a, "users", data_out);
            self.advance(th, 5_000, 20_000);
            let b = self.begin(th, "Order: Select", Category::DATABASE, ctx);
            self.query(b, "orders", data_out);
            self.advance(th, 40_000, 300_000);
            self.end(th, a);
            self.advance(th, 10_000, 100_000);
            self.end(th, b);
        } else {
            let q = self.begin(th, "User: Select", Category::DATABASE, ctx);
            self.query(q, "users", data_out);
            self.advance(th, 30_000, 400_000);
            if self.rng.chance(20) {
                let l = self.begin(th, "pool/acquire", Category::LOCK, ctx);
                self.advance(th, 1_000, 50_000);
                self.end(th, l);
            }
            self.advance(th, 5_000, 50_000);
            self.end(th, q);
        }
        self.advance(th, 2_000, 10_000);
        let tpl = self.begin(th, "template: user.html", Category::TEMPLATE, ctx);
        self.advance(th, 3_000, 20_000);
        let p = self.begin(th, "partial: header", Category::TEMPLATE, ctx);
        self.advance(th, 5_000, 30_000);
        self.end(th, p);
        self.advance(th, 5_000, 60_000);
        self.end(th, tpl);
        self.advance(th, 1_000, 5_000);
        let ev = self.begin(th, "event: request.done", Category::EVENT, ctx);
        self.advance(th, 500, 3_000);
        self.end(th, ev);
        self.end(th, root);
    }

    fn job(&mut self, th: usize, data_out: &mut impl FnMut(FrameKey, &[u8])) {
        let root = self.begin(th, "job: send-digest", Category::JOB, None);
        let ctx = Some(root);
        self.advance(th, 10_000, 50_000);
        let q = self.begin(th, "User: Select", Category::DATABASE, ctx);
        self.query(q, "subscribers", data_out);
        self.advance(th, 50_000, 500_000);
        self.end(th, q);
        for _ in 0..self.rng.range(1, 4) {
            let r = self.begin(th, "template: digest.html", Category::TEMPLATE, ctx);
            self.advance(th, 20_000, 80_000);
            self.end(th, r);
            let e = self.begin(th, "email: send", Category::EMAIL, ctx);
            self.advance(th, 100_000, 900_000);
            self.end(th, e);
        }
        self.end(th, root);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Model;

    #[test]
    fn generates_a_consistent_log() {
        let mut m = Model::new();
        let mut docs = 0;
        let n = generate(
            &SynthOptions {
                frames: 5_000,
                ..Default::default()
            },
            0,
            1,
            |bytes| {
                m.apply_bytes(bytes);
            },
            |_, _| docs += 1,
        );
        assert!(n >= 5_000);
        assert_eq!(m.frame_count(), n);
        assert_eq!(m.open_count(), 0);
        assert_eq!(m.lanes().len(), 4);
        assert!(docs > 500);
        // Rows never hold overlapping frames.
        for lane in m.lanes() {
            for row in &lane.rows {
                for i in 1..row.len() {
                    assert!(row.end(i - 1) <= row.start(i));
                }
            }
        }
    }
}
