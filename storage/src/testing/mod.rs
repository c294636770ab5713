//! The backend conformance suite (feature `testing`): the executable definition of [`Storage`].
//!
//! It ports upstream's backend-agnostic `pkg/storage/testing/store_tests.go` and `watcher_tests.go` and adds
//! concurrency checks (no lost compare-and-swap update, gap-free ordered watches under concurrent writes), continue
//! token tampering and compaction. A backend crate runs it from one test file:
//!
//! ```ignore
//! // tests/conformance.rs of a backend crate, with `apiserver-storage = { ..., features = ["testing"] }` as
//! // dev-dependency (`apiserver::storage_conformance!` is the same macro)
//! apiserver_storage::storage_conformance!(|| async {
//!     std::sync::Arc::new(MyBackend::connect_fresh().await.unwrap()) as std::sync::Arc<dyn apiserver_storage::Storage>
//! });
//! ```
//!
//! The same suite through the server's watch cache is `apiserver::storage::testing::cached` (the cache is the
//! server's, not the contract's).
//!
//! That expands to one `#[test]` per case (named after the case), each with its own multi-threaded tokio runtime
//! and a fresh store from the factory. [`run_conformance`] runs every case in one test instead.
//!
//! Each case writes only under its own random prefix, never assumes revisions start at 1 or are contiguous
//! across cases, and waits for events with generous timeouts only; "no further event" is checked by writing a
//! sentinel and seeing it arrive next. Cases that compact need a store no other test is reading old revisions of.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::Storage;

pub mod cases;
pub mod crash;
pub mod disk_full;
mod keeping;
pub mod linearizability;

pub use keeping::keeping;

/// A conformance case: takes a fresh store, panics on failure.
pub type CaseFn = fn(Arc<dyn Storage>) -> BoxFuture<'static, ()>;

/// How long one case may take before it fails.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(300);

macro_rules! case_table {
    ($($name:ident),* $(,)?) => {
        /// Every case, by name, in the order [`storage_conformance!`](crate::storage_conformance) lists them.
        pub static CASES: &[(&str, CaseFn)] = &[$((stringify!($name), |s| Box::pin(cases::$name(s)))),*];
    };
}

case_table!(
    create,
    create_with_key_exist,
    get,
    get_list_non_recursive,
    get_list_recursive_prefix,
    key_schema,
    conditional_delete,
    delete_with_suggestion,
    delete_with_suggestion_and_conflict,
    delete_with_suggestion_of_deleted_object,
    preconditional_delete_with_suggestion,
    validate_deletion_with_suggestion,
    guaranteed_update,
    guaranteed_update_checks_stored_data,
    guaranteed_update_keep,
    guaranteed_update_with_conflict,
    guaranteed_update_with_suggestion_and_conflict,
    guaranteed_update_preconditions,
    guaranteed_update_error_passthrough,
    list,
    list_resource_version_match,
    list_continuation,
    list_continuation_with_filter,
    list_inconsistent_continuation,
    list_paging,
    list_pagination_rare_object,
    list_continue_token_format,
    list_tampered_continue_token,
    consistent_list,
    namespace_scoped_list,
    stats,
    compact_revision,
    compaction_expires_old_revisions,
    concurrent_cas_increments,
    concurrent_create_one_wins,
    watch,
    watch_from_zero,
    watch_from_non_zero,
    watch_drop_releases_writers,
    delete_triggers_watch,
    watch_delete_event_object_has_latest_rv,
    cluster_scoped_watch,
    namespace_scoped_watch,
    watch_predicate_transitions,
    watch_initialization_signal,
    watch_initial_events_at_revision,
    send_initial_events_false,
    progress_notify,
    watch_sees_every_revision_in_order,
    linearizable_history,
);

