//! The Timeline: search, zoom, pan, follow, merged boxes, the ruler's range selection, the overview strip, lane headers.

use super::*;

#[test]
fn search_highlights_matches_and_dims_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    write_request(&w, 2, T0 + 300_000, "GET /orders");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    h.get_by_label("Search").focus();
    h.step();
    h.get_by_label("Search").type_text("select");
    step_until(&mut h, "search", |h| h.state().search_matches().is_some());
    h.step();
    let m = h.state().search_matches().unwrap();
    assert_eq!((m.labels, m.frames), (1, 2));
    assert!(
        h.query_by_label_contains("2 matching frames in 1 label")
            .is_some()
    );
    for n in boxes(&h, "User: Select") {
        assert_eq!(
            n.accesskit_node().description().as_deref(),
            Some("search match")
        );
    }
    for label in ["GET /users/:id", "GET /orders", "template: user.html"] {
        for n in boxes(&h, label) {
            assert_eq!(
                n.accesskit_node().description().as_deref(),
                Some("dimmed"),
                "{label}"
            );
        }
    }
    let drawn = &h.state().timeline().drawn;
    let hits = drawn.labeled.iter().filter(|b| b.2).count();
    let dims = drawn.labeled.iter().filter(|b| b.3).count();
    assert_eq!((hits, dims), (2, 4));
    // Next selects the first match by start time, then the second.
    h.get_by_label("⏷ Next").click();
    h.step();
    h.step();
    let first = h.state().selected().unwrap();
    let model_first = h.state().model().unwrap().info(first).unwrap();
    assert_eq!(model_first.label, "User: Select");
    assert_eq!(model_first.start, T0 + 50_000);
    h.get_by_label("⏷ Next").click();
    h.step();
    let second = h
        .state()
        .model()
        .unwrap()
        .info(h.state().selected().unwrap())
        .unwrap();
    assert_eq!(second.start, T0 + 350_000);
    h.get_by_label("⏶ Prev").click();
    h.step();
    assert_eq!(h.state().selected(), Some(first));
}

#[test]
fn enter_searches_forward_and_a_quick_shift_enter_backward() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for (i, route) in ["GET /a", "GET /b", "GET /c"].into_iter().enumerate() {
        write_request(&w, 1, T0 + i as u64 * 300_000, route);
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    h.get_by_label("Search").focus();
    h.step();
    h.get_by_label("Search").type_text("select");
    step_until(&mut h, "search", |h| h.state().search_matches().is_some());
    let start = |h: &Harness<'_, DebuggerApp>| {
        let m = h.state().model().unwrap();
        h.state().selected().map(|at| m.info(at).unwrap().start)
    };
    // Shift is carried by the Enter key event only: a quick tap has released it by the time
    // the frame is drawn, so the frame's modifier state says no Shift.
    let enter = |h: &mut Harness<'_, DebuggerApp>, modifiers: egui::Modifiers| {
        for pressed in [true, false] {
            h.event(egui::Event::Key {
                key: egui::Key::Enter,
                physical_key: None,
                pressed,
                repeat: false,
                modifiers,
            });
        }
        h.step();
        h.step();
    };
    enter(&mut h, egui::Modifiers::NONE);
    assert_eq!(start(&h), Some(T0 + 50_000), "Enter: the first match");
    enter(&mut h, egui::Modifiers::NONE);
    assert_eq!(start(&h), Some(T0 + 350_000), "Enter: the next one");
    enter(&mut h, egui::Modifiers::SHIFT);
    assert_eq!(start(&h), Some(T0 + 50_000), "Shift+Enter: back, not on");
}

