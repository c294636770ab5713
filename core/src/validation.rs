//! Field errors, as upstream's `k8s.io/apimachinery/pkg/util/validation/field`: validation returns a list of
//! errors with field paths, which the registry turns into a 422 `Status` whose causes name each field.

use std::fmt;

/// A path to a field, rendered as upstream does: `spec.toppings[0].quantity`, `metadata.labels[app]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Path(String);

impl Path {
    /// A root field, e.g. `spec`.
    pub fn new(name: &str) -> Self {
        Path(name.to_string())
    }

    /// A named child field: `spec` → `spec.toppings`.
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Path(name.to_string())
        } else {
            Path(format!("{}.{name}", self.0))
        }
    }

    /// An element of a list: `spec.toppings` → `spec.toppings[0]`.
    pub fn index(&self, index: usize) -> Self {
        Path(format!("{}[{index}]", self.0))
    }

    /// An entry of a map: `metadata.labels` → `metadata.labels[app]`.
    pub fn key(&self, key: &str) -> Self {
        Path(format!("{}[{key}]", self.0))
    }

    /// The path as rendered, e.g. `spec.toppings[0]`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The kind of a field error; each has upstream's text and `StatusCause` reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// A referenced value does not exist (`FieldValueNotFound`).
    NotFound,
    /// A required value is missing or empty (`FieldValueRequired`).
    Required,
    /// A value that must be unique appears twice (`FieldValueDuplicate`).
    Duplicate,
    /// A value has the wrong format or range (`FieldValueInvalid`).
    Invalid,
    /// A value outside a fixed set of allowed values (`FieldValueNotSupported`).
    NotSupported,
    /// A value that may not be set here, whatever it is (`FieldValueForbidden`).
    Forbidden,
    /// A string or byte value longer than allowed (`FieldValueTooLong`).
    TooLong,
    /// A list with more items than allowed (`FieldValueTooMany`).
    TooMany,
    /// An error in the server, not in the request (`InternalError`).
    Internal,
    /// A value of the wrong type, e.g. a string where a number belongs (`FieldValueTypeInvalid`).
    TypeInvalid,
}

impl ErrorType {
    /// The `StatusCause.reason` (upstream's `ErrorType` string), e.g. `FieldValueInvalid`.
    pub fn reason(self) -> &'static str {
        match self {
            ErrorType::NotFound => "FieldValueNotFound",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
            ErrorType::Internal => "InternalError",
            ErrorType::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human text (upstream's `ErrorType.String()`).
    pub fn text(self) -> &'static str {
        match self {
            ErrorType::NotFound => "Not found",
            ErrorType::Required => "Required value",
            ErrorType::Duplicate => "Duplicate value",
            ErrorType::Invalid => "Invalid value",
            ErrorType::NotSupported => "Unsupported value",
            ErrorType::Forbidden => "Forbidden",
            ErrorType::TooLong => "Too long",
            ErrorType::TooMany => "Too many",
            ErrorType::Internal => "Internal error",
            ErrorType::TypeInvalid => "Invalid value",
        }
    }

    /// Whether the bad value is printed (upstream omits it for these types).
    fn shows_value(self) -> bool {
        !matches!(
            self,
            ErrorType::Required | ErrorType::Forbidden | ErrorType::TooLong | ErrorType::Internal
        )
    }
}

/// One invalid field: where, what kind of problem, the bad value (already rendered as upstream prints it), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// What is wrong with the field; gives the `StatusCause.reason`.
    pub kind: ErrorType,
    /// The field path, e.g. `spec.toppings[0].quantity`.
    pub field: String,
    /// The bad value as upstream renders it: strings quoted, numbers bare; empty when not shown.
    pub value: String,
    /// Why the value is wrong, in plain words; may be empty.
    pub detail: String,
}

/// Renders a value the way upstream's `%#v`-based formatting does for the common cases.
pub trait FieldValue {
    /// The value as upstream prints it in a field error: strings quoted, numbers and booleans bare.
    fn render(&self) -> String;
}

/// Strings are quoted as Go's `%q` does (`"a\x00"`), so control characters show as upstream shows them.
impl FieldValue for str {
    fn render(&self) -> String {
        apiserver_gotext::quote(self)
    }
}

