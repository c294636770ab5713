//! Selection predicates: label and field selectors evaluated on opaque stored bytes.
//!
//! Storage cannot decode values, so the layer above supplies an [`AttrsFn`] that reads an object's labels and
//! selectable fields from its bytes (upstream `SelectionPredicate.GetAttrs`). The watch cache may keep the
//! extracted [`Attrs`] next to the bytes so it never decodes twice.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::StorageError;
use super::fields::FieldSelector;
use super::labels::LabelSelector;

/// The labels and selectable fields of one object.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attrs {
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// Selectable fields, e.g. `metadata.name`, `metadata.namespace`, `spec.x`.
    pub fields: BTreeMap<String, String>,
}

/// Reads [`Attrs`] from stored bytes; supplied by the layer that knows the type.
pub type AttrsFn = Arc<dyn Fn(&[u8]) -> Result<Attrs, StorageError> + Send + Sync>;

/// Which objects a list or watch returns: a label selector and a field selector, both over attributes that
/// `attrs` extracts. The empty predicate ([`Predicate::everything`]) needs no extractor.
#[derive(Clone, Default)]
pub struct Predicate {
    /// The label selector.
    pub label: LabelSelector,
    /// The field selector.
    pub field: FieldSelector,
    /// The attribute extractor; required when either selector restricts anything.
    pub attrs: Option<AttrsFn>,
}

impl Predicate {
    /// Matches everything.
    pub fn everything() -> Self {
        Predicate::default()
    }

    /// A predicate over the given selectors and extractor.
    pub fn new(label: LabelSelector, field: FieldSelector, attrs: AttrsFn) -> Self {
        Predicate {
            label,
            field,
            attrs: Some(attrs),
        }
    }

    /// True when nothing is filtered (upstream `SelectionPredicate.Empty`): lists then report
    /// `remainingItemCount`.
    pub fn is_everything(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// Whether attributes satisfy both selectors.
    pub fn matches_attrs(&self, attrs: &Attrs) -> bool {
        self.label.matches(&attrs.labels) && self.field.matches(&attrs.fields)
    }

    /// Whether the object stored as `value` is selected. Fails when the extractor fails or is missing.
    pub fn matches(&self, value: &[u8]) -> Result<bool, StorageError> {
        if self.is_everything() {
            return Ok(true);
        }
        let attrs = self.attrs.as_ref().ok_or_else(|| {
            StorageError::Internal("predicate has selectors but no attribute extractor".into())
        })?;
        Ok(self.matches_attrs(&attrs(value)?))
    }
}

impl fmt::Debug for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Predicate")
            .field("label", &self.label.to_string())
            .field("field", &self.field.to_string())
            .field("attrs", &self.attrs.as_ref().map(|_| "<fn>"))
            .finish()
    }
}

impl fmt::Display for Predicate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "labels: {}, fields: {}", self.label, self.field)
    }
}
