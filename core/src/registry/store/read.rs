//! The read flows: get (and [`Store::find`], for code that treats a missing object as an answer), list (paged,
//! with selectors) and watch (typed items, or changes with the previous object).

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::meta::ListMeta;
use crate::runtime::Resource;
use crate::storage::{
    self, EventType, FieldSelector, LabelSelector, Predicate, ResourceVersionMatch, StoredObject,
};

use super::Store;
use crate::registry::ApiError;

/// What to read in a list or watch: upstream's `ListOptions` after parsing.
#[derive(Clone, Debug, Default)]
pub struct ListRequest {
    /// `labelSelector`: only objects whose labels match.
    pub label_selector: LabelSelector,
    /// `fieldSelector`: only objects whose fields match; a name in the path is added here as `metadata.name`.
    pub field_selector: FieldSelector,
    /// `limit`: the most items in one page; 0 for no limit.
    pub limit: u64,
    /// `continue`: the token from the previous page's `metadata.continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`: `None` when unset (the latest, read consistently), `Some(0)` for any.
    pub resource_version: Option<u64>,
    /// `resourceVersionMatch`: how `resource_version` is compared.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// `sendInitialEvents`: whether a watch starts with the current objects as ADDED events.
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`: whether a watch may send BOOKMARK events.
    pub allow_watch_bookmarks: bool,
}

/// One page of a list.
#[derive(Clone, Debug, Default)]
pub struct ObjectList<T> {
    /// `resourceVersion`, `continue` and `remainingItemCount` of the page.
    pub metadata: ListMeta,
    /// The objects of the page, in key order.
    pub items: Vec<T>,
}

/// One event of a typed watch.
#[derive(Clone, Debug)]
pub enum WatchItem<T> {
    /// ADDED, MODIFIED or DELETED with the object (for DELETED: its last state at the deletion revision).
    Object(EventType, T),
    /// A BOOKMARK at a revision; `initial_events_end` marks the end of the initial events.
    Bookmark {
        /// The revision the watch has reached.
        resource_version: u64,
        /// Whether the initial events of a `sendInitialEvents` watch end here.
        initial_events_end: bool,
    },
    /// The watch failed and ends.
    Error(ApiError),
}

/// A typed watch stream.
pub type WatchItems<T> = BoxStream<'static, WatchItem<T>>;

impl<T> WatchItem<T> {
    /// The type of the event this item is sent as.
    pub fn event_type(&self) -> EventType {
        match self {
            WatchItem::Object(kind, _) => *kind,
            WatchItem::Bookmark { .. } => EventType::Bookmark,
            WatchItem::Error(_) => EventType::Error,
        }
    }

    /// The same event with its object turned into another type (a provided kind computed from a stored one).
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> WatchItem<U> {
        match self {
            WatchItem::Object(kind, object) => WatchItem::Object(kind, f(object)),
            WatchItem::Bookmark {
                resource_version,
                initial_events_end,
            } => WatchItem::Bookmark {
                resource_version,
                initial_events_end,
            },
            WatchItem::Error(err) => WatchItem::Error(err),
        }
    }
}

/// A watch event with the object as it was before a MODIFIED change, for code that applies selectors itself (the
/// watch of a provided resource): an object that stops matching is then DELETED and one that starts matching ADDED,
/// as the watch cache sends them.
#[derive(Clone, Debug)]
pub struct WatchChange<T> {
    /// The event.
    pub item: WatchItem<T>,
    /// For MODIFIED: the object before the change, when known.
    pub previous: Option<T>,
}

impl<T> WatchChange<T> {
    /// The same change with its objects turned into another type.
    pub fn map<U>(self, f: impl Fn(T) -> U) -> WatchChange<U> {
        WatchChange {
            previous: self.previous.map(&f),
            item: self.item.map(f),
        }
    }
}

impl<T> From<WatchItem<T>> for WatchChange<T> {
    fn from(item: WatchItem<T>) -> Self {
        WatchChange {
            item,
            previous: None,
        }
    }
}

/// A typed watch stream with previous objects.
pub type WatchChanges<T> = BoxStream<'static, WatchChange<T>>;

impl<T> From<Vec<T>> for ObjectList<T> {
    /// A list without resourceVersion or continue token.
    fn from(items: Vec<T>) -> Self {
        ObjectList {
            metadata: ListMeta::default(),
            items,
        }
    }
}

impl<T: Resource> Store<T> {
    /// Reads one object; `resource_version` is a "not older than" bound.
    pub async fn get(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<u64>,
    ) -> Result<T, ApiError> {
        let stored = self.get_stored(namespace, name, resource_version).await?;
        self.decode(&stored)
    }

    /// Like [`Store::get`], as stored (decode with [`Store::decode`]).
    pub async fn get_stored(
        &self,
        namespace: Option<&str>,
        name: &str,
        resource_version: Option<u64>,
    ) -> Result<StoredObject, ApiError> {
        let key = self.key(namespace, name)?;
        self.storage
            .get(&key, &storage::GetOptions { resource_version })
            .await
            .map_err(|e| ApiError::from_storage(e, &self.resource(), name))
    }

    /// The object, or `None` when it does not exist: [`Store::get`] for code to which a missing object is an
    /// answer, not a failure (a controller whose object was deleted since it was queued; Go writes `Get` and
    /// `apierrors.IsNotFound`). Read consistently, as `get` without a resourceVersion. See [`Store::modify`] for
    /// an example.
    pub async fn find(&self, namespace: Option<&str>, name: &str) -> Result<Option<T>, ApiError> {
        match self.get(namespace, name, None).await {
            Ok(object) => Ok(Some(object)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Lists objects (in one namespace, or all with `None`).
    pub async fn list(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<ObjectList<T>, ApiError> {
        let stored = self.list_stored(namespace, request).await?;
        let items = stored
            .items
            .iter()
            .map(|s| self.decode(s))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ObjectList {
            metadata: stored.metadata,
            items,
        })
    }

    /// Like [`Store::list`], with the items as stored (decode each with [`Store::decode`]): for callers that keep
    /// encoded forms of objects by key and revision.
    pub async fn list_stored(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<ObjectList<StoredObject>, ApiError> {
        let key = self.list_key(namespace)?;
        let result = self
            .storage
            .list(
                &key,
                &storage::ListOptions {
                    resource_version: request.resource_version,
                    resource_version_match: request.resource_version_match,
                    recursive: true,
                    limit: request.limit,
                    continue_token: request.continue_token.clone(),
                    predicate: self.predicate(request),
                },
            )
            .await
            .map_err(|e| ApiError::from_storage(e, &self.resource(), ""))?;
        Ok(ObjectList {
            metadata: ListMeta {
                resource_version: result.revision.to_string(),
                continue_: result.continue_token.unwrap_or_default(),
                remaining_item_count: result.remaining_item_count,
                ..ListMeta::default()
            },
            items: result.items,
        })
    }

    fn list_key(&self, namespace: Option<&str>) -> Result<String, ApiError> {
        let namespace = if T::namespaced() {
            namespace.filter(|ns| !ns.is_empty())
        } else {
            None
        };
        self.keys
            .list(namespace)
            .map_err(|e| ApiError::from_storage(e, &self.resource(), ""))
    }

    fn predicate(&self, request: &ListRequest) -> Predicate {
        Predicate::new(
            request.label_selector.clone(),
            request.field_selector.clone(),
            self.attrs_fn(),
        )
    }

    /// Watches stored events (in one namespace, or all with `None`); [`Store::watch_item`] turns each into a
    /// typed item. Handlers that encode one event for many watchers start from these.
    pub async fn watch_events(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<storage::WatchStream, ApiError> {
        let key = self.list_key(namespace)?;
        self.storage
            .watch(
                &key,
                &storage::WatchOptions {
                    resource_version: request.resource_version,
                    recursive: true,
                    predicate: self.predicate(request),
                    send_initial_events: request.send_initial_events,
                    allow_watch_bookmarks: request.allow_watch_bookmarks,
                    progress_notify: request.allow_watch_bookmarks,
                },
            )
            .await
            .map_err(|e| ApiError::from_storage(e, &self.resource(), ""))
    }

    /// A stored watch event as a typed item; `None` for a bookmark the watcher did not ask for.
    pub fn watch_item(
        &self,
        event: storage::WatchEvent,
        allow_bookmarks: bool,
    ) -> Option<WatchItem<T>> {
        match event.event_type {
            EventType::Bookmark if !allow_bookmarks => None,
            EventType::Bookmark => Some(WatchItem::Bookmark {
                resource_version: event.revision,
                initial_events_end: event.initial_events_end,
            }),
            EventType::Error => Some(WatchItem::Error(match event.error {
                Some(e) => ApiError::from_storage(e, &self.resource(), ""),
                None => ApiError::internal("watch failed"),
            })),
            kind => Some(match self.decode(&event.stored_object()) {
                Ok(object) => WatchItem::Object(kind, object),
                Err(e) => WatchItem::Error(e),
            }),
        }
    }

    /// Watches objects (in one namespace, or all with `None`).
    pub async fn watch(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchItems<T>, ApiError> {
        let events = self.watch_events(namespace, request).await?;
        let store = self.clone();
        let allow_bookmarks = request.allow_watch_bookmarks;
        Ok(events
            .filter_map(move |event| {
                futures::future::ready(store.watch_item(event, allow_bookmarks))
            })
            .boxed())
    }

    /// Like [`Store::watch`], with the previous object of each MODIFIED event.
    pub async fn watch_changes(
        &self,
        namespace: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchChanges<T>, ApiError> {
        let events = self.watch_events(namespace, request).await?;
        let store = self.clone();
        let allow_bookmarks = request.allow_watch_bookmarks;
        Ok(events
            .filter_map(move |event| {
                let previous = match (event.event_type, &event.prev_value) {
                    (EventType::Modified, Some(value)) => store.codec.decode_stored(value).ok(),
                    _ => None,
                };
                let change = store
                    .watch_item(event, allow_bookmarks)
                    .map(|item| WatchChange { item, previous });
                futures::future::ready(change)
            })
            .boxed())
    }

    /// The field selector keys this resource supports: `metadata.name`, `metadata.namespace` and the declared
    /// selectable fields.
    pub fn check_field_selector(selector: &FieldSelector) -> Result<(), ApiError> {
        for requirement in selector.requirements() {
            let field = requirement.field.as_str();
            if field != "metadata.name"
                && field != "metadata.namespace"
                && !T::SELECTABLE_FIELDS.contains(&field)
            {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
        }
        Ok(())
    }
}
