//! Leader election for the in-process controllers, as kube-controller-manager does it with client-go's
//! `leaderelection` package: replicas that share one store race for a lease, and only the holder runs the
//! controllers, so that two replicas never reconcile (and write the status of) the same objects at once.
//!
//! The lease record is client-go's: `holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`,
//! `leaseTransitions`. A candidate takes the lease when it is absent, released (no holder) or expired; expiry is
//! judged, as client-go judges it, by the *local* time at which this candidate last saw the record change plus the
//! holder's lease duration, so clocks need not agree. Every write is conditional on the version read
//! ([`LeaseLock`]): of two candidates that race, one gets a conflict.
//!
//! The holder renews every retry period and stops leading when no renewal has succeeded within the renew deadline
//! (counted from the start of the last successful renewal, so never later than the renew deadline after the
//! record the others observed): its controllers are stopped at once, before the lease can expire for the others
//! (`renew deadline < lease duration`). It then competes again: kube-controller-manager exits instead, but this
//! process also serves the API, which must not go down with leadership. On graceful shutdown the holder releases
//! the lease (client-go's `ReleaseOnCancel`: no holder, a lease of one second) so that another replica takes over
//! at its next retry; a replica killed without releasing is replaced after the lease duration.

mod lock;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use futures::future::BoxFuture;
#[cfg(feature = "cluster")]
use k8s_openapi::api::coordination::v1::LeaseSpec;
#[cfg(feature = "cluster")]
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use prometheus::IntGauge;

#[cfg(feature = "cluster")]
pub use lock::ClusterLock;
pub use lock::{LeaseLock, LockError, StorageLock};

use crate::meta::parse_duration;
use crate::metrics::Metrics;
use crate::server::ShutdownSignal;

/// client-go's `JitterFactor`: the acquire loop waits between one and 2.2 retry periods, and the renew deadline
/// must exceed 1.2 retry periods.
const JITTER_FACTOR: f64 = 1.2;

/// The only lock kind: `leases` (client-go dropped `endpoints` and `configmaps` locks).
pub const LEASES_LOCK: &str = "leases";

/// kube-controller-manager's leader election flags (component-base's `LeaderElectionConfiguration`), with its
/// names and defaults.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
#[command(about = None, long_about = None)]
pub struct LeaderElectionOptions {
    /// Start a leader election client and gain leadership before running the in-process controllers. Enable this
    /// when running replicated servers for high availability. Default: true when the storage backend can be
    /// shared by several replicas (postgres, etcd), false on the embedded single-process ones (rocksdb, sqlite,
    /// memory); an explicit value wins.
    #[arg(
        long = "leader-elect",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_name = "true|false"
    )]
    pub leader_elect: Option<bool>,

    /// The duration that non-leader candidates will wait after observing a leadership renewal until attempting to
    /// acquire leadership of a led but unrenewed leader slot. This is effectively the maximum duration that a
    /// leader can be stopped before it is replaced by another candidate (whole seconds).
    #[arg(long = "leader-elect-lease-duration", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,

    /// The interval between attempts by the acting leader to renew a leadership slot before it stops leading.
    /// This must be less than the lease duration.
    #[arg(long = "leader-elect-renew-deadline", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,

    /// The duration the clients should wait between attempting acquisition and renewal of a leadership.
    #[arg(long = "leader-elect-retry-period", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,

    /// The type of resource object that is used for locking during leader election. Supported options are
    /// 'leases'.
    #[arg(long = "leader-elect-resource-lock", default_value = LEASES_LOCK)]
    pub resource_lock: String,

    /// The name of resource object that is used for locking during leader election (default: the server's name).
    #[arg(long = "leader-elect-resource-name")]
    pub resource_name: Option<String>,

    /// The namespace of resource object that is used for locking during leader election.
    #[arg(
        long = "leader-elect-resource-namespace",
        default_value = "kube-system"
    )]
    pub resource_namespace: String,
}

