//! Benchmarks for the debugger: model ingest rate, level-of-detail query time, the UI's CPU
//! time per frame (build + tessellate, no GPU) and load-to-first-paint on a large log.
//!
//! `FRAMES` (default 10,000,000) sets the size of the big log. Besides criterion's groups,
//! a summary is printed with the headline numbers, each next to a floor measured in the same
//! run (two `Instant::now()` calls), so they read as ratios on any machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use debugger_gui::DebuggerApp;
use debugger_gui::app::CentralView;
use debugger_gui::model::Model;
use debugger_gui::model::calltree::{self, Aggregate, Scope};
use debugger_gui::synth::{self, SynthOptions};

fn frames_env() -> u64 {
    std::env::var("FRAMES")
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(10_000_000)
}

fn synth_bytes(frames: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    synth::generate(
        &SynthOptions {
            frames,
            threads: 8,
            with_data: false,
            ..Default::default()
        },
        0,
        1,
        |b| bytes.extend_from_slice(b),
        |_, _| {},
    );
    bytes
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

fn floor_ns() -> f64 {
    let n = 1_000_000;
    let t = Instant::now();
    for _ in 0..n {
        black_box(Instant::now());
        black_box(Instant::now());
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// Runs one headless egui frame of the app and tessellates it; returns the CPU time.
fn ui_frame(ctx: &egui::Context, app: &mut DebuggerApp, events: Vec<egui::Event>) -> Duration {
    let input = egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(1600.0, 1000.0),
        )),
        events,
        ..Default::default()
    };
    let t = Instant::now();
    let mut out = ctx.run_ui(input, |ui| app.ui(ui));
    let prims = ctx.tessellate(std::mem::take(&mut out.shapes), out.pixels_per_point);
    let dt = t.elapsed();
    black_box(prims.len());
    out.textures_delta.clear();
    dt
}

/// Mean and worst CPU time of 20 UI frames with the pointer events `events`.
fn time_paints(
    ctx: &egui::Context,
    app: &mut DebuggerApp,
    events: &[egui::Event],
) -> (Duration, Duration) {
    let mut worst = Duration::ZERO;
    let mut total = Duration::ZERO;
    for _ in 0..20 {
        let d = ui_frame(ctx, app, events.to_vec());
        worst = worst.max(d);
        total += d;
    }
    (total / 20, worst)
}

