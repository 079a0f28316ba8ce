//! The viewer-session messages (`docs/PROTOCOL.md`, *Viewer sessions*): one binary WebSocket
//! message each, `kind` u8 + `version` u8 + payload. Encoders append to a `Vec`; decoders take
//! a whole message, check every field and length, and reject trailing bytes. No I/O.

use super::{Fields, ProtocolError, RefuseReason, clip, decode_text, encode_text, invalid};
use crate::FrameKey;
use crate::record::{Record, RecordIter};

/// Opens every Hello.
pub const VIEWER_MAGIC: [u8; 8] = *b"FLVIEWER";
/// Largest message a viewer sends.
pub const MAX_VIEWER_MESSAGE: usize = 4096;
/// Largest record bytes in one Records message.
pub const MAX_RECORDS_BYTES: usize = 1 << 20;
/// Largest document in one DataReply.
pub const MAX_DOCUMENT: usize = 16 << 20;
/// Largest message a server sends (a DataReply with the largest document).
pub const MAX_SERVER_MESSAGE: usize = MAX_DOCUMENT + 64;
/// Most requests a viewer may have unanswered.
pub const MAX_PENDING_REQUESTS: usize = 64;
/// The Records version that may carry FrameStart with parent records (type 6).
pub const RECORDS_WITH_PARENTS: u8 = 2;
/// Most (kind, version) pairs in a Hello.
pub const MAX_HELLO_KINDS: usize = 16;
/// Largest name or path in a Welcome or Damage.
pub const MAX_NAME: usize = 1024;

/// What a viewer message is (its first byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ViewerKind {
    /// The viewer introduces itself.
    Hello = 1,
    /// Start (or restart) the stream of records.
    Read = 2,
    /// More bytes of records the viewer is ready for.
    Credit = 3,
    /// One frame's data, please.
    DataRequest = 4,
    /// The server accepts the viewer.
    Welcome = 16,
    /// The server refuses the viewer.
    Refused = 17,
    /// Whole frame-log records.
    Records = 18,
    /// Bytes of the log the server's reader skipped as damaged.
    Damage = 19,
    /// Where the stream is, and who writes the log.
    Status = 20,
    /// The answer to a DataRequest.
    DataReply = 21,
}

impl ViewerKind {
    /// Every kind, for Hello's version list and tests.
    pub const ALL: [ViewerKind; 10] = [
        ViewerKind::Hello,
        ViewerKind::Read,
        ViewerKind::Credit,
        ViewerKind::DataRequest,
        ViewerKind::Welcome,
        ViewerKind::Refused,
        ViewerKind::Records,
        ViewerKind::Damage,
        ViewerKind::Status,
        ViewerKind::DataReply,
    ];

    /// The kind for a first byte.
    pub fn from_byte(b: u8) -> Option<ViewerKind> {
        Self::ALL.into_iter().find(|k| *k as u8 == b)
    }

    /// The newest version of this kind's payload this crate speaks (Records: 2, which may
    /// carry FrameStart with parent records; every other kind: 1).
    pub fn newest_version(self) -> u8 {
        match self {
            ViewerKind::Records => RECORDS_WITH_PARENTS,
            _ => 1,
        }
    }

    /// The server messages, each at the newest version this crate speaks: what a Hello lists.
    pub fn server_kinds() -> Vec<(u8, u8)> {
        Self::ALL
            .into_iter()
            .filter(|k| *k as u8 >= 16)
            .map(|k| (k as u8, k.newest_version()))
            .collect()
    }
}

/// Where a viewer wants the stream to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadFrom {
    /// The log's first record.
    Start,
    /// Every record at or after this time (ns since the Unix epoch) follows.
    Time(u64),
}

/// A viewer introducing itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The server's token, if it asked for one (empty otherwise).
    pub token: String,
    /// (kind, highest version) of the server messages the viewer understands.
    pub kinds: Vec<(u8, u8)>,
}

/// A message from a viewer to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToServer {
    /// Kind 1.
    Hello(Hello),
    /// Kind 2.
    Read(ReadFrom),
    /// Kind 3: more bytes of records.
    Credit(u32),
    /// Kind 4.
    DataRequest {
        /// The viewer's number for the request.
        request: u32,
        /// The frame.
        key: FrameKey,
    },
}

/// A log's damaged bytes, as the server's reader reported them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamageNote {
    /// Byte offset in the file.
    pub offset: u64,
    /// Bytes damaged.
    pub len: u64,
    /// The file's name in the log directory.
    pub file: String,
    /// One line saying why.
    pub why: String,
}

