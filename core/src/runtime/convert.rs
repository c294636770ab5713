//! Field-by-field conversion between versioned types and their hub, which may fail with field errors.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;

use crate::validation::{ErrorList, FieldError, FieldValue, Path};

/// Why a conversion or a version's defaults refused a value: field errors whose paths are relative to the value
/// converted. The framework prefixes them with the JSON path of that value on its way up (`quantity` becomes
/// `spec.toppings[0].quantity`), so a field function never knows where its field is; a request body that fails
/// is answered 422 `Invalid` with one cause per error, as upstream's conversion functions' field errors are.
///
/// ```
/// use apiserver::runtime::ConversionError;
///
/// /// v1beta1 says `"12 units"`, the hub an integer.
/// fn quantity_to_hub(quantity: &String) -> Result<i64, ConversionError> {
///     let number = quantity.strip_suffix(" units").unwrap_or(quantity);
///     number.trim().parse().map_err(|_| {
///         ConversionError::invalid(quantity, "must be a number of units, e.g. \"12 units\"")
///     })
/// }
///
/// let err = quantity_to_hub(&"a dozen".to_string()).unwrap_err().within("quantity").within("spec");
/// assert_eq!(
///     err.to_string(),
///     "spec.quantity: Invalid value: \"a dozen\": must be a number of units, e.g. \"12 units\""
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionError(ErrorList);

impl ConversionError {
    /// The value converted is invalid, `detail` says why; the path is the field's (filled in by the framework).
    pub fn invalid(value: &(impl FieldValue + ?Sized), detail: &str) -> Self {
        ConversionError(vec![FieldError::invalid(Path::default(), value, detail)].into())
    }

    /// The errors, their paths relative to the value converted (as far as the error has travelled up).
    pub fn errors(&self) -> &ErrorList {
        &self.0
    }

    /// The errors, their paths relative to the value converted.
    pub fn into_errors(self) -> ErrorList {
        self.0
    }

    /// The errors of a field named `field` (its JSON name) of the value converted.
    pub fn within(self, field: &str) -> Self {
        self.prefixed(field)
    }

    /// The errors of item `index` of a list.
    pub fn at_index(self, index: usize) -> Self {
        self.prefixed(&format!("[{index}]"))
    }

    /// The errors of the entry `key` of a map.
    pub fn at_key(self, key: &dyn fmt::Display) -> Self {
        self.prefixed(&format!("[{key}]"))
    }

    fn prefixed(self, parent: &str) -> Self {
        ConversionError(
            self.0
                .into_iter()
                .map(|mut error| {
                    error.field = join(parent, &error.field);
                    error
                })
                .collect(),
        )
    }
}

/// `spec` + `toppings[0]` → `spec.toppings[0]`; `toppings` + `[0].name` → `toppings[0].name`.
fn join(parent: &str, child: &str) -> String {
    if child.is_empty() {
        parent.to_string()
    } else if parent.is_empty() || child.starts_with('[') {
        format!("{parent}{child}")
    } else {
        format!("{parent}.{child}")
    }
}

impl fmt::Display for ConversionError {
    /// As upstream's aggregated field errors: `spec.quantity: Invalid value: "a dozen": ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.aggregate())
    }
}

impl std::error::Error for ConversionError {}

/// A field error whose path is relative to the value converted (for whole-struct conversions and defaults).
impl From<FieldError> for ConversionError {
    fn from(error: FieldError) -> Self {
        ConversionError(vec![error].into())
    }
}

/// Field errors whose paths are relative to the value converted.
impl From<ErrorList> for ConversionError {
    fn from(errors: ErrorList) -> Self {
        ConversionError(errors)
    }
}

/// What a conversion function or a default returns: the value itself (it cannot fail) or a `Result` whose error
/// becomes a [`ConversionError`]. So `fn(&A) -> B` and `fn(&A) -> Result<B, ConversionError>` both serve as
/// `to_hub`/`from_hub`, and `fn(&mut V)` and `fn(&mut V) -> Result<(), ConversionError>` as `default`.
pub trait ConversionResult<T> {
    /// The value, or why there is none.
    fn into_conversion(self) -> Result<T, ConversionError>;
}

impl<T> ConversionResult<T> for T {
    fn into_conversion(self) -> Result<T, ConversionError> {
        Ok(self)
    }
}

impl<T, E: Into<ConversionError>> ConversionResult<T> for Result<T, E> {
    fn into_conversion(self) -> Result<T, ConversionError> {
        self.map_err(Into::into)
    }
}

