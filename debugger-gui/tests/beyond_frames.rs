//! Headless UI tests (egui_kittest) of what a log holds beside frames (issue 30): plot tracks
//! under the timeline, message markers and the Messages tab, allocation columns and the
//! aggregated flame graph's weight. The log is written with formats' encoders through
//! framelog's writer, as a program's recorder would.

mod common;
use common::{harness, step_until};

use std::path::Path;

use debugger_gui::DebuggerApp;
use debugger_gui::app::BottomTab;
use egui::Role;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use formats::{
    Category, FrameAlloc, FrameEnd, FrameKey, FrameStart, Level, Message, Plot, PlotMode, PlotUnit,
    Record, ThreadInfo,
};
use framelog::{LogWriter, WriterOptions};

const T0: u64 = 1_700_000_000_000_000_000;
const MS: u64 = 1_000_000;

/// Writes ten requests on thread 1 (10 ms apart, each 4 ms with a 2 ms "db query"), a
/// "queue depth" value (in bytes, so the unit shows) every millisecond, a message inside each
/// query ("cache miss for user N", the 7th a warning), one error outside frames, and each
/// query's and request's allocations. Returns the key of the query the 7th message was written in.
fn write_log(dir: &Path) -> FrameKey {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            process_name: Some("service".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let worker = w.worker();
    let first = w.reserve_ids(20).unwrap();
    let mut b = Vec::new();
    Record::ThreadInfo(ThreadInfo {
        worker,
        thread: 1,
        timestamp: T0,
        name: "main",
    })
    .encode_to_vec(&mut b);
    let mut seventh = None;
    for i in 0..10u32 {
        let t = T0 + u64::from(i) * 10 * MS;
        let (req, query) = (first + 2 * i, first + 2 * i + 1);
        let start = |id, t, label, category| {
            Record::Start(FrameStart {
                parent: formats::Parent::NotRecorded,
                id,
                worker,
                timestamp: t,
                context: req,
                category,
                label,
            })
        };
        start(req, t, "GET /users/:id", Category::HTTP).encode_to_vec(&mut b);
        start(query, t + MS, "db query", Category::DATABASE).encode_to_vec(&mut b);
        let text = format!("cache miss for user {i}");
        Record::Message(Message {
            frame: query,
            worker,
            timestamp: t + MS + MS / 2,
            context: req,
            level: if i == 7 { Level::WARN } else { Level::INFO },
            text: &text,
            fields: None,
        })
        .encode_to_vec(&mut b);
        if i == 7 {
            seventh = Some(FrameKey::new(worker, query));
        }
        Record::FrameAlloc(FrameAlloc {
            id: query,
            worker,
            timestamp: t + 3 * MS,
            allocs: 40_000,
            alloc_bytes: 3 << 20,
            frees: 39_000,
            freed_bytes: 3 << 20,
        })
        .encode_to_vec(&mut b);
        Record::End(FrameEnd {
            id: query,
            worker,
            timestamp: t + 3 * MS,
        })
        .encode_to_vec(&mut b);
        // The request's counts include its query's.
        Record::FrameAlloc(FrameAlloc {
            id: req,
            worker,
            timestamp: t + 4 * MS,
            allocs: 50_000,
            alloc_bytes: 5 << 20,
            frees: 49_000,
            freed_bytes: 5 << 20,
        })
        .encode_to_vec(&mut b);
        Record::End(FrameEnd {
            id: req,
            worker,
            timestamp: t + 4 * MS,
        })
        .encode_to_vec(&mut b);
        for k in 0..10u64 {
            Record::Plot(Plot {
                worker,
                timestamp: t + k * MS,
                value: ((u64::from(i) * 10 + k) % 17) as f64 * 1024.0,
                mode: PlotMode::Value,
                unit: PlotUnit::BYTES,
                name: "queue depth",
            })
            .encode_to_vec(&mut b);
        }
        // A second series: one value a request.
        Record::Plot(Plot {
            worker,
            timestamp: t,
            value: f64::from(i % 3),
            mode: PlotMode::Value,
            unit: PlotUnit::COUNT,
            name: "inflight",
        })
        .encode_to_vec(&mut b);
    }
    Record::Message(Message {
        frame: 0,
        worker,
        timestamp: T0 + 95 * MS,
        context: 0,
        level: Level::ERROR,
        text: "shutting down",
        fields: None,
    })
    .encode_to_vec(&mut b);
    w.append_frames(&b).unwrap();
    seventh.unwrap()
}

fn loaded(h: &mut Harness<'_, DebuggerApp>) {
    step_until(h, "the log with its messages and plots", |h| {
        let app = h.state();
        app.model().is_some_and(|m| {
            m.frame_count() == 20 && m.messages().len() == 11 && m.plots().value_count() == 110
        }) && app.ingest_status().caught_up
    });
}

#[test]
fn a_plot_track_is_drawn_under_the_timeline_and_hover_shows_its_value() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path());
    let mut h = harness(DebuggerApp::open(dir.path()));
    loaded(&mut h);
    step_until(&mut h, "the plot track", |h| {
        h.query_by_label("queue depth").is_some()
    });
    let track = h
        .get_by_role_and_label(Role::Canvas, "Plot queue depth")
        .rect();
    let flame = h.get_by_role_and_label(Role::Canvas, "Flamegraph").rect();
    assert!(track.top() >= flame.bottom() - 1.0, "under the timeline");
    assert!(
        (track.left() - flame.left()).abs() < 2.0,
        "on its time axis"
    );
    assert_eq!(h.state().plot_tracks().drawn, ["inflight", "queue depth"]);
    // Each track its full height, one under the other (a title once moved the layout's cursor
    // back up, and each track was drawn over the one before).
    let first = h
        .get_by_role_and_label(Role::Canvas, "Plot inflight")
        .rect();
    for r in [first, track] {
        assert!(
            (r.height() - debugger_gui::ui::plot_tracks::TRACK_H).abs() < 1.0,
            "{r:?}"
        );
    }
    assert!(
        first.bottom() <= track.top() + 0.5,
        "{first:?} over {track:?}"
    );
    // Hover in the middle: the value in force there, with its unit, and the time.
    h.hover_at(track.center());
    h.step();
    h.step();
    let hovered = h.state().plot_tracks().hovered.clone();
    let text = hovered.expect("a hover value");
    assert!(
        text.starts_with("queue depth ") && (text.contains(" KiB at ") || text.contains(" B at ")),
        "{text}"
    );
}

