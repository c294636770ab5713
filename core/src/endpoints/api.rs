//! The set of served resources and the route that dispatches requests to them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use axum::Router;
use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::response::Response;
use axum::routing::any;
use http::StatusCode;

use super::context::Context;
use super::encoded::EncodedObjects;
use super::provided::{ProvidedEndpoint, Provider};
use super::subresource::{Subresource, SubresourceEndpoint};
use super::{create, delete, get, list, patch, update, watch};
use crate::admission::Chain;
use crate::audit::{AuditContext, AuditId};
use crate::auth::User;
use crate::metrics::{InFlight, Metrics, RequestLabels};
use crate::registry::Store;
use crate::runtime::SubresourceDescription;
use crate::runtime::{KindDescription, Resource, ResourceCodec};
use crate::server::status::{method_not_allowed, not_found};
use crate::server::{ShutdownSignal, Warnings};
use crate::telemetry::SPAN_TARGET;
use tracing::Instrument;

use crate::request::RequestInfo;

/// One served resource behind a type-erased face, so that resources of different hub types share one route.
#[async_trait]
pub(crate) trait ResourceEndpoint: Send + Sync {
    fn description(&self) -> KindDescription;
    fn namespaced(&self) -> bool;
    fn serves(&self, version: &str) -> bool;
    async fn serve(&self, context: Context, verb: Verb, body: Body) -> Response;
    /// Whether this endpoint, when it is a subresource, answers `verb` (`status` and `scale`: get, update and patch
    /// of one object, as upstream's REST).
    fn answers(&self, verb: Verb) -> bool {
        matches!(verb, Verb::Get | Verb::Update | Verb::Patch)
    }
    /// Object count and average size, for the main resource (not subresources).
    async fn object_stats(&self) -> Option<Result<(u64, u64), String>> {
        None
    }
}

/// How often objects are counted (upstream's `StorageObjectCountTracker` period).
const OBJECT_COUNT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// The verbs a resource endpoint answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Patch,
    Delete,
    DeleteCollection,
}

/// A resource's store with the admission chain its writes go through.
pub(crate) struct Endpoint<T: Resource> {
    pub store: Store<T>,
    pub admission: Arc<Chain>,
    /// Watch event frames shared by the watchers of this resource.
    pub frames: Arc<super::watch::FrameCache>,
    /// Encoded list items, shared by every resource of the API.
    pub encoded: Arc<EncodedObjects>,
}

#[async_trait]
impl<T: Resource> ResourceEndpoint for Endpoint<T> {
    fn description(&self) -> KindDescription {
        self.store.codec().describe()
    }

    fn namespaced(&self) -> bool {
        T::namespaced()
    }

    fn serves(&self, version: &str) -> bool {
        self.store.codec().serves(version)
    }

    async fn object_stats(&self) -> Option<Result<(u64, u64), String>> {
        if self.store.is_status() {
            return None;
        }
        Some(
            self.store
                .object_stats()
                .await
                .map(|s| (s.object_count, s.estimated_average_object_size_bytes))
                .map_err(|e| e.to_string()),
        )
    }

    async fn serve(&self, context: Context, verb: Verb, body: Body) -> Response {
        match verb {
            Verb::Get => get::get(self, context).await,
            Verb::List => list::list(self, context).await,
            Verb::Watch => watch::watch(self, context).await,
            Verb::Create => create::create(self, context, body).await,
            Verb::Update => update::update(self, context, body).await,
            Verb::Patch => patch::patch(self, context, body).await,
            Verb::Delete => delete::delete(self, context, body).await,
            Verb::DeleteCollection => delete::delete_collection(self, context, body).await,
        }
    }
}

/// The resources a server serves under `/apis`, with the admission chain of their writes.
#[derive(Clone, Default)]
pub struct Api {
    resources: HashMap<(String, String), Arc<dyn ResourceEndpoint>>,
    /// Custom subresources of each resource, for discovery.
    custom: HashMap<(String, String), Vec<SubresourceDescription>>,
    order: Vec<(String, String)>,
    admission: Arc<Chain>,
    encoded: Arc<EncodedObjects>,
}

impl Api {
    /// An API whose writes pass through `admission`.
    pub fn new(admission: Chain) -> Self {
        Api {
            admission: Arc::new(admission),
            ..Api::default()
        }
    }

