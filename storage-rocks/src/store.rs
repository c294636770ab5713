//! [`RocksStorage`]: opening the database and the [`Storage`] implementation.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLockReadGuard};
use std::thread::JoinHandle;

use apiserver_storage::optimistic::{self, Latest, OptimisticStore, Outcome};
use apiserver_storage::{
    Change, GetOptions, ListOptions, ListResult, Preconditions, Stats, Storage, StorageError,
    StoredObject, TryUpdate, ValidateDeletion, WatchOptions, WatchStream, validate_key,
};
use async_trait::async_trait;
use bytes::Bytes;
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DB, DBCompressionType, Options,
    WriteOptions,
};
use tokio::sync::oneshot;

use crate::RocksOptions;
use crate::compaction;
use crate::encoding::{
    CF_HISTORY, CF_LATEST, CF_LOG, FORMAT_VERSION, META_COMPACTED, META_FORMAT, META_REVISION,
    parse_latest_value,
};
use crate::follower::{self, Secondary};
use crate::scan::{self, meta};
use crate::ticker::Ticker;
use crate::watch::{self, Watchers};
use crate::writer::{self, Op, Request};

/// The size at which a column family's memtable is flushed (also how much of the write-ahead log RocksDB
/// preallocates, and the free space it waits for before resuming after a full disk).
const MEMTABLE_BYTES: usize = 16 * 1024 * 1024;
/// All memtables together, across column families.
const MEMTABLE_BUDGET_BYTES: usize = 48 * 1024 * 1024;
/// The block cache, shared by the column families: it serves point reads (the writer's compare-and-swap, reads of
/// history); scans do not fill it, and the watch cache answers most reads above the store.
const BLOCK_CACHE_BYTES: usize = 32 * 1024 * 1024;

/// Maps a RocksDB error.
pub(crate) fn db_err(e: rocksdb::Error) -> StorageError {
    StorageError::Internal(format!("rocksdb: {e}"))
}

/// State shared by the store handle, the writer thread, the compactor and blocking reads.
pub(crate) struct Shared {
    pub(crate) db: DB,
    /// The last revision that is durable and visible to watchers.
    pub(crate) committed: AtomicU64,
    /// The latest compacted revision.
    pub(crate) compacted: AtomicU64,
    watchers: Mutex<Watchers>,
    /// Set while writes fail (the last write failed and none has succeeded since): readiness reports it.
    failure: Mutex<Option<StorageError>>,
    /// Serializes compactions.
    pub(crate) compaction_lock: Mutex<()>,
    pub(crate) watch_buffer: usize,
    /// Set when another process owns the database and this one follows it.
    pub(crate) secondary: Option<Secondary>,
}

impl Shared {
    fn new(
        db: DB,
        revision: u64,
        compacted: u64,
        options: &RocksOptions,
        secondary: Option<Secondary>,
    ) -> Self {
        Shared {
            db,
            committed: AtomicU64::new(revision),
            compacted: AtomicU64::new(compacted),
            watchers: Mutex::new(Watchers::default()),
            failure: Mutex::new(None),
            compaction_lock: Mutex::new(()),
            watch_buffer: options.watch_buffer.max(1),
            secondary,
        }
    }

    pub(crate) fn cf(&self, name: &str) -> Result<&ColumnFamily, StorageError> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| StorageError::Internal(format!("rocksdb: column family {name} missing")))
    }

    pub(crate) fn lock_watchers(&self) -> MutexGuard<'_, Watchers> {
        // Fan-out never leaves the list half-updated, so a poisoned lock is still usable.
        self.watchers.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps a secondary instance from catching up until dropped; `None` for the owner, whose reads take RocksDB
    /// snapshots instead.
    pub(crate) fn frozen(&self) -> Option<RwLockReadGuard<'_, ()>> {
        self.secondary.as_ref().map(Secondary::freeze)
    }

    /// The current value of `key`, read without a snapshot.
    pub(crate) fn read_latest(&self, key: &str) -> Result<Option<StoredObject>, StorageError> {
        let _frozen = self.frozen();
        let raw = self
            .db
            .get_pinned_cf(self.cf(CF_LATEST)?, key.as_bytes())
            .map_err(db_err)?;
        let Some(raw) = raw else {
            return Ok(None);
        };
        let (revision, value) = parse_latest_value(key, &raw)?;
        Ok(Some(StoredObject {
            key: key.to_string(),
            value: Bytes::copy_from_slice(value),
            revision,
        }))
    }

    /// Makes a committed batch visible: advances the revision and tells the watchers, atomically for new watches.
    pub(crate) fn publish(&self, last: u64, entries: &[Arc<Change>]) {
        let mut watchers = self.lock_watchers();
        self.committed.store(last, Ordering::Release);
        watchers.broadcast(entries);
    }

    pub(crate) fn failure(&self) -> Option<StorageError> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records that writes fail, with the error the failed write's callers get.
    pub(crate) fn fail(&self, message: String) -> StorageError {
        let err = StorageError::Internal(message);
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(err.clone());
        err
    }

    /// Records that a write succeeded: writes work again.
    pub(crate) fn recovered(&self) {
        if self
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
        {
            tracing::info!("rocksdb writes succeed again");
        }
    }
}

