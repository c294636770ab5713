//! Periodic compaction shared by every server on one etcd (upstream `pkg/storage/etcd3/compact.go`).
//!
//! Servers agree without a lock through a compare-and-swap on the key `compact_rev_key`: each remembers the
//! key's version from its last round (`compact_time`) and the revision it saw then (`rev`). A round puts the
//! current revision into the key if its version is still the remembered one; the winner then compacts to the
//! revision of the *previous* round, so at least one interval of history always survives, and the losers adopt
//! the winner's version. The first round never compacts. The key and its format are upstream's, so Go servers on
//! the same etcd take part in the same election.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apiserver_storage::StorageError;
use etcd_client::{Compare, CompareOp, KvClient, Txn, TxnOp, TxnOpResponse};

use crate::error::{EtcdFailure, classify};

/// The key the compare-and-swap runs on (upstream `compactRevKey`), outside any prefix.
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// One server's side of the compaction election. [`EtcdStorage`](crate::EtcdStorage) runs one on its configured
/// interval; a server may also drive rounds itself with [`Compactor::run_once`].
pub struct Compactor {
    kv: KvClient,
    compact_time: i64,
    rev: i64,
    compacted: Arc<AtomicU64>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("compact_time", &self.compact_time)
            .field("rev", &self.rev)
            .finish()
    }
}

impl Compactor {
    pub(crate) fn new(kv: KvClient, compacted: Arc<AtomicU64>) -> Self {
        Compactor {
            kv,
            compact_time: 0,
            rev: 0,
            compacted,
        }
    }

    /// One round: tries the compare-and-swap and, on winning, compacts to the revision remembered from the
    /// previous round. Returns the revision compacted to, if this round compacted.
    pub async fn run_once(&mut self) -> Result<Option<u64>, StorageError> {
        let txn = Txn::new()
            .when([Compare::version(
                COMPACT_REV_KEY,
                CompareOp::Equal,
                self.compact_time,
            )])
            .and_then([TxnOp::put(COMPACT_REV_KEY, self.rev.to_string(), None)])
            .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
        let resp = self
            .kv
            .txn(txn)
            .await
            .map_err(|e| crate::error::storage_error(e, COMPACT_REV_KEY))?;
        let current_rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        if !resp.succeeded() {
            // Another server won this round: adopt its version, remember the revision for the next one.
            let version = resp
                .op_responses()
                .into_iter()
                .find_map(|r| match r {
                    TxnOpResponse::Get(g) => g.kvs().first().map(|kv| kv.version()),
                    _ => None,
                })
                .unwrap_or(0);
            self.compact_time = version;
            self.rev = current_rev;
            return Ok(None);
        }
        let target = self.rev;
        self.compact_time += 1;
        self.rev = current_rev;
        if target <= 0 {
            // No compaction on the bootstrap round.
            return Ok(None);
        }
        match self.kv.compact(target, None).await {
            Ok(_) => {}
            // Someone compacted further already; nothing to do.
            Err(e) => match classify(e, COMPACT_REV_KEY) {
                EtcdFailure::Compacted => {}
                EtcdFailure::FutureRevision => {
                    return Err(StorageError::Internal(format!(
                        "etcd: cannot compact to future revision {target}"
                    )));
                }
                EtcdFailure::Other(e) => return Err(e),
            },
        }
        let target = u64::try_from(target).unwrap_or(0);
        self.compacted.fetch_max(target, Ordering::AcqRel);
        tracing::info!(revision = target, "etcd: compacted");
        Ok(Some(target))
    }

    /// Runs a round every `interval` until the task is dropped or aborted; errors are logged and retried on the
    /// next round.
    pub(crate) async fn run(mut self, interval: Duration) {
        loop {
            tokio::time::sleep(interval).await;
            if let Err(e) = self.run_once().await {
                tracing::warn!(error = %e, "etcd: compaction round failed");
            }
        }
    }
}