#[test]
fn the_messages_tab_lists_filters_and_a_click_selects_the_messages_frame() {
    let dir = tempfile::tempdir().unwrap();
    let key = write_log(dir.path());
    let mut h = harness(DebuggerApp::open(dir.path()));
    loaded(&mut h);
    h.get_by_label("Messages").click();
    step_until(&mut h, "the messages listed", |h| {
        h.query_by_label("cache miss for user 3").is_some()
    });
    assert_eq!(h.state().tab(), BottomTab::Messages);
    assert!(h.query_by_label("11 of 11 messages").is_some());
    // Only warnings and errors.
    for level in ["info 9", "debug 0", "trace 0"] {
        h.get_by_label(level).click();
    }
    step_until(&mut h, "the level filter", |h| {
        h.query_by_label("2 of 11 messages").is_some()
    });
    assert!(h.query_by_label("cache miss for user 3").is_none());
    assert!(h.query_by_label("shutting down").is_some());
    // Click the warning: its frame is selected and shown.
    h.get_by_label("cache miss for user 7").click();
    step_until(&mut h, "the message's frame selected", |h| {
        h.state().selected().is_some()
    });
    let app = h.state();
    let sel = app.selected().unwrap();
    let info = app.model().unwrap().info(sel).unwrap();
    assert_eq!(info.key, key);
    assert_eq!(info.label, "db query");
    let (a, b) = {
        let f = app.timeline();
        let base = f.base.unwrap() as f64;
        (base + f.start, base + f.start + f.width)
    };
    assert!(
        (info.start as f64) > a && ((info.start + info.duration) as f64) < b,
        "the timeline shows it"
    );
    // A text filter.
    h.get_by_label("warn 1").click();
    h.get_by_label("info 9").click();
    h.step();
    h.state_mut().messages_panel_mut().filter.text = "USER 4".into();
    step_until(&mut h, "the text filter", |h| {
        h.query_by_label("1 of 11 messages").is_some()
    });
    assert!(h.query_by_label("cache miss for user 4").is_some());
}

#[test]
fn message_markers_on_the_lane_show_their_text() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path());
    let mut h = harness(DebuggerApp::open(dir.path()));
    loaded(&mut h);
    step_until(&mut h, "markers", |h| {
        !h.state().timeline().drawn.markers.is_empty()
    });
    let markers = h.state().timeline().drawn.markers.clone();
    // One per message (they are far apart at this zoom), the error's red one among them.
    let n: u32 = markers.iter().map(|m| m.2.count).sum();
    assert_eq!(n, 11);
    assert!(markers.iter().any(|m| m.2.level == Level::ERROR));
    let warn = markers.iter().find(|m| m.2.level == Level::WARN).unwrap();
    h.hover_at(warn.0.center());
    step_until(&mut h, "the marker's tooltip", |h| {
        h.query_by_label("cache miss for user 7").is_some()
    });
}

#[test]
fn statistics_show_allocations_per_frame_and_the_flame_graph_weighs_by_bytes() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path());
    let mut h = harness(DebuggerApp::open(dir.path()));
    loaded(&mut h);
    h.get_by_label("Statistics").click();
    step_until(&mut h, "allocation columns", |h| {
        h.query_by_label("Allocs/frame").is_some()
    });
    // 40,000 allocations and 3 MiB per "db query" frame, 50,000 and 5 MiB per request.
    for text in ["40000", "3.0 MiB", "50000", "5.0 MiB"] {
        assert!(h.query_by_label(text).is_some(), "{text}");
    }
    // The aggregated flame graph, weighted by bytes.
    h.get_by_label("Flame graph").click();
    h.step();
    h.get_by_label("Bytes allocated").click();
    step_until(&mut h, "the bytes weight", |h| {
        h.query_by_label_contains("50.0 MiB in this scope")
            .is_some()
    });
}
