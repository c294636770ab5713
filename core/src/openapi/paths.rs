//! The paths and operations of a resource, as upstream's CRD OpenAPI builder writes them: operation ids, the
//! `x-kubernetes-action` and `x-kubernetes-group-version-kind` extensions kubectl looks for, query parameters
//! (including `fieldValidation` on writes), request bodies and the patch types this server takes.

use serde_json::{Map, Value, json};

use super::schemas::{DELETE_OPTIONS, PATCH, STATUS, kind_name, reference, to_v2};
use crate::runtime::KindDescription;

/// Swagger 2.0 or OpenAPI 3.0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Flavor {
    V2,
    V3,
}

/// What every endpoint produces: upstream's list (`MediaTypesForSerializer`) with its CBOR serializer on.
const OBJECT_MEDIA_TYPES: [&str; 4] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
    "application/cbor",
];
const WATCH_MEDIA_TYPES: [&str; 3] = [
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
    "application/cbor-seq",
];
/// No server-side apply yet. Strategic merge patch is listed, so kubectl's client-side apply computes one from
/// the schemas' `x-kubernetes-patch-*` extensions (it checks this list in OpenAPI v3).
const PATCH_MEDIA_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

const LIST_PARAMETERS: [(&str, &str, &str); 10] = [
    (
        "allowWatchBookmarks",
        "boolean",
        "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
    ),
    (
        "continue",
        "string",
        "The continue option should be set when retrieving more results from the server.",
    ),
    (
        "fieldSelector",
        "string",
        "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
    ),
    (
        "labelSelector",
        "string",
        "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
    ),
    (
        "limit",
        "integer",
        "limit is a maximum number of responses to return for a list call.",
    ),
    (
        "resourceVersion",
        "string",
        "resourceVersion sets a constraint on what resource versions a request may be served from.",
    ),
    (
        "resourceVersionMatch",
        "string",
        "resourceVersionMatch determines how resourceVersion is applied to list calls.",
    ),
    (
        "sendInitialEvents",
        "boolean",
        "`sendInitialEvents=true` may be set together with `watch=true`: the stream begins with synthetic events for the current state.",
    ),
    (
        "timeoutSeconds",
        "integer",
        "Timeout for the list/watch call.",
    ),
    (
        "watch",
        "boolean",
        "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
    ),
];
const WRITE_PARAMETERS: [(&str, &str, &str); 3] = [
    (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. The only valid value is All.",
    ),
    (
        "fieldManager",
        "string",
        "fieldManager is a name associated with the actor or entity that is making these changes.",
    ),
    (
        "fieldValidation",
        "string",
        "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields: Ignore, Warn (the default) or Strict.",
    ),
];
const DELETE_PARAMETERS: [(&str, &str, &str); 4] = [
    (
        "dryRun",
        "string",
        "When present, indicates that modifications should not be persisted. The only valid value is All.",
    ),
    (
        "gracePeriodSeconds",
        "integer",
        "The duration in seconds before the object should be deleted.",
    ),
    (
        "orphanDependents",
        "boolean",
        "Deprecated: please use the PropagationPolicy.",
    ),
    (
        "propagationPolicy",
        "string",
        "Whether and how garbage collection will be performed: Orphan, Background or Foreground.",
    ),
];

struct Resource<'a> {
    kind: &'a KindDescription,
    version: &'a str,
    flavor: Flavor,
    /// e.g. `RestaurantProgrammingKubernetesInfoV1beta1`.
    id: String,
    /// `Namespaced` for namespaced kinds, empty otherwise.
    scope: &'static str,
}

