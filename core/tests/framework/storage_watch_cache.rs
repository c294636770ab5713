//! The storage conformance suite through the watch cache, over the in-memory backend.

use apiserver::storage::MemoryStorage;
use apiserver::storage::testing::cached;

apiserver::storage_conformance!(|| async { cached(MemoryStorage::new().into_dyn()) });
