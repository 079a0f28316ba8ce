//! The remote-session protocol's messages (`docs/PROTOCOL.md`): encode into a `Vec`, decode
//! from a payload slice. Every decoder checks every length and field and rejects trailing
//! bytes; nothing here does I/O.

use crate::category::Category;

pub mod viewer;

/// Opens every Advertise.
pub const MAGIC: [u8; 8] = *b"FLREMOTE";
/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u16 = 1;
/// Bytes of a message header (length u32 + kind u8).
pub const HEADER_LEN: usize = 5;
/// Largest `len` of a control message (Advertise, Refused, Command, Reply).
pub const MAX_CONTROL_LEN: u32 = 4096;
/// Largest payload of a Frames or Data message.
pub const MAX_STREAM_PAYLOAD: usize = 8 << 20;
/// Largest text in a Refused or Reply.
pub const MAX_TEXT: usize = 1024;
/// Largest number of command versions in an Advertise.
pub const MAX_COMMANDS: usize = 16;

/// Command code of StartSession.
pub const START_SESSION: u8 = 1;
/// Command code of StopSession.
pub const STOP_SESSION: u8 = 2;
/// Command code of Resume.
pub const RESUME: u8 = 3;
/// The newest StartSession version: v6, whose streams may carry frame polls and slow polls.
pub const LATEST_START_SESSION: u8 = 6;
/// The first StartSession version whose streams may carry FrameStart with parent (type 6).
pub const PARENTS_START_SESSION: u8 = 4;
/// The first StartSession version whose streams may carry messages (type 8) naming their
/// frame and frame allocation records (type 9): the server rewrites their ids.
pub const MESSAGES_START_SESSION: u8 = 5;
/// The first StartSession version whose streams may carry frame polls (type 10) and slow
/// polls (type 11): the server rewrites their ids.
pub const POLLS_START_SESSION: u8 = 6;
/// The first StartSession version whose streams are acknowledged.
pub const ACKED_START_SESSION: u8 = 3;

/// What a message is (its header's kind byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// A program announces itself.
    Advertise = 1,
    /// The server refuses a program.
    Refused = 2,
    /// The server asks a program to do something.
    Command = 3,
    /// A program answers a command.
    Reply = 4,
    /// Whole frame-log records.
    Frames = 5,
    /// Frame-data documents.
    Data = 6,
    /// A stream ends.
    End = 7,
    /// The server acknowledges records appended from a v3 stream.
    Ack = 8,
}

impl Kind {
    /// The kind for a header byte.
    pub fn from_byte(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Advertise,
            2 => Kind::Refused,
            3 => Kind::Command,
            4 => Kind::Reply,
            5 => Kind::Frames,
            6 => Kind::Data,
            7 => Kind::End,
            8 => Kind::Ack,
            _ => return None,
        })
    }

    /// Largest `len` (kind byte + payload) a message of this kind may have.
    pub fn max_len(self) -> u32 {
        match self {
            Kind::Frames | Kind::Data => MAX_STREAM_PAYLOAD as u32 + 1,
            _ => MAX_CONTROL_LEN,
        }
    }
}

/// Why bytes are not a valid message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The header's kind byte is not a message kind.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// The header's length is 0 or over the limit of its kind.
    #[error("{kind:?} message of {len} bytes (limit {limit})")]
    BadLength {
        /// The message kind.
        kind: Kind,
        /// The length found.
        len: u32,
        /// The limit of that kind.
        limit: u32,
    },
    /// The payload ends before a field.
    #[error("{0} message ends early")]
    Short(&'static str),
    /// The payload has bytes after its last field.
    #[error("{message} message has {extra} bytes after its last field")]
    Trailing {
        /// The message's name.
        message: &'static str,
        /// Bytes left over.
        extra: usize,
    },
    /// The Advertise does not start with the magic.
    #[error("not a framelog program (magic {0:?})")]
    BadMagic([u8; 8]),
    /// A field has a value the protocol does not allow.
    #[error("{message}: {what}")]
    Invalid {
        /// The message's name.
        message: &'static str,
        /// What is wrong.
        what: String,
    },
}

fn invalid(message: &'static str, what: impl Into<String>) -> ProtocolError {
    ProtocolError::Invalid {
        message,
        what: what.into(),
    }
}

