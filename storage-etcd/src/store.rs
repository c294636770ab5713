//! [`EtcdStorage`]: the [`Storage`] contract on etcd v3 (upstream `pkg/storage/etcd3/store.go`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use apiserver_storage::optimistic::{self, Latest, OptimisticStore, Outcome};
use apiserver_storage::{
    GetOptions, KeyRange, ListOptions, ListResult, Preconditions, Stats, Storage, StorageError,
    StoredObject, TryUpdate, ValidateDeletion, WatchOptions, WatchStream, encode_continue,
    plan_list, validate_key,
};
use async_trait::async_trait;
use bytes::Bytes;
use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, GetResponse, Identity, KeyValue,
    KvClient, TlsOptions, Txn, TxnOp, TxnOpResponse, TxnResponse,
};

use crate::compact::Compactor;
use crate::error::{ConnectError, EtcdFailure, classify, grpc_code, status_code, storage_error};
use crate::options::{EtcdConfig, EtcdOptions};

/// Largest page a list asks etcd for while filtering drops items (upstream `maxLimit`).
const MAX_LIMIT: i64 = 10_000;
/// Page size for reads that want everything (unpaged lists, stats, initial watch events), so no single response
/// grows without bound. Each response is one buffer of its whole size in the gRPC client, freed once decoded: with
/// 10,000, a LIST of 2,000 toppings was one ~1 MB buffer, and four such LISTs at a time took the server's peak RSS
/// to 73-80 MiB; with 1,000, to 67-71 MiB at the same LISTs per second (`apiserver-bench --backends etcd`, etcd 3.4,
/// whose unset-resourceVersion LISTs read etcd).
const CHUNK: i64 = 1_000;
/// Upstream's health and readiness check timeout.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(2);
/// gRPC message limit for responses: lists of large collections exceed the default 4 MiB (upstream sets no limit).
const MAX_RESPONSE_BYTES: usize = 1 << 31;

/// The etcd v3 backend. Cheap to clone; clones share one connection, one compactor and one progress signal.
///
/// Keys are written verbatim (the layer above builds them under the `--etcd-prefix` with `ResourceKeys`), values
/// are the caller's bytes, and an object's resourceVersion is its key's `mod_revision`, so data written by a Go
/// apiserver with the same prefix and media type reads back unchanged.
#[derive(Clone)]
pub struct EtcdStorage {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    health_key: String,
    /// The newest compacted revision this process has seen (its own compactions and compacted watches).
    compacted: Arc<AtomicU64>,
    /// Bumped by [`Storage::request_watch_progress`]; each progress-notify watch asks etcd for progress on change.
    progress: tokio::sync::watch::Sender<u64>,
    /// Whether etcd answers progress requests only once every watch is in sync (see [`progress_is_reliable`]).
    reliable_progress: AtomicBool,
    _compactor: Option<AbortOnDrop>,
}

/// Stops the compactor when the last clone of the store goes away.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl std::fmt::Debug for EtcdStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStorage")
            .field("health_key", &self.inner.health_key)
            .field("compacted", &self.inner.compacted.load(Ordering::Relaxed))
            .finish()
    }
}

impl EtcdStorage {
    /// Connects from the server's flags, with the server's key prefix.
    pub async fn from_options(opts: &EtcdOptions, prefix: &str) -> Result<Self, ConnectError> {
        Self::connect(opts.config(prefix)?).await
    }

