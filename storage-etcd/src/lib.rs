//! The etcd v3 storage backend of the apiserver framework: [`EtcdStorage`] implements
//! [`apiserver_storage::Storage`] with `etcd-client`, following upstream `k8s.io/apiserver/pkg/storage/etcd3`.
//!
//! - resourceVersion = the key's `mod_revision`; creates, updates and deletes are single transactions guarded
//!   by `mod_revision`, whose else branch reads the current value back (no extra round trip on conflict);
//! - lists page at one pinned revision with upstream's continue tokens; watches start at revision + 1 with
//!   previous values, turn progress notifications into bookmarks and survive etcd restarts;
//! - several servers on one etcd compact it once per interval through upstream's `compact_rev_key` election;
//! - keys are written verbatim, so with the same `--etcd-prefix` and `application/json` this reads and writes
//!   the same data as a Go apiserver.
//!
//! Flags live in [`EtcdOptions`] (upstream names), to be flattened into a server's options.
//!
//! Building needs `protoc` and the protobuf well-known types (Debian: `protobuf-compiler libprotobuf-dev`); the
//! tests start Debian's `etcd` (package `etcd-server`) on free loopback ports.

mod compact;
mod error;
mod options;
mod store;
mod watch;

pub use compact::{COMPACT_REV_KEY, Compactor};
pub use error::ConnectError;
pub use options::{
    DEFAULT_COMPACTION_INTERVAL, DEFAULT_ETCD_PREFIX, EtcdConfig, EtcdOptions, TlsFiles,
};
pub use store::EtcdStorage;

/// The etcd client crate, re-exported so users name the same version (e.g. for [`EtcdStorage::from_client`]).
pub use etcd_client;