fn bench_ingest(c: &mut Criterion) {
    let bytes = synth_bytes(1_000_000);
    let mut probe = Model::new();
    probe.apply_bytes(&bytes);
    let frames = probe.frame_count();
    drop(probe);
    let mut g = c.benchmark_group("model");
    g.sample_size(10);
    g.throughput(Throughput::Elements(frames));
    g.bench_function("ingest_1M_frames", |b| {
        b.iter_batched(
            Model::new,
            |mut m| {
                m.apply_bytes(&bytes);
                m
            },
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
    c.bench_function("floor/two_instant_now", |b| {
        b.iter(|| {
            black_box(Instant::now());
            black_box(Instant::now());
        })
    });
}

fn bench_big(c: &mut Criterion, summary: &mut Vec<String>) {
    let n = frames_env();
    if n == 0 {
        return;
    }
    let floor = floor_ns();
    summary.push(format!("floor (two Instant::now): {floor:.1} ns"));

    // ---- the model alone: ingest rate and memory ----
    let bytes = synth_bytes(n);
    let rss0 = rss_bytes();
    let t = Instant::now();
    let mut model = Model::new();
    model.apply_bytes(&bytes);
    let dt = t.elapsed();
    let frames = model.frame_count();
    let rss = rss_bytes().saturating_sub(rss0);
    drop(bytes);
    summary.push(format!(
        "model ingest: {frames} frames in {:.2} s = {:.2} M frames/s ({:.0}x floor per frame)",
        dt.as_secs_f64(),
        frames as f64 / dt.as_secs_f64() / 1e6,
        dt.as_nanos() as f64 / frames as f64 / floor
    ));
    summary.push(format!(
        "model memory: {:.1} heap bytes/frame, {:.1} RSS bytes/frame, {} labels",
        model.heap_bytes() as f64 / frames as f64,
        rss as f64 / frames as f64,
        model.labels().len()
    ));

    // ---- level-of-detail queries over every row ----
    let (t_min, t_max) = model.time_range().unwrap();
    let rows: Vec<(u32, u32)> = model
        .lanes()
        .iter()
        .enumerate()
        .flat_map(|(l, lane)| (0..lane.rows.len() as u32).map(move |r| (l as u32, r)))
        .collect();
    let mut g = c.benchmark_group("lod_all_rows");
    g.sample_size(20);
    let span = t_max - t_min;
    for (name, width) in [
        ("fit", span),
        ("1pct", span / 100),
        ("1ms", 1_000_000),
        ("10us", 10_000),
    ] {
        let t0 = t_min + span / 2 - width / 2;
        let px_ns = width as f64 / 1500.0;
        let mut out = Vec::with_capacity(1 << 16);
        g.bench_with_input(BenchmarkId::from_parameter(name), &width, |b, _| {
            b.iter(|| {
                let mut boxes = 0;
                for &(l, r) in &rows {
                    out.clear();
                    model.lod_row(l, r, t0, t0 + width, px_ns, &mut out);
                    boxes += out.len();
                }
                black_box(boxes)
            })
        });
    }
    g.finish();

    // ---- the aggregated flame graph: aggregate + layout ----
    let tree = model.call_tree();
    let time = |f: &mut dyn FnMut() -> usize| {
        let mut best = Duration::MAX;
        let mut n = 0;
        for _ in 0..5 {
            let t = Instant::now();
            n = f();
            best = best.min(t.elapsed());
        }
        (best, n)
    };
    for (name, scope) in [
        ("whole log", Scope::All),
        (
            "10 % range",
            Scope::Range(t_min + span / 2, t_min + span / 2 + span / 10),
        ),
        ("whole log as a range", Scope::Range(t_min, t_max + 1)),
    ] {
        let (build, nodes) = time(&mut || {
            let agg = Aggregate::build(&model, &scope);
            calltree::layout(tree, &agg, calltree::ROOT, 1.0 / 1500.0).len() + agg.count.len()
        });
        summary.push(format!(
            "flame graph of the {name}: aggregate + layout {:.1} ms ({} call paths, {:.2} ns/frame = {:.3}x floor)",
            build.as_secs_f64() * 1e3,
            tree.len(),
            build.as_nanos() as f64 / frames as f64,
            build.as_nanos() as f64 / frames as f64 / floor,
        ));
        black_box(nodes);
    }

    // ---- the duration histogram of the most frequent label ----
    let (busiest, count) = model
        .stats()
        .iter()
        .map(|(id, s)| (id, s.count()))
        .max_by_key(|&(_, c)| c)
        .unwrap();
    let (hist, bars) = time(&mut || model.histogram(busiest, 48, None).bins.len());
    summary.push(format!(
        "histogram of the busiest label ({count} frames of {frames}): {:.1} ms for {bars} bars ({:.1} ns per frame of the log)",
        hist.as_secs_f64() * 1e3,
        hist.as_nanos() as f64 / frames as f64,
    ));
    drop(model);

    // ---- the app end to end: write a log, open it, paint until loaded ----
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let written = synth::write_log(
        dir.path(),
        &SynthOptions {
            frames: n,
            threads: 8,
            with_data: false,
            ..Default::default()
        },
    )
    .unwrap();
    summary.push(format!(
        "wrote a {written}-frame log in {:.1} s",
        t.elapsed().as_secs_f64()
    ));
    let ctx = egui::Context::default();
    let t = Instant::now();
    let mut app = DebuggerApp::open(dir.path());
    let mut first_paint_with_frames = None;
    let mut paints = 0;
    loop {
        ui_frame(&ctx, &mut app, vec![]);
        paints += 1;
        let frames = app.model().map_or(0, |m| m.frame_count());
        if first_paint_with_frames.is_none() && frames > 0 {
            first_paint_with_frames = Some(t.elapsed());
        }
        let s = app.ingest_status();
        if s.caught_up && frames >= written {
            break;
        }
        std::thread::sleep(Duration::from_millis(16));
    }
    // One more paint so the final state is on screen.
    ui_frame(&ctx, &mut app, vec![]);
    let loaded = t.elapsed();
    summary.push(format!(
        "open -> first paint with frames: {:.0} ms; open -> all {written} frames loaded and painted: {:.2} s ({:.2} M frames/s through LogReader + model, {paints} paints meanwhile)",
        first_paint_with_frames.unwrap_or_default().as_secs_f64() * 1e3,
        loaded.as_secs_f64(),
        written as f64 / loaded.as_secs_f64() / 1e6,
    ));

    // ---- UI CPU per frame at several zoom levels ----
    let (t_min, t_max) = app.model().unwrap().time_range().unwrap();
    let span = t_max - t_min;
    let mut g = c.benchmark_group("ui_frame");
    g.sample_size(20);
    for (name, width) in [
        ("fit", 0),
        ("1pct", span / 100),
        ("1ms", 1_000_000),
        ("10us", 10_000),
    ] {
        if width == 0 {
            app.timeline_mut().zoom_to_fit();
        } else {
            let s = t_min + span / 2 - width / 2;
            app.timeline_mut().zoom_to(s, s + width);
        }
        // Hover in the middle so the tooltip and hit test are part of the frame.
        let hover = vec![egui::Event::PointerMoved(egui::pos2(600.0, 200.0))];
        for _ in 0..3 {
            ui_frame(&ctx, &mut app, hover.clone());
        }
        let (mean, worst) = time_paints(&ctx, &mut app, &hover);
        summary.push(format!(
            "ui frame (build + tessellate, 1600x1000, no GPU) at zoom {name}: mean {:.2} ms, worst {:.2} ms, {} boxes for {} frames",
            mean.as_secs_f64() * 1e3,
            worst.as_secs_f64() * 1e3,
            app.timeline().drawn.boxes,
            app.timeline().drawn.frames
        ));
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| ui_frame(&ctx, &mut app, hover.clone()))
        });
    }
    g.finish();

    // ---- UI CPU per frame of the aggregated flame graph (whole log) ----
    app.set_view(CentralView::FlameGraph);
    let hover = vec![egui::Event::PointerMoved(egui::pos2(600.0, 120.0))];
    let first = ui_frame(&ctx, &mut app, hover.clone());
    let (mean, worst) = time_paints(&ctx, &mut app, &hover);
    summary.push(format!(
        "ui frame of the aggregated flame graph (whole log): first {:.2} ms (builds it), then mean {:.2} ms, worst {:.2} ms, {} labeled boxes",
        first.as_secs_f64() * 1e3,
        mean.as_secs_f64() * 1e3,
        worst.as_secs_f64() * 1e3,
        app.flame_graph().drawn.len()
    ));
}

