//! `--scale` at toy sizes, with the pizza server binary as its own process: the store grows to each size through
//! the server, the server restarts on it, and the reads find every object (no error among GETs spread over the
//! whole store or pages walked through it).

use apiserver_bench::Sizes;
use apiserver_bench::scale;
use apiserver_bench::target::default_server_binary;

#[tokio::test(flavor = "multi_thread")]
async fn scale_grows_one_store_and_reads_it_after_each_restart() {
    let binary = default_server_binary()
        .expect("the pizza-apiserver binary next to the tests (cargo build -p pizza-apiserver)");
    let mut sizes = Sizes::quick();
    sizes.gets = 300;
    sizes.lists = 2;
    let steps = scale::run(&binary, &[1200, 300], &sizes)
        .await
        .expect("the scale run completes");
    // Sizes run in ascending order, each reached by creating only what is missing: a tenth more were created
    // at 300 while the watchers followed.
    assert_eq!(
        steps.iter().map(|s| s.objects).collect::<Vec<_>>(),
        [300, 1200]
    );
    assert_eq!(steps[0].create.requests, 300);
    assert_eq!(steps[0].watched.requests, 30);
    assert_eq!(steps[1].create.requests, 870);
    assert_eq!(steps[1].watched.requests, 120);
    assert_eq!(steps[1].objects_after, 1320);
    for step in &steps {
        // Every watcher saw every create made while it followed.
        let watched = &step.watched.extra;
        assert_eq!(
            watched["events_delivered"], watched["events_expected"],
            "{watched:?}"
        );
        assert_eq!(
            watched["events_expected"],
            serde_json::json!(step.watched.requests * scale::WATCHERS)
        );
        assert!(step.watched_peak_rss_mib.is_some());
        for phase in [&step.create, &step.get, &step.page, &step.watched] {
            assert!(
                phase.errors.is_empty(),
                "{} objects: {phase:?}",
                step.objects
            );
        }
        assert_eq!(step.get.requests, 300);
        // Twenty pages per walk: 300 objects are one page, 1,200 are three, walked again and again.
        assert_eq!(step.page.requests, 2 * 20);
        assert!(step.startup_seconds > 0.0 && step.ready_rss_mib.is_some());
        assert!(
            step.object_bytes > 256,
            "one topping carries a 256-byte payload"
        );
    }
    let table = scale::table(&steps);
    assert_eq!(table.lines().count(), 2 + steps.len(), "{table}");
}
