//! The WebSocket layer of viewer sessions (RFC 6455), server side: the opening handshake's
//! accept key, and frames read and written over any async byte stream.
//!
//! It is ours rather than a library's so that every violation is seen and answered with the
//! close code `docs/PROTOCOL.md` names (1002): reserved bits or opcodes, an unmasked frame, a
//! fragmented or oversized control frame, a continuation outside a message, a message over
//! the viewer's limit (refused from its frame header, before any of it is buffered), and more
//! fragments in one message than [`MAX_FRAGMENTS`]. Memory per connection is one fixed read
//! buffer and the message being assembled (at most the limit).

use std::io::IoSlice;

use base64::Engine;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Frames one message may be split into; more is a protocol violation (a viewer's messages
/// are a few bytes to 4 KiB: no client splits them into more than a handful).
pub const MAX_FRAGMENTS: usize = 64;

/// The close code for a protocol violation.
pub const PROTOCOL_ERROR: u16 = 1002;

/// The `Sec-WebSocket-Accept` value answering a `Sec-WebSocket-Key`.
pub fn accept_key(key: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(key);
    h.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// Whether `key` is a valid `Sec-WebSocket-Key` (base64 of 16 bytes).
pub fn valid_key(key: &[u8]) -> bool {
    key.len() == 24
        && base64::engine::general_purpose::STANDARD
            .decode(key)
            .is_ok_and(|k| k.len() == 16)
}

/// One thing a viewer sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Incoming {
    /// A whole binary message.
    Binary(Vec<u8>),
    /// The start of a text message (a protocol error for viewer sessions; not assembled).
    Text,
    /// A ping, with its payload (to be echoed in a pong).
    Ping(Vec<u8>),
    /// A pong.
    Pong,
    /// A close frame, with its code if it had one.
    Close(Option<u16>),
}

/// Why reading stopped.
#[derive(Debug)]
pub enum ReadError {
    /// The socket failed (or was reset).
    Io(std::io::Error),
    /// The peer broke the protocol; the text says how (for the close frame and the log).
    Protocol(String),
}

/// Read buffer size: a whole frame of the largest message fits (header ≤ 14 bytes).
const BUF: usize = 8192;

/// A WebSocket connection's server side over `S`.
pub struct WebSocket<S> {
    io: S,
    buf: Box<[u8; BUF]>,
    start: usize,
    end: usize,
    /// The message being assembled from fragments.
    msg: Vec<u8>,
    in_message: bool,
    fragments: usize,
    max_message: usize,
}

impl<S: AsyncRead + AsyncWrite + Unpin> WebSocket<S> {
    /// A connection whose messages may be at most `max_message` bytes (larger ones are
    /// refused from their first frame's header).
    pub fn new(io: S, max_message: usize) -> Self {
        assert!(
            max_message + 14 <= BUF,
            "the read buffer holds a whole frame"
        );
        Self {
            io,
            buf: Box::new([0; BUF]),
            start: 0,
            end: 0,
            msg: Vec::new(),
            in_message: false,
            fragments: 0,
            max_message,
        }
    }

    /// The next message or control frame; `Ok(None)` when the peer closed the socket.
    ///
    /// Cancel-safe: dropped before it returns, it loses nothing (bytes read stay buffered).
    pub async fn next(&mut self) -> Result<Option<Incoming>, ReadError> {
        loop {
            if let Some(m) = self.parse().map_err(ReadError::Protocol)? {
                return Ok(Some(m));
            }
            if self.start > 0 {
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            let n = self
                .io
                .read(&mut self.buf[self.end..])
                .await
                .map_err(ReadError::Io)?;
            if n == 0 {
                return Ok(None);
            }
            self.end += n;
        }
    }

    /// Takes one whole frame from the buffer, if there is one; an error names the
    /// violation.
    fn parse(&mut self) -> Result<Option<Incoming>, String> {
        loop {
            let b = &self.buf[self.start..self.end];
            if b.len() < 2 {
                return Ok(None);
            }
            let fin = b[0] & 0x80 != 0;
            let op = b[0] & 0x0f;
            if b[0] & 0x70 != 0 {
                return Err("reserved bits set (no extension was agreed)".into());
            }
            if b[1] & 0x80 == 0 {
                return Err("an unmasked frame from a client".into());
            }
            let (len, head) = match b[1] & 0x7f {
                126 if b.len() < 4 => return Ok(None),
                126 => (u64::from(u16::from_be_bytes([b[2], b[3]])), 4),
                127 if b.len() < 10 => return Ok(None),
                127 => (
                    u64::from_be_bytes(b[2..10].try_into().expect("8 bytes")),
                    10,
                ),
                n => (u64::from(n), 2),
            };
            let control = op >= 8;
            match op {
                0..=2 | 8..=10 => {}
                _ => return Err(format!("reserved opcode {op}")),
            }
            if control && !fin {
                return Err("a fragmented control frame".into());
            }
            if control && len > 125 {
                return Err(format!("a control frame of {len} bytes (at most 125)"));
            }
            if !control {
                if op == 0 && !self.in_message {
                    return Err("a continuation frame outside a message".into());
                }
                if op != 0 && self.in_message {
                    return Err("a new message inside a fragmented one".into());
                }
                let total = (self.msg.len() as u64).saturating_add(len);
                if total > self.max_message as u64 {
                    return Err(format!("a message of more than {} bytes", self.max_message));
                }
            }
            // Bounded by the checks above: at most 125 or `max_message` bytes.
            let len = len as usize;
            let whole = head + 4 + len;
            if b.len() < whole {
                return Ok(None);
            }
            let mask: [u8; 4] = b[head..head + 4].try_into().expect("4 bytes");
            let payload_at = self.start + head + 4;
            self.start += whole;
            let payload = &mut self.buf[payload_at..payload_at + len];
            for (i, byte) in payload.iter_mut().enumerate() {
                *byte ^= mask[i & 3];
            }
            let payload = &self.buf[payload_at..payload_at + len];
            match op {
                8 => {
                    return match payload.len() {
                        0 => Ok(Some(Incoming::Close(None))),
                        1 => Err("a close frame of 1 byte".into()),
                        _ => {
                            let code = u16::from_be_bytes([payload[0], payload[1]]);
                            if !valid_close_code(code) {
                                Err(format!("close code {code}"))
                            } else if std::str::from_utf8(&payload[2..]).is_err() {
                                Err("a close reason that is not UTF-8".into())
                            } else {
                                Ok(Some(Incoming::Close(Some(code))))
                            }
                        }
                    };
                }
                9 => return Ok(Some(Incoming::Ping(payload.to_vec()))),
                10 => return Ok(Some(Incoming::Pong)),
                1 => return Ok(Some(Incoming::Text)),
                _ => {}
            }
            // Binary (2) or its continuation (0).
            if op == 2 {
                self.in_message = true;
                self.fragments = 0;
                self.msg.clear();
            }
            self.fragments += 1;
            if self.fragments > MAX_FRAGMENTS {
                return Err(format!(
                    "more than {MAX_FRAGMENTS} fragments in one message"
                ));
            }
            self.msg.extend_from_slice(payload);
            if fin {
                self.in_message = false;
                return Ok(Some(Incoming::Binary(std::mem::take(&mut self.msg))));
            }
        }
    }

    /// Writes one binary message (one frame).
    pub async fn send_binary(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.send_frame(0x2, payload).await
    }

    /// Writes a ping.
    pub async fn send_ping(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.send_frame(0x9, payload).await
    }

    /// Writes a pong echoing `payload`.
    pub async fn send_pong(&mut self, payload: &[u8]) -> std::io::Result<()> {
        self.send_frame(0xA, payload).await
    }

    /// Writes a close frame with `code` and `reason` (cut to fit a control frame).
    pub async fn send_close(&mut self, code: u16, reason: &str) -> std::io::Result<()> {
        let mut payload = code.to_be_bytes().to_vec();
        let mut cut = reason.len().min(123);
        while !reason.is_char_boundary(cut) {
            cut -= 1;
        }
        payload.extend_from_slice(&reason.as_bytes()[..cut]);
        self.send_frame(0x8, &payload).await
    }

    async fn send_frame(&mut self, op: u8, payload: &[u8]) -> std::io::Result<()> {
        let mut head = [0u8; 10];
        head[0] = 0x80 | op;
        let head_len = match payload.len() {
            n @ 0..=125 => {
                head[1] = n as u8;
                2
            }
            n @ 126..=0xffff => {
                head[1] = 126;
                head[2..4].copy_from_slice(&(n as u16).to_be_bytes());
                4
            }
            n => {
                head[1] = 127;
                head[2..10].copy_from_slice(&(n as u64).to_be_bytes());
                10
            }
        };
        // Header and payload in one write when the socket takes them (no copy of the payload).
        let (mut h, mut p) = (&head[..head_len], payload);
        while !h.is_empty() || !p.is_empty() {
            let n = if h.is_empty() {
                self.io.write(p).await?
            } else {
                self.io
                    .write_vectored(&[IoSlice::new(h), IoSlice::new(p)])
                    .await?
            };
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let from_h = n.min(h.len());
            h = &h[from_h..];
            p = &p[n - from_h..];
        }
        self.io.flush().await
    }

    /// Shuts the write side (after a close frame).
    pub async fn shutdown(&mut self) {
        let _ = self.io.shutdown().await;
    }
}

/// Close codes a peer may send (RFC 6455 7.4).
fn valid_close_code(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1011 | 3000..=4999)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client frame: masked with a fixed key.
    fn frame(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut out = vec![first];
        match payload.len() {
            n @ 0..=125 => out.push(0x80 | n as u8),
            n @ 126..=0xffff => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                out.push(0x80 | 127);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
        out
    }

    fn read_all(bytes: Vec<u8>) -> Vec<Result<Incoming, String>> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut client, server) = tokio::io::duplex(1 << 16);
            client.write_all(&bytes).await.unwrap();
            drop(client);
            let mut ws = WebSocket::new(server, 4096);
            let mut out = Vec::new();
            loop {
                match ws.next().await {
                    Ok(Some(m)) => out.push(Ok(m)),
                    Ok(None) => break,
                    Err(ReadError::Protocol(p)) => {
                        out.push(Err(p));
                        break;
                    }
                    Err(ReadError::Io(e)) => panic!("{e}"),
                }
            }
            out
        })
    }

    #[test]
    fn the_accept_key_is_rfc_6455s_example() {
        assert_eq!(
            accept_key(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert!(valid_key(b"dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(!valid_key(b"short"));
    }

    #[test]
    fn messages_fragments_and_control_frames_are_read() {
        let mut bytes = frame(0x82, b"whole");
        bytes.extend(frame(0x02, b"frag"));
        bytes.extend(frame(0x89, b"ping")); // a ping between fragments is allowed
        bytes.extend(frame(0x80, b"mented"));
        bytes.extend(frame(0x8A, b""));
        bytes.extend(frame(0x88, &[0x03, 0xe8, b'b', b'y', b'e']));
        assert_eq!(
            read_all(bytes),
            vec![
                Ok(Incoming::Binary(b"whole".to_vec())),
                Ok(Incoming::Ping(b"ping".to_vec())),
                Ok(Incoming::Binary(b"fragmented".to_vec())),
                Ok(Incoming::Pong),
                Ok(Incoming::Close(Some(1000))),
            ]
        );
    }

    #[test]
    fn every_violation_is_named() {
        let unmasked = vec![0x82, 0x01, 0x00];
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (frame(0xC2, b"x"), "reserved bits"),
            (unmasked, "unmasked"),
            (frame(0x83, b"x"), "reserved opcode 3"),
            (frame(0x8B, b""), "reserved opcode 11"),
            (frame(0x09, b""), "fragmented control"),
            (frame(0x89, &[0; 126]), "control frame of 126"),
            (frame(0x80, b"x"), "continuation frame outside"),
            (
                [frame(0x02, b"a"), frame(0x82, b"b")].concat(),
                "inside a fragmented",
            ),
            (frame(0x82, &[0; 4097]), "more than 4096 bytes"),
            (
                [frame(0x02, &[0; 4000]), frame(0x80, &[0; 97])].concat(),
                "more than 4096 bytes",
            ),
            (frame(0x88, &[3]), "close frame of 1 byte"),
            (frame(0x88, &[0x03, 0xed]), "close code 1005"),
        ];
        for (bytes, expect) in cases {
            let got = read_all(bytes);
            let last = got.last().unwrap();
            assert!(
                matches!(last, Err(e) if e.contains(expect)),
                "{expect}: {got:?}"
            );
        }
        // A header claiming 2^63 bytes is refused from the header alone.
        let mut huge = vec![0x82, 0x80 | 127];
        huge.extend_from_slice(&(1u64 << 63).to_be_bytes());
        huge.extend_from_slice(&[0; 4]);
        assert!(matches!(read_all(huge).last(), Some(Err(e)) if e.contains("more than")));
    }

    #[test]
    fn fragments_are_capped_even_when_empty() {
        let mut bytes = frame(0x02, b"");
        for _ in 0..MAX_FRAGMENTS - 2 {
            bytes.extend(frame(0x00, b""));
        }
        bytes.extend(frame(0x80, b"ok"));
        assert_eq!(read_all(bytes), vec![Ok(Incoming::Binary(b"ok".to_vec()))]);
        let mut bytes = frame(0x02, b"");
        for _ in 0..MAX_FRAGMENTS {
            bytes.extend(frame(0x00, b""));
        }
        assert!(matches!(read_all(bytes).last(), Some(Err(e)) if e.contains("fragments")));
    }

    #[test]
    fn frames_written_are_read_back_by_a_client() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let (mut client, server) = tokio::io::duplex(1 << 20);
            let mut ws = WebSocket::new(server, 4096);
            for len in [0usize, 125, 126, 65535, 65536, 200_000] {
                let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
                ws.send_binary(&payload).await.unwrap();
                let mut head = [0u8; 2];
                client.read_exact(&mut head).await.unwrap();
                assert_eq!(head[0], 0x82);
                let n = match head[1] {
                    126 => usize::from(client.read_u16().await.unwrap()),
                    127 => client.read_u64().await.unwrap() as usize,
                    n => usize::from(n),
                };
                assert_eq!(n, len);
                let mut got = vec![0u8; n];
                client.read_exact(&mut got).await.unwrap();
                assert_eq!(got, payload);
            }
            ws.send_close(1001, "é".repeat(100).as_str()).await.unwrap();
            let mut head = [0u8; 2];
            client.read_exact(&mut head).await.unwrap();
            assert_eq!(head[0], 0x88);
            assert!(head[1] <= 125);
        });
    }
}
