//! [`LogWriter`]: appends record batches and frame data to a log, from any thread or process.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};

use formats::WorkerInfo;

use crate::append::{
    AppendConfig, DamageHook, DataAppender, DataBatch, FramesAppender, SyncPolicy,
};
use crate::error::{IoContext, Result};
use crate::retention::{Pruned, Retention};
use crate::worker::WorkerSlot;

/// Settings for opening a [`LogWriter`].
#[derive(Clone)]
pub struct WriterOptions {
    /// A frame-log segment is closed once it passes this many bytes.
    pub frames_segment_bytes: u64,
    /// A data segment is closed once it passes this many bytes (kept below 4 GiB).
    pub data_segment_bytes: u64,
    /// Use this worker id instead of the lowest free one.
    pub worker: Option<u8>,
    /// The process name written in the worker info record (default: the executable's name).
    pub process_name: Option<String>,
    /// The pid written in the worker info record (default: this process's; a server
    /// recording another program gives that program's).
    pub pid: Option<u32>,
    /// When appended bytes are forced to stable storage.
    pub sync: SyncPolicy,
    /// Told (once per segment) when a segment holds damage and is left untouched.
    pub on_damage: Option<DamageHook>,
    /// How much of the log [`LogWriter::prune`] keeps.
    pub retention: Retention,
    /// Compact the segments this writer seals, on a background thread at low priority
    /// (default: on with the `compact` feature, off without it).
    ///
    /// Without the `compact` feature this has no effect, `true` included: the writer leaves
    /// the segments it seals raw (they read the same; `framelog compact` can compact them
    /// later). The field is there in both builds, so code that sets it builds either way.
    pub compact: bool,
    /// Pack the batches this writer appends (default: on): about 5 bytes a frame on disk
    /// instead of 40-55, in version 6 segments, which readers built before them refuse
    /// (`docs/FORMAT.md`, *Packed batches: versions 6 and 7*). Off: plain batches in
    /// version 3 segments, byte for byte the records appended.
    pub pack: bool,
}

impl std::fmt::Debug for WriterOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterOptions")
            .field("frames_segment_bytes", &self.frames_segment_bytes)
            .field("data_segment_bytes", &self.data_segment_bytes)
            .field("worker", &self.worker)
            .field("process_name", &self.process_name)
            .field("pid", &self.pid)
            .field("sync", &self.sync)
            .field("on_damage", &self.on_damage.is_some())
            .field("retention", &self.retention)
            .field("compact", &self.compact)
            .field("pack", &self.pack)
            .finish()
    }
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            frames_segment_bytes: 256 << 20,
            data_segment_bytes: 1 << 30,
            worker: None,
            process_name: None,
            pid: None,
            sync: SyncPolicy::Never,
            on_damage: None,
            retention: Retention::default(),
            compact: cfg!(feature = "compact"),
            pack: true,
        }
    }
}

/// Appends to one log directory as one worker. `Send + Sync`: share it between threads.
pub struct LogWriter {
    dir: PathBuf,
    worker: u8,
    slot: Mutex<WorkerSlot>,
    frames: Mutex<FramesAppender>,
    data: Mutex<DataAppender>,
    retention: Retention,
    /// This writer's process name and pid, repeated in every frame-log segment it writes to.
    name: String,
    pid: u32,
    /// Compacts sealed segments in the background (`WriterOptions::compact`).
    #[cfg(feature = "compact")]
    compactor: Option<std::sync::Arc<crate::compact::Background>>,
    /// `WriterOptions::pack`.
    packs: bool,
}

fn default_process_name() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