/// Where a viewer's stream is, and which processes write the log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamStatus {
    /// Every record the log holds now has been sent.
    pub caught_up: bool,
    /// Bytes of records sent so far.
    pub read: u64,
    /// Bytes of records the log holds now.
    pub total: u64,
    /// Segments deleted by retention before this viewer read them.
    pub pruned: u32,
    /// Worker numbers of the processes writing the log now.
    pub writers: Vec<u8>,
}

/// What a DataReply says of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataAnswer<'a> {
    /// The merged data, one BSON document.
    Found(&'a [u8]),
    /// The frame has no data.
    None,
    /// Its data was damaged or deleted by retention.
    Lost,
}

/// A message from the server to a viewer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToViewer<'a> {
    /// Kind 16.
    Welcome {
        /// The server records this log (`serve`), not only reads it.
        recording: bool,
        /// The log directory as the server shows it.
        name: String,
    },
    /// Kind 17.
    Refused {
        /// Why.
        reason: RefuseReason,
        /// One line to show.
        text: String,
    },
    /// Kind 18: whole records, the first at `segment`/`offset`.
    Records {
        /// Segment of the first record.
        segment: u32,
        /// Byte offset of the first record in that segment.
        offset: u64,
        /// How many records.
        count: u32,
        /// The records' bytes, as in the format.
        records: &'a [u8],
    },
    /// Kind 19.
    Damage(DamageNote),
    /// Kind 20.
    Status(StreamStatus),
    /// Kind 21.
    DataReply {
        /// The request's number.
        request: u32,
        /// The answer.
        answer: DataAnswer<'a>,
    },
}

fn start(kind: ViewerKind, out: &mut Vec<u8>) {
    out.push(kind as u8);
    out.push(1);
}

fn encode_name(name: &str, out: &mut Vec<u8>) {
    let n = clip(name, MAX_NAME);
    out.extend_from_slice(&(n.len() as u16).to_le_bytes());
    out.extend_from_slice(n.as_bytes());
}

fn decode_name(f: &mut Fields<'_>, what: &str) -> Result<String, ProtocolError> {
    let n = f.u16()? as usize;
    if n > MAX_NAME {
        return Err(invalid(f.message, format!("{what} of {n} bytes")));
    }
    f.text(n, what)
}

/// Splits a message into its kind, its version and its payload, checking the version is one
/// this crate knows (1 up to the kind's newest).
fn split(message: &[u8]) -> Result<(ViewerKind, u8, &[u8]), ProtocolError> {
    let [kind, version, payload @ ..] = message else {
        return Err(ProtocolError::Short("viewer"));
    };
    let kind = ViewerKind::from_byte(*kind).ok_or(ProtocolError::UnknownKind(*kind))?;
    let newest = kind.newest_version();
    if *version == 0 || *version > newest {
        return Err(invalid(
            "viewer",
            format!("{kind:?} version {version} (this side speaks versions 1 to {newest})"),
        ));
    }
    Ok((kind, *version, payload))
}

