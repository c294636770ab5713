//! Turning etcd client errors into [`StorageError`]s, and the errors of connecting.

use apiserver_storage::StorageError;

/// etcd's message for a read or watch below the compacted revision (`mvcc.ErrCompacted`).
const COMPACTED: &str = "required revision has been compacted";
/// etcd's message for a read above the current revision (`mvcc.ErrFutureRev`).
const FUTURE_REVISION: &str = "required revision is a future revision";

/// Why [`EtcdStorage::connect`](crate::EtcdStorage::connect) failed: bad options or unreadable TLS files. Failures
/// to reach etcd are not among them: the client connects lazily and readiness reports an unreachable etcd.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The options are inconsistent (no servers, a key without a certificate, ...).
    #[error("invalid etcd options: {0}")]
    Options(String),
    /// A TLS file could not be read.
    #[error("cannot read {path}: {source}")]
    File {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The client refused the endpoints or TLS settings.
    #[error("etcd client: {0}")]
    Client(#[from] etcd_client::Error),
}

/// What a failed etcd call means for the storage contract.
#[derive(Debug)]
pub(crate) enum EtcdFailure {
    /// The revision asked for was compacted away.
    Compacted,
    /// The revision asked for is newer than etcd's.
    FutureRevision,
    /// Anything else, already mapped.
    Other(StorageError),
}

/// gRPC status codes (stable numbers of the gRPC spec), so this crate needs no direct tonic dependency.
pub(crate) mod grpc_code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const ABORTED: i32 = 10;
    pub const UNAVAILABLE: i32 = 14;
}

/// The gRPC status code of an etcd error, if it is a status.
pub(crate) fn status_code(err: &etcd_client::Error) -> Option<i32> {
    match err {
        etcd_client::Error::GRpcStatus(status) => Some(status.code() as i32),
        _ => None,
    }
}

/// Classifies an etcd client error; `key` goes into the storage error's text.
pub(crate) fn classify(err: etcd_client::Error, key: &str) -> EtcdFailure {
    use etcd_client::Error as E;
    let unreachable = |message: String| {
        EtcdFailure::Other(StorageError::Unreachable {
            key: key.to_string(),
            message,
        })
    };
    match err {
        E::GRpcStatus(status) => {
            let msg = status.message();
            if msg.contains(COMPACTED) {
                return EtcdFailure::Compacted;
            }
            if msg.contains(FUTURE_REVISION) {
                return EtcdFailure::FutureRevision;
            }
            let message = format!("{:?}: {msg}", status.code());
            match status.code() as i32 {
                grpc_code::DEADLINE_EXCEEDED => EtcdFailure::Other(StorageError::Timeout {
                    key: key.to_string(),
                    message,
                }),
                grpc_code::UNAVAILABLE
                | grpc_code::CANCELLED
                | grpc_code::ABORTED
                | grpc_code::UNKNOWN => unreachable(message),
                _ => EtcdFailure::Other(StorageError::Internal(format!("etcd: {message}"))),
            }
        }
        E::TransportError(e) => unreachable(e.to_string()),
        E::IoError(e) => unreachable(e.to_string()),
        E::WatchError(e) => unreachable(format!("watch: {e}")),
        other => EtcdFailure::Other(StorageError::Internal(format!("etcd: {other}"))),
    }
}

/// Maps an etcd client error where compaction or future revisions have no special meaning.
pub(crate) fn storage_error(err: etcd_client::Error, key: &str) -> StorageError {
    match classify(err, key) {
        EtcdFailure::Other(e) => e,
        EtcdFailure::Compacted => StorageError::list_expired(),
        EtcdFailure::FutureRevision => {
            StorageError::Internal("etcd: required revision is a future revision".into())
        }
    }
}
