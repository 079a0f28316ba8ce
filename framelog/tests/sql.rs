//! `framelog sql` and `framelog export --format parquet` on real logs: the SQL tables against
//! `framelog stats`, against the frames read directly, and against DuckDB reading the Parquet
//! export (DuckDB and pyarrow from PyPI, in the Python that `FRAMELOG_SQL_PYTHON` names:
//! without it these comparisons are skipped with the reason printed, and fail under CI).

use std::path::Path;
use std::process::{Command, Output};

use formats::{
    Category, FrameAlloc, FrameEnd, FrameKey, FrameStart, Level, Message, Parent, Plot, PlotMode,
    PlotUnit, Record, ThreadInfo,
};
use framelog::{DataBatch, LogWriter, WriterOptions};
use serde_json::Value;

const T0: u64 = 1_700_000_000_000_000_000;

fn framelog(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_framelog"))
        .args(args)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `framelog sql DIR --json QUERY`; its rows.
fn sql_json(dir: &Path, query: &str) -> Vec<Value> {
    let out = framelog(&["sql", dir.to_str().unwrap(), "--json", query]);
    assert!(out.status.success(), "{query}: {}", text(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout)
        .unwrap_or_else(|e| panic!("{query}: {e}: {}", text(&out.stdout)))
}

/// Writes `requests` requests as worker `w` of `writer` on two threads: a root (GET /users or
/// GET /orders) with a db/query child (frame data with its SQL text) and a template child, a
/// message in some, an allocation record on each, and a queue-depth plot value per request.
/// Request `r` starts at `T0 + base + r * 1 ms`.
fn write_requests(writer: &LogWriter, first_id: u32, requests: u32, base: u64) {
    let worker = writer.worker();
    let mut data = DataBatch::new();
    for r in 0..requests {
        let mut bytes = Vec::new();
        let thread = 1 + r % 2;
        let name = format!("http-worker-{thread}");
        let t = T0 + base + u64::from(r) * 1_000_000;
        Record::ThreadInfo(ThreadInfo {
            worker,
            thread,
            timestamp: t,
            name: &name,
        })
        .encode_to_vec(&mut bytes);
        let root = first_id + r * 3;
        let (q, tpl) = (root + 1, root + 2);
        let route = if r % 3 == 0 {
            "GET /orders"
        } else {
            "GET /users"
        };
        let start = |id, ts, label, category, parent| {
            Record::Start(FrameStart {
                id,
                worker,
                timestamp: ts,
                context: root,
                category,
                label,
                parent,
            })
        };
        start(root, t, route, Category::HTTP, Parent::Root).encode_to_vec(&mut bytes);
        start(
            q,
            t + 1_000,
            "db/query",
            Category::DATABASE,
            Parent::Frame(root),
        )
        .encode_to_vec(&mut bytes);
        let qdur = 10_000 + u64::from(r % 7) * 50_000;
        if r % 5 == 0 {
            Record::Message(Message {
                frame: q,
                worker,
                timestamp: t + 2_000,
                context: root,
                level: if r % 10 == 0 {
                    Level::WARN
                } else {
                    Level::INFO
                },
                text: "slow query",
                fields: None,
            })
            .encode_to_vec(&mut bytes);
        }
        Record::FrameAlloc(FrameAlloc {
            id: q,
            worker,
            timestamp: t + 1_000 + qdur,
            allocs: u64::from(r % 4),
            alloc_bytes: u64::from(r % 4) * 64,
            frees: 1,
            freed_bytes: 32,
        })
        .encode_to_vec(&mut bytes);
        Record::End(FrameEnd {
            id: q,
            worker,
            timestamp: t + 1_000 + qdur,
        })
        .encode_to_vec(&mut bytes);
        let tstart = t + 2_000 + qdur;
        start(
            tpl,
            tstart,
            "template: page",
            Category::TEMPLATE,
            Parent::Frame(root),
        )
        .encode_to_vec(&mut bytes);
        Record::End(FrameEnd {
            id: tpl,
            worker,
            timestamp: tstart + 5_000,
        })
        .encode_to_vec(&mut bytes);
        Record::End(FrameEnd {
            id: root,
            worker,
            timestamp: tstart + 9_000,
        })
        .encode_to_vec(&mut bytes);
        Record::Plot(Plot {
            worker,
            timestamp: t + 500,
            value: f64::from(r % 4),
            mode: PlotMode::Value,
            unit: PlotUnit::COUNT,
            name: "queue depth",
        })
        .encode_to_vec(&mut bytes);
        writer.append_frames(&bytes).unwrap();
        let doc = formats::to_document(&serde_json::json!({
            "sql": format!("SELECT * FROM t{} WHERE id = $1", r % 4),
            "rows": r % 9,
        }))
        .unwrap();
        data.push(FrameKey::new(worker, q), &doc);
    }
    writer.append_data(&data).unwrap();
}

/// A log of `requests` requests in small segments (several to compact).
fn make_log(dir: &Path, requests: u32) {
    let opts = WriterOptions {
        frames_segment_bytes: 64 << 10,
        ..WriterOptions::default()
    };
    let w = LogWriter::open_with(dir, opts).unwrap();
    write_requests(&w, 1, requests, 0);
}

/// The per-label table of `framelog stats --json`: label → (count, total_ns).
fn stats_labels(dir: &Path) -> Vec<(String, u64, u64)> {
    let out = framelog(&["stats", dir.to_str().unwrap(), "--json", "--top", "0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut l: Vec<_> = v["labels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["label"].as_str().unwrap().to_owned(),
                l["count"].as_u64().unwrap(),
                l["total_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    l.sort();
    l
}

fn sql_labels(dir: &Path) -> Vec<(String, u64, u64)> {
    sql_json(
        dir,
        "select name, count(dur) as n, sum(dur) as total from slice group by name order by name",
    )
    .iter()
    .map(|r| {
        (
            r["name"].as_str().unwrap().to_owned(),
            r["n"].as_u64().unwrap(),
            r["total"].as_u64().unwrap(),
        )
    })
    .collect()
}

#[test]
fn per_label_count_and_total_equal_stats_on_raw_and_compacted_logs() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 600);
    let stats = stats_labels(dir.path());
    assert_eq!(stats.len(), 4);
    assert_eq!(sql_labels(dir.path()), stats);
    let out = framelog(&["compact", "--all", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(sql_labels(dir.path()), stats, "after compaction");
}

#[test]
fn rows_have_parents_depth_threads_data_allocations_and_messages() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 10);
    let d = dir.path();
    let rows = sql_json(
        d,
        "select s.id, s.depth, s.parent_id, p.name as parent, t.name as thread, \
         json_extract(s.data, '$.sql') as q, s.allocs, s.context_id \
         from slice s join slice p on p.id = s.parent_id join thread t on t.id = s.thread_id \
         where s.name = 'db/query' order by s.id limit 2",
    );
    assert_eq!(rows[0]["depth"], 1);
    assert_eq!(rows[0]["parent"], "GET /orders");
    assert_eq!(rows[0]["thread"], "http-worker-1");
    assert_eq!(rows[0]["q"], "SELECT * FROM t0 WHERE id = $1");
    assert_eq!(rows[1]["allocs"], 1);
    assert_eq!(rows[0]["context_id"], rows[0]["parent_id"]);
    let anc = sql_json(d, "select name, depth from ancestor_slice(2)");
    assert_eq!(anc.len(), 1);
    assert_eq!(anc[0]["name"], "GET /orders");
    let desc = sql_json(d, "select name from descendant_slice(1) order by name");
    assert_eq!(
        desc.iter()
            .map(|r| r["name"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["db/query", "template: page"]
    );
    let msgs = sql_json(
        d,
        "select m.level, count(*) as n, min(s.name) as frame from message m join slice s on s.id = m.slice_id group by m.level order by m.level",
    );
    assert_eq!(
        msgs,
        vec![
            serde_json::json!({"level": "info", "n": 1, "frame": "db/query"}),
            serde_json::json!({"level": "warn", "n": 1, "frame": "db/query"})
        ]
    );
    let ctx = sql_json(
        d,
        "select id, root_name, frames from context order by id limit 1",
    );
    assert_eq!(
        ctx[0],
        serde_json::json!({"id": 1, "root_name": "GET /orders", "frames": 3})
    );
    let avg = sql_json(
        d,
        "select t.name, avg(c.value) as v from counter c join counter_track t on t.id = c.track_id group by t.name",
    );
    assert_eq!(avg[0]["name"], "queue depth");
    assert!((avg[0]["v"].as_f64().unwrap() - 1.3).abs() < 1e-9);
}

/// `context` is what grouping `slice` by `context_id` says, on a raw and a compacted log: in
/// id order, and for one context by its id (the table aggregates in Rust; the grouping here is
/// SQLite's own).
#[test]
fn context_rows_are_slice_grouped_by_context() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    make_log(d, 400);
    let grouped = "select context_id as id, context_id as root_id, \
        max(case when id = context_id then name end) as root_name, min(ts) as first_ts, \
        max(ts + dur) as last_ts, count(*) as frames from slice group by context_id order by context_id";
    let table = "select id, root_id, root_name, first_ts, last_ts, frames from context";
    for compacted in [false, true] {
        if compacted {
            let out = framelog(&["compact", "--all", d.to_str().unwrap()]);
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        let want = sql_json(d, grouped);
        assert_eq!(want.len(), 400, "one context a request");
        assert_eq!(sql_json(d, table), want, "compacted: {compacted}");
        let one = &want[123];
        let id = one["id"].as_i64().unwrap();
        assert_eq!(
            sql_json(d, &format!("{table} where id = {id}")),
            vec![one.clone()]
        );
        assert_eq!(
            sql_json(d, &format!("{table} where id = -5")),
            Vec::<Value>::new()
        );
    }
}

/// `.tables` and `.schema [TABLE]` work as the query too (not only at the prompt), for every
/// table, `context` included; an unknown table or command exits 2 saying so.
#[test]
fn dot_commands_as_the_query() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 3);
    let d = dir.path().to_str().unwrap();
    let tables = framelog(&["sql", d, ".tables"]);
    assert!(tables.status.success(), "{}", text(&tables.stderr));
    let listed: Vec<String> = text(&tables.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert!(listed.contains(&"context".to_owned()) && listed.contains(&"slice".to_owned()));
    let schema = framelog(&["sql", d, ".schema"]);
    assert!(schema.status.success(), "{}", text(&schema.stderr));
    assert_eq!(
        text(&schema.stdout).matches("CREATE TABLE").count(),
        listed.len(),
        "{}",
        text(&schema.stdout)
    );
    let one = framelog(&["sql", d, ".schema context"]);
    assert!(one.status.success(), "{}", text(&one.stderr));
    assert!(
        text(&one.stdout)
            .starts_with("CREATE TABLE context(id INTEGER, root_id INTEGER, root_name TEXT"),
        "{}",
        text(&one.stdout)
    );
    exit_2_saying(
        d,
        &[
            (".schema nope", "no table nope"),
            (".frobnicate", "unknown command"),
        ],
    );
}

/// Each query on the log in `d` exits 2 with stderr saying its text, and no panic.
fn exit_2_saying(d: &str, cases: &[(&str, &str)]) {
    for &(q, says) in cases {
        let out = framelog(&["sql", d, q]);
        assert_eq!(out.status.code(), Some(2), "{q}");
        assert!(
            text(&out.stderr).contains(says),
            "{q}: {}",
            text(&out.stderr)
        );
        assert!(!text(&out.stderr).contains("panicked"));
    }
}

#[test]
fn bad_sql_gets_sqlites_message_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 3);
    let d = dir.path().to_str().unwrap();
    exit_2_saying(
        d,
        &[
            ("selec 1", "syntax error"),
            ("select * from nope", "no such table: nope"),
            (
                "select * from ancestor_slice",
                "ancestor_slice(id) needs the id of a slice",
            ),
        ],
    );
}

#[test]
fn csv_and_table_output() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 3);
    let d = dir.path().to_str().unwrap();
    let out = framelog(&[
        "sql",
        d,
        "--csv",
        "select name, json_extract(data, '$.sql') as q from slice where name = 'db/query' order by id limit 1",
    ]);
    assert_eq!(
        text(&out.stdout),
        "name,q\r\ndb/query,SELECT * FROM t0 WHERE id = $1\r\n"
    );
    let out = framelog(&["sql", d, "select id, name from slice order by id limit 2"]);
    assert_eq!(
        text(&out.stdout),
        "id  name\n--  -----------\n 1  GET /orders\n 2  db/query\n"
    );
}