    /// Connects to etcd and, if configured, starts this server's compactor. The connection is lazy: an etcd that
    /// is down makes calls wait or fail and [`Storage::readiness`] report it, not this constructor. Must run
    /// inside a tokio runtime.
    pub async fn connect(config: EtcdConfig) -> Result<Self, ConnectError> {
        if config.endpoints.is_empty() {
            return Err(ConnectError::Options("no etcd endpoints".into()));
        }
        // Upstream's client settings: keepalive 30s/10s, dial timeout 20s, leader required.
        let mut options = ConnectOptions::new()
            .with_keep_alive(Duration::from_secs(30), Duration::from_secs(10))
            .with_keep_alive_while_idle(true)
            .with_connect_timeout(Duration::from_secs(20))
            .with_require_leader(true);
        if let Some(tls) = &config.tls {
            let mut t = TlsOptions::new();
            if let Some(ca) = &tls.ca_file {
                t = t.ca_certificate(Certificate::from_pem(read(ca)?));
            }
            if let Some((cert, key)) = &tls.identity {
                t = t.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            options = options.with_tls(t);
        }
        let client = Client::connect(&config.endpoints, Some(options)).await?;
        let store = Self::from_client(client, &config);
        store.probe_version().await;
        Ok(store)
    }

    /// Wraps an existing client (for servers that share one), with `config`'s prefix and compaction interval.
    pub fn from_client(client: Client, config: &EtcdConfig) -> Self {
        let compacted = Arc::new(AtomicU64::new(0));
        let compactor = config.compaction_interval.map(|interval| {
            let c = Compactor::new(kv_client(&client), compacted.clone());
            AbortOnDrop(tokio::spawn(c.run(interval)))
        });
        let prefix = config.prefix.trim_end_matches('/');
        EtcdStorage {
            inner: Arc::new(Inner {
                client,
                health_key: format!("{prefix}/health"),
                compacted,
                progress: tokio::sync::watch::Sender::new(0),
                reliable_progress: AtomicBool::new(false),
                _compactor: compactor,
            }),
        }
    }

    /// Asks etcd for its version, to know whether its progress answers can be trusted. Until it answers (or when
    /// the store was built by [`EtcdStorage::from_client`] without calling this) progress counts as unreliable.
    pub async fn probe_version(&self) {
        let mut m = self.inner.client.maintenance_client();
        if let Ok(Ok(status)) = tokio::time::timeout(HEALTH_TIMEOUT, m.status()).await {
            let reliable = progress_is_reliable(status.version());
            self.inner
                .reliable_progress
                .store(reliable, Ordering::Relaxed);
        }
    }

    /// The store behind an `Arc<dyn Storage>`.
    pub fn into_dyn(self) -> Arc<dyn Storage> {
        Arc::new(self)
    }

    /// The etcd client, for what the storage contract does not cover (tests, metrics).
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// A compaction participant sharing this store's connection, for servers that schedule compaction
    /// themselves (with `compaction_interval: None`).
    pub fn compactor(&self) -> Compactor {
        Compactor::new(self.kv(), self.inner.compacted.clone())
    }

    fn kv(&self) -> KvClient {
        kv_client(&self.inner.client)
    }

    /// Reads `key` at the latest revision: the object if present, and the header revision.
    async fn read(&self, key: &str) -> Result<(Option<StoredObject>, u64), StorageError> {
        let mut resp = self
            .kv()
            .get(key, None)
            .await
            .map_err(|e| storage_error(e, key))?;
        let rev = header_revision(resp.header());
        let obj = resp.take_kvs().into_iter().next().map(stored).transpose()?;
        Ok((obj, rev))
    }

    /// Runs `txn` = If(mod_revision(key) == expected) Then(op) Else(Get(key)) (`expected` 0: absent). On success
    /// returns the written object, holding `value`, with the write's revision; on conflict, the current object
    /// (`None` when absent) read by the same round trip.
    async fn cas(
        &self,
        key: &str,
        expected: u64,
        op: TxnOp,
        value: Bytes,
    ) -> Result<Outcome, StorageError> {
        let expected = i64::try_from(expected)
            .map_err(|_| StorageError::Internal(format!("revision {expected} out of range")))?;
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([op])
            .or_else([TxnOp::get(key, None)]);
        let resp = self
            .kv()
            .txn(txn)
            .await
            .map_err(|e| storage_error(e, key))?;
        if resp.succeeded() {
            return Ok(Outcome::Written(StoredObject {
                key: key.to_string(),
                value,
                revision: header_revision(resp.header()),
            }));
        }
        Ok(Outcome::Conflict(else_get(resp)?))
    }

    pub(crate) async fn too_large(&self, requested: u64) -> StorageError {
        match self.current_revision().await {
            Ok(current) => StorageError::TooLargeResourceVersion { requested, current },
            Err(e) => e,
        }
    }

    /// One range read of `[start, end)`, at `revision` (0 = latest), at most `limit` keys (0 = all).
    pub(crate) async fn range(
        &self,
        start: Vec<u8>,
        end: Vec<u8>,
        revision: i64,
        limit: i64,
    ) -> Result<GetResponse, etcd_client::Error> {
        let mut o = etcd_client::GetOptions::new().with_range(end);
        if revision > 0 {
            o = o.with_revision(revision);
        }
        if limit > 0 {
            o = o.with_limit(limit);
        }
        self.kv().get(start, Some(o)).await
    }

    /// Everything in `range` at exactly `revision` (0 = latest), read in chunks; returns the items and the
    /// revision read at.
    pub(crate) async fn read_all(
        &self,
        range: &KeyRange,
        revision: u64,
    ) -> Result<(Vec<StoredObject>, u64), EtcdFailure> {
        let (mut start, end) = bounds(range);
        let mut rev = i64::try_from(revision).unwrap_or(i64::MAX);
        let mut items = Vec::new();
        loop {
            let mut resp = self
                .range(start.clone(), end.clone(), rev, CHUNK)
                .await
                .map_err(|e| classify(e, range.as_str()))?;
            if rev == 0 {
                rev = header_revision(resp.header()) as i64;
            }
            let more = resp.more();
            let kvs = resp.take_kvs();
            if let Some(last) = kvs.last() {
                start = after(last.key());
            } else if more {
                return Err(EtcdFailure::Other(StorageError::Internal(
                    "no results were found, but etcd indicated there were more values remaining"
                        .into(),
                )));
            }
            for kv in kvs {
                items.push(stored(kv).map_err(EtcdFailure::Other)?);
            }
            if !more {
                return Ok((items, rev as u64));
            }
        }
    }

    pub(crate) fn compacted(&self) -> &Arc<AtomicU64> {
        &self.inner.compacted
    }
}

/// The store's conditional writes for the optimistic loop: each is one transaction comparing the key's
/// `mod_revision`, whose else branch reads the key, so a conflict hands back the current object in the same round
/// trip. Reads report the response header's revision, which a key-not-found error carries.
struct Occ<'a>(&'a EtcdStorage);

