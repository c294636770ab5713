//! The watch cache (upstream `storage/cacher`): one backend watch per resource feeds an in-memory copy of the
//! resource's current objects and a bounded history of changes. Watches, reads with a resourceVersion and
//! consistent lists are served from memory; writes go to the backend and come back through the watch.
//!
//! [`WatchCache`] is itself a [`Storage`], so it sits between the registry and any backend and passes the same
//! conformance suite. It keeps stored bytes (never decoded objects); each change is shared by every watcher.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::counted::CountedMap;
use super::{
    Change, EventType, GetOptions, KeyRange, ListOptions, ListPlan, ListResult, Preconditions,
    Predicate, Stats, Storage, StorageError, StoredObject, TryUpdate, ValidateDeletion, WatchEvent,
    WatchOptions, WatchStream, encode_continue, plan_list,
};
use crate::metrics::CacheMetrics;

/// The default bound of [`CacheConfig::history_bytes`].
pub const DEFAULT_HISTORY_BYTES: usize = 64 * 1024 * 1024;

/// The default bound of [`CacheConfig::watcher_buffer_bytes`].
pub const DEFAULT_WATCHER_BUFFER_BYTES: usize = 64 * 1024 * 1024;

/// Tuning of a [`WatchCache`].
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// Changes kept for watches that start from a past resourceVersion; older starts get 410.
    pub history: usize,
    /// The most bytes (values and previous values) the kept changes may hold: objects may be megabytes, so a
    /// count alone does not bound memory.
    pub history_bytes: usize,
    /// Events buffered per watcher; a watcher that falls further behind is cut off (it re-watches).
    pub watcher_buffer: usize,
    /// The most bytes of changes buffered per watcher, likewise: a slow watcher must not keep megabytes of
    /// objects alive after the history has let go of them.
    pub watcher_buffer_bytes: usize,
    /// How often watchers that accept bookmarks get one (upstream: every minute).
    pub bookmark_interval: Duration,
    /// How long a read waits for the cache to reach a resourceVersion before answering from the backend or failing.
    pub fresh_timeout: Duration,
    /// Where the cache reports its work (`apiserver_watch_cache_*`), if anywhere.
    pub metrics: Option<CacheMetrics>,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            history: 10_000,
            history_bytes: DEFAULT_HISTORY_BYTES,
            watcher_buffer: 1_000,
            watcher_buffer_bytes: DEFAULT_WATCHER_BUFFER_BYTES,
            bookmark_interval: Duration::from_secs(60),
            fresh_timeout: Duration::from_secs(3),
            metrics: None,
        }
    }
}

enum Message {
    Change(Arc<Change>),
    Bookmark(u64),
    /// The cache lost its backend watch and relisted: the watcher must start again.
    Reset,
}

impl Message {
    /// What a queued message keeps alive.
    fn bytes(&self) -> usize {
        match self {
            Message::Change(change) => change_bytes(change),
            Message::Bookmark(_) | Message::Reset => 0,
        }
    }
}

struct Watcher {
    range: KeyRange,
    bookmarks: bool,
    /// Wants a bookmark whenever progress is requested.
    progress: bool,
    tx: mpsc::Sender<Message>,
    overflowed: Arc<AtomicBool>,
    /// Bytes of changes sent and not yet received.
    queued: Arc<AtomicUsize>,
    /// The most `queued` may reach (one change is always let through).
    max_queued: usize,
}

/// An object as the cache keeps it, under its key in [`State::objects`]: the key is not kept twice (at a million
/// objects a second copy of each key was about a fifth of the cache).
#[derive(Clone, Debug)]
struct Kept {
    value: Bytes,
    revision: u64,
}

impl Kept {
    fn stored(&self, key: &str) -> StoredObject {
        StoredObject {
            key: key.to_string(),
            value: self.value.clone(),
            revision: self.revision,
        }
    }
}

impl From<StoredObject> for Kept {
    fn from(object: StoredObject) -> Self {
        Kept {
            value: object.value,
            revision: object.revision,
        }
    }
}

#[derive(Default)]
struct State {
    ready: bool,
    /// The cache holds every change up to and including this revision.
    revision: u64,
    objects: CountedMap<Kept>,
    history: VecDeque<Arc<Change>>,
    /// What the changes in `history` hold, in bytes.
    history_bytes: usize,
    /// Every change after this revision is in `history`.
    history_start: u64,
    watchers: Vec<Watcher>,
}

/// The bytes a change keeps alive: its value and its previous value.
fn change_bytes(change: &Change) -> usize {
    change.value.as_ref().map_or(0, Bytes::len) + change.prev.as_ref().map_or(0, Bytes::len)
}

impl State {
    /// Keeps `change`, dropping the oldest changes while over either bound.
    fn remember(&mut self, change: Arc<Change>, config: &CacheConfig) {
        self.history_bytes += change_bytes(&change);
        self.history.push_back(change);
        while self.history.len() > config.history || self.history_bytes > config.history_bytes {
            if !self.forget_oldest() {
                break;
            }
        }
    }

    /// Drops the oldest change; false when there is none.
    fn forget_oldest(&mut self) -> bool {
        match self.history.pop_front() {
            Some(dropped) => {
                self.history_bytes -= change_bytes(&dropped);
                self.history_start = self.history_start.max(dropped.revision);
                true
            }
            None => false,
        }
    }

    fn clear_history(&mut self) {
        self.history.clear();
        self.history_bytes = 0;
    }

