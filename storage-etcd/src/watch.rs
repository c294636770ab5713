//! Watches on etcd (upstream `pkg/storage/etcd3/watcher.go`): one etcd watch stream per storage watch, started
//! at revision + 1 with previous values, turned into ADDED/MODIFIED/DELETED events by the predicate, with
//! progress notifications as bookmarks. When the stream breaks (etcd restarted, connection lost) the watch is
//! re-created from the revision after the last event delivered; if that revision was compacted meanwhile the
//! watch ends with a 410 error event, as upstream's does.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apiserver_storage::{
    EventType, KeyRange, Predicate, Storage, StorageError, StoredObject, WatchEvent, WatchOptions,
    WatchStream,
};
use bytes::Bytes;
use etcd_client::{Event, WatchClient, WatchRequestSender, WatchResponseStream};
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::error::{EtcdFailure, storage_error};
use crate::store::{EtcdStorage, bounds, header_revision};

/// Events buffered between the etcd stream and the consumer (upstream uses 100 each way); a slow consumer makes
/// etcd hold events back (the watcher becomes "unsynced" there), it never blocks writers.
const BUFFER: usize = 256;
/// Longest pause between attempts to re-create a broken watch.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

pub(crate) async fn start(
    store: &EtcdStorage,
    key: &str,
    opts: &WatchOptions,
) -> Result<WatchStream, StorageError> {
    let range = KeyRange::new(key, opts.recursive)?;
    let rv = opts.resource_version.unwrap_or(0);
    let initial = opts.send_initial_events.unwrap_or(rv == 0);
    let mut initial_events = VecDeque::new();
    let start_after = if initial {
        let (items, at) = match store.read_all(&range, rv).await {
            Ok(r) => r,
            Err(EtcdFailure::Compacted) => return Err(StorageError::watch_expired()),
            Err(EtcdFailure::FutureRevision) => return Err(store.too_large(rv).await),
            Err(EtcdFailure::Other(e)) => return Err(e),
        };
        for obj in items {
            if matches(&opts.predicate, &obj.value) {
                initial_events.push_back(WatchEvent::object(EventType::Added, obj, None));
            }
        }
        if opts.send_initial_events == Some(true) && opts.allow_watch_bookmarks {
            initial_events.push_back(WatchEvent::bookmark(at, true));
        }
        at
    } else if rv == 0 {
        store.current_revision().await?
    } else {
        store.check_not_compacted(&range, rv).await?;
        rv
    };
    let (start, end) = bounds(&range);
    let mut task = WatchTask {
        client: store.watch_client(),
        key: key.to_string(),
        start,
        end,
        predicate: opts.predicate.clone(),
        progress_notify: opts.progress_notify,
        next_rev: i64::try_from(start_after)
            .map_err(|_| StorageError::Internal(format!("revision {start_after} out of range")))?
            + 1,
        progress: opts.progress_notify.then(|| store.progress_requests()),
        compacted: store.compacted().clone(),
    };
    let conn = match task.open().await {
        Ok(c) => c,
        Err(OpenError::Compacted) => return Err(StorageError::watch_expired()),
        Err(OpenError::Etcd(e)) => return Err(storage_error(e, key)),
        Err(OpenError::Canceled(reason)) => {
            return Err(StorageError::Internal(format!(
                "etcd canceled the watch: {reason}"
            )));
        }
    };
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(task.run(conn, tx));
    let live = futures::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|ev| (ev, rx)) },
    );
    Ok(futures::stream::iter(initial_events).chain(live).boxed())
}

struct WatchTask {
    client: WatchClient,
    key: String,
    start: Vec<u8>,
    end: Vec<u8>,
    predicate: Predicate,
    progress_notify: bool,
    /// The revision the next (re-)created etcd watch starts at: one after the last event delivered.
    next_rev: i64,
    /// Progress requests from [`Storage::request_watch_progress`]; `None` once the store is gone.
    progress: Option<tokio::sync::watch::Receiver<u64>>,
    compacted: Arc<AtomicU64>,
}

/// An open etcd watch stream.
struct Conn {
    sender: WatchRequestSender,
    responses: WatchResponseStream,
    watch_id: i64,
}

enum OpenError {
    Compacted,
    Canceled(String),
    Etcd(etcd_client::Error),
}

/// Why [`WatchTask::pump`] stopped.
enum Stop {
    /// The consumer dropped the stream.
    Closed,
    /// A final error event to deliver.
    Failed(StorageError),
    /// The etcd stream broke; re-create it.
    Disconnected(String),
}

