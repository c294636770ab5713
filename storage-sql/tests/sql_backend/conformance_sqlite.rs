//! The shared storage conformance suite against SQLite on a temporary file, one test per case.

use crate::common;

apiserver::storage_conformance!(|| async { common::sqlite_dyn_store().await });
