//! Reading a log back for assertions.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::Path;

use formats::{FrameKey, Record};
use framelog::LogReader;

/// One frame start as read back.
#[derive(Debug, Clone)]
pub struct Start {
    pub key: FrameKey,
    pub context: u32,
    pub category: u8,
    pub label: String,
    pub timestamp: u64,
    /// Thread number from the ThreadInfo record before it.
    pub thread: u32,
    pub thread_name: String,
}

/// Everything in a log, decoded.
#[derive(Debug, Default)]
pub struct Log {
    pub starts: Vec<Start>,
    /// End timestamp and thread of each end record, by key.
    pub ends: HashMap<FrameKey, (u64, u32)>,
    pub end_records: u64,
    pub dropped_markers: u64,
    pub thread_infos: u64,
    /// Start or end records not preceded by any ThreadInfo of their worker.
    pub records_without_thread: u64,
    /// Frame-polls records, by frame.
    pub polls: HashMap<FrameKey, formats::FramePolls>,
    /// Slow polls, with the name of the thread they were recorded on.
    pub slow_polls: Vec<(formats::SlowPoll, String)>,
    /// Messages: (frame key, level, text).
    pub messages: Vec<(FrameKey, u8, String)>,
}

impl Log {
    /// Frame records (starts + ends).
    pub fn records(&self) -> u64 {
        self.starts.len() as u64 + self.end_records
    }

    /// Starts by key.
    pub fn start_map(&self) -> HashMap<FrameKey, &Start> {
        self.starts.iter().map(|s| (s.key, s)).collect()
    }
}

/// Reads every record of the log in `dir`.
pub fn read_log(dir: &Path) -> Log {
    let mut reader = LogReader::open(dir).expect("open log");
    let mut log = Log::default();
    let mut thread: HashMap<u8, (u32, String)> = HashMap::new();
    reader
        .read_available(|_, rec| match rec {
            Record::Start(s) => {
                let (t, name) = match thread.get(&s.worker) {
                    Some(t) => t.clone(),
                    None => {
                        log.records_without_thread += 1;
                        (u32::MAX, String::new())
                    }
                };
                log.starts.push(Start {
                    key: FrameKey::new(s.worker, s.id),
                    context: s.context,
                    category: s.category.0,
                    label: s.label.to_owned(),
                    timestamp: s.timestamp,
                    thread: t,
                    thread_name: name,
                });
            }
            Record::End(e) => {
                let t = match thread.get(&e.worker) {
                    Some(t) => t.0,
                    None => {
                        log.records_without_thread += 1;
                        u32::MAX
                    }
                };
                log.end_records += 1;
                log.ends
                    .insert(FrameKey::new(e.worker, e.id), (e.timestamp, t));
            }
            Record::Dropped(d) => log.dropped_markers += d.count,
            Record::FramePolls(p) => {
                log.polls.insert(FrameKey::new(p.worker, p.id), p);
            }
            Record::SlowPoll(p) => {
                let name = thread
                    .get(&p.worker)
                    .map(|t| t.1.clone())
                    .unwrap_or_default();
                log.slow_polls.push((p, name));
            }
            Record::Message(m) => log.messages.push((
                FrameKey::new(m.worker, m.frame),
                m.level.0,
                m.text.to_owned(),
            )),
            Record::ThreadInfo(t) => {
                log.thread_infos += 1;
                thread.insert(t.worker, (t.thread, t.name.to_owned()));
            }
            _ => {}
        })
        .expect("read log");
    log
}

/// The `framelog` CLI binary next to this test binary (target/<profile>/framelog), if built.
pub fn framelog_cli() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?; // target/<profile>/deps/<test> -> target/<profile>
    let target = profile_dir.parent()?;
    ["debug", "release"]
        .iter()
        .map(|p| target.join(p).join("framelog"))
        .find(|p| p.is_file())
}
