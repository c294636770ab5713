//! `as=Table`: server-side printing for `kubectl get`, as upstream's CRD table convertor does it: Name, the printer
//! columns of the requested version (its own, or the hub's; cells read by JSONPath from the object in that
//! version), and Age (what
//! users of CRDs see; upstream's generic registry shows "Created At" instead).

use serde_json::Value;

use super::output::partial_metadata;
use super::params::Params;
use crate::codec::MediaType;
use crate::meta::{ListMeta, RawExtension, Table, TableColumnDefinition, TableRow};
use crate::registry::ApiError;
use crate::runtime::{PrinterColumn, Resource, ResourceCodec};

const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATED_AT_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// `TableOptions.includeObject`: what each row carries besides its cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(params: &Params) -> Result<Self, ApiError> {
        match params.get("includeObject").unwrap_or("") {
            "" | "Metadata" => Ok(IncludeObject::Metadata),
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            other => Err(ApiError::bad_request(format!(
                "includeObject: Unsupported value: {other:?}: supported values: \"Metadata\", \"None\", \"Object\""
            ))),
        }
    }
}

/// The column definitions of a table with the printer columns `printer` (the served version's).
pub(crate) fn columns(printer: &[PrinterColumn]) -> Vec<TableColumnDefinition> {
    let mut columns = vec![TableColumnDefinition {
        name: "Name".into(),
        type_: "string".into(),
        format: "name".into(),
        description: NAME_DESCRIPTION.into(),
        priority: 0,
    }];
    columns.extend(printer.iter().map(|c| TableColumnDefinition {
        name: c.name.into(),
        type_: c.type_.into(),
        format: c.format.into(),
        description: c.description.into(),
        priority: c.priority,
    }));
    columns.push(TableColumnDefinition {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: CREATED_AT_DESCRIPTION.into(),
        priority: 0,
    });
    columns
}

/// A table of `objects` as served in `version`.
pub(crate) fn table<T: Resource>(
    codec: &ResourceCodec<T>,
    version: &str,
    objects: &[T],
    metadata: ListMeta,
    include: IncludeObject,
) -> Result<Table, ApiError> {
    let rows = objects
        .iter()
        .map(|object| row(codec, version, object, include))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Table {
        metadata,
        column_definitions: columns(codec.printer_columns(version)),
        rows,
    })
}

fn row<T: Resource>(
    codec: &ResourceCodec<T>,
    version: &str,
    object: &T,
    include: IncludeObject,
) -> Result<TableRow, ApiError> {
    let json = codec
        .encode(object, version, MediaType::Json)
        .map_err(ApiError::internal)?;
    let value: Value = serde_json::from_slice(&json).map_err(ApiError::internal)?;
    let meta = object.metadata();
    let mut cells = vec![Value::String(meta.name.clone())];
    cells.extend(
        codec
            .printer_columns(version)
            .iter()
            .map(|c| cell(c, &value)),
    );
    cells.push(
        meta.creation_timestamp
            .as_ref()
            .map(|t| age(t.0))
            .unwrap_or(Value::Null),
    );
    let object = match include {
        IncludeObject::None => RawExtension::default(),
        IncludeObject::Metadata => RawExtension {
            raw: serde_json::to_vec(&partial_metadata(meta)).map_err(ApiError::internal)?,
        },
        IncludeObject::Object => RawExtension { raw: json },
    };
    Ok(TableRow {
        cells,
        conditions: Vec::new(),
        object,
    })
}

/// One printer-column cell: the value at the column's JSONPath, typed as the column declares.
fn cell(column: &PrinterColumn, object: &Value) -> Value {
    let Some(value) = json_path(object, column.json_path) else {
        return Value::Null;
    };
    match column.type_ {
        "integer" => value.as_i64().map(Value::from).unwrap_or(Value::Null),
        "number" => value.as_f64().map(Value::from).unwrap_or(Value::Null),
        "boolean" => value.as_bool().map(Value::from).unwrap_or(Value::Null),
        "date" => value
            .as_str()
            .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
            .map(|t| age(t.with_timezone(&chrono::Utc)))
            .unwrap_or(Value::Null),
        _ => match value {
            Value::String(s) => Value::String(s.clone()),
            other => Value::String(other.to_string()),
        },
    }
}

/// How long ago `t` was, as kubectl prints ages (`5m`, `3d`).
fn age(t: chrono::DateTime<chrono::Utc>) -> Value {
    let since = chrono::Utc::now().signed_duration_since(t);
    Value::String(human_duration(since.to_std().unwrap_or_default()))
}

/// Evaluates a simple JSONPath (`.spec.toppings[0].name`, optionally in `{...}`).
pub(super) fn json_path<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let mut current = value;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (field, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if !field.is_empty() {
            current = current.get(field)?;
        }
        for index in indices.split('[').filter(|s| !s.is_empty()) {
            let index: usize = index.strip_suffix(']')?.parse().ok()?;
            current = current.get(index)?;
        }
    }
    Some(current)
}

/// Upstream's `duration.HumanDuration`: `45s`, `5m10s`, `3h`, `2d4h`, `3y`.
pub(crate) fn human_duration(d: std::time::Duration) -> String {
    let seconds = d.as_secs();
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn paths() {
        let v: Value = serde_json::json!({"spec": {"toppings": [{"name": "salami"}]}, "status": {"cost": 1.5}});
        assert_eq!(json_path(&v, ".status.cost"), Some(&Value::from(1.5)));
        assert_eq!(
            json_path(&v, "{.spec.toppings[0].name}"),
            Some(&Value::from("salami"))
        );
        assert_eq!(json_path(&v, ".spec.toppings[3].name"), None);
        assert_eq!(json_path(&v, ".spec.toppings[x]"), None);
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(Duration::from_secs(45)), "45s");
        assert_eq!(human_duration(Duration::from_secs(310)), "5m10s");
        assert_eq!(human_duration(Duration::from_secs(3 * 3600 + 60)), "3h1m");
        assert_eq!(human_duration(Duration::from_secs(50 * 3600)), "2d2h");
    }
}
