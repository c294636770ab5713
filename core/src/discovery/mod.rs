//! Discovery (upstream `endpoints/discovery`): what groups, versions and resources the server serves, both as the
//! legacy documents (`/apis` → APIGroupList, `/apis/<group>` → APIGroup, `/apis/<group>/<version>` →
//! APIResourceList) and as aggregated discovery (`apidiscovery.k8s.io/v2`, all in one document on `/apis`, chosen
//! by the Accept header, with an ETag so clients revalidate cheaply).

mod version;

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::codec::parse_accept;
use crate::meta::{
    APIGroup, APIGroupDiscovery, APIGroupDiscoveryList, APIGroupList, APIResource,
    APIResourceDiscovery, APIResourceList, APISubresourceDiscovery, APIVersionDiscovery,
    APIVersions, DISCOVERY_FRESHNESS_CURRENT, GroupVersionForDiscovery, ObjectMeta, SCOPE_CLUSTER,
    SCOPE_NAMESPACE, Verbs,
};
use crate::runtime::KindDescription;
use crate::server::status::not_found;

pub use version::compare_versions;

/// The verbs every resource served by [`Api`](crate::endpoints::Api) supports, in upstream's (sorted) order.
pub const RESOURCE_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of the `status` subresource, in upstream's order.
pub const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];

/// The media type parameters of aggregated discovery.
const AGGREGATED_GROUP: &str = "apidiscovery.k8s.io";
const AGGREGATED_KIND: &str = "APIGroupDiscoveryList";

/// One group: its versions in priority order and the kinds each serves.
#[derive(Clone, Debug)]
struct Group {
    name: String,
    versions: Vec<String>,
    kinds: BTreeMap<String, Vec<KindDescription>>,
}

/// The discovery documents of a server, built once from the kinds it serves.
#[derive(Clone, Debug)]
pub struct Discovery {
    groups: Vec<Group>,
}

impl Discovery {
    /// Discovery of `kinds` (e.g. [`Api::descriptions`](crate::endpoints::Api::descriptions)); versions of a group
    /// are ordered by Kubernetes version priority (v1 > v1beta2 > v1beta1 > v1alpha1), the first is preferred.
    pub fn new(kinds: &[KindDescription]) -> Self {
        let mut groups: Vec<Group> = Vec::new();
        for kind in kinds {
            let index = match groups.iter().position(|g| g.name == kind.group) {
                Some(i) => i,
                None => {
                    groups.push(Group {
                        name: kind.group.to_string(),
                        versions: Vec::new(),
                        kinds: BTreeMap::new(),
                    });
                    groups.len() - 1
                }
            };
            let group = &mut groups[index];
            for version in &kind.versions {
                if !group.versions.iter().any(|v| v == version) {
                    group.versions.push(version.to_string());
                }
                group
                    .kinds
                    .entry(version.to_string())
                    .or_default()
                    .push(kind.clone());
            }
        }
        for group in &mut groups {
            group.versions.sort_by(|a, b| compare_versions(a, b));
        }
        Discovery { groups }
    }

    /// `/api`, `/apis`, `/apis/{group}` and `/apis/{group}/{version}`.
    pub fn router(&self) -> Router {
        let discovery = Arc::new(self.clone());
        let (d1, d2, d3, d4) = (
            discovery.clone(),
            discovery.clone(),
            discovery.clone(),
            discovery,
        );
        Router::new()
            .route(
                "/api",
                get(move |headers: HeaderMap| async move { d1.api(&headers) }),
            )
            .route(
                "/apis",
                get(move |headers: HeaderMap| async move { d2.apis(&headers) }),
            )
            .route(
                "/apis/{group}",
                get(move |Path(group): Path<String>| async move { d3.group(&group) }),
            )
            .route(
                "/apis/{group}/{version}",
                get(
                    move |Path((group, version)): Path<(String, String)>| async move {
                        d4.resources(&group, &version)
                    },
                ),
            )
    }

    /// The legacy core group: this server has none, so an empty version list (or an empty aggregated document).
    fn api(&self, headers: &HeaderMap) -> Response {
        match aggregated_version(headers) {
            Some(version) => {
                aggregated_response(headers, &APIGroupDiscoveryList::default(), version)
            }
            None => json_response(&APIVersions::default()),
        }
    }

    fn apis(&self, headers: &HeaderMap) -> Response {
        match aggregated_version(headers) {
            Some(version) => aggregated_response(headers, &self.aggregated(), version),
            None => json_response(&APIGroupList {
                groups: self.groups.iter().map(api_group).collect(),
            }),
        }
    }

