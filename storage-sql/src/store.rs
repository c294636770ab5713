//! [`SqlStorage`]: the [`Storage`] contract on the log table.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apiserver_storage::optimistic::{self, Latest, OptimisticStore, Outcome};
use apiserver_storage::{
    Change, GetOptions, KeyRange, ListOptions, ListResult, Preconditions, Stats, Storage,
    StorageError, StoredObject, TryUpdate, ValidateDeletion, WatchEvent, WatchOptions, WatchStream,
    encode_continue, plan_list, validate_key,
};
use async_trait::async_trait;
use bytes::Bytes;

use crate::db::{Db, Dialect, Expect, From, WriteOutcome};
use crate::options::SqlStorageOptions;
use crate::watch::{self, Hub, Pending, WatchState};

/// The most keys one list query walks.
const MAX_SCAN: usize = 10_000;

/// What one compaction did, for logs and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactionReport {
    /// History before this revision is gone.
    pub revision: u64,
    /// Rows deleted by this call.
    pub rows_deleted: u64,
    /// Transactions used (each holds the write lock only briefly).
    pub batches: u64,
    /// Wall time of this call.
    pub elapsed: Duration,
    /// False when the time budget ran out first; the next compaction continues where this one stopped.
    pub complete: bool,
}

struct Inner {
    db: Db,
    hub: Arc<Hub>,
    opts: SqlStorageOptions,
    last_compaction: Mutex<Option<CompactionReport>>,
    /// Serializes this process's compactions (the work is idempotent across processes).
    compacting: tokio::sync::Mutex<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.hub.close();
    }
}

/// A store on SQLite or Postgres: a log of every write (the revision is the row id), compare-and-swap writes,
/// gap-free revisions in commit order, and watches fed by that log. Cheap to clone (clones share the store).
#[derive(Clone)]
pub struct SqlStorage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SqlStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStorage")
            .field("dialect", &self.dialect())
            .finish()
    }
}

impl SqlStorage {
    /// Opens `url` (`sqlite://PATH` or `postgres://...`) with default options. Must run inside a tokio runtime:
    /// it starts the store's watch tailer.
    pub async fn connect(url: &str) -> Result<SqlStorage, StorageError> {
        SqlStorage::open(&SqlStorageOptions::with_url(url)).await
    }

