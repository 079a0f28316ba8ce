//! `framelog serve`: a headless recorder of programs that stream to it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context;
use framelog::export::otlp::OtlpSender;
use framelog::export::{ExportOptions, Exporter};
use framelog::remote::{Server, ServerOptions};

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
    /// endpoint (e.g. `http://localhost:4318`); sending happens on its own thread.
    #[arg(long, value_name = "URL")]
    otlp: Option<String>,
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

/// Tails the log and sends its frames to `url` until `stop`, then sends the rest; the
/// recording side never waits for it (it reads the log, as any reader does).
fn forward(dir: PathBuf, url: String, stop: Arc<AtomicBool>) -> u64 {
    let opts = ExportOptions {
        with_data: true,
        ..Default::default()
    };
    // Retries stop at shutdown: a busy collector never holds up `serve`'s exit.
    let mut sender = OtlpSender::new(&url).with_stop(stop.clone());
    let mut exporter: Option<Exporter> = None;
    let mut reported = false;
    let mut report = |what: &str, e: &dyn std::fmt::Display| {
        if !std::mem::replace(&mut reported, true) {
            eprintln!("framelog serve: forwarding to {url}: {what}: {e} (retrying)");
        }
    };
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if exporter.is_none() {
            exporter = Exporter::open(&dir, &opts).ok();
        }
        if let Some(e) = &mut exporter
            && let Err(err) = e.step(&mut sender)
        {
            report("reading the log", &err);
        }
        if let Err(err) = sender.flush() {
            report("sending", &err);
        }
        if stopping {
            if let Some(e) = exporter
                && let Err(err) = e.finish(&mut sender)
            {
                eprintln!("framelog serve: forwarding to {url}: {err}");
            }
            return sender.sent;
        }
        std::thread::sleep(FORWARD_EVERY);
    }
}

/// Serves until SIGINT or SIGTERM, then closes every connection and exits 0.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    // Descriptors for programs: the viewer side (`--http`) takes no more than the limit
    // leaves after this reserve, so programs still connect and record whatever its peers do.
    let limit = framelog::viewer::limits::raise_open_files_limit().unwrap_or(1024);
    let fd_reserve = (limit / 4).max(128);
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    ctrlc::set_handler(move || {
        let _ = tx.try_send(());
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
    let forwarder = args.otlp.clone().map(|url| {
        let (dir, stop) = (args.dir.clone(), stop.clone());
        std::thread::spawn(move || forward(dir, url, stop))
    });
    {
        // The first line of stdout, for scripts and tests (port 0 picks one).
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", server.local_addr())?;
        out.flush()?;
    }
    let _ = rx.recv();
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
        let sent = f.join().unwrap_or(0);
        eprintln!("framelog serve: forwarded {sent} spans");
    }
    eprintln!(
        "framelog serve: stopped; {frames} frames from {programs} programs in {}",
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
