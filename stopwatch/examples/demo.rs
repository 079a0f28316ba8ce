//! Records the demo workload (HTTP-like requests, db queries, templates, jobs, async tasks).
//!
//! `cargo run --release -p stopwatch --example demo -- DIR [SECONDS|forever] [THREADS]`

use std::process::ExitCode;
use std::time::Duration;

use stopwatch::demo::{DemoOptions, run};

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "target/framelog-demo".into());
    let duration = match args.next().as_deref() {
        None => Some(Duration::from_secs(10)),
        Some("forever") => None,
        Some(s) => match s.parse::<f64>() {
            Ok(secs) if secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
            _ => {
                eprintln!("demo: SECONDS must be a number or `forever`, got {s:?}");
                return ExitCode::FAILURE;
            }
        },
    };
    let threads = args.next().and_then(|t| t.parse().ok()).unwrap_or(4);
    eprintln!(
        "demo: recording into {dir} ({})",
        match duration {
            Some(d) => format!("{:.1} s", d.as_secs_f64()),
            None => "until interrupted".into(),
        }
    );
    match run(DemoOptions {
        dir: dir.into(),
        duration,
        threads,
        ..Default::default()
    }) {
        Ok(s) => {
            println!(
                "{{\"requests\":{},\"tasks\":{},\"jobs\":{},\"dropped\":{},\"written_bytes\":{}}}",
                s.requests, s.tasks, s.jobs, s.stats.dropped, s.stats.written_bytes
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("demo: {e}");
            ExitCode::FAILURE
        }
    }
}