#[test]
fn a_ts_range_reads_only_overlapping_blocks_and_returns_what_a_full_scan_does() {
    let dir = tempfile::tempdir().unwrap();
    // Each request at the wall clock's time when it is written, as a program's are (its
    // writer stamps its worker info in each segment with that clock too): a block then spans
    // only the times of the requests it holds.
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    };
    let opts = WriterOptions {
        frames_segment_bytes: 16 << 10,
        ..WriterOptions::default()
    };
    let w = LogWriter::open_with(dir.path(), opts).unwrap();
    let mut starts = Vec::new();
    for r in 0..3000u32 {
        let t = now();
        // `write_requests` places request 0 of a call at T0 + base.
        write_requests(&w, 1 + r * 3, 1, t - T0);
        starts.push(t);
    }
    drop(w);
    assert!(
        framelog(&["compact", "--all", dir.path().to_str().unwrap()])
            .status
            .success()
    );
    let (from, to) = (starts[1000], starts[1100] - 1);
    let range = format!("ts between {from} and {to}");
    // `depth` makes the plan read every block; without it blocks are passed over.
    let pushed = sql_json(
        dir.path(),
        &format!("select id, dur, name from slice where {range} order by id"),
    );
    let full = sql_json(
        dir.path(),
        &format!("select id, dur, name from slice where {range} and depth >= 0 order by id"),
    );
    // Requests 1000 to 1099 start in it, with their children (the last one's template may
    // start after request 1100 began, when they were written less than 0.4 ms apart).
    assert!((298..=300).contains(&pushed.len()), "{} rows", pushed.len());
    assert_eq!(pushed, full);
    // The reader decodes only blocks whose times overlap (and says how many records it read).
    let count = |keep: Option<(u64, u64)>| {
        let mut r = framelog::LogReader::open(dir.path()).unwrap();
        if let Some((a, b)) = keep {
            r.skip_blocks(move |min, max| max >= a && min <= b);
        }
        r.read_available(|_, _| {}).unwrap()
    };
    let (all, some) = (count(None), count(Some((from, to))));
    assert!(some > 0 && some * 10 < all, "{some} of {all} records read");
    let plan = framelog(&[
        "sql",
        dir.path().to_str().unwrap(),
        &format!("explain query plan select count(*) from slice where {range}"),
    ]);
    assert!(
        text(&plan.stdout).contains("compact blocks outside it are not read"),
        "{}",
        text(&plan.stdout)
    );
}

