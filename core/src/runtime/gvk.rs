//! Group, version, kind and resource names: how the API addresses types.

use std::fmt;

/// An API group and version, e.g. `restaurant.programming-kubernetes.info/v1beta1`; the core group is `""`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupVersion {
    /// The API group, e.g. `restaurant.programming-kubernetes.info`; empty for the core group.
    pub group: String,
    /// The version, e.g. `v1beta1`.
    pub version: String,
}

impl GroupVersion {
    /// `version` in `group` (`""` for the core group).
    pub fn new(group: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
        }
    }

    /// Parses an `apiVersion` string: `v1` (core group) or `group/version`.
    pub fn parse_api_version(api_version: &str) -> Option<Self> {
        match api_version.split_once('/') {
            None if !api_version.is_empty() => Some(Self::new("", api_version)),
            Some((g, v)) if !g.is_empty() && !v.is_empty() && !v.contains('/') => {
                Some(Self::new(g, v))
            }
            _ => None,
        }
    }

    /// The `apiVersion` string of this group version.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `kind` in this group version.
    pub fn with_kind(&self, kind: impl Into<String>) -> GroupVersionKind {
        GroupVersionKind {
            group: self.group.clone(),
            version: self.version.clone(),
            kind: kind.into(),
        }
    }

    /// `resource` (a plural) in this group version.
    pub fn with_resource(&self, resource: impl Into<String>) -> GroupVersionResource {
        GroupVersionResource {
            group: self.group.clone(),
            version: self.version.clone(),
            resource: resource.into(),
        }
    }
}

impl fmt::Display for GroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.version)
        } else {
            write!(f, "{}/{}", self.group, self.version)
        }
    }
}

/// A kind in a group version: what `apiVersion` + `kind` in a body name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupVersionKind {
    /// The API group, e.g. `restaurant.programming-kubernetes.info`; empty for the core group.
    pub group: String,
    /// The version, e.g. `v1beta1`.
    pub version: String,
    /// The kind, in CamelCase, e.g. `Pizza`.
    pub kind: String,
}

impl GroupVersionKind {
    /// The group and version, without the kind.
    pub fn group_version(&self) -> GroupVersion {
        GroupVersion::new(self.group.clone(), self.version.clone())
    }

    /// The group and kind, without the version.
    pub fn group_kind(&self) -> GroupKind {
        GroupKind {
            group: self.group.clone(),
            kind: self.kind.clone(),
        }
    }
}

impl fmt::Display for GroupVersionKind {
    /// Upstream's `GroupVersionKind.String()`: `group/version, Kind=Kind`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// A resource (plural name in URLs) in a group version.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupVersionResource {
    /// The API group, e.g. `restaurant.programming-kubernetes.info`; empty for the core group.
    pub group: String,
    /// The version, e.g. `v1beta1`.
    pub version: String,
    /// The resource: the lower-case plural in URLs, e.g. `pizzas`.
    pub resource: String,
}

impl GroupVersionResource {
    /// The group and resource, without the version.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.clone(),
            resource: self.resource.clone(),
        }
    }
}

/// A kind independent of version.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupKind {
    /// The API group, e.g. `restaurant.programming-kubernetes.info`; empty for the core group.
    pub group: String,
    /// The kind, in CamelCase, e.g. `Pizza`.
    pub kind: String,
}

impl fmt::Display for GroupKind {
    /// Upstream's `GroupKind.String()`: `Kind.group`, or `Kind` in the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.kind)
        } else {
            write!(f, "{}.{}", self.kind, self.group)
        }
    }
}

/// A resource independent of version; it names objects in error messages (`pizzas.restaurant...`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct GroupResource {
    /// The API group, e.g. `restaurant.programming-kubernetes.info`; empty for the core group.
    pub group: String,
    /// The resource: the lower-case plural in URLs, e.g. `pizzas`.
    pub resource: String,
}

impl fmt::Display for GroupResource {
    /// Upstream's `GroupResource.String()`: `resource.group`, or `resource` in the core group.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_version_round_trip() {
        let gv = GroupVersion::parse_api_version("restaurant.programming-kubernetes.info/v1beta1")
            .unwrap();
        assert_eq!(gv.group, "restaurant.programming-kubernetes.info");
        assert_eq!(
            gv.api_version(),
            "restaurant.programming-kubernetes.info/v1beta1"
        );
        assert_eq!(
            GroupVersion::parse_api_version("v1").unwrap().api_version(),
            "v1"
        );
        assert!(GroupVersion::parse_api_version("").is_none());
        assert!(GroupVersion::parse_api_version("a/b/c").is_none());
        assert!(GroupVersion::parse_api_version("/v1").is_none());
    }

    #[test]
    fn display_matches_upstream() {
        let gr = GroupResource {
            group: "restaurant.programming-kubernetes.info".into(),
            resource: "pizzas".into(),
        };
        assert_eq!(
            gr.to_string(),
            "pizzas.restaurant.programming-kubernetes.info"
        );
        let gk = GroupKind {
            group: String::new(),
            kind: "Status".into(),
        };
        assert_eq!(gk.to_string(), "Status");
    }
}
