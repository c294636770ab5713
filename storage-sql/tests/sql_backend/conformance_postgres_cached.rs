//! The shared storage conformance suite against a real Postgres 15 through the watch cache.

use crate::common;

use apiserver::storage::testing::cached;

apiserver::storage_conformance!(|| async { cached(common::pg_store().await.into_dyn()) });
