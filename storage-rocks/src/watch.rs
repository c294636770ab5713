//! Watches: committed writes are fanned out in-process to every registered watcher; a watch that starts in the
//! past first replays the `log` column family from a snapshot.
//!
//! The writer publishes a batch (advances the committed revision and fans out its events) under the watchers lock
//! after RocksDB has acknowledged it, and a new watch takes its snapshot and registers under the same lock. So the
//! snapshot plus the channel cover every revision exactly once: events the channel brings at or below the snapshot
//! revision were replayed already and are skipped.
//!
//! Watchers get events through bounded channels filled without blocking: one that falls more than the buffer
//! behind is cut off with an error event, and writers never wait for readers.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use apiserver_storage::{
    Change, EventType, KeyRange, Predicate, StorageError, StoredObject, WatchEvent, WatchOptions,
    WatchStream,
};
use bytes::Bytes;
use tokio::sync::mpsc;

use crate::encoding::{CF_HISTORY, CF_LOG, LogRecord, WriteKind, history_key};
use crate::scan::{Snapshot, read_history, scan_at};
use crate::store::{Shared, db_err};

enum Notification {
    Entry(Arc<Change>),
    Progress(u64),
}

struct WatcherSlot {
    range: KeyRange,
    progress_notify: bool,
    tx: mpsc::Sender<Notification>,
    /// Why the watch was cut off, set before its channel closes.
    ended: Arc<OnceLock<StorageError>>,
}