impl Default for LeaderElectionOptions {
    fn default() -> Self {
        LeaderElectionOptions {
            leader_elect: None,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            resource_lock: LEASES_LOCK.to_string(),
            resource_name: None,
            resource_namespace: "kube-system".to_string(),
        }
    }
}

impl LeaderElectionOptions {
    /// Whether to elect a leader: `--leader-elect` when given, else whether the storage can be shared.
    pub fn enabled(&self, shared_storage: bool) -> bool {
        self.leader_elect.unwrap_or(shared_storage)
    }

    /// The checked configuration, the lease named after `server_name` unless a name is given. The checks are
    /// client-go's `NewLeaderElector`'s, plus a lease of at least a second (the record holds whole seconds).
    pub fn config(&self, server_name: &str) -> Result<LeaderElectionConfig, String> {
        if self.resource_lock != LEASES_LOCK {
            return Err(format!(
                "--leader-elect-resource-lock {:?} is not supported: the only lock is {LEASES_LOCK:?}",
                self.resource_lock
            ));
        }
        let (lease, renew, retry) = (self.lease_duration, self.renew_deadline, self.retry_period);
        if retry.is_zero() || renew.is_zero() {
            return Err("renewDeadline and retryPeriod must be greater than zero".into());
        }
        if lease < Duration::from_secs(1) {
            return Err(
                "leaseDuration must be at least 1s (the lease records whole seconds)".into(),
            );
        }
        if lease <= renew {
            return Err("leaseDuration must be greater than renewDeadline".into());
        }
        if renew <= retry.mul_f64(JITTER_FACTOR) {
            return Err("renewDeadline must be greater than retryPeriod*JitterFactor".into());
        }
        Ok(LeaderElectionConfig {
            lease_duration: lease,
            renew_deadline: renew,
            retry_period: retry,
            namespace: self.resource_namespace.clone(),
            name: self
                .resource_name
                .clone()
                .unwrap_or_else(|| server_name.to_string()),
        })
    }
}

/// A checked election: its timing and the lease it competes for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// How long others wait, after seeing the record change, before they take the lease.
    pub lease_duration: Duration,
    /// How long the holder keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often candidates try to acquire and the holder renews.
    pub retry_period: Duration,
    /// The lease's namespace.
    pub namespace: String,
    /// The lease's name.
    pub name: String,
}

/// client-go's `LeaderElectionRecord`: what a lease says, whichever store keeps it. Times have microsecond
/// precision, as `MicroTime` on the wire, so a record read back equals the record written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderElectionRecord {
    /// Who holds the lease; empty when it was released.
    pub holder_identity: String,
    /// How long others must wait after seeing a renewal.
    pub lease_duration_seconds: i32,
    /// When the holder acquired it.
    pub acquire_time: Option<DateTime<Utc>>,
    /// When the holder last renewed it.
    pub renew_time: Option<DateTime<Utc>>,
    /// How many times the lease changed hands.
    pub leader_transitions: i32,
}

impl LeaderElectionRecord {
    /// client-go's `LeaderElectionRecordToLeaseSpec`.
    #[cfg(feature = "cluster")]
    pub fn to_spec(&self) -> LeaseSpec {
        let micro = |t: DateTime<Utc>| {
            k8s_openapi::jiff::Timestamp::from_microsecond(t.timestamp_micros())
                .ok()
                .map(MicroTime)
        };
        LeaseSpec {
            holder_identity: Some(self.holder_identity.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.and_then(micro),
            renew_time: self.renew_time.and_then(micro),
            lease_transitions: Some(self.leader_transitions),
            ..LeaseSpec::default()
        }
    }

    /// client-go's `LeaseSpecToLeaderElectionRecord`.
    #[cfg(feature = "cluster")]
    pub fn from_spec(spec: &LeaseSpec) -> Self {
        let time = |t: &MicroTime| DateTime::from_timestamp_micros(t.0.as_microsecond());
        LeaderElectionRecord {
            holder_identity: spec.holder_identity.clone().unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
            acquire_time: spec.acquire_time.as_ref().and_then(time),
            renew_time: spec.renew_time.as_ref().and_then(time),
            leader_transitions: spec.lease_transitions.unwrap_or_default(),
        }
    }
}

/// The wall-clock time written in records (only for people and tools to read: decisions use local instants).
fn wall_now() -> DateTime<Utc> {
    let now = Utc::now();
    now.duration_round(TimeDelta::microseconds(1))
        .unwrap_or(now)
}

/// kube-controller-manager's identity: the host name, `_`, and a UUID (several replicas may share a host).
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// The record last seen, its version for the next conditional write, and when it was seen to change.
#[derive(Clone, Debug)]
struct Observed {
    record: LeaderElectionRecord,
    version: String,
    at: Instant,
}

/// What one try to acquire or renew gave.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Attempt {
    /// This candidate holds the lease, written just now.
    Leading,
    /// Another candidate holds an unexpired lease.
    HeldBy(String),
    /// The store failed or another write came first.
    Failed(String),
}

