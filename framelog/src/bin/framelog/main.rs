//! `framelog`: inspect a frame log from the command line.

mod compact;
mod data;
mod dump;
mod export;
mod output;
mod prune;
mod serve;
mod sql;
mod stats;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Inspect framelog profiler logs: dump records, show frame data, statistics, validate and recover files, export them, record programs that connect.
#[derive(Parser)]
#[command(name = "framelog", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print one line per record (like `tail -f` with --follow).
    Dump(dump::DumpArgs),
    /// Print one frame's merged data as pretty JSON.
    Data {
        /// The log directory.
        dir: PathBuf,
        /// The frame, as WORKER:ID (e.g. 0:42).
        frame: formats::FrameKey,
    },
    /// Totals and a per-label table of durations.
    Stats(stats::StatsArgs),
    /// Validate every file; report each problem with file and offset; exit 1 if any.
    Check {
        /// The log directory.
        dir: PathBuf,
    },
    /// Copy every valid batch of a damaged log into a new log; print what was skipped.
    Recover {
        /// The damaged log directory (read only).
        dir: PathBuf,
        /// The new log directory (must not exist, or be empty).
        #[arg(long)]
        out: PathBuf,
    },
    /// Write the log for Perfetto UI, chrome://tracing and speedscope (Chrome JSON or speedscope's format).
    Export(export::ExportArgs),
    /// Record programs that connect (FRAMELOG_CONNECT=HOST:PORT) into a log directory.
    Serve(serve::ServeArgs),
    /// Serve a log to viewers over HTTP/WebSocket (a browser, or `debugger-gui ws://HOST:PORT/ws`), following it as it grows.
    View(view::ViewArgs),
    /// Delete a log's oldest sealed segments to keep it within a size and an age.
    Prune(prune::PruneArgs),
    /// Run SQL on the log where it lies (SQLite with tables slice, thread, process, counter, message, context …; see docs/SQL.md).
    Sql(sql::SqlArgs),
    /// Rewrite sealed segments in compact form (a few bytes a frame); --all seals the newest too.
    Compact(compact::CompactArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Dump(args) => dump::run(&args),
        Command::Data { dir, frame } => data::run(&dir, frame),
        Command::Stats(args) => stats::run(&args),
        Command::Check { dir } => stats::check(&dir),
        Command::Recover { dir, out } => stats::recover(&dir, &out),
        Command::Serve(args) => serve::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Prune(args) => prune::run(&args),
        Command::Compact(args) => compact::run(&args),
        Command::View(args) => view::run(&args),
        Command::Sql(args) => sql::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("framelog: error: {}", message(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line, each said once (an error's message often already
/// includes its cause's).
fn message(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}
