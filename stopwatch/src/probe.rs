//! Built-in plot series, sampled every 100 ms on a thread of the recorder's own
//! (`stopwatch-probe-N`) that stops when the recorder shuts down:
//! - health ([`crate::Builder::plot_health`]): `stopwatch: pool use` (percent of the buffer
//!   pool's buffers taken by recording threads or waiting for the writer) and
//!   `stopwatch: dropped/s` (records discarded per second, frame records and others);
//! - process ([`crate::Builder::plot_process`], Linux only: elsewhere the series are simply
//!   absent): `process: RSS` (bytes, `/proc/self/statm`) and `process: CPU` (percent of
//!   one core, user + system time from `/proc/self/stat`; above 100 on several cores).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use formats::{PlotMode, PlotUnit};

use crate::inner::Inner;
use crate::plot::plot_on;

/// How often the series are sampled.
pub(crate) const PERIOD: Duration = Duration::from_millis(100);

/// Name of the pool-use series.
pub const POOL_USE: &str = "stopwatch: pool use";
/// Name of the dropped-records series.
pub const DROPPED_PER_SEC: &str = "stopwatch: dropped/s";
/// Name of the resident-set-size series.
pub const PROCESS_RSS: &str = "process: RSS";
/// Name of the CPU series.
pub const PROCESS_CPU: &str = "process: CPU";

