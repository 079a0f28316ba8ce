//! Compact sealed segments (format version 2, `docs/FORMAT.md`, *Compact sealed segments*):
//! the shared pieces, varints and zigzag deltas and the Zstandard frames, pure and I/O-free.

pub mod data;

use crate::error::{DecodeError, ErrorKind};

pub mod frames;
pub mod ids;

/// Largest `raw_len` of a compact block body (16 MiB): a reader refuses more before allocating.
pub const MAX_RAW_BLOCK_LEN: usize = 16 << 20;

// The integer codings are not only compact segments': frame allocation records use varints too,
// in builds without zstd (the browser's).
pub use crate::varint::{get_varint, put_varint, unzigzag, zigzag};

/// Compresses `raw` into one Zstandard frame that states its content size.
pub fn compress(raw: &[u8], level: i32) -> Vec<u8> {
    // Compressing from memory into memory cannot fail but for allocation.
    zstd::bulk::compress(raw, level).expect("zstd compresses in memory")
}

/// Decompresses one Zstandard frame that must hold exactly `raw_len` bytes.
pub fn decompress(body: &[u8], raw_len: usize) -> Result<Vec<u8>, DecodeError> {
    let bad = |why: String| DecodeError::new(0, ErrorKind::BadDocument(why));
    if raw_len > MAX_RAW_BLOCK_LEN {
        return Err(bad(format!(
            "block of {raw_len} bytes is over the 16 MiB limit"
        )));
    }
    let out = zstd::bulk::decompress(body, raw_len)
        .map_err(|e| bad(format!("compressed body does not decompress: {e}")))?;
    if out.len() != raw_len {
        return Err(bad(format!(
            "compressed body holds {} bytes, its header says {raw_len}",
            out.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::varint::get_varint_slow;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varints_round_trip(values in proptest::collection::vec(any::<u64>(), 0..50)) {
            let mut buf = Vec::new();
            for &v in &values {
                put_varint(&mut buf, v);
            }
            let mut rest = &buf[..];
            for &v in &values {
                prop_assert_eq!(get_varint(&mut rest), Some(v));
            }
            prop_assert!(rest.is_empty());
        }

        /// The word-at-a-time reader agrees with the byte loop on any bytes, valid or not.
        #[test]
        fn fast_varints_read_as_the_byte_loop_does(bytes in proptest::collection::vec(any::<u8>(), 0..24), high in any::<u32>()) {
            // Many bytes with the high bit set, so that long and unterminated varints come up.
            let bytes: Vec<u8> = bytes
                .iter()
                .enumerate()
                .map(|(i, &b)| if high >> (i % 32) & 1 == 1 { b | 0x80 } else { b })
                .collect();
            let (mut fast, mut slow) = (&bytes[..], &bytes[..]);
            loop {
                let (a, b) = (get_varint(&mut fast), get_varint_slow(&mut slow));
                prop_assert_eq!(a, b);
                prop_assert_eq!(fast.len(), slow.len());
                if a.is_none() {
                    break;
                }
            }
        }

        #[test]
        fn zigzag_round_trips(n in any::<i64>()) {
            prop_assert_eq!(unzigzag(zigzag(n)), n);
        }
    }

    #[test]
    fn small_differences_stay_small_and_cut_varints_are_refused() {
        assert_eq!([zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)], [0, 1, 2, 3]);
        let mut buf = Vec::new();
        put_varint(&mut buf, u64::MAX);
        assert_eq!(buf.len(), 10);
        let mut cut = &buf[..9];
        assert_eq!(get_varint(&mut cut), None);
        let eleven = [0x80u8; 11];
        assert_eq!(get_varint(&mut &eleven[..]), None);
    }

    #[test]
    fn a_frame_of_the_wrong_size_or_garbage_is_refused() {
        let raw = b"frame log records frame log records".repeat(100);
        let z = compress(&raw, 3);
        assert_eq!(decompress(&z, raw.len()).unwrap(), raw);
        assert!(decompress(&z, raw.len() + 1).is_err());
        assert!(decompress(&z, raw.len() - 1).is_err());
        // A flipped byte may still decompress (to other bytes): the blocks' CRC32C over the
        // compressed body is what catches damage, not zstd.
        assert!(decompress(&z, MAX_RAW_BLOCK_LEN + 1).is_err());
    }
}
