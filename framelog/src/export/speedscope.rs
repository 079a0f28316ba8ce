//! [`Speedscope`]: speedscope's own file format (evented profiles, one per thread), the
//! format its `file-format-schema.json` describes.
//!
//! Each lane of each thread (see [`super::tracks`]) becomes one evented profile of open (`O`)
//! and close (`C`) events in time order, strictly nested and balanced: "PROCESS / THREAD" for
//! the thread's own track, "PROCESS / THREAD (overlap N)" for the frames that would overlap
//! it. Frames on async tracks (rare: placed out of time order) go to extra profiles per thread
//! ("… (async 1)" …), each holding frames that do not overlap. Since a lane's frame only
//! encloses frames it is the real parent of (for logs that record parents), every stack is a
//! chain of real ancestors: a child that ran apart from its parent (another thread, or beside
//! a sibling) starts a stack of its own on its lane. Thread names are unique within a
//! process. Profiles are written to temporary files as frames arrive and joined at the end
//! (sorted by process, thread and lane), so memory does not grow with the log.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, Write};

use serde_json::json;

use super::{Frame, FrameSink};

struct Profile {
    /// (worker, thread, 0 for lanes / 1 for async lanes, lane number): the output order.
    order: (u8, u32, u8, u32),
    name: String,
    events: BufWriter<File>,
    any: bool,
    first_at: u64,
    last_at: u64,
    /// Open frames: (frame index, end).
    stack: Vec<(u32, u64)>,
}

impl Profile {
    fn new(order: (u8, u32, u8, u32), name: String) -> std::io::Result<Self> {
        Ok(Self {
            order,
            name,
            events: BufWriter::new(tempfile::tempfile()?),
            any: false,
            first_at: 0,
            last_at: 0,
            stack: Vec::new(),
        })
    }

    fn event(&mut self, kind: &str, frame: u32, at: u64) -> std::io::Result<()> {
        if self.any {
            self.events.write_all(b",")?;
        } else {
            self.first_at = at;
            self.any = true;
        }
        self.last_at = self.last_at.max(at);
        write!(
            self.events,
            "{{\"type\":\"{kind}\",\"frame\":{frame},\"at\":{at}}}"
        )
    }

    /// Closes every open frame that ends by `at`.
    fn close_until(&mut self, at: u64) -> std::io::Result<()> {
        while let Some(&(f, end)) = self.stack.last() {
            if end > at {
                break;
            }
            self.stack.pop();
            self.event("C", f, end)?;
        }
        Ok(())
    }

    /// Adds a frame that starts at or after every frame added before it (pre-order).
    fn add(&mut self, frame: u32, start: u64, end: u64) -> std::io::Result<()> {
        // A frame that starts when an open one ends follows it; a zero-length parent keeps
        // its zero-length children inside.
        while let Some(&(f, e)) = self.stack.last() {
            if e > start || (e == start && end == start) {
                break;
            }
            self.stack.pop();
            self.event("C", f, e)?;
        }
        self.event("O", frame, start)?;
        self.stack.push((frame, end));
        Ok(())
    }
}

/// A speedscope file writer over `W`.
pub struct Speedscope<W: Write> {
    out: W,
    frames: Vec<String>,
    frame_ids: HashMap<String, u32>,
    processes: HashMap<u8, String>,
    threads: HashMap<(u8, u32), String>,
    /// Lanes by (thread, lane); async lanes by thread, in order.
    sync: HashMap<(u8, u32, u32), usize>,
    lanes: HashMap<(u8, u32), Vec<usize>>,
    profiles: Vec<Profile>,
}

impl<W: Write> Speedscope<W> {
    /// A writer; nothing is written before [`FrameSink::finish`].
    pub fn new(out: W) -> Self {
        Self {
            out,
            frames: Vec::new(),
            frame_ids: HashMap::new(),
            processes: HashMap::new(),
            threads: HashMap::new(),
            sync: HashMap::new(),
            lanes: HashMap::new(),
            profiles: Vec::new(),
        }
    }

