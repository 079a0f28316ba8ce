//! Plots, messages and frame allocations (record types 7, 8, 9) through every command of the
//! `framelog` binary, run as a real process on a real log: dump, stats, check, compact,
//! recover and the Chrome export; damage in their batch costs that batch only.

mod common;

use std::path::Path;
use std::process::Output;

use common::{framelog, text};

use formats::{
    Category, FileKind, FrameAlloc, FrameEnd, FrameStart, Level, Message, Parent, Plot, PlotMode,
    PlotUnit, Record, ThreadInfo,
};
use framelog::{LogWriter, WriterOptions, segments};
use serde_json::Value;

fn encode(records: &[Record<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        r.encode_to_vec(&mut out);
    }
    out
}

const T: u64 = 1_700_000_000_000_000_000;

fn plot(w: u8, t: u64, name: &str, value: f64, unit: PlotUnit) -> Record<'_> {
    Record::Plot(Plot {
        worker: w,
        timestamp: T + t,
        value,
        mode: PlotMode::Value,
        unit,
        name,
    })
}

/// Three batches: a request frame with a plot value, a message with fields and its
/// allocations; then more plot values (the batch a test damages); then a frame without
/// allocations and a message outside every frame. Returns the worker and the byte offset of
/// the second batch in the first segment.
fn write_log(dir: &Path) -> (u8, u64) {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            pack: false,
            process_name: Some("instants".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let wk = w.worker();
    let fields = bson::to_vec(&bson::doc! { "user": 42_i64 }).unwrap();
    let start = |id, t, label| {
        Record::Start(FrameStart {
            id,
            worker: wk,
            timestamp: T + t,
            context: id,
            category: Category::HTTP,
            label,
            parent: Parent::Root,
        })
    };
    let end = |id, t| {
        Record::End(FrameEnd {
            id,
            worker: wk,
            timestamp: T + t,
        })
    };
    w.append_frames(&encode(&[
        Record::ThreadInfo(ThreadInfo {
            worker: wk,
            thread: 1,
            timestamp: T,
            name: "main",
        }),
        start(1, 0, "request"),
        plot(wk, 10, "queue depth", 1.0, PlotUnit::COUNT),
        Record::Message(Message {
            frame: 1,
            worker: wk,
            timestamp: T + 20,
            context: 1,
            level: Level::INFO,
            text: "cache miss",
            fields: Some(&fields),
        }),
        Record::FrameAlloc(FrameAlloc {
            id: 1,
            worker: wk,
            timestamp: T + 100,
            allocs: 10,
            alloc_bytes: 640,
            frees: 4,
            freed_bytes: 128,
        }),
        end(1, 100),
    ]))
    .unwrap();
    let second = std::fs::metadata(segments::segment_path(dir, FileKind::FrameLog, 1))
        .unwrap()
        .len();
    w.append_frames(&encode(&[
        plot(wk, 30, "queue depth", 5.0, PlotUnit::COUNT),
        plot(wk, 40, "queue depth", 3.0, PlotUnit::COUNT),
        plot(wk, 40, "rss", 1_048_576.0, PlotUnit::BYTES),
        plot(wk, 50, "rss", f64::NAN, PlotUnit::BYTES),
    ]))
    .unwrap();
    w.append_frames(&encode(&[
        start(2, 200, "idle"),
        end(2, 300),
        Record::Message(Message {
            frame: 0,
            worker: wk,
            timestamp: T + 400,
            context: 0,
            level: Level::WARN,
            text: "queue full",
            fields: None,
        }),
    ]))
    .unwrap();
    (wk, second)
}

fn json_lines(out: &Output) -> Vec<Value> {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of_type<'a>(v: &'a [Value], t: &str) -> Vec<&'a Value> {
    v.iter().filter(|r| r["type"] == t).collect()
}

