//! `framelog serve`: a headless recorder of programs that stream to it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
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
    /// The shared secret programs must present (their FRAMELOG_TOKEN).
    #[arg(long, env = "FRAMELOG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Keep suspended programs waiting (they run on when their own timeout passes).
    #[arg(long)]
    hold: bool,
}

/// Serves until SIGINT or SIGTERM, then closes every connection and exits 0.
pub fn run(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    ctrlc::set_handler(move || {
        let _ = tx.try_send(());
    })
    .context("installing the SIGINT/SIGTERM handler")?;
    let mut opts = ServerOptions::recorder(&args.dir);
    opts.token = args.token.clone().filter(|t| !t.is_empty());
    opts.auto_resume = !args.hold;
    opts.log = Arc::new(|line: &str| eprintln!("framelog serve: {line}"));
    let server = Server::bind(&args.listen, opts)?;
    {
        // The first line of stdout, for scripts and tests (port 0 picks one).
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on {}", server.local_addr())?;
        out.flush()?;
    }
    let _ = rx.recv();
    let programs = server.processes();
    let frames = server.frames();
    server.shutdown();
    eprintln!(
        "framelog serve: stopped; {frames} frames from {} programs in {}",
        programs.len(),
        args.dir.display()
    );
    Ok(ExitCode::SUCCESS)
}
