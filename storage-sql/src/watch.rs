//! Watches: one log tailer per store fans every write out to the watchers, in revision order.
//!
//! Writes made through this store are handed to the hub as soon as they commit ([`Hub::publish_local`]) and reach
//! watchers without a database round trip when they are next in line. Writes by other processes are found by
//! reading the log after `last`: on Postgres a `LISTEN` connection wakes the tailer at once; a periodic poll is
//! the fallback (and SQLite's only way to see other processes). Because revisions are gap-free, a missing revision
//! in what the tailer reads can only mean compaction removed it, and the watchers that would miss it are ended
//! with a 410 instead of silently skipping events.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use apiserver_storage::{
    Change, EventType, KeyRange, Predicate, StorageError, StoredObject, WatchEvent,
};
use tokio::sync::{Notify, mpsc, watch};

use crate::db::Db;

/// How many log rows the tailer reads per query.
const TAIL_BATCH: usize = 1000;

pub(crate) enum Notification {
    Entry(Arc<Change>),
    Progress(u64),
    Failed(StorageError),
}

struct Slot {
    range: KeyRange,
    progress_notify: bool,
    tx: mpsc::Sender<Notification>,
    overflowed: Arc<AtomicBool>,
}

#[derive(Default)]
struct State {
    /// Every write up to here has been sent to the watchers.
    last: u64,
    watchers: Vec<Slot>,
    /// Local writes that committed ahead of a revision not yet seen.
    local: BTreeMap<u64, Arc<Change>>,
    /// The log must be read (a remote write, a poll, or a gap).
    need_read: bool,
    progress_requested: bool,
}

/// The fan-out point between writes and watchers of one store.
pub(crate) struct Hub {
    state: Mutex<State>,
    wake: Notify,
    shutdown: watch::Sender<bool>,
}

