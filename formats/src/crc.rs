//! [`crc32c_combine`]: the CRC32C of two byte strings one after the other, from their own
//! CRCs and the second one's length, in a few hundred operations whatever the length.
//!
//! A writer adds a `thread_info` record in front of a buffer whose CRC its producer already
//! computed; the `crc32c` crate's combine (zlib's original, which squares a 32 × 32 bit
//! matrix about twenty times) cost the writer thread more than writing the bytes. Here the
//! same result comes from polynomial arithmetic modulo the CRC's polynomial: appending `n`
//! zero bytes to a message multiplies its CRC register by x^(8n), and x^(8n) is a product of
//! the precomputed powers x^(2^k) for the bits of 8n.

/// CRC32C's polynomial (Castagnoli), bit-reversed as the CRC is computed.
const POLY: u32 = 0x82F6_3B78;

/// The polynomial 1 (x^0) in the reversed bit order: the top bit.
const ONE: u32 = 1 << 31;

/// a(x)·b(x) modulo the polynomial, both in the reversed bit order (the top bit is x^0).
const fn mul_mod(a: u32, mut b: u32) -> u32 {
    let mut product = 0;
    let mut bit = ONE;
    while bit != 0 {
        if a & bit != 0 {
            product ^= b;
        }
        bit >>= 1;
        // b(x)·x: a shift towards higher powers, reduced when x^32 appears.
        b = if b & 1 != 0 { (b >> 1) ^ POLY } else { b >> 1 };
    }
    product
}

/// x^(2^k) modulo the polynomial, for k = 0..64.
const POWERS: [u32; 64] = {
    let mut t = [0u32; 64];
    // x^1 is the second-highest bit.
    let mut p = ONE >> 1;
    let mut k = 0;
    while k < 64 {
        t[k] = p;
        p = mul_mod(p, p);
        k += 1;
    }
    t
};

/// x^(8·len) modulo the polynomial: the operator that appends `len` zero bytes.
fn zeros_operator(len: u64) -> u32 {
    let mut op = ONE;
    // 8·len = len << 3: the bits of len, from the power x^(2^3) on.
    let mut n = len;
    let mut k = 3;
    while n != 0 {
        if n & 1 != 0 {
            op = mul_mod(POWERS[k % 64], op);
        }
        n >>= 1;
        k += 1;
    }
    op
}

/// The CRC32C of `a` followed by `b`, from `crc32c(a)`, `crc32c(b)` and `b.len()`: the same
/// value as `crc32c::crc32c_combine`.
pub fn crc32c_combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    // The CRC's initial and final inversions cancel out of the first string's part; the
    // second string's CRC already carries its own.
    mul_mod(zeros_operator(len_b), crc_a) ^ crc_b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_empty_second_string_changes_nothing() {
        let a = crc32c::crc32c(b"framelog");
        assert_eq!(crc32c_combine(a, crc32c::crc32c(b""), 0), a);
    }

    #[test]
    fn lengths_around_powers_of_two_and_a_whole_batch() {
        let bytes: Vec<u8> = (0..(70u32 << 10))
            .map(|i| i.wrapping_mul(2_654_435_761) as u8)
            .collect();
        for split in [1usize, 7, 8, 255, 256, 4095, 4096, 4097, 65_536, 70 << 10] {
            let (a, b) = bytes[..split.min(bytes.len())].split_at(split.min(bytes.len()) / 3);
            let want = crc32c::crc32c(&[a, b].concat());
            let got = crc32c_combine(crc32c::crc32c(a), crc32c::crc32c(b), b.len() as u64);
            assert_eq!(got, want, "split {split}");
        }
    }

    proptest! {
        /// The combined CRC is the CRC of the two strings one after the other, as the
        /// `crc32c` crate's own combine says.
        #[test]
        fn equals_the_crc_of_the_concatenation(
            a in prop::collection::vec(any::<u8>(), 0..300),
            b in prop::collection::vec(any::<u8>(), 0..3000),
        ) {
            let (ca, cb) = (crc32c::crc32c(&a), crc32c::crc32c(&b));
            let got = crc32c_combine(ca, cb, b.len() as u64);
            prop_assert_eq!(got, crc32c::crc32c(&[a.as_slice(), b.as_slice()].concat()));
            prop_assert_eq!(got, crc32c::crc32c_combine(ca, cb, b.len()));
        }
    }
}