#[test]
fn double_click_zooms_to_a_frame_and_fit_zooms_back_out() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /users/:id");
    write_request(&w, 1, T0 + 5_000_000, "GET /orders");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| boxes(h, "User: Select").len() == 2);
    let before = boxes(&h, "User: Select")[0].rect().width();
    let center = boxes(&h, "User: Select")[0].rect().center();
    // The harness advances its clock by whole steps; give the double click room.
    h.ctx
        .options_mut(|o| o.input_options.max_double_click_delay = 2.0);
    // Two presses within egui's double-click time (a harness step is 0.25 s).
    h.event(egui::Event::PointerMoved(center));
    for _ in 0..2 {
        for pressed in [true, false] {
            h.event(egui::Event::PointerButton {
                pos: center,
                button: egui::PointerButton::Primary,
                pressed,
                modifiers: egui::Modifiers::NONE,
            });
        }
        h.step();
    }
    h.step();
    // The frame now fills most of the view, and following stopped.
    let c = canvas(&h);
    let after = boxes(&h, "User: Select");
    assert_eq!(after.len(), 1, "only the zoomed-to query is in view");
    assert!(
        after[0].rect().width() > 0.8 * c.width(),
        "{before} -> {}",
        after[0].rect().width()
    );
    assert!(!h.state().timeline().follow);
    assert!(boxes(&h, "GET /orders").is_empty());
    h.get_by_label("⛶ Zoom to fit").click();
    h.step();
    h.step();
    assert_eq!(boxes(&h, "User: Select").len(), 2);
}

#[test]
fn zooming_with_the_pointer_zooms_there_and_pauses_following() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 5 s of requests, 50 ms apart.
    for i in 0..100 {
        write_request(&w, 1, T0 + i * 50_000_000, "GET /orders");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "every request", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 300)
    });
    h.step();
    assert!(h.state().timeline().follow, "opens following");
    let c = canvas(&h);
    // The pointer at a fifth of the timeline (about 1 s), three zoom steps (ctrl+wheel).
    let pointer = egui::pos2(c.left() + c.width() * 0.2, c.center().y);
    let time_at = |h: &Harness<'_, DebuggerApp>| {
        let f = h.state().timeline();
        f.start + 0.2 * f.width
    };
    h.event(egui::Event::PointerMoved(pointer));
    h.step();
    let before = (time_at(&h), h.state().timeline().width);
    for _ in 0..3 {
        h.event(egui::Event::Zoom(1.5));
        h.step();
    }
    h.step();
    let f = h.state().timeline();
    assert!(!f.follow, "zooming at the pointer pauses following");
    assert!(
        f.width < before.1 / 3.0,
        "zoomed in: {} -> {}",
        before.1,
        f.width
    );
    assert!(
        (time_at(&h) - before.0).abs() < before.1 * 0.01,
        "the time under the pointer stays put: {} -> {}",
        before.0,
        time_at(&h)
    );
}

#[test]
fn panning_stops_half_a_view_past_either_end_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    write_request(&writer(dir.path()), 1, T0, "GET /users/:id");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "GET /users/:id").is_empty());
    h.state_mut().timeline_mut().zoom_to(T0, T0 + 100_000);
    h.step();
    h.step();
    let width = h.state().timeline().width;
    // Far before the log, then far after it.
    for (start, what) in [(-1e12, "before"), (1e12, "after")] {
        h.state_mut().timeline_mut().start = start;
        h.step();
        let f = h.state().timeline();
        let (lo, hi) = {
            let m = h.state().model().unwrap();
            let (a, b) = m.time_range().unwrap();
            let base = f.base.unwrap() as f64;
            (a as f64 - base, b as f64 - base)
        };
        assert!(
            f.start >= lo - width * 0.5 - 1.0 && f.start <= hi - width * 0.5 + 1.0,
            "{what}: view start {} outside [{}, {}]",
            f.start,
            lo - width * 0.5,
            hi - width * 0.5
        );
    }
}

