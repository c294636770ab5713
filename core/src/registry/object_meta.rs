//! What the store does to `metadata` on every write, for every type: wiping and filling system fields, generated
//! names, and upstream's ObjectMeta validation (`apimachinery/pkg/api/validation/objectmeta.go`).

use crate::codec::json::split_group_version;
use crate::meta::{ManagedFieldsEntry, ObjectMeta, OwnerReference, Time};
use crate::storage::labels::{
    dns1123_label_errors, dns1123_subdomain_errors, label_value_errors, qualified_name_errors,
};
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

/// Upstream's `TotalAnnotationSizeLimitB`.
const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;
/// Upstream's `FieldManagerMaxLength`.
pub const MAX_FIELD_MANAGER_LENGTH: usize = 128;
/// Upstream's `MaxSubresourceNameLength`.
const MAX_SUBRESOURCE_NAME_LENGTH: usize = 256;

/// Upstream `NameIsDNSSubdomain`: names are lowercase RFC 1123 subdomains. A `generateName` prefix may end in
/// `-` (upstream's `maskTrailingDash`, which also drops the character before it).
fn name_errors(name: &str, prefix: bool) -> Vec<String> {
    if prefix && name.len() > 1 && name.ends_with('-') {
        let mut masked = name.as_bytes()[..name.len() - 2].to_vec();
        masked.push(b'a');
        return dns1123_subdomain_errors(&String::from_utf8_lossy(&masked));
    }
    dns1123_subdomain_errors(name)
}

/// Checks metadata of a new object as upstream's `ValidateObjectMeta` with `NameIsDNSSubdomain`: name (or
/// generateName), namespace by scope, generation, labels, annotations, owner references, finalizers, managed
/// fields.
pub fn validate_object_meta(meta: &ObjectMeta, namespaced: bool) -> ErrorList {
    let path = Path::new("metadata");
    let mut errors = ErrorList::default();
    if !meta.generate_name.is_empty() {
        for msg in name_errors(&meta.generate_name, true) {
            errors.push(FieldError::invalid(
                path.child("generateName"),
                &meta.generate_name,
                &msg,
            ));
        }
    }
    if meta.name.is_empty() {
        errors.push(FieldError::required(
            path.child("name"),
            "name or generateName is required",
        ));
    } else {
        for msg in name_errors(&meta.name, false) {
            errors.push(FieldError::invalid(path.child("name"), &meta.name, &msg));
        }
    }
    if namespaced {
        if meta.namespace.is_empty() {
            errors.push(FieldError::required(path.child("namespace"), ""));
        } else {
            for msg in dns1123_label_errors(&meta.namespace) {
                errors.push(FieldError::invalid(
                    path.child("namespace"),
                    &meta.namespace,
                    &msg,
                ));
            }
        }
    } else if !meta.namespace.is_empty() {
        errors.push(FieldError::forbidden(
            path.child("namespace"),
            "not allowed on this type",
        ));
    }
    errors.extend(validate_mutable_meta(meta));
    errors
}