impl WatcherSlot {
    /// Sends without blocking; false when the watcher is gone or was cut off.
    fn send(&self, n: Notification) -> bool {
        match self.tx.try_send(n) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                let _ = self.ended.set(StorageError::Internal(
                    "watch terminated: the watcher fell too far behind".into(),
                ));
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// The registered watchers.
#[derive(Default)]
pub(crate) struct Watchers {
    slots: Vec<WatcherSlot>,
}

impl Watchers {
    /// Fans committed entries out to the watchers whose range they fall in.
    pub(crate) fn broadcast(&mut self, entries: &[Arc<Change>]) {
        self.slots.retain(|w| {
            let mut alive = !w.tx.is_closed();
            for e in entries {
                if alive && w.range.contains(&e.key) {
                    alive = w.send(Notification::Entry(e.clone()));
                }
            }
            alive
        });
    }

    /// Ends every watch with 410 Expired: the changes since they were told last are compacted away.
    pub(crate) fn expire(&mut self) {
        for w in self.slots.drain(..) {
            let _ = w.ended.set(StorageError::watch_expired());
        }
    }

    /// Sends a progress bookmark at `revision` to the watchers that asked for them.
    pub(crate) fn progress(&mut self, revision: u64) {
        self.slots.retain(|w| {
            if w.progress_notify {
                w.send(Notification::Progress(revision))
            } else {
                !w.tx.is_closed()
            }
        });
    }
}

/// Sets up a watch (blocking: it may replay history from disk).
pub(crate) fn start(
    shared: &Shared,
    key: &str,
    opts: &WatchOptions,
) -> Result<WatchStream, StorageError> {
    let range = KeyRange::new(key, opts.recursive)?;
    let rv = opts.resource_version.unwrap_or(0);
    let initial_events = opts.send_initial_events.unwrap_or(rv == 0);
    let (tx, rx) = mpsc::channel(shared.watch_buffer.max(1));
    let ended = Arc::new(OnceLock::new());

    let snapshot;
    let snap_rev;
    let start_after;
    {
        let mut watchers = shared.lock_watchers();
        snapshot = Snapshot::new(shared)?;
        snap_rev = snapshot.revision;
        if initial_events || rv == 0 {
            let at = if rv == 0 { snap_rev } else { rv };
            if at > snap_rev {
                return Err(StorageError::TooLargeResourceVersion {
                    requested: at,
                    current: snap_rev,
                });
            }
            if at < snapshot.compacted {
                return Err(StorageError::watch_expired());
            }
            start_after = at;
        } else {
            if rv < snapshot.compacted {
                return Err(StorageError::watch_expired());
            }
            start_after = rv;
        }
        watchers.slots.push(WatcherSlot {
            range: range.clone(),
            progress_notify: opts.progress_notify,
            tx,
            ended: ended.clone(),
        });
    }

    let mut pending = VecDeque::new();
    if initial_events {
        scan_at(&snapshot, &range, range.as_str(), start_after, |obj| {
            pending.push_back(Pending::Initial(obj));
            Ok(true)
        })?;
        if opts.send_initial_events == Some(true) && opts.allow_watch_bookmarks {
            pending.push_back(Pending::Ready(WatchEvent::bookmark(start_after, true)));
        }
    }
    log_changes(
        &snapshot,
        start_after,
        |key| range.contains(key),
        |change| pending.push_back(Pending::Entry(change)),
    )?;

    let state = WatchState {
        pending,
        rx,
        ended,
        predicate: opts.predicate.clone(),
        // Events up to here came from the snapshot (or precede the start).
        seen_through: start_after.max(snap_rev),
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

/// Hands `out` the writes in `(after, snapshot revision]` to the keys `wanted`, in revision order, read from the
/// log and history.
pub(crate) fn log_changes(
    snapshot: &Snapshot<'_>,
    after: u64,
    wanted: impl Fn(&str) -> bool,
    mut out: impl FnMut(Arc<Change>),
) -> Result<(), StorageError> {
    if after >= snapshot.revision {
        return Ok(());
    }
    let shared = snapshot.shared;
    let log = shared.cf(CF_LOG)?;
    let history = shared.cf(CF_HISTORY)?;
    let mut ro = rocksdb::ReadOptions::default();
    if let Some(end) = snapshot.revision.checked_add(1) {
        ro.set_iterate_upper_bound(end.to_be_bytes().to_vec());
    }
    let from = (after + 1).to_be_bytes();
    let iter = snapshot.iterator_cf_opt(
        log,
        ro,
        rocksdb::IteratorMode::From(&from, rocksdb::Direction::Forward),
    );
    for item in iter {
        let (k, v) = item.map_err(db_err)?;
        let revision = crate::encoding::decode_u64("log key", &k)?;
        let record = LogRecord::decode(revision, &v)?;
        if !wanted(&record.key) {
            continue;
        }
        let value = match record.kind {
            WriteKind::Delete => None,
            WriteKind::Create | WriteKind::Update => Some(require(
                read_history(snapshot, history, &record.key, revision)?,
                &record.key,
                revision,
            )?),
        };
        let prev = match record.kind {
            WriteKind::Create => None,
            WriteKind::Update | WriteKind::Delete => Some(require(
                read_history(snapshot, history, &record.key, record.prev_revision)?,
                &record.key,
                record.prev_revision,
            )?),
        };
        out(Arc::new(Change {
            revision,
            key: record.key,
            value,
            prev,
            prev_revision: if record.kind == WriteKind::Create {
                0
            } else {
                record.prev_revision
            },
        }));
    }
    Ok(())
}

/// A version the log refers to must exist in history.
fn require(v: Option<Bytes>, key: &str, revision: u64) -> Result<Bytes, StorageError> {
    v.ok_or_else(|| StorageError::CorruptObj {
        key: key.to_string(),
        message: format!(
            "the log refers to revision {revision}, which history lacks ({:?})",
            history_key(key, revision)
        ),
    })
}

enum Pending {
    Initial(StoredObject),
    Entry(Arc<Change>),
    Ready(WatchEvent),
}

struct WatchState {
    pending: VecDeque<Pending>,
    rx: mpsc::Receiver<Notification>,
    ended: Arc<OnceLock<StorageError>>,
    predicate: Predicate,
    seen_through: u64,
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
                    Some(Notification::Entry(e)) => {
                        if e.revision <= self.seen_through {
                            continue;
                        }
                        Pending::Entry(e)
                    }
                    Some(Notification::Progress(rev)) => {
                        if rev < self.seen_through {
                            continue;
                        }
                        Pending::Ready(WatchEvent::bookmark(rev, false))
                    }
                    None => {
                        self.done = true;
                        return self.ended.get().cloned().map(WatchEvent::error);
                    }
                },
            };
            let event = match item {
                Pending::Ready(ev) => Some(ev),
                Pending::Initial(obj) => matches(&self.predicate, &obj.value)
                    .then(|| WatchEvent::object(EventType::Added, obj, None)),
                Pending::Entry(e) => e.event_for(&self.predicate),
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
