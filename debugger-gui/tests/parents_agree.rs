//! One rule, three readers: each frame's parent as `framelog stats` finds it
//! (`analysis::parents`), as the exports place it (`framelog::export`'s tracks) and as the
//! debugger's model shows it must be the same frame, for random logs of recorded (type 6) and
//! inferred (type 0) parents, across threads and contexts (`docs/FORMAT.md`, *Parents*).

use std::collections::HashMap;

use formats::{Category, FrameEnd, FrameKey, FrameStart, Parent, Record, ThreadInfo};
use framelog::LogWriter;
use framelog::export::{ExportMessage, ExportOptions, Frame, FrameSink, PlotPoint};
use proptest::prelude::*;

/// One step of a random program.
#[derive(Debug, Clone)]
enum Step {
    /// Thread `t` starts a frame: a child of its innermost open frame unless `root`, its
    /// parent recorded (type 6) when `recorded`; `hop` makes its parent the innermost open
    /// frame of another thread instead (a task that moved threads, a context entered on
    /// another thread): recorded, that frame; not recorded (type 0), in that frame's context,
    /// and readers infer its parent from this thread.
    Start {
        t: u32,
        recorded: bool,
        root: bool,
        hop: Option<u32>,
    },
    /// Thread `t` ends its innermost open frame.
    End { t: u32 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1..=3u32, any::<bool>(), prop::bool::weighted(0.15), prop::option::weighted(0.2, 1..=3u32))
            .prop_map(|(t, recorded, root, hop)| Step::Start { t, recorded, root, hop }),
        2 => (1..=3u32).prop_map(|t| Step::End { t }),
    ]
}

/// The records of a program, in file order, and what each frame's parent is by construction.
fn records(worker: u8, steps: &[Step]) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut stacks: HashMap<u32, Vec<(u32, u32)>> = HashMap::new(); // thread -> (id, context)
    let (mut next, mut now, mut on) = (1u32, 1_700_000_000_000_000_000u64, 0u32);
    let put = |r: Record<'_>, bytes: &mut Vec<u8>| r.encode_to_vec(bytes);
    let thread = |t: u32, now: u64, on: &mut u32, bytes: &mut Vec<u8>| {
        if *on != t {
            *on = t;
            Record::ThreadInfo(ThreadInfo {
                worker,
                thread: t,
                timestamp: now,
                name: "",
            })
            .encode_to_vec(bytes);
        }
    };
    let labels = ["a", "b", "c", "d"];
    for s in steps {
        now += 1_000;
        match *s {
            Step::Start {
                t,
                recorded,
                root,
                hop,
            } => {
                thread(t, now, &mut on, &mut bytes);
                let here = stacks.get(&t).and_then(|s| s.last().copied());
                let hopped = hop
                    .filter(|&o| o != t)
                    .and_then(|o| stacks.get(&o).and_then(|s| s.last().copied()));
                let parent = if root { None } else { hopped.or(here) };
                let id = next;
                next += 1;
                let context = parent.map_or(id, |(_, c)| c);
                put(
                    Record::Start(FrameStart {
                        id,
                        worker,
                        timestamp: now,
                        context,
                        category: Category::FUNCTION,
                        label: labels[id as usize % labels.len()],
                        parent: match (recorded, parent) {
                            (false, _) => Parent::NotRecorded,
                            (true, None) => Parent::Root,
                            (true, Some((p, _))) => Parent::Frame(p),
                        },
                    }),
                    &mut bytes,
                );
                stacks.entry(t).or_default().push((id, context));
            }
            Step::End { t } => {
                if let Some((id, _)) = stacks.get_mut(&t).and_then(Vec::pop) {
                    thread(t, now, &mut on, &mut bytes);
                    put(
                        Record::End(FrameEnd {
                            id,
                            worker,
                            timestamp: now,
                        }),
                        &mut bytes,
                    );
                }
            }
        }
    }
    // Everything still open ends, innermost first, thread by thread.
    let mut threads: Vec<u32> = stacks.keys().copied().collect();
    threads.sort();
    for t in threads {
        while let Some((id, _)) = stacks.get_mut(&t).and_then(Vec::pop) {
            now += 1_000;
            thread(t, now, &mut on, &mut bytes);
            put(
                Record::End(FrameEnd {
                    id,
                    worker,
                    timestamp: now,
                }),
                &mut bytes,
            );
        }
    }
    bytes
}

/// Each frame's parent as the export gives it.
#[derive(Default)]
struct Parents(HashMap<FrameKey, Option<FrameKey>>);

impl FrameSink for Parents {
    fn process(&mut self, _: u8, _: u32, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn thread(&mut self, _: u8, _: u32, _: &str) -> std::io::Result<()> {
        Ok(())
    }
    fn frame(&mut self, f: &Frame<'_>) -> std::io::Result<()> {
        self.0.insert(f.key, f.parent);
        Ok(())
    }
    fn plot(&mut self, _: &PlotPoint<'_>) -> std::io::Result<()> {
        Ok(())
    }
    fn message(&mut self, _: &ExportMessage<'_>) -> std::io::Result<()> {
        Ok(())
    }
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn stats_the_exports_and_the_debugger_name_the_same_parent(
        steps in prop::collection::vec(step(), 1..60)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let w = LogWriter::open(dir.path()).unwrap();
        let bytes = records(w.worker(), &steps);
        w.append_frames(&bytes).unwrap();
        drop(w);

        // analysis::parents, as `stats` uses it.
        let mut rule = analysis::parents::Parents::new();
        let mut by_rule = HashMap::new();
        for item in formats::RecordIter::new(&bytes, 0) {
            let rec = item.unwrap().1;
            if let (Record::Start(s), Some(p)) = (&rec, rule.add(&rec)) {
                by_rule.insert(FrameKey::new(s.worker, s.id), p.key());
            }
        }
        // The exports' tracks.
        let mut exported = Parents::default();
        framelog::export::export(dir.path(), &ExportOptions::default(), &mut exported).unwrap();
        // The debugger's model.
        let mut model = debugger_gui::model::Model::new();
        model.apply_bytes(&bytes);

        prop_assert_eq!(by_rule.len(), exported.0.len());
        for (key, parent) in &by_rule {
            prop_assert_eq!(exported.0.get(key), Some(parent), "export, frame {}", key);
            let at = model.find(*key).expect("the model has every frame");
            let shown = model.parent_of(at).map(|p| match p {
                debugger_gui::model::parents::ParentOf::Frame(r) => model.info(r).unwrap().key,
                debugger_gui::model::parents::ParentOf::Missing(k) => k,
            });
            prop_assert_eq!(&shown, parent, "debugger, frame {}", key);
        }
    }
}