/// Zoomed out, thousands of sub-pixel frames merge into one box that does not pass for a
/// frame: no label (their labels differ), and its tooltip sums what it stands for; a click
/// zooms to the frames it stands for.
#[test]
fn merged_boxes_say_what_they_stand_for_and_zoom_in_on_click() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 10,000 frames of 1 µs, 2 µs apart, alternating two labels; then one 1 ms frame.
    let mut frames: Vec<(u64, u64, &str, Category)> = (0..10_000u64)
        .map(|k| {
            let label = if k % 2 == 0 {
                "cache: get"
            } else {
                "cache: set"
            };
            (T0 + k * 2_000, 1_000, label, Category::DATABASE)
        })
        .collect();
    frames.push((T0 + 20_000_000, 1_000_000, "GET /slow", Category::HTTP));
    append_frames(&w, 1, "busy", &frames);

    let mut h = harness(DebuggerApp::open(dir.path()));
    // The whole log read first: a box found while frames still arrive is drawn again
    // differently (more frames merged) once they are in.
    step_until(&mut h, "the log read and a merged box", |h| {
        h.state().ingest_status().caught_up && !h.state().timeline().drawn.merged_boxes.is_empty()
    });
    assert!(
        h.state()
            .timeline()
            .drawn
            .labeled
            .iter()
            .all(|(_, l, ..)| !l.starts_with("cache")),
        "a merged box of mixed labels carries none"
    );
    let (rect, _, _, b) = h.state().timeline().drawn.merged_boxes[0];
    assert!(b.count > 100, "{b:?}");
    // The pointer rests on the box; if the layout moves the box away from it (a panel filled
    // in later, on a slow machine), the pointer follows it, as a user's would.
    let mut at = rect.center();
    h.hover_at(at);
    // The tooltip names the box under the pointer as it is drawn now.
    let mut shown = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while shown.is_none() {
        h.step();
        let boxes = &h.state().timeline().drawn.merged_boxes;
        match boxes.iter().find(|(r, ..)| r.contains(at)) {
            Some(&(_, _, _, b)) => {
                shown = Some(b).filter(|b| {
                    h.query_by_label_contains(&format!("{} frames (merged", b.count))
                        .is_some()
                })
            }
            None => {
                if let Some(&(r, ..)) = boxes.first() {
                    at = r.center();
                    h.hover_at(at);
                }
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for the merged tooltip at {at:?}; boxes drawn: {:?}",
            h.state().timeline().drawn.merged_boxes
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let b = shown.expect("found above");
    assert!(h.query_by_label_contains("largest: cache: ").is_some());
    h.event(egui::Event::PointerButton {
        pos: at,
        button: egui::PointerButton::Primary,
        pressed: true,
        modifiers: egui::Modifiers::default(),
    });
    h.event(egui::Event::PointerButton {
        pos: at,
        button: egui::PointerButton::Primary,
        pressed: false,
        modifiers: egui::Modifiers::default(),
    });
    let span = (b.end - b.start) as f64;
    step_until(&mut h, "the view zoomed to the merged frames", |h| {
        let f = h.state().timeline();
        f.width <= span * 1.3 && f.width >= span
    });
}

#[test]
fn next_match_starts_from_the_view_and_zooms_until_the_match_is_drawn_as_itself() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    // 400 requests 2 ms apart: zoomed to fit, each 0.5 ms query is far below a pixel.
    let keys: Vec<FrameKey> = (0..400u64)
        .map(|k| write_request(&w, 1, T0 + k * 2_000_000, "GET /users/:id"))
        .collect();
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 1200)
    });
    // The view: the second half of the log, still zoomed out, nothing selected.
    let half = T0 + 400_000_000;
    h.state_mut().timeline_mut().zoom_to(half, T0 + 800_000_000);
    h.step();
    h.step();
    h.get_by_label("Search").focus();
    h.step();
    h.get_by_label("Search").type_text("\"User: Select\"");
    step_until(&mut h, "the matches", |h| {
        h.state().search_matches().is_some()
    });
    h.get_by_label("⏷ Next").click();
    step_until(&mut h, "a selection", |h| h.state().selected().is_some());
    let at = h.state().selected().unwrap();
    let info = h.state().model().unwrap().info(at).unwrap();
    // The first query after the view's start (the view began 5 % of its width earlier).
    let view_start = half - 20_000_000;
    let expected = keys
        .iter()
        .zip(0u64..)
        .find(|(_, k)| T0 + k * 2_000_000 + 50_000 >= view_start)
        .map(|(key, _)| *key)
        .unwrap();
    assert_eq!(info.key, expected, "not the first match of the whole log");
    // Zoomed to it: the match is a quarter of the view and drawn as itself, labeled.
    step_until(&mut h, "the match drawn as itself", |h| {
        h.state()
            .timeline()
            .drawn
            .labeled
            .iter()
            .any(|(f, l, hit, _)| *f == at && l == "User: Select" && *hit)
    });
    let width = h.state().timeline().width;
    assert!(
        (1_500_000.0..=3_000_000.0).contains(&width),
        "about four times the 0.5 ms match: {width}"
    );
}

