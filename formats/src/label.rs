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

/// The ids a reader gave the labels of the compact block read now, by their [`LabelKey`]s:
/// each label is looked up by its text once per block, then by its index.
#[derive(Debug, Default, Clone)]
pub struct BlockLabels {
    block: u64,
    /// By index in the block's table; `u32::MAX` where not seen yet.
    ids: Vec<u32>,
}

impl BlockLabels {
    /// The id of `key`'s label, from the cache or from `look_up` (called once per label and
    /// block, and for every record without a key).
    #[inline]
    pub fn id(&mut self, key: LabelKey, look_up: impl FnOnce() -> u32) -> u32 {
        if key.block == 0 || key.label == u32::MAX {
            return look_up();
        }
        if self.block != key.block {
            self.block = key.block;
            self.ids.clear();
        }
        let i = key.label as usize;
        match self.ids.get(i) {
            Some(&id) if id != u32::MAX => id,
            _ => {
                let id = look_up();
                if i >= self.ids.len() {
                    self.ids.resize(i + 1, u32::MAX);
                }
                self.ids[i] = id;
                id
            }
        }
    }
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
    fn block_labels_look_each_label_up_once_per_block() {
        let mut cache = BlockLabels::default();
        let mut lookups = 0;
        let mut id = |cache: &mut BlockLabels, block, label, answer| {
            cache.id(LabelKey { block, label }, || {
                lookups += 1;
                answer
            })
        };
        assert_eq!(id(&mut cache, 1, 3, 10), 10);
        assert_eq!(id(&mut cache, 1, 3, 99), 10, "cached in the same block");
        assert_eq!(id(&mut cache, 1, 0, 11), 11);
        assert_eq!(
            id(&mut cache, 2, 3, 12),
            12,
            "another block numbers labels anew"
        );
        assert_eq!(id(&mut cache, 2, 0, 13), 13);
        assert_eq!(
            id(&mut cache, 0, u32::MAX, 14),
            14,
            "no key: always looked up"
        );
        assert_eq!(id(&mut cache, 0, u32::MAX, 15), 15);
        assert_eq!(lookups, 6);
    }

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