/// Checks a message header: the kind and its length limit.
pub fn decode_header(header: [u8; HEADER_LEN]) -> Result<(Kind, usize), ProtocolError> {
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
    let kind = Kind::from_byte(header[4]).ok_or(ProtocolError::UnknownKind(header[4]))?;
    let limit = kind.max_len();
    if len == 0 || len > limit {
        return Err(ProtocolError::BadLength { kind, len, limit });
    }
    Ok((kind, len as usize - 1))
}

/// Appends a message header for a payload of `payload_len` bytes to `out`.
pub fn encode_header(kind: Kind, payload_len: usize, out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload_len as u32 + 1).to_le_bytes());
    out.push(kind as u8);
}

/// A cursor over a payload that fails with the message's name when it runs out.
struct Fields<'a> {
    bytes: &'a [u8],
    message: &'static str,
}

impl<'a> Fields<'a> {
    fn new(bytes: &'a [u8], message: &'static str) -> Self {
        Self { bytes, message }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtocolError> {
        if self.bytes.len() < n {
            return Err(ProtocolError::Short(self.message));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, ProtocolError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, ProtocolError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, ProtocolError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, ProtocolError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }

    fn text(&mut self, len: usize, what: &str) -> Result<String, ProtocolError> {
        let b = self.take(len)?;
        String::from_utf8(b.to_vec())
            .map_err(|_| invalid(self.message, format!("{what} is not UTF-8")))
    }

    fn finish(self) -> Result<(), ProtocolError> {
        if self.bytes.is_empty() {
            Ok(())
        } else {
            Err(ProtocolError::Trailing {
                message: self.message,
                extra: self.bytes.len(),
            })
        }
    }
}

/// Cuts `s` to at most `max` bytes at a character boundary.
fn clip(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A program announcing itself on a new connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advertise {
    /// Protocol version the program speaks.
    pub protocol: u16,
    /// Random id of this program run, the same on all its connections.
    pub instance: u64,
    /// Process id.
    pub pid: u32,
    /// Whether the program waits for Resume.
    pub suspended: bool,
    /// Whether the program also records to a log directory of its own.
    pub records_locally: bool,
    /// Process name (at most 255 bytes).
    pub name: String,
    /// The shared secret, empty when none.
    pub token: String,
    /// (command code, highest version) pairs the program understands.
    pub commands: Vec<(u8, u8)>,
}

impl Advertise {
    /// The highest version of `code` the program understands (0: not at all).
    pub fn command_version(&self, code: u8) -> u8 {
        self.commands
            .iter()
            .filter(|(c, _)| *c == code)
            .map(|(_, v)| *v)
            .max()
            .unwrap_or(0)
    }

    /// Appends the whole message (header included) to `out`. Name and token are cut to 255
    /// bytes, the command list to 16 entries.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let name = clip(&self.name, 255);
        let token = clip(&self.token, 255);
        let commands = &self.commands[..self.commands.len().min(MAX_COMMANDS)];
        let len = 8 + 2 + 8 + 4 + 1 + 1 + name.len() + 1 + token.len() + 1 + 2 * commands.len();
        encode_header(Kind::Advertise, len, out);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.protocol.to_le_bytes());
        out.extend_from_slice(&self.instance.to_le_bytes());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.push(u8::from(self.suspended) | (u8::from(self.records_locally) << 1));
        out.push(name.len() as u8);
        out.extend_from_slice(name.as_bytes());
        out.push(token.len() as u8);
        out.extend_from_slice(token.as_bytes());
        out.push(commands.len() as u8);
        for (code, version) in commands {
            out.push(*code);
            out.push(*version);
        }
    }

    /// Decodes an Advertise payload. A wrong magic is [`ProtocolError::BadMagic`]; a newer
    /// protocol version decodes (the caller refuses it with a reason).
    pub fn decode(payload: &[u8]) -> Result<Advertise, ProtocolError> {
        let mut f = Fields::new(payload, "Advertise");
        let mut magic = [0u8; 8];
        magic.copy_from_slice(f.take(8)?);
        if magic != MAGIC {
            return Err(ProtocolError::BadMagic(magic));
        }
        let protocol = f.u16()?;
        let instance = f.u64()?;
        let pid = f.u32()?;
        let flags = f.u8()?;
        if flags & !0b11 != 0 {
            return Err(invalid("Advertise", format!("unknown flags {flags:#04x}")));
        }
        let n = f.u8()? as usize;
        let name = f.text(n, "process name")?;
        let n = f.u8()? as usize;
        let token = f.text(n, "token")?;
        let count = f.u8()? as usize;
        if count > MAX_COMMANDS {
            return Err(invalid(
                "Advertise",
                format!("{count} commands (limit {MAX_COMMANDS})"),
            ));
        }
        let mut commands = Vec::with_capacity(count);
        for _ in 0..count {
            commands.push((f.u8()?, f.u8()?));
        }
        f.finish()?;
        Ok(Advertise {
            protocol,
            instance,
            pid,
            suspended: flags & 1 != 0,
            records_locally: flags & 2 != 0,
            name,
            token,
            commands,
        })
    }
}

/// Why a server refuses a program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RefuseReason {
    /// The program speaks a protocol version the server does not.
    ProtocolVersion = 1,
    /// The token is missing or wrong.
    Token = 2,
    /// The server cannot take more programs.
    Busy = 3,
}

