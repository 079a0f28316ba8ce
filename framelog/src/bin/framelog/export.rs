//! `framelog export`: the log in another viewer's format.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use framelog::export::chrome::{ChromeTrace, NotWritten};
use framelog::export::otlp::{OtlpSender, Signal, Signals};
use framelog::export::perfetto::export_perfetto;
use framelog::export::speedscope::Speedscope;
use framelog::export::{ExportError, ExportOptions, FrameSink, export};
use framelog::label_match::LabelPattern;

/// Output formats.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    /// Chrome Trace Event JSON: Perfetto UI, chrome://tracing, speedscope, Tracy's importer.
    Chrome,
    /// speedscope's own format (evented profiles, one per thread).
    Speedscope,
    /// Parquet: one file per SQL table (`-o DIR`: slice.parquet, thread.parquet, …) for
    /// DuckDB, Spark, Polars, ClickHouse.
    Parquet,
    /// Perfetto's protobuf trace (`.pftrace`): the Perfetto UI and trace processor open it
    /// several times faster than the JSON, from a fraction of its bytes.
    Perfetto,
}

/// Arguments of `framelog export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The log directory.
    dir: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "chrome")]
    format: Format,
    /// Output file (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Only frames of this context (a root frame's id).
    #[arg(long)]
    context: Option<u32>,
    /// Only frames whose label matches: `db` (contains), `"User: Select"` (exactly) or a glob.
    #[arg(long)]
    label: Option<String>,
    /// Only frames that end after this offset from the log's start (e.g. `1.5s`).
    #[arg(long, value_parser = humantime::parse_duration)]
    from: Option<Duration>,
    /// Only frames that start before this offset from the log's start.
    #[arg(long, value_parser = humantime::parse_duration)]
    to: Option<Duration>,
    /// Leave frame data out (faster on big logs).
    #[arg(long)]
    no_data: bool,
    /// Send the frames as OpenTelemetry spans to this OTLP/HTTP endpoint instead (e.g.
    /// `http://localhost:4318`, a collector, Jaeger or Tempo).
    #[arg(long, value_name = "URL", conflicts_with_all = ["output", "format"])]
    otlp: Option<String>,
    /// With --otlp: how long to keep retrying a batch the collector cannot take now (429,
    /// 502-504, connection refused), honouring its Retry-After.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "5m", requires = "otlp")]
    timeout: Duration,
    /// With --otlp: go on where the last run to the same URL stopped (it may have been
    /// killed): its progress is kept in the log directory while it sends.
    #[arg(long, requires = "otlp")]
    resume: bool,
    /// With --otlp: also send plot values as OTLP gauges to `/v1/metrics` (the same as
    /// adding `metrics` to --signals).
    #[arg(long, requires = "otlp")]
    metrics: bool,
    /// With --otlp: the signals to send, comma-separated: `traces` (frames as spans,
    /// messages in frames as their events), `logs` (messages outside frames, or all of them
    /// without traces), `metrics` (plot values as gauges). A signal the collector does not
    /// take (404, 405, 415) is switched off with one line and the others go on.
    #[arg(long, value_name = "LIST", default_value = "traces,logs", value_parser = Signals::parse, requires = "otlp")]
    signals: Signals,
    /// With --otlp: spans (or log records) per request; a request the collector finds too
    /// large (413) is split in two and sent again.
    #[arg(long, value_name = "N", default_value_t = framelog::export::otlp::BATCH, value_parser = clap::value_parser!(usize), requires = "otlp")]
    batch_size: usize,
}

/// Where `export --otlp` keeps its progress for `--resume`: a hidden file in the log
/// directory (readers ignore files they do not know), one per collector URL.
fn progress_path(dir: &std::path::Path, url: &str) -> PathBuf {
    // FNV-1a: a stable name per URL.
    let h = url.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    dir.join(format!(".otlp-export-{h:016x}.progress"))
}