impl Resource<'_> {
    fn parameter(&self, name: &str, location: &str, type_: &str, description: &str) -> Value {
        let mut p = json!({ "name": name, "in": location, "description": description });
        if location == "path" {
            p["required"] = true.into();
        }
        match self.flavor {
            Flavor::V3 => p["schema"] = json!({ "type": type_, "uniqueItems": true }),
            Flavor::V2 => {
                p["type"] = type_.into();
                p["uniqueItems"] = true.into();
            }
        }
        p
    }

    fn query(&self, list: &[(&str, &str, &str)]) -> Vec<Value> {
        list.iter()
            .map(|(name, type_, description)| self.parameter(name, "query", type_, description))
            .collect()
    }

    fn schema_ref(&self, name: &str) -> Value {
        match self.flavor {
            Flavor::V3 => reference(name),
            Flavor::V2 => to_v2(reference(name)),
        }
    }

    /// An operation answering `codes` with the schema `response` in `media_types`.
    fn operation(
        &self,
        operation_id: String,
        action: &str,
        description: String,
        response: &str,
        codes: &[&str],
        media_types: &[&str],
    ) -> Value {
        let mut responses = Map::new();
        for code in codes {
            let mut r = json!({ "description": if *code == "201" { "Created" } else if *code == "202" { "Accepted" } else { "OK" } });
            match self.flavor {
                Flavor::V3 => {
                    let content: Map<String, Value> = media_types
                        .iter()
                        .map(|m| {
                            (
                                m.to_string(),
                                json!({ "schema": self.schema_ref(response) }),
                            )
                        })
                        .collect();
                    r["content"] = content.into();
                }
                Flavor::V2 => r["schema"] = self.schema_ref(response),
            }
            responses.insert(code.to_string(), r);
        }
        responses.insert("401".into(), json!({ "description": "Unauthorized" }));
        let mut op = json!({
            "tags": [self.tag()],
            "description": description,
            "operationId": operation_id,
            "responses": responses,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": {
                "group": self.kind.group, "version": self.version, "kind": self.kind.kind
            },
        });
        if self.flavor == Flavor::V2 {
            op["produces"] = json!(media_types);
            op["schemes"] = json!(["https"]);
        }
        op
    }

    fn tag(&self) -> String {
        let group: String = camel(self.kind.group);
        let mut chars = group.chars();
        let lower: String = chars
            .next()
            .map(|c| c.to_lowercase().chain(chars).collect())
            .unwrap_or_default();
        format!("{lower}_{}", self.version)
    }

    fn with_parameters(mut op: Value, parameters: Vec<Value>) -> Value {
        op["parameters"] = parameters.into();
        op
    }

    /// The request body of a create, replace, patch or delete.
    fn with_body(
        &self,
        mut op: Value,
        schema: &str,
        media_types: &[&str],
        required: bool,
    ) -> Value {
        match self.flavor {
            Flavor::V3 => {
                let content: Map<String, Value> = media_types
                    .iter()
                    .map(|m| (m.to_string(), json!({ "schema": self.schema_ref(schema) })))
                    .collect();
                op["requestBody"] = json!({ "content": content, "required": required });
            }
            Flavor::V2 => {
                let body = json!({ "name": "body", "in": "body", "required": required, "schema": self.schema_ref(schema) });
                if let Some(parameters) = op["parameters"].as_array_mut() {
                    parameters.insert(0, body);
                } else {
                    op["parameters"] = json!([body]);
                }
                op["consumes"] = json!(media_types);
            }
        }
        op
    }
}

/// `restaurant.programming-kubernetes.info` → `RestaurantProgrammingKubernetesInfo`.
fn camel(s: &str) -> String {
    s.split(['.', '-'])
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|c| c.to_uppercase().chain(chars).collect::<String>())
                .unwrap_or_default()
        })
        .collect()
}

