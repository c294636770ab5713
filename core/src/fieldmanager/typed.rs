//! The operations of structured-merge-diff on JSON values under a schema: the set of fields a value sets, the
//! comparison of two values (added, modified, removed fields), the merge of an applied configuration into an
//! object, and the removal of fields. Each follows upstream's walker (`typed/*.go`) case for case, since the
//! resulting field sets are what `managedFields` shows.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use serde_json::{Map, Value};

use super::path::{Path, PathElement, display};
use super::schema::{Atom, ListKind, TypeRef};
use super::set::Set;

/// Values that do not fit their schema, each with its path, as upstream words them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ValidationErrors(pub Vec<(String, String)>);

impl ValidationErrors {
    fn push(&mut self, path: &[PathElement], message: impl Into<String>) {
        self.0.push((display(path), message.into()));
    }

    fn result(self) -> Result<(), ValidationErrors> {
        if self.0.is_empty() { Ok(()) } else { Err(self) }
    }
}

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one = |(path, message): &(String, String)| {
            if path.is_empty() {
                message.clone()
            } else {
                format!("{path}: {message}")
            }
        };
        match self.0.as_slice() {
            [single] => write!(f, "{}", one(single)),
            all => {
                write!(f, "errors:")?;
                for e in all {
                    write!(f, "\n  {}", one(e))?;
                }
                Ok(())
            }
        }
    }
}