impl FieldValue for String {
    fn render(&self) -> String {
        self.as_str().render()
    }
}

macro_rules! bare_value {
    ($($t:ty),*) => {$(
        impl FieldValue for $t {
            fn render(&self) -> String {
                self.to_string()
            }
        }
    )*};
}

bare_value!(i8, i16, i32, i64, u8, u16, u32, u64, usize, bool, f32, f64);

/// An optional value is a Go pointer: `null` when unset, else the value it points to.
impl<T: FieldValue> FieldValue for Option<T> {
    fn render(&self) -> String {
        self.as_ref()
            .map_or_else(|| "null".to_string(), |v| v.render())
    }
}

impl<T: FieldValue + ?Sized> FieldValue for &T {
    fn render(&self) -> String {
        (**self).render()
    }
}

impl FieldError {
    fn new(kind: ErrorType, field: &Path, value: String, detail: &str) -> Self {
        FieldError {
            kind,
            field: field.to_string(),
            value,
            detail: detail.to_string(),
        }
    }

    /// A value of the wrong format or range, with the reason in `detail`.
    pub fn invalid(field: Path, value: &(impl FieldValue + ?Sized), detail: &str) -> Self {
        Self::new(ErrorType::Invalid, &field, value.render(), detail)
    }

    /// A required value that is missing.
    pub fn required(field: Path, detail: &str) -> Self {
        Self::new(ErrorType::Required, &field, String::new(), detail)
    }

    /// A value that appears more than once where it must be unique.
    pub fn duplicate(field: Path, value: &(impl FieldValue + ?Sized)) -> Self {
        Self::new(ErrorType::Duplicate, &field, value.render(), "")
    }

    /// A referenced value that does not exist.
    pub fn not_found(field: Path, value: &(impl FieldValue + ?Sized)) -> Self {
        Self::new(ErrorType::NotFound, &field, value.render(), "")
    }

    /// A value outside a fixed set; the detail lists the supported values as upstream does.
    pub fn not_supported(
        field: Path,
        value: &(impl FieldValue + ?Sized),
        supported: &[&str],
    ) -> Self {
        let detail = if supported.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(ErrorType::NotSupported, &field, value.render(), &detail)
    }

    /// A field that may not be set here; `detail` says why.
    pub fn forbidden(field: Path, detail: &str) -> Self {
        Self::new(ErrorType::Forbidden, &field, String::new(), detail)
    }

    /// A value longer than `max` bytes.
    pub fn too_long(field: Path, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            ErrorType::TooLong,
            &field,
            String::new(),
            &format!("may not be more than {max} {unit}"),
        )
    }

    /// A list of `actual` items where at most `max` are allowed.
    pub fn too_many(field: Path, actual: usize, max: usize) -> Self {
        Self::new(
            ErrorType::TooMany,
            &field,
            actual.to_string(),
            &format!("must have at most {max} items"),
        )
    }

    /// A failure of the server itself while validating this field.
    pub fn internal(field: Path, detail: &str) -> Self {
        Self::new(ErrorType::Internal, &field, String::new(), detail)
    }

    /// The message without the field (upstream `ErrorBody`), used as `StatusCause.message`:
    /// `Invalid value: 0: cannot be negative or zero`.
    pub fn body(&self) -> String {
        let mut text = self.kind.text().to_string();
        if self.kind.shows_value() && !self.value.is_empty() {
            text.push_str(": ");
            text.push_str(&self.value);
        }
        if !self.detail.is_empty() {
            text.push_str(": ");
            text.push_str(&self.detail);
        }
        text
    }
}

impl fmt::Display for FieldError {
    /// `spec.toppings[0].quantity: Invalid value: 0: cannot be negative or zero`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.body())
        } else {
            write!(f, "{}: {}", self.field, self.body())
        }
    }
}

impl std::error::Error for FieldError {}

/// The errors of one validation, in the order found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorList(Vec<FieldError>);

impl ErrorList {
    /// An empty list: validation passed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one error at the end.
    pub fn push(&mut self, error: FieldError) {
        self.0.push(error);
    }

    /// Appends the errors of another validation, keeping their order.
    pub fn extend(&mut self, other: ErrorList) {
        self.0.extend(other.0);
    }

