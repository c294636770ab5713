//! Storage keys: `<prefix>/<resource>/<namespace>/<name>` or `<prefix>/<resource>/<name>`.
//!
//! Names and namespaces come from requests, so they are checked here (upstream `IsValidPathSegmentName`):
//! nothing built by [`ResourceKeys`] can contain `.`/`..` segments or escape its resource root. Backends check every
//! key they are given with [`validate_key`] as a second line of defence (upstream etcd3 `prepareKey`).

use super::StorageError;

/// Builds and checks the keys of one resource under one storage prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceKeys {
    root: String,
}

impl ResourceKeys {
    /// Keys under `<prefix>/<resource>`, e.g. `ResourceKeys::new("/registry/restaurant.example.com", "pizzas")`.
    /// The prefix may be empty or `/`; the resource prefix may itself have several segments (`group/resource`).
    pub fn new(prefix: &str, resource: &str) -> Result<Self, StorageError> {
        let prefix = prefix.trim_end_matches('/');
        let resource = resource.trim_matches('/');
        if resource.is_empty() {
            return Err(StorageError::InvalidKey("empty resource prefix".into()));
        }
        let root = format!("{prefix}/{resource}");
        let root = if root.starts_with('/') {
            root
        } else {
            format!("/{root}")
        };
        validate_key(&root)?;
        if root.split('/').skip(1).any(str::is_empty) {
            return Err(StorageError::InvalidKey(format!("invalid key: {root:?}")));
        }
        Ok(ResourceKeys { root })
    }

    /// `<prefix>/<resource>`, without a trailing slash.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The key of a namespaced object (`Namespace parameter required.` / `Name parameter required.` /
    /// `Name parameter invalid: "..": may not be '..'` as upstream's `NamespaceKeyFunc`).
    pub fn namespaced(&self, namespace: &str, name: &str) -> Result<String, StorageError> {
        if namespace.is_empty() {
            return Err(StorageError::BadRequest(
                "Namespace parameter required.".into(),
            ));
        }
        check_segment("Namespace", namespace)?;
        check_name(name)?;
        Ok(format!("{}/{namespace}/{name}", self.root))
    }

    /// The key of a cluster-scoped object (upstream's `NoNamespaceKeyFunc`).
    pub fn cluster(&self, name: &str) -> Result<String, StorageError> {
        check_name(name)?;
        Ok(format!("{}/{name}", self.root))
    }

    /// The key of an object, namespaced when `namespace` is given.
    pub fn object(&self, namespace: Option<&str>, name: &str) -> Result<String, StorageError> {
        match namespace {
            Some(ns) => self.namespaced(ns, name),
            None => self.cluster(name),
        }
    }

    /// The prefix to list or watch (recursively) all objects, or those of one namespace. Ends with `/` so that
    /// `ns-a` never matches `ns-ab`.
    pub fn list(&self, namespace: Option<&str>) -> Result<String, StorageError> {
        match namespace {
            Some(ns) if !ns.is_empty() => {
                check_segment("Namespace", ns)?;
                Ok(format!("{}/{ns}/", self.root))
            }
            _ => Ok(format!("{}/", self.root)),
        }
    }

    /// Whether `key` lies strictly under this resource's root.
    pub fn contains(&self, key: &str) -> bool {
        key.strip_prefix(self.root.as_str())
            .is_some_and(|rest| rest.starts_with('/') && rest.len() > 1)
    }
}

fn check_name(name: &str) -> Result<(), StorageError> {
    if name.is_empty() {
        return Err(StorageError::BadRequest("Name parameter required.".into()));
    }
    check_segment("Name", name)
}

fn check_segment(what: &str, segment: &str) -> Result<(), StorageError> {
    let msgs = path_segment_name_errors(segment);
    if msgs.is_empty() {
        Ok(())
    } else {
        Err(StorageError::BadRequest(format!(
            "{what} parameter invalid: {segment:?}: {}",
            msgs.join(";")
        )))
    }
}

