//! Field-by-field conversion between versioned types and their hub.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// Conversion of one value into another type, used field by field by `#[derive(Versioned)]`.
///
/// Implemented for identical scalar and meta types, for containers of convertible values, and (by the derive) between
/// each versioned struct and its hub struct in both directions. A field whose types have no `Convert` needs a
/// named override (`#[versioned(to_hub = "...", from_hub = "...")]`).
#[diagnostic::on_unimplemented(
    message = "no field-by-field conversion from `{Self}` to `{T}`",
    label = "this field's type differs from the hub's",
    note = "give the field `#[versioned(to_hub = \"fn\", from_hub = \"fn\")]`, or derive `Versioned` on the nested type"
)]
pub trait Convert<T> {
    /// The value as `T`.
    fn convert(&self) -> T;
}

macro_rules! identity {
    ($($t:ty),* $(,)?) => {$(
        impl Convert<$t> for $t {
            fn convert(&self) -> $t {
                self.clone()
            }
        }
    )*};
}

identity!(
    String,
    bool,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    f32,
    f64,
    crate::meta::ObjectMeta,
    crate::meta::Time,
    crate::meta::MicroTime,
    crate::meta::Condition,
);

/// Optional scalars in a version (so that unset differs from zero) map to plain scalars in the hub, and back.
macro_rules! optional_scalar {
    ($($t:ty),* $(,)?) => {$(
        impl Convert<$t> for Option<$t> {
            fn convert(&self) -> $t {
                self.clone().unwrap_or_default()
            }
        }
        impl Convert<Option<$t>> for $t {
            fn convert(&self) -> Option<$t> {
                Some(self.clone())
            }
        }
    )*};
}

optional_scalar!(String, bool, i32, i64, u32, u64, f32, f64);

impl<A: Convert<B>, B> Convert<Vec<B>> for Vec<A> {
    fn convert(&self) -> Vec<B> {
        self.iter().map(Convert::convert).collect()
    }
}

impl<A: Convert<B>, B> Convert<Option<B>> for Option<A> {
    fn convert(&self) -> Option<B> {
        self.as_ref().map(Convert::convert)
    }
}

impl<A: Convert<B>, B> Convert<Box<B>> for Box<A> {
    fn convert(&self) -> Box<B> {
        Box::new(self.as_ref().convert())
    }
}

impl<K: Clone + Ord, A: Convert<B>, B> Convert<BTreeMap<K, B>> for BTreeMap<K, A> {
    fn convert(&self) -> BTreeMap<K, B> {
        self.iter().map(|(k, v)| (k.clone(), v.convert())).collect()
    }
}

impl<K: Clone + Eq + Hash, A: Convert<B>, B> Convert<HashMap<K, B>> for HashMap<K, A> {
    fn convert(&self) -> HashMap<K, B> {
        self.iter().map(|(k, v)| (k.clone(), v.convert())).collect()
    }
}

/// Converts one field; the derive calls this so that a type mismatch is reported at the field.
pub fn convert_field<A: Convert<B>, B>(value: &A) -> B {
    value.convert()
}
