//! A realistic demo workload for the README and the debugger (`debugger-gui --demo` calls
//! [`run`] in-process): an HTTP-like server whose requests (one context each) run on a thread
//! pool and on async tasks, with database queries (`"User: Select"`-style labels, SQL and
//! parameters as frame data), template rendering, e-mails and background jobs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{Category, Error, FutureExt, Recorder, Stats, Stopwatch};

/// What the demo records.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Log directory (optional when connecting).
    pub dir: Option<PathBuf>,
    /// Stream to this server (`FRAMELOG_CONNECT` syntax); `FRAMELOG_CONNECT` in the
    /// environment wins.
    pub connect: Option<String>,
    /// Wait until the server resumes the program (at most 30 s) before running.
    pub suspend: bool,
    /// How long to run; `None` runs until `stop` is set.
    pub duration: Option<Duration>,
    /// Request-handling threads.
    pub threads: usize,
    /// Requests per second the load generator aims for.
    pub requests_per_sec: u32,
    /// Set to stop a running demo early (or a `duration: None` one).
    pub stop: Arc<AtomicBool>,
    /// Where the log's segments are sealed and how much of it is kept.
    pub segments: crate::stress::Segments,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            dir: Some(PathBuf::from("target/framelog-demo")),
            connect: None,
            suspend: false,
            duration: Some(Duration::from_secs(10)),
            threads: 4,
            requests_per_sec: 200,
            stop: Arc::new(AtomicBool::new(false)),
            segments: Default::default(),
        }
    }
}

/// What the demo did.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoSummary {
    /// Requests handled.
    pub requests: u64,
    /// Async tasks completed.
    pub tasks: u64,
    /// Background jobs run.
    pub jobs: u64,
    /// The recorder's final counters.
    pub stats: Stats,
}

/// A tiny generator for the demo's randomness (no dependency needed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Sleeps between `lo` and `hi` microseconds (simulated work).
    fn work(&mut self, lo: u64, hi: u64) {
        std::thread::sleep(Duration::from_micros(lo + self.below(hi - lo + 1)));
    }
}

#[derive(Clone, Copy)]
enum Route {
    ShowUser,
    ListOrders,
    CreateOrder,
    Dashboard,
}

const ROUTES: [(Route, &str); 4] = [
    (Route::ShowUser, "GET /users/:id"),
    (Route::ListOrders, "GET /orders"),
    (Route::CreateOrder, "POST /orders"),
    (Route::Dashboard, "GET /dashboard"),
];

fn query(rec: &Recorder, rng: &mut Rng, label: &'static str, sql: &str, params: serde_json::Value) {
    let f = rec.start_with(label, Category::DATABASE);
    f.data(&json!({ "sql": sql, "params": params }));
    rng.work(100, 1500);
    if rng.below(40) == 0 {
        // A message in the query's frame, with fields.
        rec.message_with(crate::Level::WARN, "slow query", &json!({ "query": label }));
    }
    if rng.below(4) == 0 {
        f.data(&json!({ "rows": rng.below(50) }));
    }
}

fn render(rec: &Recorder, rng: &mut Rng, template: &'static str) {
    let f = rec.start_with(template, Category::TEMPLATE);
    f.data(&json!({ "template": template, "cache": rng.below(2) == 0 }));
    {
        let _p = rec.start_with("template: partials/header.html", Category::TEMPLATE);
        rng.work(50, 300);
    }
    rng.work(100, 800);
}