#[test]
fn selecting_a_frame_and_switching_tabs_keep_the_layout_still() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    let key = write_request(&w, 1, T0, "GET /users/:id");
    for k in 1..40u64 {
        write_request(
            &w,
            1 + k as u32 % 3,
            T0 + k * 2_000_000,
            "POST /a/very/long/route/name/that/goes/on/and/on/for/quite/a/while/longer/than/the/panel",
        );
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 120)
    });
    h.step();
    let before = canvas(&h);
    let at = h.state().model().unwrap().find(key).unwrap();
    h.state_mut().select(Some(at));
    step_until(&mut h, "the frame's data", |h| {
        matches!(h.state().data_state(), DataState::Ready(..))
    });
    for _ in 0..3 {
        h.step();
    }
    assert_eq!(
        canvas(&h),
        before,
        "the timeline keeps its size when a frame is selected"
    );
    h.get_by_label("Statistics").click();
    for _ in 0..3 {
        h.step();
    }
    assert_eq!(
        canvas(&h),
        before,
        "the bottom panel keeps its height across tabs"
    );
    h.get_by_label("Contexts").click();
    for _ in 0..3 {
        h.step();
    }
    assert_eq!(canvas(&h), before);
}

#[test]
fn dragging_on_the_ruler_selects_a_range_that_limits_the_panels_and_the_flame_graph() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for k in 0..4u64 {
        write_request(&w, 1, T0 + k * 2_000_000, "GET /a");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 12)
    });
    h.step();
    let c = canvas(&h);
    let f = h.state().timeline();
    let (base, start, width) = (f.base.unwrap(), f.start, f.width);
    let x = |t: u64| c.left() + ((t - base) as f64 - start) as f32 / width as f32 * c.width();
    let (from, to) = (T0 + 1_500_000, T0 + 5_500_000);
    drag(
        &mut h,
        egui::pos2(x(from), c.top() + 6.0),
        egui::pos2(x(to), c.top() + 6.0),
    );
    let (a, b) = h.state().timeline().selection.expect("a selected range");
    let px = (width / f64::from(c.width())) as u64 * 2;
    assert!(a.abs_diff(from) <= px && b.abs_diff(to) <= px, "{a} {b}");
    assert_eq!(
        (h.state().timeline().start, h.state().timeline().width),
        (start, width),
        "selecting does not pan"
    );
    // The contexts list holds the two requests that start in the range.
    step_until(&mut h, "contexts limited to the range", |h| {
        h.query_by_label("2 contexts").is_some()
    });
    h.get_by_label("Limit statistics and contexts to it")
        .click();
    step_until(&mut h, "all contexts again", |h| {
        h.query_by_label("4 contexts").is_some()
    });
    // The flame graph of the selected range: the two queries in it, merged.
    h.state_mut()
        .set_view(debugger_gui::app::CentralView::FlameGraph);
    h.step();
    h.get_by_label("Selected range").click();
    step_until(&mut h, "the range's flame graph", |h| {
        merged_box(h, "User: Select").is_some()
    });
    let q = merged_box(&h, "User: Select").unwrap();
    h.hover_at(q.center());
    step_until(&mut h, "two queries in the range", |h| {
        h.query_by_label_contains("2 frames").is_some()
    });
    h.get_by_label("Clear").click();
    h.step();
    assert_eq!(h.state().timeline().selection, None);
}