impl Hub {
    pub fn new(last: u64) -> Arc<Hub> {
        Arc::new(Hub {
            state: Mutex::new(State {
                last,
                ..Default::default()
            }),
            wake: Notify::new(),
            shutdown: watch::channel(false).0,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent between statements, so a panic elsewhere does not invalidate it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Stops the tailer and ends every watch.
    pub fn close(&self) {
        self.shutdown.send_replace(true);
        self.lock().watchers.clear();
        self.wake.notify_one();
    }

    fn closed(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// A write of this process committed at `row.revision`.
    pub fn publish_local(&self, row: Change) {
        let mut s = self.lock();
        if row.revision <= s.last {
            return;
        }
        if row.revision == s.last + 1 {
            broadcast(&mut s, Arc::new(row));
            drain_local(&mut s);
        } else {
            s.local.insert(row.revision, Arc::new(row));
            s.need_read = true;
            drop(s);
            self.wake.notify_one();
        }
    }

    /// Something (a notification, a poll) says the log may have grown beyond `revision`.
    pub fn hint(&self, revision: Option<u64>) {
        let mut s = self.lock();
        if revision.is_some_and(|r| r <= s.last || s.local.contains_key(&r)) {
            return;
        }
        s.need_read = true;
        drop(s);
        self.wake.notify_one();
    }

    /// Asks for a progress bookmark on every watch that wants one.
    pub fn request_progress(&self) {
        self.lock().progress_requested = true;
        self.wake.notify_one();
    }

    /// Adds a watcher; returns the revision up to which it will not get live events.
    pub fn register(
        &self,
        range: KeyRange,
        progress_notify: bool,
        buffer: usize,
    ) -> (u64, mpsc::Receiver<Notification>, Arc<AtomicBool>) {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let overflowed = Arc::new(AtomicBool::new(false));
        let mut s = self.lock();
        s.watchers.push(Slot {
            range,
            progress_notify,
            tx,
            overflowed: overflowed.clone(),
        });
        (s.last, rx, overflowed)
    }

    /// Reads the log after `last` up to the current revision and sends it out.
    async fn catch_up(&self, db: &Db) -> Result<(), StorageError> {
        let (need_read, progress) = {
            let mut s = self.lock();
            let r = (s.need_read, s.progress_requested);
            s.need_read = false;
            s.progress_requested = false;
            r
        };
        if !need_read && !progress {
            return Ok(());
        }
        let meta = db.meta().await?;
        let mut after = self.lock().last;
        while after < meta.revision {
            let rows = db.log(after, meta.revision, TAIL_BATCH).await?;
            let full = rows.len() == TAIL_BATCH;
            let mut s = self.lock();
            for row in rows {
                if row.revision <= s.last {
                    continue;
                }
                if row.revision != s.last + 1 && meta.compacted > s.last {
                    // Compaction removed revisions these watchers never saw.
                    fail_all(&mut s, StorageError::watch_expired());
                }
                broadcast(&mut s, Arc::new(row));
            }
            if !full {
                if s.last < meta.revision && meta.compacted > s.last {
                    // The missing tail was compacted away (e.g. tombstones).
                    fail_all(&mut s, StorageError::watch_expired());
                }
                s.last = s.last.max(meta.revision);
            }
            after = s.last;
            drain_local(&mut s);
            if !full {
                break;
            }
        }
        if progress {
            let mut s = self.lock();
            let rev = s.last.max(meta.revision);
            s.watchers
                .retain(|w| !w.progress_notify || send(w, Notification::Progress(rev)));
        }
        Ok(())
    }
}

/// Sends `n` to one watcher; false when the watcher is gone or cut off.
fn send(w: &Slot, n: Notification) -> bool {
    match w.tx.try_send(n) {
        Ok(()) => true,
        Err(mpsc::error::TrySendError::Full(_)) => {
            w.overflowed.store(true, Ordering::Release);
            false
        }
        Err(mpsc::error::TrySendError::Closed(_)) => false,
    }
}

fn broadcast(s: &mut State, row: Arc<Change>) {
    s.last = row.revision;
    s.watchers.retain(|w| {
        if w.range.contains(&row.key) {
            send(w, Notification::Entry(row.clone()))
        } else {
            !w.tx.is_closed()
        }
    });
}

fn fail_all(s: &mut State, err: StorageError) {
    for w in s.watchers.drain(..) {
        let _ = w.tx.try_send(Notification::Failed(err.clone()));
    }
}

/// Sends the local writes that are next in line, and forgets those already covered.
fn drain_local(s: &mut State) {
    let last = s.last;
    s.local.retain(|r, _| *r > last);
    while let Some(row) = s.local.remove(&(s.last + 1)) {
        broadcast(s, row);
    }
    if !s.local.is_empty() {
        s.need_read = true;
    }
}

/// The tailer: wakes on local gaps, remote notifications, progress requests and the poll timer.
pub(crate) async fn run_tailer(hub: Arc<Hub>, db: Db, poll: Duration) {
    let mut shutdown = hub.shutdown.subscribe();
    let poll = poll.max(Duration::from_millis(10));
    loop {
        if hub.closed() {
            return;
        }
        tokio::select! {
            _ = hub.wake.notified() => {}
            _ = tokio::time::sleep(poll) => { hub.lock().need_read = true; }
            _ = shutdown.changed() => return,
        }
        if let Err(e) = hub.catch_up(&db).await {
            tracing::warn!(error = %e, "watch: reading the log failed; retrying");
            hub.lock().need_read = true;
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = shutdown.changed() => return,
            }
            hub.wake.notify_one();
        }
    }
}

/// Listens for other replicas' writes (Postgres `LISTEN apiserver_log`) and wakes the tailer.
#[cfg(feature = "postgres")]
pub(crate) async fn run_listener(hub: Arc<Hub>, pool: sqlx::PgPool) {
    use sqlx::postgres::PgListener;
    let mut shutdown = hub.shutdown.subscribe();
    let backoff = Duration::from_millis(500);
    'connect: loop {
        if hub.closed() {
            return;
        }
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(mut l) => match l.listen("apiserver_log").await {
                Ok(()) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "watch: LISTEN failed; polling meanwhile");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => continue 'connect,
                        _ = shutdown.changed() => return,
                    }
                }
            },
            Err(e) => {
                tracing::warn!(error = %e, "watch: cannot open the LISTEN connection; polling meanwhile");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => continue 'connect,
                    _ = shutdown.changed() => return,
                }
            }
        };
        // Anything written while we were not listening is found by reading the log once.
        hub.hint(None);
        loop {
            tokio::select! {
                n = listener.try_recv() => match n {
                    Ok(Some(n)) => hub.hint(n.payload().parse::<u64>().ok()),
                    // The connection dropped; notifications may be lost, so read the log.
                    Ok(None) => hub.hint(None),
                    Err(e) => {
                        tracing::warn!(error = %e, "watch: LISTEN connection failed; reconnecting");
                        hub.hint(None);
                        tokio::select! {
                            _ = tokio::time::sleep(backoff) => continue 'connect,
                            _ = shutdown.changed() => return,
                        }
                    }
                },
                _ = shutdown.changed() => return,
            }
        }
    }
}

/// What a watch has yet to deliver before it reads live notifications.
pub(crate) enum Pending {
    /// The state at the start revision, as ADDED.
    Initial(StoredObject),
    /// A write from history.
    Entry(Arc<Change>),
    /// A ready event (the initial-events-end bookmark).
    Ready(WatchEvent),
}

/// One watch's stream state.
pub(crate) struct WatchState {
    pub pending: VecDeque<Pending>,
    pub rx: mpsc::Receiver<Notification>,
    pub overflowed: Arc<AtomicBool>,
    pub predicate: Predicate,
    pub start_after: u64,
    pub done: bool,
}

impl WatchState {
    pub async fn next(&mut self) -> Option<WatchEvent> {
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
                    Some(Notification::Failed(err)) => {
                        self.done = true;
                        return Some(WatchEvent::error(err));
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
