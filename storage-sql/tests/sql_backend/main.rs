//! The SQL backend's integration tests, one test binary (each file a module): the crate is linked once per change
//! instead of once per file. Its Postgres tests share one Postgres (each test makes its own database).

#[path = "../common/mod.rs"]
mod common;

mod compaction;
mod conformance_postgres;
mod conformance_postgres_cached;
mod conformance_sqlite;
mod conformance_sqlite_cached;
mod postgres_replicas;
mod sqlite_crash;
mod sqlite_disk_full;