impl LogWriter {
    /// Opens (creating if needed) the log in `dir` with default options.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(dir, WriterOptions::default())
    }

    /// Opens (creating if needed) the log in `dir`, claims a worker id and writes its
    /// worker info record.
    pub fn open_with(dir: impl AsRef<Path>, opts: WriterOptions) -> Result<Self> {
        let dir = dir.as_ref().to_owned();
        std::fs::create_dir_all(&dir).at(&dir)?;
        let slot = WorkerSlot::claim(&dir, opts.worker)?;
        let worker = slot.worker();
        let config = |limit| AppendConfig {
            worker,
            limit,
            sync: opts.sync,
            on_damage: opts.on_damage.clone(),
            pack: opts.pack,
        };
        let writer = Self {
            worker,
            slot: Mutex::new(slot),
            frames: Mutex::new(FramesAppender::new(&dir, config(opts.frames_segment_bytes))),
            data: Mutex::new(DataAppender::new(&dir, config(opts.data_segment_bytes))),
            retention: opts.retention,
            packs: opts.pack,
            name: opts.process_name.unwrap_or_else(default_process_name),
            pid: opts.pid.unwrap_or_else(std::process::id),
            #[cfg(feature = "compact")]
            compactor: opts
                .compact
                .then(|| crate::compact::Background::for_dir(&dir, crate::compact::DEFAULT_LEVEL)),
            dir,
        };
        writer.append_worker_info()?;
        Ok(writer)
    }

    /// Appends this writer's worker info record (at open, and in each new segment, so a log
    /// whose oldest segments retention deleted still names its processes).
    fn append_worker_info(&self) -> Result<()> {
        let info = WorkerInfo {
            worker: self.worker,
            timestamp: now_ns(),
            pid: self.pid,
            name: &self.name,
        };
        let mut buf = [0u8; 300];
        let n = info.encode(&mut buf).expect("worker info fits 300 bytes");
        self.frames.lock().append(&buf[..n])
    }

    /// This writer's worker id.
    pub fn worker(&self) -> u8 {
        self.worker
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Deletes the log's oldest sealed segments as the writer's [`Retention`] says (nothing
    /// if it sets no limit). Other writers of the log may prune too: that is safe.
    pub fn prune(&self) -> Result<Pruned> {
        crate::retention::prune(&self.dir, &self.retention)
    }

    /// Reserves `count` frame ids this worker never used in this log; returns the first.
    pub fn reserve_ids(&self, count: u32) -> Result<u32> {
        self.slot.lock().reserve(count)
    }

    /// Appends whole encoded records as one write under the segment's lock.
    pub fn append_frames(&self, records: &[u8]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let sealed = {
            let mut frames = self.frames.lock();
            let before = frames.segment();
            frames.append(records)?;
            before != 0 && frames.segment() != before
        };
        if sealed {
            // Right after its first batch in the new segment: readers of that segment alone
            // learn which process wrote it.
            self.append_worker_info()?;
        }
        self.sealed_one(sealed);
        Ok(())
    }

    /// Whether this writer packs batches (`WriterOptions::pack`): a caller that frames its
    /// own batches may then hand them over packed ([`LogWriter::append_batches`]).
    pub fn packs(&self) -> bool {
        self.packs
    }

    /// Appends `batches`, whole frame-log batches the caller framed itself (batch records
    /// with their bodies, as in `docs/FORMAT.md`, "Frame-log batches"), with one write under
    /// the segment's lock: the path of a recorder whose threads checksum their own records.
    ///
    /// What it checks, without walking the records: that `batches` is a run of whole batches
    /// whose headers hold (each header's own CRC32C, a `len` within the format's bound, every
    /// body entirely present, nothing after the last one); anything else is refused with
    /// [`Error::BadAppend`](crate::Error::BadAppend) and nothing is written. It does not
    /// recompute the bodies' CRC32C: a body that does not match its header's `crc` is written
    /// as given, and readers skip that batch as damage (it costs that batch only). Callers
    /// with plain records use [`LogWriter::append_frames`], which frames and checksums them.
    ///
    /// Batches may be packed (`docs/FORMAT.md`, *Packed batches*; see [`LogWriter::packs`]):
    /// they are written as they are into a segment that takes them, and unpacked for one that
    /// does not (a packed body that does not unpack is then refused as `BadAppend`).
    pub fn append_batches(&self, batches: &[u8]) -> Result<()> {
        if batches.is_empty() {
            return Ok(());
        }
        formats::check_batches(batches, |_, _| {}).map_err(|at| {
            crate::Error::BadAppend(format!(
                "the bytes at offset {at} of {} are not a whole batch whose header holds",
                batches.len()
            ))
        })?;
        let sealed = {
            let mut frames = self.frames.lock();
            let before = frames.segment();
            frames.append_framed(batches)?;
            before != 0 && frames.segment() != before
        };
        if sealed {
            self.append_worker_info()?;
        }
        self.sealed_one(sealed);
        Ok(())
    }

    /// Appends a batch of data entries and their index entries.
    pub fn append_data(&self, batch: &DataBatch) -> Result<()> {
        let sealed = {
            let mut data = self.data.lock();
            let before = data.segment();
            data.append(batch)?;
            before != 0 && data.segment() != before
        };
        self.sealed_one(sealed);
        Ok(())
    }

    /// An append moved on to a new segment: the log grew by a sealed one, so retention (if
    /// set) applies now, keeping the log within its budget plus the live segments. A failure
    /// here is left to the caller's own [`LogWriter::prune`] to report: the append itself
    /// succeeded.
    fn sealed_one(&self, sealed: bool) {
        if sealed && self.retention.is_set() {
            let _ = self.prune();
        }
        #[cfg(feature = "compact")]
        if sealed && let Some(c) = &self.compactor {
            c.wake();
        }
    }

    /// Forces everything appended so far to stable storage (`fdatasync`), unless the sync
    /// policy is [`SyncPolicy::Never`].
    pub fn sync(&self) -> Result<()> {
        self.frames.lock().sync()?;
        self.data.lock().sync()
    }
}

impl Drop for LogWriter {
    fn drop(&mut self) {
        // Best effort: an error here has no one left to report to.
        let _ = self.sync();
    }
}
