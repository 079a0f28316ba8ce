//! A child process for multi-process and crash tests: appends frames (and data) to a log
//! from several threads, printing `ok WORKER FIRST COUNT` after each batch is written.

use std::io::Write;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use formats::FrameKey;
use framelog::{DataBatch, LogWriter};
use framelog_tests::{encode_frames, expected_data};

struct Args {
    dir: String,
    threads: u32,
    frames: u64,
    batch: u32,
    data_every: u32,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        dir: String::new(),
        threads: 1,
        frames: 0,
        batch: 1000,
        data_every: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => a.dir = val()?,
            "--threads" => a.threads = val()?.parse()?,
            // 0 means "until killed".
            "--frames" => a.frames = val()?.parse()?,
            "--batch" => a.batch = val()?.parse()?,
            "--data-every" => a.data_every = val()?.parse()?,
            other => bail!("unknown flag {other}"),
        }
    }
    if a.dir.is_empty() {
        bail!("--dir is required");
    }
    Ok(a)
}

fn main() -> Result<()> {
    let args = Arc::new(parse()?);
    let writer = Arc::new(LogWriter::open(&args.dir)?);
    let handles: Vec<_> = (0..args.threads)
        .map(|t| {
            let (args, writer) = (args.clone(), writer.clone());
            std::thread::spawn(move || -> Result<()> {
                let label = format!("child/thread-{t}");
                let mut written = 0u64;
                let mut buf = Vec::new();
                let mut data = DataBatch::new();
                while args.frames == 0 || written < args.frames {
                    let count = if args.frames == 0 {
                        args.batch
                    } else {
                        (args.frames - written).min(u64::from(args.batch)) as u32
                    };
                    let first = writer.reserve_ids(count)?;
                    buf.clear();
                    encode_frames(&mut buf, writer.worker(), first, count, &label);
                    data.clear();
                    if args.data_every > 0 {
                        for i in (0..count)
                            .filter(|i| first.wrapping_add(*i).is_multiple_of(args.data_every))
                        {
                            let key = FrameKey::new(writer.worker(), first.wrapping_add(i));
                            data.push(key, &formats::to_document(&expected_data(key))?);
                        }
                    }
                    writer.append_data(&data)?;
                    writer.append_frames(&buf)?;
                    // Reported only once both appends returned.
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ok {} {} {}", writer.worker(), first, count)?;
                    out.flush()?;
                    written += u64::from(count);
                }
                Ok(())
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer thread panicked")?;
    }
    Ok(())
}
