//! Records the demo workload (HTTP-like requests, db queries, templates, jobs, async tasks).
//!
//! `cargo run --release --bin framelog-demo -- [DIR] [SECONDS|forever] [THREADS]
//!  [--connect HOST:PORT] [--suspend]` from the repository root (`cargo install
//! framelog-stopwatch --features demo` installs it).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use stopwatch::demo::{DemoOptions, run};

#[derive(Parser)]
#[command(about = "Record a demo server workload into a log directory or to a server")]
struct Args {
    /// DIR, SECONDS (or `forever`), THREADS, each optional: the log directory (default
    /// target/framelog-demo, none when connecting), how long to run (default 10), request
    /// threads (default 4). A first value that is a number or `forever` is SECONDS.
    #[arg(num_args = 0..=3, value_name = "DIR SECONDS THREADS")]
    positional: Vec<String>,
    #[command(flatten)]
    remote: stopwatch::stress::Remote,
    #[command(flatten)]
    segments: stopwatch::stress::Segments,
}

fn is_seconds(s: &str) -> bool {
    s == "forever" || s.parse::<f64>().is_ok()
}

/// Counts allocations per thread, so that every frame records what it allocated.
#[global_allocator]
static ALLOC: stopwatch::CountingAlloc<std::alloc::System> =
    stopwatch::CountingAlloc::new(std::alloc::System);

fn main() -> ExitCode {
    let a = Args::parse();
    let mut pos = a.positional.iter().map(String::as_str).peekable();
    let dir_arg = pos.next_if(|p| !is_seconds(p)).map(PathBuf::from);
    let seconds = pos.next().unwrap_or("10");
    let threads = match pos.next().map(str::parse::<usize>) {
        None => 4,
        Some(Ok(t)) if t > 0 => t,
        Some(_) => {
            eprintln!("demo: THREADS must be a positive number");
            return ExitCode::FAILURE;
        }
    };
    let duration = match seconds {
        "forever" => None,
        s => match s.parse::<f64>() {
            Ok(secs) if secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
            _ => {
                eprintln!("demo: SECONDS must be a number or `forever`, got {s:?}");
                return ExitCode::FAILURE;
            }
        },
    };
    let connecting = a.remote.connect.is_some() || std::env::var_os("FRAMELOG_CONNECT").is_some();
    let dir = dir_arg.or_else(|| (!connecting).then(|| PathBuf::from("target/framelog-demo")));
    let mut targets: Vec<String> = Vec::new();
    targets.extend(dir.as_ref().map(|d| format!("into {}", d.display())));
    targets.extend(a.remote.connect.as_ref().map(|c| format!("to {c}")));
    eprintln!(
        "demo: recording {} ({})",
        targets.join(" and "),
        match duration {
            Some(d) => format!("{:.1} s", d.as_secs_f64()),
            None => "until interrupted".into(),
        }
    );
    match run(DemoOptions {
        dir,
        connect: a.remote.connect,
        suspend: a.remote.suspend,
        duration,
        threads,
        segments: a.segments,
        ..Default::default()
    }) {
        Ok(s) => {
            // The log is written: a reader that went away (`| head`) loses only this line.
            // Each output's books: written + dropped + unsent = records recorded.
            let books = |b: Option<stopwatch::SinkStats>| {
                b.map_or("null".to_owned(), |b| {
                    format!(
                        "{{\"written\":{},\"dropped\":{},\"unsent\":{}}}",
                        b.written, b.dropped, b.unsent
                    )
                })
            };
            let _ = writeln!(
                std::io::stdout(),
                "{{\"requests\":{},\"tasks\":{},\"jobs\":{},\"dropped\":{},\"unsent\":{},\"written_bytes\":{},\"dir\":{},\"stream\":{}}}",
                s.requests,
                s.tasks,
                s.jobs,
                s.stats.dropped,
                s.stats.unsent,
                s.stats.written_bytes,
                books(s.stats.dir),
                books(s.stats.stream)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}
