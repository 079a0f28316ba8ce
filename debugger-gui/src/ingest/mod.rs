//! The ingest: a log's records into the shared model, from a log directory (`dir`, desktop
//! only) or a remote log's socket ([`crate::remote`]); both feed the same applier stage
//! ([`crate::apply`]). What records do to the model is [`crate::feed`]'s.
//!
//! For a directory, the reader runs on its own thread (`read_some` in slices of a few MiB, then
//! `wait_for_growth` once caught up) and copies each slice's records into a buffer; a second
//! thread applies the buffers to the model, taking the model lock in chunks short enough that
//! the UI thread never waits long and never waits on disk I/O. After each chunk it asks egui
//! to repaint. Reading and indexing overlap, so loading uses both cores.

#[cfg(not(target_arch = "wasm32"))]
mod dir;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;
use std::thread::JoinHandle;
#[cfg(not(target_arch = "wasm32"))]
use std::time::Duration;
use web_time::Instant;

pub use crate::apply::IngestStatus;
use crate::apply::Shared;
use crate::model::Model;
use crate::remote::Link;
use crate::source::LogSource;

/// A running ingest for one log: a directory's reader and applier threads, or a viewer
/// session's connection and applier thread.
pub struct Ingest {
    source: LogSource,
    shared: Arc<Shared>,
    started: Instant,
    handle: Option<JoinHandle<()>>,
    /// The viewer session of a remote log (frame data is asked for through it).
    link: Option<Arc<Link>>,
    /// In the browser, what takes in the remote session's messages (its timer stops when
    /// this is dropped).
    #[cfg(target_arch = "wasm32")]
    _driver: Option<crate::remote::Driver>,
}

impl Ingest {
    /// Starts reading `dir`; with `follow`, keeps tailing it after catching up.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn start(dir: impl AsRef<Path>, follow: bool) -> Self {
        let dir = dir.as_ref().to_owned();
        let shared = Arc::new(Shared::default());
        let handle = {
            let shared = shared.clone();
            let dir = dir.clone();
            std::thread::Builder::new()
                .name("framelog-ingest".into())
                .spawn(move || dir::run(&dir, follow, &shared))
                .expect("spawn ingest thread")
        };
        Self {
            source: LogSource::Dir(dir),
            shared,
            started: Instant::now(),
            handle: Some(handle),
            link: None,
        }
    }

    /// Opens the log a server serves at `url` (`ws://HOST:PORT/ws`), presenting `token` if
    /// it has one (empty if none), and follows it. Connection problems and a refusal are
    /// shown in the status, never a panic.
    pub fn connect(url: &str, token: &str) -> Self {
        let shared = Arc::new(Shared::default());
        #[cfg(not(target_arch = "wasm32"))]
        let (link, handle) = crate::remote::start(url, token, shared.clone());
        #[cfg(target_arch = "wasm32")]
        let (link, driver) = crate::remote::start(url, token, shared.clone());
        Self {
            source: LogSource::Remote(url.to_owned()),
            shared,
            started: Instant::now(),
            #[cfg(not(target_arch = "wasm32"))]
            handle,
            #[cfg(target_arch = "wasm32")]
            handle: None,
            link: Some(link),
            #[cfg(target_arch = "wasm32")]
            _driver: driver,
        }
    }

    /// Where the log comes from.
    pub fn source(&self) -> &LogSource {
        &self.source
    }

    /// The log directory (`None` for a remote log).
    pub fn dir(&self) -> Option<&Path> {
        self.source.dir()
    }

    /// The viewer session of a remote log.
    pub(crate) fn link(&self) -> Option<&Arc<Link>> {
        self.link.as_ref()
    }

    /// When reading started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Locks the model (the ingest thread holds it for one chunk of records at most, and
    /// lets the UI in before taking it again).
    pub fn model(&self) -> MutexGuard<'_, Model> {
        self.shared.model_for_ui()
    }

    /// A copy of the current status.
    pub fn status(&self) -> IngestStatus {
        self.shared.status().clone()
    }

    /// Tells the thread which egui context to wake when new frames arrive.
    pub fn set_repaint(&self, ctx: &egui::Context) {
        self.shared.set_repaint(ctx);
    }

    /// Blocks until the thread has caught up with the log (or stopped), or `timeout` passes.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_caught_up(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let s = self.status();
            if s.caught_up || s.finished {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }
}

