//! The in-memory MVCC backend: the reference implementation of [`Storage`] and the store unit tests of upper
//! layers run against.
//!
//! Every write takes the next revision and is kept (per key, and in an event log) until [`Storage::compact`]
//! drops older history, so exact-revision reads, paged lists at one revision and watches from a past revision
//! all work as on etcd. Nothing is persisted. A periodic compactor (upstream's etcd compactor, every five minutes
//! unless configured otherwise) drops history older than one interval, so memory follows the live objects rather
//! than every write ever made.
//!
//! Watchers get events through bounded channels filled without blocking: a watcher that falls more than the
//! buffer behind is cut off with an error event, and writers never wait for readers.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::mpsc;

use super::optimistic::{self, Latest, OptimisticStore, Outcome};
use super::{
    Change, EventType, GetOptions, KeyRange, ListOptions, ListResult, Preconditions, Stats,
    Storage, StorageError, StoredObject, TryUpdate, ValidateDeletion, WatchEvent, WatchOptions,
    WatchStream, encode_continue, plan_list, validate_key,
};
use crate::Predicate;

/// How many events a watcher may fall behind before it is terminated, unless configured otherwise.
pub const DEFAULT_WATCH_BUFFER: usize = 1024;

/// Upstream's default `--etcd-compaction-interval`.
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// One value of a key; `None` is a deletion (tombstone).
#[derive(Clone, Debug)]
struct Version {
    revision: u64,
    value: Option<Bytes>,
}

/// One write, as watchers see it.
#[derive(Debug)]
enum Notification {
    Entry(Arc<Change>),
    Progress(u64),
}

struct WatcherSlot {
    range: KeyRange,
    progress_notify: bool,
    tx: mpsc::Sender<Notification>,
    overflowed: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    revision: u64,
    compacted: u64,
    keys: BTreeMap<String, Vec<Version>>,
    log: VecDeque<Arc<Change>>,
    watchers: Vec<WatcherSlot>,
}

impl State {
    /// The value of `key` at revision `rev`, with the revision that wrote it.
    fn value_at(versions: &[Version], rev: u64) -> Option<(u64, &Bytes)> {
        let idx = versions.partition_point(|v| v.revision <= rev);
        let v = versions.get(idx.checked_sub(1)?)?;
        v.value.as_ref().map(|b| (v.revision, b))
    }

    fn latest(&self, key: &str) -> Option<StoredObject> {
        let v = self.keys.get(key)?.last()?;
        v.value.as_ref().map(|b| StoredObject {
            key: key.to_string(),
            value: b.clone(),
            revision: v.revision,
        })
    }