    fn group(&self, name: &str) -> Response {
        match self.groups.iter().find(|g| g.name == name) {
            Some(group) => json_response(&api_group(group)),
            None => not_found(),
        }
    }

    fn resources(&self, group: &str, version: &str) -> Response {
        let Some(kinds) = self
            .groups
            .iter()
            .find(|g| g.name == group)
            .and_then(|g| g.kinds.get(version))
        else {
            return not_found();
        };
        json_response(&APIResourceList {
            group_version: format!("{group}/{version}"),
            resources: kinds.iter().flat_map(api_resources).collect(),
        })
    }

    /// The aggregated document: every group, its versions (preferred first) and their resources.
    fn aggregated(&self) -> APIGroupDiscoveryList {
        APIGroupDiscoveryList {
            metadata: Default::default(),
            items: self
                .groups
                .iter()
                .map(|group| APIGroupDiscovery {
                    metadata: ObjectMeta {
                        name: group.name.clone(),
                        ..ObjectMeta::default()
                    },
                    versions: group
                        .versions
                        .iter()
                        .map(|version| APIVersionDiscovery {
                            version: version.clone(),
                            resources: group.kinds[version]
                                .iter()
                                .map(|kind| resource_discovery(kind, version))
                                .collect(),
                            freshness: DISCOVERY_FRESHNESS_CURRENT.to_string(),
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

fn group_version(group: &str, version: &str) -> GroupVersionForDiscovery {
    GroupVersionForDiscovery {
        group_version: format!("{group}/{version}"),
        version: version.to_string(),
    }
}

fn api_group(group: &Group) -> APIGroup {
    APIGroup {
        name: group.name.clone(),
        versions: group
            .versions
            .iter()
            .map(|v| group_version(&group.name, v))
            .collect(),
        preferred_version: group
            .versions
            .first()
            .map(|v| group_version(&group.name, v))
            .unwrap_or_default(),
        server_address_by_client_cidrs: Vec::new(),
    }
}

/// A kind's resource and then its subresources (`pizzas/status`), as upstream lists them.
fn api_resources(kind: &KindDescription) -> Vec<APIResource> {
    let mut resources = vec![api_resource(kind)];
    for subresource in kind
        .subresources
        .iter()
        .filter(|s| matches!(**s, "status" | "scale"))
    {
        // A scale subresource answers `autoscaling/v1` `Scale`, which upstream names here.
        let (group, version, response_kind) = match *subresource {
            "scale" => ("autoscaling", "v1", "Scale"),
            _ => ("", "", kind.kind),
        };
        resources.push(APIResource {
            name: format!("{}/{subresource}", kind.plural),
            singular_name: String::new(),
            namespaced: kind.namespaced,
            group: group.to_string(),
            version: version.to_string(),
            kind: response_kind.to_string(),
            verbs: Verbs {
                items: STATUS_VERBS.iter().map(|v| v.to_string()).collect(),
            },
            short_names: Vec::new(),
            categories: Vec::new(),
            storage_version_hash: String::new(),
        });
    }
    for custom in &kind.custom_subresources {
        // An answer that is not an object of its own is listed with the parent's kind, as `pods/log` is.
        let (group, version, response_kind) = custom.response_kind.unwrap_or(("", "", kind.kind));
        resources.push(APIResource {
            name: format!("{}/{}", kind.plural, custom.name),
            singular_name: String::new(),
            namespaced: kind.namespaced,
            group: group.to_string(),
            version: version.to_string(),
            kind: response_kind.to_string(),
            verbs: Verbs {
                items: custom.verbs.iter().map(|v| v.to_string()).collect(),
            },
            short_names: Vec::new(),
            categories: Vec::new(),
            storage_version_hash: String::new(),
        });
    }
    resources
}

/// The verbs of a kind's main resource: all of them when stored; `get`, `list` and, when its code follows
/// changes, `watch` when provided by code.
fn resource_verbs(kind: &KindDescription) -> &'static [&'static str] {
    match (kind.read_only, kind.watch) {
        (false, _) => &RESOURCE_VERBS,
        (true, true) => &["get", "list", "watch"],
        (true, false) => &["get", "list"],
    }
}

fn api_resource(kind: &KindDescription) -> APIResource {
    APIResource {
        name: kind.plural.to_string(),
        singular_name: kind.singular.to_string(),
        namespaced: kind.namespaced,
        group: String::new(),
        version: String::new(),
        kind: kind.kind.to_string(),
        verbs: Verbs {
            items: resource_verbs(kind).iter().map(|v| v.to_string()).collect(),
        },
        short_names: kind.short_names.iter().map(|s| s.to_string()).collect(),
        categories: kind.categories.iter().map(|s| s.to_string()).collect(),
        storage_version_hash: kind.storage_version_hash.clone(),
    }
}

fn resource_discovery(kind: &KindDescription, version: &str) -> APIResourceDiscovery {
    APIResourceDiscovery {
        resource: kind.plural.to_string(),
        response_kind: Some(crate::meta::GroupVersionKind {
            group: kind.group.to_string(),
            version: version.to_string(),
            kind: kind.kind.to_string(),
        }),
        scope: if kind.namespaced {
            SCOPE_NAMESPACE
        } else {
            SCOPE_CLUSTER
        }
        .to_string(),
        singular_resource: kind.singular.to_string(),
        verbs: resource_verbs(kind).iter().map(|v| v.to_string()).collect(),
        short_names: kind.short_names.iter().map(|s| s.to_string()).collect(),
        categories: kind.categories.iter().map(|s| s.to_string()).collect(),
        subresources: kind
            .subresources
            .iter()
            .filter(|s| matches!(**s, "status" | "scale"))
            .map(|subresource| APISubresourceDiscovery {
                subresource: subresource.to_string(),
                response_kind: Some(match *subresource {
                    "scale" => crate::meta::GroupVersionKind {
                        group: "autoscaling".to_string(),
                        version: "v1".to_string(),
                        kind: "Scale".to_string(),
                    },
                    _ => crate::meta::GroupVersionKind {
                        group: kind.group.to_string(),
                        version: version.to_string(),
                        kind: kind.kind.to_string(),
                    },
                }),
                accepted_types: Vec::new(),
                verbs: STATUS_VERBS.iter().map(|v| v.to_string()).collect(),
            })
            .chain(
                kind.custom_subresources
                    .iter()
                    .map(|custom| APISubresourceDiscovery {
                        subresource: custom.name.to_string(),
                        // Not an object of its own: the parent's kind, as `pods/log`.
                        response_kind: Some(match custom.response_kind {
                            Some((group, version, kind)) => crate::meta::GroupVersionKind {
                                group: group.to_string(),
                                version: version.to_string(),
                                kind: kind.to_string(),
                            },
                            None => crate::meta::GroupVersionKind {
                                group: kind.group.to_string(),
                                version: version.to_string(),
                                kind: kind.kind.to_string(),
                            },
                        }),
                        accepted_types: Vec::new(),
                        verbs: custom.verbs.iter().map(|v| v.to_string()).collect(),
                    }),
            )
            .collect(),
    }
}

/// The aggregated discovery version the Accept header asks for first (`v2` or `v2beta1`), if any. A clause that
/// asks for plain JSON before any aggregated one means the legacy document.
fn aggregated_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(header::ACCEPT)?.to_str().ok()?;
    for clause in parse_accept(accept) {
        let json = clause.type_ == "application" && clause.subtype == "json";
        let wildcard = clause.type_ == "*" || clause.subtype == "*";
        let aggregated = clause.param("g") == Some(AGGREGATED_GROUP)
            && clause.param("as") == Some(AGGREGATED_KIND);
        match (json, aggregated, clause.param("v")) {
            (true, true, Some("v2")) => return Some("v2"),
            (true, true, Some("v2beta1")) => return Some("v2beta1"),
            (true, false, _) if clause.param("as").is_none() => return None,
            (false, false, _) if wildcard => return None,
            _ => {}
        }
    }
    None
}

fn json_response<T: serde::Serialize>(value: &T) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The aggregated document in `version`, with an ETag; 304 when the client already has it.
fn aggregated_response(
    headers: &HeaderMap,
    list: &APIGroupDiscoveryList,
    version: &str,
) -> Response {
    let mut value = serde_json::to_value(list).unwrap_or_default();
    value["apiVersion"] = format!("{AGGREGATED_GROUP}/{version}").into();
    let body = serde_json::to_vec(&value).unwrap_or_default();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    let etag = format!("\"{:016X}\"", hasher.finish());
    let content_type =
        format!("application/json;g={AGGREGATED_GROUP};v={version};as={AGGREGATED_KIND}");
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, body).into_response()
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_type) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::VARY, HeaderValue::from_static("Accept"));
    response
}
