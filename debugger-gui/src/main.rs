//! `debugger-gui`: the desktop window. `debugger-gui DIR` opens and follows a log;
//! `debugger-gui --demo` records a demo workload into a temporary log and follows it;
//! `debugger-gui --listen 127.0.0.1:7878 [DIR]` records programs that connect to it.

use std::path::PathBuf;

use clap::Parser;
use debugger_gui::DebuggerApp;

/// framelog's live flamegraph debugger.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Log directory to open (and follow while it grows).
    dir: Option<PathBuf>,
    /// Record a demo workload into a temporary log and follow it live.
    #[arg(long, conflicts_with_all = ["dir", "listen"])]
    demo: bool,
    /// Record programs that connect (FRAMELOG_CONNECT=ADDR) into DIR, or a temporary log,
    /// and follow it.
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// The token programs must present when listening beyond loopback.
    #[arg(long, env = "FRAMELOG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Initial window width and height in points.
    #[arg(long, num_args = 2, value_names = ["W", "H"], default_values_t = [1500.0, 950.0])]
    size: Vec<f32>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let app = if args.demo {
        DebuggerApp::demo()
    } else if let Some(addr) = &args.listen {
        DebuggerApp::listen(addr, args.dir.as_deref(), args.token.clone())
    } else if let Some(dir) = &args.dir {
        DebuggerApp::open(dir)
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
    eframe::run_native(
        "framelog debugger",
        options,
        Box::new(move |_cc| Ok(Box::new(app))),
    )
    .map_err(|e| anyhow::anyhow!("could not open the window: {e}"))
}