/// Owns the background threads; stopping them on drop releases the database (its lock file included), so the
/// same directory can be opened again once every clone of the store is gone.
struct Inner {
    shared: Arc<Shared>,
    writer_tx: Option<std::sync::mpsc::Sender<Request>>,
    writer: Option<JoinHandle<()>>,
    /// The compactor of an owned database, the follower of another process's.
    ticker: Option<Ticker>,
    path: PathBuf,
    // Declared last: removed after the database is closed.
    _temp_dir: Option<tempfile::TempDir>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        drop(self.writer_tx.take());
        if let Some(h) = self.writer.take() {
            let _ = h.join();
        }
        if let Some(t) = self.ticker.take() {
            t.stop();
        }
    }
}

/// The embedded RocksDB backend: MVCC history and a revision-ordered change log on disk, writes serialized by one
/// writer thread with group commit, reads from snapshots, watches fed in-process. Cheap to clone (clones share the
/// database); one process may open a directory at a time.
#[derive(Clone)]
pub struct RocksStorage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RocksStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocksStorage")
            .field("path", &self.inner.path)
            .field(
                "revision",
                &self.inner.shared.committed.load(Ordering::Relaxed),
            )
            .field(
                "compacted",
                &self.inner.shared.compacted.load(Ordering::Relaxed),
            )
            .finish()
    }
}

fn open_error(path: &Path, e: impl std::fmt::Display) -> StorageError {
    StorageError::Unreachable {
        key: String::new(),
        message: format!("cannot open RocksDB at {}: {e}", path.display()),
    }
}

impl RocksStorage {
    /// Opens (creating if needed) the database in directory `path`. Fails if another process has it open.
    pub fn open(path: impl AsRef<Path>, options: &RocksOptions) -> Result<Self, StorageError> {
        Self::open_inner(path.as_ref(), options, None)
    }

    /// An empty store in a new temporary directory that is removed when the last clone is dropped: for tests of
    /// the layers above on the real backend.
    pub fn open_temporary(options: &RocksOptions) -> Result<Self, StorageError> {
        let dir = tempfile::Builder::new()
            .prefix("apiserver-rocks-")
            .tempdir()
            .map_err(|e| open_error(Path::new("<temporary directory>"), e))?;
        let path = dir.path().to_path_buf();
        Self::open_inner(&path, options, Some(dir))
    }

    /// Follows the database in directory `path`, which another process may own and write (a RocksDB secondary
    /// instance; nothing is written to `path`): reads, lists and watches see the owner's writes within 100 ms,
    /// and asking for the current revision catches up first. Writes and compaction are refused. This is how a
    /// backup or a migration reads a store while its server runs.
    pub fn open_secondary(
        path: impl AsRef<Path>,
        options: &RocksOptions,
    ) -> Result<Self, StorageError> {
        Self::follow(path.as_ref(), options, Some(follower::POLL))
    }

    /// [`open_secondary`](Self::open_secondary), catching up every `poll` (with `None`, only when asked for the
    /// current revision).
    pub(crate) fn follow(
        path: &Path,
        options: &RocksOptions,
        poll: Option<std::time::Duration>,
    ) -> Result<Self, StorageError> {
        if !path.join("CURRENT").is_file() {
            return Err(open_error(path, "no database there"));
        }
        // The secondary instance's own files (its info log): RocksDB wants a directory apart from the owner's.
        let own = tempfile::Builder::new()
            .prefix("apiserver-rocks-secondary-")
            .tempdir()
            .map_err(|e| open_error(path, e))?;
        let mut db_opts = Options::default();
        // Table files stay open, so they can still be read after the owner's compaction deletes them.
        db_opts.set_max_open_files(-1);
        let db =
            DB::open_cf_as_secondary(&db_opts, path, own.path(), [CF_LATEST, CF_HISTORY, CF_LOG])
                .map_err(|e| open_error(path, e))?;
        let format = meta(db.get(META_FORMAT), "format")?;
        let revision = meta(db.get(META_REVISION), "revision")?;
        let compacted = meta(db.get(META_COMPACTED), "compacted")?;
        if format != FORMAT_VERSION && revision != 0 {
            return Err(open_error(
                path,
                format!("unknown layout version {format} (this build reads {FORMAT_VERSION})"),
            ));
        }
        let shared = Arc::new(Shared::new(
            db,
            revision,
            compacted,
            options,
            Some(Secondary::default()),
        ));
        let following = shared.clone();
        let ticker = poll
            .map(|poll| {
                Ticker::spawn("rocksdb-follower", poll, move || {
                    if let Some(secondary) = &following.secondary
                        && let Err(e) = follower::catch_up(&following, secondary)
                    {
                        tracing::warn!(error = %e, "catching up with the RocksDB database's owner failed");
                    }
                })
            })
            .transpose()
            .map_err(|e| open_error(path, e))?;
        Ok(RocksStorage {
            inner: Arc::new(Inner {
                shared,
                writer_tx: None,
                writer: None,
                ticker,
                path: path.to_path_buf(),
                _temp_dir: Some(own),
            }),
        })
    }

