//! Stable protobuf tags: a served type's fields take the tag of their position unless they say
//! `#[served(tag = N)]`, so reordering, inserting or removing a field would silently change what stored protobuf
//! means. A table of every version's tags is checked in beside the tests (as go-to-protobuf keeps each package's
//! `generated.proto`), and [`protobuf_tags_test!`](crate::protobuf_tags_test) fails when a recorded field's tag
//! changes or a removed field's tag is reused; added fields pass.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use super::{Resource, ResourceCodec};

/// The protobuf tags of a served struct's fields and of the derived structs inside it, by JSON path
/// (`spec.toppings.quantity`; list items and map values add no segment). Implemented by `#[derive(Versioned)]`.
pub trait ProtobufTags {
    /// Adds `(path, tag)` for every field, each path after `prefix`.
    fn protobuf_tags(prefix: &str, out: &mut Vec<(String, u32)>);
}

impl<T: ProtobufTags> ProtobufTags for Vec<T> {
    fn protobuf_tags(prefix: &str, out: &mut Vec<(String, u32)>) {
        T::protobuf_tags(prefix, out);
    }
}

impl<T: ProtobufTags> ProtobufTags for Option<T> {
    fn protobuf_tags(prefix: &str, out: &mut Vec<(String, u32)>) {
        T::protobuf_tags(prefix, out);
    }
}

impl<T: ProtobufTags> ProtobufTags for Box<T> {
    fn protobuf_tags(prefix: &str, out: &mut Vec<(String, u32)>) {
        T::protobuf_tags(prefix, out);
    }
}

impl<K, T: ProtobufTags> ProtobufTags for BTreeMap<K, T> {
    fn protobuf_tags(prefix: &str, out: &mut Vec<(String, u32)>) {
        T::protobuf_tags(prefix, out);
    }
}

impl<K, T: ProtobufTags, S> ProtobufTags for std::collections::HashMap<K, T, S> {
    fn protobuf_tags(prefix: &str, out: &mut Vec<(String, u32)>) {
        T::protobuf_tags(prefix, out);
    }
}

/// Finds the tags of a field's type when it has them (a derived struct, or a container of one) and nothing
/// otherwise (scalars, `ObjectMeta`): the by-reference impl is found first when it applies. Not for direct use.
#[doc(hidden)]
pub struct TagProbe<T: ?Sized>(PhantomData<fn() -> Box<T>>);

impl<T: ?Sized> TagProbe<T> {
    #[doc(hidden)]
    pub fn new() -> Self {
        TagProbe(PhantomData)
    }
}

impl<T: ?Sized> Default for TagProbe<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[doc(hidden)]
pub trait NestedTags {
    fn nested_tags(&self, prefix: &str, out: &mut Vec<(String, u32)>);
}

impl<T: ProtobufTags> NestedTags for &TagProbe<T> {
    fn nested_tags(&self, prefix: &str, out: &mut Vec<(String, u32)>) {
        T::protobuf_tags(prefix, out);
    }
}

#[doc(hidden)]
pub trait NoNestedTags {
    fn nested_tags(&self, prefix: &str, out: &mut Vec<(String, u32)>);
}

impl<T: ?Sized> NoNestedTags for TagProbe<T> {
    fn nested_tags(&self, _prefix: &str, _out: &mut Vec<(String, u32)>) {}
}

/// `spec` + `cost` → `spec.cost`.
#[doc(hidden)]
pub fn tag_path(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

/// Writes a test comparing the protobuf tags of every version a codec serves with a table checked in at `path`
/// (relative to the crate): it fails when a recorded field's tag changed (a field was moved, inserted before it
/// or removed before it) or a removed field's tag is used again, naming the field and saying how to keep its
/// tag; fields not yet in the table pass. `APISERVER_PROTOBUF_TAGS=overwrite cargo test` writes the table anew
/// (keeping removed fields, whose tags stay reserved); commit it with the type.
///
/// ```ignore
/// apiserver::protobuf_tags_test!(pizza_protobuf_tags, pizza_apiserver::restaurant::Pizza::codec(), "tests/protobuf-tags/pizzas.txt");
/// ```
#[macro_export]
macro_rules! protobuf_tags_test {
    ($name:ident, $codec:expr, $path:literal) => {
        #[test]
        fn $name() {
            $crate::runtime::check_protobuf_tags(
                &$codec,
                ::std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/", $path)),
            );
        }
    };
}

/// The check of [`protobuf_tags_test!`](crate::protobuf_tags_test): panics with every changed or reused tag.
pub fn check_protobuf_tags<H: Resource>(codec: &ResourceCodec<H>, table: &std::path::Path) {
    let current: BTreeMap<(String, String), u32> = codec
        .protobuf_tags()
        .into_iter()
        .flat_map(|(version, tags)| {
            tags.into_iter()
                .map(move |(path, tag)| ((version.to_string(), path), tag))
        })
        .collect();
    let overwrite = std::env::var("APISERVER_PROTOBUF_TAGS").is_ok_and(|v| v == "overwrite");
    let recorded = match std::fs::read_to_string(table) {
        Ok(text) => parse_table(&text).unwrap_or_else(|e| panic!("{}: {e}", table.display())),
        Err(_) if overwrite => BTreeMap::new(),
        Err(e) => panic!(
            "no protobuf tag table at {} ({e}); write it with `APISERVER_PROTOBUF_TAGS=overwrite cargo test` and \
             commit it",
            table.display()
        ),
    };
    let problems = compare(&recorded, &current);
    if overwrite {
        let mut merged = recorded;
        merged.extend(current);
        std::fs::write(table, render_table(H::KIND, &merged))
            .unwrap_or_else(|e| panic!("writing {}: {e}", table.display()));
        return;
    }
    assert!(
        problems.is_empty(),
        "{} protobuf tags differ from {}:\n  {}\nStored protobuf names fields by tag: a changed tag makes stored objects \
         read wrongly. Keep each field's recorded tag with `#[served(tag = N)]`. If no object of this kind was ever \
         stored in protobuf, write the table anew with `APISERVER_PROTOBUF_TAGS=overwrite cargo test`.",
        H::KIND,
        table.display(),
        problems.join("\n  ")
    );
}

type Table = BTreeMap<(String, String), u32>;

/// Lines of `<version> <json path> <tag>`; `#` starts a comment.
fn parse_table(text: &str) -> Result<Table, String> {
    let mut table = Table::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [version, path, tag] = parts.as_slice() else {
            return Err(format!(
                "line {}: expected `<version> <path> <tag>`",
                number + 1
            ));
        };
        let tag = tag
            .parse()
            .map_err(|_| format!("line {}: {tag:?} is not a tag", number + 1))?;
        table.insert((version.to_string(), path.to_string()), tag);
    }
    Ok(table)
}

