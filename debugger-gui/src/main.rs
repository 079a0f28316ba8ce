//! `debugger-gui`: the desktop window. `debugger-gui DIR` opens and follows a log;
//! `debugger-gui ws://HOST:PORT/ws` a log a server serves (`framelog view|serve --http`);
//! `debugger-gui --demo` records a demo workload into a temporary log and follows it;
//! `debugger-gui --listen 127.0.0.1:7878 [DIR]` records programs that connect to it.

#[cfg(not(target_arch = "wasm32"))]
mod desktop_main;

#[cfg(not(target_arch = "wasm32"))]
fn main() -> anyhow::Result<()> {
    desktop_main::main()
}

/// In a browser: the page's canvas, following the log the page's server serves.
#[cfg(target_arch = "wasm32")]
fn main() {
    debugger_gui::web::start();
}