    fn open_inner(
        path: &Path,
        options: &RocksOptions,
        temp_dir: Option<tempfile::TempDir>,
    ) -> Result<Self, StorageError> {
        let mut db_opts = Options::default();
        db_opts.create_if_missing(true);
        db_opts.create_missing_column_families(true);
        db_opts.set_max_background_jobs(2);
        db_opts.set_compression_type(DBCompressionType::Lz4);
        // Memtables are resident memory: RocksDB's defaults (64 MiB per column family, two of them each before
        // writes stall) let three column families hold up to 384 MiB, all of it back after a restart replays the
        // write-ahead log. One budget for all, flushed sooner, keeps the server's memory about the watch cache.
        db_opts.set_write_buffer_size(MEMTABLE_BYTES);
        db_opts.set_db_write_buffer_size(MEMTABLE_BUDGET_BYTES);
        // One block cache for every column family (each table factory left alone makes its own of 32 MiB).
        let block_cache = Cache::new_lru_cache(BLOCK_CACHE_BYTES);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&block_cache);
        db_opts.set_block_based_table_factory(&table);
        let mut latest_table = BlockBasedOptions::default();
        latest_table.set_block_cache(&block_cache);
        latest_table.set_bloom_filter(10.0, false);
        let mut latest_opts = db_opts.clone();
        latest_opts.set_block_based_table_factory(&latest_table);
        // Compaction deletes many history and log entries: have RocksDB rewrite files dense with deletions soon.
        let mut churn_opts = db_opts.clone();
        churn_opts.add_compact_on_deletion_collector_factory(1024, 512, 0.0);
        let cfs = vec![
            ColumnFamilyDescriptor::new(CF_LATEST, latest_opts),
            ColumnFamilyDescriptor::new(CF_HISTORY, churn_opts.clone()),
            ColumnFamilyDescriptor::new(CF_LOG, churn_opts),
        ];
        let db = DB::open_cf_descriptors(&db_opts, path, cfs).map_err(|e| {
            if e.as_ref().contains("LOCK:") {
                open_error(
                    path,
                    format!(
                        "{e} (the database is already open, in another process or in this one)"
                    ),
                )
            } else {
                open_error(path, e)
            }
        })?;

        let format = meta(db.get(META_FORMAT), "format")?;
        let revision = meta(db.get(META_REVISION), "revision")?;
        match format {
            0 if revision == 0 => db
                .put(META_FORMAT, FORMAT_VERSION.to_be_bytes())
                .map_err(|e| open_error(path, e))?,
            FORMAT_VERSION => {}
            other => {
                return Err(open_error(
                    path,
                    format!("unknown layout version {other} (this build reads {FORMAT_VERSION})"),
                ));
            }
        }
        let compacted = meta(db.get(META_COMPACTED), "compacted")?;
        let shared = Arc::new(Shared::new(db, revision, compacted, options, None));
        let mut write_opts = WriteOptions::default();
        write_opts.set_sync(!options.unsafe_no_sync);
        let (writer_tx, writer) =
            writer::spawn(shared.clone(), write_opts).map_err(|e| open_error(path, e))?;
        let mut inner = Inner {
            shared: shared.clone(),
            writer_tx: Some(writer_tx),
            writer: Some(writer),
            ticker: None,
            path: path.to_path_buf(),
            _temp_dir: temp_dir,
        };
        if !options.compaction_interval.is_zero() {
            inner.ticker = Some(
                compaction::spawn(shared, options.compaction_interval)
                    .map_err(|e| open_error(path, e))?,
            );
        }
        Ok(RocksStorage {
            inner: Arc::new(inner),
        })
    }

    /// The store behind an `Arc<dyn Storage>`.
    pub fn into_dyn(self) -> Arc<dyn Storage> {
        Arc::new(self)
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.inner.shared
    }

    /// Queues a conditional write for the writer thread and waits for its result.
    async fn submit(&self, key: &str, op: Op) -> Result<Outcome, StorageError> {
        let (reply, result) = oneshot::channel();
        let stopped = || {
            StorageError::Internal(if self.shared().secondary.is_some() {
                format!(
                    "the RocksDB database at {} is only read here: the process that owns it writes",
                    self.inner.path.display()
                )
            } else {
                "rocksdb writer stopped".into()
            })
        };
        self.inner
            .writer_tx
            .as_ref()
            .ok_or_else(stopped)?
            .send(Request {
                key: key.to_string(),
                op,
                reply,
            })
            .map_err(|_| stopped())?;
        result.await.map_err(|_| stopped())?
    }

    /// Runs a blocking read on tokio's blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Shared) -> Result<T, StorageError> + Send + 'static,
    ) -> Result<T, StorageError> {
        let shared = self.shared().clone();
        tokio::task::spawn_blocking(move || f(&shared))
            .await
            .map_err(|e| StorageError::Internal(format!("rocksdb read task failed: {e}")))?
    }

    async fn read_latest(&self, key: &str) -> Result<Option<StoredObject>, StorageError> {
        let key = key.to_string();
        self.blocking(move |s| s.read_latest(&key)).await
    }

    fn not_found(&self, key: &str) -> StorageError {
        StorageError::KeyNotFound {
            key: key.to_string(),
            revision: self.shared().committed.load(Ordering::Acquire),
        }
    }
}

