//! The Query tab (issue 42): SQL over the open log on a thread of its own; its rows, SQLite's
//! error, a click on a row with a slice id selecting that frame, Stop ending a long query, a
//! log that grew since the last run, and a window with no directory.

use super::*;

use debugger_gui::app::{BottomTab, CentralView};
use debugger_gui::query::{Cell, MAX_ROWS, QueryError, slice_id};

/// A window on a log of three requests (each: route, `User: Select`, template), on the Query
/// tab; returns the harness and the three `User: Select` frames' keys, in time order.
fn query_window(dir: &Path) -> (Harness<'static, DebuggerApp>, [FrameKey; 3]) {
    let w = writer(dir);
    let keys = [
        write_request(&w, 1, T0, "GET /a"),
        write_request(&w, 1, T0 + 2_000_000, "GET /b"),
        write_request(&w, 2, T0 + 4_000_000, "GET /c"),
    ];
    drop(w);
    let mut h = harness(DebuggerApp::open(dir));
    step_until(&mut h, "the requests drawn", |h| {
        !boxes(h, "GET /c").is_empty()
    });
    h.get_by_label("Query").click();
    step_until(&mut h, "the Query tab", |h| {
        h.state().tab() == BottomTab::Query && shown(h, "SQL")
    });
    (h, keys)
}

/// Replaces the editor's SQL with `sql` (typed) and clicks Run; waits for the outcome.
fn run_query(h: &mut Harness<'static, DebuggerApp>, sql: &str) {
    h.state_mut().query_panel_mut().sql.clear();
    h.get_by_label("SQL").focus();
    h.step();
    h.get_by_label("SQL").type_text(sql);
    h.step();
    assert_eq!(h.state().query_panel().sql, sql, "typed into the editor");
    let before = h.state().query_panel().last().map(|f| f.elapsed);
    h.get_by_label("Run").click();
    step_until(h, "the query's outcome", |h| {
        let p = h.state().query_panel();
        !p.running()
            && p.last().is_some_and(|f| f.sql == sql)
            && p.last().map(|f| f.elapsed) != before
    });
    settle(h);
}

fn rows(h: &Harness<'_, DebuggerApp>) -> Vec<Vec<Cell>> {
    let f = h.state().query_panel().last().expect("a result");
    match &f.result {
        Ok(r) => r.rows.rows.clone(),
        Err(e) => panic!("the query failed: {e:?}"),
    }
}

fn shown(h: &Harness<'_, DebuggerApp>, label: &str) -> bool {
    h.query_all_by_label(label).next().is_some()
}

fn shown_containing(h: &Harness<'_, DebuggerApp>, part: &str) -> bool {
    h.query_all_by_label_contains(part).next().is_some()
}

/// The Query grid's cell showing `text` (below the timeline: the same text may be on it).
fn cell<'a>(h: &'a Harness<'_, DebuggerApp>, text: &'a str) -> egui_kittest::Node<'a> {
    let below = canvas(h).bottom();
    let mut found: Vec<_> = h
        .query_all_by_label(text)
        .filter(|n| n.rect().top() > below)
        .collect();
    assert_eq!(found.len(), 1, "one cell showing {text}");
    found.pop().unwrap()
}

fn selected_key(h: &Harness<'_, DebuggerApp>) -> Option<FrameKey> {
    let at = h.state().selected()?;
    h.state().model()?.info(at).map(|i| i.key)
}