fn handle_request(
    rec: &Recorder,
    rng: &mut Rng,
    route: Route,
    label: &'static str,
    n: u64,
) -> bool {
    let req = rec.start_with(label, Category::HTTP);
    let id = 1 + rng.below(10_000);
    req.data(&json!({ "method": &label[..label.find(' ').unwrap_or(0)], "path": label.replace(":id", &id.to_string()), "request": n }));
    {
        let _auth = rec.start("middleware: authenticate");
        query(
            rec,
            rng,
            "Session: Select",
            "SELECT * FROM session WHERE token = $1",
            json!(["f3a9…"]),
        );
    }
    let mut spawn_async = false;
    match route {
        Route::ShowUser => {
            query(
                rec,
                rng,
                "User: Select",
                "SELECT * FROM user WHERE id = $1",
                json!([id]),
            );
            query(
                rec,
                rng,
                "Group: Select",
                "SELECT g.* FROM \"group\" g JOIN user_group ug ON ug.group_id = g.id WHERE ug.user_id = $1",
                json!([id]),
            );
            render(rec, rng, "template: users/show.html");
        }
        Route::ListOrders => {
            let _lock = rec.start_with("lock: orders cache", Category::LOCK);
            rng.work(10, 200);
            query(
                rec,
                rng,
                "Order: Select",
                "SELECT * FROM \"order\" WHERE user_id = $1 ORDER BY created DESC LIMIT $2",
                json!([id, 50]),
            );
            render(rec, rng, "template: orders/index.html");
        }
        Route::CreateOrder => {
            let total = rng.below(50_000) as f64 / 100.0;
            query(
                rec,
                rng,
                "Order: Insert",
                "INSERT INTO \"order\" (user_id, total) VALUES ($1, $2) RETURNING id",
                json!([id, total]),
            );
            {
                let _e = rec.start_with("event: order.created", Category::EVENT);
                rng.work(20, 200);
            }
            // Confirmation e-mail and stock update continue asynchronously, same context.
            spawn_async = true;
        }
        Route::Dashboard => {
            for table in ["User: Count", "Order: Sum", "Product: Select"] {
                query(
                    rec,
                    rng,
                    table,
                    "SELECT count(*), sum(total) FROM \"order\" WHERE created > now() - interval '1 day'",
                    json!([]),
                );
            }
            render(rec, rng, "template: dashboard.html");
        }
    }
    let status = if rng.below(50) == 0 { 500 } else { 200 };
    if status == 500 {
        rec.message_with(
            crate::Level::ERROR,
            "request failed",
            &json!({ "status": status, "path": label }),
        );
    } else if spawn_async {
        rec.message("order created");
    }
    req.data(&json!({ "status": status }));
    spawn_async
}

async fn after_order(rec: Arc<Recorder>, seed: u64) {
    let mut rng = Rng(seed | 1);
    {
        let f = rec.start_with("Product: Update stock", Category::DATABASE);
        f.data(&json!({ "sql": "UPDATE product SET stock = stock - $1 WHERE id = $2", "params": [1, rng.below(500)] }));
    }
    if rng.below(25) == 0 {
        // A handler's mistake users meet: synchronous work inside async code, which holds
        // its runtime worker (a slow poll) and delays every task queued behind it.
        let _f = rec.start_with("search: reindex (blocking)", Category::FUNCTION);
        std::thread::sleep(Duration::from_millis(3 + rng.below(5)));
    }
    tokio::time::sleep(Duration::from_millis(2 + rng.below(15))).await;
    // Built in a block so the (thread-bound) frame guard is not alive across the await.
    let send_mail = {
        let mail = rec.start_with("email: order confirmation", Category::EMAIL);
        mail.data(&json!({ "to": "customer@example.com", "template": "order_confirmation" }));
        let rec2 = rec.clone();
        let wait = Duration::from_millis(5 + rng.below(30));
        async move {
            tokio::time::sleep(wait).await;
            let _r = rec2.start_with("template: emails/order.html", Category::TEMPLATE);
        }
        .in_frame(mail)
    };
    send_mail.await;
}

fn job(rec: &Recorder, rng: &mut Rng, n: u64) {
    let (label, sql) = match n % 3 {
        0 => (
            "job: cleanup sessions",
            "DELETE FROM session WHERE expires < now()",
        ),
        1 => (
            "job: send newsletters",
            "SELECT id, email FROM user WHERE newsletter = true LIMIT $1",
        ),
        _ => (
            "job: rebuild search index",
            "SELECT id, name FROM product WHERE updated > $1",
        ),
    };
    let j = rec.start_with(label, Category::JOB);
    j.data(&json!({ "run": n }));
    for _ in 0..1 + rng.below(4) {
        query(rec, rng, "Job: Select", sql, json!([100]));
        rng.work(500, 3000);
    }
}

