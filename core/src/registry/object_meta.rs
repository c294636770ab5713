//! What the store does to `metadata` on every write, for every type: wiping and filling system fields, generated
//! names, and upstream's ObjectMeta validation (`apimachinery/pkg/api/validation/objectmeta.go`).

use crate::meta::{ObjectMeta, Time};
use crate::storage::keys::path_segment_name_errors;
use crate::storage::labels::{label_value_errors, qualified_name_errors};
use crate::validation::{ErrorList, FieldError, Path};

/// Upstream's `maxNameGenerationCreateAttempts`.
pub const MAX_NAME_GENERATION_ATTEMPTS: usize = 8;

/// Fields a client may not set on create (upstream `WipeObjectMetaSystemFields`).
pub fn wipe_system_fields(meta: &mut ObjectMeta) {
    meta.creation_timestamp = None;
    meta.uid.clear();
    meta.deletion_timestamp = None;
    meta.deletion_grace_period_seconds = None;
    meta.self_link.clear();
}

/// Sets what the server assigns on create (upstream `FillObjectMetaSystemFields`).
pub fn fill_system_fields(meta: &mut ObjectMeta) {
    meta.creation_timestamp = Some(Time::now());
    meta.uid = uuid::Uuid::new_v4().to_string();
}

/// A name from `generateName` (upstream `SimpleNameGenerator`): the base cut to 58 characters plus 5 random
/// characters from an alphabet without vowels (so no words) or look-alike characters.
pub fn generate_name(base: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const MAX_BASE: usize = 63 - 5;
    let cut: String = base.chars().take(MAX_BASE).collect();
    let random = uuid::Uuid::new_v4();
    let suffix: String = random.as_bytes()[..5]
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect();
    format!("{cut}{suffix}")
}

/// Checks metadata of a new object: name (or generateName), namespace presence by scope, labels, annotations.
pub fn validate_object_meta(meta: &ObjectMeta, namespaced: bool) -> ErrorList {
    let path = Path::new("metadata");
    let mut errors = ErrorList::default();
    if meta.name.is_empty() && meta.generate_name.is_empty() {
        errors.push(FieldError::required(
            path.child("name"),
            "name or generateName is required",
        ));
    }
    if !meta.name.is_empty() {
        for msg in path_segment_name_errors(&meta.name) {
            errors.push(FieldError::invalid(path.child("name"), &meta.name, &msg));
        }
    }
    if !meta.generate_name.is_empty() {
        for msg in path_segment_name_errors(&meta.generate_name) {
            errors.push(FieldError::invalid(
                path.child("generateName"),
                &meta.generate_name,
                &msg,
            ));
        }
    }
    if namespaced {
        if meta.namespace.is_empty() {
            errors.push(FieldError::required(path.child("namespace"), ""));
        }
    } else if !meta.namespace.is_empty() {
        errors.push(FieldError::forbidden(
            path.child("namespace"),
            "not allowed on this type",
        ));
    }
    for (key, value) in &meta.labels {
        for msg in qualified_name_errors(key) {
            errors.push(FieldError::invalid(path.child("labels"), key, &msg));
        }
        for msg in label_value_errors(value) {
            errors.push(FieldError::invalid(path.child("labels"), value, &msg));
        }
    }
    for key in meta.annotations.keys() {
        for msg in qualified_name_errors(key) {
            errors.push(FieldError::invalid(path.child("annotations"), key, &msg));
        }
    }
    let annotations_size: usize = meta
        .annotations
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    if annotations_size > 256 * 1024 {
        errors.push(FieldError::too_long(path.child("annotations"), 256 * 1024));
    }
    errors
}

/// Checks what an update may not change (upstream `ValidateObjectMetaUpdate`) plus the new metadata itself.
pub fn validate_object_meta_update(
    new: &ObjectMeta,
    old: &ObjectMeta,
    namespaced: bool,
) -> ErrorList {
    let path = Path::new("metadata");
    let mut errors = validate_object_meta(new, namespaced);
    let immutable = |field: &str, new: &str, old: &str, errors: &mut ErrorList| {
        if new != old {
            errors.push(FieldError::invalid(
                path.child(field),
                new,
                "field is immutable",
            ));
        }
    };
    immutable("name", &new.name, &old.name, &mut errors);
    immutable("namespace", &new.namespace, &old.namespace, &mut errors);
    immutable("uid", &new.uid, &old.uid, &mut errors);
    if new.creation_timestamp != old.creation_timestamp {
        let shown = new
            .creation_timestamp
            .map(|t| t.to_rfc3339())
            .unwrap_or_default();
        errors.push(FieldError::invalid(
            path.child("creationTimestamp"),
            &shown,
            "field is immutable",
        ));
    }
    if old.deletion_timestamp.is_some() && new.deletion_timestamp != old.deletion_timestamp {
        let shown = new
            .deletion_timestamp
            .map(|t| t.to_rfc3339())
            .unwrap_or_default();
        errors.push(FieldError::invalid(
            path.child("deletionTimestamp"),
            &shown,
            "field is immutable; may only be changed via deletion",
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names() {
        let name = generate_name("pizza-");
        assert_eq!(name.len(), "pizza-".len() + 5);
        assert!(name.starts_with("pizza-"));
        assert_eq!(generate_name(&"x".repeat(100)).len(), 63);
    }

    #[test]
    fn meta_validation() {
        let meta = ObjectMeta::default();
        let errors = validate_object_meta(&meta, true);
        let text = errors.aggregate().to_string();
        assert!(
            text.contains("metadata.name: Required value: name or generateName is required"),
            "{text}"
        );
        assert!(
            text.contains("metadata.namespace: Required value"),
            "{text}"
        );
        let meta = ObjectMeta {
            name: "a/b".into(),
            ..ObjectMeta::default()
        };
        let text = validate_object_meta(&meta, false).aggregate().to_string();
        assert!(
            text.contains("metadata.name: Invalid value: \"a/b\": may not contain '/'"),
            "{text}"
        );
    }
}
