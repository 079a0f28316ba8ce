//! `framelog stats` and `framelog check`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use formats::FileKind;
use framelog::check::{Severity, check_log};
use framelog::stats::StatsBuilder;
use framelog::{DataStore, LogReader, segments};
use serde_json::json;

use crate::output::{bytes, duration, text, time};

/// Arguments of `framelog stats`.
#[derive(Args)]
pub struct StatsArgs {
    /// The log directory.
    dir: PathBuf,
    /// Machine-readable output.
    #[arg(long)]
    json: bool,
    /// Rows of the per-label table and of the plot series (0 for all).
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// Exit with status 1 if any damaged bytes were skipped.
    #[arg(long)]
    strict: bool,
}

fn dir_bytes(dir: &Path, kind: FileKind) -> Result<(usize, u64)> {
    let list = segments::list(dir, kind)?;
    let mut bytes = 0;
    for n in &list {
        bytes += std::fs::metadata(segments::segment_path(dir, kind, *n))?.len();
    }
    Ok((list.len(), bytes))
}

pub fn run(args: &StatsArgs) -> Result<ExitCode> {
    let dir = &args.dir;
    let mut reader = LogReader::open(dir)?;
    let mut builder = StatsBuilder::new();
    reader.read_available(|_, rec| builder.add(&rec))?;
    let (totals, labels) = builder.finish();
    let mut store = DataStore::open(dir)?;
    let data_entries = store.len();
    // Damage: frame-log bytes skipped by the reader, index bytes skipped by the data store.
    let mut damage = reader.take_damage();
    damage.extend(store.take_damage());
    let (r_bytes, r_places) = reader.damage_totals();
    let (s_bytes, s_places) = store.damage_totals();
    let (damaged_bytes, damaged_places) = (r_bytes + s_bytes, r_places + s_places);
    let code = if args.strict && damaged_places > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    };
    let (frame_segments, frame_bytes) = dir_bytes(dir, FileKind::FrameLog)?;
    let (data_segments, data_bytes) = dir_bytes(dir, FileKind::FrameData)?;
    let (_, index_bytes) = dir_bytes(dir, FileKind::FrameIndex)?;
    let span = match (totals.first_ns, totals.last_ns) {
        (Some(a), Some(b)) => b - a,
        _ => 0,
    };
    let shown = if args.top == 0 {
        labels.len()
    } else {
        args.top.min(labels.len())
    };
    // The series with the most values first (then by name, as they were).
    let mut plots: Vec<_> = totals.plots.iter().collect();
    plots.sort_by_key(|p| std::cmp::Reverse(p.count));
    let plots_shown = if args.top == 0 {
        plots.len()
    } else {
        args.top.min(plots.len())
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let v = json!({
            "frames": totals.frames,
            "ends": totals.ends,
            "open": totals.open,
            "orphan_ends": totals.orphan_ends,
            "dropped": totals.dropped,
            "parents_recorded": totals.parents_recorded,
            "workers": totals.workers.len(),
            "worker_list": totals.workers.iter().map(|(w, s)| json!({
                "worker": w, "pid": s.pid, "name": s.name, "frames": s.frames,
            })).collect::<Vec<_>>(),
            "data_entries": data_entries,
            "frame_segments": frame_segments,
            "data_segments": data_segments,
            "bytes": frame_bytes + data_bytes + index_bytes,
            "first_ns": totals.first_ns,
            "last_ns": totals.last_ns,
            "span_ns": span,
            "labels": labels[..shown].iter().map(|l| json!({
                "label": l.label, "count": l.count, "total_ns": l.total_ns, "self_ns": l.self_ns, "mean_ns": l.mean_ns,
                "p50_ns": l.p50_ns, "p99_ns": l.p99_ns, "max_ns": l.max_ns,
                "allocs": l.allocs, "alloc_bytes": l.alloc_bytes,
                "async": l.async_time.as_ref().map(|a| json!({
                    "frames": a.frames,
                    "busy_ns": spread(&a.busy), "queued_ns": spread(&a.queued), "waiting_ns": spread(&a.waiting),
                    "polls": a.polls, "slow_polls": a.slow_polls, "longest_poll_ns": a.longest_poll_ns,
                    "queued_unmeasured": a.queued_unmeasured,
                })),
            })).collect::<Vec<_>>(),
            "alloc_frames": totals.alloc_frames,
            "async_frames": totals.async_frames,
            "slow_polls": totals.slow_polls,
            "worst_slow_polls": totals.worst_slow_polls.iter().map(|p| json!({
                "worker": p.frame.worker, "id": p.frame.id, "label": p.label,
                "thread": p.thread.0, "thread_name": p.thread.1,
                "start_ns": p.start_ns, "duration_ns": p.duration_ns,
            })).collect::<Vec<_>>(),
            // NaN (no value but gaps) has no JSON number: null.
            "plot_series": plots.len(),
            "plots": plots[..plots_shown].iter().map(|p| json!({
                "worker": p.worker, "name": p.name, "unit": p.unit.name(), "summed": p.summed,
                "count": p.count, "gaps": p.gaps,
                "min": finite(p.min), "mean": finite(p.mean), "max": finite(p.max), "last": finite(p.last),
            })).collect::<Vec<_>>(),
            "messages": totals.messages.iter().map(|(l, n)| (l.name().into_owned(), json!(n)))
                .collect::<serde_json::Map<_, _>>(),
            "damaged_bytes": damaged_bytes,
            "damaged_places": damaged_places,
            "damage": damage.iter().map(|d| json!({
                "path": d.path, "offset": d.offset, "len": d.len, "why": d.why.to_string(),
            })).collect::<Vec<_>>(),
        });
        writeln!(out, "{v}")?;
        return Ok(code);
    }
    writeln!(out, "log        {}", dir.display())?;
    writeln!(
        out,
        "frames     {} started, {} ended, {} open, {} ends without a start",
        totals.frames, totals.ends, totals.open, totals.orphan_ends
    )?;
    let warn = if totals.dropped > 0 {
        "  (records were lost: consider Block mode or bigger buffers)"
    } else {
        ""
    };
    writeln!(out, "dropped    {}{warn}", totals.dropped)?;
    let inferred = totals.frames - totals.parents_recorded.min(totals.frames);
    if totals.frames > 0 {
        writeln!(
            out,
            "parents    {}",
            match (totals.parents_recorded, inferred) {
                (_, 0) => "recorded".to_owned(),
                (0, _) =>
                    "inferred from nesting on each thread (the log predates recorded parents)"
                        .to_owned(),
                (r, i) => format!("{r} recorded, {i} inferred from nesting on each thread"),
            }
        )?;
    }
    if totals.frames > 0 {
        if totals.async_frames == 0 {
            writeln!(
                out,
                "async      no breakdown: no frame recorded its polls (synchronous work, or a writer that predates them)"
            )?;
        } else {
            writeln!(
                out,
                "async      {} frames recorded where their time went (busy, queued, waiting: the table at the end)",
                totals.async_frames
            )?;
        }
    }
    writeln!(out, "workers    {}", totals.workers.len())?;
    for (w, s) in &totals.workers {
        writeln!(
            out,
            "  {w:>3}  pid {:<8} {:<24} {} frames",
            s.pid,
            text(&s.name),
            s.frames
        )?;
    }
    writeln!(
        out,
        "segments   {frame_segments} frame-log ({frame_bytes} bytes), {data_segments} data ({} bytes with index)",
        data_bytes + index_bytes
    )?;
    writeln!(out, "data       {data_entries} entries")?;
    if damaged_places > 0 {
        writeln!(
            out,
            "damage     skipped {damaged_bytes} damaged bytes in {damaged_places} places (framelog check lists them; framelog recover copies what is valid)"
        )?;
        for d in &damage {
            eprintln!("framelog: warning: {d}");
        }
    }
    if let (Some(a), Some(b)) = (totals.first_ns, totals.last_ns) {
        writeln!(
            out,
            "time       {} .. {} ({})",
            time(a),
            time(b),
            duration(b - a)
        )?;
    }
    if !totals.messages.is_empty() {
        let by_level: Vec<String> = totals
            .messages
            .iter()
            .map(|(l, n)| format!("{n} {}", l.name()))
            .collect();
        writeln!(out, "messages   {}", by_level.join(", "))?;
    }
    if !totals.plots.is_empty() {
        let workers: std::collections::BTreeSet<u8> =
            totals.plots.iter().map(|p| p.worker).collect();
        writeln!(out, "plots      {} series", plots.len())?;
        for p in &plots[..plots_shown] {
            // The worker only tells series apart when several processes wrote plots.
            let name = if workers.len() > 1 {
                format!("{} (worker {})", text(&p.name), p.worker)
            } else {
                text(&p.name).into_owned()
            };
            let v = |x: f64| plot_value(x, p.unit);
            writeln!(
                out,
                "  {name:<38} {:>9} values  min {:>10}  mean {:>10}  max {:>10}{}",
                p.count,
                v(p.min),
                v(p.mean),
                v(p.max),
                if p.gaps > 0 {
                    format!("  ({} gaps)", p.gaps)
                } else {
                    String::new()
                }
            )?;
        }
        if plots_shown < plots.len() {
            writeln!(
                out,
                "  … {} more series (--top 0 shows all)",
                plots.len() - plots_shown
            )?;
        }
    }
    if totals.slow_polls > 0 {
        writeln!(
            out,
            "slow polls {} (a poll that held its thread past the threshold; longest first):",
            totals.slow_polls
        )?;
        for p in totals.worst_slow_polls.iter().take(shown.clamp(1, 5)) {
            writeln!(
                out,
                "  {:>10}  thread {} ({})  in {}  at {}",
                duration(p.duration_ns),
                p.thread.0,
                text(&p.thread.1),
                if p.label.is_empty() {
                    format!("frame {} (its start is not in the log)", p.frame.id)
                } else {
                    text(&p.label).into_owned()
                },
                time(p.start_ns)
            )?;
        }
    }
    writeln!(out)?;
    let allocs = totals.alloc_frames > 0;
    write!(
        out,
        "{:<40} {:>9} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10}",
        "label", "count", "total", "self", "mean", "p50", "p99", "max"
    )?;
    if allocs {
        write!(out, " {:>12} {:>12}", "allocs/frame", "bytes/frame")?;
    }
    writeln!(out)?;
    for l in &labels[..shown] {
        let safe = text(&l.label);
        let label: String = if safe.chars().count() > 40 {
            safe.chars().take(39).chain(['…']).collect()
        } else {
            safe.into_owned()
        };
        write!(
            out,
            "{label:<40} {:>9} {:>11} {:>11} {:>10} {:>10} {:>10} {:>10}",
            l.count,
            duration(l.total_ns),
            duration(l.self_ns),
            duration(l.mean_ns),
            duration(l.p50_ns),
            duration(l.p99_ns),
            duration(l.max_ns)
        )?;
        if allocs {
            let per = |n: u64| format!("{:.1}", n as f64 / l.count.max(1) as f64);
            write!(
                out,
                " {:>12} {:>12}",
                per(l.allocs),
                bytes(l.alloc_bytes / l.count.max(1))
            )?;
        }
        writeln!(out)?;
    }
    if shown < labels.len() {
        writeln!(
            out,
            "… {} more labels (--top 0 shows all)",
            labels.len() - shown
        )?;
    }
    async_table(&mut out, &labels[..shown])?;
    Ok(code)
}

