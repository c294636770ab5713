//! Results: latency percentiles and throughput per phase, the server's CPU and memory from /proc, the machine,
//! and the table and JSON they are written as.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::Auth;
use crate::delegated::Reviews;
use crate::goals::Goal;

/// One phase (or one raw baseline).
#[derive(Clone, Debug, Serialize)]
pub struct PhaseResult {
    pub name: String,
    pub concurrency: usize,
    pub requests: usize,
    pub seconds: f64,
    pub per_second: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Unexpected HTTP status codes and how often they came (0: no response).
    pub errors: BTreeMap<u16, usize>,
    /// CPU seconds the server process used during the phase, when it is a process of its own.
    pub server_cpu_seconds: Option<f64>,
    /// The server's peak RSS (VmHWM) after the phase, in MiB.
    pub server_peak_rss_mib: Option<f64>,
    pub extra: Map<String, Value>,
}

impl PhaseResult {
    /// Notes how many watch events were expected and how many arrived.
    pub fn with_deliveries(mut self, expected: usize, delivered: usize) -> Self {
        self.extra
            .insert("events_expected".into(), serde_json::json!(expected));
        self.extra
            .insert("events_delivered".into(), serde_json::json!(delivered));
        self
    }

    /// Notes, as `key`, the CPU seconds another process used during the phase: `after - before` (e.g. etcd's as
    /// `backend_cpu_s`, the core cluster's as `core_cluster_cpu_s`).
    pub fn note_cpu(mut self, key: &str, before: Option<f64>, after: Option<f64>) -> Self {
        if let (Some(before), Some(after)) = (before, after) {
            self.extra.insert(
                key.into(),
                serde_json::json!(((after - before) * 100.0).round() / 100.0),
            );
        }
        self
    }

    /// A phase that could not run, with why.
    pub fn failed(name: &str, concurrency: usize, ok: u16, error: String) -> Self {
        let mut r = PhaseResult::from_outcomes(name, concurrency, Duration::ZERO, &[], ok);
        r.extra.insert("error".into(), serde_json::json!(error));
        r
    }

    /// Summarises outcomes `(latency, status)`; statuses other than `ok` are counted as errors.
    pub fn from_outcomes(
        name: &str,
        concurrency: usize,
        wall: Duration,
        outcomes: &[(Duration, u16)],
        ok: u16,
    ) -> Self {
        let mut latencies: Vec<f64> = outcomes
            .iter()
            .map(|(d, _)| d.as_secs_f64() * 1000.0)
            .collect();
        latencies.sort_by(|a, b| a.total_cmp(b));
        let percentile = |p: f64| -> f64 {
            if latencies.is_empty() {
                return 0.0;
            }
            let rank = ((p / 100.0) * latencies.len() as f64).ceil() as usize;
            latencies[rank.clamp(1, latencies.len()) - 1]
        };
        let mut errors = BTreeMap::new();
        for (_, status) in outcomes {
            if *status != ok {
                *errors.entry(*status).or_default() += 1;
            }
        }
        let seconds = wall.as_secs_f64();
        PhaseResult {
            name: name.to_string(),
            concurrency,
            requests: outcomes.len(),
            seconds,
            per_second: if seconds > 0.0 {
                outcomes.len() as f64 / seconds
            } else {
                0.0
            },
            p50_ms: percentile(50.0),
            p90_ms: percentile(90.0),
            p99_ms: percentile(99.0),
            max_ms: latencies.last().copied().unwrap_or_default(),
            errors,
            server_cpu_seconds: None,
            server_peak_rss_mib: None,
            extra: Map::new(),
        }
    }
}

/// Everything measured on one backend.
#[derive(Clone, Debug, Serialize)]
pub struct BackendReport {
    pub backend: String,
    /// How the load was authenticated and authorized.
    pub auth: Auth,
    /// With delegated authentication: the reviews the server asked of the core cluster from its start to its stop
    /// (readiness and warm-up included; per phase in the phases' `extra`).
    pub reviews: Option<Reviews>,
    /// The server's RSS once ready and idle, in MiB (when it runs as its own process).
    pub idle_rss_mib: Option<f64>,
    pub phases: Vec<PhaseResult>,
    /// The backend written directly with the same values and concurrency.
    pub raw: Option<PhaseResult>,
    /// Other raw figures of the backend (etcd: reads of one key).
    pub raw_extra: Vec<PhaseResult>,
    /// Server creates/s divided by raw writes/s.
    pub create_to_raw_ratio: Option<f64>,
    /// The performance issue's goals that apply to this backend, as measured here.
    pub goals: Vec<Goal>,
}

/// A whole run.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub date: String,
    pub machine: Machine,
    pub versions: BTreeMap<String, String>,
    pub mode: String,
    pub backends: Vec<BackendReport>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub memory_mib: u64,
    pub cpu: String,
}

