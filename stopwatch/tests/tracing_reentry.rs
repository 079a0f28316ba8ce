//! User code inside `TracingLayer`: a field's `Debug` that logs re-enters the layer for the
//! same span while the layer is formatting. Its own test binary: only with a global
//! subscriber (and no scoped one anywhere in the process) does `tracing` let an event
//! re-enter the subscriber from inside it, as it does in applications.

use std::time::{Duration, Instant};

use formats::Record;
use framelog::{DataStore, LogReader};
use stopwatch::{Stopwatch, TracingLayer};
use tracing::{info, info_span};
use tracing_subscriber::prelude::*;

/// A value whose `Debug` logs.
struct LogsInDebug;

impl std::fmt::Debug for LogsInDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        tracing::warn!("formatting LogsInDebug");
        f.write_str("LogsInDebug")
    }
}

#[test]
fn a_field_whose_debug_logs_in_the_same_span_does_not_hang_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let rec = std::sync::Arc::new(Stopwatch::builder().dir(dir.path()).build().unwrap());
    tracing_subscriber::registry()
        .with(TracingLayer::new(&rec))
        .init();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let span = info_span!("request", late = tracing::field::Empty);
        {
            let _entered = span.enter();
            // Formatting the event's field logs another event into the same span; so does
            // recording a field later.
            info!(value = ?LogsInDebug, "with a logging field");
            span.record("late", tracing::field::debug(&LogsInDebug));
        }
        drop(span);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the application thread returned");
    // The span's frame, with both fields and every event, reaches the log.
    let deadline = Instant::now() + Duration::from_secs(60);
    let key = loop {
        rec.flush(Duration::from_secs(10));
        let mut found = None;
        LogReader::open(dir.path())
            .unwrap()
            .read_available(|_, r| {
                if let Record::End(e) = r {
                    found = Some(formats::FrameKey::new(e.worker, e.id));
                }
            })
            .unwrap();
        if let Some(key) = found {
            break key;
        }
        assert!(Instant::now() < deadline, "the request's frame ended");
        std::thread::sleep(Duration::from_millis(20));
    };
    let data = DataStore::open(dir.path())
        .unwrap()
        .get(key)
        .unwrap()
        .expect("fields and events");
    assert_eq!(data.get_str("late").unwrap(), "LogsInDebug");
    let messages: Vec<&str> = data
        .get_array("events")
        .unwrap()
        .iter()
        .map(|e| e.as_document().unwrap().get_str("message").unwrap())
        .collect();
    assert!(messages.contains(&"with a logging field"), "{messages:?}");
    assert!(messages.contains(&"formatting LogsInDebug"), "{messages:?}");
}