/// The path element of a list item: its keys in a map list, its value in a set.
fn item_element(
    items: TypeRef<'_>,
    kind: &ListKind<'_>,
    item: &Value,
) -> Result<PathElement, String> {
    match kind {
        ListKind::Map(keys) => {
            let Value::Object(map) = item else {
                return Err(if item.is_null() {
                    "associative list with keys may not have a null element".into()
                } else {
                    "associative list with keys may not have non-map elements".into()
                });
            };
            let mut fields = Vec::with_capacity(keys.len());
            for key in keys {
                match map.get(*key).cloned().or_else(|| key_default(items, key)) {
                    Some(value) => fields.push((key.to_string(), value)),
                    None => {
                        return Err(format!(
                            "associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                        ));
                    }
                }
            }
            fields.sort_by(|a, b| a.0.cmp(&b.0));
            Ok(PathElement::Key(fields))
        }
        ListKind::Set => match item {
            Value::Object(_) => {
                Err("associative list without keys has an element that's a map type".into())
            }
            Value::Array(_) => Err("not supported: associative list with lists as elements".into()),
            Value::Null => {
                Err("associative list without keys has an element that's an explicit null".into())
            }
            scalar => Ok(PathElement::Value(scalar.clone())),
        },
        ListKind::Atomic => Err("invalid indexing of non-associative list".into()),
    }
}

/// A key field's schema default, which stands in for a missing key.
fn key_default(items: TypeRef<'_>, key: &str) -> Option<Value> {
    match items.atom(None) {
        Atom::Map { fields, .. } => fields?.get(key)?.get("default").cloned(),
        _ => None,
    }
}

fn as_items(value: Option<&Value>) -> &[Value] {
    match value {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}

fn as_map(value: Option<&Value>) -> Option<&Map<String, Value>> {
    match value {
        Some(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// Checks what the walkers rely on: every field is declared, every item of a map list has its keys, set items
/// are scalars, and (unless `allow_duplicates`) no two items share a key.
pub fn validate(
    value: &Value,
    ty: TypeRef<'_>,
    allow_duplicates: bool,
) -> Result<(), ValidationErrors> {
    let mut errors = ValidationErrors::default();
    validate_at(value, ty, allow_duplicates, &mut Vec::new(), &mut errors);
    errors.result()
}

fn validate_at(
    value: &Value,
    ty: TypeRef<'_>,
    dups: bool,
    path: &mut Path,
    errors: &mut ValidationErrors,
) {
    match ty.atom(Some(value)) {
        Atom::Scalar => {}
        Atom::List { items, kind } => {
            if kind == ListKind::Atomic {
                return;
            }
            let mut seen = BTreeSet::new();
            for (i, item) in as_items(Some(value)).iter().enumerate() {
                let element = match item_element(items, &kind, item) {
                    Ok(element) => element,
                    Err(e) => {
                        errors.push(path, format!("element {i}: {e}"));
                        return;
                    }
                };
                if !dups && seen.contains(&element) {
                    errors.push(path, format!("duplicate entries for key {element}"));
                }
                path.push(element.clone());
                validate_at(item, items, dups, path, errors);
                path.pop();
                if !dups {
                    seen.insert(element);
                }
            }
        }
        Atom::Map {
            fields,
            elements,
            atomic,
        } => {
            if atomic {
                return;
            }
            let closed = ty.closed_fields();
            for (key, child) in as_map(Some(value)).into_iter().flatten() {
                let (child_ty, _) = TypeRef::field(fields, elements, key);
                path.push(PathElement::Field(key.clone()));
                if closed.is_some_and(|declared| !declared.contains_key(key)) {
                    errors.push(path, "field not declared in schema");
                } else {
                    validate_at(child, child_ty, dups, path, errors);
                }
                path.pop();
            }
        }
    }
}

/// The fields `value` sets (upstream's `ToFieldSet`): scalars, atomic lists and maps, list items, and map entries
/// that are empty, null or not declared fields.
pub fn to_field_set(value: &Value, ty: TypeRef<'_>) -> Set {
    let mut set = Set::new();
    field_set_at(value, ty, &mut Vec::new(), &mut set);
    set
}

fn field_set_at(value: &Value, ty: TypeRef<'_>, path: &mut Path, set: &mut Set) {
    match ty.atom(Some(value)) {
        Atom::Scalar => set.insert(path),
        Atom::List {
            kind: ListKind::Atomic,
            ..
        } => set.insert(path),
        Atom::List { items, kind } => {
            let list = as_items(Some(value));
            let elements: Vec<Option<PathElement>> = list
                .iter()
                .map(|item| item_element(items, &kind, item).ok())
                .collect();
            // Indexed by element, so that a long list costs n log n, not n².
            let mut seen = BTreeSet::new();
            let mut duplicates = BTreeSet::new();
            for element in elements.iter().flatten() {
                if !seen.insert(element) && duplicates.insert(element.clone()) {
                    path.push(element.clone());
                    set.insert(path);
                    path.pop();
                }
            }
            for (item, element) in list.iter().zip(elements) {
                let Some(element) = element else { continue };
                if duplicates.contains(&element) {
                    continue;
                }
                path.push(element);
                field_set_at(item, items, path, set);
                set.insert(path);
                path.pop();
            }
        }
        Atom::Map { atomic: true, .. } => set.insert(path),
        Atom::Map {
            fields, elements, ..
        } => {
            for (key, child) in as_map(Some(value)).into_iter().flatten() {
                let (child_ty, declared) = TypeRef::field(fields, elements, key);
                path.push(PathElement::Field(key.clone()));
                field_set_at(child, child_ty, path, set);
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if empty || !declared {
                    set.insert(path);
                }
                path.pop();
            }
        }
    }
}

/// What changed from one value to another.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    /// Leaves out `fields` and everything below them.
    pub fn exclude(&self, fields: &Set) -> Comparison {
        Comparison {
            added: self.added.recursive_difference(fields),
            modified: self.modified.recursive_difference(fields),
            removed: self.removed.recursive_difference(fields),
        }
    }
}

/// Compares `lhs` (old) with `rhs` (new); either may be absent, not both.
pub fn compare(lhs: &Value, rhs: &Value, ty: TypeRef<'_>) -> Result<Comparison, ValidationErrors> {
    let mut walker = Compare {
        out: Comparison::default(),
        errors: ValidationErrors::default(),
    };
    walker.compare(Some(lhs), Some(rhs), ty, &mut Vec::new());
    walker.errors.result().map(|()| walker.out)
}

struct Compare {
    out: Comparison,
    errors: ValidationErrors,
}

/// Whether two atoms are of the same kind (a value of another kind than its schema is treated as a leaf).
fn same_kind(a: &Atom<'_>, b: &Atom<'_>) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

fn is_empty_container(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => true,
        Some(Value::Array(items)) => items.is_empty(),
        Some(Value::Object(map)) => map.is_empty(),
        _ => false,
    }
}

impl Compare {
    fn compare(
        &mut self,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        ty: TypeRef<'_>,
        path: &mut Path,
    ) {
        let atom = ty.atom(rhs.or(lhs));
        let mut in_leaf = false;
        if lhs.is_some() && rhs.is_some() && !same_kind(&ty.atom(lhs), &atom) {
            self.leaf(lhs, rhs, path, &mut in_leaf);
        } else {
            match atom {
                Atom::Scalar => self.leaf(lhs, rhs, path, &mut in_leaf),
                Atom::List { items, kind } => {
                    if kind == ListKind::Atomic
                        || (is_empty_container(lhs) && is_empty_container(rhs))
                    {
                        self.leaf(lhs, rhs, path, &mut in_leaf);
                    } else {
                        self.list_items(items, &kind, lhs, rhs, path);
                    }
                }
                Atom::Map {
                    fields,
                    elements,
                    atomic,
                } => {
                    if atomic || (is_empty_container(lhs) && is_empty_container(rhs)) {
                        self.leaf(lhs, rhs, path, &mut in_leaf);
                    } else {
                        let (l, r) = (as_map(lhs), as_map(rhs));
                        let mut keys: Vec<&String> = l.into_iter().flat_map(|m| m.keys()).collect();
                        keys.extend(
                            r.into_iter()
                                .flat_map(|m| m.keys())
                                .filter(|k| !l.is_some_and(|l| l.contains_key(*k))),
                        );
                        for key in keys {
                            let (child_ty, _) = TypeRef::field(fields, elements, key);
                            path.push(PathElement::Field(key.clone()));
                            self.compare(
                                l.and_then(|m| m.get(key)),
                                r.and_then(|m| m.get(key)),
                                child_ty,
                                path,
                            );
                            path.pop();
                        }
                    }
                }
            }
        }
        if !in_leaf {
            if lhs.is_none() {
                self.out.added.insert(path);
            } else if rhs.is_none() {
                self.out.removed.insert(path);
            }
        }
    }

    fn leaf(&mut self, lhs: Option<&Value>, rhs: Option<&Value>, path: &Path, in_leaf: &mut bool) {
        *in_leaf = true;
        match (lhs, rhs) {
            (None, _) => self.out.added.insert(path),
            (_, None) => self.out.removed.insert(path),
            (Some(l), Some(r)) if !values_equal(l, r) => self.out.modified.insert(path),
            _ => {}
        }
    }

    fn list_items(
        &mut self,
        items: TypeRef<'_>,
        kind: &ListKind<'_>,
        lhs: Option<&Value>,
        rhs: Option<&Value>,
        path: &mut Path,
    ) {
        let mut order: Vec<PathElement> = Vec::new();
        let mut positions: BTreeMap<PathElement, usize> = BTreeMap::new();
        let mut left: HashMap<usize, Vec<&Value>> = HashMap::new();
        let mut right: HashMap<usize, Vec<&Value>> = HashMap::new();
        for (side, values) in [(0, as_items(lhs)), (1, as_items(rhs))] {
            for (i, item) in values.iter().enumerate() {
                let element = match item_element(items, kind, item) {
                    Ok(element) => element,
                    Err(e) => {
                        self.errors.push(path, format!("element {i}: {e}"));
                        continue;
                    }
                };
                let index = match positions.get(&element) {
                    Some(&index) => index,
                    None => {
                        positions.insert(element.clone(), order.len());
                        order.push(element);
                        order.len() - 1
                    }
                };
                let map = if side == 0 { &mut left } else { &mut right };
                map.entry(index).or_default().push(item);
            }
        }
        for (index, element) in order.into_iter().enumerate() {
            let l = left.remove(&index).unwrap_or_default();
            let r = right.remove(&index).unwrap_or_default();
            path.push(element);
            match (l.len(), r.len()) {
                (0, 0) => {}
                (0..=1, 0..=1) => self.compare(l.first().copied(), r.first().copied(), items, path),
                (2.., 2..) => {
                    if l.len() != r.len() || l.iter().zip(&r).any(|(p, q)| !values_equal(p, q)) {
                        self.out.modified.insert(path);
                    }
                }
                (2.., _) => {
                    if let Some(r) = r.first() {
                        self.compare(None, Some(r), items, path);
                    }
                    self.out.removed.insert(path);
                }
                (_, _) => {
                    if let Some(l) = l.first() {
                        self.compare(Some(l), None, items, path);
                    }
                    self.out.added.insert(path);
                }
            }
            path.pop();
        }
    }
}

/// Equality as structured-merge-diff's `value.Equals`: numbers compare by value (`1` equals `1.0`).
pub fn values_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| values_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| values_equal(v, w)))
        }
        _ => a == b,
    }
}