impl WatchTask {
    async fn open(&mut self) -> Result<Conn, OpenError> {
        let mut o = etcd_client::WatchOptions::new()
            .with_range(self.end.clone())
            .with_start_revision(self.next_rev)
            .with_prev_key();
        if self.progress_notify {
            o = o.with_progress_notify();
        }
        let stream = self
            .client
            .watch(self.start.clone(), Some(o))
            .await
            .map_err(OpenError::Etcd)?;
        let (sender, mut responses) = stream.split();
        loop {
            match responses.message().await.map_err(OpenError::Etcd)? {
                Some(r) if r.compact_revision() > 0 => {
                    self.saw_compaction(r.compact_revision());
                    return Err(OpenError::Compacted);
                }
                Some(r) if r.canceled() => {
                    return Err(OpenError::Canceled(r.cancel_reason().to_string()));
                }
                Some(r) if r.created() => {
                    return Ok(Conn {
                        sender,
                        responses,
                        watch_id: r.watch_id(),
                    });
                }
                Some(_) => {}
                None => {
                    return Err(OpenError::Canceled(
                        "the watch stream closed before the watch was created".into(),
                    ));
                }
            }
        }
    }

    fn saw_compaction(&self, compact_revision: i64) {
        self.compacted.fetch_max(
            u64::try_from(compact_revision).unwrap_or(0),
            Ordering::AcqRel,
        );
    }

    async fn run(mut self, mut conn: Conn, tx: mpsc::Sender<WatchEvent>) {
        loop {
            match self.pump(&mut conn, &tx).await {
                Stop::Closed => return,
                Stop::Failed(e) => {
                    let _ = tx.send(WatchEvent::error(e)).await;
                    return;
                }
                Stop::Disconnected(reason) => {
                    tracing::debug!(key = %self.key, %reason, next_revision = self.next_rev,
                        "etcd watch broke; re-creating it");
                    match self.reconnect(&tx).await {
                        Some(c) => conn = c,
                        None => return,
                    }
                }
            }
        }
    }

