//! The benchmark harness: the pizza server (or any server of the same API) under fixed load phases, next to the
//! raw backend doing the same writes, with latencies, throughput, error codes and the server's CPU and memory.
//!
//! `target` starts or reaches the server, `client` speaks HTTPS to it, `phases` are the load, `raw` the
//! physical limits of each backend, `report` the table and JSON, `delegated` the core cluster a server with
//! delegated authentication and authorization asks, `transfer` the backup/restore/migrate throughput, `scale` reads
//! as a store grows, `goals` the performance goals a run is checked against, `progress` where a run is (stderr),
//! `plot` the run as a picture.

pub mod client;
pub mod delegated;
pub mod goals;
pub mod otlp;
pub mod phases;
pub mod plot;
pub mod progress;
pub mod raw;
pub mod report;
pub mod scale;
pub mod target;
pub mod transfer;

/// How big a run is.
#[derive(Clone, Debug)]
pub struct Sizes {
    /// Objects created (and later deleted).
    pub objects: usize,
    /// Concurrent clients in each phase.
    pub concurrency: usize,
    /// Requests of the GET phase.
    pub gets: usize,
    /// LIST requests per resourceVersion variant.
    pub lists: usize,
    /// Read-modify-write increments per client in the conflict phase.
    pub increments: usize,
    /// Clients in the conflict phase.
    pub updaters: usize,
    /// Writes measured by the watch phases.
    pub watch_events: usize,
    /// Watchers of the fan-out phase.
    pub watchers: usize,
    /// Size of the payload written by every object and raw write.
    pub value_bytes: usize,
}

impl Sizes {
    /// Finishes in well under a minute on two cores (CI).
    pub fn quick() -> Self {
        Sizes {
            objects: 200,
            concurrency: 8,
            gets: 500,
            lists: 5,
            increments: 10,
            updaters: 4,
            watch_events: 20,
            watchers: 8,
            value_bytes: 256,
        }
    }

    /// The full run of `bench/README.md`'s table.
    pub fn full() -> Self {
        Sizes {
            objects: 2000,
            concurrency: 16,
            gets: 10_000,
            lists: 200,
            increments: 50,
            updaters: 8,
            watch_events: 200,
            watchers: 50,
            value_bytes: 256,
        }
    }
}

use std::path::PathBuf;
use std::sync::Arc;

use delegated::{CoreCluster, Reviews};
use phases::ReadFrom;
use report::{BackendReport, Machine, PhaseResult, Report};
use target::{Backend, Service, Target};

/// How the server under test is run.
#[derive(Clone, Debug)]
pub enum Mode {
    /// Inside the harness (no CPU or memory figures).
    InProcess,
    /// The pizza-apiserver binary as a child process.
    Process(PathBuf),
    /// A server that is already running, reached through this kubeconfig.
    Remote(PathBuf),
}

/// Who the load is and who decides what it may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Auth {
    /// The server standalone: the load uses the admin token the server wrote into its kubeconfig (a lookup in
    /// the server's memory, no authorizer); with `--kubeconfig`, whatever credentials that kubeconfig holds.
    Static,
    /// The server delegates to a real kube-apiserver on loopback: the load is a ServiceAccount whose token the
    /// server has checked by TokenReview and whose requests it has authorized by SubjectAccessReview, both
    /// cached; the caches are warmed before the phases.
    Delegated,
    /// As `Delegated`, with one ValidatingAdmissionPolicy (and its binding) configured in the cluster, on creates
    /// and updates of pizzas and toppings.
    Policy,
    /// As `Policy`, with a validating webhook as well (answering at once, from the harness).
    Admission,
}

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub backends: Vec<Backend>,
    pub mode: Mode,
    pub sizes: Sizes,
    /// HTTP/1.1 instead of HTTP/2.
    pub http1: bool,
    /// Skip the raw baselines.
    pub no_raw: bool,
    /// Each backend runs once per entry, in this order (`[Static]` unless asked otherwise).
    pub auth: Vec<Auth>,
}

