//! [`Logger`]: records of the `log` crate as messages (feature `log`).
//!
//! ```no_run
//! # #[cfg(feature = "log")] {
//! let _sw = stopwatch::Stopwatch::builder().dir("target/framelog").install()?;
//! stopwatch::Logger::install(log::LevelFilter::Info).expect("no other logger");
//! log::warn!("cache miss for user {}", 42); // a warn message in the current frame
//! # }
//! # Ok::<(), stopwatch::Error>(())
//! ```
//!
//! Each record becomes a message in the calling thread's current frame: its level mapped
//! one to one, its formatted text, and as fields its `target` (and `module`, `file`,
//! `line` when the record has them).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;

use formats::Level;
use serde::Serialize;

use crate::global::with_global;
use crate::inner::Inner;
use crate::message::message_with_on;
use crate::recorder::Recorder;

/// A `log::Log` that records every enabled `log` record as a message.
pub struct Logger {
    target: Option<Arc<Inner>>,
    max_level: log::LevelFilter,
}

impl Logger {
    /// A logger into the installed global stopwatch (records are ignored while none is),
    /// for records up to `max_level`.
    pub fn global(max_level: log::LevelFilter) -> Logger {
        Logger {
            target: None,
            max_level,
        }
    }

    /// A logger into `recorder`, for records up to `max_level`.
    pub fn new(recorder: &Recorder, max_level: log::LevelFilter) -> Logger {
        Logger {
            target: Some(recorder.inner.clone()),
            max_level,
        }
    }

    /// Makes [`Logger::global`] the `log` crate's logger and sets `log`'s maximum level;
    /// fails if a logger is already set.
    pub fn install(max_level: log::LevelFilter) -> Result<(), log::SetLoggerError> {
        log::set_boxed_logger(Box::new(Logger::global(max_level)))?;
        log::set_max_level(max_level);
        Ok(())
    }
}

/// The message level of a `log` level.
fn level(l: log::Level) -> Level {
    match l {
        log::Level::Error => Level::ERROR,
        log::Level::Warn => Level::WARN,
        log::Level::Info => Level::INFO,
        log::Level::Debug => Level::DEBUG,
        log::Level::Trace => Level::TRACE,
    }
}

/// A record's fields.
#[derive(Serialize)]
struct Fields<'a> {
    target: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    module: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

thread_local! {
    /// Where a record's text is formatted (reused: no `String` per record). Taken with
    /// `try_borrow_mut`: a record logged by a `Display` impl while another is formatted
    /// gets a buffer of its own.
    static TEXT: RefCell<String> = const { RefCell::new(String::new()) };
}

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.max_level
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let write = |inner: &Arc<Inner>| {
            let fields = Fields {
                target: record.target(),
                module: record.module_path(),
                file: record.file(),
                line: record.line(),
            };
            let level = level(record.level());
            // A literal message needs no formatting.
            if let Some(text) = record.args().as_str() {
                return message_with_on(inner, level, text, &fields);
            }
            // User `Display` code runs here, with nothing of the recorder held.
            let mut own = String::new();
            let _ = TEXT.try_with(|t| match t.try_borrow_mut() {
                Ok(mut t) => {
                    t.clear();
                    let _ = write!(t, "{}", record.args());
                    message_with_on(inner, level, &t, &fields);
                    if t.capacity() > 64 << 10 {
                        *t = String::new();
                    }
                }
                Err(_) => {
                    let _ = write!(own, "{}", record.args());
                    message_with_on(inner, level, &own, &fields);
                }
            });
        };
        match &self.target {
            Some(inner) => write(inner),
            None => {
                with_global(write);
            }
        }
    }

    fn flush(&self) {}
}