    /// Re-creates the etcd watch from `next_rev`, backing off while etcd is unreachable. `None` when the consumer
    /// went away or the watch ended with an error event.
    async fn reconnect(&mut self, tx: &mpsc::Sender<WatchEvent>) -> Option<Conn> {
        let mut backoff = Duration::from_millis(100);
        loop {
            tokio::select! {
                _ = tx.closed() => return None,
                _ = tokio::time::sleep(backoff) => {}
            }
            let opened = tokio::select! {
                _ = tx.closed() => return None,
                r = self.open() => r,
            };
            match opened {
                Ok(c) => return Some(c),
                Err(OpenError::Compacted) => {
                    let _ = tx
                        .send(WatchEvent::error(StorageError::watch_expired()))
                        .await;
                    return None;
                }
                Err(OpenError::Canceled(reason)) => {
                    tracing::debug!(key = %self.key, %reason, "etcd watch not re-created yet");
                }
                Err(OpenError::Etcd(e)) => {
                    tracing::debug!(key = %self.key, error = %e, "etcd watch not re-created yet");
                }
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Moves events from etcd to the consumer until something stops it.
    async fn pump(&mut self, conn: &mut Conn, tx: &mpsc::Sender<WatchEvent>) -> Stop {
        loop {
            let progress_changed = async {
                match self.progress.as_mut() {
                    Some(rx) => rx.changed().await.is_ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tx.closed() => return Stop::Closed,
                still_open = progress_changed => {
                    if !still_open {
                        self.progress = None;
                    } else if let Err(e) = conn.sender.request_progress().await {
                        return Stop::Disconnected(e.to_string());
                    }
                }
                msg = conn.responses.message() => {
                    let resp = match msg {
                        Ok(Some(r)) => r,
                        Ok(None) => return Stop::Disconnected("the watch stream ended".into()),
                        Err(e) => return Stop::Disconnected(e.to_string()),
                    };
                    if resp.compact_revision() > 0 {
                        self.saw_compaction(resp.compact_revision());
                        return Stop::Failed(StorageError::watch_expired());
                    }
                    if resp.canceled() {
                        return Stop::Disconnected(format!("canceled: {}", resp.cancel_reason()));
                    }
                    if resp.created() {
                        continue;
                    }
                    if resp.events().is_empty() {
                        if let Some(stop) = self.progress(&resp, conn.watch_id, tx).await {
                            return stop;
                        }
                        continue;
                    }
                    for ev in resp.events() {
                        let (event, revision) = match transform(&self.predicate, ev) {
                            Ok(r) => r,
                            Err(e) => return Stop::Failed(e),
                        };
                        if let Some(event) = event
                            && tx.send(event).await.is_err()
                        {
                            return Stop::Closed;
                        }
                        self.next_rev = self.next_rev.max(revision + 1);
                    }
                }
            }
        }
    }

    /// A progress notification: a bookmark for progress-notify watches.
    async fn progress(
        &mut self,
        resp: &etcd_client::WatchResponse,
        watch_id: i64,
        tx: &mpsc::Sender<WatchEvent>,
    ) -> Option<Stop> {
        let rev = header_revision(resp.header());
        if rev == 0 || !self.progress_notify {
            return None;
        }
        let rev_i = i64::try_from(rev).unwrap_or(i64::MAX);
        if rev_i < self.next_rev - 1 {
            return None;
        }
        // Periodic notifications (addressed to this watcher) are sent only when it is in sync, so resuming after
        // them is safe. Answers to explicit requests (watch id -1) are not reliable on etcd 3.4, which stamps
        // them with the store's revision even while events are still queued: report them, but resume from the
        // last event.
        if resp.watch_id() == watch_id {
            self.next_rev = self.next_rev.max(rev_i + 1);
        }
        if tx.send(WatchEvent::bookmark(rev, false)).await.is_err() {
            return Some(Stop::Closed);
        }
        None
    }
}

/// Whether a value is selected; an extraction failure counts as not selected (as upstream's watcher filter).
fn matches(p: &Predicate, value: &[u8]) -> bool {
    p.matches(value).unwrap_or(false)
}

/// Turns an etcd event into the event a watcher with predicate `p` sees (upstream etcd3 watcher `transform`),
/// with the event's revision.
fn transform(p: &Predicate, ev: &Event) -> Result<(Option<WatchEvent>, i64), StorageError> {
    let kv = ev
        .kv()
        .ok_or_else(|| StorageError::Internal("etcd event without a key-value".into()))?;
    let revision = kv.mod_revision();
    let key = String::from_utf8(kv.key().to_vec()).map_err(|e| StorageError::CorruptObj {
        key: String::from_utf8_lossy(e.as_bytes()).into_owned(),
        message: "key is not UTF-8".into(),
    })?;
    let obj = |value: Bytes| StoredObject {
        key: key.clone(),
        value,
        revision: u64::try_from(revision).unwrap_or(0),
    };
    let prev = ev.prev_kv().map(|p| Bytes::copy_from_slice(p.value()));
    let event = match ev.event_type() {
        etcd_client::EventType::Put => {
            let new = Bytes::copy_from_slice(kv.value());
            let created = kv.create_revision() == kv.mod_revision();
            match prev {
                _ if created => {
                    matches(p, &new).then(|| WatchEvent::object(EventType::Added, obj(new), None))
                }
                // The previous value was compacted away: unknown whether it was selected.
                None if p.is_everything() => {
                    Some(WatchEvent::object(EventType::Modified, obj(new), None))
                }
                None => {
                    matches(p, &new).then(|| WatchEvent::object(EventType::Added, obj(new), None))
                }
                Some(old) if p.is_everything() => {
                    Some(WatchEvent::object(EventType::Modified, obj(new), Some(old)))
                }
                Some(old) => match (matches(p, &old), matches(p, &new)) {
                    (true, true) => {
                        Some(WatchEvent::object(EventType::Modified, obj(new), Some(old)))
                    }
                    (false, true) => {
                        Some(WatchEvent::object(EventType::Added, obj(new), Some(old)))
                    }
                    (true, false) => Some(WatchEvent::object(
                        EventType::Deleted,
                        obj(old.clone()),
                        Some(old),
                    )),
                    (false, false) => None,
                },
            }
        }
        etcd_client::EventType::Delete => {
            let Some(old) = prev else {
                return Err(StorageError::Internal(format!(
                    "etcd event received with PrevKv=nil (key={key:?}, modRevision={revision}, type=DELETE)"
                )));
            };
            matches(p, &old)
                .then(|| WatchEvent::object(EventType::Deleted, obj(old.clone()), Some(old)))
        }
    };
    Ok((event, revision))
}