/// Merges an applied configuration (`rhs`) into an object (`lhs`): the configuration's values win, map lists and
/// sets merge item by item in the configuration's order, everything else is replaced whole. `None` when nothing is
/// left (upstream drops an emptied list or map).
pub fn merge(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    ty: TypeRef<'_>,
) -> Result<Option<Value>, ValidationErrors> {
    let mut errors = ValidationErrors::default();
    let out = merge_at(lhs, rhs, ty, &mut Vec::new(), &mut errors);
    errors.result().map(|()| out)
}

fn keep_rhs(lhs: Option<&Value>, rhs: Option<&Value>) -> Option<Value> {
    rhs.or(lhs).cloned()
}

fn merge_at(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    ty: TypeRef<'_>,
    path: &mut Path,
    errors: &mut ValidationErrors,
) -> Option<Value> {
    let atom = ty.atom(rhs.or(lhs));
    if lhs.is_some() && rhs.is_some() && !same_kind(&ty.atom(lhs), &atom) {
        return keep_rhs(lhs, rhs);
    }
    match atom {
        Atom::Scalar => keep_rhs(lhs, rhs),
        Atom::List { items, kind } => {
            if kind == ListKind::Atomic || (is_empty_container(lhs) && is_empty_container(rhs)) {
                return keep_rhs(lhs, rhs);
            }
            merge_list(items, &kind, lhs, rhs, path, errors)
        }
        Atom::Map {
            fields,
            elements,
            atomic,
        } => {
            if atomic || (is_empty_container(lhs) && is_empty_container(rhs)) {
                return keep_rhs(lhs, rhs);
            }
            let (l, r) = (as_map(lhs), as_map(rhs));
            let mut out = Map::new();
            let keys = l
                .into_iter()
                .flat_map(|m| m.keys())
                .chain(r.into_iter().flat_map(|m| m.keys()));
            for key in keys {
                if out.contains_key(key) {
                    continue;
                }
                let (child_ty, _) = TypeRef::field(fields, elements, key);
                path.push(PathElement::Field(key.clone()));
                let merged = merge_at(
                    l.and_then(|m| m.get(key)),
                    r.and_then(|m| m.get(key)),
                    child_ty,
                    path,
                    errors,
                );
                path.pop();
                if let Some(merged) = merged {
                    out.insert(key.clone(), merged);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
    }
}

/// The items of a list by path element.
type Observed<'v> = BTreeMap<PathElement, Option<&'v Value>>;

/// Items and their path elements; duplicates (allowed on the left only) map to `null` as upstream.
fn index_items<'v>(
    items: TypeRef<'_>,
    kind: &ListKind<'_>,
    list: &'v [Value],
    allow_duplicates: bool,
    path: &Path,
    errors: &mut ValidationErrors,
) -> (Vec<PathElement>, Observed<'v>) {
    let mut elements = Vec::new();
    let mut observed = Observed::new();
    for (i, item) in list.iter().enumerate() {
        let element = match item_element(items, kind, item) {
            Ok(element) => element,
            Err(e) => {
                errors.push(path, format!("element {i}: {e}"));
                continue;
            }
        };
        match observed.get_mut(&element) {
            Some(_) if !allow_duplicates => {
                errors.push(path, format!("duplicate entries for key {element}"));
                continue;
            }
            Some(slot) => *slot = None,
            None => {
                observed.insert(element.clone(), Some(item));
            }
        }
        elements.push(element);
    }
    (elements, observed)
}

fn lookup<'v>(observed: &Observed<'v>, element: &PathElement) -> Option<Option<&'v Value>> {
    observed.get(element).copied()
}