/// Upstream `IsValidPathSegmentName`: the reasons `name` cannot be one segment of a path (empty when it can).
pub fn path_segment_name_errors(name: &str) -> Vec<String> {
    for bad in [".", ".."] {
        if name == bad {
            return vec![format!("may not be '{bad}'")];
        }
    }
    ["/", "%"]
        .iter()
        .filter(|bad| name.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// Checks a key handed to a backend: absolute, not empty, no `.` or `..` segments (upstream etcd3 `prepareKey`).
pub fn validate_key(key: &str) -> Result<(), StorageError> {
    if key.is_empty() || key == "/" {
        return Err(StorageError::InvalidKey(format!("empty key: {key:?}")));
    }
    if !key.starts_with('/') || key.split('/').any(|s| s == "." || s == "..") || key.contains('\0')
    {
        return Err(StorageError::InvalidKey(format!("invalid key: {key:?}")));
    }
    Ok(())
}

/// The key range a list or watch covers: a recursive read takes every key under `key/` (a trailing slash is added
/// so `/a` never matches `/ab`); a non-recursive one takes exactly `key`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyRange {
    /// Exactly one key.
    Exact(String),
    /// Every key that starts with this prefix (which ends with `/`).
    Prefix(String),
}

impl KeyRange {
    /// Builds the range after validating `key`.
    pub fn new(key: &str, recursive: bool) -> Result<Self, StorageError> {
        validate_key(key)?;
        if recursive {
            let mut p = key.to_string();
            if !p.ends_with('/') {
                p.push('/');
            }
            Ok(KeyRange::Prefix(p))
        } else {
            Ok(KeyRange::Exact(key.to_string()))
        }
    }

    /// Whether `key` lies in the range.
    pub fn contains(&self, key: &str) -> bool {
        match self {
            KeyRange::Exact(k) => k == key,
            KeyRange::Prefix(p) => key.starts_with(p.as_str()),
        }
    }

    /// The exact key or the prefix.
    pub fn as_str(&self) -> &str {
        match self {
            KeyRange::Exact(k) | KeyRange::Prefix(k) => k,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_keys() {
        let k = ResourceKeys::new("/registry/example.com", "pizzas").unwrap();
        assert_eq!(k.root(), "/registry/example.com/pizzas");
        assert_eq!(
            k.namespaced("ns", "a").unwrap(),
            "/registry/example.com/pizzas/ns/a"
        );
        assert_eq!(k.cluster("a").unwrap(), "/registry/example.com/pizzas/a");
        assert_eq!(
            k.list(Some("ns")).unwrap(),
            "/registry/example.com/pizzas/ns/"
        );
        assert_eq!(k.list(None).unwrap(), "/registry/example.com/pizzas/");
        assert!(k.contains("/registry/example.com/pizzas/ns/a"));
        assert!(!k.contains("/registry/example.com/pizzasx/a"));
        assert_eq!(
            ResourceKeys::new("", "toppings").unwrap().root(),
            "/toppings"
        );
    }

    #[test]
    fn rejects_bad_names() {
        let k = ResourceKeys::new("/r", "pizzas").unwrap();
        assert_eq!(
            k.cluster("").unwrap_err().to_string(),
            "Name parameter required."
        );
        assert_eq!(
            k.namespaced("", "a").unwrap_err().to_string(),
            "Namespace parameter required."
        );
        assert_eq!(
            k.cluster("..").unwrap_err().to_string(),
            "Name parameter invalid: \"..\": may not be '..'"
        );
        assert_eq!(
            k.cluster("a/%b").unwrap_err().to_string(),
            "Name parameter invalid: \"a/%b\": may not contain '/';may not contain '%'"
        );
        assert!(k.namespaced("..", "a").is_err());
        assert!(k.namespaced("a/b", "a").is_err());
        assert!(ResourceKeys::new("/r/..", "x").is_err());
    }

    #[test]
    fn validates_backend_keys() {
        assert!(validate_key("/a/b").is_ok());
        assert!(validate_key("/a/b/").is_ok());
        for bad in ["", "/", "a/b", "/a/../b", "/a/./b", "/a/..", "/.."] {
            assert!(validate_key(bad).is_err(), "{bad}");
        }
        assert!(KeyRange::new("/a", true).unwrap().contains("/a/b"));
        assert!(!KeyRange::new("/a", true).unwrap().contains("/ab"));
    }
}