#[async_trait]
impl OptimisticStore for Occ<'_> {
    async fn latest(&self, key: &str) -> Result<Latest, StorageError> {
        let (object, revision) = self.0.read(key).await?;
        Ok(Latest {
            object,
            revision: Some(revision),
        })
    }

    async fn create_if_absent(&self, key: &str, value: Bytes) -> Result<Outcome, StorageError> {
        let op = TxnOp::put(key, value.to_vec(), None);
        self.0.cas(key, 0, op, value).await
    }

    async fn compare_and_swap(
        &self,
        key: &str,
        expected: &StoredObject,
        value: Bytes,
    ) -> Result<Outcome, StorageError> {
        let op = TxnOp::put(key, value.to_vec(), None);
        self.0.cas(key, expected.revision, op, value).await
    }

    async fn compare_and_delete(
        &self,
        key: &str,
        expected: &StoredObject,
    ) -> Result<Outcome, StorageError> {
        let op = TxnOp::delete(key, None);
        self.0
            .cas(key, expected.revision, op, expected.value.clone())
            .await
    }

    async fn key_not_found(&self, key: &str, seen: Option<u64>) -> StorageError {
        StorageError::KeyNotFound {
            key: key.to_string(),
            revision: seen.unwrap_or(0),
        }
    }
}