    /// Keeps at most `bytes` of encoded list items (default [`DEFAULT_ENCODED_OBJECT_BYTES`](super::DEFAULT_ENCODED_OBJECT_BYTES);
    /// 0 keeps none). Call it before adding resources: they share the cache made here.
    pub fn encoded_object_cache_bytes(mut self, bytes: usize) -> Self {
        self.encoded = Arc::new(EncodedObjects::new(bytes));
        self
    }

    /// Serves `T` through `store`, in every version its codec serves, in the codec's group: a store's
    /// [`in_group`](Store::in_group) copy added beside it serves the same objects in a second group.
    pub fn resource<T: Resource>(mut self, store: Store<T>) -> Self {
        let group = store.codec().group();
        let key = (group.to_string(), T::PLURAL.to_string());
        if !self.resources.contains_key(&key) {
            self.order.push(key.clone());
        }
        if T::has_status_subresource() {
            let status = Endpoint {
                store: store.status(),
                admission: self.admission.clone(),
                frames: Arc::default(),
                encoded: self.encoded.clone(),
            };
            self.resources.insert(
                (group.to_string(), format!("{}/status", T::PLURAL)),
                Arc::new(status),
            );
        }
        if let Some(paths) = T::scale_paths() {
            let scale = super::scale::ScaleEndpoint {
                store: store.clone(),
                admission: self.admission.clone(),
                paths,
            };
            self.resources.insert(
                (group.to_string(), format!("{}/scale", T::PLURAL)),
                Arc::new(scale),
            );
        }
        let endpoint = Endpoint {
            store,
            admission: self.admission.clone(),
            frames: Arc::default(),
            encoded: self.encoded.clone(),
        };
        self.resources.insert(key, Arc::new(endpoint));
        self
    }

    /// Serves `T` with objects from `provider` (`get`, `list`, and `watch` when the provider
    /// [`watches`](Provider::watches); other verbs are 405), in every version `codec` serves.
    pub fn provided<T: Resource>(
        mut self,
        codec: ResourceCodec<T>,
        provider: impl Provider<T>,
    ) -> Self {
        let key = (codec.group().to_string(), T::PLURAL.to_string());
        if !self.resources.contains_key(&key) {
            self.order.push(key.clone());
        }
        let endpoint = ProvidedEndpoint {
            codec,
            provider: Arc::new(provider),
        };
        self.resources.insert(key, Arc::new(endpoint));
        self
    }

    /// Serves the subresource `name` of `T` (`pizzas/bake`) with user code. `T` must be served already.
    pub fn subresource<T: Resource>(
        mut self,
        store: &Store<T>,
        name: &'static str,
        handler: impl Subresource<T>,
    ) -> Self {
        let handler: Arc<dyn Subresource<T>> = Arc::new(handler);
        let description = SubresourceDescription {
            name,
            verbs: handler.verbs(),
            response_kind: handler.response_kind(),
        };
        let group = store.codec().group();
        let parent = (group.to_string(), T::PLURAL.to_string());
        let descriptions = self.custom.entry(parent).or_default();
        descriptions.retain(|d| d.name != name);
        descriptions.push(description);
        self.resources.insert(
            (group.to_string(), format!("{}/{name}", T::PLURAL)),
            Arc::new(SubresourceEndpoint {
                store: store.clone(),
                handler,
            }),
        );
        self
    }

    /// What discovery and OpenAPI describe: every served kind, in the order added. Builds the schemas: call it
    /// once at startup.
    pub fn descriptions(&self) -> Vec<KindDescription> {
        self.order
            .iter()
            .filter_map(|key| {
                let mut description = self.resources.get(key)?.description();
                description.custom_subresources = self.custom.get(key).cloned().unwrap_or_default();
                Some(description)
            })
            .collect()
    }

    /// Counts each resource's objects into `apiserver_storage_objects`, `apiserver_resource_objects` and
    /// `apiserver_resource_size_estimate_bytes` (-1 when counting fails).
    pub async fn count_objects(&self, metrics: &Metrics) {
        for key in &self.order {
            let Some(endpoint) = self.resources.get(key) else {
                continue;
            };
            if let Some(stats) = endpoint.object_stats().await {
                if let Err(e) = &stats {
                    tracing::warn!(resource = %key.1, "counting objects: {e}");
                }
                metrics.object_count(&key.0, &key.1, stats.ok());
            }
        }
    }