/// Why the holder stopped renewing.
enum Renewal {
    Lost(String),
    ShuttingDown,
}

/// What runs while leading: given a signal that fires when leadership ends, the futures to spawn (one per
/// controller). It is called again each time leadership is acquired.
pub type Lead = Box<dyn Fn(ShutdownSignal) -> Vec<BoxFuture<'static, ()>> + Send + Sync>;

/// One candidate in one election (client-go's `LeaderElector`).
pub struct LeaderElector {
    lock: Arc<dyn LeaseLock>,
    config: LeaderElectionConfig,
    identity: String,
    observed: Option<Observed>,
    clock: Arc<dyn Fn() -> Instant + Send + Sync>,
    status: Option<IntGauge>,
}

impl LeaderElector {
    /// A candidate called `identity` (see [`default_identity`]) for the lease in `lock`.
    pub fn new(
        lock: Arc<dyn LeaseLock>,
        config: LeaderElectionConfig,
        identity: impl Into<String>,
    ) -> Self {
        LeaderElector {
            lock,
            config,
            identity: identity.into(),
            observed: None,
            clock: Arc::new(Instant::now),
            status: None,
        }
    }

    /// Reports leadership in `leader_election_master_status{name}` (1 leading, 0 not), as client-go does.
    pub fn with_metrics(mut self, metrics: &Metrics) -> Self {
        let gauge = metrics
            .leader_election_master_status
            .with_label_values(&[&self.config.name]);
        gauge.set(0);
        self.status = Some(gauge);
        self
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The lease, as `<namespace>/<name>`.
    pub fn lock_description(&self) -> String {
        self.lock.describe()
    }

    fn now(&self) -> Instant {
        (self.clock)()
    }

    fn set_status(&self, leading: bool) {
        if let Some(gauge) = &self.status {
            gauge.set(i64::from(leading));
        }
    }

    /// Whether the record last seen names this candidate.
    fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|o| o.record.holder_identity == self.identity)
    }

    /// Whether the record last seen has not expired: seen to change less than its lease duration ago.
    fn lease_valid(&self, now: Instant) -> bool {
        self.observed.as_ref().is_some_and(|o| {
            let duration = Duration::from_secs(o.record.lease_duration_seconds.max(0) as u64);
            o.at + duration > now
        })
    }

    fn observe(&mut self, record: LeaderElectionRecord, version: String) {
        let holder_changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.record.holder_identity != record.holder_identity);
        if holder_changed && !record.holder_identity.is_empty() {
            tracing::info!(lease = %self.lock.describe(), "new leader elected: {}", record.holder_identity);
        }
        let at = self.now();
        self.observed = Some(Observed {
            record,
            version,
            at,
        });
    }

    /// client-go's `tryAcquireOrRenew`: renew optimistically when holding a valid lease; otherwise read the
    /// record, create it when absent, leave it alone while another holder's lease is valid, and write it
    /// (conditionally) when it is ours, released or expired.
    async fn try_acquire_or_renew(&mut self) -> Attempt {
        let wall = wall_now();
        let mut record = LeaderElectionRecord {
            holder_identity: self.identity.clone(),
            lease_duration_seconds: i32::try_from(self.config.lease_duration.as_secs())
                .unwrap_or(i32::MAX),
            acquire_time: Some(wall),
            renew_time: Some(wall),
            leader_transitions: 0,
        };
        // 1. The holder's fast path: write over the record it wrote last.
        if self.is_leader()
            && self.lease_valid(self.now())
            && let Some(observed) = self.observed.clone()
        {
            record.acquire_time = observed.record.acquire_time;
            record.leader_transitions = observed.record.leader_transitions;
            match self.lock.update(&record, &observed.version).await {
                Ok(version) => {
                    self.observe(record, version);
                    return Attempt::Leading;
                }
                Err(e) => tracing::debug!(
                    lease = %self.lock.describe(),
                    "failed to update lease optimistically: {e}, falling back to slow path"
                ),
            }
        }
        // 2. Read the record, or create it.
        let (current, version) = match self.lock.get().await {
            Ok(Some(found)) => found,
            Ok(None) => {
                return match self.lock.create(&record).await {
                    Ok(version) => {
                        self.observe(record, version);
                        Attempt::Leading
                    }
                    Err(e) => Attempt::Failed(format!(
                        "error initially creating leader election record: {e}"
                    )),
                };
            }
            Err(e) => {
                return Attempt::Failed(format!(
                    "error retrieving resource lock {}: {e}",
                    self.lock.describe()
                ));
            }
        };
        // 3. A changed record restarts its expiry; an unchanged one keeps the time it was first seen.
        match self.observed.as_mut() {
            Some(o) if o.record == current => o.version.clone_from(&version),
            _ => self.observe(current.clone(), version.clone()),
        }
        if !current.holder_identity.is_empty() && self.lease_valid(self.now()) && !self.is_leader()
        {
            return Attempt::HeldBy(current.holder_identity);
        }
        // 4. Ours, released or expired: write it.
        if self.is_leader() {
            record.acquire_time = current.acquire_time;
            record.leader_transitions = current.leader_transitions;
        } else {
            record.leader_transitions = current.leader_transitions.saturating_add(1);
        }
        match self.lock.update(&record, &version).await {
            Ok(version) => {
                self.observe(record, version);
                Attempt::Leading
            }
            Err(e) => Attempt::Failed(format!("failed to update lock: {e}")),
        }
    }

    /// A retry period stretched by up to 1.2 of itself at random (client-go's `wait.Jitter`), so that candidates
    /// started together do not keep colliding.
    fn jittered_retry(&self) -> Duration {
        let random = uuid::Uuid::new_v4().as_u64_pair().0 as f64 / u64::MAX as f64;
        self.config
            .retry_period
            .mul_f64(1.0 + JITTER_FACTOR * random)
    }

    /// Tries until the lease is ours (returns when the successful try started) or the server shuts down (`None`).
    /// A try is never cut short by shutdown: a write that succeeded is known, and released.
    async fn acquire(&mut self, shutdown: &ShutdownSignal) -> Option<Instant> {
        let lease = self.lock.describe();
        tracing::info!("attempting to acquire leader lease {lease}...");
        loop {
            if shutdown.is_initiated() {
                return None;
            }
            let started = self.now();
            match tokio::time::timeout(self.config.renew_deadline, self.try_acquire_or_renew())
                .await
            {
                Ok(Attempt::Leading) => return Some(started),
                Ok(Attempt::HeldBy(holder)) => {
                    tracing::debug!("lock is held by {holder} and has not yet expired")
                }
                Ok(Attempt::Failed(e)) => tracing::info!(lease = %lease, "{e}"),
                Err(_) => tracing::info!(lease = %lease, "acquiring the lease timed out"),
            }
            let retry = self.jittered_retry();
            tokio::select! {
                _ = tokio::time::sleep(retry) => {}
                _ = shutdown.initiated() => return None,
            }
        }
    }

    /// Renews every retry period until a renewal has not succeeded within the renew deadline of the start of the
    /// last successful one (`last`), another holder is seen, or the server shuts down.
    async fn renew(&mut self, mut last: Instant, shutdown: &ShutdownSignal) -> Renewal {
        let lease = self.lock.describe();
        let retry = self.config.retry_period;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(retry) => {}
                _ = shutdown.initiated() => return Renewal::ShuttingDown,
            }
            loop {
                let deadline = last + self.config.renew_deadline;
                let started = self.now();
                if started >= deadline {
                    return Renewal::Lost(format!(
                        "failed to renew lease {lease}: timed out waiting for the condition"
                    ));
                }
                let attempt = tokio::time::timeout_at(
                    tokio::time::Instant::from_std(deadline),
                    self.try_acquire_or_renew(),
                )
                .await;
                match attempt {
                    Ok(Attempt::Leading) => {
                        last = started;
                        break;
                    }
                    Ok(Attempt::HeldBy(holder)) => {
                        return Renewal::Lost(format!("the lease is now held by {holder}"));
                    }
                    Ok(Attempt::Failed(e)) => tracing::info!(lease = %lease, "{e}"),
                    Err(_) => {
                        return Renewal::Lost(format!(
                            "failed to renew lease {lease}: timed out waiting for the condition"
                        ));
                    }
                }
                let next = (started + retry).min(deadline);
                tokio::select! {
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(next)) => {}
                    _ = shutdown.initiated() => return Renewal::ShuttingDown,
                }
            }
        }
    }

    /// client-go's `release`: a record with no holder and a lease of one second, written over ours, so that the
    /// next candidate takes over at its next try.
    async fn release(&mut self) {
        let Some(observed) = self.observed.clone().filter(|_| self.is_leader()) else {
            return;
        };
        let lease = self.lock.describe();
        let wall = wall_now();
        let record = LeaderElectionRecord {
            holder_identity: String::new(),
            lease_duration_seconds: 1,
            acquire_time: Some(wall),
            renew_time: Some(wall),
            leader_transitions: observed.record.leader_transitions,
        };
        match tokio::time::timeout(
            self.config.renew_deadline,
            self.lock.update(&record, &observed.version),
        )
        .await
        {
            Ok(Ok(version)) => {
                self.observe(record, version);
                tracing::info!("released lease {lease}");
            }
            Ok(Err(e)) => tracing::error!("failed to release lease {lease}: {e}"),
            Err(_) => tracing::error!("failed to release lease {lease}: timed out"),
        }
    }

    /// Competes for the lease until `shutdown`: while leading, runs what `lead` gives with a signal that fires
    /// when leadership ends; on losing, stops them at once and competes again; on shutdown, stops them and
    /// releases the lease. Returns once the lease is released (or was not held).
    pub async fn run(mut self, shutdown: ShutdownSignal, lead: Lead) {
        let lease = self.lock.describe();
        self.set_status(false);
        loop {
            let Some(acquired) = self.acquire(&shutdown).await else {
                return;
            };
            if shutdown.is_initiated() {
                self.release().await;
                return;
            }
            tracing::info!("successfully acquired lease {lease}");
            self.set_status(true);
            let leading = ShutdownSignal::new();
            let tasks: Vec<_> = lead(leading.clone())
                .into_iter()
                .map(tokio::spawn)
                .collect();
            let outcome = self.renew(acquired, &shutdown).await;
            // Stop at once, a reconcile in flight included: the signal for what listens, then abort.
            leading.start_draining();
            for task in &tasks {
                task.abort();
            }
            for task in tasks {
                let _ = task.await;
            }
            self.set_status(false);
            match outcome {
                Renewal::Lost(reason) => {
                    tracing::warn!("lost lease {lease}: {reason}; controllers stopped");
                }
                Renewal::ShuttingDown => {
                    self.release().await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
