//! Label interning: every distinct label string is stored once and named by a `u32` id.

use rustc_hash::FxHashMap;

/// Maps label strings to dense `u32` ids and back.
#[derive(Debug)]
pub struct Interner {
    names: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, u32>,
    /// Labels interned recently, by a hash of their length and end bytes: a log repeats a
    /// few labels millions of times, and hashing each whole string into the map was a
    /// twentieth of a load's time.
    recent: Box<[Recent; RECENT]>,
}

impl Default for Interner {
    fn default() -> Self {
        Self {
            names: Vec::new(),
            ids: FxHashMap::default(),
            recent: Box::new([Recent::default(); RECENT]),
        }
    }
}

/// Entries in [`Interner::recent`].
const RECENT: usize = 64;

/// A recently interned label: its length, first and last 8 bytes, and id.
#[derive(Clone, Copy, Debug, Default)]
struct Recent {
    /// `len + 1`, so that the default entry matches no label.
    len: u32,
    id: u32,
    head: u64,
    tail: u64,
}

/// The first and last 8 bytes of `b` (zero-padded when shorter): with the length, all of a
/// string of up to 16 bytes.
#[inline]
fn ends(b: &[u8]) -> (u64, u64) {
    if let (Some(h), Some(t)) = (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        (u64::from_le_bytes(*h), u64::from_le_bytes(*t))
    } else {
        let mut h = [0u8; 8];
        h[..b.len()].copy_from_slice(b);
        (u64::from_le_bytes(h), 0)
    }
}

/// `a == b`, without a call to `memcmp` for strings of up to 16 bytes (the names a log
/// repeats: labels, plot series).
#[inline]
pub(crate) fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    a.len() == b.len()
        && if a.len() <= 16 {
            ends(a) == ends(b)
        } else {
            a == b
        }
}

impl Interner {
    /// Returns the id of `label`, adding it if it is new.
    #[inline]
    pub fn intern(&mut self, label: &str) -> u32 {
        let b = label.as_bytes();
        let (head, tail) = ends(b);
        let len = b.len() as u32 + 1;
        let slot = ((head ^ tail.rotate_left(29) ^ u64::from(len))
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            >> 58) as usize;
        let r = self.recent[slot];
        // Length and end bytes equal: the same string if it is at most 16 bytes long, else
        // if its middle is too.
        if r.len == len
            && r.head == head
            && r.tail == tail
            && (b.len() <= 16
                || self.names[r.id as usize].as_bytes().get(8..b.len() - 8)
                    == b.get(8..b.len() - 8))
        {
            return r.id;
        }
        let id = self.intern_slow(label);
        self.recent[slot] = Recent {
            len,
            id,
            head,
            tail,
        };
        id
    }

    fn intern_slow(&mut self, label: &str) -> u32 {
        if let Some(&id) = self.ids.get(label) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(label.into());
        self.ids.insert(label.into(), id);
        id
    }

    /// The id of `label`, if it was ever interned.
    pub fn get(&self, label: &str) -> Option<u32> {
        self.ids.get(label).copied()
    }

    /// The label named by `id` (empty for an unknown id).
    #[inline]
    pub fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |s| s)
    }

    /// Number of distinct labels.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True if no label was interned yet.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// All labels, indexed by id.
    pub fn names(&self) -> impl Iterator<Item = (u32, &str)> {
        self.names.iter().enumerate().map(|(i, s)| (i as u32, &**s))
    }

    /// Heap bytes held (strings twice: list and map keys, plus table overhead).
    pub fn heap_bytes(&self) -> usize {
        let strings: usize = self.names.iter().map(|s| s.len()).sum();
        strings * 2
            + self.names.capacity() * std::mem::size_of::<Box<str>>()
            + self.ids.capacity() * (std::mem::size_of::<(Box<str>, u32)>() + 1)
            + std::mem::size_of::<[Recent; RECENT]>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_is_string_equality() {
        let words = [
            "",
            "a",
            "b",
            "ab",
            "ba",
            "queue depth",
            "queue deptH",
            "12345678",
            "123456789",
            "1234567890abcdef",
            "1234567890abcdeF",
            "1234567890abcdefg",
            "1234567890Abcdefg",
            "x234567890abcdefg",
            "é",
            "e\u{301}",
        ];
        for a in words {
            for b in words {
                assert_eq!(same(a, b), a == b, "{a:?} {b:?}");
            }
        }
    }

    #[test]
    fn same_label_same_id() {
        let mut i = Interner::default();
        let a = i.intern("db/query");
        let b = i.intern("http/request");
        assert_ne!(a, b);
        assert_eq!(i.intern("db/query"), a);
        assert_eq!(i.name(b), "http/request");
        assert_eq!(i.get("nope"), None);
        assert_eq!(i.len(), 2);
        assert_eq!(i.name(99), "");
    }

    /// Labels that share lengths and end bytes (so the recent cache must look further),
    /// short ones, the empty one and long ones, in random orders: each gets the id a plain
    /// map gives it.
    #[test]
    fn recent_labels_get_the_ids_a_plain_map_gives() {
        use rand::{Rng, SeedableRng};
        let mut words: Vec<String> = vec![String::new(), "a".into(), "a\0".into()];
        for mid in ["", "x", "xy", "middle", "middle-of-it", "MIDDLE-OF-IT"] {
            for end in ["/query", "/query-long-suffix"] {
                words.push(format!("db{mid}{end}"));
                words.push(format!("prefix01{mid}{end}"));
            }
        }
        words.push("0123456789abcdef".into());
        words.push("0123456789abcdeF".into());
        words.push("0123456789abcdef0".into());
        words.push("01234567x9abcdef0".into());
        for seed in 0..20 {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut i = Interner::default();
            let mut plain = std::collections::HashMap::new();
            for _ in 0..5_000 {
                let w = &words[rng.gen_range(0..words.len())];
                let next = plain.len() as u32;
                let want = *plain.entry(w.clone()).or_insert(next);
                assert_eq!(i.intern(w), want, "{w:?} (seed {seed})");
                assert_eq!(i.name(want), w);
            }
        }
    }
}
