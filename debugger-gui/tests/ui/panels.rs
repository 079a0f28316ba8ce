//! The panels under the Timeline: the frame's data, contexts, statistics, the histogram, resizing.

use super::*;

#[test]
fn selecting_a_frame_shows_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let key = write_request(&w, 1, T0, "GET /users/:id");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    assert!(
        h.query_by_label_contains("SELECT id, name").is_none(),
        "data is never preloaded"
    );
    boxes(&h, "User: Select")[0].click();
    step_until(
        &mut h,
        "data",
        |h| matches!(h.state().data_state(), DataState::Ready(k, _) if *k == key),
    );
    h.step();
    h.step();
    let sel = h.state().selected().expect("a frame is selected");
    let info = h.state().model().unwrap().info(sel).unwrap();
    assert_eq!(info.label, "User: Select");
    assert_eq!(info.duration, 500_000);
    // The data tree shows every field with its BSON type.
    assert!(
        h.query_by_label_contains("SELECT id, name FROM users")
            .is_some()
    );
    assert!(
        h.query_by_label("2023-11-14T22:13:20Z").is_some(),
        "date shown as RFC 3339"
    );
    assert!(
        h.query_by_label("ObjectId(\"abababababababababababab\")")
            .is_some()
    );
    assert!(h.query_by_label("2 bytes, generic: cafe").is_some());
    assert!(h.query_by_label("int64").is_some());
    assert!(h.query_by_label_contains("db").is_some());
    assert!(h.query_by_label("📋 Copy as JSON").is_some());
    // The details grid: duration and self time.
    assert_eq!(
        h.query_all_by_label("500 µs").count(),
        2,
        "duration and self time"
    );
    // The selected box is marked selected for assistive technology too.
    let selected = boxes(&h, "User: Select");
    assert_eq!(selected[0].accesskit_node().is_selected(), Some(true));
}

#[test]
fn contexts_and_statistics_panels() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    write_request(&w, 1, T0 + 2_000_000, "GET /orders");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "GET /orders").is_empty());
    // The contexts list has both requests; selecting one zooms to it and selects its root.
    let c = canvas(&h);
    let row = h
        .query_all_by_label("GET /orders")
        .find(|n| !c.contains_rect(n.rect()))
        .expect("contexts row");
    row.click();
    step_until(&mut h, "the context's root selected", |h| {
        h.state().selected().is_some() && boxes(h, "GET /users/:id").is_empty()
    });
    let sel = h.state().selected().unwrap();
    let info = h.state().model().unwrap().info(sel).unwrap();
    assert_eq!(info.label, "GET /orders");
    assert!(!h.state().timeline().follow);
    assert!(
        boxes(&h, "GET /users/:id").is_empty(),
        "zoomed to the selected context"
    );
    // Statistics: one row per label; clicking it searches for exactly that label.
    h.get_by_label("Statistics").click();
    step_until(&mut h, "the statistics table", |h| {
        let c = canvas(h);
        h.query_by_label("Count").is_some()
            && h.query_by_label("p50").is_some()
            && h.query_all_by_label("User: Select")
                .any(|n| !c.contains_rect(n.rect()))
    });
    let c = canvas(&h);
    let stat = h
        .query_all_by_label("User: Select")
        .find(|n| !c.contains_rect(n.rect()))
        .expect("statistics row");
    stat.click();
    step_until(&mut h, "the label searched", |h| {
        h.state().search_matches().is_some_and(|m| m.frames == 2)
    });
    assert_eq!(h.state().search_text(), "\"User: Select\"");
    assert_eq!(h.state().search_matches().unwrap().frames, 2);
}

