//! The performance issue's goals, checked against one backend's phases of one run: each a figure measured here
//! beside the bound it should keep, so that a run says itself which goals it meets.

use serde::Serialize;

use crate::report::{BackendReport, PhaseResult};

/// The size the list goals were set for (a LIST of 2,000 toppings).
pub const LIST_GOAL_OBJECTS: usize = 2000;

/// One goal and what this run measured for it.
#[derive(Clone, Debug, Serialize)]
pub struct Goal {
    pub what: String,
    pub measured: f64,
    /// `≥` or `≤`.
    pub bound: &'static str,
    pub target: f64,
    pub met: bool,
}

impl Goal {
    fn at_least(what: impl Into<String>, measured: f64, target: f64) -> Self {
        Goal {
            what: what.into(),
            measured,
            bound: "≥",
            target,
            met: measured >= target,
        }
    }

    fn at_most(what: impl Into<String>, measured: f64, target: f64) -> Self {
        Goal {
            what: what.into(),
            measured,
            bound: "≤",
            target,
            met: measured <= target,
        }
    }
}

fn phase<'a>(report: &'a BackendReport, name: &str) -> Option<&'a PhaseResult> {
    report
        .phases
        .iter()
        .find(|p| p.name == name && p.errors.is_empty() && p.requests > 0)
}

/// Server CPU microseconds per watch event delivered in `phase` (every watcher's copy counted).
fn cpu_per_delivered_event(phase: &PhaseResult) -> Option<f64> {
    let delivered = phase.extra.get("events_delivered")?.as_f64()?;
    (delivered > 0.0).then_some(phase.server_cpu_seconds? * 1e6 / delivered)
}

/// CPU per write of the server and etcd in the create phase, and of etcd per raw transaction: on a machine where
/// all of them and the load share the cores, what bounds the creates ÷ raw ratio.
fn create_cpu(report: &BackendReport) -> Option<String> {
    let per_write = |cpu: Option<f64>, p: &PhaseResult| {
        cpu.filter(|_| p.requests > 0)
            .map(|s| s * 1e6 / p.requests as f64)
    };
    let create = phase(report, "create")?;
    let raw = report.raw.as_ref()?;
    let backend_cpu = |p: &PhaseResult| p.extra.get("backend_cpu_s").and_then(|v| v.as_f64());
    Some(format!(
        " (CPU per create: server {:.0} µs, etcd {:.0} µs; etcd per raw transaction {:.0} µs)",
        per_write(create.server_cpu_seconds, create)?,
        per_write(backend_cpu(create), create)?,
        per_write(backend_cpu(raw), raw)?
    ))
}