/// `text` from a peer, safe to print or show: control characters (newlines, ESC, DEL, C1
/// controls) and bidirectional overrides are written as `\u{..}` escapes, so a peer cannot
/// forge log lines or drive the terminal.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A server refusing a program, with one line saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Why.
    pub reason: RefuseReason,
    /// One line for the program's error report.
    pub text: String,
}

fn encode_text(text: &str, out: &mut Vec<u8>) {
    let t = clip(text, MAX_TEXT);
    out.extend_from_slice(&(t.len() as u16).to_le_bytes());
    out.extend_from_slice(t.as_bytes());
}

fn decode_text(f: &mut Fields<'_>) -> Result<String, ProtocolError> {
    let n = f.u16()? as usize;
    if n > MAX_TEXT {
        return Err(invalid(f.message, format!("text of {n} bytes")));
    }
    f.text(n, "text")
}

impl Refused {
    /// Appends the whole message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_header(Kind::Refused, 1 + 2 + clip(&self.text, MAX_TEXT).len(), out);
        out.push(self.reason as u8);
        encode_text(&self.text, out);
    }

    /// Decodes a Refused payload.
    pub fn decode(payload: &[u8]) -> Result<Refused, ProtocolError> {
        let mut f = Fields::new(payload, "Refused");
        let reason = match f.u8()? {
            1 => RefuseReason::ProtocolVersion,
            2 => RefuseReason::Token,
            3 => RefuseReason::Busy,
            r => return Err(invalid("Refused", format!("unknown reason {r}"))),
        };
        let text = decode_text(&mut f)?;
        f.finish()?;
        Ok(Refused { reason, text })
    }
}

/// A buffering mode as a session sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModeSetting {
    /// Keep the program's own.
    #[default]
    Keep,
    /// Drop and count when buffers run out.
    Drop,
    /// Park producers until buffers free up.
    Block,
}

/// A sampling rule as a session sets it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum SamplingSetting {
    /// Keep the program's own.
    #[default]
    Keep,
    /// Every context.
    All,
    /// Each context with this probability (0..=1).
    Probability(f64),
    /// At most this many contexts per second.
    Adaptive(u32),
}

/// The settings of a session (StartSession v1 and v2).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionSettings {
    /// Buffering mode.
    pub mode: ModeSetting,
    /// Buffer pool size in KiB (0 keeps the program's).
    pub pool_kib: u32,
    /// Sampling.
    pub sampling: SamplingSetting,
    /// Whether frame data is recorded (v2; `true` is v1's behaviour).
    pub frame_data: bool,
    /// Categories recorded, empty for all (v2).
    pub categories: Vec<Category>,
}

impl SessionSettings {
    /// Settings that keep everything as the program has it.
    pub fn keep() -> Self {
        Self {
            frame_data: true,
            ..Self::default()
        }
    }

    /// The oldest StartSession version that carries these settings.
    pub fn version_needed(&self) -> u8 {
        if !self.frame_data || !self.categories.is_empty() {
            2
        } else {
            1
        }
    }

    /// What needs StartSession v2, for messages ("frame data off, a category filter").
    pub fn v2_options(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if !self.frame_data {
            v.push("frame data off");
        }
        if !self.categories.is_empty() {
            v.push("a category filter");
        }
        v
    }
}

