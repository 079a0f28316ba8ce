//! Comparing shared secrets (tokens) without leaking where they differ through timing.

/// Whether two secrets are equal, in time that depends only on `a`'s length.
pub(crate) fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, x) in a.iter().enumerate() {
        // Compare against the other secret cyclically so the loop length depends only on `a`.
        let y = b.get(i).copied().unwrap_or(0);
        diff |= x ^ y;
    }
    diff == 0
}
