//! Printer columns checked against the schema of the version they print, when the server starts: what
//! kube-apiserver checks of a CRD's `additionalPrinterColumns` (with its texts), and that the JSON path leads
//! through fields the version declares.

use serde_json::Value as Json;

use super::PrinterColumn;

/// The column types kube-apiserver accepts.
const TYPES: [&str; 5] = ["boolean", "date", "integer", "number", "string"];

/// Appends to `errors` what is wrong with `columns` of version `version` (at `at`, e.g. `spec.versions[0]`) whose
/// root schema is `schema`.
pub(crate) fn check(
    columns: &[PrinterColumn],
    schema: &Json,
    at: &str,
    version: &str,
    errors: &mut Vec<String>,
) {
    for (index, column) in columns.iter().enumerate() {
        let at = format!("{at}.additionalPrinterColumns[{index}]");
        if !TYPES.contains(&column.type_) {
            errors.push(format!(
                "{at}.type: Invalid value: {:?}: must be one of {}",
                column.type_,
                TYPES.join(",")
            ));
        }
        let path = column.json_path;
        if path.is_empty() {
            errors.push(format!("{at}.JSONPath: Required value"));
        } else if !path.starts_with('.') || path.contains(['{', '}']) {
            errors.push(format!(
                "{at}.JSONPath: Invalid value: {path:?}: must be a simple json path starting with ."
            ));
        } else if let Err(problem) = resolve(path, schema) {
            errors.push(format!(
                "{at}.JSONPath: Invalid value: {path:?}: {problem} in the schema of version {version}"
            ));
        }
    }
}

/// The node of `schema` itself, or the one alternative an optional field's schema wraps its type in.
fn unwrap(schema: &Json) -> &Json {
    if schema.get("type").is_none() && schema.get("properties").is_none() {
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some([one]) = schema.get(key).and_then(Json::as_array).map(Vec::as_slice) {
                return unwrap(one);
            }
        }
    }
    schema
}

/// Whether data of `schema` may hold any field (no declared properties to check against).
fn open(schema: &Json) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Json::Bool(true))
        || schema.get("x-kubernetes-int-or-string") == Some(&Json::Bool(true))
        || (schema.get("properties").is_none()
            && matches!(
                schema.get("type").and_then(Json::as_str),
                None | Some("object")
            ))
}

