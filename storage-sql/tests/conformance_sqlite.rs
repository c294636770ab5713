//! The shared storage conformance suite against SQLite on a temporary file, one test per case.

mod common;

apiserver::storage_conformance!(|| async { common::sqlite_dyn_store().await });