#[test]
fn a_query_shows_the_rows_the_log_holds_and_a_click_on_one_selects_its_frame() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, keys) = query_window(dir.path());
    run_query(
        &mut h,
        "select id, name, dur, parent_id from slice where name = 'User: Select' order by ts",
    );
    let ids: Vec<i64> = keys.iter().map(|&k| slice_id(k)).collect();
    let want: Vec<Vec<Cell>> = ids
        .iter()
        .map(|&id| {
            vec![
                Cell::Int(id),
                Cell::Text("User: Select".into()),
                Cell::Int(500_000),
                // Parents not recorded: inferred from nesting, the request (one id before).
                Cell::Int(id - 1),
            ]
        })
        .collect();
    assert_eq!(rows(&h), want);
    let f = h.state().query_panel().last().unwrap();
    let r = f.result.as_ref().unwrap();
    assert_eq!(r.frame_columns, [true, false, false, true]);
    assert!(shown_containing(&h, "3 rows in"), "the count and the time");
    for name in ["id", "name", "dur", "parent_id"] {
        assert!(shown(&h, name), "the {name} column");
    }
    // Numbers right-aligned in their column: the same right edge, different left edges.
    let a = cell(&h, &ids[0].to_string()).rect();
    let dur = h.query_all_by_label("500000").next().unwrap().rect();
    assert!(a.right() < dur.left(), "id left of dur");
    // Zoomed away first: the click brings the frame back into view.
    h.state_mut()
        .timeline_mut()
        .zoom_to(T0 + 4_000_000, T0 + 5_000_000);
    settle(&mut h);
    assert!(boxes(&h, "GET /a").is_empty());
    cell(&h, &ids[1].to_string()).click();
    step_until(&mut h, "the second query selected", |h| {
        selected_key(h) == Some(keys[1])
    });
    assert_eq!(h.state().query_panel().picked, Some(1));
    assert_eq!(h.state().view(), CentralView::Timeline);
    settle(&mut h);
    let (from, to) = {
        let t = h.state().timeline();
        let from = t.base.unwrap() as f64 + t.start;
        (from, from + t.width)
    };
    let start = (T0 + 2_000_000 + 50_000) as f64;
    assert!(
        from <= start && start + 500_000.0 <= to && to - from < 5_000_000.0,
        "zoomed to it: {from}..{to}"
    );
    // A click on another column of a row selects the row's frame too: its parent_id cell
    // (a slice id itself) selects the parent.
    cell(&h, &(ids[2] - 1).to_string()).click();
    step_until(&mut h, "the third request selected", |h| {
        selected_key(h) == Some(FrameKey::new(keys[2].worker, keys[2].id - 1))
    });
}

#[test]
fn values_show_as_the_cli_prints_them_null_and_cut_text_included() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = query_window(dir.path());
    run_query(
        &mut h,
        "select 7777 as n, null as missing, 2.5 as x, printf('%.100c', 'q') as long union all select 123456789, 1, 0.25, 'short'",
    );
    let nulls: Vec<_> = h.query_all_by_label("NULL").map(|n| n.rect()).collect();
    assert!(
        nulls.len() == 1,
        "NULL said: {nulls:?} {:?}",
        h.state().query_panel().last()
    );
    assert!(shown(&h, "2.5") && shown(&h, "0.25"));
    // Right-aligned: the two numbers of a column share their right edge.
    let (a, b) = (cell(&h, "7777").rect(), cell(&h, "123456789").rect());
    assert!((a.right() - b.right()).abs() < 1.0, "{a:?} {b:?}");
    assert!(a.left() > b.left() + 10.0, "{a:?} {b:?}");
    // A long value is cut, the whole of it on hover.
    let cut = format!("{}…", "q".repeat(80));
    let whole = "q".repeat(100);
    assert!(!shown(&h, &whole));
    let n = cell(&h, &cut).rect();
    h.hover_at(n.center());
    step_until(&mut h, "the whole value on hover", |h| shown(h, &whole));
    // Rows with no slice id select nothing.
    cell(&h, "short").click();
    settle(&mut h);
    assert_eq!(h.state().selected(), None);
}

#[test]
fn a_bad_query_shows_sqlites_error_and_the_next_one_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = query_window(dir.path());
    run_query(&mut h, "select * from nope");
    assert!(shown(&h, "no such table: nope"), "SQLite's message");
    assert_eq!(
        h.state()
            .query_panel()
            .last()
            .unwrap()
            .result
            .as_ref()
            .unwrap_err(),
        &QueryError::Sql("no such table: nope".into())
    );
    run_query(&mut h, "selec 1");
    assert!(
        shown(&h, "near \"selec\": syntax error"),
        "{:?}",
        h.state().query_panel().last()
    );
    run_query(&mut h, "select count(*) as n from slice");
    assert_eq!(rows(&h), [vec![Cell::Int(9)]]);
    assert!(!shown(&h, "no such table: nope"));
}

#[test]
fn ctrl_enter_runs_and_a_grown_log_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = query_window(dir.path());
    h.state_mut().query_panel_mut().sql = "select count(*) from slice".into();
    h.get_by_label("SQL").focus();
    h.step();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::Enter);
    step_until(&mut h, "the count", |h| {
        h.state()
            .query_panel()
            .last()
            .is_some_and(|f| matches!(&f.result, Ok(r) if r.rows.rows == [vec![Cell::Int(9)]]))
    });
    assert_eq!(
        h.state().query_panel().sql,
        "select count(*) from slice",
        "no newline typed"
    );
    // Two more requests: the next run counts them.
    let w = writer(dir.path());
    write_request(&w, 3, T0 + 6_000_000, "GET /d");
    write_request(&w, 3, T0 + 8_000_000, "GET /e");
    drop(w);
    run_query(&mut h, "select count(*) from slice");
    assert_eq!(rows(&h), [vec![Cell::Int(15)]]);
}

