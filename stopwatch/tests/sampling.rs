//! Sampling is decided once per context and inherited by every nested frame.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::read_log;
use stopwatch::{Sampling, Stopwatch};

#[test]
fn fixed_probability_records_whole_contexts() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Stopwatch::builder()
        .dir(dir.path())
        .sampling(Sampling::Probability(0.3))
        .build()
        .unwrap();
    const ROOTS: usize = 20_000;
    let mut recorded = 0;
    for _ in 0..ROOTS {
        let root = rec.start("request");
        let child = rec.start("child");
        let grandchild = rec.start("grandchild");
        assert_eq!(root.is_recording(), child.is_recording());
        assert_eq!(root.is_recording(), grandchild.is_recording());
        assert_eq!(root.context().unwrap().is_sampled(), root.is_recording());
        recorded += root.is_recording() as usize;
    }
    drop(rec);
    let frac = recorded as f64 / ROOTS as f64;
    assert!((0.27..0.33).contains(&frac), "{frac}");
    let log = read_log(dir.path());
    assert_eq!(log.starts.len(), recorded * 3);
    assert_eq!(log.end_records as usize, recorded * 3);
    // Every recorded frame's context is a recorded root: no partial contexts.
    let roots: HashSet<u32> = log
        .starts
        .iter()
        .filter(|s| s.label == "request")
        .map(|s| s.key.id)
        .collect();
    assert_eq!(roots.len(), recorded);
    assert!(log.starts.iter().all(|s| roots.contains(&s.context)));
}

#[test]
fn adaptive_sampling_caps_contexts_per_second() {
    let dir = tempfile::tempdir().unwrap();
    const CAP: u32 = 50;
    let rec = Stopwatch::builder()
        .dir(dir.path())
        .sampling(Sampling::Adaptive {
            max_per_second: CAP,
        })
        .build()
        .unwrap();
    let t0 = Instant::now();
    let mut total = 0u64;
    while t0.elapsed() < Duration::from_millis(1500) {
        let _root = rec.start("request");
        let _child = rec.start("child");
        total += 1;
    }
    drop(rec);
    let log = read_log(dir.path());
    let roots: Vec<_> = log.starts.iter().filter(|s| s.label == "request").collect();
    // Per wall-clock second (the window the sampler uses), never more than the cap.
    let mut per_sec = std::collections::HashMap::<u64, u32>::new();
    for r in &roots {
        *per_sec.entry(r.timestamp / 1_000_000_000).or_default() += 1;
    }
    assert!(per_sec.values().all(|n| *n <= CAP), "{per_sec:?}");
    // A 1.5 s run touches at least two windows; the first one fills its cap.
    assert!(roots.len() as u32 >= CAP, "{}", roots.len());
    assert!(
        total > 10 * roots.len() as u64,
        "load was far above the cap"
    );
    // Children follow their roots.
    assert_eq!(log.starts.len(), roots.len() * 2);
}
