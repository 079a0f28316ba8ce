//! A program recording as fast as it can into a log with small segments and a retention
//! budget: `record_child DIR FRAMES_PER_THREAD SEGMENT_MIB MAX_MIB [hold]`. Prints the stress
//! report as one JSON line. With `hold`, it keeps its recorder (and the writer's background
//! compactor) until its stdin closes, then exits.

use std::io::Read;
use std::process::ExitCode;

use stopwatch::stress::{Segments, StressOptions, run};
use stopwatch::{BufferingMode, Stopwatch};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (dir, frames, segment_mib, max_mib, hold) = match args.as_slice() {
        [d, f, s, m] => (d, f, s, m, false),
        [d, f, s, m, h] if h == "hold" => (d, f, s, m, true),
        _ => {
            eprintln!(
                "usage: record_child DIR FRAMES_PER_THREAD SEGMENT_MIB|SEGMENT_KIBk MAX_MIB [hold]"
            );
            return ExitCode::FAILURE;
        }
    };
    let number = |s: &String| s.parse::<u64>().ok();
    // SEGMENT_MIB may say KiB instead ("256k"): packed logs take few bytes a frame, and a
    // test that wants many segments should not need millions of frames.
    let segment_kib = segment_mib
        .strip_suffix('k')
        .and_then(|k| k.parse::<u64>().ok());
    let segment_mib = match segment_kib {
        Some(_) => Some(1),
        None => number(segment_mib),
    };
    let (Some(frames), Some(segment_mib), Some(max_mib)) =
        (number(frames), segment_mib, number(max_mib))
    else {
        eprintln!("record_child: FRAMES_PER_THREAD, SEGMENT_MIB and MAX_MIB are numbers");
        return ExitCode::FAILURE;
    };
    if hold || segment_kib.is_some() {
        // The same workload on a recorder this program keeps until told to go (or, for
        // segments given in KiB, until it is done).
        let bytes = segment_kib.map_or(segment_mib.max(1) << 20, |k| k.max(1) << 10);
        let recorder = match Stopwatch::builder()
            .mode(BufferingMode::Block)
            .dir(dir)
            .segment_bytes(bytes, bytes)
            .retain(Some(max_mib << 20), None)
            .build()
        {
            Ok(r) => r,
            Err(e) => {
                eprintln!("record_child: {e}");
                return ExitCode::FAILURE;
            }
        };
        stopwatch::stress::record(&recorder, 2, frames, 2, 10);
        if hold {
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        }
        recorder.shutdown();
        return ExitCode::SUCCESS;
    }
    let opts = StressOptions {
        dir: Some(dir.into()),
        threads: 2,
        frames,
        mode: BufferingMode::Block,
        data_every: 10,
        depth: 2,
        segments: Segments {
            segment_mib: Some(segment_mib),
            max_mib: Some(max_mib),
        },
        ..Default::default()
    };
    match run(&opts) {
        Ok(r) => {
            println!(
                "{{\"emitted\":{},\"dropped\":{},\"written_bytes\":{}}}",
                r.emitted, r.dropped, r.written_bytes
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("record_child: {e}");
            ExitCode::FAILURE
        }
    }
}
