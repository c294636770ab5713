//! Subresources answered by the server's own code, as upstream's REST storage answers `pods/log`, `pods/eviction`
//! or `deployments/rollback`: an action (`POST pizzas/{name}/bake` answering with an object of another kind) or a
//! stream (`GET pizzas/{name}/log`, text sent as it is produced). Declared with
//! [`Api::subresource`](super::Api::subresource); listed in discovery; authorized as
//! `<verb> <resource>/<subresource>` like any subresource.

use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::StatusCode;

use super::api::{ResourceEndpoint, Verb};
use super::context::Context;
use super::output::finish;
use crate::auth::User;
use crate::codec::MediaType;
use crate::registry::{ApiError, Store};
use crate::runtime::{KindDescription, Resource};

/// One request to a custom subresource.
pub struct SubresourceRequest<T: Resource> {
    /// The store of the parent resource (read the object, write its status, ...).
    pub store: Store<T>,
    /// The parent object's namespace (`None` for cluster-scoped resources).
    pub namespace: Option<String>,
    /// The parent object's name.
    pub name: String,
    /// The Kubernetes verb: `get` for GET, `create` for POST, `update` for PUT, `patch` for PATCH.
    pub verb: String,
    /// The API version of the request's URL.
    pub version: String,
    /// The query parameters, in order (`follow=true`, `tailLines=10`).
    pub query: Vec<(String, String)>,
    /// The request body (empty for GET).
    pub body: Bytes,
    /// Who asks.
    pub user: User,
}

impl<T: Resource> SubresourceRequest<T> {
    /// The first value of a query parameter.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a custom subresource answers with.
pub enum Answer {
    /// An object (with its own `apiVersion` and `kind`), sent as JSON with 200, or 201 for `create`.
    Object(serde_json::Value),
    /// Text sent as it is produced (`text/plain`, chunked), until the stream ends or the server drains.
    Text(BoxStream<'static, String>),
}

/// A subresource of `T` answered by user code.
///
/// The body and the query parameters are the handler's to read, as for upstream's connecters (`pods/exec`,
/// `pods/proxy`): what it does not read is ignored (as Go's parameter decoding skips keys it does not know), and
/// a handler that takes an object or parameters refuses bad ones itself, with a 400 `Status`.
#[async_trait]
pub trait Subresource<T: Resource>: Send + Sync + 'static {
    /// The verbs it answers, of `get`, `create`, `update` and `patch` (others are 405).
    fn verbs(&self) -> &'static [&'static str];

    /// The group, version and kind of its answer, for discovery (`None`: not an object, e.g. text).
    fn response_kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        None
    }

    /// Answers one request.
    async fn serve(&self, request: SubresourceRequest<T>) -> Result<Answer, ApiError>;
}

pub(crate) struct SubresourceEndpoint<T: Resource> {
    pub store: Store<T>,
    pub handler: Arc<dyn Subresource<T>>,
}

#[async_trait]
impl<T: Resource> ResourceEndpoint for SubresourceEndpoint<T> {
    fn description(&self) -> KindDescription {
        self.store.codec().describe()
    }

    fn namespaced(&self) -> bool {
        T::namespaced()
    }

    fn serves(&self, version: &str) -> bool {
        self.store.codec().serves(version)
    }

    fn answers(&self, verb: Verb) -> bool {
        let name = match verb {
            Verb::Get => "get",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            _ => return false,
        };
        self.handler.verbs().contains(&name)
    }

    async fn serve(&self, context: Context, verb: Verb, body: Body) -> Response {
        let result = async {
            let body = if verb == Verb::Get {
                Bytes::new()
            } else {
                context.read_body(body).await?
            };
            let request = SubresourceRequest {
                store: self.store.clone(),
                namespace: context.namespace().map(str::to_string),
                name: context.name().to_string(),
                verb: context.info.verb.clone(),
                version: context.version().to_string(),
                query: context.params.pairs(),
                body,
                user: context.user.clone(),
            };
            Ok(match self.handler.serve(request).await? {
                Answer::Object(object) => {
                    let code = if verb == Verb::Create {
                        StatusCode::CREATED
                    } else {
                        StatusCode::OK
                    };
                    let body = serde_json::to_vec(&object).map_err(ApiError::internal)?;
                    super::output::respond(code, MediaType::Json, body)
                }
                Answer::Text(lines) => {
                    let chunks = lines.map(|text| Ok::<_, std::io::Error>(Bytes::from(text)));
                    let body = match &context.shutdown {
                        Some(shutdown) => Body::from_stream(shutdown.end_with_drain(chunks)),
                        None => Body::from_stream(chunks),
                    };
                    Response::builder()
                        .status(StatusCode::OK)
                        .header(http::header::CONTENT_TYPE, "text/plain")
                        .body(body)
                        .map_err(ApiError::internal)?
                }
            })
        }
        .await;
        finish(&context, result)
    }
}
