//! Resources whose objects the server's own code provides instead of storage, as metrics-server serves
//! `PodMetrics` from memory or a server serves another system's data: `get`, `list` and, when the code can follow
//! changes, `watch`, with discovery, OpenAPI, tables, label and field selectors, authorization and audit as for
//! stored resources. Declared with [`Api::provided`](super::Api::provided).

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::response::Response;
use futures::{Stream, StreamExt};
use http::StatusCode;

use super::api::{ResourceEndpoint, Verb};
use super::context::Context;
use super::get::render_object;
use super::list::{list_request, render_list};
use super::output::{Output, finish};
use super::params::ListParams;
use super::watch::{WatchRequest, respond_items};
use crate::registry::{
    ApiError, ListRequest, ObjectList, Store, WatchChange, WatchChanges, WatchItem, attrs_of,
};
use crate::runtime::{KindDescription, Resource, ResourceCodec};
use crate::storage::{EventType, FieldSelector, LabelSelector};

/// Where the objects of a provided resource come from (upstream's REST storage that implements only
/// `rest.Getter`, `rest.Lister` and, optionally, `rest.Watcher`).
#[async_trait]
pub trait Provider<T: Resource>: Send + Sync + 'static {
    /// The object `name` (in `namespace` for a namespaced kind), `None` when there is none (404).
    async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Option<T>, ApiError>;

    /// The objects of one namespace, or of all (`None`). Selectors are applied afterwards. A list's
    /// `metadata.resourceVersion` is what clients watch from: give one (an integer) when [`Provider::watch`]
    /// can start there; `Ok(items.into())` answers a list without one.
    async fn list(&self, namespace: Option<&str>) -> Result<ObjectList<T>, ApiError>;

    /// Whether this provider implements [`Provider::watch`]: discovery and OpenAPI list `watch` only then, and
    /// a watch of a provider without it is 405, as upstream answers a REST storage that is no `rest.Watcher`.
    fn watches(&self) -> bool {
        false
    }

    /// The changes to the objects of one namespace, or of all (`None`), from `request.resource_version` on, as a
    /// stored resource's watch sends them: without a resourceVersion (or with `send_initial_events`) first an
    /// ADDED event for each object, BOOKMARKs when `allow_watch_bookmarks` (the end of the initial events
    /// marked). The selectors of `request` are empty: the framework applies the client's to each change, using
    /// its `previous` object to turn an object that stops matching into DELETED. The stream ends the watch when
    /// it ends or after an ERROR.
    async fn watch(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchChanges<T>, ApiError> {
        let _ = (namespace, request);
        Err(method_not_allowed())
    }
}

/// A read-only resource computed object by object from a stored one (the pizza sample's menu: one item per
/// topping): `get`, `list` and `watch` read the source store and map each object with `view`, keeping its
/// resourceVersion, so that a client watches from a list's as from a stored resource's.
pub struct View<S: Resource, F> {
    source: Store<S>,
    view: Arc<F>,
}

impl<S: Resource, T: Resource, F: Fn(S) -> T + Send + Sync + 'static> View<S, F> {
    /// The objects of `source`, each as `view` maps it.
    pub fn new(source: Store<S>, view: F) -> Self {
        View {
            source,
            view: Arc::new(view),
        }
    }
}