impl ToServer {
    /// Appends the whole message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            ToServer::Hello(h) => {
                start(ViewerKind::Hello, out);
                out.extend_from_slice(&VIEWER_MAGIC);
                let token = clip(&h.token, 255);
                out.push(token.len() as u8);
                out.extend_from_slice(token.as_bytes());
                let kinds = &h.kinds[..h.kinds.len().min(MAX_HELLO_KINDS)];
                out.push(kinds.len() as u8);
                for (k, v) in kinds {
                    out.extend_from_slice(&[*k, *v]);
                }
            }
            ToServer::Read(from) => {
                start(ViewerKind::Read, out);
                let (tag, time) = match from {
                    ReadFrom::Start => (0, 0),
                    ReadFrom::Time(t) => (1, *t),
                };
                out.push(tag);
                out.extend_from_slice(&time.to_le_bytes());
            }
            ToServer::Credit(bytes) => {
                start(ViewerKind::Credit, out);
                out.extend_from_slice(&bytes.to_le_bytes());
            }
            ToServer::DataRequest { request, key } => {
                start(ViewerKind::DataRequest, out);
                out.extend_from_slice(&request.to_le_bytes());
                out.push(key.worker);
                out.extend_from_slice(&key.id.to_le_bytes());
            }
        }
    }

    /// Decodes a whole viewer message.
    pub fn decode(message: &[u8]) -> Result<ToServer, ProtocolError> {
        if message.len() > MAX_VIEWER_MESSAGE {
            return Err(invalid(
                "viewer",
                format!(
                    "message of {} bytes (limit {MAX_VIEWER_MESSAGE})",
                    message.len()
                ),
            ));
        }
        let (kind, _, payload) = split(message)?;
        let msg = match kind {
            ViewerKind::Hello => {
                let mut f = Fields::new(payload, "Hello");
                let magic = f.take(8)?;
                if magic != VIEWER_MAGIC {
                    let mut m = [0u8; 8];
                    m.copy_from_slice(magic);
                    return Err(ProtocolError::BadMagic(m));
                }
                let n = f.u8()? as usize;
                let token = f.text(n, "token")?;
                let count = f.u8()? as usize;
                if count > MAX_HELLO_KINDS {
                    return Err(invalid("Hello", format!("{count} kinds (limit 16)")));
                }
                let mut kinds = Vec::with_capacity(count);
                for _ in 0..count {
                    kinds.push((f.u8()?, f.u8()?));
                }
                f.finish()?;
                ToServer::Hello(Hello { token, kinds })
            }
            ViewerKind::Read => {
                let mut f = Fields::new(payload, "Read");
                let tag = f.u8()?;
                let time = f.u64()?;
                f.finish()?;
                match tag {
                    0 if time == 0 => ToServer::Read(ReadFrom::Start),
                    0 => return Err(invalid("Read", "a time with from = start")),
                    1 => ToServer::Read(ReadFrom::Time(time)),
                    t => return Err(invalid("Read", format!("unknown from {t}"))),
                }
            }
            ViewerKind::Credit => {
                let mut f = Fields::new(payload, "Credit");
                let bytes = f.u32()?;
                f.finish()?;
                ToServer::Credit(bytes)
            }
            ViewerKind::DataRequest => {
                let mut f = Fields::new(payload, "DataRequest");
                let request = f.u32()?;
                let worker = f.u8()?;
                let id = f.u32()?;
                f.finish()?;
                ToServer::DataRequest {
                    request,
                    key: FrameKey::new(worker, id),
                }
            }
            other => {
                return Err(invalid("viewer", format!("{other:?} is a server message")));
            }
        };
        Ok(msg)
    }
}