/// Runs one case body on a fresh multi-threaded runtime with [`CASE_TIMEOUT`]; used by
/// [`storage_conformance!`](crate::storage_conformance).
pub fn run<F: Future<Output = ()> + Send>(case: F) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .expect("conformance: cannot build a tokio runtime");
    rt.block_on(async {
        if tokio::time::timeout(CASE_TIMEOUT, case).await.is_err() {
            panic!("conformance case timed out after {CASE_TIMEOUT:?}");
        }
    });
}

/// Runs every case against fresh stores from `factory`, each in its own task, and panics naming the cases that
/// failed. Prefer [`storage_conformance!`](crate::storage_conformance), which makes one test per case.
pub async fn run_conformance<F, Fut>(factory: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = Arc<dyn Storage>>,
{
    let mut failed = Vec::new();
    for (name, case) in CASES {
        let store = factory().await;
        let task = tokio::spawn(tokio::time::timeout(CASE_TIMEOUT, case(store)));
        match task.await {
            Ok(Ok(())) => {}
            Ok(Err(_)) => failed.push(format!("{name} (timed out)")),
            Err(_) => failed.push(name.to_string()),
        }
    }
    assert!(
        failed.is_empty(),
        "storage conformance cases failed: {}",
        failed.join(", ")
    );
}

/// Expands to one `#[test]` per conformance case, each calling `factory()` (an async closure or function
/// returning `Arc<dyn apiserver_storage::Storage>`) for a fresh store. Needs the `testing` feature of
/// `apiserver-storage` (or of `apiserver`, which re-exports it).
///
/// ```ignore
/// apiserver_storage::storage_conformance!(|| async { apiserver_storage::MemoryStorage::new().into_dyn() });
/// ```
#[macro_export]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
macro_rules! storage_conformance {
    ($factory:expr) => {
        $crate::__storage_conformance_tests!(
            $factory;
            create,
            create_with_key_exist,
            get,
            get_list_non_recursive,
            get_list_recursive_prefix,
            key_schema,
            conditional_delete,
            delete_with_suggestion,
            delete_with_suggestion_and_conflict,
            delete_with_suggestion_of_deleted_object,
            preconditional_delete_with_suggestion,
            validate_deletion_with_suggestion,
            guaranteed_update,
            guaranteed_update_checks_stored_data,
            guaranteed_update_keep,
            guaranteed_update_with_conflict,
            guaranteed_update_with_suggestion_and_conflict,
            guaranteed_update_preconditions,
            guaranteed_update_error_passthrough,
            list,
            list_resource_version_match,
            list_continuation,
            list_continuation_with_filter,
            list_inconsistent_continuation,
            list_paging,
            list_pagination_rare_object,
            list_continue_token_format,
            list_tampered_continue_token,
            consistent_list,
            namespace_scoped_list,
            stats,
            compact_revision,
            compaction_expires_old_revisions,
            concurrent_cas_increments,
            concurrent_create_one_wins,
            watch,
            watch_from_zero,
            watch_from_non_zero,
            watch_drop_releases_writers,
            delete_triggers_watch,
            watch_delete_event_object_has_latest_rv,
            cluster_scoped_watch,
            namespace_scoped_watch,
            watch_predicate_transitions,
            watch_initialization_signal,
            watch_initial_events_at_revision,
            send_initial_events_false,
            progress_notify,
            watch_sees_every_revision_in_order,
            linearizable_history,
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __storage_conformance_tests {
    ($factory:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::testing::run(async {
                    let store: ::std::sync::Arc<dyn $crate::Storage> = ($factory)().await;
                    $crate::testing::cases::$name(store).await;
                });
            }
        )*

        /// Fails when the macro and the case table disagree.
        #[test]
        fn conformance_case_list_is_complete() {
            let listed: &[&str] = &[$(stringify!($name)),*];
            let all: ::std::vec::Vec<&str> =
                $crate::testing::CASES.iter().map(|(name, _)| *name).collect();
            assert_eq!(listed, all.as_slice());
        }
    };
}