/// The store's conditional writes for the optimistic loop: each is decided by the writer thread against the
/// key's current state (group commit included), which also compares a swap's bytes with the stored ones.
struct Occ<'a>(&'a RocksStorage);

#[async_trait]
impl OptimisticStore for Occ<'_> {
    async fn latest(&self, key: &str) -> Result<Latest, StorageError> {
        Ok(Latest {
            object: self.0.read_latest(key).await?,
            revision: None,
        })
    }

    async fn create_if_absent(&self, key: &str, value: Bytes) -> Result<Outcome, StorageError> {
        let op = Op::Put {
            value,
            expected: None,
        };
        self.0.submit(key, op).await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: &StoredObject,
        value: Bytes,
    ) -> Result<Outcome, StorageError> {
        let op = Op::Put {
            value,
            expected: Some(expected.revision),
        };
        self.0.submit(key, op).await
    }

    async fn compare_and_delete(
        &self,
        key: &str,
        expected: &StoredObject,
    ) -> Result<Outcome, StorageError> {
        let op = Op::Delete {
            expected: expected.revision,
        };
        self.0.submit(key, op).await
    }

    async fn key_not_found(&self, key: &str, _seen: Option<u64>) -> StorageError {
        self.0.not_found(key)
    }

    fn swap_compares_values(&self) -> bool {
        true
    }
}

#[async_trait]
impl Storage for RocksStorage {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        match self.submit(key, Op::Create(value)).await? {
            Outcome::Written(obj) => Ok(obj),
            Outcome::Unchanged(_) | Outcome::Conflict(_) => Err(StorageError::KeyExists {
                key: key.to_string(),
                revision: 0,
            }),
        }
    }

    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        let current = self.shared().committed.load(Ordering::Acquire);
        if let Some(min) = opts.resource_version
            && min > current
        {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min,
                current,
            });
        }
        self.read_latest(key)
            .await?
            .ok_or_else(|| self.not_found(key))
    }

    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let key = key.to_string();
        let opts = opts.clone();
        self.blocking(move |s| scan::list(s, &key, &opts)).await
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
        let key = key.to_string();
        let opts = opts.clone();
        self.blocking(move |s| watch::start(s, &key, &opts)).await
    }

    async fn current_revision(&self) -> Result<u64, StorageError> {
        if self.shared().secondary.is_some() {
            return self
                .blocking(|s| match &s.secondary {
                    Some(secondary) => follower::catch_up(s, secondary),
                    None => Ok(s.committed.load(Ordering::Acquire)),
                })
                .await;
        }
        Ok(self.shared().committed.load(Ordering::Acquire))
    }

    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        if self.shared().secondary.is_some() {
            return Err(StorageError::Internal(format!(
                "the RocksDB database at {} is compacted by the process that owns it",
                self.inner.path.display()
            )));
        }
        self.blocking(move |s| compaction::compact(s, revision))
            .await
    }

    async fn compact_revision(&self) -> Result<u64, StorageError> {
        Ok(self.shared().compacted.load(Ordering::Acquire))
    }

    async fn bump_revision(&self, revision: u64) -> Result<bool, StorageError> {
        // Through the writer, so that it is ordered with the writes and durable as they are.
        self.submit("", Op::Bump(revision)).await?;
        Ok(true)
    }

    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        let prefix = prefix.to_string();
        self.blocking(move |s| scan::stats(s, &prefix)).await
    }

    async fn readiness(&self) -> Result<(), StorageError> {
        match self.shared().failure() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        let shared = self.shared();
        let mut watchers = shared.lock_watchers();
        let rev = shared.committed.load(Ordering::Acquire);
        watchers.progress(rev);
        Ok(())
    }
}