    /// Opens the store `opts` names (`opts.url` is required here; see [`SqlStorageOptions::url_or_default`]).
    pub async fn open(opts: &SqlStorageOptions) -> Result<SqlStorage, StorageError> {
        let url = opts
            .url
            .as_deref()
            .ok_or_else(|| StorageError::Invalid("no storage URL given".into()))?;
        let db = Db::connect(url, opts).await?;
        let meta = db.meta().await?;
        let hub = Hub::new(meta.revision);
        tokio::spawn(watch::run_tailer(
            hub.clone(),
            db.clone(),
            opts.watch_poll_interval,
        ));
        #[cfg(feature = "postgres")]
        if let Some(pool) = db.pg_pool() {
            tokio::spawn(watch::run_listener(hub.clone(), pool.clone()));
        }
        Ok(SqlStorage {
            inner: Arc::new(Inner {
                db,
                hub,
                opts: opts.clone(),
                last_compaction: Mutex::new(None),
                compacting: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The store behind an `Arc<dyn Storage>`.
    pub fn into_dyn(self) -> Arc<dyn Storage> {
        Arc::new(self)
    }

    /// Which database this store runs on.
    pub fn dialect(&self) -> Dialect {
        self.inner.db.dialect()
    }

    /// Rows in the log (live values, superseded values not yet compacted, tombstones): what compaction keeps
    /// small.
    pub async fn log_rows(&self) -> Result<u64, StorageError> {
        self.inner.db.row_count().await
    }

    /// The report of the latest compaction this process ran.
    pub fn last_compaction(&self) -> Option<CompactionReport> {
        self.inner
            .last_compaction
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Compacts to `revision` (as [`Storage::compact`]) and reports what it did. Reads before `revision` fail at
    /// once; rows are then deleted in batches of short transactions until done or the time budget
    /// (`--storage-compaction-timeout`) runs out, in which case the next call continues.
    pub async fn compact_with_report(
        &self,
        revision: u64,
    ) -> Result<CompactionReport, StorageError> {
        let db = &self.inner.db;
        let started = Instant::now();
        let meta = db.meta().await?;
        if revision > meta.revision {
            return Err(StorageError::TooLargeResourceVersion {
                requested: revision,
                current: meta.revision,
            });
        }
        if revision > meta.compacted {
            db.set_compacted(revision).await?;
        }
        let _guard = self.inner.compacting.lock().await;
        let meta = db.meta().await?;
        let target = meta.compacted;
        let batch = self.inner.opts.compaction_batch.max(1);
        let deadline = started + self.inner.opts.compaction_timeout;
        let mut report = CompactionReport {
            revision: target,
            complete: true,
            ..Default::default()
        };
        let mut cursor = meta.compact_cursor;
        while cursor < target {
            if Instant::now() >= deadline {
                report.complete = false;
                break;
            }
            let hi = cursor.saturating_add(batch).min(target);
            let deleted = db.compact_batch(cursor, hi).await?;
            report.rows_deleted += deleted;
            report.batches += 1;
            cursor = hi;
            if deleted == 0 && cursor < target {
                // Revisions without rows (a restore's bump may leave millions): on to the next row.
                cursor = match db.next_row(cursor).await? {
                    Some(next) => (next - 1).clamp(cursor, target),
                    None => target,
                };
            }
            // Let writers in between batches.
            tokio::task::yield_now().await;
        }
        if report.rows_deleted > 0 {
            db.reclaim().await?;
        }
        report.elapsed = started.elapsed();
        tracing::info!(
            revision = report.revision,
            rows_deleted = report.rows_deleted,
            batches = report.batches,
            elapsed_ms = report.elapsed.as_millis() as u64,
            complete = report.complete,
            "storage compaction"
        );
        *self
            .inner
            .last_compaction
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(report.clone());
        Ok(report)
    }

    async fn read_latest(&self, key: &str) -> Result<Option<StoredObject>, StorageError> {
        let (row, _) = self.inner.db.latest(key).await?;
        Ok(row.and_then(|r| r.live(key)))
    }

    async fn not_found(&self, key: &str) -> StorageError {
        StorageError::KeyNotFound {
            key: key.to_string(),
            revision: self.inner.db.meta().await.map_or(0, |m| m.revision),
        }
    }

    /// Appends a write and hands it to local watchers.
    async fn write(
        &self,
        key: &str,
        expect: Expect,
        value: Option<&Bytes>,
    ) -> Result<WriteOutcome, StorageError> {
        let out = self.inner.db.write(key, expect, value).await?;
        if let WriteOutcome::Written { revision, prev } = &out {
            self.inner.hub.publish_local(Change {
                revision: *revision,
                key: key.to_string(),
                value: value.cloned(),
                prev: prev.clone(),
                prev_revision: 0,
            });
        }
        Ok(out)
    }

    /// The live objects in `range` at `rev`, from `from` on; stops after `limit` selected ones (0: all) and
    /// tells whether another live object follows.
    async fn read_range(
        &self,
        range: &KeyRange,
        from: From,
        rev: u64,
        limit: usize,
        predicate: &apiserver_storage::Predicate,
    ) -> Result<Range, StorageError> {
        let db = &self.inner.db;
        let mut items = Vec::new();
        let mut evaluated = 0;
        let mut last_key: Option<String> = None;
        match range {
            KeyRange::Exact(k) => {
                let wanted = match &from {
                    From::Inclusive(s) => s <= k,
                    From::Exclusive(s) => s < k,
                };
                if wanted && let Some(obj) = db.at(k, rev).await?.and_then(|r| r.live(k)) {
                    evaluated += 1;
                    if predicate.matches(&obj.value)? {
                        items.push(obj);
                    }
                }
                Ok(Range {
                    items,
                    last_key: None,
                    has_more: false,
                    evaluated,
                })
            }
            KeyRange::Prefix(p) => {
                let end = prefix_end(p);
                let mut from = match from {
                    From::Inclusive(s) if s.as_str() < p.as_str() => From::Inclusive(p.clone()),
                    f => f,
                };
                let mut batch = if limit > 0 { limit + 1 } else { 1000 }.min(MAX_SCAN);
                loop {
                    let rows = db.scan(&from, &end, rev, batch).await?;
                    let n = rows.len();
                    for (name, row) in rows {
                        from = From::Exclusive(name.clone());
                        let Some(obj) = row.and_then(|r| r.live(&name)) else {
                            continue;
                        };
                        if limit > 0 && items.len() >= limit {
                            return Ok(Range {
                                items,
                                last_key,
                                has_more: true,
                                evaluated,
                            });
                        }
                        last_key = Some(name);
                        evaluated += 1;
                        if predicate.matches(&obj.value)? {
                            items.push(obj);
                        }
                    }
                    if n < batch {
                        return Ok(Range {
                            items,
                            last_key,
                            has_more: false,
                            evaluated,
                        });
                    }
                    if !predicate.is_everything() {
                        batch = (batch * 2).min(MAX_SCAN);
                    }
                }
            }
        }
    }

    fn list_expired(plan: &apiserver_storage::ListPlan) -> StorageError {
        if plan.continuing {
            let start = plan.start_key.as_deref().unwrap_or(plan.range.as_str());
            let token = encode_continue(start, plan.range.as_str(), -1).ok();
            return StorageError::continue_expired(token);
        }
        StorageError::list_expired()
    }
}

/// What [`SqlStorage::read_range`] read: the objects selected, the last key read, whether more follow, and how many
/// objects were tested against the predicate.
struct Range {
    items: Vec<StoredObject>,
    last_key: Option<String>,
    has_more: bool,
    evaluated: u64,
}

/// The first string after every string that starts with `prefix`.
fn prefix_end(prefix: &str) -> String {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(c) = chars.pop() {
        let next = (c as u32 + 1..=char::MAX as u32).find_map(char::from_u32);
        if let Some(n) = next {
            chars.push(n);
            return chars.into_iter().collect();
        }
    }
    // Only reachable for a prefix of char::MAX characters; nothing sorts after it.
    String::from(char::MAX)
}

/// The `[start, end)` bounds of a key range.
fn bounds(range: &KeyRange) -> (String, String) {
    match range {
        KeyRange::Exact(k) => (k.clone(), format!("{k}\u{1}")),
        KeyRange::Prefix(p) => (p.clone(), prefix_end(p)),
    }
}

/// The store's conditional writes for the optimistic loop: each write is one statement (or transaction) that
/// checks the expected state of the key and reports what the key holds when it does not match.
struct Occ<'a>(&'a SqlStorage);

impl Occ<'_> {
    /// Stores `value` if the key is as `expect` says.
    async fn put(&self, key: &str, expect: Expect, value: Bytes) -> Result<Outcome, StorageError> {
        Ok(match self.0.write(key, expect, Some(&value)).await? {
            WriteOutcome::Written { revision, .. } => Outcome::Written(StoredObject {
                key: key.to_string(),
                value,
                revision,
            }),
            WriteOutcome::Conflict(live) => Outcome::Conflict(live),
        })
    }
}

#[async_trait]
impl OptimisticStore for Occ<'_> {
    async fn latest(&self, key: &str) -> Result<Latest, StorageError> {
        Ok(Latest {
            object: self.0.read_latest(key).await?,
            revision: None,
        })
    }

    async fn create_if_absent(&self, key: &str, value: Bytes) -> Result<Outcome, StorageError> {
        self.put(key, Expect::Absent, value).await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: &StoredObject,
        value: Bytes,
    ) -> Result<Outcome, StorageError> {
        self.put(key, Expect::Revision(expected.revision), value)
            .await
    }

    async fn compare_and_delete(
        &self,
        key: &str,
        expected: &StoredObject,
    ) -> Result<Outcome, StorageError> {
        let expect = Expect::Revision(expected.revision);
        Ok(match self.0.write(key, expect, None).await? {
            WriteOutcome::Written { revision, prev } => Outcome::Written(StoredObject {
                key: key.to_string(),
                value: prev.unwrap_or_else(|| expected.value.clone()),
                revision,
            }),
            WriteOutcome::Conflict(live) => Outcome::Conflict(live),
        })
    }

    async fn key_not_found(&self, key: &str, _seen: Option<u64>) -> StorageError {
        self.0.not_found(key).await
    }
}

#[async_trait]
impl Storage for SqlStorage {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        match self.write(key, Expect::Absent, Some(&value)).await? {
            WriteOutcome::Written { revision, .. } => Ok(StoredObject {
                key: key.to_string(),
                value,
                revision,
            }),
            WriteOutcome::Conflict(cur) => Err(StorageError::KeyExists {
                key: key.to_string(),
                revision: cur.map_or(0, |c| c.revision),
            }),
        }
    }

    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        let (row, current) = self.inner.db.latest(key).await?;
        if let Some(min) = opts.resource_version
            && min > current
        {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min,
                current,
            });
        }
        row.and_then(|r| r.live(key))
            .ok_or_else(|| StorageError::KeyNotFound {
                key: key.to_string(),
                revision: current,
            })
    }

    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let plan = plan_list(key, opts)?;
        let db = &self.inner.db;
        let meta = db.meta().await?;
        if let Some(min) = plan.min_revision
            && min > meta.revision
        {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min,
                current: meta.revision,
            });
        }
        let rev = plan.read_revision.unwrap_or(meta.revision);
        if rev > meta.revision {
            return Err(StorageError::TooLargeResourceVersion {
                requested: rev,
                current: meta.revision,
            });
        }
        if rev < meta.compacted {
            return Err(Self::list_expired(&plan));
        }
        let from = From::at(plan.start_key.as_deref().unwrap_or(plan.range.as_str()));
        let limit = usize::try_from(opts.limit).unwrap_or(usize::MAX);
        let Range {
            items,
            last_key,
            has_more,
            evaluated,
        } = self
            .read_range(&plan.range, from, rev, limit, &opts.predicate)
            .await?;
        // Compaction marks the revision before deleting rows: if it passed `rev` meanwhile, rows we needed may
        // be gone.
        if rev < db.meta().await?.compacted {
            return Err(Self::list_expired(&plan));
        }
        let mut result = ListResult {
            items,
            revision: rev,
            continue_token: None,
            remaining_item_count: None,
            evaluated,
        };
        if has_more && let Some(last) = last_key {
            result.continue_token = Some(encode_continue(
                &format!("{last}\0"),
                plan.range.as_str(),
                i64::try_from(rev).unwrap_or(i64::MAX),
            )?);
            if opts.predicate.is_everything() {
                let (_, end) = bounds(&plan.range);
                let (n, _) = db.count(&From::Exclusive(last), &end, rev).await?;
                result.remaining_item_count = Some(i64::try_from(n).unwrap_or(i64::MAX));
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
        let db = &self.inner.db;
        let rv = opts.resource_version.unwrap_or(0);
        let initial_events = opts.send_initial_events.unwrap_or(rv == 0);
        let meta = db.meta().await?;
        // Register before reading history so that nothing falls between history and live events.
        let (live_after, rx, overflowed) = self.inner.hub.register(
            range.clone(),
            opts.progress_notify,
            self.inner.opts.watch_buffer,
        );
        let mut pending = VecDeque::new();
        let start_after;
        if initial_events {
            let at = if rv == 0 { meta.revision } else { rv };
            if at > meta.revision {
                return Err(StorageError::TooLargeResourceVersion {
                    requested: at,
                    current: meta.revision,
                });
            }
            if at < meta.compacted {
                return Err(StorageError::watch_expired());
            }
            let (start, _) = bounds(&range);
            let Range { items, .. } = self
                .read_range(
                    &range,
                    From::Inclusive(start),
                    at,
                    0,
                    &apiserver_storage::Predicate::everything(),
                )
                .await?;
            pending.extend(items.into_iter().map(Pending::Initial));
            if opts.send_initial_events == Some(true) && opts.allow_watch_bookmarks {
                pending.push_back(Pending::Ready(WatchEvent::bookmark(at, true)));
            }
            start_after = at;
        } else if rv == 0 {
            start_after = meta.revision;
        } else {
            if rv < meta.compacted {
                return Err(StorageError::watch_expired());
            }
            start_after = rv;
        }
        if start_after < live_after {
            let (start, end) = bounds(&range);
            let rows = db.log_range(start_after, live_after, &start, &end).await?;
            pending.extend(rows.into_iter().map(|r| Pending::Entry(Arc::new(r))));
        }
        if (initial_events || start_after < live_after) && start_after < db.meta().await?.compacted
        {
            return Err(StorageError::watch_expired());
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
        Ok(self.inner.db.meta().await?.revision)
    }

    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        self.compact_with_report(revision).await.map(|_| ())
    }

    async fn compact_revision(&self) -> Result<u64, StorageError> {
        Ok(self.inner.db.meta().await?.compacted)
    }

    async fn bump_revision(&self, revision: u64) -> Result<bool, StorageError> {
        self.inner.db.bump_revision(revision).await?;
        // The tailer moves its watchers past the revisions no row has.
        self.inner.hub.hint(None);
        Ok(true)
    }

    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        validate_key(prefix)?;
        let db = &self.inner.db;
        let rev = db.meta().await?.revision;
        let (count, bytes) = db
            .count(
                &From::Inclusive(prefix.to_string()),
                &prefix_end(prefix),
                rev,
            )
            .await?;
        Ok(Stats {
            object_count: count,
            estimated_average_object_size_bytes: bytes.checked_div(count).unwrap_or(0),
        })
    }

    async fn readiness(&self) -> Result<(), StorageError> {
        self.inner.db.ping().await
    }

    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        self.inner.hub.request_progress();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_string() {
        assert_eq!(prefix_end("/a/"), "/a0");
        assert_eq!(prefix_end("/a\u{10FFFF}"), "/b");
        assert_eq!(prefix_end("/\u{D7FF}"), "/\u{E000}");
    }
}
