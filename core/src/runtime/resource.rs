//! The identity of a resource, carried by its hub type.

use crate::meta::ObjectMeta;

use super::{GroupKind, GroupResource, GroupVersion};

/// Whether objects live in a namespace or at cluster level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Objects belong to a namespace: `/namespaces/{ns}/{plural}/{name}`.
    Namespaced,
    /// Objects are cluster-wide: `/{plural}/{name}`, no `metadata.namespace`.
    Cluster,
}

/// An extra column in `kubectl get` tables, as in a CRD's `additionalPrinterColumns`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrinterColumn {
    /// The column header, e.g. `Cost`.
    pub name: &'static str,
    /// OpenAPI type: `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: &'static str,
    /// An OpenAPI format refining `type_`, e.g. `int32`; empty for none.
    pub format: &'static str,
    /// Help text for the column; empty for none.
    pub description: &'static str,
    /// A simple JSONPath into the served version, e.g. `.status.cost`.
    pub json_path: &'static str,
    /// 0 shows in the default view; higher only with `-o wide`.
    pub priority: i32,
}

/// The `scale` subresource of a type, as a CRD declares it: JSON paths (`.spec.replicas`) in its served versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replicas, written by `kubectl scale` and autoscalers.
    pub spec_replicas: &'static str,
    /// The observed replicas.
    pub status_replicas: &'static str,
    /// A label selector in its string form (`a=b,c in (d)`), for autoscalers; empty when there is none.
    pub label_selector: &'static str,
}

/// A hub (internal) type that is served as a resource: its name in URLs, its scope, and how kubectl shows it.
///
/// Implemented by `#[derive(Hub)]`; the registry, storage keys, discovery and OpenAPI are all generic over it.
pub trait Resource: Clone + std::fmt::Debug + Default + PartialEq + Send + Sync + 'static {
    /// The API group, e.g. `restaurant.programming-kubernetes.info`; empty for the core group.
    const GROUP: &'static str;
    /// The kind, in CamelCase, e.g. `Pizza`.
    const KIND: &'static str;
    /// Lower-case plural name used in URLs and storage keys.
    const PLURAL: &'static str;
    /// Lower-case singular name, e.g. `pizza`, which kubectl accepts in place of the plural.
    const SINGULAR: &'static str;
    /// Whether objects are namespaced or cluster-wide.
    const SCOPE: Scope;
    /// Abbreviations kubectl accepts, e.g. `pz`; listed in discovery.
    const SHORT_NAMES: &'static [&'static str];
    /// Groups of resources kubectl expands, e.g. `all` for `kubectl get all`; listed in discovery.
    const CATEGORIES: &'static [&'static str];
    /// Columns `kubectl get` shows besides name and age.
    const PRINTER_COLUMNS: &'static [PrinterColumn];
    /// Subresources served besides the main resource, e.g. `status`.
    const SUBRESOURCES: &'static [&'static str];
    /// Field paths usable in field selectors besides `metadata.name` and `metadata.namespace`.
    const SELECTABLE_FIELDS: &'static [&'static str];

    /// The object's `metadata`.
    fn metadata(&self) -> &ObjectMeta;
    /// The object's `metadata`, for changing it.
    fn metadata_mut(&mut self) -> &mut ObjectMeta;

    /// Sets this object's status to `other`'s. `#[derive(Hub)]` implements it for types declaring a `status`
    /// subresource (it copies the `status` field); the store uses it so that the main resource never writes status
    /// and the `/status` subresource writes nothing else. The default, for types without status, does nothing.
    fn copy_status_from(&mut self, _other: &Self) {}

    /// Whether the type serves a `status` subresource.
    fn has_status_subresource() -> bool {
        Self::SUBRESOURCES.contains(&"status")
    }

    /// Where the `scale` subresource reads and writes replicas, for a type that declares one.
    fn scale_paths() -> Option<ScalePaths> {
        None
    }

    /// The value of a declared selectable field, as a field selector compares it.
    fn selectable_field(&self, _path: &str) -> Option<String> {
        None
    }

    /// The group and kind, e.g. `Pizza.restaurant.programming-kubernetes.info`.
    fn group_kind() -> GroupKind {
        GroupKind {
            group: Self::GROUP.to_string(),
            kind: Self::KIND.to_string(),
        }
    }

    /// The group and plural, e.g. `pizzas.restaurant.programming-kubernetes.info`, as errors name the resource.
    fn group_resource() -> GroupResource {
        GroupResource {
            group: Self::GROUP.to_string(),
            resource: Self::PLURAL.to_string(),
        }
    }

    /// `version` in this type's group.
    fn group_version(version: &str) -> GroupVersion {
        GroupVersion::new(Self::GROUP, version)
    }

    /// Whether objects belong to a namespace.
    fn namespaced() -> bool {
        Self::SCOPE == Scope::Namespaced
    }
}
