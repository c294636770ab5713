//! The harness's quick mode end to end, with the pizza server in process on memory and SQLite: every phase runs
//! and produces sane numbers. No thresholds on time.

use apiserver_bench::target::Backend;
use apiserver_bench::{Auth, Config, Mode, Sizes, run};

#[tokio::test(flavor = "multi_thread")]
async fn quick_run_produces_every_phase() {
    let config = Config {
        backends: vec![Backend::Memory, Backend::Sqlite],
        mode: Mode::InProcess,
        sizes: Sizes::quick(),
        http1: false,
        no_raw: false,
        auth: vec![Auth::Static],
    };
    let report = run(&config).await.expect("the run completes");
    assert_eq!(report.backends.len(), 2);
    for backend in &report.backends {
        let names: Vec<&str> = backend.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "create",
                "get",
                "get (rv=0)",
                "get (rv=N, not older)",
                "list (first, encodes every item)",
                "list (rv unset)",
                "list (rv=0)",
                "list (rv=0, gzip)",
                "list (rv=N, exact)",
                "list (pages of 500)",
                "update (conflicts)",
                "watch latency",
                "watch fan-out (8 watchers)",
                "delete"
            ],
            "{}",
            backend.backend
        );
        for phase in &backend.phases {
            assert!(
                phase.requests > 0 && phase.per_second > 0.0,
                "{}: {phase:?}",
                backend.backend
            );
            assert!(phase.errors.is_empty(), "{}: {phase:?}", backend.backend);
            assert!(phase.p50_ms <= phase.p99_ms && phase.p99_ms <= phase.max_ms);
        }
        let phase = |name: &str| {
            backend
                .phases
                .iter()
                .find(|p| p.name == name)
                .unwrap_or_else(|| panic!("no phase {name}"))
        };
        let conflicts = phase("update (conflicts)");
        assert_eq!(
            conflicts.extra["lost_updates"], 0.0,
            "no acknowledged update may be lost"
        );
        assert_eq!(
            conflicts.extra["acknowledged"],
            (Sizes::quick().updaters * Sizes::quick().increments) as u64
        );
        let fan_out = phase("watch fan-out (8 watchers)");
        assert_eq!(
            fan_out.extra["events_delivered"],
            fan_out.extra["events_expected"]
        );
        assert_eq!(
            phase("delete").requests,
            phase("create").requests + 1 + 2 * Sizes::quick().watch_events
        );
    }
    assert!(
        report.backends[0].raw.is_none(),
        "memory has no raw baseline"
    );
    let raw = report.backends[1]
        .raw
        .as_ref()
        .expect("SQLite has a raw baseline");
    assert_eq!(raw.requests, Sizes::quick().objects);
    assert!(
        report.backends[1]
            .create_to_raw_ratio
            .is_some_and(|r| r > 0.0)
    );
    let table = report.table();
    assert!(
        table.contains("## sqlite") && table.contains("raw sqlite inserts"),
        "{table}"
    );
    // The one goal that applies at this size, in process (no server CPU of its own): memory's
    // unset-resourceVersion LIST against rv=0.
    let goals: Vec<&str> = report.backends[0]
        .goals
        .iter()
        .map(|g| g.what.as_str())
        .collect();
    assert!(
        goals.len() == 1 && goals[0].starts_with("LIST with resourceVersion unset"),
        "{goals:?}"
    );
    assert!(
        table.contains("| goal | measured | bound | met |"),
        "{table}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert!(json["machine"]["cores"].as_u64().is_some_and(|c| c > 0));

    // The picture of the run: every phase named, a bar per backend and phase in each of its two panels.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.svg");
    apiserver_bench::plot::write_svg(&report, &path).expect("the plot is drawn");
    let svg = std::fs::read_to_string(&path).unwrap();
    for phase in &report.backends[0].phases {
        assert!(
            svg.contains(&phase.name.replace('>', "&gt;")),
            "{} is not named in the plot",
            phase.name
        );
    }
    assert!(svg.contains("memory") && svg.contains("sqlite"));
    let bars = report.backends.len() * report.backends[0].phases.len() * 2;
    assert!(
        svg.matches("<rect").count() >= bars,
        "{} rectangles for {bars} bars",
        svg.matches("<rect").count()
    );
}