fn render_table(kind: &str, table: &Table) -> String {
    let mut text = format!(
        "# Protobuf tags of {kind}, by version and JSON path; checked by protobuf_tags_test!. Lines of removed\n\
         # fields stay: their tags must not be used again.\n"
    );
    for ((version, path), tag) in table {
        text.push_str(&format!("{version} {path} {tag}\n"));
    }
    text
}

/// The message a path's field belongs to: the path without its last segment.
fn parent(path: &str) -> &str {
    path.rsplit_once('.').map_or("", |(parent, _)| parent)
}

fn compare(recorded: &Table, current: &Table) -> Vec<String> {
    let mut problems = Vec::new();
    for ((version, path), &tag) in recorded {
        match current.get(&(version.clone(), path.clone())) {
            Some(&now) if now != tag => problems.push(format!(
                "{version} {path}: tag {now}, recorded {tag}: give it #[served(tag = {tag})]"
            )),
            Some(_) => {}
            None => {
                let reused = current.iter().find(|((v, p), t)| {
                    v == version
                        && **t == tag
                        && parent(p) == parent(path)
                        && !recorded.contains_key(&(v.clone(), p.clone()))
                });
                if let Some(((_, other), _)) = reused {
                    problems.push(format!(
                        "{version} {other}: tag {tag} was {path}'s, a removed field: stored {path} would read as \
                         {other}; give {other} an unused tag with #[served(tag = N)] (or, for a rename, delete \
                         {path}'s line)"
                    ));
                }
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(&str, u32)]) -> Table {
        entries
            .iter()
            .map(|(p, t)| (("v1".to_string(), p.to_string()), *t))
            .collect()
    }

    #[test]
    fn moved_fields_and_reused_tags_are_found_added_fields_pass() {
        let recorded = table(&[("spec.a", 1), ("spec.b", 2), ("spec.c", 3)]);
        assert!(compare(&recorded, &recorded).is_empty());
        let added = table(&[("spec.a", 1), ("spec.b", 2), ("spec.c", 3), ("spec.d", 4)]);
        assert!(compare(&recorded, &added).is_empty());
        let swapped = table(&[("spec.a", 1), ("spec.c", 2), ("spec.b", 3)]);
        assert_eq!(
            compare(&recorded, &swapped),
            [
                "v1 spec.b: tag 3, recorded 2: give it #[served(tag = 2)]",
                "v1 spec.c: tag 2, recorded 3: give it #[served(tag = 3)]"
            ]
        );
        // b removed, c kept its tag, a new field d took b's: refused.
        let reused = table(&[("spec.a", 1), ("spec.c", 3), ("spec.d", 2)]);
        let problems = compare(&recorded, &reused);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(
            problems[0].starts_with("v1 spec.d: tag 2 was spec.b's"),
            "{}",
            problems[0]
        );
        // The same tag in another message is no reuse.
        let elsewhere = table(&[("spec.a", 1), ("spec.c", 3), ("status.x", 2)]);
        assert!(compare(&recorded, &elsewhere).is_empty());
    }

    #[test]
    fn tables_read_what_they_write() {
        let recorded = table(&[("spec.a", 1), ("metadata", 1)]);
        assert_eq!(
            parse_table(&render_table("Widget", &recorded)).unwrap(),
            recorded
        );
        assert!(parse_table("v1 spec.a").is_err());
    }
}