#[test]
fn a_query_without_depth_or_parents_skips_them_and_returns_what_a_full_read_does() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 400);
    let plan = |q: &str| {
        let out = framelog(&[
            "sql",
            dir.path().to_str().unwrap(),
            &format!("explain query plan {q}"),
        ]);
        text(&out.stdout)
    };
    let cols = "name, count(*), sum(dur), sum(ts % 1000003), sum(context_id % 1000003), \
                sum(thread_id % 1000003), sum(coalesce(busy_ns, 0)), count(dur)";
    let lean = format!("select {cols} from slice group by name order by name");
    // `depth >= 0` holds for every frame: the same rows, with parents followed.
    let whole = format!("select {cols} from slice where depth >= 0 group by name order by name");
    assert!(
        plan(&lean).contains("parents not followed"),
        "{}",
        plan(&lean)
    );
    assert!(
        !plan(&whole).contains("parents not followed"),
        "{}",
        plan(&whole)
    );
    for compacted in [false, true] {
        if compacted {
            let out = framelog(&["compact", "--all", dir.path().to_str().unwrap()]);
            assert!(out.status.success(), "{}", text(&out.stderr));
        }
        let (a, b) = (sql_json(dir.path(), &lean), sql_json(dir.path(), &whole));
        assert_eq!(a.len(), 4, "{a:?}");
        assert_eq!(a, b, "compacted: {compacted}");
    }
    // A parent column turns them back on, and gets real parents.
    let roots = sql_json(
        dir.path(),
        "select count(*) from slice where parent_id is null",
    );
    assert_eq!(
        roots[0].as_object().unwrap().values().next(),
        Some(&serde_json::json!(400))
    );
}

