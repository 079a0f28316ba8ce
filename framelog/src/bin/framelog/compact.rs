//! `framelog compact`: rewrites a log's sealed segments in compact form (format version 2).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use framelog::compact::{CompactOptions, DEFAULT_LEVEL, SegmentOutcome, compact_log};
use framelog::formats::FileKind;

/// What `framelog compact` takes.
#[derive(clap::Args)]
pub struct CompactArgs {
    /// The log directory.
    dir: PathBuf,
    /// Also seal and compact the newest segments (only of a log no process is writing).
    #[arg(long)]
    all: bool,
    /// zstd compression level (1-19; higher is smaller and slower to write, not to read).
    #[arg(long, default_value_t = DEFAULT_LEVEL, value_parser = clap::value_parser!(i32).range(-7..=22))]
    level: i32,
}

/// Compacts the log and prints what happened to each segment, then the totals.
pub fn run(args: &CompactArgs) -> anyhow::Result<ExitCode> {
    let options = CompactOptions {
        all: args.all,
        level: args.level,
    };
    let report = compact_log(&args.dir, &options)
        .with_context(|| format!("compacting {}", args.dir.display()))?;
    if report.removed_tmp > 0 {
        println!(
            "removed {} abandoned temporary file(s) of an interrupted compaction",
            report.removed_tmp
        );
    }
    for (kind, n) in &report.sealed {
        println!("sealed: started the empty {}", kind.file_name(*n));
    }
    let mut damaged = 0;
    for (kind, n, outcome) in &report.segments {
        let name = kind.file_name(*n);
        let what = match outcome {
            SegmentOutcome::Compacted {
                raw_bytes,
                compact_bytes,
                items,
            } => {
                let (units, unit) = if *kind == FileKind::FrameLog {
                    ("records", "record")
                } else {
                    ("entries", "entry")
                };
                format!(
                    "compacted: {raw_bytes} -> {compact_bytes} bytes ({:.1}x), {items} {units}, {:.2} B/{unit}",
                    *raw_bytes as f64 / (*compact_bytes).max(1) as f64,
                    *compact_bytes as f64 / (*items).max(1) as f64,
                )
            }
            SegmentOutcome::AlreadyCompact => "already compact".to_owned(),
            SegmentOutcome::NotSealed => "not sealed (newest segment): left as is".to_owned(),
            SegmentOutcome::Damaged { bytes, places } => {
                damaged += 1;
                format!("left raw: {bytes} damaged bytes in {places} place(s) (see framelog check)")
            }
            SegmentOutcome::Gone => "deleted meanwhile (retention)".to_owned(),
        };
        println!("{name}: {what}");
    }
    let (raw, compact, items) = report.totals();
    let n = report
        .segments
        .iter()
        .filter(|s| matches!(s.2, SegmentOutcome::Compacted { .. }))
        .count();
    println!(
        "total: {n} segment(s) compacted, {raw} -> {compact} bytes{}, {items} records and entries",
        if compact > 0 {
            format!(" ({:.1}x)", raw as f64 / compact as f64)
        } else {
            String::new()
        }
    );
    if damaged > 0 {
        println!("{damaged} damaged segment(s) left raw");
    }
    Ok(ExitCode::SUCCESS)
}
