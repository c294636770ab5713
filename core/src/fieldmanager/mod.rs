//! Field management (server-side apply): `metadata.managedFields` kept for every write, and apply
//! (`application/apply-patch+yaml`), as k8s.io/apimachinery's `managedfields` and structured-merge-diff do it.
//!
//! Works on the JSON form of objects in the request's version, under the OpenAPI schema the server publishes for
//! that version (`x-kubernetes-list-type` and friends). The steps of upstream's field manager, in its order:
//! version check, last-applied annotation, tracking of objects that had no managed fields, the cap of ten update
//! managers (older ones fold into `ancient-changes`), the manager's identity, its time, and stripping metadata
//! that nobody owns (`metadata.name`, `uid`, ...).

mod path;
mod schema;
mod set;
mod typed;
mod updater;

use std::collections::BTreeMap;

use serde_json::Value;

pub use path::{Path, PathElement};
pub use schema::{Atom, ListKind, TypeRef};
pub use set::Set;
pub use typed::merge;
pub use updater::{ManagedFields, Manager, UpdateError, Versions};

use crate::meta::{FieldsV1, ManagedFieldsEntry, Time};
use updater::{Updater, Versioned, VersionedSet};

/// At most this many update managers are kept (upstream's `DefaultMaxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;
const ANCIENT_CHANGES: &str = "ancient-changes";
const BEFORE_FIRST_APPLY: &str = "before-first-apply";
const CURRENT_OPERATION: &str = "current-operation";
/// kubectl's client-side apply annotation, kept current when `kubectl` applies server-side.
pub const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Fields nobody owns: identity and system fields of `metadata`, `apiVersion` and `kind`.
fn stripped() -> &'static Set {
    static STRIPPED: std::sync::LazyLock<Set> = std::sync::LazyLock::new(stripped_fields);
    &STRIPPED
}

fn stripped_fields() -> Set {
    let f = |name: &str| PathElement::Field(name.into());
    let mut paths = vec![vec![f("apiVersion")], vec![f("kind")], vec![f("metadata")]];
    for name in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        paths.push(vec![f("metadata"), f(name)]);
    }
    Set::of(&paths)
}

/// The fields a write through an endpoint never takes ownership of (upstream's reset fields of its strategy).
#[derive(Clone, Debug, Default)]
pub struct ResetFields(pub Set);

impl ResetFields {
    /// `status` for the main resource of a type with a status subresource, `spec` for the subresource.
    pub fn for_endpoint(has_status_subresource: bool, is_status: bool) -> ResetFields {
        let field = match (has_status_subresource, is_status) {
            (_, true) => "spec",
            (true, false) => "status",
            (false, false) => return ResetFields::default(),
        };
        ResetFields(Set::of(&[vec![PathElement::Field(field.into())]]))
    }
}

/// Managed fields and their times, by manager.
#[derive(Clone, Debug, Default)]
struct Managed {
    fields: ManagedFields,
    times: BTreeMap<Manager, Option<Time>>,
}

/// Why an apply failed.
#[derive(Debug)]
pub enum ApplyError {
    /// A 400 with this text.
    BadRequest(String),
    /// Fields other managers own: the message and, per field, the manager as upstream prints it and the path.
    Conflicts {
        /// The 409 message, e.g. `Apply failed with 1 conflict: conflict with "kubectl": .spec.size`.
        message: String,
        /// One `StatusCause` per field: `conflict with <manager>` and the field's path.
        causes: Vec<(String, String)>,
    },
    /// A 500 with this text.
    Internal(String),
}

/// The outcome of an apply: the new object (`None` when it equals the live one) and its managed fields.
#[derive(Debug)]
pub struct Applied {
    /// The object to write, or `None` when the apply changes nothing.
    pub object: Option<Value>,
    /// The new `metadata.managedFields`.
    pub managed_fields: Vec<ManagedFieldsEntry>,
}

/// The field manager of one endpoint and version.
pub struct FieldManager<'a> {
    /// The type's served versions, to read fields managed in other versions.
    pub versions: &'a dyn Versions,
    /// The request's `group/version`.
    pub api_version: &'a str,
    /// The kind, e.g. `Pizza`.
    pub kind: &'a str,
    /// `status` for the status subresource, else empty.
    pub subresource: &'a str,
    /// Fields writes through this endpoint never own.
    pub reset: &'a ResetFields,
}

