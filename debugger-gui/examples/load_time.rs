//! Times the debugger's load of a log (open to caught up, reader + applier, no UI), best of N.
//!
//! `load_time write DIR FRAMES` records a stress log (2 threads, 4 deep, data every 100th
//! frame); `load_time synth DIR FRAMES [instants]` writes the model bench's synthetic log (8
//! threads; with `instants`, a plot value every 10th frame and a message every 100th) and
//! compacts it; `load_time load DIR [REPS]` prints the best load time and ns per frame, and
//! on Linux each load's CPU time (user + system, all threads): steadier than wall time on a
//! shared machine, and the load keeps both cores busy, so it is what a change saves.
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(&args[2]);
    match args[1].as_str() {
        "write" => {
            let frames: u64 = args[3].parse().unwrap();
            stopwatch::stress::run(&stopwatch::stress::StressOptions {
                dir: Some(dir),
                threads: 2,
                frames: frames / 2,
                mode: stopwatch::BufferingMode::Block,
                data_every: 100,
                depth: 4,
                ..Default::default()
            })
            .unwrap();
        }
        "synth" => {
            let frames: u64 = args[3].parse().unwrap();
            let opts = debugger_gui::synth::SynthOptions {
                frames,
                threads: 8,
                with_data: false,
                instants: args.get(4).is_some_and(|a| a == "instants"),
                ..Default::default()
            };
            debugger_gui::synth::write_compacted_log(&dir, &opts).unwrap();
        }
        _ => {
            let reps: usize = args.get(3).map_or(3, |s| s.parse().unwrap());
            let mut best = Duration::MAX;
            let mut frames = 0;
            for _ in 0..reps {
                let (t, cpu) = (Instant::now(), cpu_seconds());
                let ing = debugger_gui::ingest::Ingest::start(&dir, false);
                assert!(ing.wait_caught_up(Duration::from_secs(3600)));
                let dt = t.elapsed();
                let cpu = cpu_seconds().zip(cpu).map(|(b, a)| b - a);
                frames = ing.model().frame_count();
                best = best.min(dt);
                match cpu {
                    Some(c) => eprintln!(
                        "  {:.3} s, cpu {c:.2} s (by thread: {})",
                        dt.as_secs_f64(),
                        thread_cpu_seconds()
                    ),
                    None => eprintln!("  {:.3} s", dt.as_secs_f64()),
                }
            }
            println!(
                "{frames} frames: best {:.3} s, {:.1} ns/frame",
                best.as_secs_f64(),
                best.as_nanos() as f64 / frames as f64
            );
        }
    }
}

/// CPU seconds of each of this process's threads named `framelog-*` (the ingest's stages, in
/// the order they started), from `/proc/self/task`.
fn thread_cpu_seconds() -> String {
    let mut threads: Vec<(u64, String, f64)> = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_owned();
        let f: Vec<&str> = stat[close + 2..].split(' ').collect();
        let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        let tid = task.file_name().to_string_lossy().parse().unwrap_or(0);
        if name.starts_with("framelog") {
            threads.push((tid, name, (ticks(11) + ticks(12)) as f64 / 100.0));
        }
    }
    threads.sort_by_key(|t| t.0);
    let parts: Vec<String> = threads.iter().map(|t| format!("{:.2}", t.2)).collect();
    parts.join(" + ")
}

/// This process's CPU time so far (user + system, every thread), from `/proc/self/stat`
/// (`None` where there is none). In clock ticks of 1/100 s, as Linux reports them to programs.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces, and ends at the last ')').
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}
