//! `framelog view`: serve a log on disk to viewers (browser or `debugger-gui ws://…`), and
//! the `--http` options `serve` shares.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use framelog::viewer::http::{
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_VIEWERS, ViewerOptions, ViewerServer,
};

/// How viewers reach a log over HTTP/WebSocket.
#[derive(clap::Args, Clone)]
pub struct HttpArgs {
    /// The built browser viewer's directory (its index.html); by default `web/` beside this
    /// executable if it is there.
    #[arg(long, value_name = "DIR", env = "FRAMELOG_WEB")]
    web: Option<PathBuf>,
    /// Viewers served at once; more are refused as busy.
    #[arg(long, default_value_t = DEFAULT_MAX_VIEWERS)]
    max_viewers: usize,
    /// HTTP connections served at once, viewers included (fewer if the open-files limit is
    /// low); when full, a new connection takes the place of an idle one, or is answered 503.
    #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS)]
    max_http_connections: usize,
}

impl HttpArgs {
    /// Starts serving `dir` on `addr` and prints `serving http://HOST:PORT/` as a line of
    /// stdout. `fd_reserve` descriptors are left to the rest of the process.
    pub fn start(
        &self,
        addr: &str,
        dir: &std::path::Path,
        token: Option<String>,
        recording: bool,
        fd_reserve: u64,
        who: &'static str,
    ) -> anyhow::Result<ViewerServer> {
        let mut opts = ViewerOptions::new(dir);
        opts.web_root = self.web.clone().or_else(default_web_root);
        if let Some(root) = &opts.web_root
            && !root.join("index.html").is_file()
        {
            anyhow::bail!(
                "{}: no index.html there: build the browser viewer first (see the README)",
                root.display()
            );
        }
        if opts.web_root.is_none() {
            // Said before serving: otherwise a user opens the address and finds a note.
            eprintln!(
                "framelog {who}: warning: the browser viewer is not built (no web/index.html \
                 beside this executable, no --web DIR): http://ADDR/ will say how to build it \
                 (`debugger-gui/web/build.sh target/release/web` in the repository); the \
                 window connects anyway: debugger-gui ws://ADDR/ws"
            );
        }
        opts.token = token.filter(|t| !t.is_empty());
        opts.max_viewers = self.max_viewers.max(1);
        opts.max_connections = self.max_http_connections.max(1);
        opts.fd_reserve = fd_reserve;
        opts.recording = recording;
        opts.log = Arc::new(move |line: &str| eprintln!("framelog {who}: {line}"));
        let server = ViewerServer::bind(addr, opts).map_err(|e| match e {
            // Already names the address and what to do.
            framelog::Error::TokenRequired(_) => anyhow::Error::new(e),
            e => anyhow::Error::new(e).context(format!("serving viewers on {addr}")),
        })?;
        let (conns, viewers) = server.capacity();
        if conns < self.max_http_connections || viewers < self.max_viewers {
            eprintln!(
                "framelog {who}: the open-files limit ({}) allows {viewers} viewers and {conns} \
                 HTTP connections here (raise it with `ulimit -n` for more)",
                framelog::viewer::limits::open_files_limit().unwrap_or(0)
            );
        }
        let mut out = std::io::stdout().lock();
        writeln!(out, "serving http://{}/", server.local_addr())?;
        out.flush()?;
        Ok(server)
    }
}

/// `web/` beside the `framelog` executable, where the README's build command puts the
/// browser viewer.
fn default_web_root() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let root = exe.parent()?.join("web");
    root.join("index.html").is_file().then_some(root)
}

/// Arguments of `framelog view`.
#[derive(clap::Args)]
pub struct ViewArgs {
    /// The log directory (followed as it grows).
    dir: PathBuf,
    /// Address to serve on (port 0 picks a free one); any address but loopback needs a token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    http: String,
    /// The secret viewers must present (the page asks for it once). Other users see
    /// `--token` in `ps`; the FRAMELOG_TOKEN environment variable they do not.
    #[arg(long, env = "FRAMELOG_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(flatten)]
    web: HttpArgs,
}

/// Descriptors `view` keeps for itself beyond what viewers and connections may take.
const VIEW_FD_RESERVE: u64 = 64;

/// Serves until SIGINT or SIGTERM, then stops within the viewer server's drain.
pub fn run(args: &ViewArgs) -> anyhow::Result<ExitCode> {
    if !args.dir.is_dir() {
        // Says whether it is missing or a file.
        return Err(framelog::Error::NotALog(args.dir.clone()).into());
    }
    framelog::viewer::limits::raise_open_files_limit();
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    ctrlc::set_handler(move || {
        let _ = tx.try_send(());
    })
    .context("installing the SIGINT/SIGTERM handler")?;
    let server = args.web.start(
        &args.http,
        &args.dir,
        args.token.clone(),
        false,
        VIEW_FD_RESERVE,
        "view",
    )?;
    let _ = rx.recv();
    server.close();
    Ok(ExitCode::SUCCESS)
}
