//! The Flame graph view: merging by call path, focus, the sandwich, comparing with a baseline.

use super::*;

#[test]
fn flame_graph_merges_frames_by_call_path_and_focuses_on_click() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // Three requests of one route and one of another: each is a 1 ms root with a 0.5 ms
    // query and a 0.35 ms template.
    let keys: Vec<FrameKey> = ["GET /a", "GET /a", "GET /a", "POST /b"]
        .iter()
        .enumerate()
        .map(|(k, route)| write_request(&w, 1, T0 + k as u64 * 2_000_000, route))
        .collect();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the merged boxes", |h| {
        merged_box(h, "GET /a").is_some()
    });
    let canvas = h
        .get_by_role_and_label(Role::Canvas, "Aggregated flame graph")
        .rect();
    // Width is total time: GET /a (3 ms) is three quarters of the 4 ms, left of POST /b.
    let a = merged_box(&h, "GET /a").unwrap();
    let b = merged_box(&h, "POST /b").unwrap();
    assert!(
        (a.width() / canvas.width() - 0.75).abs() < 0.01,
        "{a:?} in {canvas:?}"
    );
    assert!(a.right() <= b.left() + 1.0, "the heaviest first");
    // The three queries under GET /a merge into one box, a row below it, half its width.
    let drawn = &h.state().flame_graph().drawn;
    let queries: Vec<Rect> = drawn
        .iter()
        .filter(|(_, l, _)| l == "User: Select")
        .map(|(_, _, r)| *r)
        .collect();
    assert_eq!(
        queries.len(),
        2,
        "one per call path: under GET /a and under POST /b"
    );
    let qa = *queries
        .iter()
        // A row below it (rows are sized to the pane: not a fixed height).
        .find(|r| {
            (a.left()..a.right()).contains(&r.center().x) && (r.top() - a.bottom()).abs() < 2.0
        })
        .unwrap();
    assert!((qa.width() / a.width() - 0.5).abs() < 0.01);
    assert!(qa.top() > a.top());
    // The tooltip tells total, share and count.
    h.hover_at(qa.center());
    step_until(&mut h, "the tooltip", |h| {
        h.query_by_label_contains("3 frames").is_some()
    });
    assert!(h.query_by_label_contains("37.5 %").is_some());
    // Click: the query's subtree is full width.
    click_at(&mut h, qa.center());
    step_until(&mut h, "focus on the query", |h| {
        merged_box(h, "User: Select").is_some_and(|r| r.width() > canvas.width() * 0.99)
    });
    assert!(
        merged_box(&h, "POST /b").is_none(),
        "other paths leave the view"
    );
    // Clicking its caller (the full-width row above) goes back up to GET /a.
    let caller = merged_box(&h, "GET /a").unwrap();
    click_at(&mut h, caller.center());
    step_until(&mut h, "focus on GET /a", |h| {
        merged_box(h, "template: user.html").is_some_and(|r| r.width() > canvas.width() * 0.3)
            && merged_box(h, "POST /b").is_none()
    });
    // Scope: the selected frame's context only.
    h.get_by_label("Reset zoom").click();
    h.get_by_label("Selected context").click();
    step_until(&mut h, "asks for a selection", |h| {
        h.query_by_label_contains("Select a frame").is_some()
    });
    let select = |h: &mut Harness<'_, DebuggerApp>, key: FrameKey| {
        let at = h.state().model().unwrap().find(key).unwrap();
        h.state_mut().select(Some(at));
    };
    select(&mut h, keys[3]);
    // (Selecting opens the frame-data panel: the graph narrows.)
    let full_width = |h: &Harness<'_, DebuggerApp>, label: &str| {
        let c = h
            .get_by_role_and_label(Role::Canvas, "Aggregated flame graph")
            .rect();
        merged_box(h, label).is_some_and(|r| r.width() > c.width() * 0.99)
    };
    step_until(&mut h, "only POST /b's context", |h| {
        full_width(h, "POST /b") && merged_box(h, "GET /a").is_none()
    });
    // Every context like the selected one's: the three GET /a requests merged.
    select(&mut h, keys[0]);
    h.get_by_label("Contexts like selected").click();
    step_until(&mut h, "the three GET /a requests", |h| {
        full_width(h, "GET /a") && merged_box(h, "POST /b").is_none()
    });
    let a = merged_box(&h, "GET /a").unwrap();
    h.hover_at(a.center());
    step_until(&mut h, "the merged requests' tooltip", |h| {
        h.query_by_label_contains("3 frames").is_some()
    });
}

