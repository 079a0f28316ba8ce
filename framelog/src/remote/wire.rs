//! Reading and writing framed protocol messages on a byte stream (`docs/PROTOCOL.md`,
//! Messages). Shared by the server and the program side so both apply the same limits.

use std::io::{self, Read};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use formats::protocol::{HEADER_LEN, Kind, ProtocolError, decode_header};

/// Why a message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The connection failed or closed inside a message.
    #[error("connection: {0}")]
    Io(#[from] io::Error),
    /// The peer sent bytes that are not a valid message header.
    #[error("malformed message: {0}")]
    Protocol(#[from] ProtocolError),
    /// The header claims more than the receiver accepts at this point of the connection.
    #[error("a {kind:?} message of {len} bytes where at most {max} are accepted")]
    TooLong {
        /// The message's kind.
        kind: Kind,
        /// The payload length it claims.
        len: usize,
        /// The most accepted here.
        max: usize,
    },
}

/// Reads one message into `payload` (replacing its contents) and returns its kind; `None`
/// when the peer closed the connection cleanly between messages. The header's length is
/// checked against its kind's limit and against `max_len` before any payload byte is read,
/// and the payload buffer grows only as bytes arrive (a claimed length allocates nothing).
pub fn read_message(
    r: &mut impl Read,
    payload: &mut Vec<u8>,
    max_len: usize,
) -> Result<Option<Kind>, WireError> {
    let mut header = [0u8; HEADER_LEN];
    let mut got = 0;
    while got < HEADER_LEN {
        match r.read(&mut header[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let (kind, len) = decode_header(header)?;
    if len > max_len {
        return Err(WireError::TooLong {
            kind,
            len,
            max: max_len,
        });
    }
    payload.clear();
    let read = r.take(len as u64).read_to_end(payload)?;
    if read < len {
        return Err(io::Error::from(io::ErrorKind::UnexpectedEof).into());
    }
    Ok(Some(kind))
}

/// Whether an I/O error only means "no message within the read timeout".
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Reads a socket under a deadline for the whole of what is read through it (one message),
/// waking every `poll` to ask `cancel` whether to give up (shutdown). A peer trickling one
/// byte a second is cut off at the deadline, not kept forever.
pub struct DeadlineReader<'a> {
    stream: &'a TcpStream,
    deadline: Instant,
    poll: Duration,
    cancel: &'a dyn Fn() -> bool,
}

impl<'a> DeadlineReader<'a> {
    /// Reads `stream` until `deadline`, checking `cancel` at least every `poll`.
    pub fn new(
        stream: &'a TcpStream,
        deadline: Instant,
        poll: Duration,
        cancel: &'a dyn Fn() -> bool,
    ) -> Self {
        Self {
            stream,
            deadline,
            poll,
            cancel,
        }
    }
}

impl Read for DeadlineReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the message did not arrive whole in time",
                ));
            }
            if (self.cancel)() {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "the server is shutting down",
                ));
            }
            self.stream
                .set_read_timeout(Some(left.min(self.poll).max(Duration::from_millis(1))))?;
            match (&*self.stream).read(buf) {
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::protocol::{Reply, encode_frames};

    #[test]
    fn reads_messages_in_order_then_a_clean_end() {
        let mut bytes = Vec::new();
        Reply::ok(1, 1).encode(&mut bytes);
        encode_frames(&[1, 2, 3], &mut bytes);
        let mut r = &bytes[..];
        let mut p = Vec::new();
        assert_eq!(
            read_message(&mut r, &mut p, usize::MAX).unwrap(),
            Some(Kind::Reply)
        );
        assert_eq!(Reply::decode(&p).unwrap(), Reply::ok(1, 1));
        assert_eq!(
            read_message(&mut r, &mut p, usize::MAX).unwrap(),
            Some(Kind::Frames)
        );
        assert_eq!(p, [1, 2, 3]);
        assert_eq!(read_message(&mut r, &mut p, usize::MAX).unwrap(), None);
    }

    #[test]
    fn a_cut_message_or_an_oversized_header_is_an_error_not_an_allocation() {
        let mut bytes = Vec::new();
        encode_frames(&[1, 2, 3], &mut bytes);
        let mut r = &bytes[..6];
        assert!(matches!(
            read_message(&mut r, &mut Vec::new(), usize::MAX),
            Err(WireError::Io(_))
        ));
        let huge = [0xff, 0xff, 0xff, 0x7f, Kind::Frames as u8];
        let mut r = &huge[..];
        let mut p = Vec::new();
        assert!(matches!(
            read_message(&mut r, &mut p, usize::MAX),
            Err(WireError::Protocol(_))
        ));
        assert!(
            p.capacity() < 1024,
            "no payload buffer sized from a bad header"
        );
    }

    #[test]
    fn a_length_over_the_callers_limit_is_refused_before_reading_the_payload() {
        let mut bytes = Vec::new();
        encode_frames(&[7u8; 5000], &mut bytes);
        let mut r = &bytes[..];
        let mut p = Vec::new();
        assert!(matches!(
            read_message(&mut r, &mut p, 4096),
            Err(WireError::TooLong {
                len: 5000,
                max: 4096,
                ..
            })
        ));
        assert_eq!(p.capacity(), 0);
        // A header claiming 8 MiB followed by 3 bytes: an error, and only what arrived was
        // buffered.
        let mut claim = Vec::new();
        claim.extend_from_slice(&(8u32 << 20).to_le_bytes());
        claim.push(Kind::Frames as u8);
        claim.extend_from_slice(&[1, 2, 3]);
        let mut r = &claim[..];
        assert!(matches!(
            read_message(&mut r, &mut p, usize::MAX),
            Err(WireError::Io(_))
        ));
        assert!(p.capacity() < 1 << 20, "capacity {}", p.capacity());
    }
}
