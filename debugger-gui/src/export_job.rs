//! [`ExportJob`]: File > Export… runs `framelog export`'s code on a thread, so a big log does
//! not freeze the window; the window polls it for the outcome.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use framelog::export::chrome::ChromeTrace;
use framelog::export::speedscope::Speedscope;
use framelog::export::{ExportOptions, ExportSummary, FrameSink, export};

/// The formats File > Export… offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// Chrome Trace Event JSON (Perfetto UI, chrome://tracing, speedscope).
    Chrome,
    /// speedscope's own format.
    Speedscope,
}

impl ExportFormat {
    /// A default file name for a log directory.
    pub fn default_path(self, log: &Path) -> PathBuf {
        let stem = log
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "log".into());
        let name = match self {
            ExportFormat::Chrome => format!("{stem}.trace.json"),
            ExportFormat::Speedscope => format!("{stem}.speedscope.json"),
        };
        log.parent().unwrap_or(log).join(name)
    }
}

/// An export running on its own thread.
pub struct ExportJob {
    /// Where it writes.
    pub path: PathBuf,
    handle: Option<JoinHandle<Result<ExportSummary, String>>>,
}

impl ExportJob {
    /// Starts exporting the log in `dir` to `path`.
    pub fn start(dir: &Path, path: &Path, format: ExportFormat) -> Self {
        let (dir, out) = (dir.to_owned(), path.to_owned());
        let handle = std::thread::Builder::new()
            .name("export".into())
            .spawn(move || {
                let file = File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
                let w = BufWriter::with_capacity(1 << 20, file);
                let mut sink: Box<dyn FrameSink> = match format {
                    ExportFormat::Chrome => Box::new(
                        ChromeTrace::new(w).map_err(|e| format!("{}: {e}", out.display()))?,
                    ),
                    ExportFormat::Speedscope => Box::new(Speedscope::new(w)),
                };
                let opts = ExportOptions {
                    with_data: true,
                    ..Default::default()
                };
                export(&dir, &opts, sink.as_mut()).map_err(|e| format!("{}: {e}", out.display()))
            })
            .ok();
        Self {
            path: path.to_owned(),
            handle,
        }
    }

    /// The outcome once the thread is done (then `None` ever after).
    pub fn poll(&mut self) -> Option<Result<ExportSummary, String>> {
        if !self.handle.as_ref()?.is_finished() {
            return None;
        }
        let h = self.handle.take()?;
        Some(
            h.join()
                .unwrap_or_else(|_| Err("the export thread panicked".into())),
        )
    }

    /// Whether it still runs.
    pub fn running(&self) -> bool {
        self.handle.is_some()
    }
}
