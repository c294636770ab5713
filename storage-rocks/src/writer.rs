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
use std::time::Duration;

use apiserver_storage::optimistic::Outcome;
use apiserver_storage::{Change, StorageError, StoredObject};
use bytes::Bytes;
use rocksdb::{WriteBatch, WriteOptions};
use tokio::sync::oneshot;

use crate::encoding::{
    CF_HISTORY, CF_LATEST, CF_LOG, LogRecord, META_REVISION, WriteKind, history_key, history_value,
    latest_value,
};
use crate::scan;
use crate::store::Shared;

/// At most this many requests share one batch.
const MAX_GROUP: usize = 512;

/// While writes fail, how often an idle writer tries a write of its own, so that readiness recovers without a
/// client write (RocksDB resumes by itself once space returns: its `SstFileManager` checks every 5 s).
const PROBE_INTERVAL: Duration = Duration::from_secs(1);

/// A conditional write.
#[derive(Debug)]
pub(crate) enum Op {
    /// Store the value if the key does not exist.
    Create(Bytes),
    /// Store the value if the key is at `expected` (`None`: if it does not exist). Equal bytes write nothing.
    Put { value: Bytes, expected: Option<u64> },
    /// Delete the key if it is at `expected`.
    Delete { expected: u64 },
    /// Move the revision up to this one (nothing when it is there already); the key is not used.
    Bump(u64),
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
            loop {
                let first = if shared.failure().is_some() {
                    match rx.recv_timeout(PROBE_INTERVAL) {
                        Ok(first) => first,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            probe(&shared, &write_opts);
                            continue;
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    }
                } else {
                    match rx.recv() {
                        Ok(first) => first,
                        Err(_) => break,
                    }
                };
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
        Op::Bump(_) => Decision::Reply(Err(StorageError::Internal(
            "rocksdb: a revision bump is not a write of a key".into(),
        ))),
    }
}

/// Rewrites the current revision as it is: a write that changes nothing, to learn whether writes work again.
fn probe(shared: &Shared, write_opts: &WriteOptions) {
    let revision = shared.committed.load(Ordering::Acquire);
    if shared
        .db
        .put_opt(META_REVISION, revision.to_be_bytes(), write_opts)
        .is_ok()
    {
        shared.recovered();
    }
}

/// Decides, writes and acknowledges one group of requests.
fn commit(shared: &Shared, write_opts: &WriteOptions, group: Vec<Request>) {
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
    let mut bumped = false;
    for Request { key, op, reply } in group {
        if let Op::Bump(revision) = op {
            // Revisions up to `revision` then have no log record: nothing was written at them.
            if revision >= next {
                next = revision + 1;
                bumped = true;
            }
            let at = StoredObject {
                key,
                value: Bytes::new(),
                revision: next - 1,
            };
            replies.push((reply, Ok(Outcome::Unchanged(at))));
            continue;
        }
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
    if !entries.is_empty() || bumped {
        let last = next - 1;
        batch.put(META_REVISION, last.to_be_bytes());
        if let Err(e) = shared.db.write_opt(batch, write_opts) {
            // RocksDB applies a batch whose WAL write failed to nothing, stops taking writes (a "hard" background
            // error) and, for a full disk, resumes by itself once there is space again, after flushing its
            // memtables to leave the damaged WAL behind. Its callers cannot know whether it was kept: an
            // error, as any ambiguous write.
            let err = shared.fail(format!("rocksdb write failed: {e}"));
            tracing::error!(error = %e, "rocksdb write failed");
            // Should the batch have been applied after all, its revisions are taken: publish them rather than
            // hand them out again.
            if scan::meta(shared.db.get(META_REVISION), "revision")
                .is_ok_and(|stored| stored >= last)
            {
                shared.publish(last, &entries);
            }
            for (reply, _) in replies {
                let _ = reply.send(Err(err.clone()));
            }
            return;
        }
        shared.recovered();
        shared.publish(last, &entries);
    }
    for (reply, result) in replies {
        let _ = reply.send(result);
    }
}