/// A server's command to a program.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Start (or reconfigure) the session, in the given payload version (1 or 2).
    StartSession {
        /// The payload version to encode.
        version: u8,
        /// The settings.
        settings: SessionSettings,
    },
    /// End the session.
    StopSession,
    /// Release a program waiting at start-up.
    Resume,
}

/// A command a program received but cannot decode as one it knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandError {
    /// No command with this code exists for the program.
    UnknownCommand {
        /// The code.
        code: u8,
        /// Its version.
        version: u8,
    },
    /// The command exists but not in this version.
    UnsupportedVersion {
        /// The code.
        code: u8,
        /// The version asked for.
        version: u8,
        /// The highest version the program knows.
        supported: u8,
    },
    /// The payload is malformed.
    Invalid {
        /// The code.
        code: u8,
        /// Its version.
        version: u8,
        /// What is wrong.
        error: ProtocolError,
    },
}

impl CommandError {
    /// The Reply that answers this error.
    pub fn reply(&self) -> Reply {
        match self {
            CommandError::UnknownCommand { code, version } => Reply {
                code: *code,
                version: *version,
                status: Status::UnknownCommand,
                text: format!(
                    "unknown command code {code} (this program knows StartSession, StopSession, Resume)"
                ),
            },
            CommandError::UnsupportedVersion {
                code,
                version,
                supported,
            } => Reply {
                code: *code,
                version: *version,
                status: Status::UnsupportedVersion,
                text: format!(
                    "{} v{version} is not supported (this program knows up to v{supported}): update the program's stopwatch",
                    command_name(*code)
                ),
            },
            CommandError::Invalid {
                code,
                version,
                error,
            } => Reply {
                code: *code,
                version: *version,
                status: Status::Invalid,
                text: format!("{} v{version}: {error}", command_name(*code)),
            },
        }
    }
}

/// The name of a command code.
pub fn command_name(code: u8) -> &'static str {
    match code {
        START_SESSION => "StartSession",
        STOP_SESSION => "StopSession",
        RESUME => "Resume",
        _ => "unknown command",
    }
}

impl Command {
    /// The (code, version) of this command.
    pub fn code_version(&self) -> (u8, u8) {
        match self {
            Command::StartSession { version, .. } => (START_SESSION, *version),
            Command::StopSession => (STOP_SESSION, 1),
            Command::Resume => (RESUME, 1),
        }
    }

    /// Appends the whole message to `out`. StartSession v1 leaves out v2's fields.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let (code, version) = self.code_version();
        let mut payload = vec![code, version];
        if let Command::StartSession { version, settings } = self {
            let (mode, pool, kind, value) = (
                match settings.mode {
                    ModeSetting::Keep => 0u8,
                    ModeSetting::Drop => 1,
                    ModeSetting::Block => 2,
                },
                settings.pool_kib,
                settings.sampling,
                0u64,
            );
            payload.push(mode);
            payload.extend_from_slice(&pool.to_le_bytes());
            let (k, v) = match kind {
                SamplingSetting::Keep => (0u8, value),
                SamplingSetting::All => (1, 0),
                SamplingSetting::Probability(p) => (2, p.to_bits()),
                SamplingSetting::Adaptive(n) => (3, u64::from(n)),
            };
            payload.push(k);
            payload.extend_from_slice(&v.to_le_bytes());
            if *version >= 2 {
                payload.push(u8::from(settings.frame_data));
                let cats = &settings.categories[..settings.categories.len().min(255)];
                payload.push(cats.len() as u8);
                payload.extend(cats.iter().map(|c| c.0));
            }
        }
        encode_header(Kind::Command, payload.len(), out);
        out.extend_from_slice(&payload);
    }

    /// Decodes a Command payload as a program that knows StartSession up to
    /// `max_start_version` does.
    pub fn decode(payload: &[u8], max_start_version: u8) -> Result<Command, CommandError> {
        let mut f = Fields::new(payload, "Command");
        let short = |e| CommandError::Invalid {
            code: 0,
            version: 0,
            error: e,
        };
        let code = f.u8().map_err(short)?;
        let version = f.u8().map_err(short)?;
        let invalid_cmd = |error| CommandError::Invalid {
            code,
            version,
            error,
        };
        let supported = match code {
            START_SESSION => max_start_version,
            STOP_SESSION | RESUME => 1,
            _ => return Err(CommandError::UnknownCommand { code, version }),
        };
        if version == 0 || version > supported {
            return Err(CommandError::UnsupportedVersion {
                code,
                version,
                supported,
            });
        }
        let cmd = match code {
            START_SESSION => {
                let settings = decode_settings(&mut f, version).map_err(invalid_cmd)?;
                Command::StartSession { version, settings }
            }
            STOP_SESSION => Command::StopSession,
            _ => Command::Resume,
        };
        f.finish().map_err(invalid_cmd)?;
        Ok(cmd)
    }
}