/// An object without its `metadata.managedFields`.
fn without_managed_fields(value: &Value) -> Value {
    let mut value = value.clone();
    if let Some(Value::Object(meta)) = value.get_mut("metadata") {
        meta.remove("managedFields");
    }
    value
}

impl FieldManager<'_> {
    fn versioned(&self, value: &Value) -> Versioned {
        Versioned {
            value: without_managed_fields(value),
            api_version: self.api_version.to_string(),
        }
    }

    /// The managed fields of an object written by an update (`live` is `None` for a create), which never fails:
    /// when tracking fails, the live object's managed fields stay (as upstream's `UpdateNoErrors`).
    pub fn update(
        &self,
        live: Option<(&Value, &[ManagedFieldsEntry])>,
        new: &Value,
        new_managed: &[ManagedFieldsEntry],
        manager: &str,
    ) -> Vec<ManagedFieldsEntry> {
        let live_managed = live.map(|(_, m)| m).unwrap_or_default();
        let from_live = || decode(live_managed).unwrap_or_default();
        let managed = if !self.subresource.is_empty() {
            from_live()
        } else if is_reset(new_managed) {
            Managed::default()
        } else {
            match decode(new_managed) {
                Ok(managed) if !managed.fields.is_empty() => managed,
                _ => from_live(),
            }
        };
        // An existing object nobody tracked stays untracked until its first apply.
        if managed.fields.is_empty() && live.is_some() {
            return Vec::new();
        }
        let empty = Value::Object(Default::default());
        let live_value = self.versioned(live.map(|(v, _)| v).unwrap_or(&empty));
        match self.track_update(&live_value, &self.versioned(new), managed, manager) {
            Ok(managed) => encode(&managed),
            Err(e) => {
                tracing::error!(error = ?e, "failed to update managedFields; the previous ones stay");
                live_managed.to_vec()
            }
        }
    }

    /// Upstream's update chain below the field manager: cap managers, manager identity, time, strip metadata.
    fn track_update(
        &self,
        live: &Versioned,
        new: &Versioned,
        mut managed: Managed,
        name: &str,
    ) -> Result<Managed, UpdateError> {
        let manager = Manager {
            name: if name.is_empty() {
                "unknown".into()
            } else {
                name.to_string()
            },
            applied: false,
            api_version: self.api_version.to_string(),
            subresource: self.subresource.to_string(),
        };
        let current = Manager {
            name: CURRENT_OPERATION.into(),
            applied: false,
            api_version: String::new(),
            subresource: String::new(),
        };
        let reset = &self.reset.0;
        let ignored = |_: &str| reset.clone();
        let updater = Updater {
            versions: self.versions,
            ignored: &ignored,
        };
        updater.update(live, new, &mut managed.fields, &current)?;
        strip_meta(&mut managed.fields, &current);
        if let Some(changed) = managed.fields.remove(&current) {
            let set = match managed.fields.get(&manager) {
                Some(previous) => changed.set.union(&previous.set),
                None => changed.set,
            };
            managed.fields.insert(
                manager.clone(),
                VersionedSet {
                    set,
                    api_version: changed.api_version,
                    applied: changed.applied,
                },
            );
            managed.times.insert(manager, Some(Time::now()));
        }
        cap_update_managers(&mut managed);
        Ok(managed)
    }

    /// The configuration's `apiVersion` and `kind` must be the endpoint's.
    pub fn check_type(&self, config: &Value) -> Result<(), ApplyError> {
        let text = |key: &str| config.get(key).and_then(Value::as_str).unwrap_or_default();
        if text("apiVersion") == self.api_version && text("kind") == self.kind {
            return Ok(());
        }
        let (group, version) = match text("apiVersion").rsplit_once('/') {
            Some((group, version)) => (group, version),
            None => ("", text("apiVersion")),
        };
        Err(ApplyError::BadRequest(format!(
            "invalid object type: {group}/{version}, Kind={}",
            text("kind")
        )))
    }

    /// Server-side apply of `config` (the request's YAML as JSON) by `manager`.
    pub fn apply(
        &self,
        live: Option<(&Value, &[ManagedFieldsEntry])>,
        config: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Applied, ApplyError> {
        let live_managed = live.map(|(_, m)| m).unwrap_or_default();
        let mut managed = decode(live_managed)
            .map_err(|e| ApplyError::Internal(format!("failed to decode managed fields: {e}")))?;
        self.check_type(config)?;
        if config
            .get("metadata")
            .and_then(|m| m.get("managedFields"))
            .is_some_and(|m| !m.is_null())
        {
            return Err(ApplyError::BadRequest(
                "metadata.managedFields must be nil".into(),
            ));
        }
        let empty = Value::Object(Default::default());
        let live_value = self.versioned(live.map(|(v, _)| v).unwrap_or(&empty));
        let schema = TypeRef(self.versions.schema(self.api_version));
        // `apiVersion` and `kind` were checked above; the schema is of the rest.
        let mut body = config.clone();
        if let Value::Object(map) = &mut body {
            map.remove("apiVersion");
            map.remove("kind");
        }
        typed::validate(&body, schema, false).map_err(|e| {
            ApplyError::Internal(format!(
                "failed to create typed patch object ({}): {e}",
                self.describe(config)
            ))
        })?;
        let config_value = Versioned {
            value: config.clone(),
            api_version: self.api_version.to_string(),
        };
        if managed.fields.is_empty() {
            // The fields of an object nobody tracked belong to "before-first-apply".
            managed = self
                .track_update(
                    &self.versioned(&empty),
                    &live_value,
                    managed,
                    BEFORE_FIRST_APPLY,
                )
                .map_err(|e| {
                    ApplyError::Internal(format!(
                        "failed to create manager for existing fields: {e:?}"
                    ))
                })?;
        }
        let applier = Manager {
            name: manager.to_string(),
            applied: true,
            api_version: String::new(),
            subresource: self.subresource.to_string(),
        };
        let reset = &self.reset.0;
        let ignored = |_: &str| reset.clone();
        let updater = Updater {
            versions: self.versions,
            ignored: &ignored,
        };
        let mut fields = managed.fields.clone();
        let mut result = updater.apply(&live_value, &config_value, &mut fields, &applier, force);
        // kubectl taking over from its client-side apply: conflicts on fields the last-applied annotation set (to
        // the values they still have) are not conflicts (upstream's lastAppliedManager).
        if manager == "kubectl"
            && let Err(UpdateError::Conflicts(conflicts)) = &result
            && let Some(allowed) = self.allowed_by_last_applied(&live_value.value)
        {
            let remaining: Vec<(Manager, Path)> = conflicts
                .iter()
                .filter(|(_, path)| !allowed.has(path))
                .cloned()
                .collect();
            result = if remaining.is_empty() {
                fields = managed.fields.clone();
                updater.apply(&live_value, &config_value, &mut fields, &applier, true)
            } else {
                Err(UpdateError::Conflicts(remaining))
            };
        }
        managed.fields = fields;
        let applied = result.map_err(|e| match e {
            UpdateError::Conflicts(conflicts) => conflict_error(conflicts),
            UpdateError::Invalid(e) => ApplyError::Internal(format!("failed to merge config: {e}")),
            UpdateError::Internal(e) => ApplyError::Internal(e),
        })?;
        strip_meta(&mut managed.fields, &applier);
        if applied.is_some() {
            managed.times.insert(applier.clone(), Some(Time::now()));
        }
        let mut object = applied.map(|a| a.value);
        if manager == "kubectl" {
            object = keep_last_applied(object, &live_value.value, config);
        }
        Ok(Applied {
            object,
            managed_fields: encode(&managed),
        })
    }

    /// The fields the live object's last-applied annotation (kubectl's client-side apply) set and that still have
    /// the values it set; `None` without a usable annotation.
    fn allowed_by_last_applied(&self, live: &Value) -> Option<Set> {
        let text = live
            .get("metadata")?
            .get("annotations")?
            .get(LAST_APPLIED_ANNOTATION)?
            .as_str()?;
        let last: Value = serde_json::from_str(text).ok()?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(self.api_version) {
            return None;
        }
        let schema = TypeRef(self.versions.schema(self.api_version));
        let changed = typed::compare(&last, live, schema).ok()?;
        Some(
            typed::to_field_set(&last, schema)
                .difference(&changed.modified)
                .difference(&changed.added)
                .difference(&changed.removed),
        )
    }

    /// `namespace/name; group/version, Kind=kind` as upstream names an object in errors.
    fn describe(&self, config: &Value) -> String {
        let meta = |key: &str| {
            config
                .get("metadata")
                .and_then(|m| m.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (group, version) = self
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", self.api_version));
        format!(
            "{}/{}; {group}/{version}, Kind={}",
            meta("namespace"),
            meta("name"),
            self.kind
        )
    }
}

/// When `kubectl` applies server-side an object that has a client-side apply annotation, the annotation becomes
/// the applied configuration, so that a later client-side apply computes from it.
fn keep_last_applied(object: Option<Value>, live: &Value, config: &Value) -> Option<Value> {
    let annotations = |v: &Value| {
        v.get("metadata")
            .and_then(|m| m.get("annotations"))
            .cloned()
    };
    let target = object.clone().unwrap_or_else(|| live.clone());
    let has = annotations(&target)
        .and_then(|a| {
            a.get(LAST_APPLIED_ANNOTATION)
                .and_then(Value::as_str)
                .map(|s| !s.is_empty())
        })
        .unwrap_or(false);
    if !has {
        return object;
    }
    let mut last = config.clone();
    if let Some(Value::Object(a)) = last
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    {
        a.remove(LAST_APPLIED_ANNOTATION);
    }
    let mut target = target;
    if let Some(Value::Object(a)) = target
        .get_mut("metadata")
        .and_then(|m| m.get_mut("annotations"))
    {
        a.insert(
            LAST_APPLIED_ANNOTATION.into(),
            Value::String(last.to_string()),
        );
    }
    (target != *live).then_some(target)
}

fn strip_meta(fields: &mut ManagedFields, manager: &Manager) {
    if let Some(owned) = fields.get_mut(manager) {
        owned.set = owned.set.difference(stripped());
        if owned.set.is_empty() {
            fields.remove(manager);
        }
    }
}

/// Folds the oldest update managers beyond ten into one `ancient-changes` manager per version.
fn cap_update_managers(managed: &mut Managed) {
    let seconds = |m: &Manager, managed: &Managed| {
        managed
            .times
            .get(m)
            .cloned()
            .flatten()
            .map(|t| t.0.timestamp())
            .unwrap_or(0)
    };
    let mut updaters: Vec<Manager> = managed
        .fields
        .iter()
        .filter(|(_, owned)| !owned.applied)
        .map(|(m, _)| m.clone())
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by(|a, b| {
        seconds(a, managed)
            .cmp(&seconds(b, managed))
            .then_with(|| identifier(a).cmp(&identifier(b)))
    });
    let mut first_of_version: BTreeMap<String, Manager> = BTreeMap::new();
    let mut length = updaters.len();
    for manager in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let owned = managed.fields[&manager].clone();
        let time = managed.times.get(&manager).cloned().flatten();
        let bucket = Manager {
            name: ANCIENT_CHANGES.into(),
            applied: false,
            api_version: owned.api_version.clone(),
            subresource: String::new(),
        };
        match first_of_version.get(&owned.api_version) {
            Some(first) => {
                if !managed.fields.contains_key(&bucket)
                    && let Some(moved) = managed.fields.remove(first)
                {
                    managed.fields.insert(bucket.clone(), moved);
                }
                let merged = owned.set.union(&managed.fields[&bucket].set);
                managed.fields.insert(
                    bucket.clone(),
                    VersionedSet {
                        set: merged,
                        api_version: owned.api_version.clone(),
                        applied: false,
                    },
                );
                managed.fields.remove(&manager);
                length -= 1;
                managed.times.insert(bucket, time);
            }
            None => {
                first_of_version.insert(owned.api_version.clone(), manager);
            }
        }
    }
}

/// Upstream's manager identifier (a JSON text), used where upstream orders by it.
fn identifier(m: &Manager) -> String {
    let mut map = serde_json::Map::new();
    map.insert("manager".into(), m.name.clone().into());
    map.insert(
        "operation".into(),
        if m.applied { "Apply" } else { "Update" }.into(),
    );
    if !m.api_version.is_empty() {
        map.insert("apiVersion".into(), m.api_version.clone().into());
    }
    if !m.subresource.is_empty() {
        map.insert("subresource".into(), m.subresource.clone().into());
    }
    Value::Object(map).to_string()
}

/// A manager as upstream prints it in conflicts: `"bob"`, `"kubectl-patch" using group/v1`, with the subresource.
fn print_manager(m: &Manager) -> String {
    let mut text = Value::from(m.name.as_str()).to_string();
    if !m.subresource.is_empty() {
        text = format!(
            "{text} with subresource {}",
            Value::from(m.subresource.as_str())
        );
    }
    if !m.applied {
        text = format!("{text} using {}", m.api_version);
    }
    text
}

fn conflict_error(conflicts: Vec<(Manager, Path)>) -> ApplyError {
    let causes: Vec<(String, String)> = conflicts
        .iter()
        .map(|(m, p)| {
            (
                format!("conflict with {}", print_manager(m)),
                path::display(p),
            )
        })
        .collect();
    let message = match conflicts.as_slice() {
        [(m, p)] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            print_manager(m),
            path::display(p)
        ),
        all => {
            let mut by_manager: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (m, p) in all {
                by_manager
                    .entry(print_manager(m))
                    .or_default()
                    .push(path::display(p));
            }
            let mut lines = Vec::new();
            for (manager, paths) in by_manager {
                lines.push(format!("conflicts with {manager}:"));
                lines.extend(paths.into_iter().map(|p| format!("- {p}")));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                all.len(),
                lines.join("\n")
            )
        }
    };
    ApplyError::Conflicts { message, causes }
}