#[test]
fn a_damaged_log_says_what_was_skipped_and_counts_what_is_left() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 200);
    let seg = dir.path().join("frames-000001.framelog");
    let mut bytes = std::fs::read(&seg).unwrap();
    for b in &mut bytes[5000..5100] {
        *b ^= 0x5a;
    }
    std::fs::write(&seg, &bytes).unwrap();
    let out = framelog(&[
        "sql",
        dir.path().to_str().unwrap(),
        "--json",
        "select count(*) as n from slice",
    ]);
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("frames-000001.framelog") && err.contains("damaged bytes"),
        "{err}"
    );
    assert_eq!(sql_labels(dir.path()), stats_labels(dir.path()));
    // `context` reads the same damaged log: it says so and counts the frames that are left.
    let ctx = framelog(&[
        "sql",
        dir.path().to_str().unwrap(),
        "--json",
        "select sum(frames) as f from context",
    ]);
    assert!(ctx.status.success(), "{}", text(&ctx.stderr));
    assert!(
        text(&ctx.stderr).contains("frames-000001.framelog"),
        "{}",
        text(&ctx.stderr)
    );
    let f: Vec<Value> = serde_json::from_slice(&ctx.stdout).unwrap();
    let left: u64 = stats_labels(dir.path()).iter().map(|l| l.1).sum();
    assert_eq!(f[0]["f"].as_u64(), Some(left));
    // The Parquet export reads the log twice at once (`slice` and `context` in one read,
    // the small tables in another) and says each damaged place once, as `sql` does.
    let damage = |err: &str| -> Vec<String> {
        err.lines()
            .filter(|l| l.contains("damaged bytes"))
            .map(str::to_owned)
            .collect()
    };
    let out_dir = tempfile::tempdir().unwrap();
    let e = framelog(&[
        "export",
        dir.path().to_str().unwrap(),
        "--format",
        "parquet",
        "-o",
        out_dir.path().join("pq").to_str().unwrap(),
    ]);
    assert!(e.status.success(), "{}", text(&e.stderr));
    assert_eq!(
        damage(&text(&e.stderr)),
        damage(&err),
        "{}",
        text(&e.stderr)
    );
    if let Some(py) = python() {
        compare_with_duckdb(dir.path(), &py, false);
    }
}