impl Drop for Ingest {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(link) = &self.link {
            // Closes the socket: its thread ends, and with it the applier's input.
            link.close();
        }
        // The thread notices within one wait interval; joining would stall the UI.
        drop(self.handle.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log's records applied to a model on this thread, without the ingest stages.
    fn model_read_directly(dir: &Path) -> Model {
        let mut bytes = Vec::new();
        framelog::LogReader::open(dir)
            .unwrap()
            .read_available(|_, rec| rec.encode_to_vec(&mut bytes))
            .unwrap();
        let mut direct = Model::new();
        direct.apply_bytes(&bytes);
        direct
    }

    #[test]
    fn the_ingest_thread_builds_the_same_model_as_applying_the_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let opts = crate::synth::SynthOptions {
            frames: 5_000,
            ..Default::default()
        };
        let n = crate::synth::write_log(dir.path(), &opts).unwrap();
        let ing = Ingest::start(dir.path(), false);
        assert!(ing.wait_caught_up(Duration::from_secs(20)));
        let direct = model_read_directly(dir.path());
        let m = ing.model();
        assert_eq!(m.frame_count(), n);
        assert_same_model(&m, &direct);
        let s = ing.status();
        assert!(s.caught_up && s.finished && s.errors.is_empty(), "{s:?}");
        assert!(s.bytes_read > 0 && s.bytes_read <= s.total_bytes, "{s:?}");
    }

    #[test]
    fn a_compacted_log_builds_the_same_model_as_applying_its_records() {
        // Several compact blocks, each numbering its labels in its own order: the reader stage
        // interns a label once per block by its index there, and must never carry an index
        // over to the next block.
        // With plot values and messages (plots in version 5's own streams), against the
        // records read directly, from the compact segments and from the raw ones before.
        let dir = tempfile::tempdir().unwrap();
        let (n, raw) = compacted_synth_log(dir.path());
        assert!(
            !compact_frame_segments(dir.path()).is_empty(),
            "the log has compact frame segments"
        );
        let ing = Ingest::start(dir.path(), false);
        assert!(ing.wait_caught_up(Duration::from_secs(60)));
        let m = ing.model();
        assert!(m.plots().value_count() > 0 && !m.messages().is_empty());
        assert_same_model(&m, &model_read_directly(dir.path()));
        // And what the raw segments held.
        let direct = raw;
        assert_eq!(m.frame_count(), n);
        assert_same_model(&m, &direct);
    }

    #[test]
    fn a_compact_block_damaged_mid_file_is_reported_and_the_blocks_after_it_keep_their_labels() {
        let dir = tempfile::tempdir().unwrap();
        let (n, _) = compacted_synth_log(dir.path());
        // Bytes in the middle of the biggest compact frame segment, inside some block.
        let (path, mut bytes) = compact_frame_segments(dir.path())
            .into_iter()
            .max_by_key(|(_, b)| b.len())
            .expect("a compact frame segment");
        let mid = bytes.len() / 2;
        for b in &mut bytes[mid..mid + 64] {
            *b ^= 0x5a;
        }
        std::fs::write(&path, &bytes).unwrap();
        let ing = Ingest::start(dir.path(), false);
        assert!(ing.wait_caught_up(Duration::from_secs(60)));
        let direct = model_read_directly(dir.path());
        let m = ing.model();
        assert!(
            m.frame_count() > 0 && m.frame_count() < n,
            "{} of {n}",
            m.frame_count()
        );
        assert_same_model(&m, &direct);
        let s = ing.status();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(s.errors.iter().any(|e| e.contains(&name)), "{:?}", s.errors);
    }

    /// The synthetic log of 150 k frames (a plot value every tenth, a message every
    /// hundredth), compacted whole; returns its frame count and the model of its records read
    /// before compaction (from the raw segments).
    fn compacted_synth_log(dir: &Path) -> (u64, Model) {
        let opts = crate::synth::SynthOptions {
            frames: 150_000,
            with_data: false,
            instants: true,
            ..Default::default()
        };
        let n = crate::synth::write_log(dir, &opts).unwrap();
        let raw = model_read_directly(dir);
        let all = framelog::compact::CompactOptions {
            all: true,
            ..Default::default()
        };
        framelog::compact::compact_log(dir, &all).unwrap();
        (n, raw)
    }

