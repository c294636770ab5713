//! Embedded RocksDB storage backend for the apiserver framework: durable, MVCC, no external service.
//!
//! [`RocksStorage`] implements [`apiserver_storage::Storage`] on one RocksDB database:
//!
//! - One strictly increasing revision, stored with every write in the same atomic batch, so it survives restarts
//!   and a crash never leaves a hole in the sequence.
//! - MVCC: every version of every key stays in a `history` column family until compaction, so lists at an exact
//!   revision, paged lists and watches from a past revision work as on etcd; a revision-ordered `log` column
//!   family replays the changes a watch missed.
//! - Writes go through one writer thread that checks compare-and-swap conditions and commits queued writes
//!   together (one WAL sync for all of them). Reads take RocksDB snapshots and never wait for writes.
//! - Durable by default: a write is acknowledged after the WAL is synced. `--rocksdb-unsafe-no-sync` trades that
//!   for speed (see [`RocksOptions`]).
//! - History older than the retained window is compacted periodically; reads and watches before it get 410.
//! - Another process can follow a database while its owner runs ([`RocksStorage::open_secondary`]): it reads,
//!   lists and watches, and cannot write. Backups and migrations of a running server use it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), apiserver_storage::StorageError> {
//! use apiserver_storage::Storage;
//! use apiserver_storage_rocks::{RocksOptions, RocksStorage};
//!
//! let store = RocksStorage::open("/var/lib/my-apiserver/rocksdb", &RocksOptions::default())?;
//! let created = store.create("/registry/pizzas/ns/margherita", "{}".into()).await?;
//! assert!(created.revision > 0);
//! # Ok(()) }
//! ```

mod compaction;
mod encoding;
mod follower;
mod options;
mod scan;
mod store;
mod ticker;
mod watch;
mod writer;

pub use options::RocksOptions;
pub use store::RocksStorage;
