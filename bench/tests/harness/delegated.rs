//! `--auth both` in quick mode against a real kube-apiserver and etcd (`$KUBEBUILDER_ASSETS`, as the envtest tests):
//! the delegated row runs every phase as the load's ServiceAccount without an error, and once warmed its creates
//! and GETs cost no SubjectAccessReview (quick mode's objects fit in the server's access-review cache).

use apiserver_bench::target::Backend;
use apiserver_bench::{Auth, Config, Mode, Sizes, run};

#[tokio::test(flavor = "multi_thread")]
async fn delegated_row_runs_as_a_service_account_through_warm_caches() {
    let sizes = Sizes::quick();
    let config = Config {
        backends: vec![Backend::Memory],
        mode: Mode::InProcess,
        sizes: sizes.clone(),
        http1: false,
        no_raw: true,
        auth: vec![Auth::Static, Auth::Delegated],
    };
    let report = run(&config).await.expect("the run completes");
    assert_eq!(report.backends.len(), 2);
    let (static_row, delegated) = (&report.backends[0], &report.backends[1]);
    assert_eq!(
        (static_row.auth, delegated.auth),
        (Auth::Static, Auth::Delegated)
    );
    assert_eq!(delegated.backend, "memory, delegated auth");
    assert!(static_row.reviews.is_none());
    for backend in &report.backends {
        for phase in &backend.phases {
            assert!(phase.errors.is_empty(), "{}: {phase:?}", backend.backend);
        }
    }
    for phase in &delegated.phases[..2] {
        assert_eq!(
            phase.extra["access_reviews"], 0,
            "{}: the warm-up asked every question of this phase already",
            phase.name
        );
        // The token's answer lives 10 s: it may expire once during a slow phase, and then every worker can miss.
        assert!(
            phase.extra["token_reviews"]
                .as_u64()
                .is_some_and(|n| n as usize <= sizes.concurrency),
            "{phase:?}"
        );
    }
    let reviews = delegated.reviews.expect("the delegated row counts reviews");
    assert!(reviews.token_reviews >= 1, "{reviews:?}");
    // At least the warm-up's GET of every name, its dry-run create and list.
    assert!(
        reviews.subject_access_reviews > sizes.objects,
        "{reviews:?}"
    );
    let table = report.table();
    assert!(
        table.contains("## memory, delegated auth") && table.contains("delegated vs static"),
        "{table}"
    );
}