#[test]
fn dump_stats_compact_and_recover_carry_plots_messages_and_allocations() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (wk, _) = write_log(dir.path());

    let dumped = json_lines(&framelog(&["dump", "--json", d]));
    let plots = of_type(&dumped, "plot");
    assert_eq!(plots.len(), 5);
    assert_eq!(plots[0]["name"], "queue depth");
    assert_eq!(plots[0]["value"], 1.0);
    assert_eq!(plots[0]["unit"], "count");
    assert_eq!(plots[3]["unit"], "bytes");
    assert!(plots[4]["value"].is_null(), "a gap is null: {}", plots[4]);
    let messages = of_type(&dumped, "message");
    assert_eq!(messages.len(), 2);
    assert_eq!(
        (
            &messages[0]["id"],
            &messages[0]["context"],
            &messages[0]["level"]
        ),
        (&Value::from(1), &Value::from(1), &Value::from("info"))
    );
    assert_eq!(messages[0]["text"], "cache miss");
    assert_eq!(messages[0]["fields"]["user"], 42);
    assert_eq!(
        (&messages[1]["id"], &messages[1]["level"]),
        (&Value::from(0), &Value::from("warn"))
    );
    let allocs = of_type(&dumped, "frame_alloc");
    assert_eq!(allocs.len(), 1);
    assert_eq!(
        [
            &allocs[0]["allocs"],
            &allocs[0]["alloc_bytes"],
            &allocs[0]["frees"],
            &allocs[0]["freed_bytes"]
        ],
        [
            &Value::from(10),
            &Value::from(640),
            &Value::from(4),
            &Value::from(128)
        ]
    );

    let stats = framelog(&["stats", "--json", d]);
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    let s: Value = serde_json::from_slice(&stats.stdout).unwrap();
    let q = s["plots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "queue depth")
        .unwrap();
    assert_eq!(
        (&q["min"], &q["mean"], &q["max"], &q["count"]),
        (
            &Value::from(1.0),
            &Value::from(3.0),
            &Value::from(5.0),
            &Value::from(3)
        )
    );
    let rss = s["plots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "rss")
        .unwrap();
    assert_eq!(
        (&rss["gaps"], &rss["max"], &rss["worker"]),
        (&Value::from(1), &Value::from(1_048_576.0), &Value::from(wk))
    );
    assert_eq!(s["messages"], serde_json::json!({"warn": 1, "info": 1}));
    let request = s["labels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["label"] == "request")
        .unwrap();
    assert_eq!(
        (&request["allocs"], &request["alloc_bytes"]),
        (&Value::from(10), &Value::from(640))
    );
    assert_eq!(s["alloc_frames"], 1);

    let human = text(&framelog(&["stats", d]).stdout);
    assert!(human.contains("messages   1 warn, 1 info"), "{human}");
    assert!(human.contains("plots      2 series"), "{human}");
    let qline = human
        .lines()
        .find(|l| l.trim_start().starts_with("queue depth"))
        .expect(&human);
    assert!(
        qline.contains("min          1") && qline.contains("max          5"),
        "{qline}"
    );
    assert!(human.contains("allocs/frame"), "{human}");
    let rline = human
        .lines()
        .find(|l| l.starts_with("request"))
        .expect(&human);
    assert!(rline.contains("10.0") && rline.contains("640 B"), "{rline}");

    let check = framelog(&["check", d]);
    assert!(check.status.success(), "{}", text(&check.stdout));

    // Compacted, the log reads back the same records.
    let compacted = tempfile::tempdir().unwrap();
    let c = compacted.path().join("log");
    copy_dir(dir.path(), &c);
    let out = framelog(&["compact", "--all", c.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        segments::list(&c, FileKind::FrameLog)
            .unwrap()
            .iter()
            .any(|&n| {
                let b = std::fs::read(segments::segment_path(&c, FileKind::FrameLog, n)).unwrap();
                b.len() >= 10 && u16::from_le_bytes([b[8], b[9]]) == formats::COMPACT_PLOTS_VERSION
            }),
        "the segment was compacted"
    );
    let again = json_lines(&framelog(&["dump", "--json", c.to_str().unwrap()]));
    let kinds = |v: &[Value]| -> Vec<Value> {
        v.iter()
            .filter(|r| r["type"] != "worker_info")
            .cloned()
            .collect()
    };
    assert_eq!(kinds(&again), kinds(&dumped));

    // Recovered into a new directory: the same.
    let rec = dir.path().join("recovered");
    let out = framelog(&["recover", d, "--out", rec.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let recovered = json_lines(&framelog(&["dump", "--json", rec.to_str().unwrap()]));
    assert_eq!(of_type(&recovered, "plot").len(), 5);
    assert_eq!(of_type(&recovered, "message"), messages);
    assert_eq!(of_type(&recovered, "frame_alloc"), allocs);
}

#[test]
fn damage_in_the_plots_batch_costs_that_batch_only() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (_, second) = write_log(dir.path());
    // A byte in the middle of the second batch's records (after its 32-byte batch header).
    let seg = segments::segment_path(dir.path(), FileKind::FrameLog, 1);
    let mut bytes = std::fs::read(&seg).unwrap();
    let at = second as usize + 32 + 60;
    bytes[at] ^= 0x5a;
    std::fs::write(&seg, &bytes).unwrap();

    let check = framelog(&["check", d]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check.stdout));
    let report = text(&check.stdout);
    assert!(
        report.contains(&format!("frames-000001.framelog at byte {second}")),
        "{report}"
    );

    let stats = framelog(&["stats", "--json", d]);
    assert!(stats.status.success(), "{}", text(&stats.stderr));
    let s: Value = serde_json::from_slice(&stats.stdout).unwrap();
    // The first batch's value and the third batch's frame and message are still there.
    let q = s["plots"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "queue depth")
        .unwrap();
    assert_eq!(
        (&q["count"], &q["max"]),
        (&Value::from(1), &Value::from(1.0))
    );
    assert!(
        s["plots"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["name"] != "rss")
    );
    assert_eq!(s["messages"], serde_json::json!({"warn": 1, "info": 1}));
    assert_eq!(s["frames"], 2);
    assert!(s["damaged_bytes"].as_u64().unwrap() > 0);
}

#[test]
fn chrome_export_draws_counters_instants_and_allocation_args() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let (wk, _) = write_log(dir.path());
    let out_file = dir.path().join("trace.json");
    let out = framelog(&[
        "export",
        d,
        "--format",
        "chrome",
        "-o",
        out_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let trace: Value = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    let counters: Vec<(String, f64, f64)> = events
        .iter()
        .filter(|e| e["ph"] == "C")
        .map(|e| {
            assert_eq!(e["pid"], wk);
            (
                e["name"].as_str().unwrap().to_owned(),
                e["ts"].as_f64().unwrap(),
                e["args"][if e["name"] == "rss" { "bytes" } else { "count" }]
                    .as_f64()
                    .unwrap(),
            )
        })
        .collect();
    // The gap (NaN) is left out; times are µs since the log's start.
    assert_eq!(
        counters,
        vec![
            ("queue depth".to_owned(), 0.010, 1.0),
            ("queue depth".to_owned(), 0.030, 5.0),
            ("queue depth".to_owned(), 0.040, 3.0),
            ("rss".to_owned(), 0.040, 1_048_576.0),
        ]
    );
    let instants: Vec<&Value> = events.iter().filter(|e| e["ph"] == "i").collect();
    assert_eq!(instants.len(), 2);
    let miss = instants.iter().find(|e| e["name"] == "cache miss").unwrap();
    assert_eq!(
        (&miss["s"], &miss["tid"], &miss["ts"]),
        (&Value::from("t"), &Value::from(1), &Value::from(0.02))
    );
    assert_eq!(miss["args"]["frame"], format!("{wk}:1"));
    assert_eq!(miss["args"]["fields"]["user"], 42);
    assert_eq!(miss["args"]["level"], "info");
    let begin = events
        .iter()
        .find(|e| e["ph"] == "B" && e["name"] == "request")
        .unwrap();
    assert_eq!(begin["args"]["allocs"], 10);
    assert_eq!(begin["args"]["alloc_bytes"], 640);
    let idle = events
        .iter()
        .find(|e| e["ph"] == "B" && e["name"] == "idle")
        .unwrap();
    assert!(idle["args"]["allocs"].is_null(), "{idle}");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A log whose program wrote hostile text and values: terminal escapes and newlines in a
/// label, a message, a thread, a process and a series name; infinities, NaN and 1e308; 30
/// series; and a frame whose end was written before its start (it moved threads).
fn write_hostile_log(dir: &Path) -> u8 {
    let w = LogWriter::open_with(
        dir,
        WriterOptions {
            pack: false,
            process_name: Some("evil\x1b]0;pwned\x07".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let wk = w.worker();
    let mut records = vec![
        Record::ThreadInfo(ThreadInfo {
            worker: wk,
            thread: 1,
            timestamp: T,
            name: "worker\x1b[2J",
        }),
        // Frame 2 ended on another thread, whose buffer reached the file first.
        Record::End(FrameEnd {
            id: 2,
            worker: wk,
            timestamp: T + 900,
        }),
        Record::Start(FrameStart {
            id: 1,
            worker: wk,
            timestamp: T,
            context: 1,
            category: Category::HTTP,
            label: "GET /\x1b[31mred\x1b[0m\nfake line",
            parent: Parent::Root,
        }),
        Record::Start(FrameStart {
            id: 2,
            worker: wk,
            timestamp: T + 100,
            context: 1,
            category: Category::DATABASE,
            label: "moved",
            parent: Parent::Frame(1),
        }),
        Record::Message(Message {
            frame: 1,
            worker: wk,
            timestamp: T + 200,
            context: 1,
            level: Level::WARN,
            text: "\x1b[31mRED\x1b[0m \x1b]0;title\x07 \x1b[2J\nsecond line",
            fields: None,
        }),
        plot(wk, 300, "+inf", f64::INFINITY, PlotUnit::COUNT),
        plot(wk, 301, "-inf", f64::NEG_INFINITY, PlotUnit::COUNT),
        plot(wk, 302, "nan", f64::NAN, PlotUnit::COUNT),
        plot(wk, 303, "huge", 1e308, PlotUnit::COUNT),
        plot(wk, 304, "huge bytes", 1e300, PlotUnit::BYTES),
        plot(wk, 305, "esc\x1b[1Aname", 1.0, PlotUnit::COUNT),
        Record::End(FrameEnd {
            id: 1,
            worker: wk,
            timestamp: T + 1000,
        }),
    ];
    let names: Vec<String> = (0..30).map(|i| format!("series {i:02}")).collect();
    for (i, n) in names.iter().enumerate() {
        // Series 00 has the most values, series 29 the fewest.
        for k in 0..(40 - i as u64) {
            records.push(plot(wk, 400 + k, n, k as f64, PlotUnit::COUNT));
        }
    }
    w.append_frames(&encode(&records)).unwrap();
    wk
}

#[test]
fn dump_and_stats_escape_what_a_program_wrote_for_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    write_hostile_log(dir.path());
    for args in [vec!["dump", d], vec!["stats", d, "--top", "0"]] {
        let out = framelog(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let printed = text(&out.stdout);
        let controls: Vec<char> = printed
            .chars()
            .filter(|c| c.is_control() && *c != '\n')
            .collect();
        assert!(
            controls.is_empty(),
            "{args:?} wrote control characters {controls:?}:\n{printed}"
        );
        for escaped in [
            "GET /\\x1b[31mred\\x1b[0m\\nfake line",
            "worker\\x1b[2J",
            "esc\\x1b[1Aname",
        ] {
            assert!(
                printed.contains(escaped) || args[0] == "stats" && escaped.starts_with("worker"),
                "{args:?} shows {escaped}:\n{printed}"
            );
        }
        // One record (or row) a line: the label's newline did not start a line of its own.
        assert!(
            !printed.lines().any(|l| l.starts_with("fake line")),
            "{printed}"
        );
    }
    let dumped = text(&framelog(&["dump", d]).stdout);
    assert!(
        dumped.contains("\\x1b[31mRED\\x1b[0m \\x1b]0;title\\x07 \\x1b[2J\\nsecond line"),
        "{dumped}"
    );
    assert!(dumped.contains("evil\\x1b]0;pwned\\x07"), "{dumped}");
    // JSON keeps the exact text (its escapes are JSON's).
    let json = json_lines(&framelog(&["dump", "--json", d]));
    let message = of_type(&json, "message")[0];
    assert_eq!(
        message["text"],
        "\x1b[31mRED\x1b[0m \x1b]0;title\x07 \x1b[2J\nsecond line"
    );
}

#[test]
fn non_finite_plot_values_stay_apart_in_dump_and_stats() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    write_hostile_log(dir.path());
    let json = json_lines(&framelog(&["dump", "--json", d]));
    let value = |name: &str| {
        of_type(&json, "plot")
            .into_iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("plot {name}"))["value"]
            .clone()
    };
    assert_eq!(
        value("+inf"),
        serde_json::json!({"$numberDouble": "Infinity"})
    );
    assert_eq!(
        value("-inf"),
        serde_json::json!({"$numberDouble": "-Infinity"})
    );
    assert!(value("nan").is_null(), "a gap is null");
    assert_eq!(value("huge"), serde_json::json!(1e308));

    let stats: Value =
        serde_json::from_slice(&framelog(&["stats", "--json", "--top", "0", d]).stdout).unwrap();
    let series = |name: &str| {
        stats["plots"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("series {name}: {stats}"))
            .clone()
    };
    assert_eq!(
        series("+inf")["max"],
        serde_json::json!({"$numberDouble": "Infinity"})
    );
    assert_eq!(
        series("-inf")["min"],
        serde_json::json!({"$numberDouble": "-Infinity"})
    );
    assert!(series("nan")["max"].is_null());

    let printed = text(&framelog(&["stats", "--top", "0", d]).stdout);
    let row = |name: &str| {
        printed
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("row {name}:\n{printed}"))
            .to_owned()
    };
    assert!(row("+inf").contains(" inf"), "{}", row("+inf"));
    assert!(row("-inf").contains("-inf"), "{}", row("-inf"));
    for name in ["huge", "huge bytes"] {
        let r = row(name);
        assert!(
            r.len() < 160 && r.contains("e30"),
            "{name} in scientific notation: {r}"
        );
    }
}

#[test]
fn stats_top_covers_plot_series_too() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    write_hostile_log(dir.path());
    let printed = text(&framelog(&["stats", "--top", "5", d]).stdout);
    let rows: Vec<&str> = printed
        .lines()
        .filter(|l| l.trim_start().starts_with("series "))
        .collect();
    // The five with the most values, then how many more there are.
    assert_eq!(rows.len(), 5, "{printed}");
    assert!(rows[0].trim_start().starts_with("series 00"), "{printed}");
    assert!(
        printed.contains("… 31 more series (--top 0 shows all)"),
        "{printed}"
    );
    let all = text(&framelog(&["stats", "--top", "0", d]).stdout);
    assert_eq!(
        all.lines()
            .filter(|l| l.trim_start().starts_with("series "))
            .count(),
        30
    );
    let json: Value =
        serde_json::from_slice(&framelog(&["stats", "--json", "--top", "5", d]).stdout).unwrap();
    assert_eq!(json["plots"].as_array().unwrap().len(), 5);
    assert_eq!(json["plot_series"], 36);
}

#[test]
fn dump_gives_an_end_written_before_its_start_its_duration_after_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let wk = write_hostile_log(dir.path());
    let json = json_lines(&framelog(&["dump", "--json", d]));
    let ends = of_type(&json, "end");
    assert_eq!(ends.len(), 2);
    for e in &ends {
        assert!(e["duration_ns"].is_u64(), "every end has its duration: {e}");
    }
    let pos = |t: &str, id: u64| {
        json.iter()
            .position(|r| r["type"] == t && r["id"] == id && r["worker"] == u64::from(wk))
            .unwrap()
    };
    assert_eq!(
        pos("end", 2),
        pos("start", 2) + 1,
        "printed right after its start"
    );
    assert_eq!(
        ends.iter().find(|e| e["id"] == 2).unwrap()["duration_ns"],
        800
    );
    let printed = text(&framelog(&["dump", d]).stdout);
    assert!(!printed.contains("start not seen"), "{printed}");
    assert!(printed.contains("800ns"), "{printed}");
    // Filtered to the moved frame: its start and its end, nothing else.
    let only = json_lines(&framelog(&["dump", "--json", "--label", "moved", d]));
    assert_eq!(only.len(), 2, "{only:?}");
    assert_eq!(only[1]["duration_ns"], 800);
}
