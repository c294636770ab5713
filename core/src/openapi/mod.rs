//! OpenAPI (upstream `kube-openapi` handlers and the CRD OpenAPI builder): `/openapi/v3` (a root listing each
//! group-version's document under a content-hash URL) and `/openapi/v3/apis/<group>/<version>`, and `/openapi/v2`
//! (one Swagger 2.0 document). Built from the derived schemas, so that `kubectl explain` works, `kubectl create`
//! finds server-side field validation, and `kubectl apply` sees that patches are JSON merge patches.

mod paths;
mod schemas;

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Value, json};

use crate::codec::parse_accept;
use crate::runtime::KindDescription;
use crate::server::status::not_found;

/// The served OpenAPI documents, built once at startup.
#[derive(Clone, Debug)]
pub struct OpenApi {
    /// `apis/<group>/<version>` → (document, its hash).
    v3: BTreeMap<String, (Vec<u8>, String)>,
    v2: Vec<u8>,
}

impl OpenApi {
    /// The documents for `kinds`; `title` and `version` fill the `info` object.
    pub fn new(kinds: &[KindDescription], title: &str, version: &str) -> Self {
        let info = json!({ "title": title, "version": version });
        let mut v3 = BTreeMap::new();
        let mut v2_paths = serde_json::Map::new();
        let mut v2_definitions = serde_json::Map::new();
        let mut group_versions: BTreeMap<(String, String), Vec<&KindDescription>> = BTreeMap::new();
        for kind in kinds {
            for v in &kind.versions {
                group_versions
                    .entry((kind.group.to_string(), v.to_string()))
                    .or_default()
                    .push(kind);
            }
        }
        for ((group, version), kinds) in &group_versions {
            let mut paths_v3 = serde_json::Map::new();
            let mut components = schemas::meta_schemas();
            for kind in kinds {
                paths::add(&mut paths_v3, kind, version, paths::Flavor::V3);
                paths::add(&mut v2_paths, kind, version, paths::Flavor::V2);
                schemas::add_kind(&mut components, kind, version);
            }
            let document = json!({
                "openapi": "3.0.0",
                "info": info,
                "paths": paths_v3,
                "components": { "schemas": components },
            });
            for (name, schema) in &components {
                v2_definitions.insert(name.clone(), schemas::to_v2(schema.clone()));
            }
            let body = serde_json::to_vec(&document).unwrap_or_default();
            let hash = hash_hex(&body);
            v3.insert(format!("apis/{group}/{version}"), (body, hash));
        }
        let v2 = json!({
            "swagger": "2.0",
            "info": info,
            "paths": v2_paths,
            "definitions": v2_definitions,
        });
        OpenApi {
            v3,
            v2: serde_json::to_vec(&v2).unwrap_or_default(),
        }
    }

    /// `/openapi/v2`, `/openapi/v3` and `/openapi/v3/apis/{group}/{version}`.
    pub fn router(&self) -> Router {
        let openapi = Arc::new(self.clone());
        let (a, b, c) = (openapi.clone(), openapi.clone(), openapi);
        Router::new()
            .route(
                "/openapi/v2",
                get(move |headers: HeaderMap| async move { a.v2(&headers) }),
            )
            .route("/openapi/v3", get(move || async move { b.v3_root() }))
            .route(
                "/openapi/v3/apis/{group}/{version}",
                get(
                    move |Path((group, version)): Path<(String, String)>,
                          Query(query): Query<BTreeMap<String, String>>,
                          headers: HeaderMap| async move {
                        c.v3_document(&format!("apis/{group}/{version}"), &query, &headers)
                    },
                ),
            )
    }

    /// Swagger 2.0 in JSON. A client that accepts only the protobuf form gets 406 and falls back (kubectl does).
    fn v2(&self, headers: &HeaderMap) -> Response {
        let accepts_json = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|accept| {
                parse_accept(accept).iter().any(|c| {
                    (c.type_ == "application" && c.subtype == "json")
                        || (c.type_ == "*" && c.subtype == "*")
                        || (c.type_ == "application" && c.subtype == "*")
                })
            });
        if !accepts_json {
            let status = crate::meta::Status::failure(
                406,
                crate::meta::reason::NOT_ACCEPTABLE,
                "only the following media types are accepted: application/json",
            );
            return crate::server::status::status_response(&status);
        }
        document_response(self.v2.clone(), &hash_hex(&self.v2), false)
    }

    fn v3_root(&self) -> Response {
        let paths: serde_json::Map<String, Value> = self
            .v3
            .iter()
            .map(|(path, (_, hash))| {
                (
                    path.clone(),
                    json!({ "serverRelativeURL": format!("/openapi/v3/{path}?hash={hash}") }),
                )
            })
            .collect();
        let body = serde_json::to_vec(&json!({ "paths": paths })).unwrap_or_default();
        document_response(body, "", false)
    }

    /// A group-version document; with the current `?hash=` it may be cached forever, as upstream allows.
    fn v3_document(
        &self,
        path: &str,
        query: &BTreeMap<String, String>,
        headers: &HeaderMap,
    ) -> Response {
        let Some((body, hash)) = self.v3.get(path) else {
            return not_found();
        };
        let etag = format!("\"{hash}\"");
        if headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag))
        {
            let mut response = StatusCode::NOT_MODIFIED.into_response();
            if let Ok(v) = HeaderValue::from_str(&etag) {
                response.headers_mut().insert(header::ETAG, v);
            }
            return response;
        }
        let immutable = query.get("hash").is_some_and(|h| h == hash);
        document_response(body.clone(), hash, immutable)
    }
}

fn hash_hex(body: &[u8]) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    body.hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

fn document_response(body: Vec<u8>, hash: &str, immutable: bool) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if !hash.is_empty()
        && let Ok(v) = HeaderValue::from_str(&format!("\"{hash}\""))
    {
        h.insert(header::ETAG, v);
    }
    let cache = if immutable {
        "public, immutable, max-age=31536000"
    } else {
        "no-cache, private"
    };
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    response
}