    /// Whether validation found nothing wrong.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of errors.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The errors in the order found.
    pub fn iter(&self) -> std::slice::Iter<'_, FieldError> {
        self.0.iter()
    }

    /// The errors as one message, as upstream's `ToAggregate().Error()`: one error alone, several as
    /// `[a, b]`, duplicates removed.
    pub fn aggregate(&self) -> String {
        let mut seen = std::collections::HashSet::new();
        let messages: Vec<String> = self
            .0
            .iter()
            .map(ToString::to_string)
            .filter(|m| seen.insert(m.clone()))
            .collect();
        match messages.as_slice() {
            [one] => one.clone(),
            _ => format!("[{}]", messages.join(", ")),
        }
    }

    /// The first `max` errors, and how many were left out: a request with thousands of bad fields gets a bounded
    /// answer (upstream has no such bound; its answer would grow with the input).
    pub fn truncated(&self, max: usize) -> (ErrorList, usize) {
        let kept = ErrorList(self.0.iter().take(max).cloned().collect());
        (kept, self.0.len().saturating_sub(max))
    }
}

impl From<Vec<FieldError>> for ErrorList {
    fn from(errors: Vec<FieldError>) -> Self {
        ErrorList(errors)
    }
}

impl IntoIterator for ErrorList {
    type Item = FieldError;
    type IntoIter = std::vec::IntoIter<FieldError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a ErrorList {
    type Item = &'a FieldError;
    type IntoIter = std::slice::Iter<'a, FieldError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl FromIterator<FieldError> for ErrorList {
    fn from_iter<I: IntoIterator<Item = FieldError>>(iter: I) -> Self {
        ErrorList(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_match_upstream() {
        let path = Path::new("spec").child("toppings").index(0);
        let e = FieldError::invalid(path.child("quantity"), &0, "cannot be negative or zero");
        assert_eq!(
            e.to_string(),
            "spec.toppings[0].quantity: Invalid value: 0: cannot be negative or zero"
        );
        assert_eq!(e.body(), "Invalid value: 0: cannot be negative or zero");
        assert_eq!(e.kind.reason(), "FieldValueInvalid");
        let e = FieldError::invalid(path.child("name"), "", "cannot be empty");
        assert_eq!(
            e.to_string(),
            "spec.toppings[0].name: Invalid value: \"\": cannot be empty"
        );
        assert_eq!(
            FieldError::required(
                Path::new("metadata").child("name"),
                "name or generateName is required"
            )
            .to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
        assert_eq!(
            FieldError::required(Path::new("metadata").child("namespace"), "").to_string(),
            "metadata.namespace: Required value"
        );
        assert_eq!(
            FieldError::duplicate(Path::new("spec").child("names").index(1), "a").to_string(),
            "spec.names[1]: Duplicate value: \"a\""
        );
        assert_eq!(
            FieldError::not_supported(Path::new("spec").child("mode"), "x", &["A", "B"])
                .to_string(),
            "spec.mode: Unsupported value: \"x\": supported values: \"A\", \"B\""
        );
        assert_eq!(
            FieldError::forbidden(
                Path::new("metadata").child("namespace"),
                "not allowed on this type"
            )
            .to_string(),
            "metadata.namespace: Forbidden: not allowed on this type"
        );
        assert_eq!(
            Path::new("metadata").child("labels").key("app").to_string(),
            "metadata.labels[app]"
        );
    }

    #[test]
    fn truncation_keeps_the_first_errors() {
        let many: ErrorList = (0..1000)
            .map(|i| FieldError::required(Path::new("a").index(i), ""))
            .collect();
        let (kept, left_out) = many.truncated(100);
        assert_eq!((kept.len(), left_out), (100, 900));
        assert_eq!(kept.iter().last().unwrap().field, "a[99]");
        assert_eq!(many.truncated(5000).1, 0);
    }

    #[test]
    fn aggregate_formats_one_or_many() {
        let one: ErrorList = vec![FieldError::required(Path::new("a"), "")].into();
        assert_eq!(one.aggregate(), "a: Required value");
        let two: ErrorList = vec![
            FieldError::required(Path::new("a"), ""),
            FieldError::required(Path::new("b"), ""),
        ]
        .into();
        assert_eq!(two.aggregate(), "[a: Required value, b: Required value]");
    }
}