fn decode_settings(f: &mut Fields<'_>, version: u8) -> Result<SessionSettings, ProtocolError> {
    let m = "StartSession";
    let mode = match f.u8()? {
        0 => ModeSetting::Keep,
        1 => ModeSetting::Drop,
        2 => ModeSetting::Block,
        x => return Err(invalid(m, format!("unknown buffering mode {x}"))),
    };
    let pool_kib = f.u32()?;
    let kind = f.u8()?;
    let value = f.u64()?;
    let sampling = match kind {
        0 => SamplingSetting::Keep,
        1 => SamplingSetting::All,
        2 => {
            let p = f64::from_bits(value);
            if !(0.0..=1.0).contains(&p) {
                return Err(invalid(
                    m,
                    format!("sampling probability {p} is not in 0..=1"),
                ));
            }
            SamplingSetting::Probability(p)
        }
        3 => SamplingSetting::Adaptive(
            u32::try_from(value)
                .map_err(|_| invalid(m, format!("{value} contexts per second is too many")))?,
        ),
        x => return Err(invalid(m, format!("unknown sampling kind {x}"))),
    };
    if kind != 2 && kind != 3 && value != 0 {
        return Err(invalid(m, "sampling value set for a kind without one"));
    }
    let mut settings = SessionSettings {
        mode,
        pool_kib,
        sampling,
        frame_data: true,
        categories: Vec::new(),
    };
    if version >= 2 {
        settings.frame_data = match f.u8()? {
            0 => false,
            1 => true,
            x => return Err(invalid(m, format!("frame_data {x} is neither 0 nor 1"))),
        };
        let n = f.u8()? as usize;
        settings.categories = f.take(n)?.iter().map(|&b| Category(b)).collect();
    }
    Ok(settings)
}

/// How a program answered a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// Done.
    Ok = 0,
    /// The program does not know the command.
    UnknownCommand = 1,
    /// The program does not know that version of the command.
    UnsupportedVersion = 2,
    /// The payload is malformed.
    Invalid = 3,
    /// The program could not do it.
    Failed = 4,
}

/// A program's answer to a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The command's code.
    pub code: u8,
    /// The command's version.
    pub version: u8,
    /// The outcome.
    pub status: Status,
    /// Empty for Ok; otherwise one line.
    pub text: String,
}

impl Reply {
    /// An Ok reply to `code` v`version`.
    pub fn ok(code: u8, version: u8) -> Reply {
        Reply {
            code,
            version,
            status: Status::Ok,
            text: String::new(),
        }
    }

    /// Appends the whole message to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_header(Kind::Reply, 3 + 2 + clip(&self.text, MAX_TEXT).len(), out);
        out.extend_from_slice(&[self.code, self.version, self.status as u8]);
        encode_text(&self.text, out);
    }

    /// Decodes a Reply payload.
    pub fn decode(payload: &[u8]) -> Result<Reply, ProtocolError> {
        let mut f = Fields::new(payload, "Reply");
        let code = f.u8()?;
        let version = f.u8()?;
        let status = match f.u8()? {
            0 => Status::Ok,
            1 => Status::UnknownCommand,
            2 => Status::UnsupportedVersion,
            3 => Status::Invalid,
            4 => Status::Failed,
            s => return Err(invalid("Reply", format!("unknown status {s}"))),
        };
        let text = decode_text(&mut f)?;
        f.finish()?;
        Ok(Reply {
            code,
            version,
            status,
            text,
        })
    }
}

/// Appends a Frames message carrying `records` (whole encoded records, at most
/// [`MAX_STREAM_PAYLOAD`] bytes) to `out`.
pub fn encode_frames(records: &[u8], out: &mut Vec<u8>) {
    encode_header(Kind::Frames, records.len(), out);
    out.extend_from_slice(records);
}

