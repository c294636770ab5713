//! `--scale N,N,...`: whether reads stay flat as a store grows. One RocksDB store is grown to each size in turn
//! through the server (creates at the run's concurrency); at each size the server is restarted on it (the time
//! until it is ready again is the watch cache's fill from the store), then measured: its RSS, GETs of names spread
//! over the whole store, and `limit=500` pages, each page one request. The ratios to the smallest size are the
//! issue's figures: a GET's p99 should stay within 2× and a page should not depend on the store's size. Last, 100
//! watchers follow while more objects are created (a tenth of the store's, at most 2,000), and the server's peak
//! RSS then is set against the store's size (the objects' JSON): the issue asks for less than 2.5×.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::phases::Load;
use crate::progress::Progress;
use crate::report::{PhaseResult, memory_mib};
use crate::target::{Backend, Service, Target};
use crate::{Sizes, phases};

/// What was measured at one size.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Step {
    /// Objects in the store.
    pub objects: usize,
    /// The creates that grew the store to this size.
    pub create: PhaseResult,
    /// From the server's start on the grown store until `/readyz` answered.
    pub startup_seconds: f64,
    /// The server's RSS once ready, in MiB.
    pub ready_rss_mib: Option<f64>,
    /// The server's RSS after the reads, in MiB.
    pub rss_after_reads_mib: Option<f64>,
    pub get: PhaseResult,
    pub page: PhaseResult,
    /// The size of one object as the server answers it in JSON (about what it stores).
    pub object_bytes: usize,
    /// Creates while [`WATCHERS`] watchers follow.
    pub watched: PhaseResult,
    /// The server's largest RSS seen during `watched`, in MiB.
    pub watched_peak_rss_mib: Option<f64>,
    /// Objects in the store after `watched`.
    pub objects_after: usize,
}

/// Watchers that follow the creates of the last phase at each size.
pub const WATCHERS: usize = 100;
/// Objects created while they follow: a tenth of the store's, at most this many.
const WATCHED_CREATES: usize = 2_000;

/// Pages each client walks before it starts again from the first.
const PAGES_PER_WALK: usize = 20;

/// Grows one RocksDB store through each of `steps` (ascending) and measures at each.
pub async fn run(binary: &Path, steps: &[usize], sizes: &Sizes) -> Result<Vec<Step>, String> {
    let mut steps = steps.to_vec();
    steps.sort_unstable();
    steps.dedup();
    let service = Service::start(Backend::Rocksdb).await;
    // The controllers write pizzas' status; this store holds toppings only.
    let mut args = service.server_args(Backend::Rocksdb);
    args.push("--controllers=-pizza-cost,-oven".into());
    let mut target = Target::process(binary, &args).await?;
    let mut created = 0;
    let mut results = Vec::new();
    for objects in steps {
        let load = load(&target, sizes, &format!("rocksdb, {objects} objects"))?;
        let create = load
            .create_range(&format!("create to {objects}"), created..objects)
            .await;
        load.progress.finish(&create);
        if !create.errors.is_empty() {
            target.stop().await;
            return Err(format!("creates failed: {:?}", create.errors));
        }
        let (restarted, startup) = target
            .restart(binary, &args, startup_allowance(objects))
            .await?;
        target = restarted;
        let ready_rss_mib = target.pid.and_then(|p| memory_mib(p, "VmRSS"));
        let load = load_after_restart(&target, sizes, objects)?;
        let object_bytes = load.object_bytes("t-0").await;
        let get = load.get_spread(objects).await;
        load.progress.finish(&get);
        let page = load
            .pages(sizes.lists * PAGES_PER_WALK, PAGES_PER_WALK)
            .await;
        load.progress.finish(&page);
        let sampler = RssSampler::start(target.pid);
        let more = WATCHED_CREATES.min(objects / 10);
        created = created.max(objects);
        let watched = load
            .watched_creates(
                &format!("create with {WATCHERS} watchers"),
                WATCHERS,
                created..created + more,
            )
            .await;
        let watched_peak_rss_mib = sampler.stop().await;
        load.progress.finish(&watched);
        created += more;
        results.push(Step {
            objects,
            create,
            startup_seconds: startup.as_secs_f64(),
            ready_rss_mib,
            rss_after_reads_mib: target.pid.and_then(|p| memory_mib(p, "VmRSS")),
            get,
            page,
            object_bytes,
            watched,
            watched_peak_rss_mib,
            objects_after: created,
        });
    }
    target.stop().await;
    Ok(results)
}

