//! Async time (issue 41): an asynchronous frame's busy / queued / waiting rows, the status
//! bar's slow polls, the Slow polls tab (a click selects the frame that blocked), their marks
//! on the timeline, the frames' share strips, the flame graph's busy weight and the context
//! view's breakdown and critical path.

use super::*;

use debugger_gui::app::{BottomTab, CentralView};
use formats::{FramePolls, Parent, SlowPoll};

const MS: u64 = 1_000_000;

/// Writes, as a tokio service records them: `task: after order` (async, 10 ms: busy 7.5,
/// queued 1.5, measured) on worker-1 with a blocking `search: reindex (blocking)` in it and
/// a 7.1 ms slow poll; `email: order confirmation` (a tracing span, 10 ms, busy 1 ms) on
/// worker-2 with a 1.2 ms slow poll; and a synchronous `GET /orders` (1 ms, no polls).
/// Returns the ids of the task, the reindex, the email and the request.
fn write_async_log(w: &LogWriter) -> [u32; 4] {
    let worker = w.worker();
    let id = w.reserve_ids(4).unwrap();
    let [task, reindex, email, get] = [id, id + 1, id + 2, id + 3];
    let start = |id, t, ctx, label, parent, category| {
        Record::Start(FrameStart {
            parent,
            id,
            worker,
            timestamp: T0 + t,
            context: ctx,
            category,
            label,
        })
    };
    let end = |id, t| {
        Record::End(FrameEnd {
            id,
            worker,
            timestamp: T0 + t,
        })
    };
    let thread = |thread, name| {
        Record::ThreadInfo(ThreadInfo {
            worker,
            thread,
            timestamp: T0,
            name,
        })
    };
    let polls = |id, t, flags, [polls, busy, queued, longest, first, slow]: [u64; 6]| {
        Record::FramePolls(FramePolls {
            id,
            worker,
            timestamp: T0 + t,
            flags,
            polls,
            busy_ns: busy,
            queued_ns: queued,
            longest_poll_ns: longest,
            first_poll_ns: first,
            slow_polls: slow,
        })
    };
    let slow = |id, t, duration_ns| {
        Record::SlowPoll(SlowPoll {
            id,
            worker,
            timestamp: T0 + t,
            duration_ns,
        })
    };
    let recs = [
        thread(1, "worker-1"),
        start(
            task,
            0,
            task,
            "task: after order",
            Parent::Root,
            Category::JOB,
        ),
        start(
            reindex,
            MS,
            task,
            "search: reindex (blocking)",
            Parent::Frame(task),
            Category::FUNCTION,
        ),
        end(reindex, 8 * MS),
        slow(task, MS, 7_100_000),
        polls(
            task,
            10 * MS,
            1,
            [3, 7_500_000, 1_500_000, 7_100_000, 500_000, 1],
        ),
        end(task, 10 * MS),
        thread(2, "worker-2"),
        start(
            email,
            2 * MS,
            email,
            "email: order confirmation",
            Parent::Root,
            Category::EMAIL,
        ),
        slow(email, 3 * MS, 1_200_000),
        polls(email, 12 * MS, 0, [2, MS, 200_000, 1_200_000, 200_000, 1]),
        end(email, 12 * MS),
        start(
            get,
            14 * MS,
            get,
            "GET /orders",
            Parent::Root,
            Category::HTTP,
        ),
        end(get, 15 * MS),
    ];
    let mut bytes = Vec::new();
    for r in recs {
        r.encode_to_vec(&mut bytes);
    }
    w.append_frames(&bytes).unwrap();
    [task, reindex, email, get]
}

fn async_window(dir: &Path) -> (Harness<'static, DebuggerApp>, [u32; 4]) {
    let w = writer(dir);
    let ids = write_async_log(&w);
    drop(w);
    let mut h = harness(DebuggerApp::open(dir));
    step_until(&mut h, "the async frames drawn", |h| {
        !boxes(h, "task: after order").is_empty() && !boxes(h, "GET /orders").is_empty()
    });
    (h, ids)
}

/// Whether a widget labelled exactly `label` is shown (the panel and a tooltip may both be).
fn shown(h: &Harness<'_, DebuggerApp>, label: &str) -> bool {
    h.query_all_by_label(label).next().is_some()
}