const NULL: Value = Value::Null;

fn merge_list(
    items: TypeRef<'_>,
    kind: &ListKind<'_>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Path,
    errors: &mut ValidationErrors,
) -> Option<Value> {
    let (left_list, right_list) = (as_items(lhs), as_items(rhs));
    let before = errors.0.len();
    let (right, right_seen) = index_items(items, kind, right_list, false, path, errors);
    let (left, left_seen) = index_items(items, kind, left_list, true, path, errors);
    if errors.0.len() != before {
        return None;
    }
    // Item values: a duplicated left item reads as null, as upstream.
    let left_value = |e: &PathElement| lookup(&left_seen, e).map(|v| v.unwrap_or(&NULL));
    let right_value = |e: &PathElement| lookup(&right_seen, e).map(|v| v.unwrap_or(&NULL));
    let mut shared: std::collections::VecDeque<&PathElement> = right
        .iter()
        .filter(|e| lookup(&left_seen, e).is_some())
        .collect();
    let mut next_shared = shared.pop_front();
    let mut merged_right: BTreeSet<PathElement> = BTreeSet::new();
    let mut out = Vec::new();
    let mut merge_item = |element: &PathElement,
                          l: Option<&Value>,
                          r: Option<&Value>,
                          path: &mut Path,
                          errors: &mut ValidationErrors| {
        path.push(element.clone());
        let merged = merge_at(l, r, items, path, errors);
        path.pop();
        if let Some(merged) = merged {
            out.push(merged);
        }
    };
    let (mut li, mut ri) = (0, 0);
    while li < left.len() || ri < right.len() {
        if li < left.len() && ri < right.len() {
            let element = &left[li];
            if *element == right[ri] {
                merged_right.insert(element.clone());
                merge_item(
                    element,
                    left_value(element),
                    right_value(element),
                    path,
                    errors,
                );
                li += 1;
                ri += 1;
                next_shared = shared.pop_front();
                continue;
            }
            if lookup(&right_seen, element).is_some() && next_shared.is_some_and(|s| s != element) {
                li += 1;
                continue;
            }
        }
        if li < left.len() {
            let element = &left[li];
            if lookup(&right_seen, element).is_none() {
                merge_item(element, left_list.get(li), None, path, errors);
                li += 1;
                continue;
            } else if merged_right.contains(element) {
                li += 1;
            }
        }
        if ri < right.len() {
            let element = &right[ri];
            merged_right.insert(element.clone());
            merge_item(
                element,
                left_value(element),
                right_value(element),
                path,
                errors,
            );
            ri += 1;
            if next_shared.is_some_and(|s| s == element) {
                next_shared = shared.pop_front();
            }
        }
    }
    (!out.is_empty()).then_some(Value::Array(out))
}

