//! A child process recording logs with async work, for the export tests:
//!
//! - `async_child demo DIR SECONDS|forever|stdin`: stopwatch's demo workload (requests, db
//!   queries, async tasks that move threads across `.await`, jobs); `stdin` runs it until
//!   its stdin closes, then ends it cleanly;
//! - `async_child traced DIR REQUESTS`: a tokio service instrumented only with `tracing`,
//!   recorded by `TracingLayer` (three spans a request, fields, an event with the HTTP status;
//!   every 7th request fails with status 503 and every 11th records an `error` field).
//!
//! - `async_child service DIR REQUESTS TRUTH`: a tokio multi-thread service with
//!   `#[instrument]` spans that await between their children (`request` → `get_user` →
//!   `load_user`; `request` → `list_orders` → `db_query`, `render_orders`; a spawned `audit`
//!   task open beside them), recorded by `TracingLayer`. Every span has a field `n` unique in
//!   the run; a second layer writes to TRUTH, per span, `n parent_n` (`-` for a root) as
//!   `tracing` resolved its parent.
//!
//! Prints `started` once recording runs (after the first frames), `done` at the end.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use stopwatch::demo::{DemoOptions, run};

// As the demo example does: every frame records what its code allocated.
#[global_allocator]
static ALLOC: stopwatch::CountingAlloc<std::alloc::System> =
    stopwatch::CountingAlloc::new(std::alloc::System);

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

/// The `service` mode: spans numbered by `n`, each with the parent `tracing` gave it.
mod service {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use stopwatch::{Stopwatch, TracingLayer};
    use tracing::instrument;
    use tracing::span::{Attributes, Id};
    use tracing_subscriber::layer::Context;
    use tracing_subscriber::prelude::*;
    use tracing_subscriber::registry::LookupSpan;

    static N: AtomicU64 = AtomicU64::new(1);

    fn n() -> u64 {
        N.fetch_add(1, Ordering::Relaxed)
    }

    #[instrument(fields(n = n()))]
    async fn request(id: u32) {
        // A task of the request open beside its other children, on any thread.
        let audit = tokio::spawn(audit(id));
        get_user(id).await;
        list_orders(id).await;
        let _ = audit.await;
    }

    #[instrument(fields(n = n()))]
    async fn get_user(id: u32) {
        tokio::task::yield_now().await;
        load_user(id).await;
    }

    #[instrument(fields(n = n(), category = "database"))]
    async fn load_user(id: u32) {
        tokio::time::sleep(Duration::from_micros(50 + u64::from(id % 5) * 50)).await;
    }

    #[instrument(fields(n = n()))]
    async fn list_orders(id: u32) {
        tokio::task::yield_now().await;
        db_query(id).await;
        tokio::task::yield_now().await;
        render_orders(id);
    }

    #[instrument(fields(n = n(), category = "database"))]
    async fn db_query(id: u32) {
        tokio::time::sleep(Duration::from_micros(50 + u64::from(id % 3) * 70)).await;
    }

    #[instrument(fields(n = n(), category = "template"))]
    fn render_orders(id: u32) {
        std::hint::black_box(format!("orders-{id}").repeat(32));
    }

    #[instrument(fields(n = n()))]
    async fn audit(id: u32) {
        tokio::time::sleep(Duration::from_micros(30 + u64::from(id % 4) * 40)).await;
    }

    /// A span's `n`.
    struct SpanN(u64);

    struct FindN(Option<u64>);

    impl tracing::field::Visit for FindN {
        fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
            if field.name() == "n" {
                self.0 = Some(value);
            }
        }
        fn record_debug(&mut self, _: &tracing::field::Field, _: &dyn std::fmt::Debug) {}
    }

    /// Each span's `n` and its parent's.
    type Pairs = Vec<(u64, Option<u64>)>;

    /// Records `n parent_n` for every span, as `tracing` resolved its parent.
    #[derive(Clone, Default)]
    struct Truth(Arc<Mutex<Pairs>>);

    impl<S> tracing_subscriber::Layer<S> for Truth
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
            let mut find = FindN(None);
            attrs.record(&mut find);
            let (Some(n), Some(span)) = (find.0, ctx.span(id)) else {
                return;
            };
            let parent = span
                .parent()
                .and_then(|p| p.extensions().get::<SpanN>().map(|s| s.0));
            span.extensions_mut().insert(SpanN(n));
            self.0.lock().unwrap().push((n, parent));
        }
    }

    pub fn run(dir: PathBuf, requests: u32, truth: PathBuf) -> Result<(), String> {
        let sw = Stopwatch::builder()
            .dir(&dir)
            .install()
            .map_err(|e| e.to_string())?;
        let spans = Truth::default();
        tracing_subscriber::registry()
            .with(TracingLayer::global())
            .with(spans.clone())
            .init();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_time()
            .build()
            .map_err(|e| e.to_string())?;
        println!("started");
        rt.block_on(async {
            // Requests arrive 16 at a time.
            for wave in (0..requests).collect::<Vec<_>>().chunks(16) {
                let tasks: Vec<_> = wave.iter().map(|&id| tokio::spawn(request(id))).collect();
                for t in tasks {
                    let _ = t.await;
                }
            }
        });
        drop(rt);
        drop(sw);
        let text: String = spans
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(n, p)| match p {
                Some(p) => format!("{n} {p}\n"),
                None => format!("{n} -\n"),
            })
            .collect();
        std::fs::write(&truth, text).map_err(|e| format!("{}: {e}", truth.display()))
    }
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
        ["service", dir, n, truth] => match n.parse() {
            Ok(n) => service::run(PathBuf::from(dir), n, PathBuf::from(truth)),
            Err(_) => Err("REQUESTS must be a number".into()),
        },
        _ => Err(
            "usage: async_child demo DIR SECONDS|forever|stdin | traced DIR REQUESTS | service DIR REQUESTS TRUTH"
                .into(),
        ),
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