#[test]
fn the_bottom_panel_can_be_dragged_smaller_on_every_tab() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for k in 0..40u64 {
        write_request(&w, 1 + (k % 4) as u32, T0 + k * 2_000_000, "GET /a");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 120)
    });
    for tab in ["Contexts", "Statistics", "Histogram"] {
        h.get_by_label(tab).click();
        h.step();
        h.step();
        let before = canvas(&h).height();
        // The divider: the panel's top edge, just above its tab row.
        let tabs = h.get_by_label("Contexts").rect();
        let edge = egui::pos2(canvas(&h).center().x, tabs.top() - 7.0);
        drag(&mut h, edge, edge + egui::vec2(0.0, 160.0));
        h.step();
        let after = canvas(&h).height();
        assert!(
            after >= before + 100.0,
            "{tab}: the timeline grew from {before} px to only {after} px"
        );
        // Back up for the next tab.
        let tabs = h.get_by_label("Contexts").rect();
        let edge = egui::pos2(canvas(&h).center().x, tabs.top() - 7.0);
        drag(&mut h, edge, edge - egui::vec2(0.0, 160.0));
        h.step();
    }
}

#[test]
fn histogram_shows_a_labels_durations_and_goes_to_the_slowest() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 30 queries of 10..300 µs, then one of 5 ms.
    let frames: Vec<(u64, u64, &str, Category)> = (0..31u64)
        .map(|k| {
            let d = if k == 30 { 5_000_000 } else { (k + 1) * 10_000 };
            (T0 + k * 10_000_000, d, "db: query", Category::DATABASE)
        })
        .collect();
    let first = append_frames(&w, 1, "db", &frames);
    let worker = w.worker();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 31)
    });
    let at = h
        .state()
        .model()
        .unwrap()
        .find(FrameKey::new(worker, first))
        .unwrap();
    h.state_mut().select(Some(at));
    h.step();
    h.get_by_label("Histogram").click();
    step_until(&mut h, "the histogram", |h| {
        h.query_by_label_contains("31 frames · min 10").is_some()
    });
    // The 5 ms query is alone at the right end of the log scale.
    let c = h
        .get_by_role_and_label(Role::Canvas, "Duration histogram")
        .rect();
    click_at(&mut h, egui::pos2(c.right() - 3.0, c.center().y));
    step_until(&mut h, "the bar's frames", |h| {
        h.query_by_label_contains("longest first").is_some()
    });
    assert!(h.query_by_label_contains("1 frame lasting").is_some());
    h.get_by_label("Go to slowest").click();
    step_until(&mut h, "the slowest selected", |h| {
        h.state()
            .selected()
            .and_then(|at| h.state().model().unwrap().info(at))
            .is_some_and(|i| i.duration == 5_000_000)
    });
}

#[test]
fn the_statistics_table_does_not_resort_under_the_pointer() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_frames(&w, T0, "job: alpha", 3, 1_000_000);
    write_frames(&w, T0 + 10_000_000, "job: beta", 1, 1_000_000);
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 4)
    });
    h.get_by_label("Statistics").click();
    // The table's row for a label (not the timeline's box).
    let row = |h: &Harness<'_, DebuggerApp>, label: &str| -> Option<Rect> {
        let c = canvas(h);
        h.query_all_by_label(label)
            .map(|n| n.rect())
            .find(|r| r.top() > c.bottom())
    };
    step_until(
        &mut h,
        "alpha above beta (more total time)",
        |h| matches!((row(h, "job: alpha"), row(h, "job: beta")), (Some(a), Some(b)) if a.top() < b.top()),
    );
    // The pointer rests on the table while beta overtakes alpha.
    let alpha = row(&h, "job: alpha").unwrap();
    h.hover_at(alpha.center());
    h.step();
    write_frames(&w, T0 + 20_000_000, "job: beta", 5, 1_000_000);
    step_until(&mut h, "the new frames loaded", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 9)
    });
    for _ in 0..5 {
        h.step();
    }
    let (a, b) = (
        row(&h, "job: alpha").unwrap(),
        row(&h, "job: beta").unwrap(),
    );
    assert!(a.top() < b.top(), "no re-sort under the pointer");
    // Pointer gone: the table catches up.
    h.hover_at(canvas(&h).center());
    step_until(
        &mut h,
        "beta above alpha",
        |h| matches!((row(h, "job: alpha"), row(h, "job: beta")), (Some(a), Some(b)) if b.top() < a.top()),
    );
}
