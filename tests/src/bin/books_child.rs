//! A child program for the books tests: records frames on scoped threads (as the `stress`
//! example does: `std::thread::scope` returns before a thread's thread-locals are gone) into a
//! log directory, a stream, or both, and prints each output's books.
//!
//! `books_child [--dir DIR] [--connect ADDR] [--mode block|drop] [--threads T] [--frames N]
//!  [--buffer-kib K] [--pace-us U] [--data-every M]`
//!
//! Prints `started` once the recorder is built, then, at the end, one JSON line:
//! `{"emitted":…,"dropped":…,"unsent":…,"dir":{"written":…,"dropped":…,"unsent":…}|null,
//! "stream":{…}|null}` (records: a frame is a start and an end). `--pace-us U` sleeps U µs
//! after every 32 frames of a thread, so a run lasts long enough for faults to happen in it.

use std::io::Write;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use stopwatch::{BufferingMode, Category, SinkStats, Stopwatch};

struct Args {
    dir: Option<String>,
    connect: Option<String>,
    mode: BufferingMode,
    threads: u32,
    frames: u64,
    buffer_kib: usize,
    pace_us: u64,
    data_every: u64,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        dir: None,
        connect: None,
        mode: BufferingMode::Block,
        threads: 2,
        frames: 1000,
        buffer_kib: 4096,
        pace_us: 0,
        data_every: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => a.dir = Some(val()?),
            "--connect" => a.connect = Some(val()?),
            "--threads" => a.threads = val()?.parse()?,
            "--frames" => a.frames = val()?.parse()?,
            "--buffer-kib" => a.buffer_kib = val()?.parse()?,
            "--pace-us" => a.pace_us = val()?.parse()?,
            "--data-every" => a.data_every = val()?.parse()?,
            "--mode" => {
                a.mode = match val()?.as_str() {
                    "block" => BufferingMode::Block,
                    "drop" => BufferingMode::Drop,
                    m => bail!("unknown mode {m}"),
                }
            }
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

fn books(b: Option<SinkStats>) -> serde_json::Value {
    b.map_or(
        serde_json::Value::Null,
        |b| serde_json::json!({"written": b.written, "dropped": b.dropped, "unsent": b.unsent}),
    )
}

fn main() -> Result<()> {
    let a = parse()?;
    let mut b = Stopwatch::builder()
        .mode(a.mode)
        .buffer_kib(a.buffer_kib)
        .on_error(|e| eprintln!("books_child: {e}"));
    if let Some(d) = &a.dir {
        b = b.dir(d);
    }
    if let Some(c) = &a.connect {
        b = b.connect(c.as_str());
    }
    let rec = b.build()?;
    println!("started");
    std::io::stdout().flush()?;
    std::thread::scope(|s| {
        for t in 0..a.threads {
            let rec = &rec;
            let a = &a;
            s.spawn(move || {
                for i in 0..a.frames {
                    let outer = rec.start_with("books/outer", Category::JOB);
                    if a.data_every > 0 && i.is_multiple_of(a.data_every) {
                        outer.data(&serde_json::json!({"t": t, "i": i}));
                    }
                    drop(rec.start_with("books/inner", Category::DATABASE));
                    drop(outer);
                    if a.pace_us > 0 && i % 32 == 31 {
                        std::thread::sleep(Duration::from_micros(a.pace_us));
                    }
                }
            });
        }
    });
    // Two frames (four records) per iteration.
    let emitted = 4 * a.frames * u64::from(a.threads);
    let s = rec.shutdown();
    println!(
        "{}",
        serde_json::json!({"emitted": emitted, "dropped": s.dropped, "unsent": s.unsent,
                           "dir": books(s.dir), "stream": books(s.stream)})
    );
    Ok(())
}