/// `managedFields: [{}]` asks to drop all managed fields.
fn is_reset(entries: &[ManagedFieldsEntry]) -> bool {
    matches!(entries, [only] if *only == ManagedFieldsEntry::default())
}

fn decode(entries: &[ManagedFieldsEntry]) -> Result<Managed, String> {
    let mut managed = Managed::default();
    for (i, entry) in entries.iter().enumerate() {
        let applied = match entry.operation.as_str() {
            "Apply" => true,
            "Update" => false,
            _ => return Err("operation must be `Apply` or `Update`".into()),
        };
        if entry.api_version.is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match entry.fields_type.as_str() {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {i}"
                ));
            }
        }
        let set = match &entry.fields_v1 {
            Some(fields) => Set::from_fields_v1(&fields.raw)?,
            None => Set::new(),
        };
        let manager = Manager {
            name: entry.manager.clone(),
            applied,
            api_version: if applied {
                String::new()
            } else {
                entry.api_version.clone()
            },
            subresource: entry.subresource.clone(),
        };
        managed.times.insert(manager.clone(), entry.time);
        managed.fields.insert(
            manager,
            VersionedSet {
                set,
                api_version: entry.api_version.clone(),
                applied,
            },
        );
    }
    Ok(managed)
}

/// The entries in upstream's order: operation, time, manager, version, subresource.
fn encode(managed: &Managed) -> Vec<ManagedFieldsEntry> {
    let mut entries: Vec<ManagedFieldsEntry> = managed
        .fields
        .iter()
        .map(|(manager, owned)| ManagedFieldsEntry {
            manager: manager.name.clone(),
            operation: if owned.applied { "Apply" } else { "Update" }.into(),
            api_version: owned.api_version.clone(),
            time: managed.times.get(manager).cloned().flatten(),
            fields_type: "FieldsV1".into(),
            fields_v1: Some(FieldsV1 {
                raw: owned.set.to_fields_v1().into_bytes(),
            }),
            subresource: manager.subresource.clone(),
        })
        .collect();
    entries.sort_by(|p, q| {
        let seconds = |e: &ManagedFieldsEntry| e.time.map(|t| t.0.timestamp()).unwrap_or(0);
        p.operation
            .cmp(&q.operation)
            .then_with(|| seconds(p).cmp(&seconds(q)))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    entries
}