/// One frame-data entry of a Data message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataEntryRef<'a> {
    /// The frame's worker (the program's).
    pub worker: u8,
    /// The frame's id (the program's).
    pub id: u32,
    /// One BSON document.
    pub doc: &'a [u8],
}

/// Bytes of a Data entry before its document.
pub const DATA_ENTRY_PREFIX: usize = 9;

/// Appends the body of a Data message (count, then the entries) to `out`; the caller adds
/// the header with [`encode_header`].
pub fn encode_data_body<'a>(
    entries: impl ExactSizeIterator<Item = DataEntryRef<'a>>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    for e in entries {
        out.push(e.worker);
        out.extend_from_slice(&e.id.to_le_bytes());
        out.extend_from_slice(&(e.doc.len() as u32).to_le_bytes());
        out.extend_from_slice(e.doc);
    }
}

/// Decodes a Data payload; each document's own length prefix must equal its `doc_len` (the
/// caller parses the documents).
pub fn decode_data(payload: &[u8]) -> Result<Vec<DataEntryRef<'_>>, ProtocolError> {
    let mut f = Fields::new(payload, "Data");
    let count = f.u32()? as usize;
    if count == 0 || count > payload.len() / (DATA_ENTRY_PREFIX + 5) {
        return Err(invalid(
            "Data",
            format!("{count} entries in {} bytes", payload.len()),
        ));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let worker = f.u8()?;
        let id = f.u32()?;
        let len = f.u32()? as usize;
        let doc = f.take(len)?;
        let prefix = doc
            .get(..4)
            .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]));
        if len < 5 || prefix != Some(len as i32) || doc[len - 1] != 0 {
            return Err(invalid(
                "Data",
                format!("frame {id}: a {len}-byte document with a bad length or end"),
            ));
        }
        entries.push(DataEntryRef { worker, id, doc });
    }
    f.finish()?;
    Ok(entries)
}

/// Appends an End message to `out`.
pub fn encode_end(unsent: u64, out: &mut Vec<u8>) {
    encode_header(Kind::End, 8, out);
    out.extend_from_slice(&unsent.to_le_bytes());
}

/// Appends an Ack message: `records` frame records of this stream appended so far.
pub fn encode_ack(records: u64, out: &mut Vec<u8>) {
    encode_header(Kind::Ack, 8, out);
    out.extend_from_slice(&records.to_le_bytes());
}

/// Decodes an Ack payload: frame records of the stream appended so far.
pub fn decode_ack(payload: &[u8]) -> Result<u64, ProtocolError> {
    let mut f = Fields::new(payload, "Ack");
    let records = f.u64()?;
    f.finish()?;
    Ok(records)
}

/// Decodes an End payload: the count of records the program could not send.
pub fn decode_end(payload: &[u8]) -> Result<u64, ProtocolError> {
    let mut f = Fields::new(payload, "End");
    let unsent = f.u64()?;
    f.finish()?;
    Ok(unsent)
}

#[cfg(test)]
mod tests {

    #[test]
    fn printable_escapes_what_could_forge_a_line_or_drive_a_terminal() {
        assert_eq!(printable("stress"), "stress");
        assert!(matches!(printable("plain"), std::borrow::Cow::Borrowed(_)));
        let forged = "x\nframelog serve: recording stress (pid 1) as worker 7\u{1b}[2J\u{202e}";
        let shown = printable(forged);
        assert!(!shown.chars().any(|c| c.is_control()));
        assert_eq!(
            shown,
            "x\\u{a}framelog serve: recording stress (pid 1) as worker 7\\u{1b}[2J\\u{202e}"
        );
    }

    use super::*;
    use proptest::prelude::*;

    fn split(msg: &[u8]) -> (Kind, &[u8]) {
        let mut h = [0u8; HEADER_LEN];
        h.copy_from_slice(&msg[..HEADER_LEN]);
        let (kind, len) = decode_header(h).unwrap();
        assert_eq!(
            len,
            msg.len() - HEADER_LEN,
            "header length matches the payload"
        );
        (kind, &msg[HEADER_LEN..])
    }

    fn advertise() -> Advertise {
        Advertise {
            protocol: PROTOCOL_VERSION,
            instance: 0x1234_5678_9abc_def0,
            pid: 4242,
            suspended: true,
            records_locally: false,
            name: "orders-api".into(),
            token: "s3cret".into(),
            commands: vec![(START_SESSION, 2), (STOP_SESSION, 1), (RESUME, 1)],
        }
    }