    /// upstream's `storage-object-count-tracker-hook`: counts objects every minute until the server shuts down.
    pub async fn track_object_counts(self, metrics: Arc<Metrics>, shutdown: ShutdownSignal) {
        let initiated = shutdown.initiated();
        tokio::pin!(initiated);
        loop {
            tokio::select! {
                _ = &mut initiated => return,
                _ = tokio::time::sleep(OBJECT_COUNT_INTERVAL) => self.count_objects(&metrics).await,
            }
        }
    }

    /// The routes of every resource: `/apis/<group>/<version>/...`. Discovery of the group and version
    /// (`/apis/<group>/<version>` itself) is the discovery module's.
    pub fn router(self) -> Router {
        let api = Arc::new(self);
        Router::new().route(
            "/apis/{group}/{version}/{*rest}",
            any(move |request: Request| {
                let api = api.clone();
                async move { api.dispatch(request).await }
            }),
        )
    }

    async fn dispatch(&self, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        let Some(info) = parts.extensions.get::<RequestInfo>().cloned() else {
            return not_found();
        };
        if !info.is_resource_request {
            return not_found();
        }
        let subresource = !info.subresource.is_empty();
        if subresource && info.parts.len() != 3 {
            return not_found();
        }
        let key = if subresource {
            (
                info.api_group.clone(),
                format!("{}/{}", info.resource, info.subresource),
            )
        } else {
            (info.api_group.clone(), info.resource.clone())
        };
        let Some(endpoint) = self.resources.get(&key) else {
            return not_found();
        };
        if !endpoint.serves(&info.api_version) {
            return not_found();
        }
        let namespaced = endpoint.namespaced();
        let verb = match route_verb(&info, namespaced) {
            Ok(verb) => verb,
            Err(NoRoute::NotFound) => return not_found(),
            Err(NoRoute::MethodNotAllowed) => return method_not_allowed(),
        };
        if subresource && !endpoint.answers(verb) {
            return method_not_allowed();
        }
        let context = Context {
            user: parts
                .extensions
                .get::<User>()
                .cloned()
                .unwrap_or_else(User::anonymous),
            warnings: parts
                .extensions
                .get::<Warnings>()
                .cloned()
                .unwrap_or_default(),
            shutdown: parts.extensions.get::<ShutdownSignal>().cloned(),
            metrics: parts.extensions.get::<Arc<Metrics>>().cloned(),
            audit: parts.extensions.get::<AuditContext>().cloned(),
            params: super::params::Params::parse(parts.uri.query()),
            headers: parts.headers,
            info,
        };
        let span = handler_span(&context, verb, &parts.extensions, parts.version);
        let Some(metrics) = parts.extensions.get::<Arc<Metrics>>().cloned() else {
            return endpoint.serve(context, verb, body).instrument(span).await;
        };
        let labels = request_labels(&context);
        let started = Instant::now();
        let in_flight = metrics.started(&labels);
        let response = endpoint.serve(context, verb, body).instrument(span).await;
        drop(in_flight);
        let code = response.status().as_u16();
        if labels.verb == "WATCH" && response.status() == StatusCode::OK {
            // Open until its stream ends.
            metrics.answered(&labels, code, started.elapsed(), None);
            let open = metrics.long_running(&labels);
            return response.map(|body| Body::new(Guarded { body, _open: open }));
        }
        if let Some(size) = response.body().size_hint().exact() {
            metrics.answered(&labels, code, started.elapsed(), Some(size));
            return response;
        }
        // A streamed body (a list sent as its items are encoded): answered when its last byte is handed over,
        // with the bytes it had, as upstream's handler returns only after writing them.
        response.map(|body| {
            Body::new(Counted {
                body,
                bytes: 0,
                answered: Some(Box::new(move |bytes| {
                    metrics.answered(&labels, code, started.elapsed(), Some(bytes))
                })),
            })
        })
    }
}

