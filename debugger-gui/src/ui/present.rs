//! Presentation strings for what the model holds: the model keeps data, the UI words it.

use crate::model::{Model, UNKNOWN_THREAD};

/// A lane's title: process name (pid) and thread name/number.
pub fn lane_title(model: &Model, lane: u32) -> String {
    let l = &model.lanes()[lane as usize];
    let w = model.worker(l.worker);
    let process = if w.name.is_empty() {
        format!("worker {}", l.worker)
    } else {
        format!("{} (pid {})", w.name, w.pid)
    };
    let thread = thread_title(model, lane);
    let stopped = if w.stop_is_news() {
        " · stopped writing"
    } else {
        ""
    };
    format!("{process} · {thread}{stopped}")
}

/// A lane's thread with its number: "name (N)", else "thread N".
pub fn thread_title(model: &Model, lane: u32) -> String {
    let l = &model.lanes()[lane as usize];
    match (l.thread, l.thread_name.is_empty()) {
        (UNKNOWN_THREAD, _) => "thread ?".to_owned(),
        (t, true) => format!("thread {t}"),
        (t, false) => format!("{} ({t})", l.thread_name),
    }
}

/// A lane's thread, shortly: its name, else "thread N".
pub fn thread_name(model: &Model, lane: u32) -> String {
    let l = &model.lanes()[lane as usize];
    match (l.thread, l.thread_name.is_empty()) {
        (UNKNOWN_THREAD, _) => "thread ?".to_owned(),
        (t, true) => format!("thread {t}"),
        (_, false) => l.thread_name.clone(),
    }
}

/// A frame as a link names it: "label on thread".
pub fn frame_link(model: &Model, at: crate::model::FrameRef) -> String {
    format!(
        "{} on {}",
        model.labels().name(model.label_of(at)),
        thread_name(model, at.lane)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::test_log::Log;

    #[test]
    fn lane_titles_name_the_process_and_the_thread() {
        let mut l = Log::default();
        l.worker(0, 42, "app").thread(0, 1, "main");
        l.start(0, 1, 100, 1, "request").end(0, 1, 200);
        l.start(3, 9, 100, 9, "job").end(3, 9, 150);
        let m = l.model();
        let titles: Vec<String> = (0..m.lanes().len() as u32)
            .map(|lane| lane_title(&m, lane))
            .collect();
        assert!(
            titles.contains(&"app (pid 42) · main (1)".to_owned()),
            "{titles:?}"
        );
        assert!(
            titles.contains(&"worker 3 · thread ?".to_owned()),
            "{titles:?}"
        );
    }
}
