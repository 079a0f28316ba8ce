//! Label interning: every distinct label string is stored once and named by a `u32` id.

use rustc_hash::FxHashMap;

/// Maps label strings to dense `u32` ids and back.
#[derive(Default, Debug)]
pub struct Interner {
    names: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, u32>,
}

impl Interner {
    /// Returns the id of `label`, adding it if it is new.
    #[inline]
    pub fn intern(&mut self, label: &str) -> u32 {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
