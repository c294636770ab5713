//! The shared storage conformance suite against SQLite through the watch cache.

use crate::common;

use apiserver::storage::testing::cached;

apiserver::storage_conformance!(|| async { cached(common::sqlite_dyn_store().await) });