impl Machine {
    pub fn read() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .unwrap_or("unknown")
            .trim()
            .to_string();
        let memory_mib = std::fs::read_to_string("/proc/meminfo")
            .unwrap_or_default()
            .lines()
            .find(|l| l.starts_with("MemTotal:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<u64>().ok())
            .unwrap_or(0)
            / 1024;
        Machine {
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_mib,
            cpu,
        }
    }
}

/// CPU seconds (user + system) of a process so far.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// A memory figure of a process from `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MiB.
pub fn memory_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

impl Report {
    /// The human-readable table.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} | {} cores, {} MiB, {} | mode: {}",
            self.date, self.machine.cores, self.machine.memory_mib, self.machine.cpu, self.mode
        );
        for backend in &self.backends {
            let _ = writeln!(
                out,
                "\n## {} (idle RSS {} MiB)\n| phase | conc | requests | req/s | p50 ms | p90 ms | p99 ms | max ms | errors | server CPU s | peak RSS MiB | notes |\n|---|---|---|---|---|---|---|---|---|---|---|---|",
                backend.backend,
                opt(backend.idle_rss_mib, 1)
            );
            for p in backend
                .phases
                .iter()
                .chain(backend.raw.iter())
                .chain(backend.raw_extra.iter())
            {
                let errors = if p.errors.is_empty() {
                    "0".to_string()
                } else {
                    p.errors
                        .iter()
                        .map(|(c, n)| format!("{c}×{n}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                let notes: Vec<String> = p.extra.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {} | {} | {} | {} |",
                    p.name,
                    p.concurrency,
                    p.requests,
                    p.per_second,
                    p.p50_ms,
                    p.p90_ms,
                    p.p99_ms,
                    p.max_ms,
                    errors,
                    opt(p.server_cpu_seconds, 2),
                    opt(p.server_peak_rss_mib, 1),
                    notes.join(" ")
                );
            }
            if let Some(ratio) = backend.create_to_raw_ratio {
                let _ = writeln!(out, "\nserver creates/s ÷ raw writes/s = {ratio:.2}");
            }
            if !backend.goals.is_empty() {
                let _ = writeln!(
                    out,
                    "\n| goal | measured | bound | met |\n|---|---|---|---|"
                );
                for goal in &backend.goals {
                    let _ = writeln!(
                        out,
                        "| {} | {:.2} | {} {} | {} |",
                        goal.what,
                        goal.measured,
                        goal.bound,
                        goal.target,
                        if goal.met { "yes" } else { "no" }
                    );
                }
            }
            if let Some(r) = backend.reviews {
                let _ = writeln!(
                    out,
                    "\nreviews the server asked of kube-apiserver from start to stop (warm-up included): {} TokenReviews, {} SubjectAccessReviews",
                    r.token_reviews, r.subject_access_reviews
                );
                let cold: Vec<String> = backend
                    .phases
                    .iter()
                    .filter(|p| p.name == "create" || p.name == "get")
                    .filter_map(|p| {
                        let n = p.extra.get("access_reviews")?.as_u64()?;
                        (n > 0).then(|| format!("{} {n}", p.name))
                    })
                    .collect();
                if !cold.is_empty() {
                    let _ = writeln!(
                        out,
                        "warm-up did not hold, SubjectAccessReviews in: {} (the server's access-review cache has \
                         one entry per verb and name: are there more names than it holds?)",
                        cold.join(", ")
                    );
                }
            }
        }
        let comparisons = self.auth_comparisons();
        if !comparisons.is_empty() {
            let _ = writeln!(
                out,
                "\n## delegated vs static auth, same run\n| backend | phase | static req/s | delegated req/s | delegated ÷ static | static p99 ms | delegated p99 ms |\n|---|---|---|---|---|---|---|"
            );
            for line in comparisons {
                let _ = writeln!(out, "{line}");
            }
        }
        out
    }

    /// Table rows comparing each delegated backend's create and get phases with the same backend's static row.
    fn auth_comparisons(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for delegated in self.backends.iter().filter(|b| b.auth == Auth::Delegated) {
            let base = delegated
                .backend
                .strip_suffix(", delegated auth")
                .unwrap_or(&delegated.backend);
            let Some(static_row) = self
                .backends
                .iter()
                .find(|b| b.auth == Auth::Static && b.backend == base)
            else {
                continue;
            };
            for phase in ["create", "get"] {
                let find = |b: &BackendReport| b.phases.iter().find(|p| p.name == phase).cloned();
                if let (Some(s), Some(d)) = (find(static_row), find(delegated)) {
                    let ratio = if s.per_second > 0.0 {
                        format!("{:.2}", d.per_second / s.per_second)
                    } else {
                        "-".into()
                    };
                    lines.push(format!(
                        "| {base} | {phase} | {:.0} | {:.0} | {ratio} | {:.2} | {:.2} |",
                        s.per_second, d.per_second, s.p99_ms, d.p99_ms
                    ));
                }
            }
        }
        lines
    }
}
