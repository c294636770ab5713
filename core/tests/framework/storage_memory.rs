//! The storage conformance suite against the in-memory backend, one test per case.

apiserver::storage_conformance!(|| async { apiserver::storage::MemoryStorage::new().into_dyn() });

/// The single-entry-point form runs too.
#[test]
fn run_conformance_entry_point() {
    apiserver::storage::testing::run(apiserver::storage::testing::run_conformance(|| async {
        apiserver::storage::MemoryStorage::new().into_dyn()
    }));
}