/// Follows a simple JSON path (`.spec.items[0].name`, `[*]` too) through `schema`: what is missing on the way.
fn resolve(path: &str, schema: &Json) -> Result<(), String> {
    let mut node = unwrap(schema);
    for segment in path.split('.').skip(1) {
        let (name, indexes) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if !name.is_empty() {
            if let Some(prop) = node.get("properties").and_then(|p| p.get(name)) {
                node = unwrap(prop);
            } else if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object())
            {
                node = unwrap(values);
            } else if open(node) {
                return Ok(());
            } else if node.get("properties").is_some() {
                return Err(format!("no field {name:?}"));
            } else {
                let t = node.get("type").and_then(Json::as_str).unwrap_or("object");
                return Err(format!("{name:?} is selected in a value of type {t}"));
            }
        }
        for _ in indexes.matches('[') {
            match node.get("items") {
                Some(items) if node.get("type").and_then(Json::as_str) == Some("array") => {
                    node = unwrap(items)
                }
                _ if open(node) => return Ok(()),
                _ => return Err(format!("{segment:?} indexes what is not a list")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn column(name: &'static str, type_: &'static str, json_path: &'static str) -> PrinterColumn {
        PrinterColumn {
            name,
            type_,
            format: "",
            description: "",
            json_path,
            priority: 0,
        }
    }

    fn schema() -> Json {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "quantity": {"type": "integer"},
                "tags": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "any": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            }},
            "status": {"allOf": [{"type": "object", "properties": {"ready": {"type": "boolean"}}}]},
        }})
    }

    fn errors(columns: &[PrinterColumn]) -> Vec<String> {
        let mut errors = Vec::new();
        check(
            columns,
            &schema(),
            "spec.versions[1]",
            "v1beta1",
            &mut errors,
        );
        errors
    }

    #[test]
    fn paths_through_declared_fields_are_accepted() {
        let ok = [
            column("Q", "integer", ".spec.quantity"),
            column("T", "string", ".spec.tags[0].n"),
            column("T", "string", ".spec.tags[*].n"),
            column("L", "string", ".spec.labels.app"),
            column("A", "string", ".spec.any.whatever.deep"),
            column("R", "boolean", ".status.ready"),
            column("M", "string", ".metadata.name"),
        ];
        // `metadata` is not in this schema's properties: a path into a field the schema does not declare is refused,
        // so this test's schema declares it the way generated schemas do
        let mut schema = schema();
        schema["properties"]["metadata"] =
            json!({"type": "object", "properties": {"name": {"type": "string"}}});
        let mut found = Vec::new();
        check(&ok, &schema, "spec.versions[0]", "v1", &mut found);
        assert_eq!(found, Vec::<String>::new());
    }

    /// The texts kube-apiserver answers for the checks it makes itself (recorded in
    /// `tests/fixtures/crd_checks/recorded.json`), and ours for paths the schema does not have.
    #[test]
    fn bad_columns_are_refused_with_upstreams_texts() {
        assert_eq!(
            errors(&[
                column("A", "string", "spec.name"),
                column("B", "text", ".spec.quantity"),
                column("C", "string", ""),
                column("D", "string", "{.spec.quantity}"),
            ]),
            vec![
                "spec.versions[1].additionalPrinterColumns[0].JSONPath: Invalid value: \"spec.name\": must be a simple json path starting with .",
                "spec.versions[1].additionalPrinterColumns[1].type: Invalid value: \"text\": must be one of boolean,date,integer,number,string",
                "spec.versions[1].additionalPrinterColumns[2].JSONPath: Required value",
                "spec.versions[1].additionalPrinterColumns[3].JSONPath: Invalid value: \"{.spec.quantity}\": must be a simple json path starting with .",
            ]
        );
        assert_eq!(
            errors(&[
                column("A", "integer", ".spec.quantity"),
                column("B", "integer", ".spec.quantiy"),
                column("C", "string", ".spec.quantity.value"),
                column("D", "string", ".spec.quantity[0]"),
                column("E", "boolean", ".status.redy"),
            ]),
            vec![
                "spec.versions[1].additionalPrinterColumns[1].JSONPath: Invalid value: \".spec.quantiy\": no field \"quantiy\" in the schema of version v1beta1",
                "spec.versions[1].additionalPrinterColumns[2].JSONPath: Invalid value: \".spec.quantity.value\": \"value\" is selected in a value of type integer in the schema of version v1beta1",
                "spec.versions[1].additionalPrinterColumns[3].JSONPath: Invalid value: \".spec.quantity[0]\": \"quantity[0]\" indexes what is not a list in the schema of version v1beta1",
                "spec.versions[1].additionalPrinterColumns[4].JSONPath: Invalid value: \".status.redy\": no field \"redy\" in the schema of version v1beta1",
            ]
        );
        let recorded: Vec<Json> = serde_json::from_str(include_str!(
            "../../tests/fixtures/crd_checks/recorded.json"
        ))
        .unwrap();
        for name in [
            "column_no_dot",
            "column_braces",
            "column_bad_type",
            "column_empty_path",
        ] {
            let case = recorded.iter().find(|c| c["name"] == name).unwrap();
            let message = case["message"].as_str().unwrap();
            let (_, upstream) = message.split_once("is invalid: spec.").unwrap();
            let c = &case["columns"][0];
            let leak = |s: &Json| -> &'static str {
                Box::leak(s.as_str().unwrap().to_owned().into_boxed_str())
            };
            let schema = json!({"type": "object", "properties": {"spec": case["spec"]}});
            let mut ours = Vec::new();
            let columns = [column(
                leak(&c["name"]),
                leak(&c["type"]),
                leak(&c["jsonPath"]),
            )];
            check(&columns, &schema, "spec.versions[1]", "v1beta1", &mut ours);
            assert_eq!(ours, vec![format!("spec.versions[1].{upstream}")], "{name}");
        }
    }
}
