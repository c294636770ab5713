//! Reads at one revision: every list, stats call and watch start reads from one RocksDB snapshot, whose own
//! `revision` and `compacted` metadata say what it can serve. Reads never take the write path's lock.

use apiserver_storage::{
    KeyRange, ListOptions, ListResult, Stats, StorageError, StoredObject, encode_continue,
    plan_list,
};
use bytes::Bytes;
use rocksdb::{
    ColumnFamily, DB, DBIteratorWithThreadMode, Direction, IteratorMode, ReadOptions,
    SnapshotWithThreadMode,
};

use crate::encoding::{
    CF_HISTORY, CF_LATEST, META_COMPACTED, META_REVISION, decode_u64, history_key,
    parse_history_value, parse_latest_value, prefix_end, split_history_key,
};
use crate::store::{Shared, db_err};

/// A consistent view of the database with the revision it is at.
pub(crate) struct Snapshot<'a> {
    pub(crate) shared: &'a Shared,
    view: View<'a>,
    /// The last revision the snapshot contains.
    pub(crate) revision: u64,
    /// The compacted revision as of the snapshot: it can serve reads at or after it.
    pub(crate) compacted: u64,
}

impl<'a> Snapshot<'a> {
    pub(crate) fn new(shared: &'a Shared) -> Result<Self, StorageError> {
        let view = match shared.frozen() {
            Some(held) => View::Frozen { _held: held },
            None => View::Snapshot(shared.db.snapshot()),
        };
        let mut snapshot = Snapshot {
            shared,
            view,
            revision: 0,
            compacted: 0,
        };
        snapshot.revision = meta(snapshot.get(META_REVISION), "revision")?;
        snapshot.compacted = meta(snapshot.get(META_COMPACTED), "compacted")?;
        Ok(snapshot)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, rocksdb::Error> {
        match &self.view {
            View::Snapshot(snap) => snap.get(key),
            View::Frozen { .. } => self.shared.db.get(key),
        }
    }

    pub(crate) fn get_cf(
        &self,
        cf: &ColumnFamily,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, rocksdb::Error> {
        match &self.view {
            View::Snapshot(snap) => snap.get_cf(cf, key),
            View::Frozen { .. } => self.shared.db.get_cf(cf, key),
        }
    }

    pub(crate) fn iterator_cf_opt(
        &self,
        cf: &ColumnFamily,
        options: ReadOptions,
        mode: IteratorMode,
    ) -> DBIteratorWithThreadMode<'_, DB> {
        match &self.view {
            View::Snapshot(snap) => snap.iterator_cf_opt(cf, options, mode),
            View::Frozen { .. } => self.shared.db.iterator_cf_opt(cf, options, mode),
        }
    }
}

/// What keeps a [`Snapshot`] still.
enum View<'a> {
    /// A RocksDB snapshot, in the process that owns the database.
    Snapshot(SnapshotWithThreadMode<'a, DB>),
    /// In a secondary instance (which has no RocksDB snapshots): the database changes only when it catches up
    /// with its owner, which waits for this guard.
    Frozen {
        _held: std::sync::RwLockReadGuard<'a, ()>,
    },
}

/// A metadata value (0 when absent).
pub(crate) fn meta(
    raw: Result<Option<Vec<u8>>, rocksdb::Error>,
    what: &str,
) -> Result<u64, StorageError> {
    match raw.map_err(db_err)? {
        Some(v) => decode_u64(what, &v),
        None => Ok(0),
    }
}

/// The value `key` got at exactly `revision` (`None` for a deletion or a compacted version).
pub(crate) fn read_history(
    snapshot: &Snapshot<'_>,
    history: &ColumnFamily,
    key: &str,
    revision: u64,
) -> Result<Option<Bytes>, StorageError> {
    let raw = snapshot
        .get_cf(history, &history_key(key, revision))
        .map_err(db_err)?;
    match raw {
        Some(raw) => Ok(parse_history_value(key, &raw)?.map(Bytes::copy_from_slice)),
        None => Ok(None),
    }
}

/// The upper bound of `range` in the `latest` column family (keys sort as their bytes).
fn latest_end(range: &KeyRange) -> Option<Vec<u8>> {
    match range {
        KeyRange::Exact(k) => {
            let mut end = k.as_bytes().to_vec();
            end.push(0);
            Some(end)
        }
        KeyRange::Prefix(p) => prefix_end(p.as_bytes()),
    }
}

/// The upper bound of `range` in the `history` column family (`<key>\0<rev>`).
fn history_end(range: &KeyRange) -> Option<Vec<u8>> {
    match range {
        KeyRange::Exact(k) => {
            let mut end = k.as_bytes().to_vec();
            end.push(1);
            Some(end)
        }
        KeyRange::Prefix(p) => prefix_end(p.as_bytes()),
    }
}

/// Options of a range scan, which ends before `end`. A scan reads many blocks once (a list, the watch cache's fill
/// at startup): keeping them in the block cache would evict the blocks point reads use, and a scan of the whole
/// store would leave the block cache full (up to its 32 MiB) for data the watch cache already holds.
fn bounded(end: Option<Vec<u8>>) -> ReadOptions {
    let mut ro = ReadOptions::default();
    ro.fill_cache(false);
    if let Some(end) = end {
        ro.set_iterate_upper_bound(end);
    }
    ro
}

/// Calls `visit` with every object of `range` from `start` on, in key order, as of revision `at` (at most the
/// snapshot's revision, at least its compacted one), until `visit` returns false.
pub(crate) fn scan_at(
    snapshot: &Snapshot<'_>,
    range: &KeyRange,
    start: &str,
    at: u64,
    visit: impl FnMut(StoredObject) -> Result<bool, StorageError>,
) -> Result<(), StorageError> {
    if at >= snapshot.revision {
        scan_latest(snapshot, range, start, visit)
    } else {
        scan_history(snapshot, range, start, at, visit)
    }
}

/// [`scan_at`] at the snapshot's own revision: the `latest` column family.
fn scan_latest(
    snapshot: &Snapshot<'_>,
    range: &KeyRange,
    start: &str,
    mut visit: impl FnMut(StoredObject) -> Result<bool, StorageError>,
) -> Result<(), StorageError> {
    let cf = snapshot.shared.cf(CF_LATEST)?;
    let iter = snapshot.iterator_cf_opt(
        cf,
        bounded(latest_end(range)),
        IteratorMode::From(start.as_bytes(), Direction::Forward),
    );
    for item in iter {
        let (k, v) = item.map_err(db_err)?;
        let key = std::str::from_utf8(&k).map_err(|_| StorageError::CorruptObj {
            key: String::from_utf8_lossy(&k).into_owned(),
            message: "key is not UTF-8".into(),
        })?;
        if key < start || !range.contains(key) {
            continue;
        }
        let (revision, value) = parse_latest_value(key, &v)?;
        let obj = StoredObject {
            key: key.to_string(),
            value: Bytes::copy_from_slice(value),
            revision,
        };
        if !visit(obj)? {
            break;
        }
    }
    Ok(())
}

/// [`scan_at`] at an older revision: for each key, the newest version at or before `at` in `history`.
fn scan_history(
    snapshot: &Snapshot<'_>,
    range: &KeyRange,
    start: &str,
    at: u64,
    mut visit: impl FnMut(StoredObject) -> Result<bool, StorageError>,
) -> Result<(), StorageError> {
    let cf = snapshot.shared.cf(CF_HISTORY)?;
    let iter = snapshot.iterator_cf_opt(
        cf,
        bounded(history_end(range)),
        IteratorMode::From(start.as_bytes(), Direction::Forward),
    );
    let mut current: Option<Candidate> = None;
    for item in iter {
        let (k, v) = item.map_err(db_err)?;
        let (key, revision) = split_history_key(&k)?;
        if key < start || !range.contains(key) {
            continue;
        }
        if current.as_ref().is_none_or(|c| c.key != key) {
            if let Some(done) = current.take()
                && !done.emit(&mut visit)?
            {
                return Ok(());
            }
            current = Some(Candidate {
                key: key.to_string(),
                newest: None,
            });
        }
        if revision <= at
            && let Some(c) = current.as_mut()
        {
            c.newest = Some((revision, v));
        }
    }
    if let Some(done) = current {
        done.emit(&mut visit)?;
    }
    Ok(())
}

/// A key met in a history scan and its newest version at or before the scan's revision.
struct Candidate {
    key: String,
    newest: Option<(u64, Box<[u8]>)>,
}

impl Candidate {
    /// Visits the version if it is a value (not a deletion); returns whether to go on.
    fn emit(
        self,
        visit: &mut impl FnMut(StoredObject) -> Result<bool, StorageError>,
    ) -> Result<bool, StorageError> {
        let Some((revision, raw)) = self.newest else {
            return Ok(true);
        };
        match parse_history_value(&self.key, &raw)? {
            Some(value) => visit(StoredObject {
                value: Bytes::copy_from_slice(value),
                key: self.key,
                revision,
            }),
            None => Ok(true),
        }
    }
}

/// A list (blocking): upstream's rules from [`plan_list`], read from one snapshot.
pub(crate) fn list(
    shared: &Shared,
    key: &str,
    opts: &ListOptions,
) -> Result<ListResult, StorageError> {
    let plan = plan_list(key, opts)?;
    let snapshot = Snapshot::new(shared)?;
    let current = snapshot.revision;
    if let Some(min) = plan.min_revision
        && min > current
    {
        return Err(StorageError::TooLargeResourceVersion {
            requested: min,
            current,
        });
    }
    let rev = plan.read_revision.unwrap_or(current);
    if rev > current {
        return Err(StorageError::TooLargeResourceVersion {
            requested: rev,
            current,
        });
    }
    if rev < snapshot.compacted {
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
    let limit = usize::try_from(opts.limit).unwrap_or(usize::MAX);
    let count_remaining = opts.predicate.is_everything();
    let mut items = Vec::new();
    let mut last_key: Option<String> = None;
    let mut has_more = false;
    let mut remaining: i64 = 0;
    let mut evaluated = 0;
    scan_at(&snapshot, &plan.range, &start, rev, |obj| {
        if has_more {
            remaining += 1;
            return Ok(true);
        }
        if limit > 0 && items.len() >= limit {
            has_more = true;
            remaining = 1;
            return Ok(count_remaining);
        }
        last_key = Some(obj.key.clone());
        evaluated += 1;
        if opts.predicate.matches(&obj.value)? {
            items.push(obj);
        }
        Ok(true)
    })?;
    let mut result = ListResult {
        items,
        revision: rev,
        continue_token: None,
        remaining_item_count: None,
        evaluated,
    };
    if has_more && let Some(last) = last_key {
        let next = format!("{last}\0");
        let rv = i64::try_from(rev)
            .map_err(|_| StorageError::Internal(format!("revision {rev} overflows i64")))?;
        result.continue_token = Some(encode_continue(&next, plan.range.as_str(), rv)?);
        if count_remaining {
            result.remaining_item_count = Some(remaining);
        }
    }
    Ok(result)
}

/// Object count and mean value size under `prefix` (blocking).
pub(crate) fn stats(shared: &Shared, prefix: &str) -> Result<Stats, StorageError> {
    apiserver_storage::validate_key(prefix)?;
    let snapshot = Snapshot::new(shared)?;
    let cf = shared.cf(CF_LATEST)?;
    let iter = snapshot.iterator_cf_opt(
        cf,
        bounded(prefix_end(prefix.as_bytes())),
        IteratorMode::From(prefix.as_bytes(), Direction::Forward),
    );
    let (mut count, mut bytes) = (0u64, 0u64);
    for item in iter {
        let (k, v) = item.map_err(db_err)?;
        if !k.starts_with(prefix.as_bytes()) {
            break;
        }
        count += 1;
        bytes += v.len().saturating_sub(8) as u64;
    }
    Ok(Stats {
        object_count: count,
        estimated_average_object_size_bytes: bytes.checked_div(count).unwrap_or(0),
    })
}