/// Runs the demo workload (into `opts.dir` and/or to `opts.connect`) until `opts.duration` passes or `opts.stop` is set.
pub fn run(opts: DemoOptions) -> Result<DemoSummary, Error> {
    let builder = crate::stress::with_destination(
        opts.segments.apply(Stopwatch::builder()),
        opts.dir.as_deref(),
        opts.connect.as_deref(),
        opts.suspend,
    );
    // The recorder's health and the process's RSS and CPU as plots beside the demo's own
    // queue depth (the `framelog-demo` program installs `CountingAlloc`: frames record allocations).
    let rec = Arc::new(builder.plot_health(true).plot_process(true).build()?);
    let depth = rec.series("queue depth");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("demo-async")
        .enable_time()
        .build()
        .map_err(Error::Spawn)?;
    let deadline = opts.duration.map(|d| Instant::now() + d);
    let stop = opts.stop.clone();
    let done = || stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d);
    let (tx, rx) = crossbeam_channel::bounded::<(usize, u64)>(1024);
    let (requests, tasks, jobs) = (
        AtomicU64::new(0),
        Arc::new(AtomicU64::new(0)),
        AtomicU64::new(0),
    );

    std::thread::scope(|s| -> Result<(), Error> {
        for w in 0..opts.threads.max(1) {
            let (rx, rec, requests, tasks) = (rx.clone(), rec.clone(), &requests, tasks.clone());
            let rt = runtime.handle().clone();
            std::thread::Builder::new()
                .name(format!("http-worker-{w}"))
                .spawn_scoped(s, move || {
                    let mut rng = Rng(0x9E37_79B9 ^ ((w as u64 + 1) * 0x1000_0001));
                    for (route, n) in rx.iter() {
                        let (r, label) = ROUTES[route];
                        if handle_request(&rec, &mut rng, r, label, n) {
                            // Continue the request's context in an async task.
                            let ctx_frame = rec.start_with("task: after order", Category::WORKFLOW);
                            let (rec2, tasks) = (rec.clone(), tasks.clone());
                            let seed = rng.next();
                            rt.spawn(
                                async move {
                                    after_order(rec2, seed).await;
                                    tasks.fetch_add(1, Ordering::Relaxed);
                                }
                                .in_frame(ctx_frame),
                            );
                        }
                        requests.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .map_err(Error::Spawn)?;
        }
        drop(rx);
        {
            let (rec, jobs) = (rec.clone(), &jobs);
            let done = &done;
            std::thread::Builder::new()
                .name("job-runner".into())
                .spawn_scoped(s, move || {
                    let mut rng = Rng(0xDEAD_BEEF);
                    let mut n = 0;
                    while !done() {
                        // Outside any frame: a message on the job runner's lane.
                        rec.message(&format!("job {n} scheduled"));
                        job(&rec, &mut rng, n);
                        n += 1;
                        jobs.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(200 + rng.below(600)));
                    }
                })
                .map_err(Error::Spawn)?;
        }
        // The load generator: bursts around the target rate.
        let mut rng = Rng(0x1234_5678);
        let mut n = 0u64;
        let per_tick = (opts.requests_per_sec.max(1) as u64).div_ceil(100);
        while !done() {
            for _ in 0..1 + rng.below(per_tick * 2) {
                let route = match rng.below(10) {
                    0..=3 => 0,
                    4..=6 => 1,
                    7..=8 => 2,
                    _ => 3,
                };
                if tx.try_send((route, n)).is_ok() {
                    n += 1;
                }
            }
            // Requests waiting for a worker, every tick.
            depth.set(tx.len() as f64);
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(tx);
        Ok(())
    })?;
    // Let the async tasks finish before the recorder stops.
    runtime.shutdown_timeout(Duration::from_secs(2));
    let rec = Arc::into_inner(rec);
    let stats = rec.map(Recorder::shutdown).unwrap_or_default();
    Ok(DemoSummary {
        requests: requests.load(Ordering::Relaxed),
        tasks: tasks.load(Ordering::Relaxed),
        jobs: jobs.load(Ordering::Relaxed),
        stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "writes a real log directory (flock) and runs for seconds"
    )]
    fn the_demo_records_requests_queries_templates_jobs_and_async_tasks() {
        let dir = tempfile::tempdir().unwrap();
        let summary = run(DemoOptions {
            dir: Some(dir.path().to_path_buf()),
            duration: Some(Duration::from_millis(1200)),
            threads: 3,
            requests_per_sec: 300,
            ..Default::default()
        })
        .unwrap();
        assert!(summary.requests > 50, "{summary:?}");
        assert!(summary.jobs >= 1);
        assert!(summary.tasks >= 1);
        assert_eq!(summary.stats.dropped, 0);
        let mut reader = framelog::LogReader::open(dir.path()).unwrap();
        let mut cats = std::collections::HashSet::new();
        let (mut starts, mut depth, mut in_frames, mut outside) = (0, 0, 0, 0);
        reader
            .read_available(|_, r| match r {
                formats::Record::Start(s) => {
                    cats.insert(s.category.0);
                    starts += 1;
                }
                formats::Record::Plot(p) => depth += usize::from(p.name == "queue depth"),
                formats::Record::Message(m) if m.frame != 0 => in_frames += 1,
                formats::Record::Message(_) => outside += 1,
                _ => {}
            })
            .unwrap();
        // A queue-depth value every 10 ms tick, messages in request frames and outside.
        assert!(depth >= 50, "{depth} queue-depth values");
        assert!(in_frames >= 1 && outside >= 1, "{in_frames} {outside}");
        for c in [
            Category::HTTP,
            Category::DATABASE,
            Category::TEMPLATE,
            Category::JOB,
            Category::EMAIL,
        ] {
            assert!(cats.contains(&c.0), "category {c} missing");
        }
        assert!(starts as u64 > summary.requests * 4);
        let store = framelog::DataStore::open(dir.path()).unwrap();
        assert!(store.len() as u64 > summary.requests);
    }
}