    #[test]
    fn every_message_round_trips() {
        let mut out = Vec::new();
        let a = advertise();
        a.encode(&mut out);
        let (k, p) = split(&out);
        assert_eq!(k, Kind::Advertise);
        assert_eq!(Advertise::decode(p).unwrap(), a);
        assert_eq!(a.command_version(START_SESSION), 2);
        assert_eq!(a.command_version(9), 0);

        let settings = SessionSettings {
            mode: ModeSetting::Block,
            pool_kib: 512,
            sampling: SamplingSetting::Probability(0.25),
            frame_data: false,
            categories: vec![Category::DATABASE, Category::HTTP],
        };
        for cmd in [
            Command::StartSession {
                version: 2,
                settings: settings.clone(),
            },
            Command::StartSession {
                version: 1,
                settings: SessionSettings {
                    sampling: SamplingSetting::Adaptive(100),
                    ..SessionSettings::keep()
                },
            },
            Command::StopSession,
            Command::Resume,
        ] {
            out.clear();
            cmd.encode(&mut out);
            let (k, p) = split(&out);
            assert_eq!(k, Kind::Command);
            assert_eq!(Command::decode(p, 2).unwrap(), cmd);
        }

        for r in [
            Reply::ok(START_SESSION, 1),
            CommandError::UnknownCommand {
                code: 9,
                version: 1,
            }
            .reply(),
        ] {
            out.clear();
            r.encode(&mut out);
            let (k, p) = split(&out);
            assert_eq!(k, Kind::Reply);
            assert_eq!(Reply::decode(p).unwrap(), r);
        }

        out.clear();
        let refused = Refused {
            reason: RefuseReason::Token,
            text: "wrong token".into(),
        };
        refused.encode(&mut out);
        assert_eq!(Refused::decode(split(&out).1).unwrap(), refused);

        out.clear();
        encode_end(7, &mut out);
        assert_eq!(decode_end(split(&out).1).unwrap(), 7);

        let doc = bson::to_vec(&bson::doc! {"sql": "select 1"}).unwrap();
        let mut body = Vec::new();
        let e = DataEntryRef {
            worker: 3,
            id: 99,
            doc: &doc,
        };
        encode_data_body([e, e].into_iter(), &mut body);
        assert_eq!(decode_data(&body).unwrap(), vec![e, e]);
    }

    #[test]
    fn a_v1_program_refuses_v2_and_unknown_commands_by_name() {
        let mut out = Vec::new();
        Command::StartSession {
            version: 2,
            settings: SessionSettings::keep(),
        }
        .encode(&mut out);
        let err = Command::decode(&out[HEADER_LEN..], 1).unwrap_err();
        assert_eq!(
            err,
            CommandError::UnsupportedVersion {
                code: START_SESSION,
                version: 2,
                supported: 1
            }
        );
        assert!(
            err.reply()
                .text
                .contains("StartSession v2 is not supported")
        );
        assert_eq!(
            Command::decode(&[42, 1], 2).unwrap_err(),
            CommandError::UnknownCommand {
                code: 42,
                version: 1
            }
        );
        // A v1 payload with v2's extra bytes is malformed, not silently accepted.
        out.clear();
        Command::StartSession {
            version: 2,
            settings: SessionSettings::keep(),
        }
        .encode(&mut out);
        let mut p = out[HEADER_LEN..].to_vec();
        p[1] = 1;
        assert!(matches!(
            Command::decode(&p, 2),
            Err(CommandError::Invalid {
                error: ProtocolError::Trailing { .. },
                ..
            })
        ));
    }

    #[test]
    fn ack_and_start_session_v3_round_trip() {
        let mut out = Vec::new();
        encode_ack(123_456, &mut out);
        let (kind, len) = decode_header(out[..HEADER_LEN].try_into().unwrap()).unwrap();
        assert_eq!((kind, len), (Kind::Ack, 8));
        assert_eq!(decode_ack(&out[HEADER_LEN..]).unwrap(), 123_456);
        assert!(decode_ack(&out[HEADER_LEN..HEADER_LEN + 7]).is_err());
        let v3 = Command::StartSession {
            version: 3,
            settings: SessionSettings {
                categories: vec![Category::DATABASE],
                ..SessionSettings::keep()
            },
        };
        let mut out = Vec::new();
        v3.encode(&mut out);
        assert_eq!(Command::decode(&out[HEADER_LEN..], 3).unwrap(), v3);
        // A program that knows only v2 says so instead of misreading it.
        assert!(matches!(
            Command::decode(&out[HEADER_LEN..], 2),
            Err(CommandError::UnsupportedVersion { supported: 2, .. })
        ));
    }