#[test]
fn rows_past_ten_thousand_are_counted_and_said_to_be_cut() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = query_window(dir.path());
    run_query(
        &mut h,
        "with recursive c(x) as (select 1 union all select x + 1 from c where x < 10005) select x from c",
    );
    let f = h.state().query_panel().last().unwrap();
    let r = f.result.as_ref().unwrap();
    assert_eq!(r.rows.rows.len(), MAX_ROWS);
    assert_eq!(r.rows.total, 10_005);
    assert_eq!(r.rows.rows[MAX_ROWS - 1], [Cell::Int(MAX_ROWS as i64)]);
    assert!(shown_containing(&h, "the first 10,000 of 10,005 rows"));
}

#[test]
fn stop_ends_a_long_query() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = query_window(dir.path());
    h.state_mut().query_panel_mut().sql = "with recursive c(x) as (select 1 union all select x + 1 from c where x < 1000000000) select count(*) from c".into();
    h.step();
    let t = Instant::now();
    h.get_by_label("Run").click();
    step_until(&mut h, "the query running", |h| {
        h.state().query_panel().running() && shown(h, "Stop")
    });
    assert!(shown_containing(&h, "Running…"));
    h.get_by_label("Stop").click();
    step_until(&mut h, "the query stopped", |h| {
        !h.state().query_panel().running()
    });
    let took = t.elapsed();
    assert_eq!(
        h.state()
            .query_panel()
            .last()
            .unwrap()
            .result
            .as_ref()
            .unwrap_err(),
        &QueryError::Stopped
    );
    assert!(took < Duration::from_secs(30), "stopped after {took:?}");
    settle(&mut h);
    assert!(shown_containing(&h, "Stopped after"));
    assert!(!shown(&h, "Stop"));
    // The connection still answers.
    run_query(&mut h, "select count(*) from slice");
    assert_eq!(rows(&h), [vec![Cell::Int(9)]]);
}

#[test]
fn a_window_on_a_served_log_says_the_query_view_needs_a_directory() {
    // Nothing listens there: the window has a remote source and no directory.
    let mut h = harness(DebuggerApp::open_url("ws://127.0.0.1:9/ws", ""));
    h.state_mut().set_tab(BottomTab::Query);
    settle(&mut h);
    assert!(shown_containing(&h, "The Query view needs a log directory"));
    assert!(!shown(&h, "Run"));
}

#[test]
fn every_example_runs_on_a_real_log_and_picking_one_puts_it_in_the_editor() {
    use debugger_gui::ui::query::EXAMPLES;
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = query_window(dir.path());
    h.get_by_label("Examples").click();
    step_until(&mut h, "the examples list", |h| {
        shown(h, "Busy time per thread")
    });
    h.get_by_label("Busy time per thread").click();
    settle(&mut h);
    let busy = EXAMPLES
        .iter()
        .find(|e| e.0 == "Busy time per thread")
        .unwrap();
    assert_eq!(h.state().query_panel().sql, busy.1);
    for (title, sql) in EXAMPLES {
        h.state_mut().query_panel_mut().sql = sql.to_owned();
        h.step();
        h.get_by_label("Run").click();
        step_until(&mut h, title, |h| {
            let p = h.state().query_panel();
            !p.running() && p.last().is_some_and(|f| f.sql == sql)
        });
        let f = h.state().query_panel().last().unwrap();
        assert!(f.result.is_ok(), "{title}: {:?}", f.result);
    }
    // Busy time per thread counts roots: worker-1 ran two of the requests, worker-2 one.
    h.state_mut().query_panel_mut().sql = busy.1.to_owned();
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, "busy time per thread", |h| {
        let p = h.state().query_panel();
        !p.running()
            && p.last()
                .is_some_and(|f| f.sql == busy.1 && f.elapsed > Duration::ZERO)
    });
    let mut got: Vec<(String, i64)> = rows(&h)
        .into_iter()
        .map(|r| match (&r[0], &r[1]) {
            (Cell::Text(t), Cell::Int(n)) => (t.clone(), *n),
            other => panic!("{other:?}"),
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [("worker-1".to_owned(), 2), ("worker-2".to_owned(), 1)]
    );
}
