//! Sets of field paths (structured-merge-diff's `fieldpath.Set`): a trie whose nodes say whether the path itself is
//! a member and which longer paths are. `FieldsV1` is its JSON form, written in upstream's order so that
//! `managedFields` compare byte for byte.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::path::{Path, PathElement, go_json};

/// A set of field paths, as `managedFields[].fieldsV1` holds one per manager.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Set {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, Set>,
}

impl Set {
    /// The empty set.
    pub fn new() -> Set {
        Set::default()
    }

    /// The set of the given paths.
    pub fn of(paths: &[Path]) -> Set {
        let mut set = Set::new();
        for path in paths {
            set.insert(path);
        }
        set
    }

    /// Adds `path`; the empty path is not a member and is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` itself is a member (a member below it does not count).
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// Whether the set has no member at any depth.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// The members one step long, in upstream's order.
    pub fn members(&self) -> impl Iterator<Item = &PathElement> {
        self.members.iter()
    }

    /// For each first step with longer members, the set of the rest of their paths.
    pub fn children(&self) -> impl Iterator<Item = (&PathElement, &Set)> {
        self.children.iter()
    }

    /// The paths below `element` (relative to it).
    pub fn with_prefix(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element).filter(|c| !c.is_empty())
    }

    /// Adds the one-step path `element`.
    pub fn add_member(&mut self, element: PathElement) {
        self.members.insert(element);
    }

    /// The paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (element, child) in &other.children {
            let merged = match out.children.get(element) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(element.clone(), merged);
        }
        out
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let members = self.members.intersection(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| {
                let shared = child.intersection(other.children.get(element)?);
                (!shared.is_empty()).then(|| (element.clone(), shared))
            })
            .collect();
        Set { members, children }
    }

    /// The paths of `self` that are not in `other` (a member of `other` removes only that path, not those below).
    pub fn difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter_map(|(element, child)| match other.children.get(element) {
                Some(theirs) => {
                    let rest = child.difference(theirs);
                    (!rest.is_empty()).then(|| (element.clone(), rest))
                }
                None => Some((element.clone(), child.clone())),
            })
            .collect();
        Set { members, children }
    }

    /// Like [`Set::difference`], but a member of `other` also removes every path below it.
    pub fn recursive_difference(&self, other: &Set) -> Set {
        let members = self.members.difference(&other.members).cloned().collect();
        let children = self
            .children
            .iter()
            .filter(|(element, _)| !other.members.contains(element))
            .filter_map(|(element, child)| match other.children.get(element) {
                Some(theirs) => {
                    let rest = child.recursive_difference(theirs);
                    (!rest.is_empty()).then(|| (element.clone(), rest))
                }
                None => Some((element.clone(), child.clone())),
            })
            .collect();
        Set { members, children }
    }

    /// Every path, members of a node before the paths below it, each in element order (upstream's `Iterate`).
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        for member in &self.members {
            let mut path = prefix.clone();
            path.push(member.clone());
            out.push(path);
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `FieldsV1` JSON text.
    pub fn to_fields_v1(&self) -> String {
        let mut out = String::new();
        self.write_fields_v1(false, &mut out);
        out
    }

    fn write_fields_v1(&self, include_self: bool, out: &mut String) {
        out.push('{');
        let mut first = true;
        let mut separator = |out: &mut String| {
            if !first {
                out.push(',');
            }
            first = false;
        };
        if include_self && !(self.members.is_empty() && self.children.is_empty()) {
            separator(out);
            out.push_str(r#"".":{}"#);
        }
        let mut elements: BTreeSet<&PathElement> = self.members.iter().collect();
        elements.extend(self.children.keys());
        for element in elements {
            separator(out);
            out.push_str(&go_json(&Value::from(element.to_fields_key())));
            out.push(':');
            match self.children.get(element) {
                Some(child) => child.write_fields_v1(self.members.contains(element), out),
                None => out.push_str("{}"),
            }
        }
        out.push('}');
    }

    /// Reads a `FieldsV1` JSON text.
    pub fn from_fields_v1(raw: &[u8]) -> Result<Set, String> {
        if raw.is_empty() {
            return Ok(Set::new());
        }
        let value: Value = serde_json::from_slice(raw).map_err(|e| e.to_string())?;
        let Value::Object(_) = value else {
            return Err("expected an object".into());
        };
        Ok(Set::read_fields_v1(&value)?.0)
    }

    /// The set below a node, and whether the node itself is a member (`".": {}`).
    fn read_fields_v1(value: &Value) -> Result<(Set, bool), String> {
        let Value::Object(map) = value else {
            return Err("expected an object".into());
        };
        let mut set = Set::new();
        let mut is_member = false;
        for (key, child) in map {
            if key == "." {
                is_member = true;
                continue;
            }
            let element = PathElement::from_fields_key(key)?;
            let (below, member) = Set::read_fields_v1(child)?;
            if below.is_empty() {
                set.members.insert(element);
            } else {
                if member {
                    set.members.insert(element.clone());
                }
                set.children.insert(element, below);
            }
        }
        Ok((set, is_member))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.into())
    }

    fn k(name: &str) -> PathElement {
        PathElement::Key(vec![("name".into(), json!(name))])
    }

    #[test]
    fn fields_v1_in_upstream_order() {
        let set = Set::of(&[
            vec![f("spec")],
            vec![f("spec"), f("toppings"), k("salami")],
            vec![f("spec"), f("toppings"), k("salami"), f("quantity")],
            vec![f("spec"), f("toppings"), k("salami"), f("name")],
            vec![f("metadata"), f("labels"), f("app")],
        ]);
        let text = set.to_fields_v1();
        assert_eq!(
            text,
            r#"{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{".":{},"f:toppings":{"k:{\"name\":\"salami\"}":{".":{},"f:name":{},"f:quantity":{}}}}}"#
        );
        assert_eq!(Set::from_fields_v1(text.as_bytes()).unwrap(), set);
    }

    #[test]
    fn set_operations() {
        let a = Set::of(&[vec![f("a")], vec![f("a"), f("b")], vec![f("c")]]);
        let b = Set::of(&[vec![f("a")]]);
        assert_eq!(
            a.difference(&b),
            Set::of(&[vec![f("a"), f("b")], vec![f("c")]])
        );
        assert_eq!(a.recursive_difference(&b), Set::of(&[vec![f("c")]]));
        assert_eq!(a.intersection(&b), b);
        assert_eq!(
            b.union(&Set::of(&[vec![f("c")]])),
            Set::of(&[vec![f("a")], vec![f("c")]])
        );
        assert!(a.has(&[f("a"), f("b")]));
        assert!(!a.has(&[f("a"), f("c")]));
        assert_eq!(a.paths().len(), 3);
    }
}