/// The spans an earlier run to `url` delivered, from its progress file.
fn read_progress(path: &std::path::Path, url: &str) -> anyhow::Result<u64> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut lines = text.lines();
    match (lines.next().and_then(|l| l.parse().ok()), lines.next()) {
        (Some(n), Some(u)) if u == url => Ok(n),
        _ => anyhow::bail!(
            "{} is not a progress file of an export to {url}: delete it to start over",
            path.display()
        ),
    }
}

/// Records that `delivered` spans reached `url` (written whole: a kill leaves the old or the
/// new count, never a torn one).
fn write_progress(path: &std::path::Path, url: &str, delivered: u64) -> std::io::Result<()> {
    let tmp = path.with_extension("progress.tmp");
    std::fs::write(&tmp, format!("{delivered}\n{url}\n"))?;
    std::fs::rename(&tmp, path)
}

/// Writes the export; a summary goes to stderr.
pub fn run(a: &ExportArgs) -> Result<ExitCode> {
    if matches!(a.format, Format::Parquet) {
        return parquet(a);
    }
    let label = match &a.label {
        Some(t) => LabelPattern::parse(t).map_err(anyhow::Error::msg)?,
        None => None,
    };
    let opts = ExportOptions {
        context: a.context,
        label,
        from_ns: a.from.map(|d| d.as_nanos() as u64),
        to_ns: a.to.map(|d| d.as_nanos() as u64),
        with_data: !a.no_data,
    };
    if let Some(url) = &a.otlp {
        let progress = progress_path(&a.dir, url);
        let skip = if a.resume {
            let n = read_progress(&progress, url)?;
            eprintln!("resuming: {n} spans were delivered to {url} by an earlier run");
            n
        } else {
            0
        };
        let (path, u) = (progress.clone(), url.clone());
        let mut warned = false;
        let mut signals = a.signals;
        if a.metrics {
            signals = signals.with(Signal::Metrics);
        }
        let sender = OtlpSender::new(url)?
            .with_timeout(a.timeout)
            .with_signals(signals)
            .with_batch(a.batch_size);
        let mut sender = sender.skip(skip).on_progress(move |n| {
            if let Err(e) = write_progress(&path, &u, n)
                && !std::mem::replace(&mut warned, true)
            {
                eprintln!(
                    "framelog: cannot keep progress in {} ({e}): --resume will not be possible",
                    path.display()
                );
            }
        });
        let summary = match export(&a.dir, &opts, &mut sender) {
            Ok(s) => s,
            Err(e) => {
                let delivered = sender.delivered();
                let err = match e {
                    ExportError::Output(io) => anyhow::Error::new(io),
                    ExportError::Log(e) => anyhow::Error::new(e),
                };
                if delivered == 0 {
                    return Err(err);
                }
                return Err(err.context(format!(
                    "{delivered} spans were delivered; run the same command with --resume to send the rest"
                )));
            }
        };
        // Done: nothing to resume.
        let _ = std::fs::remove_file(&progress);
        let books = sender.books();
        let (spans, logs, points) = (
            books.of(Signal::Traces),
            books.of(Signal::Logs),
            books.of(Signal::Metrics),
        );
        if signals.contains(Signal::Traces) {
            eprintln!(
                "sent {} spans to {url} ({} still open at the end, {} standing in for root frames and {} for parents not in the export)",
                spans.sent, summary.open_frames, sender.synthetic_roots, sender.synthetic_parents
            );
        }
        if sender.dropped_events > 0 {
            eprintln!(
                "{} spans had more than {} events: their other {} events are counted in dropped_events_count (and framelog.events_dropped), not sent",
                sender.spans_with_dropped_events,
                framelog::export::otlp::MAX_EVENTS,
                sender.dropped_events
            );
        }
        if logs.sent > 0 {
            eprintln!("sent {} messages as log records", logs.sent);
        }
        if signals.contains(Signal::Metrics) && points.made > points.off {
            let mut odd = Vec::new();
            if sender.gap_points > 0 {
                odd.push(format!(
                    "{} NaN (gaps) as points flagged as having no recorded value",
                    sender.gap_points
                ));
            }
            if sender.infinite_points > 0 {
                odd.push(format!("{} infinite as ±inf", sender.infinite_points));
            }
            eprintln!(
                "sent {} plot values as gauge points{}",
                points.sent,
                if odd.is_empty() {
                    String::new()
                } else {
                    format!(" (of them {})", odd.join(", "))
                }
            );
        }
        note_inferred(&summary);
        // Items the collector did not take though their signal was taken: rejected, or too
        // large to send even alone. (A signal it does not take was said when switched off.)
        let mut incomplete = false;
        for s in Signal::ALL {
            let t = books.of(s);
            if t.rejected > 0 || t.too_large > 0 {
                incomplete = true;
                let mut why = Vec::new();
                if t.rejected > 0 {
                    why.push(format!(
                        "{} rejected{}",
                        t.rejected,
                        if books.rejections.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", books.rejections.join("; "))
                        }
                    ));
                }
                if t.too_large > 0 {
                    why.push(format!(
                        "{} too large even alone ({})",
                        t.too_large,
                        books.too_large[s as usize].as_deref().unwrap_or("")
                    ));
                }
                eprintln!(
                    "{url}: {} of {} {} not delivered: {}",
                    t.rejected + t.too_large,
                    t.made,
                    s.items(),
                    why.join(", ")
                );
            }
        }
        return Ok(if incomplete {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }
    // A file is written under a temporary name beside it and renamed once whole: a failed
    // export leaves no broken file behind (and an existing one untouched).
    let mut pending: Option<(tempfile::NamedTempFile, PathBuf)> = None;
    // Only a regular file (or a new one) is replaced: `-o /dev/null`, a FIFO or a terminal is
    // written to as it is (renaming over it would replace the device with a file).
    let special = a
        .output
        .as_ref()
        .and_then(|p| std::fs::metadata(p).ok())
        .is_some_and(|m| !m.is_file());
    if a.output.is_none()
        && matches!(a.format, Format::Perfetto)
        && std::io::IsTerminal::is_terminal(&std::io::stdout())
    {
        anyhow::bail!(
            "a Perfetto trace is binary: give a file with -o FILE.pftrace (or redirect standard output)"
        );
    }
    let (out, shown): (Box<dyn Write>, String) = match &a.output {
        Some(p) if special => (
            Box::new(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(p)
                    .with_context(|| format!("opening {}", p.display()))?,
            ),
            p.display().to_string(),
        ),
        Some(p) => {
            remove_unfinished_on_stop();
            let tmp = framelog::export::temp_beside(p, ".framelog-export-")
                .with_context(|| format!("creating {}", p.display()))?;
            let file: File = tmp
                .as_file()
                .try_clone()
                .with_context(|| format!("creating {}", p.display()))?;
            pending = Some((tmp, p.clone()));
            (Box::new(file), p.display().to_string())
        }
        None => (Box::new(std::io::stdout().lock()), "standard output".into()),
    };
    let out = BufWriter::with_capacity(1 << 20, out);
    let fail = |e: ExportError| match e {
        ExportError::Output(io) => anyhow::Error::new(io).context(format!("writing {shown}")),
        ExportError::Log(e) => anyhow::Error::new(e),
    };
    // What the format could not hold, and links it could not draw, said after the summary.
    let mut notes = Vec::new();
    let summary = match a.format {
        Format::Chrome => {
            let mut sink = ChromeTrace::new(out).with_context(|| format!("writing {shown}"))?;
            let summary = export(&a.dir, &opts, &mut sink).map_err(fail)?;
            not_written(&mut notes, "Chrome JSON", sink.not_written());
            unlinked(&mut notes, sink.unlinked(), ", is on an async track");
            summary
        }
        Format::Perfetto => {
            let (summary, sink) = export_perfetto(&a.dir, &opts, out).map_err(fail)?;
            not_written(&mut notes, "Perfetto", sink.not_written());
            unlinked(&mut notes, sink.unlinked(), "");
            summary
        }
        Format::Speedscope => {
            let mut sink = Speedscope::new(out);
            export(&a.dir, &opts, &mut sink as &mut dyn FrameSink).map_err(fail)?
        }
        Format::Parquet => unreachable!("written by parquet()"),
    };
    if let Some((tmp, path)) = pending {
        framelog::export::persist(tmp, &path)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!(
        "exported {} frames ({} on overlap lanes, {} on async tracks, {} still open at the end){}",
        summary.frames,
        summary.overlap_frames,
        summary.async_frames,
        summary.open_frames,
        if summary.damaged_bytes > 0 {
            format!("; skipped {} damaged bytes", summary.damaged_bytes)
        } else {
            String::new()
        }
    );
    note_inferred(&summary);
    for n in notes {
        eprintln!("{n}");
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per plot series with values the format could not hold.
fn not_written(
    notes: &mut Vec<String>,
    format: &str,
    series: &std::collections::BTreeMap<(u8, String), NotWritten>,
) {
    for ((worker, name), n) in series {
        let mut what = Vec::new();
        for (count, kind) in [
            (n.nan, "NaN (gaps)"),
            (n.pos_inf, "+inf"),
            (n.neg_inf, "-inf"),
        ] {
            if count > 0 {
                what.push(format!("{count} {kind}"));
            }
        }
        notes.push(format!(
            "plot {name:?} (worker {worker}): left out {} values that {format} cannot hold",
            what.join(", ")
        ));
    }
}

/// Says how many children drawn apart from their parent got no link (`also`: another reason
/// the format has).
fn unlinked(notes: &mut Vec<String>, n: u64, also: &str) {
    if n > 0 {
        notes.push(format!(
            "{n} frames drawn apart from their recorded parent have no flow to it: the parent is not in the export{also}, or was released over {} events away",
            framelog::export::links::WINDOW
        ));
    }
}

/// Says when the call tree was inferred rather than recorded (a log written before parents).
fn note_inferred(summary: &framelog::export::ExportSummary) {
    if summary.inferred_parents > 0 {
        eprintln!(
            "{} frames record no parent (a log written before parents were recorded): their nesting is inferred from their threads",
            summary.inferred_parents
        );
    }
}

/// `--format parquet -o DIR`: every SQL table as a Parquet file in DIR.
fn parquet(a: &ExportArgs) -> Result<ExitCode> {
    let Some(out) = &a.output else {
        anyhow::bail!("--format parquet writes one file per table: give the directory with -o DIR");
    };
    if a.context.is_some() || a.label.is_some() || a.from.is_some() || a.to.is_some() {
        anyhow::bail!(
            "--format parquet exports whole tables: filter with SQL on them (or `framelog sql`) instead of --context, --label, --from, --to"
        );
    }
    remove_unfinished_on_stop();
    let written = framelog::export::parquet::export_parquet(&a.dir, out, !a.no_data)?;
    for w in &written {
        eprintln!("{}: {} rows", w.path.display(), w.rows);
    }
    Ok(ExitCode::SUCCESS)
}

/// Stopped by Ctrl-C or SIGTERM, an export exits (130) without unwinding: its temporary files
/// are removed first, and the files it finished stay whole.
fn remove_unfinished_on_stop() {
    let installed = ctrlc::set_handler(|| {
        // Held until the exit: an export that finds its file gone waits instead of saying
        // so and exiting first.
        let _stopping = framelog::export::remove_unfinished();
        eprintln!("framelog export: stopped; files not finished were removed");
        std::process::exit(130);
    });
    if let Err(e) = installed {
        eprintln!("framelog export: a stop (Ctrl-C) may leave a temporary file behind: {e}");
    }
}