/// Runs every phase on every backend, once per authentication of [`Config::auth`].
pub async fn run(config: &Config) -> Result<Report, String> {
    let delegating = config
        .auth
        .iter()
        .any(|a| matches!(a, Auth::Delegated | Auth::Policy | Auth::Admission));
    if delegating && !matches!(config.mode, Mode::Process(_) | Mode::InProcess) {
        return Err(
            "delegated authentication needs a server this harness starts: drop --kubeconfig".into(),
        );
    }
    // Started before any server, so that every row of the run shares the machine with it alike.
    let core = if delegating {
        Some(CoreCluster::start().await?)
    } else {
        None
    };
    let auths = if config.auth.is_empty() {
        vec![Auth::Static]
    } else {
        config.auth.clone()
    };
    let mut backends = Vec::new();
    let targets: Vec<Option<Backend>> = match config.mode {
        Mode::Remote(_) => vec![None],
        _ => config.backends.iter().copied().map(Some).collect(),
    };
    for backend in targets {
        for (i, &auth) in auths.iter().enumerate() {
            // A fresh service per row: no row inherits another's data.
            let service = match backend {
                Some(b) => Service::start(b).await,
                None => Service::None,
            };
            let mut args = backend.map(|b| service.server_args(b)).unwrap_or_default();
            let core = match auth {
                Auth::Static => None,
                Auth::Delegated | Auth::Policy | Auth::Admission => core.as_ref(),
            };
            if let Some(core) = core {
                args.extend(core.server_args().await?);
                if matches!(auth, Auth::Policy | Auth::Admission) {
                    core.add_admission(auth == Auth::Admission).await?;
                }
            }
            let reviews_before = match core {
                Some(core) => Some(core.reviews().await),
                None => None,
            };
            let mut target = match &config.mode {
                Mode::InProcess => Target::in_process(&args).await?,
                Mode::Process(binary) => Target::process(binary, &args).await?,
                Mode::Remote(kubeconfig) => Target::remote(kubeconfig).await?,
            };
            if let Some(core) = core {
                // The server's kubeconfig has its URL and CA but no credentials when it delegates.
                target.endpoint.token = Some(core.loader_token().await?);
            }
            let mut name = backend
                .map(|b| b.name().to_string())
                .unwrap_or_else(|| target.endpoint.url.clone());
            match auth {
                Auth::Delegated => name.push_str(", delegated auth"),
                Auth::Policy => name.push_str(", delegated auth, policy"),
                Auth::Admission => name.push_str(", delegated auth, policy + webhook"),
                Auth::Static => {}
            }
            let row = Row {
                name: &name,
                auth,
                core,
                warm: delegating,
                // The raw baseline does not depend on the server's authentication: once per backend.
                raw: !config.no_raw && i == 0,
            };
            let result = measure(&target, &service, &row, config).await;
            target.stop().await;
            if let (Some(core), Auth::Policy | Auth::Admission) = (core, auth) {
                core.remove_admission(auth == Auth::Admission).await?;
            }
            let mut report = result?;
            if let (Some(core), Some(before)) = (core, reviews_before) {
                report.reviews = Some(core.reviews().await - before);
            }
            backends.push(report);
        }
    }
    let mut versions = std::collections::BTreeMap::new();
    versions.insert(
        "apiserver-bench".into(),
        env!("CARGO_PKG_VERSION").to_string(),
    );
    for (name, command) in [
        // The etcd the harness starts: `$ETCD_BIN`, else `etcd` on PATH.
        ("etcd", "\"${ETCD_BIN:-etcd}\" --version"),
        ("postgres", "/usr/lib/postgresql/15/bin/postgres --version"),
        ("kubectl", "kubectl version --client"),
    ] {
        if let Ok(out) = std::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .output()
            && out.status.success()
        {
            let text = String::from_utf8_lossy(&out.stdout);
            versions.insert(
                name.to_string(),
                text.lines().next().unwrap_or_default().trim().to_string(),
            );
        }
    }
    if delegating
        && let Ok(dir) = apiserver::envtest::assets_dir()
        && let Ok(out) = std::process::Command::new(dir.join("kube-apiserver"))
            .arg("--version")
            .output()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        versions.insert("kube-apiserver".into(), text.trim().to_string());
    }
    Ok(Report {
        date: chrono::Utc::now().to_rfc3339(),
        machine: Machine::read(),
        versions,
        mode: format!(
            "{:?}{}",
            config.mode,
            if config.http1 {
                ", HTTP/1.1"
            } else {
                ", HTTP/2"
            }
        ),
        backends,
    })
}

/// One row of the report: a backend under one authentication.
struct Row<'a> {
    name: &'a str,
    auth: Auth,
    /// The core cluster the server delegates to, for `Auth::Delegated`.
    core: Option<&'a CoreCluster>,
    /// Warm up before the phases (every row of a run that has a delegated one, so rows compare alike).
    warm: bool,
    /// Run the raw baseline after the phases.
    raw: bool,
}

