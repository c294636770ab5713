//! The shared storage conformance suite through the watch cache on envtest's etcd (3.5.30), whose progress
//! notifications the cache relies on: consistent GETs, LISTs and watches from "now" are served from memory after a
//! revision read, where on Debian's 3.4 (`conformance_cached.rs`) they go to etcd. One etcd per case.

use crate::support;

use apiserver::storage::testing::cached;

apiserver::storage_conformance!(|| async {
    cached(support::fresh_store_with_reliable_progress().await)
});
