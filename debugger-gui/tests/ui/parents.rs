//! Recorded parents in every view, and logs that predate them.

use super::*;

#[test]
fn a_child_on_another_thread_follows_its_recorded_parent_in_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let [req, other, load, ..] = write_hopping_request(&w, true);
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "load_user").is_empty());
    {
        let m = h.state().model().unwrap();
        // On the timeline, load_user stays on worker-2's lane, beside the unrelated request.
        let at = |id| m.find(FrameKey::new(w.worker(), id)).unwrap();
        assert_eq!(at(load).lane, at(other).lane);
        assert_ne!(at(load).lane, at(req).lane);
        // The call tree and self times follow the recorded parent.
        assert_eq!(
            call_path_total(&m, &["request", "load_user"]),
            Some(400_000)
        );
        assert_eq!(
            call_path_total(&m, &["request", "load_user", "decode"]),
            Some(100_000)
        );
        assert_eq!(call_path_total(&m, &["other", "load_user"]), None);
        // (Read before its parent, it was a root until the parent came: nothing is left
        // there.)
        assert_eq!(call_path_total(&m, &["load_user"]).unwrap_or(0), 0);
        let stats = |l: &str| m.stats().get(m.labels().get(l).unwrap());
        assert_eq!(
            stats("request").self_time_ns(),
            1_000_000 - 400_000 - 100_000
        );
        assert_eq!(stats("other").self_time_ns(), 2_000_000);
        assert_eq!(m.info(at(req)).unwrap().self_ns, 500_000);
        assert!(!m.parents_inferred());
    }
    assert!(h.query_by_label("parents inferred").is_none());
    // The aggregated flame graph draws load_user under request.
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    step_until(&mut h, "the merged boxes", |h| {
        merged_box(h, "load_user").is_some()
    });
    let (r, l, o) = (
        merged_box(&h, "request").unwrap(),
        merged_box(&h, "load_user").unwrap(),
        merged_box(&h, "other").unwrap(),
    );
    assert!(l.top() > r.top() && l.left() >= r.left() - 0.5 && l.right() <= r.right() + 0.5);
    assert!(
        l.right() <= o.left() + 0.5 || l.left() >= o.right() - 0.5,
        "not under other"
    );
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::Timeline);
    step_until(&mut h, "the timeline", |h| {
        !boxes(h, "load_user").is_empty()
    });
    // Selecting load_user: the panel names its parent and child, and the timeline links the
    // parent on worker-1 to it.
    boxes(&h, "load_user")[0].click();
    step_until(&mut h, "the parent listed", |h| {
        h.query_by_label("request on worker-1 (another thread)")
            .is_some()
    });
    assert!(h.query_by_label("decode on worker-2").is_some());
    let (sel, links) = (
        h.state().selected().unwrap(),
        h.state().timeline().drawn.links.clone(),
    );
    let parent = h
        .state()
        .model()
        .unwrap()
        .find(FrameKey::new(w.worker(), req))
        .unwrap();
    assert_eq!(links, [(parent, sel)]);
    // The parent is a click away, and lists its children on both threads.
    settle(&mut h);
    h.get_by_label("request on worker-1 (another thread)")
        .click();
    step_until(&mut h, "the parent selected", |h| {
        h.state().selected() == Some(parent)
    });
    step_until(&mut h, "its children listed", |h| {
        h.query_by_label("load_user on worker-2 (another thread)")
            .is_some()
    });
    assert!(h.query_by_label("render on worker-1").is_some());
    assert!(h.query_by_label("Children (2)").is_some());
    assert_eq!(h.state().timeline().drawn.links, [(parent, sel)]);
    settle(&mut h);
    // The context view: the request as one tree across both threads; the unrelated
    // request is not in it.
    h.get_by_label("Context view").click();
    step_until(&mut h, "the context view", |h| {
        h.state().context_view().tree().is_some()
            && h.query_by_label(&format!("Context {req} · request"))
                .is_some()
    });
    let m = h.state().model().unwrap();
    let rows: Vec<(String, u32, bool)> = h
        .state()
        .context_view()
        .tree()
        .unwrap()
        .rows
        .iter()
        .map(|r| (m.labels().name(m.label_of(r.at)).to_owned(), r.depth, r.hop))
        .collect();
    drop(m);
    let want = [
        ("request", 0, false),
        ("load_user", 1, true),
        ("decode", 2, false),
        ("render", 1, false),
    ];
    assert_eq!(
        rows,
        want.map(|(l, d, hop)| (l.to_owned(), d, hop)),
        "the request's tree"
    );
    assert!(h.query_by_label_contains("4 frames on 2 threads").is_some());
    assert!(h.query_by_label_contains("1 hop between threads").is_some());
    // A row is a click away from selecting its frame.
    settle(&mut h);
    let decode_row = h
        .query_all_by_label("decode")
        .find(|n| n.accesskit_node().role() == Role::Button)
        .expect("decode's row");
    decode_row.click();
    step_until(&mut h, "decode selected", |h| {
        h.state()
            .selected()
            .and_then(|at| h.state().model().unwrap().info(at))
            .is_some_and(|i| i.label == "decode")
    });
}

#[test]
fn a_log_without_parents_infers_them_as_docs_format_says_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let [req, _, load, ..] = write_hopping_request(&w, false);
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "load_user").is_empty());
    {
        let m = h.state().model().unwrap();
        assert!(m.parents_inferred());
        // `docs/FORMAT.md`, *Parents of type 0 starts*: load_user ran where no frame of its
        // context ran, so its parent is the context's root, the request (as `framelog stats`
        // and the exports infer it), read after it and moved under it when it came.
        assert_eq!(
            call_path_total(&m, &["request", "load_user"]),
            Some(400_000)
        );
        assert_eq!(
            call_path_total(&m, &["request", "load_user", "decode"]),
            Some(100_000)
        );
        assert_eq!(call_path_total(&m, &["load_user"]).unwrap_or(0), 0);
        let at = m.find(FrameKey::new(w.worker(), req)).unwrap();
        assert_eq!(m.info(at).unwrap().self_ns, 1_000_000 - 400_000 - 100_000);
        let l = m.find(FrameKey::new(w.worker(), load)).unwrap();
        assert_eq!(
            m.parent_of(l),
            Some(debugger_gui::model::parents::ParentOf::Frame(at))
        );
    }
    assert!(
        h.query_by_label("parents inferred").is_some(),
        "the status bar says so"
    );
    boxes(&h, "load_user")[0].click();
    step_until(&mut h, "the panel", |h| {
        h.query_by_label("(inferred)").is_some()
    });
    assert!(h.query_by_label("none (a root)").is_none());
    settle(&mut h);
    assert_eq!(
        h.state().timeline().drawn.links.len(),
        1,
        "linked to its parent on the other lane"
    );
    // The context view gathers the request's frames from both threads into one tree.
    h.get_by_label("Context view").click();
    step_until(&mut h, "the context view", |h| {
        h.state().context_view().tree().is_some()
    });
    let m = h.state().model().unwrap();
    let rows: Vec<(String, u32)> = h
        .state()
        .context_view()
        .tree()
        .unwrap()
        .rows
        .iter()
        .map(|r| (m.labels().name(m.label_of(r.at)).to_owned(), r.depth))
        .collect();
    assert_eq!(
        rows,
        [
            ("request", 0),
            ("load_user", 1),
            ("decode", 2),
            ("render", 1)
        ]
        .map(|(l, d)| (l.to_owned(), d))
    );
}