impl ToViewer<'_> {
    /// Appends the whole message to `out`.
    ///
    /// `Records` must hold whole records, at most [`MAX_RECORDS_BYTES`]; a `DataReply`
    /// document at most [`MAX_DOCUMENT`] (larger ones are the caller's error and would be
    /// refused by the viewer).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            ToViewer::Welcome { recording, name } => {
                start(ViewerKind::Welcome, out);
                out.push(u8::from(*recording));
                encode_name(name, out);
            }
            ToViewer::Refused { reason, text } => {
                start(ViewerKind::Refused, out);
                out.push(*reason as u8);
                encode_text(text, out);
            }
            ToViewer::Records {
                segment,
                offset,
                count,
                records,
            } => {
                // Version 2 only when needed: a server sends a viewer that reads only version 1
                // records without parents (`formats::downgrade`), which encode as version 1.
                out.push(ViewerKind::Records as u8);
                out.push(if crate::downgrade::has_parents(records) {
                    RECORDS_WITH_PARENTS
                } else {
                    1
                });
                out.extend_from_slice(&segment.to_le_bytes());
                out.extend_from_slice(&offset.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
                out.extend_from_slice(records);
            }
            ToViewer::Damage(d) => {
                start(ViewerKind::Damage, out);
                out.extend_from_slice(&d.offset.to_le_bytes());
                out.extend_from_slice(&d.len.to_le_bytes());
                encode_name(&d.file, out);
                encode_name(&d.why, out);
            }
            ToViewer::Status(s) => {
                start(ViewerKind::Status, out);
                out.push(u8::from(s.caught_up));
                out.extend_from_slice(&s.read.to_le_bytes());
                out.extend_from_slice(&s.total.to_le_bytes());
                out.extend_from_slice(&s.pruned.to_le_bytes());
                let writers = &s.writers[..s.writers.len().min(255)];
                out.push(writers.len() as u8);
                out.extend_from_slice(writers);
            }
            ToViewer::DataReply { request, answer } => {
                start(ViewerKind::DataReply, out);
                out.extend_from_slice(&request.to_le_bytes());
                match answer {
                    DataAnswer::Found(doc) => {
                        out.push(0);
                        out.extend_from_slice(doc);
                    }
                    DataAnswer::None => out.push(1),
                    DataAnswer::Lost => out.push(2),
                }
            }
        }
    }

    /// Decodes a whole server message; records must decode whole and number `count`, a
    /// document must be one BSON document (by its length prefix and terminator).
    pub fn decode(message: &[u8]) -> Result<ToViewer<'_>, ProtocolError> {
        if message.len() > MAX_SERVER_MESSAGE {
            return Err(invalid(
                "server",
                format!(
                    "message of {} bytes (limit {MAX_SERVER_MESSAGE})",
                    message.len()
                ),
            ));
        }
        let (kind, version, payload) = split(message)?;
        let msg = match kind {
            ViewerKind::Welcome => {
                let mut f = Fields::new(payload, "Welcome");
                let flags = f.u8()?;
                if flags > 1 {
                    return Err(invalid("Welcome", format!("unknown flags {flags:#x}")));
                }
                let name = decode_name(&mut f, "name")?;
                f.finish()?;
                ToViewer::Welcome {
                    recording: flags & 1 != 0,
                    name,
                }
            }
            ViewerKind::Refused => {
                let mut f = Fields::new(payload, "Refused");
                let reason = match f.u8()? {
                    1 => RefuseReason::ProtocolVersion,
                    2 => RefuseReason::Token,
                    3 => RefuseReason::Busy,
                    r => return Err(invalid("Refused", format!("unknown reason {r}"))),
                };
                let text = decode_text(&mut f)?;
                f.finish()?;
                ToViewer::Refused { reason, text }
            }
            ViewerKind::Records => {
                let mut f = Fields::new(payload, "Records");
                let segment = f.u32()?;
                let offset = f.u64()?;
                let count = f.u32()?;
                let records = f.bytes;
                if records.len() > MAX_RECORDS_BYTES || records.is_empty() {
                    return Err(invalid(
                        "Records",
                        format!(
                            "{} bytes of records (1 to {MAX_RECORDS_BYTES})",
                            records.len()
                        ),
                    ));
                }
                let mut iter = RecordIter::new(records, offset);
                let mut found = 0u32;
                for item in iter.by_ref() {
                    let (_, rec) =
                        item.map_err(|e| invalid("Records", format!("record {found}: {e}")))?;
                    if version < RECORDS_WITH_PARENTS
                        && matches!(rec, Record::Start(s) if s.parent.is_recorded())
                    {
                        return Err(invalid(
                            "Records",
                            format!("record {found} has a parent, which version 1 cannot carry"),
                        ));
                    }
                    found += 1;
                }
                if iter.consumed() != records.len() {
                    return Err(invalid("Records", "ends inside a record"));
                }
                if found != count {
                    return Err(invalid(
                        "Records",
                        format!("{found} records, the header says {count}"),
                    ));
                }
                ToViewer::Records {
                    segment,
                    offset,
                    count,
                    records,
                }
            }
            ViewerKind::Damage => {
                let mut f = Fields::new(payload, "Damage");
                let offset = f.u64()?;
                let len = f.u64()?;
                let file = decode_name(&mut f, "file")?;
                let why = decode_name(&mut f, "why")?;
                f.finish()?;
                ToViewer::Damage(DamageNote {
                    offset,
                    len,
                    file,
                    why,
                })
            }
            ViewerKind::Status => {
                let mut f = Fields::new(payload, "Status");
                let flags = f.u8()?;
                if flags > 1 {
                    return Err(invalid("Status", format!("unknown flags {flags:#x}")));
                }
                let read = f.u64()?;
                let total = f.u64()?;
                let pruned = f.u32()?;
                let n = f.u8()? as usize;
                let writers = f.take(n)?.to_vec();
                f.finish()?;
                ToViewer::Status(StreamStatus {
                    caught_up: flags & 1 != 0,
                    read,
                    total,
                    pruned,
                    writers,
                })
            }
            ViewerKind::DataReply => {
                let mut f = Fields::new(payload, "DataReply");
                let request = f.u32()?;
                let answer = match f.u8()? {
                    0 => {
                        let doc = f.bytes;
                        check_document(doc)?;
                        f.bytes = &[];
                        DataAnswer::Found(doc)
                    }
                    1 => DataAnswer::None,
                    2 => DataAnswer::Lost,
                    s => return Err(invalid("DataReply", format!("unknown status {s}"))),
                };
                f.finish()?;
                ToViewer::DataReply { request, answer }
            }
            other => {
                return Err(invalid("server", format!("{other:?} is a viewer message")));
            }
        };
        Ok(msg)
    }
}