/// The asynchronous frames' table: where each label's time went.
fn async_table(out: &mut impl Write, labels: &[framelog::stats::LabelStats]) -> Result<()> {
    let rows: Vec<_> = labels
        .iter()
        .filter_map(|l| l.async_time.as_ref().map(|a| (l, a)))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(
        out,
        "async frames: busy (running on a thread), queued (ready, not running), waiting (for anything else)"
    )?;
    writeln!(
        out,
        "{:<40} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>5}",
        "label",
        "frames",
        "busy p50",
        "busy p99",
        "queued p50",
        "queued p99",
        "wait p50",
        "wait p99",
        "polls/f",
        "max poll",
        "slow"
    )?;
    let mut unmeasured = false;
    for (l, a) in rows {
        unmeasured |= a.queued_unmeasured > 0;
        let safe = text(&l.label);
        let label: String = if safe.chars().count() > 40 {
            safe.chars().take(39).chain(['…']).collect()
        } else {
            safe.into_owned()
        };
        writeln!(
            out,
            "{label:<40} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7.1} {:>10} {:>5}",
            a.frames,
            duration(a.busy.p50_ns),
            duration(a.busy.p99_ns),
            duration(a.queued.p50_ns),
            duration(a.queued.p99_ns),
            duration(a.waiting.p50_ns),
            duration(a.waiting.p99_ns),
            a.polls as f64 / a.frames.max(1) as f64,
            duration(a.longest_poll_ns),
            a.slow_polls
        )?;
    }
    if unmeasured {
        writeln!(
            out,
            "(tracing spans: wakes are not seen, so their queued time is only the delay to the first poll; the rest counts as waiting)"
        )?;
    }
    Ok(())
}