    /// Queues a message for each watcher `filter` selects; cuts off (and counts) those too far behind.
    fn send(&mut self, message: impl Fn() -> Message, filter: impl Fn(&Watcher) -> bool) -> usize {
        let mut terminated = 0;
        self.watchers.retain(|w| {
            if !filter(w) {
                return !w.tx.is_closed();
            }
            let message = message();
            let size = message.bytes();
            let queued = w.queued.fetch_add(size, Ordering::AcqRel);
            if queued > 0 && queued + size > w.max_queued {
                w.overflowed.store(true, Ordering::Release);
                terminated += 1;
                return false;
            }
            match w.tx.try_send(message) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    w.overflowed.store(true, Ordering::Release);
                    terminated += 1;
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
        terminated
    }
}

/// A read of the backend's current revision, shared by every consistent read that arrived before it was sent.
type Probe =
    futures::future::Shared<futures::future::BoxFuture<'static, Result<u64, StorageError>>>;

/// Consistent reads coalesced: while one revision read is in flight, readers that arrive join the next one, which is
/// sent when the first returns. A read sent after a reader arrived sees every write acknowledged before that, so each
/// reader still reads its own writes, and a burst of reads costs the backend two round trips, not one per read.
#[derive(Default)]
struct Probes {
    /// The next read, not sent yet: new readers join it.
    pending: Option<(u64, Probe)>,
    /// The read in flight, which the pending one waits for.
    running: Option<Probe>,
    next_id: u64,
}

struct Shared {
    inner: Arc<dyn Storage>,
    probes: Mutex<Probes>,
    range: KeyRange,
    config: CacheConfig,
    state: Mutex<State>,
    /// The cache's revision, for readers waiting until it is fresh enough.
    revision: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The backend's current revision, read after this call began; concurrent callers share reads ([`Probes`]).
    async fn current_revision(self: &Arc<Self>) -> Result<u64, StorageError> {
        use futures::FutureExt;
        let probe = {
            let mut probes = self.probes.lock().unwrap_or_else(|p| p.into_inner());
            match &probes.pending {
                Some((_, probe)) => probe.clone(),
                None => {
                    let id = probes.next_id;
                    probes.next_id += 1;
                    let previous = probes.running.clone();
                    // Weak: a kept probe must not keep the cache alive.
                    let shared = Arc::downgrade(self);
                    let probe = async move {
                        if let Some(previous) = previous {
                            let _ = previous.await;
                        }
                        let Some(shared) = shared.upgrade() else {
                            return Err(StorageError::Internal("the watch cache is gone".into()));
                        };
                        // Sent now: later readers must wait for the next read.
                        {
                            let mut probes =
                                shared.probes.lock().unwrap_or_else(|p| p.into_inner());
                            if probes.pending.as_ref().is_some_and(|(p, _)| *p == id) {
                                probes.running = probes.pending.take().map(|(_, probe)| probe);
                            }
                        }
                        shared.inner.current_revision().await
                    }
                    .boxed()
                    .shared();
                    probes.pending = Some((id, probe.clone()));
                    probe
                }
            }
        };
        probe.await
    }

    /// Records what the cache did, when it reports anywhere.
    fn record(&self, what: impl FnOnce(&CacheMetrics)) {
        if let Some(metrics) = &self.config.metrics {
            what(metrics);
        }
    }
}

/// A [`Storage`] that serves one resource's reads and watches from memory, fed by a single watch on `inner`.
/// Keys outside the resource's prefix go straight to `inner`.
pub struct WatchCache {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for WatchCache {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl WatchCache {
    /// Caches every key under `prefix` (e.g. `/registry/<group>/pizzas`) of `inner`. Must be called within a tokio
    /// runtime; the cache fills in the background and reads wait for it (or use `inner`) until it is ready.
    pub fn new(
        inner: Arc<dyn Storage>,
        prefix: &str,
        config: CacheConfig,
    ) -> Result<Self, StorageError> {
        let range = KeyRange::new(prefix, true)?;
        if let Some(metrics) = &config.metrics {
            metrics.capacity(config.history);
        }
        let (revision, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            inner,
            range,
            config,
            state: Mutex::new(State::default()),
            probes: Mutex::default(),
            revision,
        });
        let feed = tokio::spawn(feed(shared.clone()));
        let bookmarks = tokio::spawn(bookmarks(shared.clone()));
        Ok(WatchCache {
            shared,
            tasks: vec![feed, bookmarks],
        })
    }

    /// Whether the initial list has been loaded.
    pub fn is_ready(&self) -> bool {
        self.shared.lock().ready
    }

    fn covers(&self, key: &str) -> bool {
        self.shared.range.contains(key) || format!("{key}/") == self.shared.range.as_str()
    }

    /// Waits until the cache holds revision `revision` (and is ready). Before giving up it asks the backend for a
    /// progress bookmark, which moves the cache forward when the writes were to other resources.
    async fn wait_fresh(&self, revision: u64) -> bool {
        let started = std::time::Instant::now();
        let fresh = self.wait_fresh_untimed(revision).await;
        self.shared.record(|m| m.read_waited(started.elapsed()));
        fresh
    }

    async fn wait_fresh_untimed(&self, revision: u64) -> bool {
        let mut rx = self.shared.revision.subscribe();
        let ready = |s: &Shared| {
            let st = s.lock();
            st.ready && st.revision >= revision
        };
        if ready(&self.shared) {
            return true;
        }
        // Without reliable progress, waiting could only be ended by a progress claim memory cannot trust.
        if !self.shared.inner.reliable_progress() {
            return false;
        }
        let _ = self.shared.inner.request_watch_progress().await;
        let deadline = tokio::time::Instant::now() + self.shared.config.fresh_timeout;
        loop {
            if ready(&self.shared) {
                return true;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => continue,
                _ => return ready(&self.shared),
            }
        }
    }

    fn current_revision_cached(&self) -> u64 {
        self.shared.lock().revision
    }

    /// Registers a watcher atomically with the snapshot or history it starts from; `None` when the start is older
    /// than memory's history.
    fn register(
        &self,
        range: KeyRange,
        opts: &WatchOptions,
        rv: u64,
        initial_events: bool,
    ) -> Option<CachedWatch> {
        let (tx, rx) = mpsc::channel(self.shared.config.watcher_buffer);
        let overflowed = Arc::new(AtomicBool::new(false));
        let queued = Arc::new(AtomicUsize::new(0));
        let mut pending = VecDeque::new();
        let mut st = self.shared.lock();
        if initial_events {
            let start = range.as_str().to_string();
            for (key, object) in st
                .objects
                .range((Bound::Included(start.as_str()), Bound::Unbounded))
                .take_while(|(k, _)| range.contains(k))
            {
                if selected(&opts.predicate, &object.value) {
                    pending.push_back(WatchEvent::object(
                        EventType::Added,
                        object.stored(key),
                        None,
                    ));
                }
            }
            if opts.send_initial_events == Some(true) && opts.allow_watch_bookmarks {
                pending.push_back(WatchEvent::bookmark(st.revision, true));
            }
        } else if rv != 0 {
            if rv < st.history_start {
                return None;
            }
            for change in st
                .history
                .iter()
                .filter(|c| c.revision > rv && range.contains(&c.key))
            {
                if let Some(event) = change.event_for(&opts.predicate) {
                    pending.push_back(event);
                }
            }
        }
        let after = st.revision;
        st.watchers.push(Watcher {
            range,
            bookmarks: opts.allow_watch_bookmarks,
            progress: opts.progress_notify,
            tx,
            overflowed: overflowed.clone(),
            queued: queued.clone(),
            max_queued: self.shared.config.watcher_buffer_bytes,
        });
        Some(CachedWatch {
            pending,
            rx,
            overflowed,
            queued,
            predicate: opts.predicate.clone(),
            after,
            done: false,
        })
    }

    /// Serves a list from memory at the cache's revision.
    fn list_cached(&self, opts: &ListOptions, plan: &ListPlan) -> Result<ListResult, StorageError> {
        let st = self.shared.lock();
        let start = plan.start_key.as_deref().unwrap_or(plan.range.as_str());
        let live = st
            .objects
            .range((Bound::Included(start), Bound::Unbounded))
            .take_while(|(k, _)| plan.range.contains(k))
            .map(|(k, o)| (k.as_str(), o));
        self.page(live, opts, plan, st.revision, |last| {
            remaining_after(&st.objects, &plan.range, last)
        })
    }

    /// Serves a list from memory as it was at revision `at`: the current objects, with every key written since put
    /// back as it was then (the value before its first change after `at`, or nothing if it did not exist yet).
    /// `None` when memory cannot tell: not loaded, not there yet, or its history does not reach back to `at`.
    fn list_at(
        &self,
        plan: &ListPlan,
        opts: &ListOptions,
        at: u64,
    ) -> Option<Result<ListResult, StorageError>> {
        let st = self.shared.lock();
        if !st.ready || at < st.history_start || at > st.revision {
            return None;
        }
        let start = plan.start_key.as_deref().unwrap_or(plan.range.as_str());
        let mut then: BTreeMap<&str, Option<Kept>> = BTreeMap::new();
        // Newest first, so that the earliest change after `at` is the one that stays.
        for change in st.history.iter().rev().take_while(|c| c.revision > at) {
            if change.key.as_str() < start || !plan.range.contains(&change.key) {
                continue;
            }
            let was = match &change.prev {
                Some(_) if change.prev_revision == 0 => return None,
                Some(value) => Some(Kept {
                    value: value.clone(),
                    revision: change.prev_revision,
                }),
                None => None,
            };
            then.insert(&change.key, was);
        }
        let now = st
            .objects
            .range((Bound::Included(start), Bound::Unbounded))
            .take_while(|(k, _)| plan.range.contains(k))
            .map(|(k, o)| (k.as_str(), o));
        let merged = MergeAt {
            now: now.peekable(),
            then: then.iter().map(|(k, o)| (*k, o)).peekable(),
        };
        // What follows `last` now, with the keys written since `at` counted as they were then.
        let remaining = |last: &str| {
            let changed = then
                .range::<&str, _>((Bound::Excluded(last), Bound::Unbounded))
                .map(|(key, was)| {
                    isize::from(was.is_some()) - isize::from(st.objects.get(key).is_some())
                })
                .sum::<isize>();
            remaining_after(&st.objects, &plan.range, last).saturating_add_signed(changed)
        };
        Some(self.page(merged, opts, plan, at, remaining))
    }

    /// One page of `objects` (in key order, from the plan's start): the selected ones up to the limit, and a
    /// continue token at `revision` when more are left.
    fn page<'a>(
        &self,
        objects: impl Iterator<Item = (&'a str, &'a Kept)>,
        opts: &ListOptions,
        plan: &ListPlan,
        revision: u64,
        remaining: impl FnOnce(&str) -> usize,
    ) -> Result<ListResult, StorageError> {
        let mut objects = objects.peekable();
        let limit = usize::try_from(opts.limit).unwrap_or(usize::MAX);
        let mut items = Vec::new();
        let mut last_key: Option<&str> = None;
        let mut has_more = false;
        let mut evaluated = 0;
        while let Some((key, object)) = objects.next_if(|_| limit == 0 || items.len() < limit) {
            last_key = Some(key);
            evaluated += 1;
            if opts.predicate.matches(&object.value)? {
                items.push(object.stored(key));
            }
        }
        if objects.peek().is_some() {
            has_more = true;
        }
        self.shared
            .record(|m| m.listed(evaluated as usize, items.len()));
        let mut result = ListResult {
            items,
            revision,
            continue_token: None,
            remaining_item_count: None,
            evaluated,
        };
        if has_more && let Some(last) = last_key {
            let next = format!("{last}\0");
            result.continue_token = Some(encode_continue(
                &next,
                plan.range.as_str(),
                revision as i64,
            )?);
            if opts.predicate.is_everything() {
                result.remaining_item_count = Some(remaining(last) as i64);
            }
        }
        Ok(result)
    }
}

/// How many objects of `range` come after the key `last` (without walking them: a page of a large collection
/// must not cost the whole collection).
fn remaining_after(objects: &CountedMap<Kept>, range: &KeyRange, last: &str) -> usize {
    match range {
        KeyRange::Prefix(prefix) => objects.count_after_in_prefix(last, prefix),
        KeyRange::Exact(_) => 0,
    }
}

/// The objects of a range at a past revision: the current ones (`now`) merged, in key order, with the keys
/// written since (`then`: how each was at that revision, `None` if it did not exist).
struct MergeAt<
    'a,
    N: Iterator<Item = (&'a str, &'a Kept)>,
    T: Iterator<Item = (&'a str, &'a Option<Kept>)>,
> {
    now: std::iter::Peekable<N>,
    then: std::iter::Peekable<T>,
}

impl<'a, N, T> Iterator for MergeAt<'a, N, T>
where
    N: Iterator<Item = (&'a str, &'a Kept)>,
    T: Iterator<Item = (&'a str, &'a Option<Kept>)>,
{
    type Item = (&'a str, &'a Kept);

    fn next(&mut self) -> Option<(&'a str, &'a Kept)> {
        loop {
            let from_then = match (self.now.peek(), self.then.peek()) {
                (None, None) => return None,
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some((now, _)), Some((then, _))) => then <= now,
            };
            if from_then {
                let (key, was) = self.then.next()?;
                if self.now.peek().is_some_and(|(now, _)| *now == key) {
                    self.now.next();
                }
                if let Some(object) = was {
                    return Some((key, object));
                }
            } else {
                return self.now.next();
            }
        }
    }
}

/// Loads the resource from the backend, then follows its watch; relists when the watch breaks.
async fn feed(shared: Arc<Shared>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match load(&shared).await {
            Ok(revision) => {
                backoff = Duration::from_millis(100);
                follow(&shared, revision).await;
            }
            Err(err) => {
                tracing::warn!(prefix = shared.range.as_str(), %err, "watch cache: initial list failed")
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Lists every object at one revision and makes it the cache's content.
async fn load(shared: &Shared) -> Result<u64, StorageError> {
    // Gathered first and then built in one go: a BTreeMap built from sorted entries has full nodes, one filled
    // by inserts in key order only about half-full nodes (about 55 bytes more per object).
    let mut objects = Vec::new();
    let mut continue_token = None;
    let revision = loop {
        let page = shared
            .inner
            .list(
                shared.range.as_str(),
                &ListOptions {
                    recursive: true,
                    limit: 10_000,
                    continue_token,
                    ..ListOptions::default()
                },
            )
            .await?;
        for StoredObject {
            key,
            value,
            revision,
        } in page.items
        {
            objects.push((key, Kept { value, revision }));
        }
        match page.continue_token {
            Some(token) => continue_token = Some(token),
            None => break page.revision,
        }
    };
    let mut st = shared.lock();
    if st.ready {
        // Watchers may have missed changes between the broken watch and this list.
        let terminated = st.send(|| Message::Reset, |_| true);
        shared.record(|m| m.terminated(terminated));
        st.watchers.clear();
    }
    st.clear_history();
    if revision == 0 {
        // A backend that has never been written to: "from revision 0" would mean "from now" and lose writes made
        // since the list, so `follow` loads through the watch's initial events instead.
        st.ready = false;
        st.objects.clear();
        return Ok(0);
    }
    shared.record(|m| {
        m.init_events(objects.len());
        m.initialized(revision);
    });
    st.objects = objects.into_iter().collect::<BTreeMap<_, _>>().into();
    st.history_start = revision;
    st.revision = revision;
    st.ready = true;
    drop(st);
    shared.revision.send_replace(revision);
    Ok(revision)
}

/// Applies the backend's events after `revision` until its watch ends. From revision 0 it first takes the
/// backend's initial events as the cache's content, up to the bookmark that ends them.
async fn follow(shared: &Shared, revision: u64) {
    let initial = revision == 0;
    let opts = WatchOptions {
        resource_version: Some(revision),
        recursive: true,
        send_initial_events: Some(initial),
        allow_watch_bookmarks: true,
        // Bookmarks move memory's revision forward, which only a backend with reliable progress may do.
        progress_notify: shared.inner.reliable_progress(),
        ..WatchOptions::default()
    };
    let mut events = match shared.inner.watch(shared.range.as_str(), &opts).await {
        Ok(events) => events,
        Err(err) => {
            tracing::warn!(prefix = shared.range.as_str(), %err, "watch cache: backend watch failed");
            return;
        }
    };
    let mut loading = initial;
    while let Some(event) = events.next().await {
        match event.event_type {
            EventType::Error => {
                tracing::info!(prefix = shared.range.as_str(), err = ?event.error, "watch cache: relisting");
                return;
            }
            EventType::Added if loading => {
                shared
                    .lock()
                    .objects
                    .insert(event.key.clone(), Kept::from(event.stored_object()));
                shared.record(|m| m.init_events(1));
            }
            EventType::Bookmark if loading => {
                if event.initial_events_end {
                    loading = false;
                    let mut st = shared.lock();
                    st.revision = event.revision;
                    st.history_start = event.revision;
                    st.ready = true;
                    drop(st);
                    shared.record(|m| m.initialized(event.revision));
                    shared.revision.send_replace(event.revision);
                }
            }
            EventType::Bookmark => {
                let mut st = shared.lock();
                if event.revision > st.revision && shared.inner.reliable_progress() {
                    st.revision = event.revision;
                    drop(st);
                    shared.record(|m| m.revision(event.revision));
                    shared.revision.send_replace(event.revision);
                }
            }
            kind => apply(shared, kind, event),
        }
    }
}

fn apply(shared: &Shared, kind: EventType, event: WatchEvent) {
    let mut st = shared.lock();
    if event.revision <= st.revision {
        return;
    }
    let (prev, prev_revision) = match st.objects.get(&event.key) {
        Some(object) => (Some(object.value.clone()), object.revision),
        None => (event.prev_value, 0),
    };
    let value = match kind {
        EventType::Deleted => {
            st.objects.remove(&event.key);
            None
        }
        _ => {
            let object = Kept {
                value: event.value,
                revision: event.revision,
            };
            let value = object.value.clone();
            st.objects.insert(event.key.clone(), object);
            Some(value)
        }
    };
    let change = Arc::new(Change {
        key: event.key,
        value,
        prev,
        prev_revision,
        revision: event.revision,
    });
    st.revision = event.revision;
    st.remember(change.clone(), &shared.config);
    let terminated = st.send(
        || Message::Change(change.clone()),
        |w| w.range.contains(&change.key),
    );
    drop(st);
    shared.record(|m| {
        m.event();
        m.terminated(terminated);
        m.revision(event.revision);
    });
    shared.revision.send_replace(event.revision);
}

/// Sends every watcher that accepts bookmarks one at the cache's revision, periodically.
async fn bookmarks(shared: Arc<Shared>) {
    let mut ticker = tokio::time::interval(shared.config.bookmark_interval);
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let mut st = shared.lock();
        let revision = st.revision;
        let terminated = st.send(|| Message::Bookmark(revision), |w| w.bookmarks);
        drop(st);
        shared.record(|m| m.terminated(terminated));
    }
}

/// The state of one watch served from the cache.
struct CachedWatch {
    pending: VecDeque<WatchEvent>,
    rx: mpsc::Receiver<Message>,
    overflowed: Arc<AtomicBool>,
    /// Shared with the sender's [`Watcher::queued`].
    queued: Arc<AtomicUsize>,
    predicate: Predicate,
    after: u64,
    done: bool,
}

impl CachedWatch {
    async fn next(&mut self) -> Option<WatchEvent> {
        if let Some(event) = self.pending.pop_front() {
            return Some(event);
        }
        if self.done {
            return None;
        }
        loop {
            let message = self.rx.recv().await;
            if let Some(message) = &message {
                self.queued.fetch_sub(message.bytes(), Ordering::AcqRel);
            }
            match message {
                Some(Message::Change(change)) => {
                    if change.revision <= self.after {
                        continue;
                    }
                    self.after = change.revision;
                    if let Some(event) = change.event_for(&self.predicate) {
                        return Some(event);
                    }
                }
                Some(Message::Bookmark(revision)) => {
                    if revision >= self.after {
                        return Some(WatchEvent::bookmark(revision, false));
                    }
                }
                Some(Message::Reset) => {
                    self.done = true;
                    return Some(WatchEvent::error(StorageError::watch_expired()));
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
            }
        }
    }
}

fn selected(predicate: &Predicate, value: &[u8]) -> bool {
    predicate.matches(value).unwrap_or(false)
}

#[async_trait]
impl Storage for WatchCache {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        self.shared.inner.create(key, value).await
    }

    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        if !self.covers(key) {
            return self.shared.inner.get(key, opts).await;
        }
        // Memory answers only for keys the backend would accept.
        super::validate_key(key)?;
        // Without a resourceVersion (or 0) a read must see every acknowledged write: memory answers once it has
        // caught up with the backend's current revision, which only a backend with reliable progress can prove.
        let revision = match opts.resource_version.filter(|rv| *rv > 0) {
            Some(revision) => revision,
            None if self.shared.inner.reliable_progress() => self.shared.current_revision().await?,
            None => return self.shared.inner.get(key, opts).await,
        };
        if !self.wait_fresh(revision).await {
            return self.shared.inner.get(key, opts).await;
        }
        let st = self.shared.lock();
        match st.objects.get(key) {
            Some(object) => Ok(object.stored(key)),
            None => Err(StorageError::KeyNotFound {
                key: key.to_string(),
                revision: st.revision,
            }),
        }
    }

    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        if !self.covers(key) || !opts.recursive {
            return self.shared.inner.list(key, opts).await;
        }
        let plan = plan_list(key, opts)?;
        if let Some(at) = plan.read_revision {
            // A later page, or the state exactly at a revision: from memory while its history reaches back that
            // far (upstream 1.34's snapshots) and the backend has not compacted it, else from the backend, which
            // then answers 410 for a compacted revision.
            let compacted = self.shared.inner.compact_revision().await?;
            if at > compacted
                && let Some(result) = self.list_at(&plan, opts, at)
            {
                return result;
            }
            return self.shared.inner.list(key, opts).await;
        }
        // Memory must have caught up with the backend (a consistent list, reading our own writes) and with any
        // "not older than" bound (which may be ahead of the backend: then the backend answers 504). Without
        // reliable progress memory cannot prove it caught up: consistent lists go to the backend.
        let wanted = if self.shared.inner.reliable_progress() {
            let current = self.shared.current_revision().await?;
            plan.min_revision.unwrap_or(0).max(current)
        } else if opts.resource_version.is_none() {
            return self.shared.inner.list(key, opts).await;
        } else {
            plan.min_revision.unwrap_or(0)
        };
        let fresh = self.wait_fresh(wanted).await;
        if opts.resource_version.is_none() {
            self.shared.record(|m| m.consistent_read(fresh));
        }
        if !fresh {
            return self.shared.inner.list(key, opts).await;
        }
        self.list_cached(opts, &plan)
    }

    async fn guaranteed_update(
        &self,
        key: &str,
        ignore_not_found: bool,
        preconditions: Option<&Preconditions>,
        try_update: &mut dyn TryUpdate,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        let suggestion =
            cached_existing.or_else(|| self.shared.lock().objects.get(key).map(|o| o.stored(key)));
        self.shared
            .inner
            .guaranteed_update(key, ignore_not_found, preconditions, try_update, suggestion)
            .await
    }

    async fn delete(
        &self,
        key: &str,
        preconditions: Option<&Preconditions>,
        validate_deletion: &mut dyn ValidateDeletion,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        let suggestion =
            cached_existing.or_else(|| self.shared.lock().objects.get(key).map(|o| o.stored(key)));
        self.shared
            .inner
            .delete(key, preconditions, validate_deletion, suggestion)
            .await
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
        if !self.covers(key) {
            return self.shared.inner.watch(key, opts).await;
        }
        let range = KeyRange::new(key, opts.recursive)?;
        let rv = opts.resource_version.unwrap_or(0);
        let initial_events = opts.send_initial_events.unwrap_or(rv == 0);
        if initial_events && rv != 0 {
            // The state exactly at a past revision: only the backend keeps it.
            return self.shared.inner.watch(key, opts).await;
        }
        // From "now" (no resourceVersion, or 0): memory must first catch up with the backend, so that a watch
        // opened after a write sees it. Upstream serves 0 from possibly stale memory; we read our writes, and
        // without reliable progress memory cannot prove it caught up: the backend serves the watch.
        let reliable = self.shared.inner.reliable_progress();
        let wanted = match rv {
            0 if reliable => self.shared.current_revision().await?,
            0 => return self.shared.inner.watch(key, opts).await,
            n => n,
        };
        if !self.wait_fresh(wanted).await {
            if !self.is_ready() || rv == 0 || !reliable {
                return self.shared.inner.watch(key, opts).await;
            }
            let current = self.current_revision_cached();
            return Err(StorageError::TooLargeResourceVersion {
                requested: rv,
                current,
            });
        }
        match self.register(range, opts, rv, initial_events) {
            Some(state) => Ok(Box::pin(futures::stream::unfold(
                state,
                |mut st| async move {
                    let event = st.next().await?;
                    Some((event, st))
                },
            ))),
            // Older than memory's history: the backend may still have it (and answers 410 if not).
            None => self.shared.inner.watch(key, opts).await,
        }
    }

    async fn current_revision(&self) -> Result<u64, StorageError> {
        self.shared.current_revision().await
    }

    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        self.shared.inner.compact(revision).await?;
        let mut st = self.shared.lock();
        while st.history.front().is_some_and(|c| c.revision <= revision) {
            st.forget_oldest();
        }
        st.history_start = st.history_start.max(revision);
        Ok(())
    }