#[async_trait]
impl Storage for EtcdStorage {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value.to_vec(), None)]);
        let resp = self
            .kv()
            .txn(txn)
            .await
            .map_err(|e| storage_error(e, key))?;
        if !resp.succeeded() {
            return Err(StorageError::KeyExists {
                key: key.to_string(),
                revision: 0,
            });
        }
        Ok(StoredObject {
            key: key.to_string(),
            value,
            revision: header_revision(resp.header()),
        })
    }

    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        validate_key(key)?;
        let (obj, rev) = self.read(key).await?;
        if let Some(min) = opts.resource_version
            && min > rev
        {
            return Err(StorageError::TooLargeResourceVersion {
                requested: min,
                current: rev,
            });
        }
        obj.ok_or_else(|| StorageError::KeyNotFound {
            key: key.to_string(),
            revision: rev,
        })
    }

    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let plan = plan_list(key, opts)?;
        let (range_start, end) = bounds(&plan.range);
        let mut start = plan
            .start_key
            .as_deref()
            .map(|s| s.as_bytes().to_vec())
            .unwrap_or(range_start);
        let want = opts.limit;
        let paging = want > 0;
        let mut rev: i64 = match plan.read_revision {
            Some(r) => i64::try_from(r).map_err(|_| StorageError::TooLargeResourceVersion {
                requested: r,
                current: 0,
            })?,
            None => 0,
        };
        let mut request_limit = if paging {
            i64::try_from(want).unwrap_or(MAX_LIMIT)
        } else {
            CHUNK
        };
        let mut items = Vec::new();
        let mut last_key: Option<Vec<u8>> = None;
        let mut evaluated = 0;
        let mut has_more;
        let mut count;
        loop {
            let mut resp = match self
                .range(start.clone(), end.clone(), rev, request_limit)
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    return Err(match classify(e, key) {
                        EtcdFailure::Compacted if plan.continuing => {
                            let from = plan.start_key.as_deref().unwrap_or(plan.range.as_str());
                            let token = encode_continue(from, plan.range.as_str(), -1).ok();
                            StorageError::continue_expired(token)
                        }
                        EtcdFailure::Compacted => StorageError::list_expired(),
                        EtcdFailure::FutureRevision => self.too_large(rev as u64).await,
                        EtcdFailure::Other(e) => e,
                    });
                }
            };
            if rev == 0 {
                let current = header_revision(resp.header());
                if let Some(min) = plan.min_revision
                    && min > current
                {
                    return Err(StorageError::TooLargeResourceVersion {
                        requested: min,
                        current,
                    });
                }
                // Every further page reads at this revision.
                rev = current as i64;
            }
            has_more = resp.more();
            count = resp.count();
            let kvs = resp.take_kvs();
            if kvs.is_empty() && has_more {
                return Err(StorageError::Internal(
                    "no results were found, but etcd indicated there were more values remaining"
                        .into(),
                ));
            }
            for kv in kvs {
                if paging && items.len() as u64 >= want {
                    has_more = true;
                    break;
                }
                last_key = Some(kv.key().to_vec());
                evaluated += 1;
                let obj = stored(kv)?;
                if opts.predicate.matches(&obj.value)? {
                    items.push(obj);
                }
            }
            if !has_more || (paging && items.len() as u64 >= want) {
                break;
            }
            if let Some(last) = &last_key {
                start = after(last);
            }
            if paging {
                // The selector dropped items: ask for more next time.
                request_limit = (request_limit * 2).min(MAX_LIMIT);
            }
        }
        let revision = rev as u64;
        let mut result = ListResult {
            items,
            revision,
            continue_token: None,
            remaining_item_count: None,
            evaluated,
        };
        if paging
            && has_more
            && let Some(last) = last_key
        {
            let last = String::from_utf8(last)
                .map_err(|_| StorageError::Internal("non-UTF-8 key from etcd".into()))?;
            result.continue_token = Some(encode_continue(
                &format!("{last}\0"),
                plan.range.as_str(),
                rev,
            )?);
            if opts.predicate.is_everything() {
                result.remaining_item_count = Some(
                    count
                        .saturating_sub(i64::try_from(want).unwrap_or(i64::MAX))
                        .max(0),
                );
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
        crate::watch::start(self, key, opts).await
    }

    async fn current_revision(&self) -> Result<u64, StorageError> {
        // A count-only read of one key: a linearizable read that returns no values.
        let key = self.inner.health_key.as_str();
        let resp = self
            .kv()
            .get(key, Some(etcd_client::GetOptions::new().with_count_only()))
            .await
            .map_err(|e| storage_error(e, key))?;
        Ok(header_revision(resp.header()))
    }

    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        let rev = i64::try_from(revision).map_err(|_| StorageError::TooLargeResourceVersion {
            requested: revision,
            current: 0,
        })?;
        match self.kv().compact(rev, None).await {
            Ok(_) => {}
            Err(e) => match classify(e, "") {
                // Already compacted at or past it.
                EtcdFailure::Compacted => {}
                EtcdFailure::FutureRevision => return Err(self.too_large(revision).await),
                EtcdFailure::Other(e) => return Err(e),
            },
        }
        self.inner.compacted.fetch_max(revision, Ordering::AcqRel);
        Ok(())
    }

    async fn compact_revision(&self) -> Result<u64, StorageError> {
        Ok(self.inner.compacted.load(Ordering::Acquire))
    }

    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        validate_key(prefix)?;
        let range = KeyRange::Prefix(prefix.to_string());
        let (items, _) = self.read_all(&range, 0).await.map_err(|f| match f {
            EtcdFailure::Other(e) => e,
            EtcdFailure::Compacted => StorageError::list_expired(),
            EtcdFailure::FutureRevision => StorageError::Internal("future revision".into()),
        })?;
        let count = items.len() as u64;
        let bytes: u64 = items.iter().map(|o| o.value.len() as u64).sum();
        Ok(Stats {
            object_count: count,
            estimated_average_object_size_bytes: bytes.checked_div(count).unwrap_or(0),
        })
    }

    fn reliable_progress(&self) -> bool {
        self.inner.reliable_progress.load(Ordering::Relaxed)
    }

    async fn readiness(&self) -> Result<(), StorageError> {
        let key = self.inner.health_key.as_str();
        match tokio::time::timeout(HEALTH_TIMEOUT, self.kv().get(key, None)).await {
            Err(_) => Err(StorageError::Timeout {
                key: key.to_string(),
                message: format!("etcd did not answer a health read within {HEALTH_TIMEOUT:?}"),
            }),
            Ok(Ok(_)) => Ok(()),
            // Upstream's check counts a permission error as healthy: etcd answered.
            Ok(Err(e)) if status_code(&e) == Some(grpc_code::PERMISSION_DENIED) => Ok(()),
            Ok(Err(e)) => Err(storage_error(e, key)),
        }
    }

    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        self.inner.progress.send_modify(|n| *n = n.wrapping_add(1));
        Ok(())
    }
}