/// Total, p50 and p99 as JSON.
fn spread(s: &framelog::stats::Spread) -> serde_json::Value {
    json!({"total": s.total_ns, "p50": s.p50_ns, "p99": s.p99_ns})
}

/// A summary value as JSON, as `dump --json` writes plot values (null: no value, a series
/// with only gaps).
fn finite(x: f64) -> serde_json::Value {
    crate::output::json_f64(x)
}

/// A plot value with its unit, as people read it: `-` for no value (only gaps), `inf` and
/// `-inf`, and values too large or small for plain digits in scientific notation.
fn plot_value(x: f64, unit: formats::PlotUnit) -> String {
    if x.is_nan() {
        return "-".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    // Below 2^63 the integer units convert exactly enough; above, plain digits run long.
    let plain = x.abs() < 1e15;
    match unit {
        formats::PlotUnit::BYTES if x >= 0.0 && plain => bytes(x as u64),
        formats::PlotUnit::PERCENT if plain => format!("{x:.1} %"),
        formats::PlotUnit::NANOS if x >= 0.0 && plain => duration(x as u64),
        _ if x.fract() == 0.0 && plain => format!("{x}"),
        _ if plain && x.abs() >= 1e-3 || x == 0.0 => format!("{x:.3}"),
        _ => format!("{x:.3e}"),
    }
}

pub fn check(dir: &Path) -> Result<ExitCode> {
    if !dir.is_dir() || !segments::is_log(dir) {
        return Err(framelog::Error::NotALog(dir.to_owned()).into());
    }
    let report = check_log(dir)?;
    let mut out = std::io::stdout().lock();
    let (mut errors, mut notes) = (0, 0);
    for p in &report.problems {
        let tag = match p.severity {
            Severity::Error => {
                errors += 1;
                "error"
            }
            Severity::Note => {
                notes += 1;
                "note"
            }
        };
        writeln!(
            out,
            "{tag}: {} at byte {}: {}",
            p.path.display(),
            p.offset,
            p.message
        )?;
    }
    writeln!(
        out,
        "checked {} files: {} batches, {} records, {} data entries, {} index entries; {errors} errors, {notes} notes",
        report.files, report.batches, report.records, report.data_entries, report.index_entries
    )?;
    Ok(if report.has_errors() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

pub fn recover(src: &Path, dst: &Path) -> Result<ExitCode> {
    let r = framelog::recover::recover(src, dst)?;
    let mut out = std::io::stdout().lock();
    for d in &r.skipped {
        writeln!(out, "skipped: {d}")?;
    }
    let bytes: u64 = r.skipped.iter().map(|d| d.len).sum();
    writeln!(
        out,
        "recovered {} into {}: {} bytes of frame records, {} data entries; skipped {bytes} damaged bytes in {} places",
        src.display(),
        dst.display(),
        r.frame_bytes,
        r.data_entries,
        r.skipped.len()
    )?;
    Ok(ExitCode::SUCCESS)
}