    async fn compact_revision(&self) -> Result<u64, StorageError> {
        self.shared.inner.compact_revision().await
    }

    async fn bump_revision(&self, revision: u64) -> Result<bool, StorageError> {
        self.shared.inner.bump_revision(revision).await
    }

    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        self.shared.inner.stats(prefix).await
    }

    fn reliable_progress(&self) -> bool {
        self.shared.inner.reliable_progress()
    }

    async fn readiness(&self) -> Result<(), StorageError> {
        self.shared.inner.readiness().await?;
        if self.is_ready() {
            Ok(())
        } else {
            Err(StorageError::Unreachable {
                key: self.shared.range.as_str().to_string(),
                message: "watch cache not yet initialized".into(),
            })
        }
    }

    /// Catches memory up with the backend, then gives every watcher that asked for progress a bookmark.
    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        // Watches the cache handed to the backend get their progress from it.
        self.shared.inner.request_watch_progress().await?;
        if self.shared.inner.reliable_progress() {
            let current = self.shared.current_revision().await?;
            self.wait_fresh(current).await;
        }
        let mut st = self.shared.lock();
        let revision = st.revision;
        st.send(|| Message::Bookmark(revision), |w| w.progress);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{AllowDeletion, MemoryStorage};

    fn cache(inner: Arc<dyn Storage>) -> WatchCache {
        WatchCache::new(
            inner,
            "/r",
            CacheConfig {
                history: 4,
                ..CacheConfig::default()
            },
        )
        .unwrap()
    }

    /// A backend whose revision reads are slow and counted, and whose lists are counted.
    struct SlowRevisions {
        inner: MemoryStorage,
        reads: AtomicUsize,
        lists: AtomicUsize,
    }

    #[async_trait]
    impl Storage for SlowRevisions {
        async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
            self.inner.create(key, value).await
        }
        async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
            self.inner.get(key, opts).await
        }
        async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
            self.lists.fetch_add(1, Ordering::SeqCst);
            self.inner.list(key, opts).await
        }
        async fn guaranteed_update(
            &self,
            key: &str,
            ignore_not_found: bool,
            preconditions: Option<&Preconditions>,
            try_update: &mut dyn TryUpdate,
            cached_existing: Option<StoredObject>,
        ) -> Result<StoredObject, StorageError> {
            let inner = &self.inner;
            inner
                .guaranteed_update(
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
            let inner = &self.inner;
            inner
                .delete(key, preconditions, validate_deletion, cached_existing)
                .await
        }
        async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
            self.inner.watch(key, opts).await
        }
        async fn current_revision(&self) -> Result<u64, StorageError> {
            self.reads.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(50)).await;
            self.inner.current_revision().await
        }
        async fn compact(&self, revision: u64) -> Result<(), StorageError> {
            self.inner.compact(revision).await
        }
        async fn compact_revision(&self) -> Result<u64, StorageError> {
            self.inner.compact_revision().await
        }
        async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
            self.inner.stats(prefix).await
        }
        async fn readiness(&self) -> Result<(), StorageError> {
            self.inner.readiness().await
        }
        async fn request_watch_progress(&self) -> Result<(), StorageError> {
            self.inner.request_watch_progress().await
        }
    }

    #[tokio::test]
    async fn concurrent_consistent_reads_share_revision_reads() {
        let backend = Arc::new(SlowRevisions {
            inner: MemoryStorage::new(),
            reads: AtomicUsize::new(0),
            lists: AtomicUsize::new(0),
        });
        let cache = Arc::new(cache(backend.clone()));
        cache
            .create("/r/a", Bytes::from_static(b"1"))
            .await
            .unwrap();
        let reads_before = backend.reads.load(Ordering::SeqCst);
        let gets = (0..32).map(|_| {
            let cache = cache.clone();
            tokio::spawn(async move { cache.get("/r/a", &GetOptions::default()).await })
        });
        for get in futures::future::join_all(gets).await {
            assert_eq!(&get.unwrap().unwrap().value[..], b"1");
        }
        let reads = backend.reads.load(Ordering::SeqCst) - reads_before;
        assert!(
            (1..=2).contains(&reads),
            "{reads} revision reads for 32 reads"
        );
        // A write made after a read returned is seen by the next read, from memory.
        cache
            .guaranteed_update(
                "/r/a",
                false,
                None,
                &mut |_: Option<StoredObject>| async { Ok(Bytes::from_static(b"2")) },
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            &cache
                .get("/r/a", &GetOptions::default())
                .await
                .unwrap()
                .value[..],
            b"2"
        );
    }

    async fn next(w: &mut WatchStream) -> WatchEvent {
        tokio::time::timeout(Duration::from_secs(5), w.next())
            .await
            .unwrap()
            .unwrap()
    }

    #[tokio::test]
    async fn serves_consistent_lists_and_reads_from_memory() {
        let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        inner.create("/r/a", Bytes::from("a")).await.unwrap();
        let cache = cache(inner.clone());
        let b = cache.create("/r/b", Bytes::from("b")).await.unwrap();
        let list = cache
            .list(
                "/r",
                &ListOptions {
                    recursive: true,
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.revision, b.revision);
        let got = cache
            .get(
                "/r/b",
                &GetOptions {
                    resource_version: Some(b.revision),
                },
            )
            .await
            .unwrap();
        assert_eq!(got, b);
        let err = cache
            .get(
                "/r/b",
                &GetOptions {
                    resource_version: Some(b.revision + 100),
                },
            )
            .await
            .unwrap_err();
        assert_eq!(err.code(), 504);
        let page = cache
            .list(
                "/r",
                &ListOptions {
                    recursive: true,
                    limit: 1,
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(page.items.len(), 1);
        assert_eq!(page.remaining_item_count, Some(1));
        let rest = cache
            .list(
                "/r",
                &ListOptions {
                    recursive: true,
                    continue_token: page.continue_token,
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(rest.items[0].key, "/r/b");
        assert_eq!(rest.revision, page.revision);
    }

    /// Later pages and exact-revision lists are served from memory as the objects were at the list's revision
    /// (written, created and deleted since put back), as the backend itself answers them, until compaction.
    #[tokio::test]
    async fn later_pages_and_exact_lists_come_from_memory_as_they_were() {
        let backend = Arc::new(SlowRevisions {
            inner: MemoryStorage::new(),
            reads: AtomicUsize::new(0),
            lists: AtomicUsize::new(0),
        });
        let cache = WatchCache::new(backend.clone(), "/r", CacheConfig::default()).unwrap();
        for key in ["a", "b", "c", "d", "e"] {
            cache
                .create(&format!("/r/{key}"), Bytes::from(format!("{key}1")))
                .await
                .unwrap();
        }
        let paged = |token: Option<String>, limit: u64| ListOptions {
            recursive: true,
            limit,
            continue_token: token,
            ..ListOptions::default()
        };
        let first = cache.list("/r", &paged(None, 2)).await.unwrap();
        assert_eq!(first.items.len(), 2);
        let at = first.revision;
        // After the first page: an update, a deletion, a creation inside the rest and one after it.
        let mut update = |_: Option<StoredObject>| async { Ok(Bytes::from_static(b"c2")) };
        cache
            .guaranteed_update("/r/c", false, None, &mut update, None)
            .await
            .unwrap();
        cache
            .delete("/r/d", None, &mut AllowDeletion, None)
            .await
            .unwrap();
        cache.create("/r/cc", Bytes::from("cc1")).await.unwrap();
        let last = cache.create("/r/f", Bytes::from("f1")).await.unwrap();
        assert!(cache.wait_fresh(last.revision).await);

        let lists = backend.lists.load(Ordering::SeqCst);
        let page = cache
            .list("/r", &paged(first.continue_token.clone(), 2))
            .await
            .unwrap();
        let rest = cache
            .list("/r", &paged(page.continue_token.clone(), 0))
            .await
            .unwrap();
        let exact = cache
            .list(
                "/r",
                &ListOptions {
                    recursive: true,
                    resource_version: Some(at),
                    resource_version_match: Some(crate::storage::ResourceVersionMatch::Exact),
                    ..ListOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(
            backend.lists.load(Ordering::SeqCst),
            lists,
            "served from memory"
        );
        let values = |list: &ListResult| {
            list.items
                .iter()
                .map(|o| String::from_utf8_lossy(&o.value).into_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(values(&page), ["c1", "d1"]);
        assert_eq!((page.revision, page.remaining_item_count), (at, Some(1)));
        assert_eq!(values(&rest), ["e1"]);
        assert!(rest.continue_token.is_none());
        assert_eq!(values(&exact), ["a1", "b1", "c1", "d1", "e1"]);
        // What the backend answers to the same questions, byte for byte (revisions and tokens included).
        for (ours, opts) in [
            (&page, paged(first.continue_token.clone(), 2)),
            (&rest, paged(page.continue_token.clone(), 0)),
        ] {
            let theirs = backend.inner.list("/r", &opts).await.unwrap();
            assert_eq!(ours.items, theirs.items);
            assert_eq!(ours.continue_token, theirs.continue_token);
            assert_eq!(ours.remaining_item_count, theirs.remaining_item_count);
        }
        // Compacted past the first page's revision: the backend answers, 410.
        cache.compact(last.revision).await.unwrap();
        let err = cache
            .list("/r", &paged(first.continue_token.clone(), 2))
            .await
            .unwrap_err();
        assert_eq!(err.code(), 410);
    }

    #[tokio::test]
    async fn watches_from_history_and_expires_old_starts() {
        let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let cache = cache(inner.clone());
        let first = cache.create("/r/a", Bytes::from("1")).await.unwrap();
        let mut revisions = vec![];
        for i in 0..6 {
            let mut update =
                |_: Option<StoredObject>| async move { Ok(Bytes::from(format!("v{i}"))) };
            revisions.push(
                cache
                    .guaranteed_update("/r/a", false, None, &mut update, None)
                    .await
                    .unwrap()
                    .revision,
            );
        }
        let opts = |rv| WatchOptions {
            resource_version: Some(rv),
            recursive: true,
            ..WatchOptions::default()
        };
        assert!(cache.wait_fresh(revisions[5]).await);
        // Older than the 4 changes memory keeps: the backend serves it, until compaction.
        let mut old = cache.watch("/r", &opts(first.revision)).await.unwrap();
        assert_eq!(next(&mut old).await.revision, revisions[0]);
        cache.compact(revisions[1]).await.unwrap();
        let err = match cache.watch("/r", &opts(first.revision)).await {
            Err(e) => e,
            Ok(_) => panic!("expected 410"),
        };
        assert_eq!(err.code(), 410);
        let mut w = cache.watch("/r", &opts(revisions[3])).await.unwrap();
        assert_eq!(next(&mut w).await.revision, revisions[4]);
        assert_eq!(next(&mut w).await.revision, revisions[5]);
        let deleted = cache
            .delete("/r/a", None, &mut AllowDeletion, None)
            .await
            .unwrap();
        let event = next(&mut w).await;
        assert_eq!(
            (event.event_type, event.revision, event.value),
            (EventType::Deleted, deleted.revision, Bytes::from("v5"))
        );
    }

    /// Probe finding C6: 10,000 changes of multi-megabyte objects took gigabytes; the bytes bound the history too.
    #[tokio::test]
    async fn history_is_bounded_by_bytes() {
        let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let cache = WatchCache::new(
            inner,
            "/r",
            CacheConfig {
                history_bytes: 5_000,
                ..CacheConfig::default()
            },
        )
        .unwrap();
        let first = cache
            .create("/r/a", Bytes::from(vec![b'0'; 1000]))
            .await
            .unwrap();
        // Loaded and following the backend: what comes next goes to the history.
        assert!(cache.wait_fresh(first.revision).await);
        let mut last = first.revision;
        for i in 1..20u8 {
            let mut update =
                |_: Option<StoredObject>| async move { Ok(Bytes::from(vec![b'0' + i % 10; 1000])) };
            last = cache
                .guaranteed_update("/r/a", false, None, &mut update, None)
                .await
                .unwrap()
                .revision;
        }
        assert!(cache.wait_fresh(last).await);
        {
            let st = cache.shared.lock();
            // Each change holds its value and the previous one: 2,000 bytes, so two fit.
            assert_eq!(st.history.len(), 2, "{}", st.history_bytes);
            assert!(st.history_bytes <= 5_000);
            assert_eq!(
                st.history_bytes,
                st.history.iter().map(|c| change_bytes(c)).sum::<usize>()
            );
        }
        // A watch from before the kept history is still served (by the backend).
        let mut w = cache
            .watch(
                "/r",
                &WatchOptions {
                    resource_version: Some(first.revision),
                    recursive: true,
                    ..WatchOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(next(&mut w).await.revision, first.revision + 1);
    }

    /// A watcher that does not read is cut off once its queued changes hold more than its byte budget.
    #[tokio::test]
    async fn slow_watchers_are_bounded_by_bytes() {
        let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let cache = WatchCache::new(
            inner,
            "/r",
            CacheConfig {
                watcher_buffer_bytes: 5_000,
                ..CacheConfig::default()
            },
        )
        .unwrap();
        let first = cache
            .create("/r/a", Bytes::from(vec![b'0'; 1000]))
            .await
            .unwrap();
        assert!(cache.wait_fresh(first.revision).await);
        let opts = WatchOptions {
            resource_version: Some(first.revision),
            recursive: true,
            ..WatchOptions::default()
        };
        let mut slow = cache.watch("/r", &opts).await.unwrap();
        let mut reader = cache.watch("/r", &opts).await.unwrap();
        let mut last = first.revision;
        for i in 1..=10u8 {
            let mut update =
                |_: Option<StoredObject>| async move { Ok(Bytes::from(vec![b'0' + i; 1000])) };
            last = cache
                .guaranteed_update("/r/a", false, None, &mut update, None)
                .await
                .unwrap()
                .revision;
            assert_eq!(next(&mut reader).await.revision, last);
        }
        // Each change holds 2,000 bytes: two were queued, the third went over 5,000.
        let mut kinds = Vec::new();
        while let Some(event) = slow.next().await {
            kinds.push(event.event_type);
        }
        assert_eq!(
            kinds,
            vec![EventType::Modified, EventType::Modified, EventType::Error]
        );
        assert!(cache.wait_fresh(last).await);
    }

    #[tokio::test]
    async fn initial_events_then_bookmark() {
        let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        inner.create("/r/a", Bytes::from("a")).await.unwrap();
        let cache = cache(inner);
        let mut w = cache
            .watch(
                "/r",
                &WatchOptions {
                    recursive: true,
                    send_initial_events: Some(true),
                    allow_watch_bookmarks: true,
                    ..WatchOptions::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(next(&mut w).await.event_type, EventType::Added);
        let bookmark = next(&mut w).await;
        assert!(bookmark.initial_events_end);
        let b = cache.create("/r/b", Bytes::from("b")).await.unwrap();
        let event = next(&mut w).await;
        assert_eq!(
            (event.event_type, event.key, event.revision),
            (EventType::Added, "/r/b".to_string(), b.revision)
        );
    }
}
