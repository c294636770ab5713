//! The storage layer: the [`Storage`] contract every backend implements, keys, continue tokens, selectors, the
//! in-memory reference backend ([`memory::MemoryStorage`]) and, behind the `testing` feature, the conformance
//! suite that defines what a backend must do.
//!
//! Storage knows bytes, keys and revisions, never types. A value is the object encoded by the layer above
//! **without** its resourceVersion; the backend reports the revision beside the bytes ([`StoredObject::revision`])
//! and the layer above sets `metadata.resourceVersion` after decoding. One strictly increasing revision per
//! backend is the resourceVersion; each write takes exactly one revision. Semantics follow upstream
//! `k8s.io/apiserver/pkg/storage.Interface` and its etcd3 implementation.

use std::future::Future;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;

pub mod backend;
mod change;
mod continue_token;
mod error;
pub mod fields;
pub mod keys;
pub mod labels;
pub mod memory;
pub mod optimistic;
mod predicate;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod transfer;

pub use continue_token::{decode_continue, encode_continue};
pub use error::{
    CONTINUE_EXPIRED_MESSAGE, CallbackError, LIST_EXPIRED_MESSAGE, StorageError,
    WATCH_EXPIRED_MESSAGE,
};
pub use fields::{FieldOperator, FieldRequirement, FieldSelector};
pub use keys::{KeyRange, ResourceKeys, validate_key};
pub use labels::{LabelSelector, Operator, Requirement, SelectorError};
pub use memory::MemoryStorage;
pub use predicate::{Attrs, AttrsFn, Predicate};

/// The annotation upstream puts on the bookmark that ends the initial events of a watch-list.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// A value as stored: its key, its bytes (without resourceVersion) and the revision that last wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredObject {
    /// The full key.
    pub key: String,
    /// The encoded object.
    pub value: Bytes,
    /// The revision of the write that produced this value (the object's resourceVersion); for a deleted object
    /// returned by [`Storage::delete`] or a DELETED event, the revision of the deletion.
    pub revision: u64,
}

/// Options of [`Storage::get`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// A "not older than" bound: `None` or `Some(0)` read the latest value; `Some(n)` fails with
    /// [`StorageError::TooLargeResourceVersion`] while the store is below `n`.
    pub resource_version: Option<u64>,
}

/// `resourceVersionMatch` of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceVersionMatch {
    /// Read the latest state, which must be at least the given revision.
    NotOlderThan,
    /// Read exactly at the given revision (needs history back to it).
    Exact,
}

/// Options of [`Storage::list`].
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// The resourceVersion parameter: `None` is `""`.
    pub resource_version: Option<u64>,
    /// `None` is the legacy behaviour: exact when `recursive && limit > 0 && rv > 0`, otherwise not-older-than.
    pub resource_version_match: Option<ResourceVersionMatch>,
    /// List every key under `key/` (true), or just `key` itself (false).
    pub recursive: bool,
    /// At most this many items; 0 is no limit.
    pub limit: u64,
    /// A token from a previous page.
    pub continue_token: Option<String>,
    /// Which objects to return.
    pub predicate: Predicate,
}

/// One page of a list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListResult {
    /// The objects, in key order.
    pub items: Vec<StoredObject>,
    /// The revision the list was read at (the list's resourceVersion); every page of one list has the same.
    pub revision: u64,
    /// Set when more items may follow.
    pub continue_token: Option<String>,
    /// How many keys follow this page, when the predicate selects everything and a continue token is set.
    pub remaining_item_count: Option<i64>,
    /// How many stored objects were read and tested against the predicate to make this page (for
    /// `apiserver_storage_list_evaluated_objects_total`).
    pub evaluated: u64,
}

/// Reads an object's UID from its bytes, for UID preconditions.
pub type UidFn = std::sync::Arc<dyn Fn(&[u8]) -> Result<String, StorageError> + Send + Sync>;

/// Conditions a write checks against the current object (upstream `storage.Preconditions`). A failure is a
/// [`StorageError::InvalidObj`] with upstream's text (409 Conflict).
#[derive(Clone, Default)]
pub struct Preconditions {
    uid: Option<(String, UidFn)>,
    /// The object must be at exactly this revision.
    pub resource_version: Option<u64>,
}

impl Preconditions {
    /// No conditions.
    pub fn new() -> Self {
        Preconditions::default()
    }

    /// Requires the object's UID, as read by `uid_of`, to equal `uid`.
    pub fn with_uid(mut self, uid: impl Into<String>, uid_of: UidFn) -> Self {
        self.uid = Some((uid.into(), uid_of));
        self
    }

    /// Requires the object to be at `revision`.
    pub fn with_resource_version(mut self, revision: u64) -> Self {
        self.resource_version = Some(revision);
        self
    }