/// Whether a widget whose label contains `part` is shown.
fn shown_containing(h: &Harness<'_, DebuggerApp>, part: &str) -> bool {
    h.query_all_by_label_contains(part).next().is_some()
}

fn selected_label(h: &Harness<'_, DebuggerApp>) -> Option<String> {
    let at = h.state().selected()?;
    h.state().model()?.info(at).map(|i| i.label)
}

#[test]
fn an_async_frame_shows_where_its_time_went_and_a_synchronous_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = async_window(dir.path());
    assert!(!shown(&h, "Busy"), "nothing selected or hovered");
    boxes(&h, "task: after order")[0].click();
    step_until(&mut h, "the task selected", |h| {
        selected_label(h).as_deref() == Some("task: after order")
    });
    settle(&mut h);
    for (row, value) in [
        ("Busy", "7.50 ms (75.0 %)"),
        ("Queued", "1.50 ms (15.0 %)"),
        ("Waiting", "1.00 ms (10.0 %)"),
        ("Polls", "3"),
        ("Longest poll", "7.10 ms"),
        ("First poll after", "500 µs"),
        ("Slow polls", "1"),
    ] {
        assert!(shown(&h, row), "the {row} row");
        assert!(shown(&h, value), "{row}: {value} in the Frame panel");
    }
    // A tracing span: its queued time is only the delay to its first poll.
    boxes(&h, "email: order confirmation")[0].click();
    step_until(&mut h, "the email selected", |h| {
        selected_label(h).as_deref() == Some("email: order confirmation")
    });
    settle(&mut h);
    assert!(shown(
        &h,
        "200 µs (2.0 %), only the delay to its first poll: the rest counts as waiting"
    ));
    assert!(shown(&h, "8.80 ms (88.0 %)"), "waiting");
    // A synchronous frame: no breakdown at all.
    boxes(&h, "GET /orders")[0].click();
    step_until(&mut h, "the request selected", |h| {
        selected_label(h).as_deref() == Some("GET /orders")
    });
    settle(&mut h);
    // ("Slow polls" is the bottom tab's name too.)
    for row in [
        "Busy",
        "Queued",
        "Waiting",
        "Polls",
        "Longest poll",
        "First poll after",
    ] {
        assert!(!shown(&h, row), "no {row} row");
    }
    // The hover tooltip has the same rows.
    let task = boxes(&h, "task: after order")[0].rect();
    h.hover_at(task.center());
    step_until(&mut h, "the task's tooltip", |h| {
        shown(h, "7.50 ms (75.0 %)")
    });
    assert!(shown(&h, "Busy"));
}

#[test]
fn the_status_bar_counts_slow_polls_and_their_list_selects_the_frame_that_blocked() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = async_window(dir.path());
    assert_ne!(h.state().tab(), BottomTab::SlowPolls);
    h.get_by_label("⚠ 2 slow polls").click();
    step_until(&mut h, "the Slow polls tab", |h| {
        h.state().tab() == BottomTab::SlowPolls
            && shown_containing(h, "2 slow polls, the longest first")
    });
    settle(&mut h);
    // Longest first, each with its thread and the frame that blocked.
    let (a, b) = (
        h.get_by_label("7.10 ms").rect(),
        h.get_by_label("1.20 ms").rect(),
    );
    assert!(a.top() < b.top(), "the longest first: {a:?} {b:?}");
    assert!(shown(&h, "worker-1 (1)"), "the thread of the longest");
    assert!(shown(&h, "worker-2 (2)"));
    let c = canvas(&h);
    let named = |label: &str| {
        h.query_all_by_label(label)
            .any(|n| !c.contains_rect(n.rect()))
    };
    assert!(named("task: after order") && named("email: order confirmation"));
    // Zoomed away from it first: the click must bring it back into view.
    h.state_mut()
        .timeline_mut()
        .zoom_to(T0 + 13 * MS, T0 + 15 * MS);
    settle(&mut h);
    assert!(boxes(&h, "task: after order").is_empty());
    h.get_by_label("1.20 ms").click();
    step_until(&mut h, "the email selected and shown", |h| {
        selected_label(h).as_deref() == Some("email: order confirmation")
            && !boxes(h, "email: order confirmation").is_empty()
    });
    assert_eq!(h.state().slow_polls_panel().selected, Some(1));
    h.get_by_label("7.10 ms").click();
    step_until(&mut h, "the task selected and shown", |h| {
        selected_label(h).as_deref() == Some("task: after order")
            && !boxes(h, "task: after order").is_empty()
    });
    assert_eq!(h.state().view(), CentralView::Timeline);
}

