//! A terse builder of encoded records for the model's tests.

use formats::{Category, FrameEnd, FrameStart, Record, ThreadInfo, WorkerInfo};

use super::{FrameRef, Model};

/// Builds encoded records tersely for tests.
#[derive(Default)]
pub struct Log {
    pub bytes: Vec<u8>,
}

impl Log {
    pub fn start(&mut self, w: u8, id: u32, ts: u64, ctx: u32, label: &str) -> &mut Self {
        self.start_cat(w, id, ts, ctx, label, Category::FUNCTION)
    }
    /// A start that records its parent (a type 6 record).
    pub fn start_with(
        &mut self,
        w: u8,
        id: u32,
        ts: u64,
        ctx: u32,
        label: &str,
        parent: formats::Parent,
    ) -> &mut Self {
        Record::Start(FrameStart {
            parent,
            id,
            worker: w,
            timestamp: ts,
            context: ctx,
            category: Category::FUNCTION,
            label,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    pub fn start_cat(
        &mut self,
        w: u8,
        id: u32,
        ts: u64,
        ctx: u32,
        label: &str,
        cat: Category,
    ) -> &mut Self {
        Record::Start(FrameStart {
            parent: formats::Parent::NotRecorded,
            id,
            worker: w,
            timestamp: ts,
            context: ctx,
            category: cat,
            label,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    pub fn end(&mut self, w: u8, id: u32, ts: u64) -> &mut Self {
        Record::End(FrameEnd {
            id,
            worker: w,
            timestamp: ts,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    pub fn thread(&mut self, w: u8, thread: u32, name: &str) -> &mut Self {
        Record::ThreadInfo(ThreadInfo {
            worker: w,
            thread,
            timestamp: 0,
            name,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    pub fn worker(&mut self, w: u8, pid: u32, name: &str) -> &mut Self {
        Record::WorkerInfo(WorkerInfo {
            worker: w,
            timestamp: 0,
            pid,
            name,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    /// A message (type 8) in frame `frame` (0: none).
    pub fn message(
        &mut self,
        w: u8,
        frame: u32,
        ctx: u32,
        ts: u64,
        level: formats::Level,
        text: &str,
    ) -> &mut Self {
        Record::Message(formats::Message {
            frame,
            worker: w,
            timestamp: ts,
            context: ctx,
            level,
            text,
            fields: None,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    /// A plot value (type 7).
    pub fn plot(&mut self, w: u8, name: &str, ts: u64, value: f64) -> &mut Self {
        Record::Plot(formats::Plot {
            worker: w,
            timestamp: ts,
            value,
            mode: formats::PlotMode::Value,
            unit: formats::PlotUnit::COUNT,
            name,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    /// A frame-polls record (type 10) for frame `id`, written at `ts` (its end):
    /// `(polls, busy, queued, longest, first poll, slow polls)`, queued measured or not.
    pub fn polls(
        &mut self,
        w: u8,
        id: u32,
        ts: u64,
        (polls, busy_ns, queued_ns, longest_poll_ns, first_poll_ns, slow_polls): (
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
        ),
        queued_measured: bool,
    ) -> &mut Self {
        Record::FramePolls(formats::FramePolls {
            id,
            worker: w,
            timestamp: ts,
            flags: u64::from(queued_measured),
            polls,
            busy_ns,
            queued_ns,
            longest_poll_ns,
            first_poll_ns,
            slow_polls,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    /// A slow poll (type 11) of frame `id` from `ts`, `duration_ns` long.
    pub fn slow_poll(&mut self, w: u8, id: u32, ts: u64, duration_ns: u64) -> &mut Self {
        Record::SlowPoll(formats::SlowPoll {
            id,
            worker: w,
            timestamp: ts,
            duration_ns,
        })
        .encode_to_vec(&mut self.bytes);
        self
    }
    pub fn model(&self) -> Model {
        let mut m = Model::new();
        m.apply_bytes(&self.bytes);
        m
    }
}

/// A frame reference, tersely.
pub fn at(lane: u32, row: u32, index: u32) -> FrameRef {
    FrameRef { lane, row, index }
}