/// `value` without the fields of `set` (a member goes with everything below it). An emptied list or map becomes
/// null, as upstream.
pub fn remove_items(value: &Value, set: &Set, ty: TypeRef<'_>) -> Value {
    match ty.atom(Some(value)) {
        Atom::Scalar => value.clone(),
        Atom::List {
            kind: ListKind::Atomic,
            ..
        } => Value::Null,
        Atom::List { items, kind } => {
            let mut out = Vec::new();
            for item in as_items(Some(value)) {
                let Ok(element) = item_element(items, &kind, item) else {
                    out.push(item.clone());
                    continue;
                };
                if set.has(std::slice::from_ref(&element)) {
                    continue;
                }
                match set.with_prefix(&element) {
                    Some(below) => out.push(remove_items(item, below, items)),
                    None => out.push(item.clone()),
                }
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Array(out)
            }
        }
        Atom::Map { atomic: true, .. } => Value::Null,
        Atom::Map {
            fields, elements, ..
        } => {
            let mut out = Map::new();
            for (key, child) in as_map(Some(value)).into_iter().flatten() {
                let element = PathElement::Field(key.clone());
                if set.has(std::slice::from_ref(&element)) {
                    continue;
                }
                let (child_ty, _) = TypeRef::field(fields, elements, key);
                match set.with_prefix(&element) {
                    Some(below) => out.insert(key.clone(), remove_items(child, below, child_ty)),
                    None => out.insert(key.clone(), child.clone()),
                };
            }
            if out.is_empty() {
                Value::Null
            } else {
                Value::Object(out)
            }
        }
    }
}

/// `set` with every declared struct field that has paths below it also a member (upstream's
/// `EnsureNamedFieldsAreMembers`), so that removing it removes the whole field.
pub fn ensure_named_fields_are_members(set: &Set, ty: TypeRef<'_>) -> Set {
    let atom = ty.atom(None);
    let mut out = Set::new();
    for member in set.members() {
        out.add_member(member.clone());
    }
    for (element, child) in set.children() {
        let child_ty = match (&atom, element) {
            (
                Atom::Map {
                    fields, elements, ..
                },
                PathElement::Field(name),
            ) => {
                let (child_ty, declared) = TypeRef::field(*fields, *elements, name);
                if declared {
                    out.add_member(element.clone());
                }
                child_ty
            }
            (Atom::List { items, .. }, PathElement::Key(_)) => *items,
            _ => TypeRef::DEDUCED,
        };
        let below = ensure_named_fields_are_members(child, child_ty);
        for path in below.paths() {
            let mut full = vec![element.clone()];
            full.extend(path);
            out.insert(&full);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value() {
        // A float field applied as an integer (`cost: 2` in YAML) is the same value, not a modification.
        let schema = json!({"type": "object", "properties": {"cost": {"type": "number"}}});
        let comparison = compare(
            &json!({"cost": 2.0}),
            &json!({"cost": 2}),
            TypeRef(Some(&schema)),
        )
        .unwrap();
        assert!(comparison.modified.is_empty(), "{comparison:?}");
        let comparison = compare(
            &json!({"cost": 2.0}),
            &json!({"cost": 2.5}),
            TypeRef(Some(&schema)),
        )
        .unwrap();
        assert!(!comparison.modified.is_empty());
    }
}