impl EtcdStorage {
    pub(crate) fn watch_client(&self) -> etcd_client::WatchClient {
        self.inner
            .client
            .watch_client()
            .max_decoding_message_size(MAX_RESPONSE_BYTES)
    }

    pub(crate) fn progress_requests(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.progress.subscribe()
    }

    /// Fails with the watch 410 if `revision` is compacted, by reading one key of `range` at it (a watch from
    /// `revision + 1` needs history back to `revision`). A future revision is fine for a watch.
    pub(crate) async fn check_not_compacted(
        &self,
        range: &KeyRange,
        revision: u64,
    ) -> Result<(), StorageError> {
        let Ok(rev) = i64::try_from(revision) else {
            return Ok(());
        };
        let (start, end) = bounds(range);
        let o = etcd_client::GetOptions::new()
            .with_range(end)
            .with_revision(rev)
            .with_count_only();
        match self.kv().get(start, Some(o)).await {
            Ok(_) => Ok(()),
            Err(e) => match classify(e, range.as_str()) {
                EtcdFailure::Compacted => {
                    self.inner
                        .compacted
                        .fetch_max(revision + 1, Ordering::AcqRel);
                    Err(StorageError::watch_expired())
                }
                EtcdFailure::FutureRevision => Ok(()),
                EtcdFailure::Other(e) => Err(e),
            },
        }
    }
}