/// A BSON document's outer shape: its length prefix is its size, it ends with 0, and it fits.
fn check_document(doc: &[u8]) -> Result<(), ProtocolError> {
    let bad = |what: String| Err(invalid("DataReply", what));
    if doc.len() < 5 || doc.len() > MAX_DOCUMENT {
        return bad(format!("document of {} bytes", doc.len()));
    }
    let stated = i32::from_le_bytes([doc[0], doc[1], doc[2], doc[3]]);
    if usize::try_from(stated).ok() != Some(doc.len()) {
        return bad(format!(
            "document says {stated} bytes, the message holds {}",
            doc.len()
        ));
    }
    if doc[doc.len() - 1] != 0 {
        return bad("document does not end with 0".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{FrameEnd, FrameStart, Record};
    use proptest::prelude::*;

    fn records(n: u32) -> Vec<u8> {
        let mut out = Vec::new();
        for id in 1..=n {
            Record::Start(FrameStart {
                id,
                worker: 3,
                timestamp: u64::from(id) * 10,
                context: id,
                category: crate::Category::FUNCTION,
                label: "db/query",
                parent: crate::Parent::from_field(id / 2),
            })
            .encode_to_vec(&mut out);
            Record::End(FrameEnd {
                id,
                worker: 3,
                timestamp: u64::from(id) * 10 + 5,
            })
            .encode_to_vec(&mut out);
        }
        out
    }

    fn round_trip_server(m: ToServer) {
        let mut buf = Vec::new();
        m.encode(&mut buf);
        assert_eq!(ToServer::decode(&buf).unwrap(), m);
        for cut in 0..buf.len() {
            assert!(
                ToServer::decode(&buf[..cut]).is_err(),
                "cut at {cut} of {m:?}"
            );
        }
        buf.push(0);
        assert!(ToServer::decode(&buf).is_err(), "trailing byte after {m:?}");
    }

    fn round_trip_viewer(m: ToViewer<'_>) {
        let mut buf = Vec::new();
        m.encode(&mut buf);
        assert_eq!(ToViewer::decode(&buf).unwrap(), m);
        for cut in 0..buf.len() {
            assert!(
                ToViewer::decode(&buf[..cut]).is_err(),
                "cut at {cut} of {m:?}"
            );
        }
        let mut longer = buf.clone();
        longer.push(0);
        assert!(
            ToViewer::decode(&longer).is_err(),
            "trailing byte after {m:?}"
        );
    }

    #[test]
    fn every_viewer_message_round_trips_and_cut_or_padded_ones_are_refused() {
        round_trip_server(ToServer::Hello(Hello {
            token: "s3cret".into(),
            kinds: ViewerKind::server_kinds(),
        }));
        round_trip_server(ToServer::Read(ReadFrom::Start));
        round_trip_server(ToServer::Read(ReadFrom::Time(1_700_000_000_000_000_000)));
        round_trip_server(ToServer::Credit(4 << 20));
        round_trip_server(ToServer::DataRequest {
            request: 7,
            key: FrameKey::new(2, 42),
        });
    }

    #[test]
    fn every_server_message_round_trips_and_cut_or_padded_ones_are_refused() {
        round_trip_viewer(ToViewer::Welcome {
            recording: true,
            name: "target/framelog".into(),
        });
        round_trip_viewer(ToViewer::Refused {
            reason: RefuseReason::Token,
            text: "wrong token".into(),
        });
        let recs = records(3);
        round_trip_viewer(ToViewer::Records {
            segment: 2,
            offset: 16,
            count: 6,
            records: &recs,
        });
        round_trip_viewer(ToViewer::Damage(DamageNote {
            offset: 281_600,
            len: 64,
            file: "frames-000001.framelog".into(),
            why: "batch checksum does not match".into(),
        }));
        round_trip_viewer(ToViewer::Status(StreamStatus {
            caught_up: true,
            read: 10,
            total: 20,
            pruned: 1,
            writers: vec![0, 3],
        }));
        let doc = bson::to_vec(&bson::doc! {"sql": "SELECT 1"}).unwrap();
        round_trip_viewer(ToViewer::DataReply {
            request: 9,
            answer: DataAnswer::Found(&doc),
        });
        // None and Lost have no document, so a trailing byte is refused; Found's document
        // is the rest of the message and is checked by its own length instead.
        for answer in [DataAnswer::None, DataAnswer::Lost] {
            round_trip_viewer(ToViewer::DataReply { request: 1, answer });
        }
    }

    #[test]
    fn records_must_be_whole_and_counted_right() {
        let recs = records(2);
        let mut buf = Vec::new();
        ToViewer::Records {
            segment: 1,
            offset: 16,
            count: 5,
            records: &recs,
        }
        .encode(&mut buf);
        let err = ToViewer::decode(&buf).unwrap_err().to_string();
        assert!(err.contains("4 records, the header says 5"), "{err}");
        let mut bad = recs.clone();
        bad[5] = 0; // the first FrameStart (type 6) read as type 0: the bytes no longer split into 4 records
        let mut buf = Vec::new();
        ToViewer::Records {
            segment: 1,
            offset: 16,
            count: 4,
            records: &bad,
        }
        .encode(&mut buf);
        assert!(ToViewer::decode(&buf).is_err());
    }

    #[test]
    fn records_with_parents_are_version_2_and_version_1_cannot_carry_them() {
        let recs = records(4);
        assert!(crate::downgrade::has_parents(&recs));
        let message = |records: &[u8]| {
            let mut buf = Vec::new();
            ToViewer::Records {
                segment: 1,
                offset: 16,
                count: 8,
                records,
            }
            .encode(&mut buf);
            buf
        };
        let with = message(&recs);
        assert_eq!(with[1], RECORDS_WITH_PARENTS);
        assert!(ToViewer::decode(&with).is_ok());
        let mut stripped = Vec::new();
        crate::downgrade::strip_parents(&recs, &mut stripped).unwrap();
        let without = message(&stripped);
        assert_eq!(without[1], 1);
        assert!(ToViewer::decode(&without).is_ok());
        let mut lying = with.clone();
        lying[1] = 1;
        let err = ToViewer::decode(&lying).unwrap_err().to_string();
        assert!(err.contains("version 1 cannot carry"), "{err}");
        assert!(
            ViewerKind::server_kinds().contains(&(ViewerKind::Records as u8, 2)),
            "a Hello advertises Records version 2"
        );
    }

    #[test]
    fn limits_unknown_kinds_versions_and_directions_are_refused() {
        let mut hello = Vec::new();
        ToServer::Hello(Hello {
            token: String::new(),
            kinds: vec![],
        })
        .encode(&mut hello);
        assert!(
            ToViewer::decode(&hello).is_err(),
            "a viewer message sent to a viewer"
        );
        let mut v2 = hello.clone();
        v2[1] = 2;
        assert!(
            ToServer::decode(&v2)
                .unwrap_err()
                .to_string()
                .contains("version 2")
        );
        assert!(ToServer::decode(&[99, 1]).is_err());
        let huge = vec![3u8; MAX_VIEWER_MESSAGE + 1];
        assert!(ToServer::decode(&huge).is_err());
        let mut wrong_magic = hello.clone();
        wrong_magic[2] = b'X';
        assert!(matches!(
            ToServer::decode(&wrong_magic),
            Err(ProtocolError::BadMagic(_))
        ));
        let doc_liar = [0u8, 1, 1, 0, 0, 0, 0, 0, 50, 0, 0, 0, 0];
        let mut reply = vec![ViewerKind::DataReply as u8, 1];
        reply.extend_from_slice(&doc_liar[2..]);
        assert!(ToViewer::decode(&reply).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = ToServer::decode(&bytes);
            let _ = ToViewer::decode(&bytes);
        }

        #[test]
        fn corrupted_valid_messages_never_panic(
            n in 1u32..20, at in any::<prop::sample::Index>(), byte in any::<u8>()
        ) {
            let recs = records(n);
            let mut buf = Vec::new();
            ToViewer::Records { segment: 1, offset: 16, count: 2 * n, records: &recs }
                .encode(&mut buf);
            let i = at.index(buf.len());
            buf[i] = byte;
            let _ = ToViewer::decode(&buf);
        }

        #[test]
        fn requests_round_trip(request in any::<u32>(), worker in any::<u8>(), id in any::<u32>(),
                               credit in any::<u32>(), time in 1u64..) {
            round_trip_server(ToServer::DataRequest { request, key: FrameKey::new(worker, id) });
            round_trip_server(ToServer::Credit(credit));
            round_trip_server(ToServer::Read(ReadFrom::Time(time)));
        }
    }
}
