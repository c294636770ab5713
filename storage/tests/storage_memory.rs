//! The storage conformance suite against the in-memory backend, one test per case.

apiserver_storage::storage_conformance!(|| async {
    apiserver_storage::MemoryStorage::new().into_dyn()
});

/// The single-entry-point form runs too.
#[test]
fn run_conformance_entry_point() {
    apiserver_storage::testing::run(apiserver_storage::testing::run_conformance(|| async {
        apiserver_storage::MemoryStorage::new().into_dyn()
    }));
}
