//! What timing each poll added to an `in_frame` future (issue 41), as a ratio to the floor of
//! two clock reads: the same bench built at two commits and run alternately.
//!
//! Each line: the floor, then ns a poll above the bare future for a spurious poll and a
//! self-waking one (a poll and a wake), and that in floors; four repetitions per process (a
//! process's memory layout moves the figure, so compare many processes, not repetitions).
//! It uses only API that predates issue 41, so it builds at its base, 0ab8aaa:
//!
//! ```text
//! git worktree add /tmp/then 0ab8aaa
//! cp -r stopwatch/benches/polls_then_now.rs stopwatch/benches/poll_shapes /tmp/then/stopwatch/benches/
//! printf '\n[[bench]]\nname = "polls_then_now"\nharness = false\n' >> /tmp/then/stopwatch/Cargo.toml
//! (cd /tmp/then && cargo bench -p framelog-stopwatch --bench polls_then_now -- then)
//! cargo bench -p framelog-stopwatch --bench polls_then_now -- now
//! ```
//!
//! then run the two executables (`target/release/deps/polls_then_now-*`) in turn, many times.

#![allow(missing_docs)]

mod poll_shapes;

use poll_shapes::{POLLS, Ticks, counting_waker, drive, floor, measure};
use stopwatch::{BufferingMode, FutureExt, Stopwatch};

fn main() {
    let tag = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let waker = counting_waker();
    let floor = floor();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let rec = Stopwatch::builder()
        .dir(dir.path())
        .mode(BufferingMode::Block)
        .build()
        .expect("recorder");
    for rep in 0..4 {
        let mut line = format!("{tag:<5} floor {floor:5.1} ns");
        for wake in [false, true] {
            let ticks = || Ticks { left: POLLS, wake };
            let bare = measure(|| drive(ticks(), &waker));
            let framed = measure(|| drive(ticks().in_frame(rec.start("poll bench")), &waker));
            let shape = if wake { "self-waking" } else { "spurious" };
            line += &format!(
                "  {shape}: {:5.1} ns above bare ({:4.2} floors)",
                framed - bare,
                (framed - bare) / floor
            );
        }
        println!("{line}  rep {rep}");
    }
    rec.shutdown();
}