#[test]
fn comparing_with_a_baseline_log_lists_changes_and_colors_the_flame_graph() {
    let base_dir = tempfile::tempdir().unwrap();
    let new_dir = tempfile::tempdir().unwrap();
    let (bw, nw) = (writer(base_dir.path()), writer(new_dir.path()));
    for k in 0..4u64 {
        write_request(&bw, 1, T0 + k * 2_000_000, "GET /a");
        write_request(&nw, 1, T0 + k * 2_000_000, "GET /a");
        write_request(&nw, 2, T0 + k * 2_000_000 + 1_000_000, "POST /b");
    }
    let mut app = DebuggerApp::open(new_dir.path());
    app.compare_with(base_dir.path());
    let mut h = harness(app);
    step_until(&mut h, "both logs", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 24)
            && h.state()
                .compare_model()
                .is_some_and(|m| m.frame_count() == 12)
    });
    // The Compare tab: a label only the open log has, and unchanged ones.
    step_until(&mut h, "the comparison", |h| {
        h.query_by_label_contains("Baseline:").is_some()
            && h.query_by_label_contains("– -> 4  new").is_some()
    });
    assert!(h.query_by_label_contains("4 -> 4  +0 %").is_some());
    // The flame graph says how each call path's share of the time changed.
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the flame graph", |h| {
        merged_box(h, "GET /a").is_some()
    });
    assert!(h.query_by_label("Difference vs compared log").is_some());
    let a = merged_box(&h, "GET /a").unwrap();
    h.hover_at(a.center());
    step_until(&mut h, "the share change", |h| {
        h.query_by_label_contains("(compared log: 100.0 %)")
            .is_some()
    });
}

#[test]
fn right_click_shows_the_sandwich_of_a_label() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for (k, route) in ["GET /a", "GET /a", "GET /a", "POST /b"].iter().enumerate() {
        write_request(&w, 1, T0 + k as u64 * 2_000_000, route);
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 12)
    });
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the flame graph", |h| {
        merged_box(h, "User: Select").is_some()
    });
    let q = merged_box(&h, "User: Select").unwrap();
    h.hover_at(q.center());
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: q.center(),
            button: egui::PointerButton::Secondary,
            pressed,
            modifiers: egui::Modifiers::default(),
        });
    }
    step_until(&mut h, "the sandwich", |h| {
        h.state().flame_graph().sandwich.is_some()
            && h.query_by_label("Back to the flame graph").is_some()
    });
    h.step();
    // Both routes call the query: callers, each as wide as the query's time under it.
    let drawn = &h.state().flame_graph().drawn;
    let width = |label: &str| {
        drawn
            .iter()
            .filter(|(_, l, _)| l == label)
            .map(|(_, _, r)| r.width())
            .collect::<Vec<f32>>()
    };
    let (a, b, q) = (width("GET /a"), width("POST /b"), width("User: Select"));
    assert_eq!((a.len(), b.len()), (1, 1), "{drawn:?}");
    assert!(
        (a[0] / b[0] - 3.0).abs() < 0.05,
        "three of the four queries are under GET /a"
    );
    assert_eq!(
        q.len(),
        2,
        "the query at the root of callers and of callees"
    );
    h.get_by_label("Back to the flame graph").click();
    step_until(&mut h, "the flame graph again", |h| {
        h.state().flame_graph().sandwich.is_none() && merged_box(h, "POST /b").is_some()
    });
}
