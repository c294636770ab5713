//! Who owns which fields after an update or an apply (structured-merge-diff's `merge.Updater`): an update takes the
//! fields it changed from their other owners; an apply merges its configuration, fails on fields another manager
//! set to other values (unless forced), and removes what it applied last time and no longer does, when nobody else
//! owns it.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use super::path::Path;
use super::schema::TypeRef;
use super::set::Set;
use super::typed::{self, Comparison, ValidationErrors};

/// A manager as `managedFields` names it: the name, the operation, the version of an update, the subresource.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Manager {
    /// `managedFields[].manager`, e.g. `kubectl-client-side-apply`.
    pub name: String,
    /// Whether the fields came from an apply (`operation: Apply`) rather than an update.
    pub applied: bool,
    /// Empty for an apply (an applier is one manager whatever the version).
    pub api_version: String,
    /// `managedFields[].subresource`: empty for the main resource.
    pub subresource: String,
}

/// The fields a manager owns, in the version it used.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionedSet {
    /// The owned fields.
    pub set: Set,
    /// The version the paths are named in.
    pub api_version: String,
    /// Whether the fields came from an apply (`operation: Apply`).
    pub applied: bool,
}

/// Each manager's fields: `metadata.managedFields` decoded.
pub type ManagedFields = BTreeMap<Manager, VersionedSet>;

/// The versions of the type: their schemas, and conversion between them.
pub trait Versions {
    /// The schema of a served version; `None` when the version is not served (any more).
    fn schema(&self, api_version: &str) -> Option<&Value>;
    /// The object (in `from`) as `to` shows it.
    fn convert(&self, value: &Value, from: &str, to: &str) -> Result<Value, String>;
}

/// Why an update or apply could not be tracked.
#[derive(Debug)]
pub enum UpdateError {
    /// Fields another manager owns, with that manager.
    Conflicts(Vec<(Manager, Path)>),
    /// The object does not fit its schema.
    Invalid(ValidationErrors),
    /// A failure of the server, e.g. a conversion between versions.
    Internal(String),
}

impl From<ValidationErrors> for UpdateError {
    fn from(e: ValidationErrors) -> Self {
        UpdateError::Invalid(e)
    }
}

pub struct Updater<'a> {
    pub versions: &'a dyn Versions,
    /// Fields no manager owns through this endpoint, per version (upstream's reset fields: `status` on the main
    /// resource, `spec` on the status subresource).
    pub ignored: &'a dyn Fn(&str) -> Set,
}

/// An object in one version.
#[derive(Clone, Debug)]
pub struct Versioned {
    pub value: Value,
    pub api_version: String,
}