    /// Writes `value` (or deletes with `None`) at the next revision and tells the watchers.
    fn write(&mut self, key: &str, value: Option<Bytes>) -> u64 {
        self.revision += 1;
        let revision = self.revision;
        let versions = self.keys.entry(key.to_string()).or_default();
        let (prev, prev_revision) = versions
            .last()
            .and_then(|v| Some((Some(v.value.clone()?), v.revision)))
            .unwrap_or((None, 0));
        versions.push(Version {
            revision,
            value: value.clone(),
        });
        let entry = Arc::new(Change {
            revision,
            key: key.to_string(),
            value,
            prev,
            prev_revision,
        });
        self.log.push_back(entry.clone());
        self.watchers.retain(|w| {
            if !w.range.contains(key) {
                return !w.tx.is_closed();
            }
            match w.tx.try_send(Notification::Entry(entry.clone())) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    w.overflowed.store(true, Ordering::Release);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        revision
    }

    /// One tick of the periodic compactor: compacts to `seen` (the revision of the previous tick) and returns the
    /// revision to compact to at the next one.
    fn compaction_tick(&mut self, seen: u64) -> u64 {
        if seen > self.compacted {
            self.compact(seen);
        }
        self.revision
    }

    fn compact(&mut self, rev: u64) {
        self.compacted = rev;
        while self.log.front().is_some_and(|e| e.revision <= rev) {
            self.log.pop_front();
        }
        self.keys.retain(|_, versions| {
            // Keep the value visible at `rev` and everything newer.
            let idx = versions.partition_point(|v| v.revision <= rev);
            if idx > 1 {
                versions.drain(..idx - 1);
            }
            if versions
                .first()
                .is_some_and(|v| v.value.is_none() && v.revision <= rev)
            {
                versions.remove(0);
            }
            !versions.is_empty()
        });
    }
}

/// The in-memory MVCC backend. Cheap to clone (clones share the store and its compactor).
#[derive(Clone)]
pub struct MemoryStorage {
    state: Arc<Mutex<State>>,
    watch_buffer: usize,
    compactor: Option<Arc<Compactor>>,
}

/// The periodic compaction task; it stops when the last clone of the store is dropped.
struct Compactor(tokio::task::JoinHandle<()>);

impl Drop for Compactor {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Every `interval`, compacts to the revision seen one interval earlier (upstream's etcd compactor), so at least
/// one interval of history stays readable for watches and paged lists.
async fn compact_periodically(state: Weak<Mutex<State>>, interval: Duration) {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    let mut seen = 0;
    loop {
        ticker.tick().await;
        let Some(state) = state.upgrade() else {
            return;
        };
        seen = state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .compaction_tick(seen);
    }
}

impl Default for MemoryStorage {
    fn default() -> Self {
        MemoryStorage::new()
    }
}

impl std::fmt::Debug for MemoryStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.lock();
        f.debug_struct("MemoryStorage")
            .field("revision", &s.revision)
            .field("compacted", &s.compacted)
            .field("keys", &s.keys.len())
            .field("watchers", &s.watchers.len())
            .finish()
    }
}

impl MemoryStorage {
    /// An empty store at revision 0, compacted every [`DEFAULT_COMPACTION_INTERVAL`] when created within a tokio
    /// runtime (without one, nothing compacts unless [`Storage::compact`] is called).
    pub fn new() -> Self {
        MemoryStorage {
            state: Arc::new(Mutex::new(State::default())),
            watch_buffer: DEFAULT_WATCH_BUFFER,
            compactor: None,
        }
        .with_compaction_interval(DEFAULT_COMPACTION_INTERVAL)
    }

    /// Compacts every `interval` instead (zero: never). Starts the compactor on the current tokio runtime, if any.
    pub fn with_compaction_interval(mut self, interval: Duration) -> Self {
        self.compactor = None;
        if !interval.is_zero()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let task = runtime.spawn(compact_periodically(Arc::downgrade(&self.state), interval));
            self.compactor = Some(Arc::new(Compactor(task)));
        }
        self
    }

    /// Sets how many events a watcher may fall behind before it is terminated (at least 1).
    pub fn with_watch_buffer(mut self, events: usize) -> Self {
        self.watch_buffer = events.max(1);
        self
    }

    /// The store behind an `Arc<dyn Storage>`.
    pub fn into_dyn(self) -> Arc<dyn Storage> {
        Arc::new(self)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-written (writes are single pushes), so a
        // poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read_latest(&self, key: &str) -> Option<StoredObject> {
        self.lock().latest(key)
    }
}

/// The store's conditional writes for the optimistic loop: each is one step under the lock, and a swap compares
/// the new bytes with the stored ones there.
struct Occ<'a>(&'a MemoryStorage);

