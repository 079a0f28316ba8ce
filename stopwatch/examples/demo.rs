//! Records the demo workload (HTTP-like requests, db queries, templates, jobs, async tasks).
//!
//! `cargo run --release -p stopwatch --features demo --example demo -- [DIR] [SECONDS|forever]
//!  [THREADS] [--connect HOST:PORT] [--suspend]`

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use stopwatch::demo::{DemoOptions, run};

#[derive(Parser)]
#[command(about = "Record a demo server workload into a log directory or to a server")]
struct Args {
    /// Log directory (default target/framelog-demo unless connecting).
    dir: Option<PathBuf>,
    /// How long to run: seconds, or `forever`.
    #[arg(default_value = "10")]
    seconds: String,
    /// Request-handling threads.
    #[arg(default_value_t = 4)]
    threads: usize,
    /// Stream to `framelog serve` or the debugger at HOST:PORT (FRAMELOG_CONNECT wins).
    #[arg(long)]
    connect: Option<String>,
    /// Wait until the server resumes this program (at most 30 s) before running.
    #[arg(long)]
    suspend: bool,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let duration = match a.seconds.as_str() {
        "forever" => None,
        s => match s.parse::<f64>() {
            Ok(secs) if secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
            _ => {
                eprintln!("demo: SECONDS must be a number or `forever`, got {s:?}");
                return ExitCode::FAILURE;
            }
        },
    };
    let connecting = a.connect.is_some() || std::env::var_os("FRAMELOG_CONNECT").is_some();
    let dir = a
        .dir
        .or_else(|| (!connecting).then(|| PathBuf::from("target/framelog-demo")));
    eprintln!(
        "demo: recording {}{} ({})",
        dir.as_ref()
            .map(|d| format!("into {}", d.display()))
            .unwrap_or_default(),
        a.connect
            .as_ref()
            .map(|c| format!(" to {c}"))
            .unwrap_or_default(),
        match duration {
            Some(d) => format!("{:.1} s", d.as_secs_f64()),
            None => "until interrupted".into(),
        }
    );
    match run(DemoOptions {
        dir,
        connect: a.connect,
        suspend: a.suspend,
        duration,
        threads: a.threads,
        ..Default::default()
    }) {
        Ok(s) => {
            println!(
                "{{\"requests\":{},\"tasks\":{},\"jobs\":{},\"dropped\":{},\"unsent\":{},\"written_bytes\":{}}}",
                s.requests, s.tasks, s.jobs, s.stats.dropped, s.stats.unsent, s.stats.written_bytes
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}
