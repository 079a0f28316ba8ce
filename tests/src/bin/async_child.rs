//! A child process recording logs with async work, for the export tests:
//!
//! - `async_child demo DIR SECONDS|forever|stdin`: stopwatch's demo workload (requests, db
//!   queries, async tasks that move threads across `.await`, jobs); `stdin` runs it until
//!   its stdin closes, then ends it cleanly;
//! - `async_child traced DIR REQUESTS`: a tokio service instrumented only with `tracing`,
//!   recorded by `TracingLayer` (three spans a request, fields, an event with the HTTP status;
//!   every 7th request fails with status 503 and every 11th records an `error` field).
//!
//! Prints `started` once recording runs (after the first frames), `done` at the end.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use stopwatch::demo::{DemoOptions, run};
use stopwatch::{Stopwatch, TracingLayer};
use tracing::{info, instrument};
use tracing_subscriber::prelude::*;

#[instrument]
async fn handle(id: u32) {
    let user = load_user(id).await;
    render(&user);
    let status = if id % 7 == 3 { 503 } else { 200 };
    info!(status, bytes = 512 + id % 100, "responded");
}

#[instrument(fields(category = "database", rows = tracing::field::Empty, error = tracing::field::Empty))]
async fn load_user(id: u32) -> String {
    tokio::time::sleep(Duration::from_micros(100 + u64::from(id % 5) * 100)).await;
    tracing::Span::current().record("rows", 1);
    if id % 11 == 5 {
        tracing::Span::current().record("error", "connection reset");
    }
    format!("user-{id}")
}

#[instrument(skip_all, fields(template = "user.html"))]
fn render(user: &str) {
    std::hint::black_box(user.repeat(16));
}

fn traced(dir: PathBuf, requests: u32) -> Result<(), String> {
    let sw = Stopwatch::builder()
        .dir(&dir)
        .install()
        .map_err(|e| e.to_string())?;
    tracing_subscriber::registry()
        .with(TracingLayer::global())
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .map_err(|e| e.to_string())?;
    println!("started");
    rt.block_on(async {
        let tasks: Vec<_> = (0..requests).map(|id| tokio::spawn(handle(id))).collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    drop(rt);
    drop(sw);
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["demo", dir, secs] => {
            let duration = match secs {
                "forever" | "stdin" => None,
                s => s.parse::<f64>().ok().map(Duration::from_secs_f64),
            };
            let opts = DemoOptions {
                dir: Some(PathBuf::from(dir)),
                duration,
                threads: 2,
                requests_per_sec: 400,
                ..Default::default()
            };
            if secs == "stdin" {
                let stop = opts.stop.clone();
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
                    stop.store(true, std::sync::atomic::Ordering::Relaxed);
                });
            }
            println!("started");
            let _ = std::io::stdout().flush();
            run(opts).map(|_| ()).map_err(|e| e.to_string())
        }
        ["traced", dir, n] => match n.parse() {
            Ok(n) => traced(PathBuf::from(dir), n),
            Err(_) => Err("REQUESTS must be a number".into()),
        },
        _ => Err("usage: async_child demo DIR SECONDS|forever|stdin | traced DIR REQUESTS".into()),
    };
    match result {
        Ok(()) => {
            println!("done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("async_child: {e}");
            ExitCode::FAILURE
        }
    }
}