#[async_trait]
impl<S, T, F> Provider<T> for View<S, F>
where
    S: Resource,
    T: Resource,
    F: Fn(S) -> T + Send + Sync + 'static,
{
    async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Option<T>, ApiError> {
        match self.source.get(namespace, name, None).await {
            Ok(object) => Ok(Some((self.view)(object))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn list(&self, namespace: Option<&str>) -> Result<ObjectList<T>, ApiError> {
        let list = self.source.list(namespace, &ListRequest::default()).await?;
        Ok(ObjectList {
            metadata: list.metadata,
            items: list
                .items
                .into_iter()
                .map(|object| (self.view)(object))
                .collect(),
        })
    }

    fn watches(&self) -> bool {
        true
    }

    async fn watch(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchChanges<T>, ApiError> {
        let changes = self.source.watch_changes(namespace, request).await?;
        let view = self.view.clone();
        Ok(changes
            .map(move |change| change.map(|object| view(object)))
            .boxed())
    }
}

fn method_not_allowed() -> ApiError {
    ApiError::new(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
    )
}

pub(crate) struct ProvidedEndpoint<T: Resource> {
    pub codec: ResourceCodec<T>,
    pub provider: Arc<dyn Provider<T>>,
}

#[async_trait]
impl<T: Resource> ResourceEndpoint for ProvidedEndpoint<T> {
    fn description(&self) -> KindDescription {
        KindDescription {
            read_only: true,
            watch: self.provider.watches(),
            storage_version_hash: String::new(),
            ..self.codec.describe()
        }
    }

    fn namespaced(&self) -> bool {
        T::namespaced()
    }

    fn serves(&self, version: &str) -> bool {
        self.codec.serves(version)
    }

    async fn serve(&self, context: Context, verb: Verb, _body: Body) -> Response {
        let result = match verb {
            Verb::Get => self.get(&context).await,
            Verb::List => self.list(&context).await,
            Verb::Watch if self.provider.watches() => self.watch(&context).await,
            _ => Err(method_not_allowed()),
        };
        finish(&context, result)
    }
}

impl<T: Resource> ProvidedEndpoint<T> {
    async fn get(&self, context: &Context) -> Result<Response, ApiError> {
        let output = Output::negotiate(context, false)?;
        let object = self
            .provider
            .get(context.namespace(), context.name())
            .await?
            .ok_or_else(|| ApiError::not_found(&self.codec.group_resource(), context.name()))?;
        render_object(&self.codec, context, output, StatusCode::OK, &object)
    }

    async fn list(&self, context: &Context) -> Result<Response, ApiError> {
        let output = Output::negotiate(context, false)?;
        let request = list_request::<T>(ListParams::parse(&context.params)?, context)?;
        let mut list = self.provider.list(context.namespace()).await?;
        list.items.retain(|object| selected(&request, object));
        render_list(&self.codec, context, output, StatusCode::OK, &list)
    }

    async fn watch(&self, context: &Context) -> Result<Response, ApiError> {
        let watch = WatchRequest::parse::<T>(context)?;
        let asked = ListRequest {
            label_selector: LabelSelector::everything(),
            field_selector: FieldSelector::everything(),
            ..watch.request.clone()
        };
        let changes = self.provider.watch(context.namespace(), &asked).await?;
        let items = select(changes, watch.request.clone());
        Ok(respond_items(context, &watch, &self.codec, items))
    }
}

/// Whether an object passes a request's label and field selectors.
fn selected<T: Resource>(request: &ListRequest, object: &T) -> bool {
    let attrs = attrs_of(object);
    request.label_selector.matches(&attrs.labels) && request.field_selector.matches(&attrs.fields)
}

/// Applies a watch's selectors to a provider's changes as the watch cache does (upstream `cacheWatcher`): a change
/// whose object matches is sent as it is, except that one whose previous object did not match is ADDED; an object
/// that stops matching is DELETED with its previous state at the change's resourceVersion. A MODIFIED change
/// without its previous object counts the objects this watch has sent as the ones that matched.
fn select<T: Resource>(
    changes: WatchChanges<T>,
    request: ListRequest,
) -> impl Stream<Item = WatchItem<T>> + Send + 'static {
    let everything = request.label_selector.is_empty() && request.field_selector.is_empty();
    let mut sent: HashSet<(String, String)> = HashSet::new();
    changes.filter_map(move |WatchChange { item, previous }| {
        let item = match item {
            WatchItem::Object(kind, object) if !everything => {
                let key = (
                    object.metadata().namespace.clone(),
                    object.metadata().name.clone(),
                );
                let matches = selected(&request, &object);
                let matched = match (kind, &previous) {
                    (EventType::Modified, Some(previous)) => selected(&request, previous),
                    (EventType::Modified | EventType::Deleted, None) => sent.contains(&key),
                    _ => false,
                };
                let matched = matched || (kind == EventType::Deleted && matches);
                let event = match (kind, matches, matched) {
                    (EventType::Deleted, _, true) => Some(WatchItem::Object(kind, object)),
                    (EventType::Deleted, _, false) => None,
                    (_, true, true) => Some(WatchItem::Object(EventType::Modified, object)),
                    (_, true, false) => Some(WatchItem::Object(EventType::Added, object)),
                    (_, false, true) => {
                        let mut gone = previous.unwrap_or(object.clone());
                        gone.metadata_mut().resource_version =
                            object.metadata().resource_version.clone();
                        Some(WatchItem::Object(EventType::Deleted, gone))
                    }
                    (_, false, false) => None,
                };
                match &event {
                    Some(WatchItem::Object(EventType::Deleted, _)) => {
                        sent.remove(&key);
                    }
                    Some(_) => {
                        sent.insert(key);
                    }
                    None => {}
                }
                event
            }
            other => Some(other),
        };
        futures::future::ready(item)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::ObjectMeta;
    use crate::runtime::{PrinterColumn, Scope};

    #[derive(Clone, Debug, Default, PartialEq)]
    struct Gauge {
        metadata: ObjectMeta,
    }

    impl Resource for Gauge {
        const GROUP: &'static str = "example.com";
        const KIND: &'static str = "Gauge";
        const PLURAL: &'static str = "gauges";
        const SINGULAR: &'static str = "gauge";
        const SCOPE: Scope = Scope::Cluster;
        const SHORT_NAMES: &'static [&'static str] = &[];
        const CATEGORIES: &'static [&'static str] = &[];
        const PRINTER_COLUMNS: &'static [PrinterColumn] = &[];
        const SUBRESOURCES: &'static [&'static str] = &[];
        const SELECTABLE_FIELDS: &'static [&'static str] = &[];
        fn metadata(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn metadata_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    fn gauge(name: &str, tier: &str, rv: u64) -> Gauge {
        Gauge {
            metadata: ObjectMeta {
                name: name.into(),
                resource_version: rv.to_string(),
                labels: [("tier".to_string(), tier.to_string())].into(),
                ..ObjectMeta::default()
            },
        }
    }

    fn change(kind: EventType, object: Gauge, previous: Option<Gauge>) -> WatchChange<Gauge> {
        WatchChange {
            item: WatchItem::Object(kind, object),
            previous,
        }
    }

    async fn selected_events(
        selector: &str,
        changes: Vec<WatchChange<Gauge>>,
    ) -> Vec<(EventType, String, String, String)> {
        let request = ListRequest {
            label_selector: LabelSelector::parse(selector).unwrap(),
            ..ListRequest::default()
        };
        select(futures::stream::iter(changes).boxed(), request)
            .filter_map(|item| async move {
                match item {
                    WatchItem::Object(kind, g) => Some((
                        kind,
                        g.metadata.name.clone(),
                        g.metadata.labels["tier"].clone(),
                        g.metadata.resource_version.clone(),
                    )),
                    _ => None,
                }
            })
            .collect()
            .await
    }

    /// Objects that start or stop matching a selector are ADDED and DELETED, as the watch cache sends them.
    #[tokio::test]
    async fn selectors_turn_transitions_into_added_and_deleted() {
        use EventType::*;
        let events = selected_events(
            "tier=gold",
            vec![
                change(Added, gauge("a", "gold", 1), None),
                change(Added, gauge("b", "tin", 2), None),
                change(Modified, gauge("b", "gold", 3), Some(gauge("b", "tin", 2))),
                change(Modified, gauge("a", "tin", 4), Some(gauge("a", "gold", 1))),
                change(Modified, gauge("a", "tin", 5), Some(gauge("a", "tin", 4))),
                // Without the previous object: what this watch sent decides.
                change(Modified, gauge("b", "gold", 6), None),
                change(Modified, gauge("b", "tin", 7), None),
                change(Deleted, gauge("b", "tin", 8), None),
                change(Deleted, gauge("c", "gold", 9), None),
            ],
        )
        .await;
        let expected = [
            (Added, "a", "gold", "1"),
            (Added, "b", "gold", "3"),
            // The previous state, at the change's resourceVersion.
            (Deleted, "a", "gold", "4"),
            (Modified, "b", "gold", "6"),
            // Without it, the object as it is now.
            (Deleted, "b", "tin", "7"),
            (Deleted, "c", "gold", "9"),
        ]
        .map(|(k, n, t, rv)| (k, n.to_string(), t.to_string(), rv.to_string()));
        assert_eq!(events, expected);
    }

    /// Without selectors every change passes as the provider gave it.
    #[tokio::test]
    async fn without_selectors_changes_pass_unchanged() {
        use EventType::*;
        let events = selected_events(
            "",
            vec![
                change(Modified, gauge("a", "tin", 1), None),
                change(Deleted, gauge("a", "tin", 2), None),
            ],
        )
        .await;
        assert_eq!(
            events,
            [
                (Modified, "a".into(), "tin".into(), "1".into()),
                (Deleted, "a".into(), "tin".into(), "2".into())
            ]
        );
    }
}