#[test]
fn clicking_the_overview_strip_moves_the_view_there() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    for k in 0..10u64 {
        write_request(&w, 1, T0 + k * 10_000_000, "GET /a");
    }
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "the whole log", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 30)
    });
    h.state_mut().timeline_mut().zoom_to(T0, T0 + 1_000_000);
    h.step();
    h.step();
    let width = h.state().timeline().width;
    let strip = h.get_by_role_and_label(Role::Canvas, "Overview").rect();
    click_at(
        &mut h,
        egui::pos2(strip.left() + strip.width() * 0.9, strip.center().y),
    );
    h.step();
    let f = h.state().timeline();
    let span = 91_000_000.0; // first start to last end
    let center = f.start + f.width / 2.0;
    assert!(
        (center - 0.9 * span).abs() < span * 0.02,
        "centered at 90 % of the log: {center} of {span}"
    );
    assert_eq!(f.width, width, "the zoom is kept");
    assert!(!f.follow);
}

#[test]
fn fit_keeps_following_pause_stops_it_and_contexts_name_their_thread() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 7, T0, "GET /a");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "frames", |h| !boxes(h, "User: Select").is_empty());
    // The contexts list says where each context ran.
    step_until(&mut h, "the thread column", |h| {
        h.query_by_label_contains("test-app (pid").is_some()
            && h.query_by_label_contains("· worker-7 (7)").is_some()
    });
    // Zoomed in, then F (fit): the whole log stays in view as it grows, and the status says so.
    h.state_mut().timeline_mut().zoom_to(T0, T0 + 100_000);
    step_until(&mut h, "paused by zooming", |h| {
        h.query_by_label_contains("Paused").is_some()
    });
    h.state_mut().timeline_mut().zoom_to_fit();
    step_until(&mut h, "fitted to a growing log: following", |h| {
        h.query_by_label_contains("Following").is_some()
    });
    write_request(&w, 7, T0 + 5_000_000, "GET /b");
    step_until(&mut h, "the view grew with the log", |h| {
        h.state().timeline().width > 5_000_000.0
    });
    // One click pauses: the view stops where it is.
    h.get_by_label_contains("Following").click();
    step_until(&mut h, "paused", |h| {
        h.query_by_label_contains("Paused").is_some()
    });
    let width = h.state().timeline().width;
    write_request(&w, 7, T0 + 20_000_000, "GET /c");
    step_until(&mut h, "the new request loaded", |h| {
        h.state().model().is_some_and(|m| m.frame_count() == 9)
    });
    h.step();
    assert_eq!(
        h.state().timeline().width,
        width,
        "paused: the view does not grow"
    );
}

#[test]
fn clicking_a_lane_header_collapses_and_expands_it() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(dir.path());
    write_request(&w, 1, T0, "GET /one");
    write_request(&w, 2, T0, "GET /two");
    let mut h = harness(DebuggerApp::open(dir.path()));
    step_until(&mut h, "both lanes", |h| {
        !boxes(h, "GET /one").is_empty() && !boxes(h, "GET /two").is_empty()
    });
    // The first lane's header sits right under the ruler.
    let c = canvas(&h);
    let header = egui::pos2(c.left() + 200.0, c.top() + 22.0 + 9.0);
    let below = boxes(&h, "GET /two")[0].rect().top();
    click_at(&mut h, header);
    step_until(&mut h, "lane one collapsed", |h| {
        boxes(h, "GET /one").is_empty() && !boxes(h, "GET /two").is_empty()
    });
    assert!(
        boxes(&h, "GET /two")[0].rect().top() < below,
        "the lanes below move up"
    );
    click_at(&mut h, header);
    step_until(&mut h, "lane one expanded", |h| {
        !boxes(h, "GET /one").is_empty()
    });
}