    /// The required UID, if any.
    pub fn uid(&self) -> Option<&str> {
        self.uid.as_ref().map(|(u, _)| u.as_str())
    }

    /// Checks the conditions against `obj`.
    pub fn check(&self, obj: &StoredObject) -> Result<(), StorageError> {
        if let Some((uid, uid_of)) = &self.uid {
            let actual = uid_of(&obj.value)?;
            if *uid != actual {
                return Err(StorageError::InvalidObj {
                    key: obj.key.clone(),
                    revision: obj.revision,
                    message: format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {actual}"
                    ),
                });
            }
        }
        if let Some(rv) = self.resource_version
            && rv != obj.revision
        {
            return Err(StorageError::InvalidObj {
                key: obj.key.clone(),
                revision: obj.revision,
                message: format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    obj.revision
                ),
            });
        }
        Ok(())
    }
}

impl std::fmt::Debug for Preconditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preconditions")
            .field("uid", &self.uid())
            .field("resource_version", &self.resource_version)
            .finish()
    }
}

/// The try-update step of [`Storage::guaranteed_update`]: given the current object (`None` when it does not
/// exist and `ignore_not_found` is set), return the new value, or an error to abort. It may run several times
/// (once per conflict), and is async so the layer above can run admission inside it. An implementation that needs
/// to know, once the update is over, what its last run decided (the registry's update and delete flows) keeps that
/// in itself: the last run is the one the storage acted on.
///
/// Any `FnMut(Option<StoredObject>) -> impl Future<Output = Result<V, StorageError>>` closure implements it, where
/// `V` is [`NewValue`] or [`Bytes`] (always written).
#[async_trait]
pub trait TryUpdate: Send {
    /// Computes the new value from the current one.
    async fn try_update(&mut self, current: Option<StoredObject>)
    -> Result<NewValue, StorageError>;
}

#[async_trait]
impl<F, Fut, V> TryUpdate for F
where
    F: FnMut(Option<StoredObject>) -> Fut + Send,
    Fut: Future<Output = Result<V, StorageError>> + Send,
    V: Into<NewValue>,
{
    async fn try_update(
        &mut self,
        current: Option<StoredObject>,
    ) -> Result<NewValue, StorageError> {
        (self)(current).await.map(Into::into)
    }
}

/// What one run of a [`TryUpdate`] decided to do with the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NewValue {
    /// Store these bytes (nothing is written when they equal the stored ones).
    Write(Bytes),
    /// Write nothing and end the update: [`Storage::guaranteed_update`] answers the current object, as for
    /// unchanged bytes (a decision made on a cached guess is first confirmed against the live object, and made
    /// again on it if the guess was stale). Keeping a key that does not exist fails with
    /// [`StorageError::KeyNotFound`]: there is nothing to answer. The registry keeps when an update turns into a
    /// delete (emptied finalizers) or a delete finds nothing to mark.
    Keep,
}

impl From<Bytes> for NewValue {
    fn from(bytes: Bytes) -> Self {
        NewValue::Write(bytes)
    }
}

/// The validate-deletion step of [`Storage::delete`] (validating admission for DELETE): it sees the object about
/// to be deleted and may refuse. It may run several times.
///
/// Any `FnMut(StoredObject) -> impl Future<Output = Result<(), StorageError>>` closure implements it;
/// [`AllowDeletion`] accepts everything.
#[async_trait]
pub trait ValidateDeletion: Send {
    /// Accepts or refuses deleting `current`.
    async fn validate(&mut self, current: StoredObject) -> Result<(), StorageError>;
}

#[async_trait]
impl<F, Fut> ValidateDeletion for F
where
    F: FnMut(StoredObject) -> Fut + Send,
    Fut: Future<Output = Result<(), StorageError>> + Send,
{
    async fn validate(&mut self, current: StoredObject) -> Result<(), StorageError> {
        (self)(current).await
    }
}

/// A [`ValidateDeletion`] that allows every deletion.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowDeletion;

#[async_trait]
impl ValidateDeletion for AllowDeletion {
    async fn validate(&mut self, _current: StoredObject) -> Result<(), StorageError> {
        Ok(())
    }
}

/// Options of [`Storage::watch`].
#[derive(Clone, Debug, Default)]
pub struct WatchOptions {
    /// `None`/`Some(0)`: start from the current state (see `send_initial_events`); `Some(n)`: every change after
    /// revision `n`.
    pub resource_version: Option<u64>,
    /// Watch every key under `key/` (true), or just `key` (false).
    pub recursive: bool,
    /// Which objects to report; a modification that moves an object into or out of the selection is reported as
    /// ADDED or DELETED.
    pub predicate: Predicate,
    /// `Some(true)`: ADDED for every current object, then (with `allow_watch_bookmarks`) a bookmark with
    /// `initial_events_end`, then changes. `Some(false)` with no resourceVersion: changes from now only.
    /// `None` (legacy): like `Some(true)` when resourceVersion is unset or 0, without the bookmark.
    pub send_initial_events: Option<bool>,
    /// Whether the caller accepts BOOKMARK events (the initial-events-end bookmark needs it).
    pub allow_watch_bookmarks: bool,
    /// Ask for progress bookmarks (etcd progress notifications): a BOOKMARK at the current revision whenever
    /// [`Storage::request_watch_progress`] is called, or periodically if the backend does that.
    pub progress_notify: bool,
}