#[test]
fn slow_polls_are_marked_on_their_lanes_and_async_frames_carry_their_shares() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, _) = async_window(dir.path());
    settle(&mut h);
    let drawn = h.state().timeline().drawn.clone();
    assert_eq!(drawn.slow_marks.len(), 2, "{:?}", drawn.slow_marks);
    assert_eq!(drawn.strips, 2, "the task and the email, not the request");
    // The task's mark spans its 7.1 ms on worker-1's lane, inside the task's box.
    let m = h.state().model().unwrap();
    let task_at = frame_labelled(&m, "task: after order");
    let &(bar, lane, mark) = drawn
        .slow_marks
        .iter()
        .find(|(_, lane, _)| *lane == task_at.lane)
        .unwrap();
    assert_eq!((mark.start, mark.end), (T0 + MS, T0 + 8_100_000));
    drop(m);
    let task_box = boxes(&h, "task: after order")[0].rect();
    let ratio = bar.width() / task_box.width();
    assert!((ratio - 0.71).abs() < 0.02, "7.1 of 10 ms: {ratio}");
    assert!(
        bar.bottom() <= task_box.top() + 1.0,
        "in the lane's title bar"
    );
    // Hovering it names the poll and its frame; a click selects that frame.
    h.hover_at(bar.center());
    step_until(&mut h, "the slow poll's tooltip", |h| {
        shown(h, "slow poll 7.10 ms in task: after order")
    });
    click_at(&mut h, bar.center());
    step_until(&mut h, "the task selected from its mark", |h| {
        selected_label(h).as_deref() == Some("task: after order")
    });
    assert!(
        !h.state().timeline().collapsed.contains(&lane),
        "the click selected; it did not fold the lane"
    );
}

#[test]
fn the_flame_graph_weighs_by_busy_time_and_the_context_view_shows_the_critical_path() {
    let dir = tempfile::tempdir().unwrap();
    let (mut h, [task, reindex, ..]) = async_window(dir.path());
    h.get_by_label("Flame graph").click();
    step_until(&mut h, "the flame graph", |h| {
        merged_box(h, "task: after order").is_some()
    });
    let wall = merged_box(&h, "task: after order").unwrap().width();
    h.get_by_label("Busy time").click();
    // Busy: the task 7.5 ms, the email 1 ms, the request 1 ms (synchronous: its duration).
    step_until(&mut h, "the busy weights", |h| {
        shown_containing(h, "9.50 ms busy in this scope")
    });
    settle(&mut h);
    let busy = merged_box(&h, "task: after order").unwrap().width();
    let email = merged_box(&h, "email: order confirmation").unwrap().width();
    assert!(
        busy > wall,
        "a bigger share of busy time than of wall time: {busy} vs {wall}"
    );
    assert!((email / busy - 1.0 / 7.5).abs() < 0.02, "{email} / {busy}");
    // The context view: the task's breakdown, and its critical path through the reindex.
    let at = frame_labelled(&h.state().model().unwrap(), "task: after order");
    h.state_mut().open_context(at);
    step_until(&mut h, "the context view", |h| {
        h.state().context_view().critical_path().len() == 2
    });
    let m = h.state().model().unwrap();
    let path: Vec<u32> = h
        .state()
        .context_view()
        .critical_path()
        .iter()
        .map(|s| m.info(s.at).unwrap().key.id)
        .collect();
    drop(m);
    assert_eq!(path, [task, reindex]);
    settle(&mut h);
    assert!(shown(
        &h,
        "busy 7.50 ms (75.0 %) · queued 1.50 ms (15.0 %) · waiting 1.00 ms (10.0 %)"
    ));
    assert!(shown(&h, "Critical path:"));
    h.get_by_label("search: reindex (blocking) 7.00 ms").click();
    step_until(&mut h, "the reindex selected from the path", |h| {
        selected_label(h).as_deref() == Some("search: reindex (blocking)")
    });
}