fn load(target: &Target, sizes: &Sizes, row: &str) -> Result<Arc<Load>, String> {
    Ok(Arc::new(phases::Load::new(
        target.endpoint.client(false)?,
        Vec::new(),
        target.endpoint.url.clone(),
        sizes.clone(),
        Progress::new(row),
    )))
}

fn load_after_restart(target: &Target, sizes: &Sizes, objects: usize) -> Result<Arc<Load>, String> {
    load(
        target,
        sizes,
        &format!("rocksdb, {objects} objects, restarted"),
    )
}

/// Samples a process's RSS every 50 ms until stopped; keeps the largest.
struct RssSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Option<f64>>,
}

impl RssSampler {
    fn start(pid: Option<u32>) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let pid = pid?;
            let mut peak: Option<f64> = None;
            loop {
                if let Some(rss) = memory_mib(pid, "VmRSS") {
                    peak = Some(peak.map_or(rss, |p| p.max(rss)));
                }
                tokio::select! {
                    _ = &mut stopped => return peak,
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
            }
        });
        RssSampler { stop, task }
    }

    async fn stop(self) -> Option<f64> {
        let _ = self.stop.send(());
        self.task.await.ok().flatten()
    }
}

/// The table: one row per size, with the ratios to the first.
pub fn table(steps: &[Step]) -> String {
    let mut out = String::from(
        "| objects | creates/s | startup s | RSS ready MiB | RSS per object ÷ its JSON | RSS after reads MiB | GET p50 ms | GET p99 ms | GET p99 ÷ first | page p50 ms | page p99 ms | page p99 ÷ first | RSS peak, 100 watchers under creates MiB | ÷ store's JSON | events delivered | errors |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let Some(first) = steps.first() else {
        return out;
    };
    let ratio = |a: f64, b: f64| {
        if b > 0.0 {
            format!("{:.2}", a / b)
        } else {
            "-".into()
        }
    };
    let mib = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
    let mut previous: Option<&Step> = None;
    for s in steps {
        // What the ready server's RSS grew by per object added since the previous size, against one object's JSON.
        let per_object = match (previous, s.ready_rss_mib) {
            (Some(p), Some(rss)) if s.objects > p.objects && s.object_bytes > 0 => p
                .ready_rss_mib
                .map(|before| {
                    let bytes = (rss - before) * 1_048_576.0 / (s.objects - p.objects) as f64;
                    format!("{:.2}", bytes / s.object_bytes as f64)
                })
                .unwrap_or_else(|| "-".into()),
            _ => "-".into(),
        };
        previous = Some(s);
        // The peak RSS while watched, against every stored object's JSON.
        let store_mib = (s.objects_after * s.object_bytes) as f64 / 1_048_576.0;
        let watched_ratio = s
            .watched_peak_rss_mib
            .map(|rss| ratio(rss, store_mib))
            .unwrap_or_else(|| "-".into());
        let delivered = format!(
            "{} of {}",
            s.watched.extra.get("events_delivered").unwrap_or(&0.into()),
            s.watched.extra.get("events_expected").unwrap_or(&0.into())
        );
        let errors: usize = [&s.create, &s.get, &s.page, &s.watched]
            .iter()
            .map(|p| p.errors.values().sum::<usize>())
            .sum();
        out.push_str(&format!(
            "| {} | {:.0} | {:.1} | {} | {per_object} | {} | {:.2} | {:.2} | {} | {:.2} | {:.2} | {} | {} | {watched_ratio} | {delivered} | {errors} |\n",
            s.objects,
            s.create.per_second,
            s.startup_seconds,
            mib(s.ready_rss_mib),
            mib(s.rss_after_reads_mib),
            s.get.p50_ms,
            s.get.p99_ms,
            ratio(s.get.p99_ms, first.get.p99_ms),
            s.page.p50_ms,
            s.page.p99_ms,
            ratio(s.page.p99_ms, first.page.p99_ms),
            mib(s.watched_peak_rss_mib),
        ));
    }
    out
}

/// How long a store of `objects` may take to fill before the harness gives up on the server's start.
pub fn startup_allowance(objects: usize) -> Duration {
    Duration::from_secs(60 + objects as u64 / 5_000)
}
