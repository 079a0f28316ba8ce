//! A small tokio service instrumented only with `tracing` (`#[instrument]`, events, a span
//! field recorded later), recorded by `TracingLayer` into a log directory.
//!
//! `cargo run --release -p framelog-stopwatch --features tracing --example traced -- [DIR] [REQUESTS]`
//! then `framelog stats DIR`, `framelog export DIR -o trace.json` or `debugger-gui DIR`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use stopwatch::{Stopwatch, TracingLayer};
use tracing::{info, instrument};
use tracing_subscriber::prelude::*;

#[instrument]
async fn handle(id: u32) {
    let user = load_user(id).await;
    render(&user);
    info!(bytes = 512 + id % 100, "responded");
}

#[instrument(fields(category = "database", rows = tracing::field::Empty))]
async fn load_user(id: u32) -> String {
    tokio::time::sleep(Duration::from_micros(200 + u64::from(id % 7) * 100)).await;
    tracing::Span::current().record("rows", 1);
    format!("user-{id}")
}

#[instrument(skip_all, fields(template = "user.html"))]
fn render(user: &str) {
    std::hint::black_box(user.repeat(64));
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .unwrap_or_else(|| "target/framelog-traced".into()),
    );
    let requests: u32 = match args.next().map(|n| n.parse()) {
        None => 2_000,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("error: REQUESTS must be a whole number");
            return ExitCode::from(2);
        }
    };
    let sw = match Stopwatch::builder().dir(&dir).install() {
        Ok(sw) => sw,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    tracing_subscriber::registry()
        .with(TracingLayer::global())
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("a tokio runtime");
    rt.block_on(async {
        let tasks: Vec<_> = (0..requests).map(|id| tokio::spawn(handle(id))).collect();
        for t in tasks {
            let _ = t.await;
        }
    });
    drop(rt);
    let stats = sw.finish();
    println!("recorded {requests} traced requests into {}", dir.display());
    // Each output's books (a stream too, with FRAMELOG_CONNECT): written + dropped + unsent
    // = records recorded.
    let books = |b: Option<stopwatch::SinkStats>| {
        b.map_or("null".to_owned(), |b| {
            format!(
                "{{\"written\":{},\"dropped\":{},\"unsent\":{}}}",
                b.written, b.dropped, b.unsent
            )
        })
    };
    println!(
        "{{\"dropped\":{},\"unsent\":{},\"dir\":{},\"stream\":{}}}",
        stats.dropped,
        stats.unsent,
        books(stats.dir),
        books(stats.stream)
    );
    ExitCode::SUCCESS
}
