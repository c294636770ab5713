//! The shared storage conformance suite against RocksDB through the watch cache.

use apiserver::storage::testing::cached;
use apiserver_storage_rocks::{RocksOptions, RocksStorage};

apiserver::storage_conformance!(|| async {
    cached(
        RocksStorage::open_temporary(&RocksOptions::default())
            .expect("open a temporary RocksDB")
            .into_dyn(),
    )
});