/// The kind of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// The object appeared (created, or entered the selection, or is part of the initial state).
    Added,
    /// The object changed and is still selected.
    Modified,
    /// The object was deleted or left the selection; the value is its last selected state.
    Deleted,
    /// No object: the watch has seen everything up to `revision`.
    Bookmark,
    /// The watch failed (e.g. fell too far behind or was compacted); the stream ends after it.
    Error,
}

/// One event of a watch.
#[derive(Clone, Debug)]
pub struct WatchEvent {
    /// What happened.
    pub event_type: EventType,
    /// The object's key (empty for bookmarks and errors).
    pub key: String,
    /// The object's bytes: the new value, or for DELETED the last value (empty for bookmarks and errors).
    pub value: Bytes,
    /// The value before this change, when there was one.
    pub prev_value: Option<Bytes>,
    /// The revision of the change (for DELETED, the deletion revision); for a bookmark, the revision the watch
    /// has reached; for initial ADDED events, the object's own revision.
    pub revision: u64,
    /// True on the bookmark that ends the initial events (`k8s.io/initial-events-end`).
    pub initial_events_end: bool,
    /// The error of an [`EventType::Error`] event.
    pub error: Option<StorageError>,
}

impl WatchEvent {
    /// An object event.
    pub fn object(event_type: EventType, obj: StoredObject, prev_value: Option<Bytes>) -> Self {
        WatchEvent {
            event_type,
            key: obj.key,
            value: obj.value,
            prev_value,
            revision: obj.revision,
            initial_events_end: false,
            error: None,
        }
    }

    /// A bookmark at `revision`.
    pub fn bookmark(revision: u64, initial_events_end: bool) -> Self {
        WatchEvent {
            event_type: EventType::Bookmark,
            key: String::new(),
            value: Bytes::new(),
            prev_value: None,
            revision,
            initial_events_end,
            error: None,
        }
    }

    /// An error event; the stream ends after it.
    pub fn error(err: StorageError) -> Self {
        WatchEvent {
            event_type: EventType::Error,
            key: String::new(),
            value: Bytes::new(),
            prev_value: None,
            revision: 0,
            initial_events_end: false,
            error: Some(err),
        }
    }

    /// The event's object as a [`StoredObject`].
    pub fn stored_object(&self) -> StoredObject {
        StoredObject {
            key: self.key.clone(),
            value: self.value.clone(),
            revision: self.revision,
        }
    }
}

/// A watch: a stream of events that ends after an error event; dropping it stops the watch.
pub type WatchStream = BoxStream<'static, WatchEvent>;

/// Counts for capacity planning and the `apiserver_storage_objects` metric.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Objects under the prefix.
    pub object_count: u64,
    /// Mean size of their values in bytes (0 when there are none).
    pub estimated_average_object_size_bytes: u64,
}