/// A data batch damaged in the middle of the data file costs the data of its frames (NULL),
/// said on stderr, not the query; other frames' data still reads.
#[test]
fn a_damaged_data_batch_costs_its_frames_data_not_the_query() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 400);
    let query = "select count(*) as n, count(data) as d from slice";
    let whole = sql_json(dir.path(), query);
    let with_data = whole[0]["d"].as_u64().unwrap();
    assert!(with_data > 0);
    let seg = dir.path().join("data-000001.framedata");
    let mut bytes = std::fs::read(&seg).unwrap();
    let mid = bytes.len() / 2;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    std::fs::write(&seg, &bytes).unwrap();
    let out = framelog(&["sql", dir.path().to_str().unwrap(), "--json", query]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("data-000001.framedata") && err.contains("CRC32C"),
        "{err}"
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["n"], whole[0]["n"], "every frame is still a row");
    let left = rows[0]["d"].as_u64().unwrap();
    assert!(left < with_data && left > 0, "{left} of {with_data}");
}

#[test]
fn a_log_being_written_is_queried_while_it_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let w = LogWriter::open(&path).unwrap();
    write_requests(&w, 1, 1, 0);
    let writer = std::thread::spawn(move || {
        for i in 1..200u32 {
            write_requests(&w, 1 + i * 3, 1, u64::from(i) * 1_000_000);
        }
    });
    let mut last = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let n = sql_json(&path, "select count(dur) as n from slice")[0]["n"]
            .as_u64()
            .unwrap();
        assert!(n >= last, "counts only grow: {last} then {n}");
        assert_eq!(n % 3, 0, "requests are appended whole");
        last = n;
        if writer.is_finished() && n == 600 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "stuck at {n}");
    }
    writer.join().unwrap();
}

/// The Python that has duckdb and pyarrow, or why the comparison is skipped.
fn python() -> Option<String> {
    match std::env::var("FRAMELOG_SQL_PYTHON") {
        Ok(p) => Some(p),
        Err(_) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("FRAMELOG_SQL_PYTHON is not set under CI (.ci/run installs duckdb and pyarrow)")
        }
        Err(_) => {
            eprintln!("skipped: FRAMELOG_SQL_PYTHON (a Python with duckdb and pyarrow) is not set");
            None
        }
    }
}

/// The comparison queries: the same text runs on both sides.
const QUERIES: &[&str] = &[
    "select name, count(*) as n, sum(dur) as total from slice group by name order by name",
    "select name, min(dur) as lo, max(dur) as hi from slice group by name order by name",
    "select category, count(*) as n from slice group by category order by category",
    "select depth, count(*) as n from slice group by depth order by depth",
    "select p.name as parent, s.name as child, count(*) as n from slice s join slice p on p.id = s.parent_id group by 1, 2 order by 1, 2",
    "select context_id, sum(dur) as total from slice group by context_id order by total desc, context_id limit 20",
    "select id, ts, dur from slice where ts >= 1700000000050000000 and ts < 1700000000080000000 order by id",
    "select count(*) as n from slice where parent_id is null",
    "select t.name, count(*) as n from slice s join thread t on t.id = s.thread_id group by t.name order by t.name",
    "select worker, count(*) as n from slice group by worker order by worker",
    "select sum(allocs) as a, sum(alloc_bytes) as b, sum(frees) as f, sum(freed_bytes) as fb from slice",
    "select level, count(*) as n from message group by level order by level",
    "select s.name, count(*) as n from message m join slice s on s.id = m.slice_id group by s.name order by s.name",
    "select t.name, avg(c.value) as v, count(*) as n from counter c join counter_track t on t.id = c.track_id group by t.name order by t.name",
    "select count(*) as n, min(ts) as lo, max(ts) as hi from counter",
    "select json_extract(data, '$.sql') as q, count(*) as n, sum(dur) as total from slice where data is not null group by q order by q",
    "select id, root_name, frames from context order by id limit 30",
    "select count(*) as n, sum(frames) as f from context",
    "select s.name, count(*) as n from slice s where s.dur > 100000 group by s.name order by s.name",
    "select root_name, avg(last_ts - first_ts) as span from context group by root_name order by root_name",
    "select name, pid from process order by id",
    "select id, name from thread order by id",
];