async fn measure(
    target: &Target,
    service: &Service,
    row: &Row<'_>,
    config: &Config,
) -> Result<BackendReport, String> {
    let client = target.endpoint.client(config.http1)?;
    let watch_clients = (0..config
        .sizes
        .watchers
        .div_ceil(phases::WATCHES_PER_CONNECTION))
        .map(|_| target.endpoint.client(config.http1))
        .collect::<Result<Vec<_>, _>>()?;
    let load = Arc::new(phases::Load::new(
        client,
        watch_clients,
        target.endpoint.url.clone(),
        config.sizes.clone(),
        progress::Progress::new(row.name),
    ));
    let pid = target.pid;
    let backend_pid = service.process();
    let idle_rss_mib = pid.and_then(|p| report::memory_mib(p, "VmRSS"));
    if row.warm {
        load.warm().await?;
    }
    let core = row.core;
    let mut results = Vec::new();
    macro_rules! phase {
        ($e:expr) => {{
            let reviews_before = match core {
                Some(core) => Some(core.reviews().await),
                None => None,
            };
            let core_cpu_before = core.and_then(CoreCluster::cpu_seconds);
            let before = pid.and_then(report::cpu_seconds);
            let backend_before = backend_pid.and_then(report::cpu_seconds);
            let mut r: PhaseResult = $e;
            if let (Some(p), Some(b)) = (pid, before) {
                r.server_cpu_seconds = report::cpu_seconds(p).map(|a| a - b);
                r.server_peak_rss_mib = report::memory_mib(p, "VmHWM");
            }
            r = r
                .note_cpu(
                    "backend_cpu_s",
                    backend_before,
                    backend_pid.and_then(report::cpu_seconds),
                )
                .note_cpu(
                    "core_cluster_cpu_s",
                    core_cpu_before,
                    core.and_then(CoreCluster::cpu_seconds),
                );
            if let (Some(core), Some(b)) = (core, reviews_before) {
                let Reviews {
                    token_reviews,
                    subject_access_reviews,
                } = core.reviews().await - b;
                r.extra
                    .insert("token_reviews".into(), serde_json::json!(token_reviews));
                r.extra.insert(
                    "access_reviews".into(),
                    serde_json::json!(subject_access_reviews),
                );
            }
            load.progress.finish(&r);
            results.push(r);
        }};
    }
    phase!(load.create().await);
    phase!(load.get(ReadFrom::Latest).await);
    phase!(load.get(ReadFrom::Any).await);
    phase!(load.get(ReadFrom::NotOlderThan).await);
    phase!(load.first_list().await);
    phase!(load.list(ReadFrom::Latest).await);
    phase!(load.list(ReadFrom::Any).await);
    phase!(load.list_gzip().await);
    phase!(load.list(ReadFrom::Exact).await);
    phase!(load.list_pages().await);
    phase!(load.conflicts().await);
    phase!(load.watch_latency(1, "w").await);
    phase!(load.watch_latency(config.sizes.watchers, "f").await);
    phase!(load.delete().await);
    let raw = if !row.raw {
        None
    } else {
        let value = vec![b'x'; config.sizes.value_bytes + 300];
        let before = backend_pid.and_then(report::cpu_seconds);
        baseline_result(service, config, value).await.map(|r| {
            r.note_cpu(
                "backend_cpu_s",
                before,
                backend_pid.and_then(report::cpu_seconds),
            )
        })
    };
    let mut raw_extra = Vec::new();
    if row.raw
        && let Service::Etcd(server) = service
    {
        match raw::etcd_gets(
            server.url(),
            config.sizes.gets,
            config.sizes.objects,
            config.sizes.concurrency,
        )
        .await
        {
            Ok(r) => raw_extra.push(r),
            Err(e) => eprintln!("raw etcd gets failed: {e}"),
        }
    }
    let create_to_raw_ratio = raw
        .as_ref()
        .filter(|r| r.per_second > 0.0)
        .map(|r| results[0].per_second / r.per_second);
    let mut report = BackendReport {
        backend: row.name.to_string(),
        auth: row.auth,
        reviews: None,
        idle_rss_mib,
        phases: results,
        raw,
        raw_extra,
        create_to_raw_ratio,
        goals: Vec::new(),
    };
    report.goals = goals::check(&report, config.sizes.objects, config.sizes.watchers);
    Ok(report)
}

async fn baseline_result(
    service: &Service,
    config: &Config,
    value: Vec<u8>,
) -> Option<PhaseResult> {
    match raw::baseline(
        service,
        config.sizes.objects,
        config.sizes.concurrency,
        value,
    )
    .await?
    {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("raw baseline failed: {e}");
            None
        }
    }
}
