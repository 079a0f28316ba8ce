//! Messages: log lines as instants on the writing thread's lane (message records, type 8),
//! inside the frame open there.
//!
//! A message names the innermost recorded frame of the thread's current context (the frame a
//! frame started now would name as its parent: a guard, an `in_frame` future being polled,
//! an entered context) and that frame's context; 0 and 0 outside frames or in a context
//! that is not sampled. Messages themselves are not sampled. Fields are any `Serialize`
//! value, encoded as BSON like frame data (on the caller's thread, before anything of the
//! recorder is touched).

use std::sync::Arc;

use formats::Level;
use serde::Serialize;

use crate::inner::Inner;
use crate::local;

/// Writes a message without fields on `inner` from the calling thread, in its current frame.
#[inline]
pub(crate) fn message_on(inner: &Arc<Inner>, level: Level, text: &str) {
    if local::with_entry(inner, |e| {
        e.emit_message(e.message_frame(), level, text, &[])
    })
    .is_none()
    {
        inner.count_refused(0, 1);
    }
}

/// Writes a message with `fields` (any `Serialize`, as one BSON document; a value that is
/// not a map is stored as `{"value": ...}`). Fields that fail to serialize are reported
/// and left out; the message is written.
pub(crate) fn message_with_on<T: Serialize + ?Sized>(
    inner: &Arc<Inner>,
    level: Level,
    text: &str,
    fields: &T,
) {
    if !inner.gate.records_instants() {
        return;
    }
    // User code (the `Serialize` impl) runs here, before the thread's entry is taken.
    let doc = inner.encode_document(fields).unwrap_or_default();
    if local::with_entry(inner, |e| {
        e.emit_message(e.message_frame(), level, text, &doc)
    })
    .is_none()
    {
        inner.count_refused(0, 1);
    }
}

/// Writes a message in a given frame and context (a `tracing` span's), with `fields`
/// already one BSON document (or empty).
#[cfg(feature = "tracing")]
pub(crate) fn message_in(
    inner: &Arc<Inner>,
    frame: Option<(u32, u32)>,
    level: Level,
    text: &str,
    fields: &[u8],
) {
    if local::with_entry(inner, |e| {
        let at = frame.unwrap_or_else(|| e.message_frame());
        e.emit_message(at, level, text, fields)
    })
    .is_none()
    {
        inner.count_refused(0, 1);
    }
}