    #[test]
    fn version_needed_follows_the_options() {
        assert_eq!(SessionSettings::keep().version_needed(), 1);
        let s = SessionSettings {
            frame_data: false,
            ..SessionSettings::keep()
        };
        assert_eq!(s.version_needed(), 2);
        assert_eq!(s.v2_options(), vec!["frame data off"]);
    }

    #[test]
    fn headers_over_the_limit_or_of_unknown_kinds_are_refused() {
        let h = |len: u32, kind: u8| {
            let mut b = [0u8; HEADER_LEN];
            b[..4].copy_from_slice(&len.to_le_bytes());
            b[4] = kind;
            decode_header(b)
        };
        assert!(matches!(h(0, 5), Err(ProtocolError::BadLength { .. })));
        assert!(matches!(
            h(MAX_CONTROL_LEN + 1, 1),
            Err(ProtocolError::BadLength { .. })
        ));
        assert!(h(MAX_CONTROL_LEN + 1, 5).is_ok());
        assert!(matches!(
            h(u32::MAX, 5),
            Err(ProtocolError::BadLength { .. })
        ));
        assert_eq!(h(10, 0), Err(ProtocolError::UnknownKind(0)));
        assert_eq!(h(10, 9), Err(ProtocolError::UnknownKind(9)));
        assert!(matches!(
            h(MAX_CONTROL_LEN + 1, 8),
            Err(ProtocolError::BadLength { .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]

        /// No bytes make a decoder panic; whatever decodes re-encodes to the same bytes.
        #[test]
        fn decoders_never_panic_and_accept_only_canonical_bytes(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            max_version in 0u8..4,
        ) {
            let mut out = Vec::new();
            if let Ok(a) = Advertise::decode(&bytes) {
                a.encode(&mut out);
                prop_assert_eq!(&out[HEADER_LEN..], &bytes[..]);
            }
            out.clear();
            if let Ok(c) = Command::decode(&bytes, max_version) {
                c.encode(&mut out);
                // f64 NaN bits aside (rejected), a decoded command re-encodes exactly.
                prop_assert_eq!(&out[HEADER_LEN..], &bytes[..]);
            }
            out.clear();
            if let Ok(r) = Reply::decode(&bytes) {
                r.encode(&mut out);
                prop_assert_eq!(&out[HEADER_LEN..], &bytes[..]);
            }
            let _ = Refused::decode(&bytes);
            let _ = decode_data(&bytes);
            let _ = decode_end(&bytes);
            if bytes.len() >= HEADER_LEN {
                let mut h = [0u8; HEADER_LEN];
                h.copy_from_slice(&bytes[..HEADER_LEN]);
                if let Ok((kind, len)) = decode_header(h) {
                    prop_assert!(len < kind.max_len() as usize);
                }
            }
        }

        /// Valid messages with random bytes overwritten still never panic the decoders.
        #[test]
        fn corrupted_valid_messages_never_panic(
            at in any::<proptest::sample::Index>(),
            with in any::<u8>(),
        ) {
            let mut out = Vec::new();
            advertise().encode(&mut out);
            Command::StartSession { version: 2, settings: SessionSettings {
                categories: vec![Category::HTTP], ..SessionSettings::keep() } }.encode(&mut out);
            let mut body = Vec::new();
            let doc = bson::to_vec(&bson::doc! {"a": 1}).unwrap();
            encode_data_body([DataEntryRef { worker: 0, id: 1, doc: &doc }].into_iter(), &mut body);
            for msg in [&mut out, &mut body] {
                let i = at.index(msg.len());
                msg[i] = with;
            }
            let _ = Advertise::decode(&out[HEADER_LEN..]);
            let _ = Command::decode(&out[HEADER_LEN..], 2);
            let _ = decode_data(&body);
        }
    }
}