/// What both create and update check: generation, labels, annotations, owner references, finalizers, managed
/// fields.
fn validate_mutable_meta(meta: &ObjectMeta) -> ErrorList {
    let path = Path::new("metadata");
    let mut errors = ErrorList::default();
    if meta.generation < 0 {
        errors.push(FieldError::invalid(
            path.child("generation"),
            &meta.generation,
            "must be greater than or equal to 0",
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
        for msg in qualified_name_errors(&key.to_lowercase()) {
            errors.push(FieldError::invalid(path.child("annotations"), key, &msg));
        }
    }
    let annotations_size: usize = meta
        .annotations
        .iter()
        .map(|(k, v)| k.len() + v.len())
        .sum();
    if annotations_size > MAX_ANNOTATIONS_BYTES {
        errors.push(FieldError::too_long(
            path.child("annotations"),
            MAX_ANNOTATIONS_BYTES,
        ));
    }
    errors.extend(validate_owner_references(
        &meta.owner_references,
        &path.child("ownerReferences"),
    ));
    errors.extend(validate_finalizers(
        &meta.finalizers,
        &path.child("finalizers"),
    ));
    errors.extend(validate_managed_fields(
        &meta.managed_fields,
        &path.child("managedFields"),
    ));
    errors
}

/// Upstream `ValidateOwnerReferences`: apiVersion, kind, name and uid are required, and at most one reference is
/// the controller.
fn validate_owner_references(references: &[OwnerReference], path: &Path) -> ErrorList {
    let mut errors = ErrorList::default();
    let mut controller: Option<String> = None;
    for (i, reference) in references.iter().enumerate() {
        let path = path.index(i);
        if reference.api_version.is_empty() {
            errors.push(FieldError::required(
                path.child("apiVersion"),
                "must not be empty",
            ));
        } else if !matches!(split_group_version(&reference.api_version), Ok((_, version)) if !version.is_empty())
        {
            errors.push(FieldError::invalid(
                path.child("apiVersion"),
                &reference.api_version,
                "must be <group>/<version> or <version>",
            ));
        }
        for (field, value) in [
            ("kind", &reference.kind),
            ("name", &reference.name),
            ("uid", &reference.uid),
        ] {
            if value.is_empty() {
                errors.push(FieldError::required(path.child(field), "must not be empty"));
            }
        }
        if reference.controller == Some(true) {
            let current = format!("{}/{}", reference.kind, reference.name);
            match &controller {
                Some(first) => errors.push(FieldError::invalid(
                    path_without_index(&path),
                    "",
                    &format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => controller = Some(current),
            }
        }
    }
    errors
}

/// `metadata.ownerReferences[2]` → `metadata.ownerReferences`: upstream reports a second controller on the list.
fn path_without_index(path: &Path) -> Path {
    let text = path.as_str();
    Path::new(text.rsplit_once('[').map_or(text, |(list, _)| list))
}

/// Upstream `ValidateFinalizers`: each a qualified name, and not both `orphan` and `foregroundDeletion`.
fn validate_finalizers(finalizers: &[String], path: &Path) -> ErrorList {
    let mut errors = ErrorList::default();
    for finalizer in finalizers {
        for msg in qualified_name_errors(finalizer) {
            errors.push(FieldError::invalid(path.clone(), finalizer, &msg));
        }
    }
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has("orphan") && has("foregroundDeletion") {
        errors.push(FieldError::invalid(
            path.clone(),
            "",
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    errors
}

/// Upstream `ValidateManagedFields`: a known operation and fields type, a valid manager, a short subresource.
fn validate_managed_fields(entries: &[ManagedFieldsEntry], path: &Path) -> ErrorList {
    let mut errors = ErrorList::default();
    for (i, entry) in entries.iter().enumerate() {
        let path = path.index(i);
        match entry.operation.as_str() {
            "" => errors.push(FieldError::required(
                path.child("operation"),
                "must not be empty",
            )),
            "Apply" | "Update" => {}
            other => errors.push(FieldError::not_supported(
                path.child("operation"),
                other,
                &["Apply", "Update"],
            )),
        }
        if !entry.fields_type.is_empty() && entry.fields_type != "FieldsV1" {
            errors.push(FieldError::invalid(
                path.child("fieldsType"),
                &entry.fields_type,
                "must be `FieldsV1`",
            ));
        }
        errors.extend(validate_field_manager(
            &entry.manager,
            &path.child("manager"),
        ));
        if entry.subresource.len() > MAX_SUBRESOURCE_NAME_LENGTH {
            errors.push(FieldError::too_long(
                path.child("subresource"),
                MAX_SUBRESOURCE_NAME_LENGTH,
            ));
        }
    }
    errors
}

/// Upstream `ValidateFieldManager`: at most 128 bytes, printable characters only.
pub fn validate_field_manager(manager: &str, path: &Path) -> ErrorList {
    let mut errors = ErrorList::default();
    if manager.len() > MAX_FIELD_MANAGER_LENGTH {
        errors.push(FieldError::too_long(path.clone(), MAX_FIELD_MANAGER_LENGTH));
    }
    for (position, c) in manager.char_indices() {
        if !apiserver_gotext::is_print(c) {
            errors.push(FieldError::invalid(
                path.clone(),
                manager,
                &format!(
                    "invalid character {} (at position {position})",
                    go_unicode(c)
                ),
            ));
        }
    }
    errors
}

/// Go's `%#U`: `U+0001` for an unprintable character, `U+0041 'A'` for a printable one.
fn go_unicode(c: char) -> String {
    if apiserver_gotext::is_print(c) {
        format!("U+{:04X} '{c}'", c as u32)
    } else {
        format!("U+{:04X}", c as u32)
    }
}

/// Checks an update as upstream's `ValidateObjectMetaUpdate`: what may not change, and the metadata that may
/// (labels, annotations, owner references, finalizers, managed fields). Name and namespace are immutable, so
/// their format is not checked again: objects stored under older rules keep updating.
pub fn validate_object_meta_update(
    new: &ObjectMeta,
    old: &ObjectMeta,
    namespaced: bool,
) -> ErrorList {
    let path = Path::new("metadata");
    let mut errors = ErrorList::default();
    if old.deletion_timestamp.is_some() {
        errors.extend(validate_no_new_finalizers(
            &new.finalizers,
            &old.finalizers,
            path.child("finalizers"),
        ));
    }
    if !namespaced && !new.namespace.is_empty() {
        errors.push(FieldError::forbidden(
            path.child("namespace"),
            "not allowed on this type",
        ));
    }
    // Upstream checks generateName on create only; a changed one is checked here too, so that an update cannot
    // store what a create would refuse (and an old object keeps updating).
    if !new.generate_name.is_empty() && new.generate_name != old.generate_name {
        for msg in name_errors(&new.generate_name, true) {
            errors.push(FieldError::invalid(
                path.child("generateName"),
                &new.generate_name,
                &msg,
            ));
        }
    }
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
    if new.deletion_timestamp != old.deletion_timestamp {
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
    if new.deletion_grace_period_seconds != old.deletion_grace_period_seconds {
        errors.push(FieldError::invalid(
            path.child("deletionGracePeriodSeconds"),
            &new.deletion_grace_period_seconds,
            "field is immutable",
        ));
    }
    errors.extend(validate_mutable_meta(new));
    errors
}

/// Upstream `ValidateNoNewFinalizers`: once an object is being deleted, finalizers may only be removed.
fn validate_no_new_finalizers(new: &[String], old: &[String], path: Path) -> ErrorList {
    let mut extra: Vec<&String> = new.iter().filter(|f| !old.contains(f)).collect();
    extra.sort();
    extra.dedup();
    let mut errors = ErrorList::default();
    if !extra.is_empty() {
        // Go's `%#v` of a []string.
        let listed: Vec<String> = extra.iter().map(|f| format!("{f:?}")).collect();
        errors.push(FieldError::forbidden(
            path,
            &format!(
                "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                listed.join(", ")
            ),
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
            text.contains("metadata.name: Invalid value: \"a/b\": a lowercase RFC 1123 subdomain must consist of"),
            "{text}"
        );
    }

    fn errors_of(meta: ObjectMeta) -> Vec<String> {
        validate_object_meta(&meta, true)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    fn valid() -> ObjectMeta {
        ObjectMeta {
            name: "a".into(),
            namespace: "default".into(),
            ..ObjectMeta::default()
        }
    }

    /// Probe findings D1 (namespaces), D4 (names), C6 (generateName): upstream's name rules and texts.
    #[test]
    fn names_namespaces_and_generated_names() {
        assert!(errors_of(valid()).is_empty());
        let label = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
        for (namespace, want) in [
            (
                "UPPER",
                format!("metadata.namespace: Invalid value: \"UPPER\": {label}"),
            ),
            (
                "a_b",
                format!("metadata.namespace: Invalid value: \"a_b\": {label}"),
            ),
            (
                "a.b",
                "metadata.namespace: Invalid value: \"a.b\": must not contain dots".to_string(),
            ),
        ] {
            let errors = errors_of(ObjectMeta {
                namespace: namespace.into(),
                ..valid()
            });
            assert_eq!(errors, vec![want]);
        }
        let long = "n".repeat(64);
        let errors = errors_of(ObjectMeta {
            namespace: long.clone(),
            ..valid()
        });
        assert_eq!(
            errors,
            vec![format!(
                "metadata.namespace: Invalid value: \"{long}\": must be no more than 63 characters"
            )]
        );
        let errors = errors_of(ObjectMeta {
            name: "a\0".into(),
            ..valid()
        });
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0].starts_with(
                "metadata.name: Invalid value: \"a\\x00\": a lowercase RFC 1123 subdomain"
            ),
            "{errors:?}"
        );
        // A prefix may end in a dash; a huge one is refused.
        let generated = |prefix: &str| {
            errors_of(ObjectMeta {
                name: String::new(),
                generate_name: prefix.into(),
                ..valid()
            })
        };
        assert_eq!(
            generated("pizza-"),
            vec!["metadata.name: Required value: name or generateName is required"]
        );
        let errors = generated(&"x".repeat(300));
        assert!(
            errors
                .iter()
                .any(|e| e.starts_with("metadata.generateName: Invalid value:")
                    && e.ends_with("must be no more than 253 characters")),
            "{errors:?}"
        );
        assert!(
            generated("Bad_")
                .iter()
                .any(|e| e.starts_with("metadata.generateName: Invalid value: \"Bad_\""))
        );
    }

    /// Probe finding D2: finalizers, owner references and managed fields are validated as upstream.
    #[test]
    fn finalizers_owner_references_and_managed_fields() {
        let errors = errors_of(ObjectMeta {
            finalizers: vec!["Bad Name!".into(), "example.com/ok".into()],
            ..valid()
        });
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].starts_with(
                "metadata.finalizers: Invalid value: \"Bad Name!\": name part must consist of"
            ),
            "{errors:?}"
        );
        let errors = errors_of(ObjectMeta {
            owner_references: vec![OwnerReference::default()],
            ..valid()
        });
        assert_eq!(
            errors,
            vec![
                "metadata.ownerReferences[0].apiVersion: Required value: must not be empty",
                "metadata.ownerReferences[0].kind: Required value: must not be empty",
                "metadata.ownerReferences[0].name: Required value: must not be empty",
                "metadata.ownerReferences[0].uid: Required value: must not be empty",
            ]
        );
        let owner = |name: &str| OwnerReference {
            api_version: "a/b/c".into(),
            kind: "K".into(),
            name: name.into(),
            uid: "u".into(),
            controller: Some(true),
            ..OwnerReference::default()
        };
        let errors = errors_of(ObjectMeta {
            owner_references: vec![owner("x"), owner("y")],
            ..valid()
        });
        assert!(errors.contains(&"metadata.ownerReferences[0].apiVersion: Invalid value: \"a/b/c\": must be <group>/<version> or <version>".to_string()), "{errors:?}");
        assert!(errors.contains(&"metadata.ownerReferences: Invalid value: \"\": Only one reference can have Controller set to true. Found \"true\" in references for K/x and K/y".to_string()), "{errors:?}");
        let errors = errors_of(ObjectMeta {
            managed_fields: vec![
                ManagedFieldsEntry {
                    manager: "kubectl".into(),
                    operation: "Frobnicate".into(),
                    fields_type: "FieldsV2".into(),
                    ..ManagedFieldsEntry::default()
                },
                ManagedFieldsEntry {
                    manager: "a\u{1}".into(),
                    ..ManagedFieldsEntry::default()
                },
            ],
            ..valid()
        });
        assert_eq!(
            errors,
            vec![
                "metadata.managedFields[0].operation: Unsupported value: \"Frobnicate\": supported values: \"Apply\", \"Update\"",
                "metadata.managedFields[0].fieldsType: Invalid value: \"FieldsV2\": must be `FieldsV1`",
                "metadata.managedFields[1].operation: Required value: must not be empty",
                "metadata.managedFields[1].manager: Invalid value: \"a\\x01\": invalid character U+0001 (at position 1)",
            ]
        );
    }

    #[test]
    fn updates_check_a_changed_generate_name() {
        let old = ObjectMeta {
            generate_name: "Old-".into(),
            ..valid()
        };
        assert!(validate_object_meta_update(&old, &old, true).is_empty());
        let new = ObjectMeta {
            generate_name: "x".repeat(300),
            ..old.clone()
        };
        let text = validate_object_meta_update(&new, &old, true).aggregate();
        assert!(
            text.contains("must be no more than 253 characters"),
            "{text}"
        );
        let new = ObjectMeta {
            finalizers: vec!["Bad Name!".into()],
            ..old.clone()
        };
        assert_eq!(validate_object_meta_update(&new, &old, true).len(), 1);
    }

    /// Probe finding D3: upstream's fieldManager rules.
    #[test]
    fn field_managers() {
        let path = Path::new("fieldManager");
        assert!(validate_field_manager("kubectl-client-side-apply", &path).is_empty());
        assert_eq!(
            validate_field_manager(&"f".repeat(200), &path).aggregate(),
            "fieldManager: Too long: may not be more than 128 bytes"
        );
        assert_eq!(
            validate_field_manager("a\tb", &path).aggregate(),
            "fieldManager: Invalid value: \"a\\tb\": invalid character U+0009 (at position 1)"
        );
    }
}
