//! The RocksDB backend's integration tests, one test binary (each file a module): the crate is linked once per
//! change instead of once per file.

mod conformance;
mod conformance_cached;
mod crash;
mod disk_full;
mod reopen;
mod scan_compaction;