/// The handler's span, as upstream's handlers name theirs (`Create`, `Get`, `List`, ...) with their
/// `traceFields` attributes; disabled unless spans are exported.
fn handler_span(
    context: &Context,
    verb: Verb,
    extensions: &http::Extensions,
    version: http::Version,
) -> tracing::Span {
    if !crate::telemetry::in_traced_request() {
        return tracing::Span::none();
    }
    let name = match verb {
        Verb::Get => "Get",
        Verb::List => "List",
        Verb::Watch => "WatchServer.HandleHTTP",
        Verb::Create => "Create",
        Verb::Update => "Update",
        Verb::Patch => "Patch",
        Verb::Delete | Verb::DeleteCollection => "Delete",
    };
    let info = &context.info;
    let header = |name| context.header(name).unwrap_or_default();
    let scope = if !info.name.is_empty() {
        "resource"
    } else if !info.namespace.is_empty() {
        "namespace"
    } else {
        "cluster"
    };
    tracing::trace_span!(
        target: SPAN_TARGET,
        "handler",
        otel.name = name,
        accept = header(http::header::ACCEPT),
        "audit-id" = extensions.get::<AuditId>().map(|a| a.0.as_str()).unwrap_or_default(),
        "api-group" = info.api_group.as_str(),
        "api-version" = info.api_version.as_str(),
        name = info.name.as_str(),
        subresource = info.subresource.as_str(),
        namespace = info.namespace.as_str(),
        protocol = ?version,
        resource = info.resource.as_str(),
        scope,
        url = info.path.as_str(),
        "user-agent" = header(http::header::USER_AGENT),
        verb = info.verb.to_ascii_uppercase(),
    )
}

/// A request's metric labels (upstream's `MonitorRequest` arguments).
fn request_labels(context: &Context) -> RequestLabels {
    let info = &context.info;
    let apply = context
        .header(http::header::CONTENT_TYPE)
        .is_some_and(|t| t.starts_with("application/apply-patch"));
    let dry_run: Vec<&str> = context.params.all("dryRun").collect();
    RequestLabels::new(
        &info.verb,
        apply,
        &dry_run,
        [
            &info.api_group,
            &info.api_version,
            &info.resource,
            &info.subresource,
        ],
        &info.namespace,
        &info.name,
    )
}

/// A response body that keeps a gauge up while it streams.
struct Guarded {
    body: Body,
    _open: InFlight,
}

impl HttpBody for Guarded {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// A streamed response body that counts its bytes and reports them once, at its end (or when dropped early).
struct Counted {
    body: Body,
    bytes: u64,
    answered: Option<Box<dyn FnOnce(u64) + Send>>,
}

impl Counted {
    fn report(&mut self) {
        if let Some(answered) = self.answered.take() {
            answered(self.bytes);
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.report();
    }
}

impl HttpBody for Counted {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = std::pin::Pin::new(&mut self.body).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(Some(Ok(frame))) => {
                self.bytes += frame.data_ref().map_or(0, |data| data.len() as u64);
            }
            std::task::Poll::Ready(_) => self.report(),
            std::task::Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Upstream answers these from its route table: 404 for a path the scope has no route for, 405 for a method.
#[derive(Clone, Copy, Debug)]
enum NoRoute {
    NotFound,
    MethodNotAllowed,
}

/// Which verb a request is. The request info's verb says it (its name may come from a `metadata.name` field
/// selector on a list, as upstream sets it for authorization); the path must fit the verb and the scope.
fn route_verb(info: &RequestInfo, namespaced: bool) -> Result<Verb, NoRoute> {
    let verb = match info.verb.as_str() {
        "get" => Verb::Get,
        "list" => Verb::List,
        "watch" => Verb::Watch,
        "create" => Verb::Create,
        "update" => Verb::Update,
        "patch" => Verb::Patch,
        "delete" => Verb::Delete,
        "deletecollection" => Verb::DeleteCollection,
        _ => return Err(NoRoute::MethodNotAllowed),
    };
    let has_namespace = !info.namespace.is_empty();
    let names_object = path_names_object(info);
    if (!namespaced && has_namespace) || (namespaced && !has_namespace && names_object) {
        return Err(NoRoute::NotFound);
    }
    // A namespaced resource without a namespace has only the all-namespaces list and watch.
    if namespaced && !has_namespace && !matches!(verb, Verb::List | Verb::Watch) {
        return Err(NoRoute::MethodNotAllowed);
    }
    // A create names an object only on a subresource (`POST pizzas/<name>/bake`, as `pods/<name>/eviction`).
    let subresource = !info.subresource.is_empty();
    match (verb, names_object) {
        (Verb::Create, true) if !subresource => Err(NoRoute::MethodNotAllowed),
        (Verb::Update | Verb::Patch, false) => Err(NoRoute::MethodNotAllowed),
        _ => Ok(verb),
    }
}

/// Whether the URL path itself ends in an object name (`.../pizzas/<name>`), not only a collection.
fn path_names_object(info: &RequestInfo) -> bool {
    info.parts.len() >= 2 && info.parts.get(1).is_some_and(|name| !name.is_empty())
}
