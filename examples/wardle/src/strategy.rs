//! How the generic store treats flunders: validated with upstream's rules and messages. Fischers have no rules
//! beyond object metadata, as upstream: their strategy is the framework's `DefaultStrategy`.

use apiserver::meta::validate_conditions;
use apiserver::registry::Strategy;
use apiserver::validation::{ErrorList, FieldError, Path};

use crate::wardle::{FISCHER_REFERENCE, FLUNDER_REFERENCE, Flunder, FlunderSpec};

/// Flunders are validated on create and, unlike upstream (which validates only creates), on update too (the
/// strategy's default `validate_update`).
pub struct FlunderStrategy;

impl Strategy<Flunder> for FlunderStrategy {
    fn validate(&self, flunder: &Flunder) -> ErrorList {
        let mut errors = validate_flunder_spec(&flunder.spec, &Path::new("spec"));
        let conditions = Path::new("status").child("conditions");
        errors.extend(validate_conditions(&flunder.status.conditions, &conditions));
        errors
    }
}

const FLUNDER: &str = "flunderReference";
const FISCHER: &str = "fischerReference";

/// At most one reference, the one its type names; the type is empty, "Flunder" or "Fischer". Upstream's checks,
/// in upstream's order, with its messages.
pub fn validate_flunder_spec(spec: &FlunderSpec, path: &Path) -> ErrorList {
    let (flunder, fischer) = (&spec.flunder_reference, &spec.fischer_reference);
    let kind = spec.reference_type.as_str();
    let both = "cannot be set with flunderReference at the same time";
    let first = if !flunder.is_empty() && !fischer.is_empty() {
        Some((FISCHER, both))
    } else if !flunder.is_empty() && kind != FLUNDER_REFERENCE {
        Some((FLUNDER, "cannot be set if referenceType is not Flunder"))
    } else if !fischer.is_empty() && kind != FISCHER_REFERENCE {
        Some((FISCHER, "cannot be set if referenceType is not Fischer"))
    } else if fischer.is_empty() && kind == FISCHER_REFERENCE {
        Some((FISCHER, "cannot be empty if referenceType is Fischer"))
    } else if flunder.is_empty() && kind == FLUNDER_REFERENCE {
        Some((FLUNDER, "cannot be empty if referenceType is Flunder"))
    } else {
        None
    };
    let mut errors = ErrorList::new();
    if let Some((field, detail)) = first {
        let value = if field == FLUNDER { flunder } else { fischer };
        errors.push(FieldError::invalid(path.child(field), value, detail));
    }
    if !kind.is_empty() && kind != FLUNDER_REFERENCE && kind != FISCHER_REFERENCE {
        let (field, detail) = (path.child("referenceType"), "must be Flunder or Fischer");
        errors.push(FieldError::invalid(field, kind, detail));
    }
    errors
}