    fn frame_id(&mut self, label: &str) -> u32 {
        if let Some(&id) = self.frame_ids.get(label) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(label.to_owned());
        self.frame_ids.insert(label.to_owned(), id);
        id
    }

    fn thread_name(&self, t: (u8, u32)) -> String {
        let p = self
            .processes
            .get(&t.0)
            .cloned()
            .unwrap_or_else(|| format!("worker {}", t.0));
        let th = self
            .threads
            .get(&t)
            .cloned()
            .unwrap_or_else(|| format!("thread {}", t.1));
        format!("{p} / {th}")
    }
}

impl<W: Write> FrameSink for Speedscope<W> {
    fn process(&mut self, worker: u8, pid: u32, name: &str) -> std::io::Result<()> {
        self.processes.insert(worker, format!("{name} (pid {pid})"));
        Ok(())
    }

    fn thread(&mut self, worker: u8, thread: u32, name: &str) -> std::io::Result<()> {
        let name = if name.is_empty() {
            format!("thread {thread}")
        } else {
            name.to_owned()
        };
        self.threads.entry((worker, thread)).or_insert(name);
        Ok(())
    }

    fn frame(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        let id = self.frame_id(f.label);
        if !f.async_track {
            // Frames arrive on each lane in start order, parents first.
            let lane = (f.thread.0, f.thread.1, f.lane);
            let idx = match self.sync.get(&lane) {
                Some(&i) => i,
                None => {
                    let mut name = self.thread_name(f.thread);
                    if f.lane > 0 {
                        name = format!("{name} (overlap {})", f.lane);
                    }
                    let p = Profile::new((f.thread.0, f.thread.1, 0, f.lane), name)?;
                    self.profiles.push(p);
                    self.sync.insert(lane, self.profiles.len() - 1);
                    self.profiles.len() - 1
                }
            };
            return self.profiles[idx].add(id, f.start_ns, f.end_ns);
        }
        // Async frames arrive in end order: a lane takes one if it starts after the lane's
        // last end, so each lane's events stay ordered and never overlap.
        let lanes = self.lanes.get(&f.thread).cloned().unwrap_or_default();
        let lane = lanes.iter().copied().find(|&i| {
            let p = &self.profiles[i];
            let busy_until = p.stack.last().map_or(p.last_at, |&(_, e)| e.max(p.last_at));
            busy_until <= f.start_ns
        });
        let idx = match lane {
            Some(i) => i,
            None => {
                let n = lanes.len() as u32 + 1;
                let name = format!("{} (async {n})", self.thread_name(f.thread));
                self.profiles
                    .push(Profile::new((f.thread.0, f.thread.1, 1, n), name)?);
                let i = self.profiles.len() - 1;
                self.lanes.entry(f.thread).or_default().push(i);
                i
            }
        };
        let p = &mut self.profiles[idx];
        p.close_until(f.start_ns)?;
        p.add(id, f.start_ns, f.end_ns)
    }

    fn finish(&mut self) -> std::io::Result<()> {
        let frames: Vec<_> = self.frames.iter().map(|n| json!({"name": n})).collect();
        write!(
            self.out,
            "{{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":\"framelog\",\"name\":\"framelog export\",\"activeProfileIndex\":0,\"shared\":{{\"frames\":{}}},\"profiles\":[",
            serde_json::to_string(&frames)?
        )?;
        self.profiles.sort_by_key(|p| p.order);
        for (i, p) in self.profiles.iter_mut().enumerate() {
            p.close_until(u64::MAX)?;
            if i > 0 {
                self.out.write_all(b",")?;
            }
            write!(
                self.out,
                "{{\"type\":\"evented\",\"name\":{},\"unit\":\"nanoseconds\",\"startValue\":{},\"endValue\":{},\"events\":[",
                serde_json::to_string(&p.name)?,
                p.first_at,
                p.last_at
            )?;
            p.events.flush()?;
            let file = p.events.get_mut();
            file.rewind()?;
            std::io::copy(file, &mut self.out)?;
            self.out.write_all(b"]}")?;
        }
        self.out.write_all(b"]}\n")?;
        self.out.flush()
    }
}