/// The result of a user's conversion function or default, fallible or not; the derive calls this.
pub fn conversion_result<T, R: ConversionResult<T>>(result: R) -> Result<T, ConversionError> {
    result.into_conversion()
}

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
    /// The value as `T`, or the field errors (paths relative to this value) that refuse it.
    fn convert(&self) -> Result<T, ConversionError>;
}

macro_rules! identity {
    ($($t:ty),* $(,)?) => {$(
        impl Convert<$t> for $t {
            fn convert(&self) -> Result<$t, ConversionError> {
                Ok(self.clone())
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
            fn convert(&self) -> Result<$t, ConversionError> {
                Ok(self.clone().unwrap_or_default())
            }
        }
        impl Convert<Option<$t>> for $t {
            fn convert(&self) -> Result<Option<$t>, ConversionError> {
                Ok(Some(self.clone()))
            }
        }
    )*};
}

optional_scalar!(String, bool, i32, i64, u32, u64, f32, f64);

impl<A: Convert<B>, B> Convert<Vec<B>> for Vec<A> {
    fn convert(&self) -> Result<Vec<B>, ConversionError> {
        self.iter()
            .enumerate()
            .map(|(i, item)| item.convert().map_err(|e| e.at_index(i)))
            .collect()
    }
}

impl<A: Convert<B>, B> Convert<Option<B>> for Option<A> {
    fn convert(&self) -> Result<Option<B>, ConversionError> {
        self.as_ref().map(Convert::convert).transpose()
    }
}

impl<A: Convert<B>, B> Convert<Box<B>> for Box<A> {
    fn convert(&self) -> Result<Box<B>, ConversionError> {
        Ok(Box::new(self.as_ref().convert()?))
    }
}

impl<K: Clone + Ord + fmt::Display, A: Convert<B>, B> Convert<BTreeMap<K, B>> for BTreeMap<K, A> {
    fn convert(&self) -> Result<BTreeMap<K, B>, ConversionError> {
        self.iter()
            .map(|(k, v)| Ok((k.clone(), v.convert().map_err(|e| e.at_key(k))?)))
            .collect()
    }
}

impl<K: Clone + Eq + Hash + fmt::Display, A: Convert<B>, B> Convert<HashMap<K, B>>
    for HashMap<K, A>
{
    fn convert(&self) -> Result<HashMap<K, B>, ConversionError> {
        self.iter()
            .map(|(k, v)| Ok((k.clone(), v.convert().map_err(|e| e.at_key(k))?)))
            .collect()
    }
}

/// Converts one field; the derive calls this so that a type mismatch is reported at the field.
pub fn convert_field<A: Convert<B>, B>(value: &A) -> Result<B, ConversionError> {
    value.convert()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Units(i64);

    /// A failing item of a list of a map names its place, as upstream's paths do.
    impl Convert<Units> for String {
        fn convert(&self) -> Result<Units, ConversionError> {
            self.parse()
                .map(Units)
                .map_err(|_| ConversionError::invalid(self, "must be a number"))
        }
    }

    #[test]
    fn paths_name_the_items_and_keys() {
        let mut map = BTreeMap::new();
        map.insert("a".to_string(), vec!["1".to_string(), "x".to_string()]);
        let err = convert_field::<_, BTreeMap<String, Vec<Units>>>(&map)
            .unwrap_err()
            .within("counts")
            .within("spec");
        assert_eq!(
            err.to_string(),
            "spec.counts[a][1]: Invalid value: \"x\": must be a number"
        );
        let ok = convert_field::<_, Vec<Units>>(&vec!["7".to_string()]).unwrap();
        assert_eq!(ok, vec![Units(7)]);
    }

    #[test]
    fn infallible_and_fallible_functions_both_convert() {
        fn plain(v: &i32) -> i64 {
            i64::from(*v)
        }
        fn refusing(_: &i32) -> Result<i64, FieldError> {
            Err(FieldError::invalid(Path::new("inner"), &1, "no"))
        }
        assert_eq!(conversion_result::<i64, _>(plain(&3)), Ok(3));
        let err = conversion_result::<i64, _>(refusing(&3))
            .unwrap_err()
            .within("outer");
        assert_eq!(err.to_string(), "outer.inner: Invalid value: 1: no");
        // A root's defaults have no parent: their paths are kept as given.
        let err = ConversionError::from(FieldError::required(Path::new("spec"), ""));
        assert_eq!(err.to_string(), "spec: Required value");
    }
}
