//! SQLite and Postgres storage backends for the apiserver framework: the [`Storage`](apiserver_storage::Storage)
//! contract implemented natively on SQL with sqlx, without an etcd translation layer.
//!
//! - **Schema**: an append-only log table, one row per create, update or delete (tombstone), keyed by revision,
//!   with the previous value beside the new one for watches. A one-row meta table holds the current and
//!   compacted revisions. Migrations are versioned and run on open.
//! - **Revisions and compare-and-swap**: every write locks the meta row, re-reads the key's latest row, and appends
//!   only if it is the expected one, bumping the revision in the same transaction. Writers are serialized, so
//!   revisions are gap-free and in commit order across processes; a unique index on `(name, prev_revision)`
//!   guards the CAS a second time. On Postgres this is one round trip (a plpgsql function).
//! - **Reads**: "latest row per key at revision R" walks the keys of a range through the `(name, revision)` index,
//!   O(log n) per key however many rows a key has; ranges compare bytes (`COLLATE "C"` on Postgres).
//! - **Watches**: local writes reach watchers directly; other replicas' writes arrive through Postgres
//!   `LISTEN/NOTIFY`; a poll is the fallback.
//! - **Compaction**: marks the revision first (old reads fail with 410 at once), then deletes superseded rows and
//!   tombstones in short batches within a time budget; SQLite then checkpoints its WAL and frees pages.
//!
//! Open a store with [`SqlStorage::connect`] (`sqlite://PATH` or `postgres://...`) or from
//! [`SqlStorageOptions`] (the `--storage-url` flags).

#[cfg(not(any(feature = "sqlite", feature = "postgres")))]
compile_error!("enable at least one of the cargo features `sqlite` and `postgres`");

mod db;
mod options;
mod schema;
mod store;
mod watch;

pub use db::Dialect;
pub use options::{SqlStorageOptions, SqliteSynchronous};
pub use store::{CompactionReport, SqlStorage};
