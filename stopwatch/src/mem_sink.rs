//! An in-memory [`Sink`] for unit tests: keeps every batch, can be told to fail.

use std::sync::atomic::Ordering;

use formats::FrameKey;

use crate::error::SinkError;
use crate::sink::Sink;

/// Keeps every batch in memory; `fail` makes appends fail.
pub(crate) struct MemSink {
    worker: u8,
    next_id: std::sync::Mutex<u32>,
    reservations: std::sync::atomic::AtomicU32,
    pub(crate) frames: std::sync::Mutex<Vec<u8>>,
    pub(crate) data: std::sync::Mutex<Vec<(FrameKey, Vec<u8>)>>,
    pub(crate) fail: std::sync::atomic::AtomicBool,
    pub(crate) appends: std::sync::atomic::AtomicU32,
}

impl MemSink {
    pub(crate) fn new(worker: u8) -> MemSink {
        MemSink {
            worker,
            next_id: std::sync::Mutex::new(1),
            reservations: Default::default(),
            frames: Default::default(),
            data: Default::default(),
            fail: Default::default(),
            appends: Default::default(),
        }
    }

    pub(crate) fn reservations(&self) -> u32 {
        self.reservations.load(Ordering::SeqCst)
    }
}

impl Sink for MemSink {
    fn worker(&self) -> u8 {
        self.worker
    }
    fn reserve_ids(&self, count: u32) -> Result<u32, SinkError> {
        self.reservations.fetch_add(1, Ordering::SeqCst);
        let mut n = self.next_id.lock().unwrap();
        let first = *n;
        *n = n.wrapping_add(count);
        Ok(first)
    }
    fn append_frames(&self, records: &[u8]) -> Result<(), SinkError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err("disk full (test)".into());
        }
        self.appends.fetch_add(1, Ordering::SeqCst);
        self.frames.lock().unwrap().extend_from_slice(records);
        Ok(())
    }
    fn append_data(&self, entries: &[(FrameKey, Vec<u8>)]) -> Result<(), SinkError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err("disk full (test)".into());
        }
        self.data.lock().unwrap().extend(entries.iter().cloned());
        Ok(())
    }
}