#[async_trait]
impl OptimisticStore for Occ<'_> {
    async fn latest(&self, key: &str) -> Result<Latest, StorageError> {
        Ok(Latest {
            object: self.0.read_latest(key),
            revision: None,
        })
    }

    async fn create_if_absent(&self, key: &str, value: Bytes) -> Result<Outcome, StorageError> {
        let mut s = self.0.lock();
        if let Some(live) = s.latest(key) {
            return Ok(Outcome::Conflict(Some(live)));
        }
        let revision = s.write(key, Some(value.clone()));
        Ok(Outcome::Written(StoredObject {
            key: key.to_string(),
            value,
            revision,
        }))
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: &StoredObject,
        value: Bytes,
    ) -> Result<Outcome, StorageError> {
        let mut s = self.0.lock();
        Ok(match s.latest(key) {
            Some(live) if live.revision == expected.revision => {
                if live.value == value {
                    return Ok(Outcome::Unchanged(live));
                }
                let revision = s.write(key, Some(value.clone()));
                Outcome::Written(StoredObject {
                    key: key.to_string(),
                    value,
                    revision,
                })
            }
            live => Outcome::Conflict(live),
        })
    }

    async fn compare_and_delete(
        &self,
        key: &str,
        expected: &StoredObject,
    ) -> Result<Outcome, StorageError> {
        let mut s = self.0.lock();
        Ok(match s.latest(key) {
            Some(live) if live.revision == expected.revision => {
                let revision = s.write(key, None);
                Outcome::Written(StoredObject {
                    key: key.to_string(),
                    value: live.value,
                    revision,
                })
            }
            live => Outcome::Conflict(live),
        })
    }

    async fn key_not_found(&self, key: &str, _seen: Option<u64>) -> StorageError {
        StorageError::KeyNotFound {
            key: key.to_string(),
            revision: self.0.lock().revision,
        }
    }

    fn swap_compares_values(&self) -> bool {
        true
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        let mut s = self.lock();
        if s.latest(key).is_some() {
            return Err(StorageError::KeyExists {
                key: key.to_string(),
                revision: 0,
            });
        }
        let revision = s.write(key, Some(value.clone()));
        Ok(StoredObject {
            key: key.to_string(),
            value,
            revision,
        })
    }

    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        let s = self.lock();
        if let Some(min) = opts.resource_version
            && min > s.revision
        {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min,
                current: s.revision,
            });
        }
        s.latest(key).ok_or_else(|| StorageError::KeyNotFound {
            key: key.to_string(),
            revision: s.revision,
        })
    }

    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let plan = plan_list(key, opts)?;
        let s = self.lock();
        if let Some(min) = plan.min_revision
            && min > s.revision
        {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min,
                current: s.revision,
            });
        }
        let rev = plan.read_revision.unwrap_or(s.revision);
        if rev > s.revision {
            return Err(StorageError::TooLargeResourceVersion {
                requested: rev,
                current: s.revision,
            });
        }
        if rev < s.compacted {
            if plan.continuing {
                let start = plan.start_key.as_deref().unwrap_or(plan.range.as_str());
                let token = encode_continue(start, plan.range.as_str(), -1).ok();
                return Err(StorageError::continue_expired(token));
            }
            return Err(StorageError::list_expired());
        }
        let start = plan
            .start_key
            .clone()
            .unwrap_or_else(|| plan.range.as_str().to_string());
        let in_range = |k: &str| plan.range.contains(k);
        let mut live = s
            .keys
            .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
            .take_while(|(k, _)| in_range(k))
            .filter_map(|(k, versions)| {
                State::value_at(versions, rev).map(|(r, v)| StoredObject {
                    key: k.clone(),
                    value: v.clone(),
                    revision: r,
                })
            });
        let limit = usize::try_from(opts.limit).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key: Option<String> = None;
        let mut has_more = false;
        let mut evaluated = 0;
        for obj in live.by_ref() {
            if limit > 0 && items.len() >= limit {
                has_more = true;
                break;
            }
            last_key = Some(obj.key.clone());
            evaluated += 1;
            if opts.predicate.matches(&obj.value)? {
                items.push(obj);
            }
        }
        let mut result = ListResult {
            items,
            revision: rev,
            continue_token: None,
            remaining_item_count: None,
            evaluated,
        };
        if has_more && let Some(last) = last_key {
            let next = format!("{last}\0");
            result.continue_token = Some(encode_continue(&next, plan.range.as_str(), rev as i64)?);
            if opts.predicate.is_everything() {
                // The object that stopped the loop plus the rest.
                result.remaining_item_count = Some(1 + live.count() as i64);
            }
        }
        Ok(result)
    }

    async fn guaranteed_update(
        &self,
        key: &str,
        ignore_not_found: bool,
        preconditions: Option<&Preconditions>,
        try_update: &mut dyn TryUpdate,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        optimistic::guaranteed_update(
            &Occ(self),
            key,
            ignore_not_found,
            preconditions,
            try_update,
            cached_existing,
        )
        .await
    }

    async fn delete(
        &self,
        key: &str,
        preconditions: Option<&Preconditions>,
        validate_deletion: &mut dyn ValidateDeletion,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        optimistic::delete(
            &Occ(self),
            key,
            preconditions,
            validate_deletion,
            cached_existing,
        )
        .await
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
        let range = KeyRange::new(key, opts.recursive)?;
        let rv = opts.resource_version.unwrap_or(0);
        let initial_events = match opts.send_initial_events {
            Some(send) => send,
            None => rv == 0,
        };
        let (tx, rx) = mpsc::channel(self.watch_buffer);
        let overflowed = Arc::new(AtomicBool::new(false));
        let mut pending: VecDeque<Pending> = VecDeque::new();
        let start_after;
        {
            let mut s = self.lock();
            if initial_events {
                let at = if rv == 0 { s.revision } else { rv };
                if at > s.revision {
                    return Err(StorageError::TooLargeResourceVersion {
                        requested: at,
                        current: s.revision,
                    });
                }
                if at < s.compacted {
                    return Err(StorageError::watch_expired());
                }
                let start = range.as_str().to_string();
                for (k, versions) in s
                    .keys
                    .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
                    .take_while(|(k, _)| range.contains(k))
                {
                    if let Some((r, v)) = State::value_at(versions, at) {
                        let obj = StoredObject {
                            key: k.clone(),
                            value: v.clone(),
                            revision: r,
                        };
                        pending.push_back(Pending::Initial(obj));
                    }
                }
                if opts.send_initial_events == Some(true) && opts.allow_watch_bookmarks {
                    pending.push_back(Pending::Ready(WatchEvent::bookmark(at, true)));
                }
                start_after = at;
            } else if rv == 0 {
                start_after = s.revision;
            } else {
                if rv < s.compacted {
                    return Err(StorageError::watch_expired());
                }
                start_after = rv;
            }
            for e in s
                .log
                .iter()
                .filter(|e| e.revision > start_after && range.contains(&e.key))
            {
                pending.push_back(Pending::Entry(e.clone()));
            }
            s.watchers.push(WatcherSlot {
                range,
                progress_notify: opts.progress_notify,
                tx,
                overflowed: overflowed.clone(),
            });
        }
        let state = WatchState {
            pending,
            rx,
            overflowed,
            predicate: opts.predicate.clone(),
            start_after,
            done: false,
        };
        Ok(Box::pin(futures::stream::unfold(
            state,
            |mut st| async move {
                let ev = st.next().await?;
                Some((ev, st))
            },
        )))
    }

    async fn current_revision(&self) -> Result<u64, StorageError> {
        Ok(self.lock().revision)
    }

    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        let mut s = self.lock();
        if revision > s.revision {
            return Err(StorageError::TooLargeResourceVersion {
                requested: revision,
                current: s.revision,
            });
        }
        if revision > s.compacted {
            s.compact(revision);
        }
        Ok(())
    }

    async fn compact_revision(&self) -> Result<u64, StorageError> {
        Ok(self.lock().compacted)
    }

    async fn bump_revision(&self, revision: u64) -> Result<bool, StorageError> {
        let mut s = self.lock();
        s.revision = s.revision.max(revision);
        Ok(true)
    }

    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        validate_key(prefix)?;
        let s = self.lock();
        let (mut count, mut bytes) = (0u64, 0u64);
        for (_, versions) in s
            .keys
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
        {
            if let Some(Version { value: Some(v), .. }) = versions.last() {
                count += 1;
                bytes += v.len() as u64;
            }
        }
        Ok(Stats {
            object_count: count,
            estimated_average_object_size_bytes: bytes.checked_div(count).unwrap_or(0),
        })
    }

    async fn readiness(&self) -> Result<(), StorageError> {
        Ok(())
    }

    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        let mut s = self.lock();
        let rev = s.revision;
        s.watchers.retain(|w| {
            if !w.progress_notify {
                return !w.tx.is_closed();
            }
            match w.tx.try_send(Notification::Progress(rev)) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    w.overflowed.store(true, Ordering::Release);
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        Ok(())
    }
}