impl Updater<'_> {
    fn schema(&self, api_version: &str) -> TypeRef<'_> {
        TypeRef(self.versions.schema(api_version))
    }

    /// `object` in `api_version`; `None` when that version is not served.
    fn convert(
        &self,
        object: &Versioned,
        api_version: &str,
    ) -> Result<Option<Versioned>, UpdateError> {
        if object.api_version == api_version {
            return Ok(Some(object.clone()));
        }
        if self.versions.schema(api_version).is_none() {
            return Ok(None);
        }
        let value = self
            .versions
            .convert(&object.value, &object.api_version, api_version)
            .map_err(UpdateError::Internal)?;
        Ok(Some(Versioned {
            value,
            api_version: api_version.to_string(),
        }))
    }

    fn compare(&self, old: &Versioned, new: &Versioned) -> Result<Comparison, UpdateError> {
        let comparison = typed::compare(&old.value, &new.value, self.schema(&new.api_version))?;
        Ok(comparison.exclude(&(self.ignored)(&new.api_version)))
    }

    /// The other managers lose what `workflow` changed (or fail with conflicts, unless `force`) and what it removed.
    fn update_others(
        &self,
        old: &Versioned,
        new: &Versioned,
        managers: &mut ManagedFields,
        workflow: &Manager,
        force: bool,
    ) -> Result<Comparison, UpdateError> {
        let comparison = self.compare(old, new)?;
        let mut by_version: HashMap<String, Comparison> = HashMap::new();
        by_version.insert(new.api_version.clone(), comparison.clone());
        let mut conflicts: Vec<(Manager, Set)> = Vec::new();
        let mut removed: Vec<(Manager, Set)> = Vec::new();
        let mut gone = Vec::new();
        for (manager, owned) in managers.iter() {
            if manager == workflow {
                continue;
            }
            if !by_version.contains_key(&owned.api_version) {
                let (Some(old), Some(new)) = (
                    self.convert(old, &owned.api_version)?,
                    self.convert(new, &owned.api_version)?,
                ) else {
                    gone.push(manager.clone());
                    continue;
                };
                by_version.insert(owned.api_version.clone(), self.compare(&old, &new)?);
            }
            let changes = &by_version[&owned.api_version];
            let conflict = owned
                .set
                .intersection(&changes.modified.union(&changes.added));
            if !conflict.is_empty() {
                conflicts.push((manager.clone(), conflict));
            }
            if !changes.removed.is_empty() {
                removed.push((manager.clone(), changes.removed.clone()));
            }
        }
        for manager in gone {
            managers.remove(&manager);
        }
        if !force && !conflicts.is_empty() {
            let paths = conflicts
                .into_iter()
                .flat_map(|(manager, set)| {
                    set.paths().into_iter().map(move |p| (manager.clone(), p))
                })
                .collect();
            return Err(UpdateError::Conflicts(paths));
        }
        for (manager, set) in conflicts.iter().chain(&removed) {
            if let Some(owned) = managers.get_mut(manager) {
                owned.set = owned.set.difference(set);
            }
        }
        managers.retain(|_, owned| !owned.set.is_empty());
        Ok(comparison)
    }

    /// An update from `live` to `new` by `manager`: it owns what it changed, on top of what it owned.
    pub fn update(
        &self,
        live: &Versioned,
        new: &Versioned,
        managers: &mut ManagedFields,
        manager: &Manager,
    ) -> Result<(), UpdateError> {
        let comparison = self.update_others(live, new, managers, manager, true)?;
        let previous = managers.remove(manager).map(|v| v.set).unwrap_or_default();
        let set = previous
            .difference(&comparison.removed)
            .union(&comparison.modified)
            .union(&comparison.added)
            .recursive_difference(&(self.ignored)(&new.api_version));
        if !set.is_empty() {
            managers.insert(
                manager.clone(),
                VersionedSet {
                    set,
                    api_version: new.api_version.clone(),
                    applied: false,
                },
            );
        }
        Ok(())
    }

    /// Applies `config` to `live` for `manager`: the new object, or `None` when it equals `live`.
    pub fn apply(
        &self,
        live: &Versioned,
        config: &Versioned,
        managers: &mut ManagedFields,
        manager: &Manager,
        force: bool,
    ) -> Result<Option<Versioned>, UpdateError> {
        let schema = self.schema(&config.api_version);
        let merged = typed::merge(Some(&live.value), Some(&config.value), schema)?
            .unwrap_or_else(|| Value::Object(Default::default()));
        let last = managers.get(manager).cloned();
        let set = typed::to_field_set(&config.value, schema)
            .recursive_difference(&(self.ignored)(&config.api_version));
        managers.insert(
            manager.clone(),
            VersionedSet {
                set,
                api_version: config.api_version.clone(),
                applied: true,
            },
        );
        let merged = Versioned {
            value: merged,
            api_version: config.api_version.clone(),
        };
        let new = match last {
            Some(last) if !last.set.is_empty() => self.prune(merged, managers, manager, &last)?,
            _ => merged,
        };
        self.update_others(live, &new, managers, manager, force)?;
        Ok((!typed::values_equal(&new.value, &live.value)).then_some(new))
    }

    /// Removes from `merged` the fields `manager` applied last time (`last`) that no manager owns now.
    fn prune(
        &self,
        merged: Versioned,
        managers: &ManagedFields,
        manager: &Manager,
        last: &VersionedSet,
    ) -> Result<Versioned, UpdateError> {
        let Some(converted) = self.convert(&merged, &last.api_version)? else {
            return Ok(merged);
        };
        let schema = self.schema(&last.api_version);
        let last_set = typed::ensure_named_fields_are_members(&last.set, schema);
        let pruned = Versioned {
            value: typed::remove_items(&converted.value, &last_set, schema),
            api_version: last.api_version.clone(),
        };
        let pruned = self.add_back_owned_items(&converted, pruned, managers)?;
        let pruned = self.add_back_dangling_items(&converted, &pruned, last)?;
        let target = &managers[manager].api_version;
        Ok(self.convert(&pruned, target)?.unwrap_or(pruned))
    }

    /// Puts back what pruning removed but some manager owns.
    fn add_back_owned_items(
        &self,
        merged: &Versioned,
        mut pruned: Versioned,
        managers: &ManagedFields,
    ) -> Result<Versioned, UpdateError> {
        let mut by_version: BTreeMap<String, Set> = BTreeMap::new();
        for owned in managers.values() {
            let entry = by_version.entry(owned.api_version.clone()).or_default();
            *entry = entry.union(&owned.set);
        }
        // The pruned version first, then the others, as upstream.
        let pruned_version = pruned.api_version.clone();
        let mut order: Vec<(String, Set)> = Vec::new();
        if let Some(set) = by_version.remove(&pruned_version) {
            order.push((pruned_version.clone(), set));
        }
        order.extend(by_version);
        let mut merged = merged.clone();
        for (version, owned) in order {
            let version = version.as_str();
            let (Some(m), Some(p)) = (
                self.convert(&merged, version)?,
                self.convert(&pruned, version)?,
            ) else {
                continue;
            };
            let schema = self.schema(version);
            let merged_set = typed::ensure_named_fields_are_members(
                &typed::to_field_set(&m.value, schema),
                schema,
            );
            let pruned_set = typed::ensure_named_fields_are_members(
                &typed::to_field_set(&p.value, schema),
                schema,
            );
            let owned = typed::ensure_named_fields_are_members(&owned, schema);
            let remove = merged_set.difference(&pruned_set.union(&owned));
            pruned = Versioned {
                value: typed::remove_items(&m.value, &remove, schema),
                api_version: version.to_string(),
            };
            merged = m;
        }
        Ok(self.convert(&pruned, &pruned_version)?.unwrap_or(pruned))
    }

    /// Removes only what was in the last applied set: items that pruning dropped but that came from elsewhere stay.
    fn add_back_dangling_items(
        &self,
        merged: &Versioned,
        pruned: &Versioned,
        last: &VersionedSet,
    ) -> Result<Versioned, UpdateError> {
        let Some(pruned) = self.convert(pruned, &last.api_version)? else {
            return Ok(merged.clone());
        };
        let schema = self.schema(&last.api_version);
        let pruned_set = typed::ensure_named_fields_are_members(
            &typed::to_field_set(&pruned.value, schema),
            schema,
        );
        let merged_set = typed::ensure_named_fields_are_members(
            &typed::to_field_set(&merged.value, schema),
            schema,
        );
        let last_set = typed::ensure_named_fields_are_members(&last.set, schema);
        let remove = merged_set.difference(&pruned_set).intersection(&last_set);
        Ok(Versioned {
            value: typed::remove_items(&merged.value, &remove, schema),
            api_version: merged.api_version.clone(),
        })
    }
}
