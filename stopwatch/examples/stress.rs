//! Records N frames per thread as fast as possible and prints one JSON line.
//!
//! `cargo run --release -p framelog-stopwatch --features demo --example stress -- --dir DIR
//!  --threads T --frames N --mode drop|block --buffer-kib K --data-every M --depth D
//!  [--connect HOST:PORT [--suspend]]`

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use stopwatch::BufferingMode;
use stopwatch::stress::{StressOptions, run};

#[derive(Clone, Copy, ValueEnum)]
enum Mode {
    Drop,
    Block,
}

#[derive(Parser)]
#[command(about = "Record frames as fast as possible; print counts as one JSON line")]
struct Args {
    /// Log directory (not needed when connecting, with --connect or FRAMELOG_CONNECT).
    #[arg(long)]
    dir: Option<PathBuf>,
    #[command(flatten)]
    remote: stopwatch::stress::Remote,
    #[command(flatten)]
    segments: stopwatch::stress::Segments,
    /// Recording threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Frames per thread.
    #[arg(long, default_value_t = 100_000)]
    frames: u64,
    /// Buffering mode.
    #[arg(long, value_enum, default_value = "drop")]
    mode: Mode,
    /// Buffer pool size in KiB.
    #[arg(long, default_value_t = 4096)]
    buffer_kib: usize,
    /// Attach data to every M-th frame (0: never).
    #[arg(long, default_value_t = 0)]
    data_every: u64,
    /// Nesting depth.
    #[arg(long, default_value_t = 1)]
    depth: u32,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let connecting = a.remote.connect.is_some()
        || std::env::var("FRAMELOG_CONNECT").is_ok_and(|v| !v.trim().is_empty());
    if a.dir.is_none() && !connecting {
        eprintln!("stress: give --dir DIR, --connect HOST:PORT, or FRAMELOG_CONNECT");
        return ExitCode::FAILURE;
    }
    let opts = StressOptions {
        dir: a.dir,
        connect: a.remote.connect,
        suspend: a.remote.suspend,
        threads: a.threads,
        frames: a.frames,
        mode: match a.mode {
            Mode::Drop => BufferingMode::Drop,
            Mode::Block => BufferingMode::Block,
        },
        buffer_kib: a.buffer_kib,
        data_every: a.data_every,
        depth: a.depth,
        segments: a.segments,
    };
    match run(&opts) {
        Ok(report) => match serde_json::to_string(&report) {
            Ok(line) => {
                // The log is written: a reader that went away (`| head`) loses only this line.
                let _ = writeln!(std::io::stdout(), "{line}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("stress: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("stress: {e}");
            ExitCode::FAILURE
        }
    }
}