fn kv_client(client: &Client) -> KvClient {
    client
        .kv_client()
        .max_decoding_message_size(MAX_RESPONSE_BYTES)
}

fn read(path: &std::path::Path) -> Result<Vec<u8>, ConnectError> {
    std::fs::read(path).map_err(|source| ConnectError::File {
        path: path.to_path_buf(),
        source,
    })
}

/// A response header's revision; etcd revisions are positive.
pub(crate) fn header_revision(h: Option<&etcd_client::ResponseHeader>) -> u64 {
    h.map(|h| u64::try_from(h.revision()).unwrap_or(0))
        .unwrap_or(0)
}

/// A key-value as a [`StoredObject`] with resourceVersion = `mod_revision`.
pub(crate) fn stored(kv: KeyValue) -> Result<StoredObject, StorageError> {
    let revision = u64::try_from(kv.mod_revision()).unwrap_or(0);
    let (key, value) = kv.into_key_value();
    let key = String::from_utf8(key).map_err(|e| StorageError::CorruptObj {
        key: String::from_utf8_lossy(e.as_bytes()).into_owned(),
        message: "key is not UTF-8".into(),
    })?;
    Ok(StoredObject {
        key,
        value: Bytes::from(value),
        revision,
    })
}

/// The object read by the Else-Get branch of a failed transaction.
fn else_get(resp: TxnResponse) -> Result<Option<StoredObject>, StorageError> {
    for r in resp.op_responses() {
        if let TxnOpResponse::Get(mut g) = r {
            return g.take_kvs().into_iter().next().map(stored).transpose();
        }
    }
    Err(StorageError::Internal(
        "etcd transaction failed without the read of its else branch".into(),
    ))
}

/// The etcd range `[start, end)` of a key range: one key, or every key under a prefix.
pub(crate) fn bounds(range: &KeyRange) -> (Vec<u8>, Vec<u8>) {
    match range {
        KeyRange::Exact(k) => (k.as_bytes().to_vec(), after(k.as_bytes())),
        KeyRange::Prefix(p) => (p.as_bytes().to_vec(), prefix_end(p.as_bytes())),
    }
}

/// The smallest key after `key`.
fn after(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// The end of the range of keys starting with `prefix` (etcd's `GetPrefixRangeEnd`).
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte is 0xff: no upper bound ("\0" means "to the end" to etcd).
    vec![0]
}

/// Whether an etcd of `version` answers progress requests only once its watches are in sync. Before 3.4.31 and
/// 3.5.13 it stamped the answer with the store's revision even while a watch's events were still queued, so a
/// bookmark from it could claim events not yet delivered (upstream gates consistent reads from cache the same way).
fn progress_is_reliable(version: &str) -> bool {
    let mut parts = version
        .split(['.', '-', '+'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor, patch) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    match (major, minor) {
        (3, 4) => patch >= 31,
        (3, 5) => patch >= 13,
        (3, m) => m > 5,
        (m, _) => m > 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
        let (s, e) = bounds(&KeyRange::Exact("/a/b".into()));
        assert_eq!((s, e), (b"/a/b".to_vec(), b"/a/b\0".to_vec()));
    }

    #[test]
    fn progress_reliable_from_3_4_31_and_3_5_13() {
        for (v, want) in [
            ("3.4.23", false),
            ("3.4.31", true),
            ("3.5.12", false),
            ("3.5.13", true),
            ("3.6.0", true),
            ("3.5.13-rc.0", true),
            ("garbage", false),
        ] {
            assert_eq!(progress_is_reliable(v), want, "{v}");
        }
    }
}