const DUCKDB: &str = r#"
import json, sys, duckdb, pyarrow.parquet as pq
out, queries = sys.argv[1], json.loads(sys.argv[2])
con = duckdb.connect()
for t in ["slice", "thread", "process", "counter", "counter_track", "message", "context"]:
    pq.read_schema(f"{out}/{t}.parquet")
    con.execute(f"create view {t} as select * from read_parquet('{out}/{t}.parquet')")
res = []
for q in queries:
    q = q.replace("json_extract(", "json_extract_string(")
    cur = con.execute(q)
    names = [d[0] for d in cur.description]
    res.append([dict(zip(names, [v if not hasattr(v, "__int__") or isinstance(v, float) else int(v) for v in row])) for row in cur.fetchall()])
print(json.dumps(res))
"#;

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(1.0)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

fn compare_with_duckdb(dir: &Path, python: &str, every_query_has_rows: bool) {
    let out = tempfile::tempdir().unwrap();
    let pq = out.path().join("pq");
    let e = framelog(&[
        "export",
        dir.to_str().unwrap(),
        "--format",
        "parquet",
        "-o",
        pq.to_str().unwrap(),
    ]);
    assert!(e.status.success(), "{}", text(&e.stderr));
    let q = serde_json::to_string(QUERIES).unwrap();
    let r = Command::new(python)
        .args(["-c", DUCKDB, pq.to_str().unwrap(), &q])
        .output()
        .unwrap();
    assert!(r.status.success(), "duckdb: {}", text(&r.stderr));
    let duck: Vec<Value> = serde_json::from_slice(&r.stdout).unwrap();
    for (i, q) in QUERIES.iter().enumerate() {
        let ours = Value::Array(sql_json(dir, q));
        assert!(
            same(&ours, &duck[i]),
            "{q}\nframelog sql: {ours}\nDuckDB:       {}",
            duck[i]
        );
        assert!(
            !every_query_has_rows || ours.as_array().is_some_and(|a| !a.is_empty()),
            "{q} returns rows"
        );
    }
}

#[test]
fn sql_and_duckdb_on_the_parquet_export_return_the_same_rows() {
    let Some(py) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    // Two writers (workers 0 and 1, as two processes get) appending to one log at once.
    let opts = WriterOptions {
        frames_segment_bytes: 64 << 10,
        ..WriterOptions::default()
    };
    let w1 = LogWriter::open_with(dir.path(), opts.clone()).unwrap();
    let w2 = LogWriter::open_with(dir.path(), opts).unwrap();
    assert_ne!(w1.worker(), w2.worker());
    write_requests(&w1, 1, 200, 0);
    write_requests(&w2, 1, 100, 50_000_000);
    drop((w1, w2));
    compare_with_duckdb(dir.path(), &py, true);
    let c = framelog(&["compact", "--all", dir.path().to_str().unwrap()]);
    assert!(c.status.success(), "{}", text(&c.stderr));
    compare_with_duckdb(dir.path(), &py, true);
}

/// A log whose oldest segments retention deleted while it was written: `slice` holds what
/// `stats` counts (frames whose start was deleted are not rows), `context` and the other
/// tables read what is left, and DuckDB on the Parquet export agrees.
#[test]
fn a_retention_pruned_log_is_what_stats_counts() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriterOptions {
        frames_segment_bytes: 16 << 10,
        data_segment_bytes: 16 << 10,
        retention: framelog::Retention {
            max_bytes: Some(96 << 10),
            max_age: None,
        },
        // Raw segments: a compacted one is a fraction of the size, so whether the budget
        // deletes anything would depend on how far the background compactor got (1 run in
        // 12 kept all 6,000 frames with the other core busy).
        compact: false,
        ..WriterOptions::default()
    };
    let w = LogWriter::open_with(dir.path(), opts).unwrap();
    write_requests(&w, 1, 2_000, 0);
    drop(w);
    let stats = stats_labels(dir.path());
    let written: u64 = 2_000 * 3;
    let kept: u64 = stats.iter().map(|l| l.1).sum();
    // Retention deleted segments: fewer frames are left than were written.
    assert!(
        kept > 0 && kept < written,
        "{kept} of {written} frames left"
    );
    assert_eq!(sql_labels(dir.path()), stats);
    let contexts = sql_json(dir.path(), "select sum(frames) as f from context");
    assert_eq!(contexts[0]["f"].as_u64(), Some(kept));
    // (The early time range some queries ask for was deleted.)
    if let Some(py) = python() {
        compare_with_duckdb(dir.path(), &py, false);
    }
}