/// Adds the paths of `kind` in `version` to `paths`.
pub(super) fn add(
    paths: &mut Map<String, Value>,
    kind: &KindDescription,
    version: &str,
    flavor: Flavor,
) {
    let r = Resource {
        kind,
        version,
        flavor,
        id: format!("{}{}", camel(kind.group), camel(version)),
        scope: if kind.namespaced { "Namespaced" } else { "" },
    };
    let object = kind_name(kind.group, version, kind.kind);
    let list = kind_name(kind.group, version, &format!("{}List", kind.kind));
    let (k, plural) = (kind.kind, kind.plural);
    let base = format!("/apis/{}/{version}", kind.group);
    let collection_path = if kind.namespaced {
        format!("{base}/namespaces/{{namespace}}/{plural}")
    } else {
        format!("{base}/{plural}")
    };
    let name_param = r.parameter("name", "path", "string", &format!("name of the {k}"));
    let namespace_param = r.parameter(
        "namespace",
        "path",
        "string",
        "object name and auth scope, such as for teams and projects",
    );
    let pretty = r.parameter(
        "pretty",
        "query",
        "string",
        "If 'true', then the output is pretty printed.",
    );
    let mut scope_params = Vec::new();
    if kind.namespaced {
        scope_params.push(namespace_param);
    }
    scope_params.push(pretty.clone());

    let mut object_and_list: Vec<&str> = OBJECT_MEDIA_TYPES.to_vec();
    object_and_list.extend(WATCH_MEDIA_TYPES);
    let id_kind = format!("{}{k}", r.scope);

    // The collection: list, create, deletecollection. Upstream's text says "watch" only for a watcher.
    let id = &r.id;
    let list_doc = if kind.watch {
        format!("list or watch objects of kind {k}")
    } else {
        format!("list objects of kind {k}")
    };
    let list_op = Resource::with_parameters(
        r.operation(
            format!("list{id}{id_kind}"),
            "list",
            list_doc.clone(),
            &list,
            &["200"],
            &object_and_list,
        ),
        r.query(&LIST_PARAMETERS),
    );
    let create = r.with_body(
        Resource::with_parameters(
            r.operation(
                format!("create{id}{id_kind}"),
                "post",
                format!("create a {k}"),
                &object,
                &["200", "201", "202"],
                &OBJECT_MEDIA_TYPES,
            ),
            r.query(&WRITE_PARAMETERS),
        ),
        &object,
        &OBJECT_MEDIA_TYPES,
        true,
    );
    let mut delete_collection_params = r.query(&DELETE_PARAMETERS);
    delete_collection_params.extend(r.query(&LIST_PARAMETERS).into_iter().filter(|p| {
        !["watch", "allowWatchBookmarks", "sendInitialEvents"]
            .contains(&p["name"].as_str().unwrap_or(""))
    }));
    let delete_collection = r.with_body(
        Resource::with_parameters(
            r.operation(
                format!("delete{id}Collection{id_kind}"),
                "deletecollection",
                format!("delete collection of {k}"),
                STATUS,
                &["200"],
                &OBJECT_MEDIA_TYPES,
            ),
            delete_collection_params,
        ),
        DELETE_OPTIONS,
        &OBJECT_MEDIA_TYPES,
        false,
    );
    paths.insert(
        collection_path.clone(),
        read_only(kind, json!({ "get": list_op, "post": create, "delete": delete_collection, "parameters": scope_params })),
    );

    // One object: read, replace, patch, delete.
    let mut object_params = vec![name_param];
    object_params.extend(scope_params.iter().cloned());
    let read = r.operation(
        format!("read{id}{id_kind}"),
        "get",
        format!("read the specified {k}"),
        &object,
        &["200"],
        &OBJECT_MEDIA_TYPES,
    );
    let replace = r.with_body(
        Resource::with_parameters(
            r.operation(
                format!("replace{id}{id_kind}"),
                "put",
                format!("replace the specified {k}"),
                &object,
                &["200", "201"],
                &OBJECT_MEDIA_TYPES,
            ),
            r.query(&WRITE_PARAMETERS),
        ),
        &object,
        &OBJECT_MEDIA_TYPES,
        true,
    );
    let patch = r.with_body(
        Resource::with_parameters(
            r.operation(
                format!("patch{id}{id_kind}"),
                "patch",
                format!("partially update the specified {k}"),
                &object,
                &["200", "201"],
                &OBJECT_MEDIA_TYPES,
            ),
            r.query(&WRITE_PARAMETERS),
        ),
        PATCH,
        &PATCH_MEDIA_TYPES,
        true,
    );
    let delete = r.with_body(
        Resource::with_parameters(
            r.operation(
                format!("delete{id}{id_kind}"),
                "delete",
                format!("delete a {k}"),
                STATUS,
                &["200", "202"],
                &OBJECT_MEDIA_TYPES,
            ),
            r.query(&DELETE_PARAMETERS),
        ),
        DELETE_OPTIONS,
        &OBJECT_MEDIA_TYPES,
        false,
    );
    paths.insert(
        format!("{collection_path}/{{name}}"),
        read_only(kind, json!({ "get": read, "put": replace, "patch": patch, "delete": delete, "parameters": object_params.clone() })),
    );
    if kind.subresources.contains(&"status") {
        add_status(
            paths,
            &r,
            &format!("{collection_path}/{{name}}/status"),
            &object,
            object_params,
        );
    }

    // Namespaced kinds are also listed across namespaces.
    if kind.namespaced {
        let all = Resource::with_parameters(
            r.operation(
                format!("list{id}{k}ForAllNamespaces"),
                "list",
                list_doc.clone(),
                &list,
                &["200"],
                &object_and_list,
            ),
            r.query(&LIST_PARAMETERS),
        );
        paths.insert(
            format!("{base}/{plural}"),
            json!({ "get": all, "parameters": [pretty] }),
        );
    }
}

/// The `status` subresource of one object: read, replace, patch (upstream's `...Status` operations).
fn add_status(
    paths: &mut Map<String, Value>,
    r: &Resource<'_>,
    path: &str,
    object: &str,
    parameters: Vec<Value>,
) {
    let (id, k) = (&r.id, r.kind.kind);
    let id_kind = format!("{}{k}Status", r.scope);
    let read = r.operation(
        format!("read{id}{id_kind}"),
        "get",
        format!("read status of the specified {k}"),
        object,
        &["200"],
        &OBJECT_MEDIA_TYPES,
    );
    let replace = r.with_body(
        Resource::with_parameters(
            r.operation(
                format!("replace{id}{id_kind}"),
                "put",
                format!("replace status of the specified {k}"),
                object,
                &["200", "201"],
                &OBJECT_MEDIA_TYPES,
            ),
            r.query(&WRITE_PARAMETERS),
        ),
        object,
        &OBJECT_MEDIA_TYPES,
        true,
    );
    let patch = r.with_body(
        Resource::with_parameters(
            r.operation(
                format!("patch{id}{id_kind}"),
                "patch",
                format!("partially update status of the specified {k}"),
                object,
                &["200", "201"],
                &OBJECT_MEDIA_TYPES,
            ),
            r.query(&WRITE_PARAMETERS),
        ),
        PATCH,
        &PATCH_MEDIA_TYPES,
        true,
    );
    paths.insert(
        path.to_string(),
        json!({ "get": read, "put": replace, "patch": patch, "parameters": parameters }),
    );
}

/// A provided kind's path keeps only its `get` (read and list).
fn read_only(kind: &KindDescription, mut path: Value) -> Value {
    if kind.read_only
        && let Value::Object(operations) = &mut path
    {
        operations.retain(|name, _| matches!(name.as_str(), "get" | "parameters"));
    }
    path
}
