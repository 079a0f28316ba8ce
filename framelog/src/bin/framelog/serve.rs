//! `framelog serve`: a headless recorder of programs that stream to it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use framelog::export::otlp::{Books, Deadline, OtlpSender, Queue, Signal};
use framelog::export::{ExportOptions, Exporter};
use framelog::remote::{Server, ServerOptions};
use parking_lot::Mutex;

/// Arguments of `framelog serve`.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on (port 0 picks a free one); any address but loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:7878")]
    listen: String,
    /// The log directory every program is recorded into (one worker each).
    #[arg(long)]
    dir: PathBuf,
    /// The shared secret programs (and viewers, with --http) must present (their
    /// FRAMELOG_TOKEN). Other users see `--token` in `ps`; the FRAMELOG_TOKEN environment
    /// variable they do not.
    #[arg(long, env = "FRAMELOG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Keep suspended programs waiting (they run on when their own timeout passes).
    #[arg(long)]
    hold: bool,
    /// Connections served at once (programs hold one or two each); past it a program is
    /// refused as busy and retries with back-off.
    #[arg(long, default_value_t = framelog::remote::server::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// Also forward every frame, as it arrives, as an OpenTelemetry span to this OTLP/HTTP
    /// endpoint (e.g. `http://localhost:4318`), and messages outside frames as log records;
    /// sending happens on its own threads and never holds up recording.
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
    /// With --otlp: how much encoded data may wait for a slow or absent collector; past it
    /// batches are dropped and counted (said while serving, at the end, and in the log).
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = crate::prune::parse_size, requires = "otlp")]
    otlp_queue: u64,
    /// Also serve the log to viewers (browser, `debugger-gui ws://…`) on this address.
    #[arg(long, value_name = "ADDR")]
    http: Option<String>,
    #[command(flatten)]
    web: crate::view::HttpArgs,
    /// Retention: the log's size and age limits, applied every few seconds while serving.
    #[command(flatten)]
    retention: crate::prune::RetentionArgs,
}

/// How often `serve` applies its retention limits.
const PRUNE_EVERY: Duration = Duration::from_secs(5);