/// The storage contract every backend implements (upstream `storage.Interface`), object-safe so servers hold an
/// `Arc<dyn Storage>` chosen at startup. The conformance suite (`testing` feature) is its executable definition.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Stores `value` at `key` if the key does not exist; fails with [`StorageError::KeyExists`] otherwise.
    /// Returns the stored object with the revision of the write.
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError>;

    /// Reads `key` ([`StorageError::KeyNotFound`] when absent).
    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError>;

    /// Lists `key` (recursively, under `key/`, when `opts.recursive`), paged by `limit` and continue tokens,
    /// filtered by the predicate, with every page read at the same revision.
    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError>;

    /// Optimistically updates `key`: read (or take `cached_existing` as a guess), check `preconditions`, run
    /// `try_update`, write if the revision is unchanged, retry on conflict. If the new bytes equal the stored
    /// bytes, or `try_update` answers [`NewValue::Keep`], nothing is written and the current object is returned. With `ignore_not_found`, a missing key passes
    /// `None` to `try_update` and the result is created. [`optimistic::guaranteed_update`] implements it on a
    /// backend's conditional writes.
    async fn guaranteed_update(
        &self,
        key: &str,
        ignore_not_found: bool,
        preconditions: Option<&Preconditions>,
        try_update: &mut dyn TryUpdate,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError>;

    /// Deletes `key` after checking `preconditions` and `validate_deletion` against the current object (or
    /// `cached_existing` as a first guess), retrying on conflict. Returns the deleted value with the revision of
    /// the deletion. [`optimistic::delete`] implements it on a backend's conditional writes.
    async fn delete(
        &self,
        key: &str,
        preconditions: Option<&Preconditions>,
        validate_deletion: &mut dyn ValidateDeletion,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError>;

    /// Watches `key` (recursively under `key/` when `opts.recursive`). Fails with a 410
    /// [`StorageError::Expired`] when the start revision was compacted.
    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError>;

    /// The backend's current revision, read consistently (upstream `GetCurrentResourceVersion`).
    async fn current_revision(&self) -> Result<u64, StorageError>;

    /// Discards history older than `revision`: reads and watches before it fail with 410 afterwards.
    async fn compact(&self, revision: u64) -> Result<(), StorageError>;

    /// Moves the current revision up to `revision` in one step, writing no object, when it is below (as etcd's
    /// `etcdutl snapshot restore --bump-revision` does offline): every later write gets a higher one, so a restore
    /// keeps resourceVersions above its backup's in constant work. Returns false when the backend cannot: etcd
    /// moves its revision only by writes, one per transaction.
    async fn bump_revision(&self, revision: u64) -> Result<bool, StorageError> {
        let _ = revision;
        Ok(false)
    }

    /// The latest compacted revision this backend knows of (0 = none).
    async fn compact_revision(&self) -> Result<u64, StorageError>;

    /// Object count and average size under `prefix`.
    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError>;

    /// Whether the backend can serve requests.
    async fn readiness(&self) -> Result<(), StorageError>;

    /// Asks every watch with `progress_notify` for a BOOKMARK at the current revision (used by the watch cache
    /// to catch up without writes). Backends without progress notifications may do nothing.
    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        Ok(())
    }

    /// Whether a progress BOOKMARK at revision R promises that every event of the watch up to R was delivered
    /// before it. The watch cache relies on that to serve consistent reads from memory; without it (etcd 3.4
    /// answers progress requests with the store's revision while a watch's events may still be queued) the cache
    /// sends consistent reads to the backend, as upstream does for etcd before 3.5.13.
    fn reliable_progress(&self) -> bool {
        true
    }
}

/// How to serve a list, from [`plan_list`]: shared by backends so they agree on upstream's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListPlan {
    /// The keys to read.
    pub range: KeyRange,
    /// Start at this key (inclusive) within the range, from a continue token.
    pub start_key: Option<String>,
    /// Read at exactly this revision; `None` reads the latest.
    pub read_revision: Option<u64>,
    /// When reading the latest, it must be at least this ([`StorageError::TooLargeResourceVersion`] otherwise).
    pub min_revision: Option<u64>,
    /// Whether a continue token was given (a compacted read revision is then the continue 410).
    pub continuing: bool,
}

/// Applies upstream's `ValidateListOptions` and resourceVersion rules to `opts` (etcd3 `GetList`).
pub fn plan_list(key: &str, opts: &ListOptions) -> Result<ListPlan, StorageError> {
    let range = KeyRange::new(key, opts.recursive)?;
    let rv = opts.resource_version;
    if let Some(token) = opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
        let (start, continue_rv) = decode_continue(token, range.as_str())?;
        if rv.is_some_and(|rv| rv != 0) {
            return Err(StorageError::BadRequest(
                "specifying resource version is not allowed when using continue".into(),
            ));
        }
        if !range.contains(&start) {
            return Err(StorageError::BadRequest(format!(
                "invalid continue token: continue key is not valid: {start:?} is outside {:?}",
                range.as_str()
            )));
        }
        return Ok(ListPlan {
            range,
            start_key: Some(start),
            // decode_continue never returns 0; a negative revision means "the latest".
            read_revision: u64::try_from(continue_rv).ok(),
            min_revision: None,
            continuing: true,
        });
    }
    let (read_revision, min_revision) = match opts.resource_version_match {
        Some(ResourceVersionMatch::Exact) => match rv {
            Some(n) if n > 0 => (Some(n), None),
            _ => {
                return Err(StorageError::BadRequest(
                    "resourceVersionMatch \"Exact\" requires a resourceVersion greater than 0"
                        .into(),
                ));
            }
        },
        Some(ResourceVersionMatch::NotOlderThan) => (None, rv.filter(|n| *n > 0)),
        None => match rv {
            Some(n) if n > 0 && opts.recursive && opts.limit > 0 => (Some(n), None),
            _ => (None, rv.filter(|n| *n > 0)),
        },
    };
    Ok(ListPlan {
        range,
        start_key: None,
        read_revision,
        min_revision,
        continuing: false,
    })
}

pub use change::Change;
