//! Label length limits, and the key a compact block gives each label.

/// Which label a start has, as a compact block numbers it: the same key is the same label, so
/// a reader that interns labels looks each one up once per block. [`LabelKey::NONE`] for
/// records of raw segments; `label` is `u32::MAX` for a compact block's other records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelKey {
    /// The block's decode, unique in the process (0: none).
    pub block: u64,
    /// The label's index in the block's label table.
    pub label: u32,
}

impl LabelKey {
    /// No key: look the label up by its text.
    pub const NONE: LabelKey = LabelKey {
        block: 0,
        label: u32::MAX,
    };
}

/// Cuts a label to at most 255 bytes, at a UTF-8 character boundary (never mid-character).
pub fn truncate_label(label: &str) -> &str {
    if label.len() <= u8::MAX as usize {
        return label;
    }
    let mut end = u8::MAX as usize;
    while !label.is_char_boundary(end) {
        end -= 1;
    }
    &label[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_labels_are_kept() {
        assert_eq!(truncate_label("db/query"), "db/query");
        let exact = "a".repeat(255);
        assert_eq!(truncate_label(&exact), exact);
    }

    #[test]
    fn long_labels_are_cut_at_a_char_boundary() {
        // 254 ASCII bytes then a 3-byte character straddling the limit.
        let s = format!("{}€tail", "a".repeat(254));
        let cut = truncate_label(&s);
        assert_eq!(cut.len(), 254);
        assert!(cut.chars().all(|c| c == 'a'));
        let emoji = "😀".repeat(100); // 4 bytes each
        assert_eq!(truncate_label(&emoji).len(), 252);
    }
}