/// The goals that apply to `report` (a backend's phases with `objects` objects, watched by `watchers` in the
/// fan-out phase).
pub fn check(report: &BackendReport, objects: usize, watchers: usize) -> Vec<Goal> {
    let mut goals = Vec::new();
    // The row's name starts with the backend's ("etcd", "rocksdb, delegated auth").
    let backend = report.backend.split([',', ' ']).next().unwrap_or_default();
    let cached = phase(report, "list (rv=0)");
    if objects == LIST_GOAL_OBJECTS
        && let Some(list) = cached
    {
        goals.push(Goal::at_least(
            "LISTs of 2,000 from the cache (rv=0) per second",
            list.per_second,
            900.0,
        ));
        goals.push(Goal::at_most(
            "LIST of 2,000 from the cache (rv=0), p50 ms",
            list.p50_ms,
            4.0,
        ));
    }
    let list_peak = report
        .phases
        .iter()
        .filter(|p| p.name.starts_with("list"))
        .filter_map(|p| p.server_peak_rss_mib)
        .reduce(f64::max);
    if objects == LIST_GOAL_OBJECTS
        && let Some(peak) = list_peak
    {
        goals.push(Goal::at_most(
            "server peak RSS through the list phases, MiB",
            peak,
            60.0,
        ));
    }
    if matches!(backend, "memory" | "rocksdb")
        && let (Some(unset), Some(cached)) = (phase(report, "list (rv unset)"), cached)
        && cached.per_second > 0.0
    {
        // "As fast as": within the noise of one run's phases.
        goals.push(Goal::at_least(
            "LIST with resourceVersion unset ÷ rv=0, per second",
            unset.per_second / cached.per_second,
            0.9,
        ));
    }
    if backend == "etcd"
        && let Some(ratio) = report.create_to_raw_ratio
    {
        goals.push(Goal::at_least(
            format!(
                "creates ÷ raw etcd create-if-absent transactions{}",
                create_cpu(report).unwrap_or_default()
            ),
            ratio,
            0.8,
        ));
    }
    if backend == "rocksdb"
        && let Some(idle) = report.idle_rss_mib
    {
        goals.push(Goal::at_most("idle RSS, MiB", idle, 25.0));
    }
    let fan_out = format!("watch fan-out ({watchers} watchers)");
    if let (Some(one), Some(many)) = (phase(report, "watch latency"), phase(report, &fan_out))
        && let (Some(one), Some(many)) =
            (cpu_per_delivered_event(one), cpu_per_delivered_event(many))
        && one > 0.0
    {
        goals.push(Goal::at_most(
            format!(
                "server CPU per delivered event, {watchers} watchers ÷ 1 ({many:.1} µs ÷ {one:.1} µs; one \
                 watcher's event carries its write)"
            ),
            many / one,
            2.0,
        ));
    }
    goals
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Auth;

    fn phase(name: &str, per_second: f64, cpu: f64, delivered: Option<usize>) -> PhaseResult {
        let outcomes = vec![(Duration::from_millis(3), 200); 10];
        let mut p = PhaseResult::from_outcomes(name, 4, Duration::from_secs(1), &outcomes, 200);
        p.per_second = per_second;
        p.server_cpu_seconds = Some(cpu);
        p.server_peak_rss_mib = Some(50.0);
        match delivered {
            Some(n) => p.with_deliveries(n, n),
            None => p,
        }
    }

    fn report(backend: &str) -> BackendReport {
        BackendReport {
            backend: backend.into(),
            auth: Auth::Static,
            reviews: None,
            idle_rss_mib: Some(30.0),
            phases: vec![
                phase("list (rv unset)", 800.0, 0.1, None),
                phase("list (rv=0)", 1000.0, 0.1, None),
                phase("watch latency", 100.0, 0.1, Some(200)),
                phase("watch fan-out (50 watchers)", 100.0, 1.0, Some(10_000)),
            ],
            raw: None,
            raw_extra: Vec::new(),
            create_to_raw_ratio: Some(0.5),
            goals: Vec::new(),
        }
    }

    #[test]
    fn goals_are_measured_against_their_bounds() {
        let goals = check(&report("rocksdb"), LIST_GOAL_OBJECTS, 50);
        let find = |what: &str| goals.iter().find(|g| g.what.starts_with(what)).unwrap();
        assert!(find("LISTs of 2,000").met);
        assert!(find("LIST of 2,000 from the cache (rv=0), p50").met);
        assert!(find("server peak RSS").met);
        let unset = find("LIST with resourceVersion unset");
        assert!((unset.measured - 0.8).abs() < 1e-9 && !unset.met);
        assert!(!find("idle RSS").met);
        // 1 s ÷ 10,000 = 100 µs against 0.1 s ÷ 200 = 500 µs.
        let fan_out = find("server CPU per delivered event");
        assert!((fan_out.measured - 0.2).abs() < 1e-9 && fan_out.met);
        assert!(!goals.iter().any(|g| g.what.starts_with("creates")));
    }

    #[test]
    fn goals_follow_the_backend_and_size() {
        let mut etcd = report("etcd");
        let mut create = phase("create", 5000.0, 0.2, None);
        create.requests = 2000;
        create.extra.insert("backend_cpu_s".into(), 0.3.into());
        etcd.phases.insert(0, create);
        let mut raw = phase("raw etcd txn creates", 10000.0, 0.0, None);
        raw.requests = 2000;
        raw.extra.insert("backend_cpu_s".into(), 0.2.into());
        etcd.raw = Some(raw);
        let etcd = check(&etcd, 200, 50);
        let creates = etcd.iter().find(|g| g.what.starts_with("creates")).unwrap();
        assert!(!creates.met);
        assert!(
            creates.what.ends_with(
                "(CPU per create: server 100 µs, etcd 150 µs; etcd per raw transaction 100 µs)"
            ),
            "{}",
            creates.what
        );
        assert!(!etcd.iter().any(|g| g.what.starts_with("LIST")));
        assert!(!etcd.iter().any(|g| g.what.starts_with("idle RSS")));
    }
}
