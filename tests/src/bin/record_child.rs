//! A program recording as fast as it can into a log with small segments and a retention
//! budget: `record_child DIR FRAMES_PER_THREAD SEGMENT_MIB MAX_MIB`. Prints the stress
//! report as one JSON line.

use std::process::ExitCode;

use stopwatch::BufferingMode;
use stopwatch::stress::{Segments, StressOptions, run};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, frames, segment_mib, max_mib] = args.as_slice() else {
        eprintln!("usage: record_child DIR FRAMES_PER_THREAD SEGMENT_MIB MAX_MIB");
        return ExitCode::FAILURE;
    };
    let number = |s: &String| s.parse::<u64>().ok();
    let (Some(frames), Some(segment_mib), Some(max_mib)) =
        (number(frames), number(segment_mib), number(max_mib))
    else {
        eprintln!("record_child: FRAMES_PER_THREAD, SEGMENT_MIB and MAX_MIB are numbers");
        return ExitCode::FAILURE;
    };
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