#[test]
fn a_parent_join_answers_what_each_lookup_alone_does_whole_or_pruned() {
    // A join asks `slice` for one id per row of its other side; after a few lookups the
    // rows come from one read of the log kept by id. They must be the rows a lookup's own
    // read finds: on a whole log, and on one whose retention deleted many parents.
    for pruned in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = WriterOptions::default();
        if pruned {
            opts.frames_segment_bytes = 4 << 10;
            opts.data_segment_bytes = 4 << 10;
            opts.retention.max_bytes = Some(16 << 10);
            opts.compact = false; // (as in the test above)
        }
        let w = LogWriter::open_with(dir.path(), opts).unwrap();
        write_requests(&w, 1, if pruned { 300 } else { 120 }, 0);
        drop(w);
        let cols = "s.id, s.name, p.id as pid, p.name as pname, p.ts, p.dur, p.depth, \
                    p.parent_id, p.thread_id, p.context_id, p.category";
        let join = |on: &str| {
            format!("select {cols} from slice s join slice p on {on} = s.parent_id order by s.id")
        };
        let plan = sql_json(dir.path(), &format!("explain query plan {}", join("p.id")));
        assert!(
            plan.iter()
                .any(|r| r["detail"].as_str().is_some_and(|d| d.contains("id = ?"))),
            "the join looks ids up: {plan:?}"
        );
        let looked_up = sql_json(dir.path(), &join("p.id"));
        // `+p.id`: SQLite cannot hand the constraint to the table; it scans for each row.
        let scanned = sql_json(dir.path(), &join("+p.id"));
        let count = |q: &str| sql_json(dir.path(), q)[0]["n"].as_u64().unwrap();
        let children = count("select count(*) as n from slice where parent_id is not null");
        let frames = count("select count(*) as n from slice");
        assert!(looked_up.len() > 50, "{pruned}: {} rows", looked_up.len());
        assert_eq!(looked_up, scanned, "pruned: {pruned}");
        if pruned {
            assert!(frames < 300 * 3, "retention deleted frames: {frames} left");
        } else {
            assert_eq!(
                looked_up.len() as u64,
                children,
                "every child has its parent"
            );
        }
    }
}

/// Everything `script` (on a pseudo-terminal) has printed so far.
fn pty_output(out: &std::sync::Mutex<Vec<u8>>) -> String {
    String::from_utf8_lossy(&out.lock().unwrap()).into_owned()
}

/// Waits (polling, 60 s at most) until what the terminal shows passes `done`.
fn wait_for_pty(out: &std::sync::Mutex<Vec<u8>>, what: &str, done: impl Fn(&str) -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !done(&pty_output(out)) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: the terminal shows {:?}",
            pty_output(out)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// `framelog sql DIR` on a real pseudo-terminal (util-linux's `script`, in Debian's essential
/// packages): typing each of `lines` (keys, with their `\r`) once the prompt is back; what
/// it showed.
fn on_a_terminal(dir: &Path, history: &Path, lines: &[&str]) -> String {
    use std::io::{Read, Write};
    let cmd = format!("{} sql {}", env!("CARGO_BIN_EXE_framelog"), dir.display());
    let mut child = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env("FRAMELOG_SQL_HISTORY", history)
        .env("TERM", "xterm")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("script (util-linux) runs");
    let out = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = {
        let out = out.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                out.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };
    let mut stdin = child.stdin.take().unwrap();
    for (i, line) in lines.iter().enumerate() {
        // The i-th prompt is shown: the editor is in raw mode, waiting for keys.
        wait_for_pty(&out, "the prompt", |t| t.matches("sql> ").count() > i);
        let typed = stdin
            .write_all(line.as_bytes())
            .and_then(|()| stdin.flush());
        assert!(
            typed.is_ok(),
            "{typed:?}: the terminal shows {:?}",
            pty_output(&out)
        );
    }
    drop(stdin);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}: {}", pty_output(&out));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{}", pty_output(&out));
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    reader.join().unwrap();
    pty_output(&out)
}

