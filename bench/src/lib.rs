//! The benchmark harness: the pizza server (or any server of the same API) under fixed load phases, next to the
//! raw backend doing the same writes, with latencies, throughput, error codes and the server's CPU and memory.
//!
//! `target` starts or reaches the server, `client` speaks HTTPS to it, `phases` are the load, `raw` the
//! physical limits of each backend, `report` the table and JSON, `delegated` the core cluster a server with
//! delegated authentication and authorization asks.

pub mod client;
pub mod delegated;
pub mod phases;
pub mod raw;
pub mod report;
pub mod target;

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

    /// The full run of the README's table.
    pub fn full() -> Self {
        Sizes {
            objects: 2000,
            concurrency: 16,
            gets: 10_000,
            lists: 20,
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
}

/// Runs every phase on every backend.
pub async fn run(config: &Config) -> Result<Report, String> {
    let mut backends = Vec::new();
    let targets: Vec<Option<Backend>> = match config.mode {
        Mode::Remote(_) => vec![None],
        _ => config.backends.iter().copied().map(Some).collect(),
    };
    for backend in targets {
        let service = match backend {
            Some(b) => Service::start(b).await,
            None => Service::None,
        };
        let args = backend.map(|b| service.server_args(b)).unwrap_or_default();
        let target = match &config.mode {
            Mode::InProcess => Target::in_process(&args).await?,
            Mode::Process(binary) => Target::process(binary, &args).await?,
            Mode::Remote(kubeconfig) => Target::remote(kubeconfig).await?,
        };
        let name = backend
            .map(|b| b.name().to_string())
            .unwrap_or_else(|| target.endpoint.url.clone());
        let report = measure(&target, &service, &name, config).await?;
        target.stop().await;
        backends.push(report);
    }
    let mut versions = std::collections::BTreeMap::new();
    versions.insert(
        "apiserver-bench".into(),
        env!("CARGO_PKG_VERSION").to_string(),
    );
    for (name, command) in [
        ("etcd", "etcd --version"),
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

async fn measure(
    target: &Target,
    service: &Service,
    name: &str,
    config: &Config,
) -> Result<BackendReport, String> {
    let client = target.endpoint.client(config.http1)?;
    let load = Arc::new(phases::Load::new(
        client,
        target.endpoint.url.clone(),
        config.sizes.clone(),
    ));
    let pid = target.pid;
    let idle_rss_mib = pid.and_then(|p| report::memory_mib(p, "VmRSS"));
    let mut results = Vec::new();
    macro_rules! phase {
        ($e:expr) => {{
            let before = pid.and_then(report::cpu_seconds);
            let mut r: PhaseResult = $e;
            if let (Some(p), Some(b)) = (pid, before) {
                r.server_cpu_seconds = report::cpu_seconds(p).map(|a| a - b);
                r.server_peak_rss_mib = report::memory_mib(p, "VmHWM");
            }
            results.push(r);
        }};
    }
    phase!(load.create().await);
    phase!(load.get().await);
    phase!(load.list(None).await);
    phase!(load.list(Some("0")).await);
    phase!(load.conflicts().await);
    phase!(load.watch_latency(1, "w").await);
    phase!(load.watch_latency(config.sizes.watchers, "f").await);
    phase!(load.delete().await);
    let raw = if config.no_raw {
        None
    } else {
        let value = vec![b'x'; config.sizes.value_bytes + 300];
        baseline_result(service, config, value).await
    };
    let mut raw_extra = Vec::new();
    if !config.no_raw
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
    Ok(BackendReport {
        backend: name.to_string(),
        idle_rss_mib,
        phases: results,
        raw,
        raw_extra,
        create_to_raw_ratio,
    })
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
