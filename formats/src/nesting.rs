//! Bounds how deeply a value may nest while it is serialized as frame data.
//!
//! The `bson` crate serializes recursively, with large stack frames: a value nested a few
//! thousand levels deep overflows a thread's stack and aborts the program. Every value is
//! serialized through `Bounded`, which counts levels on the way down and refuses, with an
//! ordinary serializer error, a value deeper than readers accept
//! ([`crate::bson_check::MAX_DEPTH`]) before the recursion gets anywhere near the stack's end.

use serde::ser::{self, Serialize, Serializer};

/// Deepest nesting of containers (maps, structs, sequences, tuples, enum variants) accepted
/// in frame data: one below what readers accept, as a value that is not a map is stored
/// inside one (`{"value": …}`).
pub const MAX_NESTING: usize = crate::bson_check::MAX_DEPTH - 1;

/// Deepest chain of nested calls of any kind (containers, options, newtypes) followed.
const MAX_CALLS: usize = 4 * MAX_NESTING;

/// A value serialized with its nesting counted and bounded.
pub(crate) struct Bounded<'a, T: ?Sized> {
    value: &'a T,
    /// Containers around the value.
    nesting: usize,
    /// Nested calls around the value.
    calls: usize,
}

impl<'a, T: ?Sized> Bounded<'a, T> {
    /// `value` at the top level.
    pub(crate) fn new(value: &'a T) -> Self {
        Bounded {
            value,
            nesting: 0,
            calls: 0,
        }
    }
}

fn too_deep<E: ser::Error>() -> E {
    E::custom(format!(
        "frame data nested deeper than {MAX_NESTING} levels"
    ))
}

impl<T: Serialize + ?Sized> Serialize for Bounded<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.calls > MAX_CALLS {
            return Err(too_deep());
        }
        self.value.serialize(Proxy {
            inner: s,
            nesting: self.nesting,
            calls: self.calls,
        })
    }
}

/// Forwards every call to `inner`, wrapping nested values in [`Bounded`].
struct Proxy<S> {
    inner: S,
    nesting: usize,
    calls: usize,
}

impl<S> Proxy<S> {
    /// The nesting inside `levels` more containers, if that is allowed.
    fn open<E: ser::Error>(&self, levels: usize) -> Result<usize, E> {
        let n = self.nesting + levels;
        if n > MAX_NESTING {
            Err(too_deep())
        } else {
            Ok(n)
        }
    }

    fn child<'a, T: ?Sized>(&self, value: &'a T, nesting: usize) -> Bounded<'a, T> {
        Bounded {
            value,
            nesting,
            calls: self.calls + 1,
        }
    }

    /// Opens a container `levels` deep with `make`, if that is allowed.
    fn compound<C, E: ser::Error>(
        self,
        levels: usize,
        make: impl FnOnce(S) -> Result<C, E>,
    ) -> Result<Compound<C>, E> {
        let nesting = self.open(levels)?;
        let calls = self.calls + 1;
        Ok(Compound {
            inner: make(self.inner)?,
            nesting,
            calls,
        })
    }
}

/// A container being serialized: its elements are [`Bounded`] one level further down.
struct Compound<C> {
    inner: C,
    nesting: usize,
    calls: usize,
}

impl<C> Compound<C> {
    fn child<'a, T: ?Sized>(&self, value: &'a T) -> Bounded<'a, T> {
        Bounded {
            value,
            nesting: self.nesting,
            calls: self.calls,
        }
    }
}

macro_rules! forward_scalars {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<S::Ok, S::Error> {
            self.inner.$method(v)
        })*
    };
}

impl<S: Serializer> Serializer for Proxy<S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Compound<S::SerializeSeq>;
    type SerializeTuple = Compound<S::SerializeTuple>;
    type SerializeTupleStruct = Compound<S::SerializeTupleStruct>;
    type SerializeTupleVariant = Compound<S::SerializeTupleVariant>;
    type SerializeMap = Compound<S::SerializeMap>;
    type SerializeStruct = Compound<S::SerializeStruct>;
    type SerializeStructVariant = Compound<S::SerializeStructVariant>;

    forward_scalars!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );

    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_none()
    }

    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<S::Ok, S::Error> {
        let child = self.child(value, self.nesting);
        self.inner.serialize_some(&child)
    }

    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit()
    }

    fn serialize_unit_struct(self, name: &'static str) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_struct(name)
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_variant(name, index, variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        let child = self.child(value, self.nesting);
        self.inner.serialize_newtype_struct(name, &child)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<S::Ok, S::Error> {
        // Stored as a map `{variant: value}`.
        let nesting = self.open(1)?;
        let child = self.child(value, nesting);
        self.inner
            .serialize_newtype_variant(name, index, variant, &child)
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        self.compound(1, |s| s.serialize_seq(len))
    }

    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        self.compound(1, |s| s.serialize_tuple(len))
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        self.compound(1, |s| s.serialize_tuple_struct(name, len))
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        // Stored as a map holding a list: `{variant: [...]}`.
        self.compound(2, |s| s.serialize_tuple_variant(name, index, variant, len))
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        self.compound(1, |s| s.serialize_map(len))
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        self.compound(1, |s| s.serialize_struct(name, len))
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        // Stored as a map holding a map: `{variant: {...}}`.
        self.compound(2, |s| s.serialize_struct_variant(name, index, variant, len))
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// Implements a compound serializer trait whose elements (or fields) are `$method(value)`.
macro_rules! compound_of_values {
    ($($trait:ident: $method:ident),* $(,)?) => {$(
        impl<C: ser::$trait> ser::$trait for Compound<C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
                let child = self.child(value);
                self.inner.$method(&child)
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.inner.end()
            }
        }
    )*};
}

compound_of_values!(
    SerializeSeq: serialize_element,
    SerializeTuple: serialize_element,
    SerializeTupleStruct: serialize_field,
    SerializeTupleVariant: serialize_field,
);

impl<C: ser::SerializeMap> ser::SerializeMap for Compound<C> {
    type Ok = C::Ok;
    type Error = C::Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), C::Error> {
        let child = self.child(key);
        self.inner.serialize_key(&child)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), C::Error> {
        let child = self.child(value);
        self.inner.serialize_value(&child)
    }
    fn end(self) -> Result<C::Ok, C::Error> {
        self.inner.end()
    }
}

/// Implements a compound serializer trait of named fields.
macro_rules! compound_of_fields {
    ($($trait:ident),* $(,)?) => {$(
        impl<C: ser::$trait> ser::$trait for Compound<C> {
            type Ok = C::Ok;
            type Error = C::Error;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), C::Error> {
                let child = self.child(value);
                self.inner.serialize_field(key, &child)
            }
            fn skip_field(&mut self, key: &'static str) -> Result<(), C::Error> {
                self.inner.skip_field(key)
            }
            fn end(self) -> Result<C::Ok, C::Error> {
                self.inner.end()
            }
        }
    )*};
}

compound_of_fields!(SerializeStruct, SerializeStructVariant);