enum Pending {
    Initial(StoredObject),
    Entry(Arc<Change>),
    Ready(WatchEvent),
}

struct WatchState {
    pending: VecDeque<Pending>,
    rx: mpsc::Receiver<Notification>,
    overflowed: Arc<AtomicBool>,
    predicate: Predicate,
    start_after: u64,
    done: bool,
}

impl WatchState {
    async fn next(&mut self) -> Option<WatchEvent> {
        if self.done {
            return None;
        }
        loop {
            let item = match self.pending.pop_front() {
                Some(p) => p,
                None => match self.rx.recv().await {
                    Some(Notification::Entry(e)) => Pending::Entry(e),
                    Some(Notification::Progress(rev)) => {
                        if rev < self.start_after {
                            continue;
                        }
                        Pending::Ready(WatchEvent::bookmark(rev, false))
                    }
                    None => {
                        self.done = true;
                        if self.overflowed.load(Ordering::Acquire) {
                            return Some(WatchEvent::error(StorageError::Internal(
                                "watch terminated: the watcher fell too far behind".into(),
                            )));
                        }
                        return None;
                    }
                },
            };
            let event = match item {
                Pending::Ready(ev) => Some(ev),
                Pending::Initial(obj) => matches(&self.predicate, &obj.value)
                    .then(|| WatchEvent::object(EventType::Added, obj, None)),
                Pending::Entry(e) => {
                    if e.revision <= self.start_after {
                        None
                    } else {
                        e.event_for(&self.predicate)
                    }
                }
            };
            if let Some(ev) = event {
                return Some(ev);
            }
        }
    }
}

