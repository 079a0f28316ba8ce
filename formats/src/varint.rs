//! Integer codings the format uses (`docs/FORMAT.md`, *Integers and varints*): unsigned
//! LEB128 varints and zigzag, pure and available in every build.

/// Appends `v` as an unsigned LEB128 varint (at most 10 bytes).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Writes `values` as LEB128 varints into the front of `out`, which must hold 10 bytes a
/// value (a fixed buffer: never allocates); returns the length written.
#[inline]
pub fn put_varints<const N: usize>(out: &mut [u8], values: [u64; N]) -> usize {
    let mut n = 0;
    for mut v in values {
        while v >= 0x80 {
            out[n] = v as u8 | 0x80;
            v >>= 7;
            n += 1;
        }
        out[n] = v as u8;
        n += 1;
    }
    n
}

/// Reads a varint from the front of `buf`, advancing it; `None` if cut short or over 10 bytes.
#[inline]
pub fn get_varint(buf: &mut &[u8]) -> Option<u64> {
    // Up to 8 bytes at once when 8 are there: find the first byte without its high bit and
    // gather the 7-bit groups before it with shifts (no loop, no branch per byte).
    if let Some(word) = buf.get(..8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let x = u64::from_le_bytes(w);
        let stops = !x & 0x8080_8080_8080_8080;
        if stops != 0 {
            let len = (stops.trailing_zeros() / 8 + 1) as usize;
            let x = x & (u64::MAX >> (64 - 8 * len)) & 0x7f7f_7f7f_7f7f_7f7f;
            let x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
            let x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
            let x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
            *buf = &buf[len..];
            return Some(x);
        }
    }
    get_varint_slow(buf)
}

/// [`get_varint`] a byte at a time (near the end of a buffer, and for 9 or 10 bytes).
#[inline(never)]
pub(crate) fn get_varint_slow(buf: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for (i, &b) in buf.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Some(v);
        }
    }
    None
}

/// Maps a signed difference to an unsigned one, small magnitudes to small numbers.
#[inline]
pub const fn zigzag(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_zigzag_round_trip_at_every_length() {
        for v in [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            // With and without the 8-byte fast path (a longer buffer after it).
            let mut long = out.clone();
            long.extend_from_slice(&[0xff; 12]);
            let (mut a, mut b) = (&out[..], &long[..]);
            assert_eq!((get_varint(&mut a), a.len()), (Some(v), 0));
            assert_eq!((get_varint(&mut b), b.len()), (Some(v), 12));
            assert_eq!(
                get_varint(&mut &out[..out.len() - 1]),
                None,
                "cut short: {v}"
            );
        }
        for n in [0i64, -1, 1, -2, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(n)), n);
        }
        assert_eq!((zigzag(0), zigzag(-1), zigzag(1), zigzag(-2)), (0, 1, 2, 3));
    }
}
