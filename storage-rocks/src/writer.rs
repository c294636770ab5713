//! The write path: one thread owns every write, so compare-and-swap needs no lock and revisions are assigned in
//! commit order. Requests that queue up while a batch is being synced are committed together in the next batch
//! (group commit): one WAL sync acknowledges all of them, each still with its own revision.
//!
//! Reads never go through here; they use snapshots.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::thread::JoinHandle;

use apiserver::storage::optimistic::Outcome;
use apiserver::storage::{Change, StorageError, StoredObject};
use bytes::Bytes;
use rocksdb::{WriteBatch, WriteOptions};
use tokio::sync::oneshot;

use crate::encoding::{
    CF_HISTORY, CF_LATEST, CF_LOG, LogRecord, META_REVISION, WriteKind, history_key, history_value,
    latest_value,
};
use crate::store::Shared;

/// At most this many requests share one batch.
const MAX_GROUP: usize = 512;

/// A conditional write.
#[derive(Debug)]
pub(crate) enum Op {
    /// Store the value if the key does not exist.
    Create(Bytes),
    /// Store the value if the key is at `expected` (`None`: if it does not exist). Equal bytes write nothing.
    Put { value: Bytes, expected: Option<u64> },
    /// Delete the key if it is at `expected`.
    Delete { expected: u64 },
}

/// One queued write and where to send its result.
pub(crate) struct Request {
    pub(crate) key: String,
    pub(crate) op: Op,
    pub(crate) reply: oneshot::Sender<Result<Outcome, StorageError>>,
}

/// Starts the writer thread; it stops when every sender is dropped.
pub(crate) fn spawn(
    shared: Arc<Shared>,
    write_opts: WriteOptions,
) -> std::io::Result<(mpsc::Sender<Request>, JoinHandle<()>)> {
    let (tx, rx) = mpsc::channel::<Request>();
    let handle = std::thread::Builder::new()
        .name("rocksdb-writer".into())
        .spawn(move || {
            while let Ok(first) = rx.recv() {
                let mut group = vec![first];
                while group.len() < MAX_GROUP {
                    match rx.try_recv() {
                        Ok(r) => group.push(r),
                        Err(_) => break,
                    }
                }
                commit(&shared, &write_opts, group);
            }
        })?;
    Ok((tx, handle))
}

/// What one request leads to.
enum Decision {
    Reply(Result<Outcome, StorageError>),
    Write {
        kind: WriteKind,
        value: Option<Bytes>,
        prev: Option<(u64, Bytes)>,
    },
}

fn decide(key: &str, live: Option<(u64, Bytes)>, op: Op) -> Decision {
    let stored = |(revision, value): (u64, Bytes)| StoredObject {
        key: key.to_string(),
        value,
        revision,
    };
    match op {
        Op::Create(value)
        | Op::Put {
            value,
            expected: None,
        } if live.is_none() => Decision::Write {
            kind: WriteKind::Create,
            value: Some(value),
            prev: None,
        },
        Op::Create(_) => Decision::Reply(Err(StorageError::KeyExists {
            key: key.to_string(),
            revision: 0,
        })),
        Op::Put {
            value,
            expected: Some(expected),
        } => match live {
            Some((rev, old)) if rev == expected => {
                if old == value {
                    Decision::Reply(Ok(Outcome::Unchanged(stored((rev, old)))))
                } else {
                    Decision::Write {
                        kind: WriteKind::Update,
                        value: Some(value),
                        prev: Some((rev, old)),
                    }
                }
            }
            live => Decision::Reply(Ok(Outcome::Conflict(live.map(stored)))),
        },
        Op::Put { expected: None, .. } => Decision::Reply(Ok(Outcome::Conflict(live.map(stored)))),
        Op::Delete { expected } => match live {
            Some((rev, old)) if rev == expected => Decision::Write {
                kind: WriteKind::Delete,
                value: None,
                prev: Some((rev, old)),
            },
            live => Decision::Reply(Ok(Outcome::Conflict(live.map(stored)))),
        },
    }
}

/// Decides, writes and acknowledges one group of requests.
fn commit(shared: &Shared, write_opts: &WriteOptions, group: Vec<Request>) {
    if let Some(err) = shared.failure() {
        for r in group {
            let _ = r.reply.send(Err(err.clone()));
        }
        return;
    }
    let cfs = (|| {
        Ok((
            shared.cf(CF_LATEST)?,
            shared.cf(CF_HISTORY)?,
            shared.cf(CF_LOG)?,
        ))
    })();
    let (latest_cf, history_cf, log_cf) = match cfs {
        Ok(c) => c,
        Err(e) => {
            for r in group {
                let _ = r.reply.send(Err(StorageError::clone(&e)));
            }
            return;
        }
    };
    let mut next = shared.committed.load(Ordering::Acquire) + 1;
    let mut batch = WriteBatch::default();
    // Keys written earlier in this group: their state is not in RocksDB yet.
    let mut overlay: HashMap<String, Option<(u64, Bytes)>> = HashMap::new();
    let mut replies = Vec::with_capacity(group.len());
    let mut entries = Vec::new();
    for Request { key, op, reply } in group {
        let live = match overlay.get(&key) {
            Some(state) => state.clone(),
            None => match shared.read_latest(&key) {
                Ok(obj) => obj.map(|o| (o.revision, o.value)),
                Err(e) => {
                    replies.push((reply, Err(e)));
                    continue;
                }
            },
        };
        match decide(&key, live, op) {
            Decision::Reply(result) => replies.push((reply, result)),
            Decision::Write { kind, value, prev } => {
                let revision = next;
                next += 1;
                match &value {
                    Some(v) => batch.put_cf(latest_cf, key.as_bytes(), latest_value(revision, v)),
                    None => batch.delete_cf(latest_cf, key.as_bytes()),
                }
                batch.put_cf(
                    history_cf,
                    history_key(&key, revision),
                    history_value(value.as_deref()),
                );
                let record = LogRecord {
                    kind,
                    prev_revision: prev.as_ref().map_or(0, |p| p.0),
                    key: key.clone(),
                };
                batch.put_cf(log_cf, revision.to_be_bytes(), record.encode());
                overlay.insert(key.clone(), value.clone().map(|v| (revision, v)));
                let prev_value = prev.map(|p| p.1);
                let returned = value
                    .clone()
                    .or_else(|| prev_value.clone())
                    .unwrap_or_default();
                replies.push((
                    reply,
                    Ok(Outcome::Written(StoredObject {
                        key: key.clone(),
                        value: returned,
                        revision,
                    })),
                ));
                entries.push(Arc::new(Change {
                    revision,
                    key,
                    value,
                    prev: prev_value,
                    prev_revision: 0,
                }));
            }
        }
    }
    if !entries.is_empty() {
        let last = next - 1;
        batch.put(META_REVISION, last.to_be_bytes());
        if let Err(e) = shared.db.write_opt(batch, write_opts) {
            // The state of a failed batch is unknown (RocksDB stops accepting writes after a background error), so
            // this store stops writing rather than risk reusing revisions.
            let err = shared.fail(format!("rocksdb write failed: {e}"));
            tracing::error!(error = %e, "rocksdb write failed; the store refuses further writes");
            for (reply, _) in replies {
                let _ = reply.send(Err(err.clone()));
            }
            return;
        }
        shared.publish(last, &entries);
    }
    for (reply, result) in replies {
        let _ = reply.send(result);
    }
}
