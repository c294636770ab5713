//! The shared storage conformance suite against RocksDB: one test per case, each on a fresh database in its own
//! temporary directory.

use apiserver_storage_rocks::{RocksOptions, RocksStorage};

apiserver::storage_conformance!(|| async {
    RocksStorage::open_temporary(&RocksOptions::default())
        .expect("open a temporary RocksDB")
        .into_dyn()
});