/// Loads a log written by the stress example (2 threads, 4 deep, data on every 100th frame)
/// through the window's ingest (reader + applier threads, no UI), against a floor measured in
/// the same run: `LogReader` decoding the same log. `STRESS_FRAMES` (default 10,000,000; 0
/// skips it) sets its size.
fn bench_stress_load(summary: &mut Vec<String>) {
    let n: u64 = std::env::var("STRESS_FRAMES")
        .ok()
        .and_then(|s| s.replace('_', "").parse().ok())
        .unwrap_or(10_000_000);
    if n == 0 {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    let t = Instant::now();
    let report = stopwatch::stress::run(&stopwatch::stress::StressOptions {
        dir: Some(log.clone()),
        threads: 2,
        frames: n / 2,
        mode: stopwatch::BufferingMode::Block,
        data_every: 100,
        depth: 4,
        ..Default::default()
    })
    .unwrap();
    summary.push(format!(
        "stress log: {} records written in {:.1} s",
        report.emitted,
        t.elapsed().as_secs_f64()
    ));
    // The floor: decoding every record (best of three, the file in the page cache).
    let mut floor = Duration::MAX;
    let (mut records, mut frames) = (0u64, 0u64);
    for _ in 0..3 {
        let t = Instant::now();
        (records, frames) = (0, 0);
        framelog::LogReader::open(&log)
            .unwrap()
            .read_available(|_, rec| {
                records += 1;
                frames += u64::from(matches!(black_box(&rec), formats::Record::Start(_)));
            })
            .unwrap();
        floor = floor.min(t.elapsed());
    }
    // The load: open to caught up (everything in the model), best of three.
    let mut load = Duration::MAX;
    let mut loaded = 0;
    let mut last = None;
    for _ in 0..3 {
        let t = Instant::now();
        let ing = debugger_gui::ingest::Ingest::start(&log, false);
        assert!(ing.wait_caught_up(Duration::from_secs(600)));
        load = load.min(t.elapsed());
        loaded = ing.model().frame_count();
        last = Some(ing);
    }
    assert_eq!(loaded, frames, "every frame loaded");
    // The fast load's statistics are `framelog stats`' own, label by label.
    let mut cli = framelog::stats::StatsBuilder::new();
    framelog::LogReader::open(&log)
        .unwrap()
        .read_available(|_, rec| cli.add(&rec))
        .unwrap();
    let (_, cli) = cli.finish();
    let ing = last.unwrap();
    let m = ing.model();
    for l in &cli {
        let s = m.stats().get(m.labels().get(&l.label).unwrap());
        assert_eq!(
            (s.count(), s.total_ns(), s.p99_ns(), s.max_ns()),
            (l.count, l.total_ns, l.p99_ns, l.max_ns),
            "{}",
            l.label
        );
    }
    drop(m);
    drop(ing);
    // Where the time goes: the reader's share (decode, intern labels, index contexts, pair,
    // carry ends) and the model's (layout, rows, call tree, statistics, contexts), one after
    // the other on this thread, a slice at a time into a reused batch as the ingest does.
    let mut digest = debugger_gui::feed::ReaderStage::default();
    let mut labels = debugger_gui::feed::LabelMap::default();
    let mut batch = debugger_gui::feed::Batch::default();
    let mut model = Model::new();
    // As the ingest does (it estimates the total from the log's size).
    model.expect_frames(frames);
    let mut reader = framelog::LogReader::open(&log).unwrap();
    let (mut read_t, mut model_t) = (Duration::ZERO, Duration::ZERO);
    loop {
        batch.clear();
        let t = Instant::now();
        let n = reader
            .read_some(4 << 20, |_, rec| digest.push(&rec, &mut batch))
            .unwrap();
        read_t += t.elapsed();
        if n == 0 {
            break;
        }
        let t = Instant::now();
        debugger_gui::feed::apply_batch(&mut model, &batch, &mut labels).unwrap();
        model_t += t.elapsed();
    }
    assert_eq!(model.frame_count(), frames);
    drop(model);
    // The same log as if its starts recorded their parents (type 6, each naming the frame it
    // nests in on its thread, as a recording program names them): model building again.
    let mut digest = debugger_gui::feed::ReaderStage::default();
    let mut labels = debugger_gui::feed::LabelMap::default();
    let mut model = Model::new();
    model.expect_frames(frames);
    let mut reader = framelog::LogReader::open(&log).unwrap();
    let mut stacks: std::collections::HashMap<(u8, u32), Vec<u32>> = Default::default();
    let mut thread = [0u32; 256];
    let mut parents_t = Duration::ZERO;
    loop {
        batch.clear();
        let n = reader
            .read_some(4 << 20, |_, rec| match rec {
                formats::Record::ThreadInfo(t) => {
                    thread[t.worker as usize] = t.thread;
                    digest.push(&rec, &mut batch);
                }
                formats::Record::Start(mut s) => {
                    let stack = stacks
                        .entry((s.worker, thread[s.worker as usize]))
                        .or_default();
                    s.parent = stack
                        .last()
                        .map_or(formats::Parent::Root, |&p| formats::Parent::Frame(p));
                    stack.push(s.id);
                    digest.push(&formats::Record::Start(s), &mut batch);
                }
                formats::Record::End(e) => {
                    let stack = stacks
                        .entry((e.worker, thread[e.worker as usize]))
                        .or_default();
                    if let Some(i) = stack.iter().rposition(|&id| id == e.id) {
                        stack.remove(i);
                    }
                    digest.push(&rec, &mut batch);
                }
                _ => digest.push(&rec, &mut batch),
            })
            .unwrap();
        if n == 0 {
            break;
        }
        let t = Instant::now();
        debugger_gui::feed::apply_batch(&mut model, &batch, &mut labels).unwrap();
        parents_t += t.elapsed();
    }
    assert_eq!(model.frame_count(), frames);
    assert_eq!(model.parent_counts(), (frames, 0), "every parent recorded");
    drop(model);
    let ns = |d: Duration| d.as_nanos() as f64 / frames as f64;
    let fps = |d: Duration| frames as f64 / d.as_secs_f64() / 1e6;
    summary.push(format!(
        "stress log load (ingest threads, no UI): {frames} frames in {:.2} s = {:.2} M frames/s; floor (LogReader decoding it): {:.2} s = {:.2} M frames/s ({:.1} M records/s); load/floor time {:.2}x",
        load.as_secs_f64(),
        fps(load),
        floor.as_secs_f64(),
        fps(floor),
        records as f64 / floor.as_secs_f64() / 1e6,
        load.as_secs_f64() / floor.as_secs_f64(),
    ));
    summary.push(format!(
        "  per frame, one stage after the other on one thread: reader stage (decode, labels, contexts, pairing) {:.0} ns, model building {:.0} ns; the load runs them on two threads",
        ns(read_t),
        ns(model_t),
    ));
    summary.push(format!(
        "  model building with recorded parents (the same log, its starts naming their parents): {:.0} ns a frame, {:.3}x the inferred",
        ns(parents_t),
        parents_t.as_secs_f64() / model_t.as_secs_f64(),
    ));
}

/// Issue 30's budget: a log with N frames plus N/10 plot values and N/100 messages loads
/// within 10 % of the same log without them (same workload, same run, best of three loads
/// each, alternating). `INSTANTS_ONLY=1` runs only this.
fn bench_instants_load(summary: &mut Vec<String>) {
    let n = frames_env();
    let dir = tempfile::tempdir().unwrap();
    let mut logs = Vec::new();
    for instants in [false, true] {
        let log = dir.path().join(if instants { "instants" } else { "plain" });
        let opts = SynthOptions {
            frames: n,
            threads: 8,
            with_data: false,
            instants,
            ..Default::default()
        };
        // Compacted whole: both logs alike (see `write_compacted_log`).
        synth::write_compacted_log(&log, &opts).unwrap();
        logs.push(log);
    }
    let mut best = [Duration::MAX; 2];
    let mut counts = [(0, 0, 0); 2];
    for _ in 0..3 {
        for (k, log) in logs.iter().enumerate() {
            let t = Instant::now();
            let ing = debugger_gui::ingest::Ingest::start(log, false);
            assert!(ing.wait_caught_up(Duration::from_secs(600)));
            best[k] = best[k].min(t.elapsed());
            let m = ing.model();
            counts[k] = (m.frame_count(), m.plots().value_count(), m.messages().len());
        }
    }
    assert_eq!(counts[0].0, counts[1].0, "the same frames");
    assert_eq!((counts[0].1, counts[0].2), (0, 0));
    summary.push(format!(
        "plots and messages: {} frames load in {:.2} s; with {} plot values and {} messages {:.2} s: {:.3}x (budget 1.10x)",
        counts[0].0,
        best[0].as_secs_f64(),
        counts[1].1,
        counts[1].2,
        best[1].as_secs_f64(),
        best[1].as_secs_f64() / best[0].as_secs_f64()
    ));
}

/// Async time on a 1 M-frame log (`ASYNC_ONLY=1` runs only this): the synthetic log with a
/// frame-polls record for every context root (an asynchronous request), and a slow poll in
/// every hundredth. Ingest with them against without; the flame graph's busy weight against
/// its time weight, for the whole log, a range covering it and the contexts of one label.
fn bench_async_time(summary: &mut Vec<String>) {
    use formats::{FramePolls, Record, SlowPoll};
    let plain = synth_bytes(1_000_000);
    let mut probe = Model::new();
    probe.apply_bytes(&plain);
    let mut roots = Vec::new();
    probe.for_each_frame(|_, row, i| {
        if row.id(i) == row.context(i) && !row.is_open(i) {
            roots.push((row.id(i), row.start(i), row.end(i)));
        }
    });
    let worker = probe.lanes()[0].worker;
    // Each root's records where a writer puts them: a slow poll as it ends (during the
    // frame), the frame's polls right before its end.
    let by_id: rustc_hash::FxHashMap<u32, (usize, u64, u64)> = roots
        .iter()
        .enumerate()
        .map(|(k, &(id, start, end))| (id, (k, start, end)))
        .collect();
    let mut with_polls = Vec::with_capacity(plain.len() + roots.len() * 40);
    for item in formats::RecordIter::new(&plain, 0) {
        let rec = item.expect("the synthetic log decodes").1;
        if let Record::End(e) = &rec
            && e.worker == worker
            && let Some(&(k, start, end)) = by_id.get(&e.id)
        {
            let d = end - start;
            if k % 100 == 0 {
                Record::SlowPoll(SlowPoll {
                    id: e.id,
                    worker,
                    timestamp: start,
                    duration_ns: d / 2,
                })
                .encode_to_vec(&mut with_polls);
            }
            Record::FramePolls(FramePolls {
                id: e.id,
                worker,
                timestamp: end,
                flags: 1,
                polls: 4,
                busy_ns: d / 3,
                queued_ns: d / 10,
                longest_poll_ns: d / 6,
                first_poll_ns: d / 20,
                slow_polls: u64::from(k % 100 == 0),
            })
            .encode_to_vec(&mut with_polls);
        }
        rec.encode_to_vec(&mut with_polls);
    }
    drop(probe);
    let best_of = |n: usize, f: &mut dyn FnMut()| {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .min()
            .unwrap()
    };
    let ingest = |bytes: &[u8]| {
        best_of(3, &mut || {
            let mut m = Model::new();
            m.apply_bytes(bytes);
            black_box(m.frame_count());
        })
    };
    // Re-encoded as the polls' log is, so that the two differ only by the polls.
    let mut reencoded = Vec::with_capacity(plain.len());
    for item in formats::RecordIter::new(&plain, 0) {
        item.expect("the synthetic log decodes")
            .1
            .encode_to_vec(&mut reencoded);
    }
    let (t_plain, t_polls) = (ingest(&reencoded), ingest(&with_polls));
    // The window's way: the reader stage's batches, applied to the model.
    let staged = |bytes: &[u8]| {
        use debugger_gui::feed::{Batch, LabelMap, ReaderStage, apply_batch};
        best_of(3, &mut || {
            let (mut stage, mut labels, mut m) =
                (ReaderStage::default(), LabelMap::default(), Model::new());
            let mut batch = Batch::default();
            for (n, item) in formats::RecordIter::new(bytes, 0).enumerate() {
                stage.push(&item.unwrap().1, &mut batch);
                if n % 4096 == 4095 {
                    apply_batch(&mut m, &batch, &mut labels).unwrap();
                    batch.clear();
                }
            }
            apply_batch(&mut m, &batch, &mut labels).unwrap();
            black_box(m.frame_count());
        })
    };
    let (s_plain, s_polls) = (staged(&reencoded), staged(&with_polls));
    let mut m = Model::new();
    m.apply_bytes(&with_polls);
    summary.push(format!(
        "async time: ingest {} frames {:.0} ms, with {} frame-polls and {} slow-poll records {:.0} ms \
         (Model::apply_bytes); through the reader stage {:.0} ms and {:.0} ms",
        m.frame_count(),
        t_plain.as_secs_f64() * 1e3,
        m.polls().len(),
        m.polls().slow_polls().len(),
        t_polls.as_secs_f64() * 1e3,
        s_plain.as_secs_f64() * 1e3,
        s_polls.as_secs_f64() * 1e3
    ));
    let (lo, hi) = m.time_range().unwrap();
    let label = m.label_of(m.find(formats::FrameKey::new(worker, roots[0].0)).unwrap());
    let scopes = [
        ("whole log", Scope::All),
        ("range over all of it", Scope::Range(lo, hi + 1)),
        (
            "contexts of one root label",
            Scope::Contexts(calltree::contexts_with_root_label(&m, label)),
        ),
    ];
    for (name, scope) in scopes {
        let time = best_of(5, &mut || {
            black_box(Aggregate::build(&m, &scope));
        });
        let busy = best_of(5, &mut || {
            black_box(Aggregate::build_busy(&m, &scope));
        });
        summary.push(format!(
            "async time: flame graph of the {name}: busy weight {:.2} ms, time weight {:.2} ms",
            busy.as_secs_f64() * 1e3,
            time.as_secs_f64() * 1e3
        ));
    }
}

fn main() {
    let mut summary = Vec::new();
    if std::env::var("ASYNC_ONLY").is_ok_and(|v| v == "1") {
        bench_async_time(&mut summary);
        for line in summary {
            println!("{line}");
        }
        return;
    }
    if std::env::var("INSTANTS_ONLY").is_ok_and(|v| v == "1") {
        bench_instants_load(&mut summary);
        for line in summary {
            println!("{line}");
        }
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench_stress_load(&mut summary);
    bench_instants_load(&mut summary);
    bench_async_time(&mut summary);
    bench_ingest(&mut c);
    bench_big(&mut c, &mut summary);
    c.final_summary();
    println!("\n==== debugger-gui summary ({} frames) ====", frames_env());
    for line in summary {
        println!("{line}");
    }
}