/// The sampling thread; stopped (and joined) by [`Probe::stop`].
pub(crate) struct Probe {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Probe {
    /// Starts the thread for the series asked for (none: no thread).
    pub(crate) fn spawn(
        inner: &Arc<Inner>,
        health: bool,
        process: bool,
    ) -> std::io::Result<Option<Probe>> {
        if !health && !process {
            return Ok(None);
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        let inner = inner.clone();
        let thread = std::thread::Builder::new()
            .name(format!("stopwatch-probe-{}", inner.worker))
            .spawn(move || run(&inner, &rx, health, process))?;
        Ok(Some(Probe {
            stop: Some(tx),
            thread: Some(thread),
        }))
    }

    /// Stops the thread and waits for it: its last values are handed to the writer (its
    /// buffer goes over as the thread exits) before the writer's final pass.
    pub(crate) fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(inner: &Arc<Inner>, stop: &Receiver<()>, health: bool, process: bool) {
    let mut proc = if process { ProcessStats::open() } else { None };
    let mut dropped_before = dropped(inner);
    let mut before = Instant::now();
    loop {
        match stop.recv_timeout(PERIOD) {
            Err(RecvTimeoutError::Timeout) => {}
            // Stopped (the sender is dropped).
            _ => return,
        }
        let now = Instant::now();
        let secs = now.duration_since(before).as_secs_f64().max(1e-3);
        before = now;
        if health {
            let (total, free) = (inner.pool.budget(), inner.pool.free());
            let used = total.saturating_sub(free) as f64 * 100.0 / total.max(1) as f64;
            plot_on(inner, POOL_USE, used, PlotMode::Value, PlotUnit::PERCENT);
            let d = dropped(inner);
            let rate = d.saturating_sub(dropped_before) as f64 / secs;
            dropped_before = d;
            plot_on(
                inner,
                DROPPED_PER_SEC,
                rate,
                PlotMode::Value,
                PlotUnit::COUNT,
            );
        }
        if let Some(p) = &mut proc
            && let Some((rss, cpu)) = p.sample(secs)
        {
            plot_on(inner, PROCESS_RSS, rss, PlotMode::Value, PlotUnit::BYTES);
            if let Some(cpu) = cpu {
                plot_on(inner, PROCESS_CPU, cpu, PlotMode::Value, PlotUnit::PERCENT);
            }
        }
    }
}

/// Records discarded so far, of every kind.
fn dropped(inner: &Inner) -> u64 {
    inner.stats().dropped + inner.dropped_other.load(Ordering::Relaxed)
}

/// Reads the process's RSS and CPU time from `/proc` (Linux).
struct ProcessStats {
    page_size: u64,
    ticks_per_sec: u64,
    /// CPU ticks (user + system) at the previous sample.
    ticks_before: Option<u64>,
    buf: String,
}

impl ProcessStats {
    #[cfg(target_os = "linux")]
    fn open() -> Option<ProcessStats> {
        let (page_size, ticks_per_sec) = auxv_page_size_and_ticks()?;
        Some(ProcessStats {
            page_size,
            ticks_per_sec,
            ticks_before: None,
            buf: String::new(),
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn open() -> Option<ProcessStats> {
        None
    }

    /// RSS in bytes and CPU percent over the last `secs` (none at the first sample).
    fn sample(&mut self, secs: f64) -> Option<(f64, Option<f64>)> {
        self.buf.clear();
        let statm = read_into("/proc/self/statm", &mut self.buf)?;
        let rss_pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        let rss = (rss_pages * self.page_size) as f64;
        self.buf.clear();
        let stat = read_into("/proc/self/stat", &mut self.buf)?;
        let ticks = stat_cpu_ticks(stat)?;
        let cpu = self.ticks_before.map(|b| {
            ticks.saturating_sub(b) as f64 / self.ticks_per_sec.max(1) as f64 / secs * 100.0
        });
        self.ticks_before = Some(ticks);
        Some((rss, cpu))
    }
}

/// Reads a small file into `buf` (reused) and returns its text.
fn read_into<'a>(path: &str, buf: &'a mut String) -> Option<&'a str> {
    use std::io::Read;
    std::fs::File::open(path).ok()?.read_to_string(buf).ok()?;
    Some(buf.as_str())
}

/// utime + stime (fields 14 and 15 of `/proc/self/stat`, in clock ticks). The command name
/// (field 2) is in parentheses and may hold spaces: fields are counted after its `)`.
fn stat_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11); // field 3 is the first after `)`
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The page size (`AT_PAGESZ`) and clock ticks per second (`AT_CLKTCK`) from the process's
/// auxiliary vector: what `sysconf` answers, without linking libc ourselves.
#[cfg(target_os = "linux")]
fn auxv_page_size_and_ticks() -> Option<(u64, u64)> {
    const AT_PAGESZ: u64 = 6;
    const AT_CLKTCK: u64 = 17;
    let auxv = std::fs::read("/proc/self/auxv").ok()?;
    let word = size_of::<usize>();
    let (mut page, mut ticks) = (None, None);
    for pair in auxv.chunks_exact(2 * word) {
        let get = |b: &[u8]| {
            let mut w = [0u8; 8];
            w[..word].copy_from_slice(b);
            u64::from_ne_bytes(w)
        };
        let (key, value) = (get(&pair[..word]), get(&pair[word..]));
        match key {
            AT_PAGESZ => page = Some(value),
            AT_CLKTCK => ticks = Some(value),
            0 => break,
            _ => {}
        }
    }
    Some((page?, ticks.unwrap_or(100)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_are_read_after_a_command_name_with_spaces_and_parens() {
        let stat = "1234 (my (odd) prog) S 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0 1";
        assert_eq!(stat_cpu_ticks(stat), Some(250 + 17));
        assert_eq!(stat_cpu_ticks("1 (x) S 1"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_a_page_size_an_rss_and_cpu_time() {
        let (page, ticks) = auxv_page_size_and_ticks().unwrap();
        assert!(page.is_power_of_two() && page >= 4096, "{page}");
        assert!(ticks > 0);
        let mut p = ProcessStats::open().unwrap();
        let (rss, cpu) = p.sample(0.1).unwrap();
        assert!(rss >= 1e6, "a test process uses over 1 MB: {rss}");
        assert_eq!(cpu, None, "no CPU percent before a second sample");
        let (_, cpu) = p.sample(0.1).unwrap();
        assert!(cpu.unwrap() >= 0.0);
    }
}
