//! Reading and writing framed protocol messages on a byte stream (`docs/PROTOCOL.md`,
//! Messages). Shared by the server and the program side so both apply the same limits.

use std::io::{self, Read};

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
}

/// Reads one message into `payload` (replacing its contents) and returns its kind; `None`
/// when the peer closed the connection cleanly between messages. The header's length is
/// checked against its kind's limit before any payload byte is read.
pub fn read_message(r: &mut impl Read, payload: &mut Vec<u8>) -> Result<Option<Kind>, WireError> {
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
    payload.clear();
    payload.resize(len, 0);
    r.read_exact(payload)?;
    Ok(Some(kind))
}

/// Whether an I/O error only means "no message within the read timeout".
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
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
        assert_eq!(read_message(&mut r, &mut p).unwrap(), Some(Kind::Reply));
        assert_eq!(Reply::decode(&p).unwrap(), Reply::ok(1, 1));
        assert_eq!(read_message(&mut r, &mut p).unwrap(), Some(Kind::Frames));
        assert_eq!(p, [1, 2, 3]);
        assert_eq!(read_message(&mut r, &mut p).unwrap(), None);
    }

    #[test]
    fn a_cut_message_or_an_oversized_header_is_an_error_not_an_allocation() {
        let mut bytes = Vec::new();
        encode_frames(&[1, 2, 3], &mut bytes);
        let mut r = &bytes[..6];
        assert!(matches!(
            read_message(&mut r, &mut Vec::new()),
            Err(WireError::Io(_))
        ));
        let huge = [0xff, 0xff, 0xff, 0x7f, Kind::Frames as u8];
        let mut r = &huge[..];
        let mut p = Vec::new();
        assert!(matches!(
            read_message(&mut r, &mut p),
            Err(WireError::Protocol(_))
        ));
        assert!(
            p.capacity() < 1024,
            "no payload buffer sized from a bad header"
        );
    }
}