    /// The log's compact frame segments: path and bytes.
    fn compact_frame_segments(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.clone(), std::fs::read(&p).unwrap()))
            .filter(|(_, b)| {
                formats::FileHeader::decode_any(formats::FileKind::FrameLog, b)
                    .is_ok_and(|h| h.is_some_and(|h| h.is_compact()))
            })
            .collect()
    }

    /// Everything the views read: frames, statistics (percentiles too), call tree, contexts,
    /// plot series (each one's values as its track draws them) and messages.
    fn assert_same_model(m: &Model, direct: &Model) {
        assert_eq!(crate::model::same::difference(m, direct), None);
        let (a, b) = (m.plots().series(), direct.plots().series());
        assert_eq!(a.len(), b.len(), "plot series");
        for (x, y) in a.iter().zip(b) {
            assert_eq!((x.worker, &x.name, x.len()), (y.worker, &y.name, y.len()));
            let Some((t0, t1)) = x.time_range() else {
                continue;
            };
            assert_eq!(Some((t0, t1)), y.time_range());
            let px = ((t1 - t0) as f64 / 2000.0).max(1.0);
            let (mut bx, mut by) = (Vec::new(), Vec::new());
            x.lod(t0, t1 + 1, px, &mut bx);
            y.lod(t0, t1 + 1, px, &mut by);
            // The first bucket that differs, not thousands of them.
            let first = bx.iter().zip(&by).find(|(p, q)| p != q);
            assert_eq!(first, None, "series {}", x.name);
            assert_eq!(bx.len(), by.len(), "series {}", x.name);
        }
        let (a, b) = (m.messages(), direct.messages());
        assert_eq!(a.len(), b.len(), "messages");
        for (x, y) in a.entries().iter().zip(b.entries()) {
            assert_eq!((x, a.text(x)), (y, b.text(y)));
        }
    }

    #[test]
    fn pairing_on_the_reader_thread_matches_the_model_s_own() {
        // Ends before starts, a key reused after pairing, a start never ended, interleaved
        // workers: the ingest (paired by its reader) and the model (paired by itself) agree.
        let mut log = crate::model::test_log::Log::default();
        log.start(0, 1, 10, 1, "request")
            .end(0, 2, 30)
            .start(0, 2, 12, 1, "db")
            .start(1, 1, 11, 1, "other")
            .start(0, 3, 31, 1, "render")
            .end(1, 1, 40)
            .end(0, 3, 35)
            .end(0, 1, 50)
            .start(0, 1, 60, 1, "request")
            .end(0, 1, 70)
            .start(0, 4, 80, 4, "never ends")
            .end(0, 9, 90);
        let dir = tempfile::tempdir().unwrap();
        let w = framelog::LogWriter::open(dir.path()).unwrap();
        w.append_frames(&log.bytes).unwrap();
        drop(w);
        let ing = Ingest::start(dir.path(), false);
        assert!(ing.wait_caught_up(Duration::from_secs(20)));
        let direct = model_read_directly(dir.path());
        let m = ing.model();
        assert_eq!((m.frame_count(), m.open_count()), (6, 1));
        assert_same_model(&m, &direct);
    }

    #[test]
    fn segments_deleted_before_they_were_read_are_counted_and_reading_goes_on() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let write = |dir: &Path, label: &str| {
            let w = framelog::LogWriter::open(dir).unwrap();
            let mut rec = [0u8; 64];
            let mut bytes = Vec::new();
            for id in 1..=10u32 {
                let n = formats::FrameStart {
                    parent: formats::Parent::NotRecorded,
                    id,
                    worker: w.worker(),
                    timestamp: u64::from(id) * 1000,
                    context: id,
                    category: formats::Category::HTTP,
                    label,
                }
                .encode(&mut rec)
                .unwrap();
                bytes.extend_from_slice(&rec[..n]);
            }
            w.append_frames(&bytes).unwrap();
        };
        write(a.path(), "first");
        let ing = Ingest::start(a.path(), true);
        let deadline = Instant::now() + Duration::from_secs(30);
        while ing.model().frame_count() < 10 {
            assert!(Instant::now() < deadline, "the first segment read");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Segment 4 appears at once (a whole segment renamed in), as if 2 and 3 had been
        // written and deleted by retention before this window got to them.
        write(b.path(), "fourth");
        std::fs::rename(
            b.path().join("frames-000001.framelog"),
            a.path().join("frames-000004.framelog"),
        )
        .unwrap();
        while ing.status().pruned_segments != 2 || ing.model().frame_count() < 20 {
            assert!(
                Instant::now() < deadline,
                "read on past the gap: {:?}",
                ing.status()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(ing.status().errors.is_empty(), "{:?}", ing.status().errors);
    }

    #[test]
    fn following_an_empty_directory_waits_without_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let ing = Ingest::start(dir.path(), true);
        let deadline = Instant::now() + Duration::from_secs(10);
        while ing.status().waiting.is_none() {
            assert!(Instant::now() < deadline, "a waiting note");
            std::thread::sleep(Duration::from_millis(10));
        }
        let s = ing.status();
        assert!(s.errors.is_empty(), "{:?}", s.errors);
        assert!(s.waiting.unwrap().contains("waiting for programs"));
        // A program starts writing: the note goes.
        let w = framelog::LogWriter::open(dir.path()).unwrap();
        let mut rec = [0u8; 64];
        let n = formats::FrameStart {
            parent: formats::Parent::NotRecorded,
            id: 1,
            worker: w.worker(),
            timestamp: 1,
            context: 1,
            category: formats::Category::HTTP,
            label: "first",
        }
        .encode(&mut rec)
        .unwrap();
        w.append_frames(&rec[..n]).unwrap();
        while ing.status().waiting.is_some() {
            assert!(
                Instant::now() < deadline,
                "the note cleared once the log is there"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(ing.status().errors.is_empty());
    }

    #[test]
    fn not_a_log_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let ing = Ingest::start(dir.path(), false);
        assert!(ing.wait_caught_up(Duration::from_secs(5)));
        let s = ing.status();
        assert!(s.finished);
        assert!(
            s.errors[0].contains(": holds no frames yet (an empty directory"),
            "{:?}",
            s.errors
        );
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        let ing = Ingest::start(dir.path(), false);
        assert!(ing.wait_caught_up(Duration::from_secs(5)));
        let e = &ing.status().errors[0];
        assert!(e.contains(": not a framelog directory"), "{e}");
        let gone = dir.path().join("missing");
        let ing = Ingest::start(&gone, false);
        assert!(ing.wait_caught_up(Duration::from_secs(5)));
        let e = &ing.status().errors[0];
        assert!(e.ends_with("missing: no such directory"), "{e}");
        let file = dir.path().join("notes.txt");
        let ing = Ingest::start(&file, true);
        let deadline = Instant::now() + Duration::from_secs(10);
        while ing.status().errors.is_empty() {
            assert!(Instant::now() < deadline, "an error for a file");
            std::thread::sleep(Duration::from_millis(10));
        }
        let s = ing.status();
        assert!(
            s.errors[0].contains("notes.txt: a file, not a log directory"),
            "{:?}",
            s.errors
        );
        assert!(s.waiting.is_none(), "{:?}", s.waiting);
    }

    #[test]
    fn an_idle_followed_log_asks_for_no_repaints() {
        let dir = tempfile::tempdir().unwrap();
        crate::synth::write_log(
            dir.path(),
            &crate::synth::SynthOptions {
                frames: 2_000,
                ..Default::default()
            },
        )
        .unwrap();
        let ctx = egui::Context::default();
        let repaints = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let r = repaints.clone();
        ctx.set_request_repaint_callback(move |_| {
            r.fetch_add(1, Ordering::Relaxed);
        });
        // egui reports a request only while none is pending: paint (a headless frame) between
        // looks, as the window would.
        let paint = || {
            let mut out = ctx.run_ui(egui::RawInput::default(), |_| {});
            out.textures_delta.clear();
        };
        let ing = Ingest::start(dir.path(), true);
        ing.set_repaint(&ctx);
        let deadline = Instant::now() + Duration::from_secs(30);
        // Loaded, and the rate (first computed a second after the start: the load's) fallen
        // back to 0 a second later: its last change.
        let mut rated = false;
        loop {
            let s = ing.status();
            rated |= s.frames_per_sec > 0.0;
            if s.compacted && rated && s.frames_per_sec == 0.0 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the log loads and the rate settles"
            );
            paint();
            std::thread::sleep(Duration::from_millis(10));
        }
        // (The rate's own repaint follows its update by microseconds: give it a heartbeat.)
        std::thread::sleep(Duration::from_millis(1200));
        paint();
        // From then on nothing changes: no repaint over two heartbeats and liveness probes.
        let before = repaints.load(Ordering::Relaxed);
        let idle = Instant::now() + Duration::from_millis(2500);
        while Instant::now() < idle {
            paint();
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(repaints.load(Ordering::Relaxed), before, "idle: no repaint");
        // News still asks for one: the log grows.
        crate::synth::write_log(
            dir.path(),
            &crate::synth::SynthOptions {
                frames: 100,
                ..Default::default()
            },
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while repaints.load(Ordering::Relaxed) == before {
            assert!(Instant::now() < deadline, "a repaint for news");
            paint();
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