/// Applies `retention` to `dir` every [`PRUNE_EVERY`] until `stop`, saying what it deletes
/// and (once per kind of failure in a row) why it could not.
fn prune_loop(dir: PathBuf, retention: framelog::Retention, stop: Arc<AtomicBool>) {
    let mut failing = false;
    while !stop.load(Ordering::Acquire) {
        match framelog::retention::prune(&dir, &retention) {
            Ok(p) if !p.files.is_empty() => {
                eprintln!("framelog serve: retention: {}", crate::prune::describe(&p));
                failing = false;
            }
            Ok(_) => failing = false,
            Err(e) => {
                if !std::mem::replace(&mut failing, true) {
                    eprintln!("framelog serve: retention: {e} (retrying)");
                }
            }
        }
        // Sleep in short steps so a stop is seen at once.
        let until = std::time::Instant::now() + PRUNE_EVERY;
        while std::time::Instant::now() < until && !stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// How often the OTLP forwarder reads what arrived.
const FORWARD_EVERY: Duration = Duration::from_millis(500);
/// How long after SIGINT forwarding may go on: within `serve`'s 10 s drain. What is not
/// sent by then is counted as not forwarded.
const FORWARD_GRACE: Duration = Duration::from_secs(8);
/// How often a forwarder that falls behind or fails says so again.
const REPORT_EVERY: Duration = Duration::from_secs(60);

/// OTLP forwarding beside the recording: one thread tails the log and turns what arrives into
/// batches in a bounded [`Queue`] (dropped and counted past its budget), another sends them.
struct Forwarding {
    url: String,
    budget: String,
    books: Arc<Mutex<Books>>,
    deadline: Arc<Deadline>,
    read_done: crossbeam_channel::Receiver<()>,
    send_done: crossbeam_channel::Receiver<()>,
}

/// A size as a user writes it (`32 MiB`).
fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

impl Forwarding {
    /// Starts forwarding the log in `dir` to `sender`'s collector until `stop`.
    fn start(
        dir: PathBuf,
        url: String,
        sender: OtlpSender,
        budget: u64,
        stop: Arc<AtomicBool>,
    ) -> Self {
        let deadline = Arc::new(Deadline::default());
        let prefix = format!("framelog serve: forwarding to {url}");
        let p = prefix.clone();
        let sender = sender
            .with_deadline(deadline.clone())
            .with_note(move |line| eprintln!("{p}: {line}"));
        let (sender, queue, poster) =
            sender.forwarding(usize::try_from(budget).unwrap_or(usize::MAX));
        let books = sender.shared_books();
        let (read_tx, read_done) = crossbeam_channel::bounded::<()>(0);
        let (send_tx, send_done) = crossbeam_channel::bounded::<()>(0);
        let q = queue.clone();
        std::thread::spawn(move || {
            // Told when this thread ends (the sender dropped): the queue is drained.
            let _done = send_tx;
            while let Some(b) = q.pop(None) {
                // Failures are in the books (reported by the reading thread).
                let _ = poster.send(b);
            }
        });
        let budget_text = size_text(budget);
        let b = budget_text.clone();
        std::thread::spawn(move || {
            let _done = read_tx;
            read_loop(&dir, sender, &queue, &stop, &prefix, &b);
            queue.close();
        });
        Forwarding {
            url,
            budget: budget_text,
            books,
            deadline,
            read_done,
            send_done,
        }
    }

    /// Waits for both threads, at most until the deadline set at SIGINT; then the line that
    /// says what was forwarded and what was not (counted from the books, so true whatever
    /// the threads were doing), and the fields to write in the log.
    fn finish(self) -> (String, bool, bson::Document) {
        let until = self.deadline.get().unwrap_or_else(Instant::now);
        let read_all = self
            .read_done
            .recv_deadline(until)
            .is_err_and(|e| e.is_disconnected());
        let _ = self.send_done.recv_deadline(until.max(Instant::now()));
        let books = self.books.lock().clone();
        summary(&self.url, &self.budget, &books, read_all)
    }
}

/// The one line saying what forwarding delivered and what it did not (with why), whether
/// anything was not delivered, and the same as fields.
fn summary(
    url: &str,
    budget: &str,
    books: &Books,
    read_all: bool,
) -> (String, bool, bson::Document) {
    let spans = books.of(Signal::Traces);
    let mut fields = bson::Document::new();
    fields.insert("otlp.url", url);
    let mut lost = Vec::new();
    let mut delivered = Vec::new();
    for s in Signal::ALL {
        let t = books.of(s);
        let key = s.items().replace(' ', "_");
        if t.made == 0 && s != Signal::Traces {
            continue;
        }
        fields.insert(format!("otlp.{key}"), t.made as i64);
        fields.insert(format!("otlp.{key}_forwarded"), t.sent as i64);
        fields.insert(
            format!("otlp.{key}_not_forwarded"),
            t.not_delivered() as i64,
        );
        if t.not_delivered() > 0 {
            lost.push(format!(
                "{} {} ({})",
                t.not_delivered(),
                s.items(),
                books.why_not_delivered(s, budget)
            ));
        }
        if s != Signal::Traces {
            delivered.push(format!("{} {}", t.sent, s.items()));
        }
    }
    let extra = if delivered.is_empty() {
        String::new()
    } else {
        format!(" and {}", delivered.join(" and "))
    };
    let mut line = if lost.is_empty() {
        format!("forwarded all {} spans{extra} to {url}", spans.made)
    } else {
        format!(
            "forwarded {} of {} spans{extra} to {url}; not forwarded: {}",
            spans.sent,
            spans.made,
            lost.join("; ")
        )
    };
    if !read_all {
        line.push_str(" (the log was not read to its end in time: later frames are not counted)");
    }
    (line, !lost.is_empty() || !read_all, fields)
}

/// Tails the log in `dir` into `sender` (its batches into `queue`) until `stop`, then reads
/// the rest, ends what is open and flushes. Says when forwarding falls behind or fails: once,
/// then every [`REPORT_EVERY`] while it lasts, with counts; and when it is well again.
fn read_loop(
    dir: &Path,
    mut sender: OtlpSender,
    queue: &Queue,
    stop: &AtomicBool,
    prefix: &str,
    budget: &str,
) {
    let opts = ExportOptions {
        with_data: true,
        ..Default::default()
    };
    let mut exporter: Option<Exporter> = None;
    let mut read_error: Option<String> = None;
    let mut last_report: Option<Instant> = None;
    let mut reported = (0u64, 0u64);
    let mut waited = Duration::ZERO;
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if exporter.is_none() {
            // Until a program has recorded, the log may hold nothing to open: not a failure.
            exporter = Exporter::open(dir, &opts).ok();
        }
        if let Some(e) = &mut exporter
            && let Err(err) = e.step(&mut sender)
        {
            read_error = Some(format!("reading the log: {err}"));
        }
        let _ = sender.flush();
        if stopping {
            if let Some(e) = exporter
                && let Err(err) = e.finish(&mut sender)
            {
                eprintln!("{prefix}: {err}");
            }
            return;
        }
        // Falling behind (drops) or failing (refusals, retries): said once, then every
        // minute while it lasts, with counts.
        let books = sender.books();
        let dropped: u64 = Signal::ALL.iter().map(|s| books.of(*s).dropped).sum();
        let failed: u64 = Signal::ALL.iter().map(|s| books.of(*s).failed).sum();
        let problem = books.problem.clone().or_else(|| read_error.take());
        // Waiting for room: the collector takes less than the programs record.
        let behind = queue.waited() > waited + FORWARD_EVERY / 2;
        waited = queue.waited();
        let worse = dropped > reported.0 || failed > reported.1 || behind;
        if (worse || problem.is_some()) && last_report.is_none_or(|t| t.elapsed() >= REPORT_EVERY) {
            let spans = books.of(Signal::Traces);
            let (batches, bytes) = queue.waiting();
            eprintln!(
                "{prefix} {}: {}; so far {} spans forwarded, {dropped} items dropped past the {budget} queue budget, {failed} refused, {batches} batches ({}) waiting; retrying with back-off (said again every minute while it lasts)",
                if dropped > reported.0 {
                    "falls behind"
                } else {
                    "fails"
                },
                problem
                    .as_deref()
                    .unwrap_or("the collector is slower than the programs"),
                spans.sent,
                size_text(bytes as u64),
            );
            reported = (dropped, failed);
            last_report = Some(Instant::now());
        } else if last_report.is_some() && !worse && problem.is_none() && queue.waiting().0 == 0 {
            eprintln!(
                "{prefix}: well again; {dropped} items dropped and {failed} refused in all so far"
            );
            last_report = None;
        }
        // Sleep in short steps so a stop is seen at once.
        let until = Instant::now() + FORWARD_EVERY;
        while Instant::now() < until && !stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Writes `text` into the log in `dir` as a message of a worker of its own ("framelog
/// serve"): what forwarding did, for `stats` and `dump` to say later.
fn write_note(dir: &Path, text: &str, warn: bool, fields: &bson::Document) -> anyhow::Result<()> {
    let w = framelog::LogWriter::open_with(
        dir,
        framelog::WriterOptions {
            process_name: Some("framelog serve".into()),
            compact: false,
            ..Default::default()
        },
    )?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut bytes = Vec::new();
    formats::Record::ThreadInfo(formats::ThreadInfo {
        worker: w.worker(),
        thread: 1,
        timestamp: now,
        name: "otlp forwarding",
    })
    .encode_to_vec(&mut bytes);
    let fields = bson::to_vec(fields).ok();
    formats::Record::Message(formats::Message {
        frame: 0,
        worker: w.worker(),
        timestamp: now,
        context: 0,
        level: if warn {
            formats::Level::WARN
        } else {
            formats::Level::INFO
        },
        text,
        fields: fields.as_deref(),
    })
    .encode_to_vec(&mut bytes);
    w.append_frames(&bytes)?;
    w.sync()?;
    Ok(())
}

/// Serves until SIGINT or SIGTERM, then closes every connection and exits 0.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    // Descriptors for programs: the viewer side (`--http`) takes no more than the limit
    // leaves after this reserve, so programs still connect and record whatever its peers do.
    let limit = framelog::viewer::limits::raise_open_files_limit().unwrap_or(1024);
    let fd_reserve = (limit / 4).max(128);
    // Checked before anything starts: a URL that cannot be sent to is refused at once.
    let otlp = match &args.otlp {
        Some(url) => Some((url.clone(), OtlpSender::new(url)?)),
        None => None,
    };
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    let signals = AtomicU32::new(0);
    ctrlc::set_handler(move || {
        if signals.fetch_add(1, Ordering::AcqRel) == 0 {
            let _ = tx.try_send(());
        } else {
            // A second SIGINT: the user will not wait for the drain.
            eprintln!("framelog serve: interrupted again: stopping now, without draining");
            std::process::exit(130);
        }
    })
    .context("installing the SIGINT/SIGTERM handler")?;
    let mut opts = ServerOptions::recorder(&args.dir);
    opts.token = args.token.clone().filter(|t| !t.is_empty());
    opts.auto_resume = !args.hold;
    opts.max_connections = args.max_connections.max(1);
    opts.log = Arc::new(|line: &str| eprintln!("framelog serve: {line}"));
    let server = Server::bind(&args.listen, opts)?;
    // `serving http://…/` first, as `framelog view` prints it; then `listening on`.
    let viewers = match &args.http {
        Some(addr) => Some(args.web.start(
            addr,
            &args.dir,
            args.token.clone(),
            true,
            fd_reserve,
            "serve",
        )?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let retention = args.retention.retention();
    let pruner = retention.is_set().then(|| {
        let (dir, stop) = (args.dir.clone(), stop.clone());
        std::thread::spawn(move || prune_loop(dir, retention, stop))
    });
    let forwarder = otlp.map(|(url, sender)| {
        Forwarding::start(args.dir.clone(), url, sender, args.otlp_queue, stop.clone())
    });
    {
        // The first line of stdout, for scripts and tests (port 0 picks one).
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", server.local_addr())?;
        out.flush()?;
    }
    let _ = rx.recv();
    // Forwarding goes on while programs drain, and stops at this deadline whatever the
    // collector does.
    if let Some(f) = &forwarder {
        f.deadline.set(Instant::now() + FORWARD_GRACE);
    }
    // Both drains at once: viewers are told and their connections end (within the viewer
    // server's 5 s) while programs' streams drain (within 10 s).
    if let Some(v) = &viewers {
        v.begin_close();
    }
    let mut server = server;
    // Counted after the drain: everything the programs still sent is in the log.
    server.close();
    if let Some(v) = viewers {
        v.close();
    }
    let programs = server.programs_seen();
    let frames = server.frames();
    stop.store(true, Ordering::Release);
    if let Some(p) = pruner {
        let _ = p.join();
    }
    if let Some(f) = forwarder {
        let (line, warn, fields) = f.finish();
        eprintln!("framelog serve: {line}");
        if let Err(e) = write_note(&args.dir, &line, warn, &fields) {
            eprintln!("framelog serve: could not write that into the log: {e:#}");
        }
    }
    eprintln!(
        "framelog serve: stopped; {frames} frames from {programs} programs in {}",
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
