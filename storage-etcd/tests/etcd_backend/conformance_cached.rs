//! The shared storage conformance suite against a real etcd through the watch cache (one etcd per case).

use crate::support;

use apiserver::storage::testing::cached;

apiserver::storage_conformance!(|| async { cached(support::fresh_store().await) });