#[test]
fn the_prompt_on_a_terminal_recalls_earlier_lines_and_keeps_them_across_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let history = tmp.path().join("state/sql_history");
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compact-log");
    // ↑ (ESC [ A) then Enter runs the line typed before it again; Ctrl-D ends.
    let shown = on_a_terminal(
        &log,
        &history,
        &["select 41 + 1 as answer;\r", "\x1b[A\r", "\x04"],
    );
    assert_eq!(shown.matches("(1 row)").count(), 2, "{shown}");
    let kept = std::fs::read_to_string(&history).expect("the history file");
    assert!(kept.contains("select 41 + 1 as answer;"), "{kept}");
    // A new run starts with it: ↑ at its first prompt recalls the last run's line.
    let shown = on_a_terminal(&log, &history, &["\x1b[A\r", "\x04"]);
    assert_eq!(shown.matches("(1 row)").count(), 1, "{shown}");
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        /// Random frames (nested or not, some left open, ends before starts): the SQL count
        /// and total equal the frames read directly, paired by key.
        #[test]
        fn count_and_total_equal_frames_read_directly(
            frames in proptest::collection::vec((0u64..1_000_000, 0u64..100_000, any::<bool>(), any::<bool>()), 1..200),
        ) {
            let dir = tempfile::tempdir().unwrap();
            let w = LogWriter::open(dir.path()).unwrap();
            let worker = w.worker();
            let mut bytes = Vec::new();
            for (i, &(t, d, open, end_first)) in frames.iter().enumerate() {
                let id = i as u32 + 1;
                let s = Record::Start(FrameStart { id, worker, timestamp: T0 + t, context: id, category: Category::FUNCTION, label: "f", parent: Parent::Root });
                let e = Record::End(FrameEnd { id, worker, timestamp: T0 + t + d });
                if open {
                    s.encode_to_vec(&mut bytes);
                } else if end_first {
                    e.encode_to_vec(&mut bytes);
                    s.encode_to_vec(&mut bytes);
                } else {
                    s.encode_to_vec(&mut bytes);
                    e.encode_to_vec(&mut bytes);
                }
            }
            w.append_frames(&bytes).unwrap();
            let mut starts = std::collections::HashMap::new();
            let mut ends = std::collections::HashMap::new();
            framelog::LogReader::open(dir.path()).unwrap().read_available(|_, r| match r {
                Record::Start(s) => { starts.insert(s.id, s.timestamp); }
                Record::End(e) => { ends.insert(e.id, e.timestamp); }
                _ => {}
            }).unwrap();
            let done: Vec<u64> = starts.iter().filter_map(|(id, s)| ends.get(id).map(|e| e - s)).collect();
            let log = framelog::sql::SqlLog::open(dir.path()).unwrap();
            let (all, n, total): (i64, i64, Option<i64>) = log
                .connection()
                .query_row("select count(*), count(dur), sum(dur) from slice", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap();
            prop_assert_eq!(all as usize, starts.len());
            prop_assert_eq!(n as usize, done.len());
            prop_assert_eq!(total.unwrap_or(0) as u64, done.iter().sum::<u64>());
        }
    }
}

/// Stopped by SIGINT in the middle, an export leaves no temporary file in its output
/// directory, keeps the files it finished whole, and exits 130; a Chrome export to a file
/// leaves neither the file nor its temporary name.
#[test]
fn an_export_stopped_by_sigint_leaves_no_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    make_log(dir.path(), 60_000);
    let out = tempfile::tempdir().unwrap();
    let temps = |d: &Path| -> Vec<String> {
        std::fs::read_dir(d)
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(".framelog-"))
                    .collect()
            })
            .unwrap_or_default()
    };
    let pq = out.path().join("pq");
    let json = out.path().join("trace.json");
    let runs: [(&[&str], &Path, &Path); 2] = [
        (&["--format", "parquet", "-o"], &pq, &pq),
        (&["-o"], &json, out.path()),
    ];
    for (args, target, watched) in runs {
        let mut child = Command::new(env!("CARGO_BIN_EXE_framelog"))
            .arg("export")
            .arg(dir.path())
            .args(args)
            .arg(target)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Stopped once it is writing: its temporary file is there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while temps(watched).is_empty() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "the export of {target:?} ended before a temporary file was seen"
            );
            assert!(std::time::Instant::now() < deadline, "no temporary file");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let kill = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let done = child.wait_with_output().unwrap();
        let err = text(&done.stderr);
        assert_eq!(done.status.code(), Some(130), "{err}");
        assert!(err.contains("stopped"), "{err}");
        assert_eq!(temps(watched), Vec::<String>::new(), "{err}");
    }
    assert!(!json.exists(), "a stopped export leaves no partial file");
    // What the Parquet export finished before the stop is whole.
    for e in std::fs::read_dir(&pq).unwrap() {
        let b = std::fs::read(e.unwrap().path()).unwrap();
        assert!(b.starts_with(b"PAR1") && b.ends_with(b"PAR1"));
    }
}
