//! A child program for remote-session tests: records frames with `stopwatch` and streams
//! them to a server (`--connect`, or `FRAMELOG_CONNECT` in its environment).
//!
//! `session_child [--connect ADDR] [--suspend] [--dir DIR] [--threads T] [--frames N]
//!  [--data-every M] [--mode block|drop] [--old]`
//!
//! `--frames 0` records until stdin closes. Prints `started` once `install()` returned, then
//! one JSON line of counters at the end. Every M-th frame carries `{"t": T, "i": I}`.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use stopwatch::{BufferingMode, Category, Stopwatch};

struct Args {
    connect: Option<String>,
    suspend: bool,
    dir: Option<String>,
    threads: u32,
    frames: u64,
    data_every: u64,
    mode: BufferingMode,
    old: bool,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        connect: None,
        suspend: false,
        dir: None,
        threads: 2,
        frames: 1000,
        data_every: 0,
        mode: BufferingMode::Block,
        old: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--connect" => a.connect = Some(val()?),
            "--suspend" => a.suspend = true,
            "--dir" => a.dir = Some(val()?),
            "--threads" => a.threads = val()?.parse()?,
            "--frames" => a.frames = val()?.parse()?,
            "--data-every" => a.data_every = val()?.parse()?,
            "--mode" => {
                a.mode = match val()?.as_str() {
                    "block" => BufferingMode::Block,
                    "drop" => BufferingMode::Drop,
                    m => bail!("unknown mode {m}"),
                }
            }
            "--old" => a.old = true,
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

fn main() -> Result<()> {
    let a = parse()?;
    let mut b = Stopwatch::builder()
        .mode(a.mode)
        .on_error(|e| eprintln!("session_child: {e}"));
    if let Some(d) = &a.dir {
        b = b.dir(d);
    }
    if let Some(c) = &a.connect {
        b = b.connect(c.as_str());
    }
    if a.suspend {
        b = b.suspend(Duration::from_secs(60));
    }
    if a.old {
        b = b.start_session_version(1);
    }
    let guard = b.install()?;
    println!("started");
    std::io::stdout().flush()?;

    let stop = Arc::new(AtomicBool::new(false));
    if a.frames == 0 {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
            stop.store(true, Ordering::Relaxed);
        });
    }
    let threads: Vec<_> = (0..a.threads)
        .map(|t| {
            let stop = stop.clone();
            let (frames, data_every) = (a.frames, a.data_every);
            std::thread::spawn(move || {
                let mut i = 0u64;
                while (frames == 0 && !stop.load(Ordering::Relaxed)) || (frames > 0 && i < frames) {
                    let f = Stopwatch::start_with("child/work", Category::JOB);
                    if data_every > 0 && i.is_multiple_of(data_every) {
                        f.data(&serde_json::json!({"t": t, "i": i}));
                    }
                    drop(f);
                    i += 1;
                    if frames == 0 && i.is_multiple_of(16) {
                        // Forever mode: a steady stream (~10k frames/s a thread), not a flood.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                i
            })
        })
        .collect();
    let mut frames = 0;
    for t in threads {
        frames += t.join().expect("recording thread");
    }
    // The final counters, after everything was sent (or counted as not).
    let s = guard.finish();
    println!(
        "{}",
        serde_json::json!({"frames": frames, "dropped": s.dropped, "unsent": s.unsent,
                           "dropped_data": s.dropped_data})
    );
    Ok(())
}
