//! The desktop window's command line, and its `--exit-when-loaded` measurement.

use std::path::PathBuf;

use clap::Parser;
use debugger_gui::DebuggerApp;
use debugger_gui::source::LogSource;

/// framelog's live flamegraph debugger.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Log directory to open (and follow while it grows), or a server's address
    /// (ws://HOST:PORT/ws, or the http://HOST:PORT/ it prints) to view the log it serves.
    #[arg(value_name = "DIR|URL")]
    log: Option<String>,
    /// Record a demo workload into a temporary log and follow it live.
    #[arg(long, conflicts_with_all = ["log", "listen"])]
    demo: bool,
    /// Record programs that connect (FRAMELOG_CONNECT=ADDR) into DIR, or a temporary log,
    /// and follow it.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The token programs must present when listening beyond loopback; for a URL, the
    /// token the server asks viewers for.
    #[arg(long, env = "FRAMELOG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A second log to compare DIR with (the baseline): the Compare tab and the flame
    /// graph's difference colors.
    #[arg(long, value_name = "BASELINE", requires = "log")]
    compare: Option<PathBuf>,
    /// Print how long loading DIR took and the window's memory (RSS) once it is loaded, then
    /// exit (a measurement a user can repeat: see the README's performance section).
    #[arg(long, requires = "log")]
    exit_when_loaded: bool,
    /// Initial window width and height in points.
    #[arg(long, num_args = 2, value_names = ["W", "H"], default_values_t = [1500.0, 950.0])]
    size: Vec<f32>,
}

/// Parses the command line and runs the window until it is closed.
pub fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let app = if args.demo {
        DebuggerApp::demo()
    } else if let Some(addr) = &args.listen {
        let dir = args.log.as_deref().map(std::path::Path::new);
        DebuggerApp::listen(addr, dir, args.token.clone())
    } else if let Some(log) = &args.log {
        let mut app = DebuggerApp::new();
        app.open_source(LogSource::parse(log), args.token.as_deref().unwrap_or(""));
        if let Some(base) = &args.compare {
            app.compare_with(base);
        }
        app
    } else {
        DebuggerApp::new()
    };
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_title("framelog debugger")
            .with_inner_size([args.size[0], args.size[1]])
            .with_drag_and_drop(true),
        ..Default::default()
    };
    let mut app = app;
    app.set_recent_file(debugger_gui::recent::RecentLogs::default_file());
    let window = Window {
        app,
        started: std::time::Instant::now(),
        exit_when_loaded: args.exit_when_loaded,
        paints: 0,
    };
    eframe::run_native(
        "framelog debugger",
        options,
        Box::new(move |_cc| Ok(Box::new(window))),
    )
    .map_err(|e| anyhow::anyhow!("could not open the window: {e}"))
}

/// The window: the app, and the `--exit-when-loaded` measurement.
struct Window {
    app: DebuggerApp,
    started: std::time::Instant,
    exit_when_loaded: bool,
    /// Frames painted so far (said with the load's figures: painting costs the load CPU).
    paints: u64,
}

impl eframe::App for Window {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        eframe::App::ui(&mut self.app, ui, frame);
        self.paints += 1;
        if !self.exit_when_loaded {
            return;
        }
        // Measured once; the window closes at the next frame.
        self.exit_when_loaded = false;
        let status = self.app.ingest_status();
        let frames = self.app.model().map_or(0, |m| m.frame_count());
        let heap = self.app.model().map_or(0, |m| m.heap_bytes());
        if (status.compacted && frames > 0) || status.finished {
            let rss = rss_bytes();
            let caught_up = status
                .caught_up_at
                .map_or(0.0, |t| t.duration_since(self.started).as_secs_f64());
            let first_paint = status
                .first_frames_at
                .map_or(0.0, |t| t.duration_since(self.started).as_secs_f64() * 1e3);
            println!(
                // RSS whole: per-frame memory is (RSS − an empty window's RSS) / frames, as
                // the README measures it; dividing the whole RSS would count the window itself.
                "first frames painted after {first_paint:.0} ms; loaded {frames} frames in {:.2} s (indexed after {caught_up:.2} s; {} paints); model heap {heap} bytes; window RSS {rss} bytes ({:.1} MiB)",
                self.started.elapsed().as_secs_f64(),
                self.paints,
                rss as f64 / f64::from(1 << 20)
            );
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        } else {
            // Looked at again when the load's news repaints the window (its end does too),
            // with a slow poll as a fallback: asking for a frame after every frame would
            // paint as fast as the machine can and slow the load it measures.
            self.exit_when_loaded = true;
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_secs(2));
        }
    }
}

/// This process's resident memory (Linux: `VmRSS` of /proc/self/status; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kib| kib * 1024)
}