/// Whether a value is selected; an extraction failure counts as not selected (as upstream's watcher filter).
fn matches(p: &Predicate, value: &[u8]) -> bool {
    p.matches(value).unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn slow_watcher_is_cut_off_without_blocking_writers() {
        let store = MemoryStorage::new().with_watch_buffer(4);
        let mut w = store
            .watch(
                "/a",
                &WatchOptions {
                    resource_version: Some(0),
                    send_initial_events: Some(false),
                    recursive: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        for i in 0..100 {
            store
                .create(&format!("/a/{i}"), Bytes::from("x"))
                .await
                .unwrap();
        }
        let mut n = 0;
        let mut last = None;
        while let Some(ev) = w.next().await {
            n += 1;
            last = Some(ev.event_type);
        }
        assert_eq!(last, Some(EventType::Error));
        assert_eq!(n, 5);
    }

    #[tokio::test]
    async fn compaction_keeps_the_state_at_the_compacted_revision() {
        let store = MemoryStorage::new();
        store.create("/a/1", Bytes::from("1")).await.unwrap();
        let del = store.create("/a/2", Bytes::from("2")).await.unwrap();
        store
            .delete("/a/2", None, &mut super::super::AllowDeletion, None)
            .await
            .unwrap();
        let rev = store.current_revision().await.unwrap();
        store.compact(rev).await.unwrap();
        let l = store
            .list(
                "/a",
                &ListOptions {
                    recursive: true,
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(l.items.len(), 1);
        {
            let s = store.lock();
            assert_eq!(s.keys.len(), 1);
            assert!(s.log.is_empty());
        }
        let e = store
            .list(
                "/a",
                &ListOptions {
                    recursive: true,
                    resource_version: Some(del.revision),
                    resource_version_match: Some(super::super::ResourceVersionMatch::Exact),
                    ..Default::default()
                },
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), 410);
    }

    /// Probe finding C5: without a compactor every update of an object was kept forever.
    #[tokio::test]
    async fn compacts_periodically_keeping_one_interval() {
        let store = MemoryStorage::new().with_compaction_interval(Duration::ZERO);
        let first = store.create("/a/1", Bytes::from("0")).await.unwrap();
        let exact = |rv| ListOptions {
            recursive: true,
            resource_version: Some(rv),
            resource_version_match: Some(super::super::ResourceVersionMatch::Exact),
            ..Default::default()
        };
        let update = |value: &'static str| {
            let store = store.clone();
            async move {
                let mut write = |_: Option<StoredObject>| async move { Ok(Bytes::from(value)) };
                store
                    .guaranteed_update("/a/1", false, None, &mut write, None)
                    .await
                    .unwrap()
                    .revision
            }
        };
        let second = update("1").await;
        // A tick compacts to what the tick before saw, so one interval of history stays readable.
        let seen = store.lock().compaction_tick(0);
        assert_eq!(seen, second);
        store.list("/a", &exact(first.revision)).await.unwrap();
        update("2").await;
        store.lock().compaction_tick(seen);
        assert_eq!(store.compact_revision().await.unwrap(), second);
        let err = store.list("/a", &exact(first.revision)).await.unwrap_err();
        assert_eq!(err.code(), 410);
        assert_eq!(store.lock().keys["/a/1"].len(), 2);
    }

    #[tokio::test]
    async fn the_compactor_runs_and_stops_with_the_store() {
        let store = MemoryStorage::new().with_compaction_interval(Duration::from_millis(20));
        store.create("/a/1", Bytes::from("0")).await.unwrap();
        let mut write = |_: Option<StoredObject>| async { Ok(Bytes::from("1")) };
        let last = store
            .guaranteed_update("/a/1", false, None, &mut write, None)
            .await
            .unwrap()
            .revision;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while store.compact_revision().await.unwrap() < last {
            assert!(tokio::time::Instant::now() < deadline, "never compacted");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(store.lock().keys["/a/1"].len(), 1);
        let state = Arc::downgrade(&store.state);
        drop(store);
        assert!(
            state.upgrade().is_none(),
            "the compactor keeps the state alive"
        );
    }
}
