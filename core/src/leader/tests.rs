use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use clap::Parser;

use super::*;
use crate::storage::{GetOptions, MemoryStorage, Storage};

const PREFIX: &str = "/registry/test";

fn config(lease: u64, renew_ms: u64, retry_ms: u64) -> LeaderElectionConfig {
    LeaderElectionConfig {
        lease_duration: Duration::from_secs(lease),
        renew_deadline: Duration::from_millis(renew_ms),
        retry_period: Duration::from_millis(retry_ms),
        namespace: "kube-system".into(),
        name: "test-apiserver".into(),
    }
}

/// A lock in a fresh memory store; the store too, to write behind the candidates' backs.
fn lock() -> (Arc<dyn Storage>, Arc<dyn LeaseLock>) {
    let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let lock = StorageLock::new(storage.clone(), PREFIX, "kube-system", "test-apiserver")
        .expect("a valid key");
    (storage, Arc::new(lock))
}

/// A clock that moves only when told.
#[derive(Clone)]
struct Clock(Arc<Mutex<Instant>>);

impl Clock {
    fn new() -> Self {
        Clock(Arc::new(Mutex::new(Instant::now())))
    }
    fn advance(&self, by: Duration) {
        *self.0.lock().unwrap() += by;
    }
}

fn candidate(lock: &Arc<dyn LeaseLock>, identity: &str, clock: &Clock) -> LeaderElector {
    let mut elector = LeaderElector::new(lock.clone(), config(15, 10_000, 2_000), identity);
    let clock = clock.clone();
    elector.clock = Arc::new(move || *clock.0.lock().unwrap());
    elector
}

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    election: LeaderElectionOptions,
}

fn parse(args: &[&str]) -> LeaderElectionOptions {
    let mut argv = vec!["test"];
    argv.extend_from_slice(args);
    Cli::try_parse_from(argv).expect("parses").election
}

#[test]
fn flags_have_kube_controller_manager_defaults() {
    let options = parse(&[]);
    assert_eq!(options, LeaderElectionOptions::default());
    assert!(options.enabled(true));
    assert!(!options.enabled(false));
    assert!(parse(&["--leader-elect"]).enabled(false));
    assert!(parse(&["--leader-elect=true"]).enabled(false));
    assert!(!parse(&["--leader-elect=false"]).enabled(true));
    let config = options.config("pizza-apiserver").unwrap();
    assert_eq!(config.name, "pizza-apiserver");
    assert_eq!(config.namespace, "kube-system");
    assert_eq!(config.lease_duration, Duration::from_secs(15));
    assert_eq!(config.renew_deadline, Duration::from_secs(10));
    assert_eq!(config.retry_period, Duration::from_secs(2));
    let named = parse(&[
        "--leader-elect-resource-name=pizza-lease",
        "--leader-elect-resource-namespace=pizza",
        "--leader-elect-lease-duration=1m30s",
    ])
    .config("pizza-apiserver")
    .unwrap();
    assert_eq!(
        (named.name.as_str(), named.namespace.as_str()),
        ("pizza-lease", "pizza")
    );
    assert_eq!(named.lease_duration, Duration::from_secs(90));
}

#[test]
fn flags_are_checked_as_client_go_checks_them() {
    let error = |args: &[&str]| parse(args).config("x").unwrap_err();
    assert_eq!(
        error(&["--leader-elect-resource-lock=endpoints"]),
        "--leader-elect-resource-lock \"endpoints\" is not supported: the only lock is \"leases\""
    );
    assert_eq!(
        error(&["--leader-elect-lease-duration=10s"]),
        "leaseDuration must be greater than renewDeadline"
    );
    assert_eq!(
        error(&["--leader-elect-renew-deadline=2s"]),
        "renewDeadline must be greater than retryPeriod*JitterFactor"
    );
    assert!(
        error(&[
            "--leader-elect-lease-duration=500ms",
            "--leader-elect-renew-deadline=400ms",
            "--leader-elect-retry-period=100ms"
        ])
        .contains("at least 1s")
    );
    // 2.4s > 2s × 1.2 passes.
    assert!(
        parse(&["--leader-elect-renew-deadline=2.5s"])
            .config("x")
            .is_ok()
    );
    assert!(Cli::try_parse_from(["test", "--leader-elect-lease-duration=15"]).is_err());
}

#[tokio::test]
async fn the_first_candidate_creates_the_lease_and_the_second_waits() {
    let (_, lock) = lock();
    let clock = Clock::new();
    let mut a = candidate(&lock, "a", &clock);
    let mut b = candidate(&lock, "b", &clock);
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Leading);
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    let (record, _) = lock.get().await.unwrap().unwrap();
    assert_eq!(record.holder_identity, "a");
    assert_eq!(record.lease_duration_seconds, 15);
    assert_eq!(record.leader_transitions, 0);
    assert_eq!(record.acquire_time, record.renew_time);

    // Renewing keeps acquireTime and moves renewTime.
    clock.advance(Duration::from_secs(2));
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Leading);
    let (renewed, _) = lock.get().await.unwrap().unwrap();
    assert_eq!(renewed.acquire_time, record.acquire_time);
    assert!(renewed.renew_time > record.renew_time);
}

#[tokio::test]
async fn expiry_counts_from_when_the_record_was_seen_to_change() {
    let (_, lock) = lock();
    let clock = Clock::new();
    let mut a = candidate(&lock, "a", &clock);
    let mut b = candidate(&lock, "b", &clock);
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Leading);
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    // a renews at 10s: b sees a new record at 14s, so the lease holds until 29s for b.
    clock.advance(Duration::from_secs(10));
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Leading);
    clock.advance(Duration::from_secs(4));
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    clock.advance(Duration::from_secs(14));
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    // a is gone; at 29s the record b saw change at 14s has expired.
    clock.advance(Duration::from_secs(1));
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Leading);
    let (record, _) = lock.get().await.unwrap().unwrap();
    assert_eq!(record.holder_identity, "b");
    assert_eq!(record.leader_transitions, 1);
    // a comes back: its optimistic write conflicts, and it sees b's record.
    assert_eq!(a.try_acquire_or_renew().await, Attempt::HeldBy("b".into()));
    assert!(!a.is_leader());
}

#[tokio::test]
async fn a_released_lease_is_taken_at_once() {
    let (_, lock) = lock();
    let clock = Clock::new();
    let mut a = candidate(&lock, "a", &clock);
    let mut b = candidate(&lock, "b", &clock);
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Leading);
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    a.release().await;
    let (record, _) = lock.get().await.unwrap().unwrap();
    assert_eq!(record.holder_identity, "");
    assert_eq!(record.lease_duration_seconds, 1);
    assert_eq!(b.try_acquire_or_renew().await, Attempt::Leading);
    let (record, _) = lock.get().await.unwrap().unwrap();
    assert_eq!(record.holder_identity, "b");
    assert_eq!(record.leader_transitions, 1);
    // Releasing what is not held writes nothing.
    a.release().await;
    assert_eq!(lock.get().await.unwrap().unwrap().0.holder_identity, "b");
}

#[tokio::test]
async fn of_two_candidates_racing_for_an_expired_lease_one_wins() {
    let (_, lock) = lock();
    let clock = Clock::new();
    let mut a = candidate(&lock, "a", &clock);
    assert_eq!(a.try_acquire_or_renew().await, Attempt::Leading);
    let mut b = candidate(&lock, "b", &clock);
    let mut c = candidate(&lock, "c", &clock);
    assert_eq!(b.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    assert_eq!(c.try_acquire_or_renew().await, Attempt::HeldBy("a".into()));
    clock.advance(Duration::from_secs(16));
    let (rb, rc) = tokio::join!(b.try_acquire_or_renew(), c.try_acquire_or_renew());
    let winners = [&rb, &rc]
        .iter()
        .filter(|r| ***r == Attempt::Leading)
        .count();
    assert_eq!(winners, 1, "{rb:?} {rc:?}");
}

/// The run loop with real time: the leader runs its controllers, a stolen lease stops them within the renew
/// deadline, and a graceful shutdown releases the lease to the other candidate at its next retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_leads_stops_on_loss_and_releases_on_shutdown() {
    let (storage, lock) = lock();
    let fast = config(1, 500, 100);
    let started = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicUsize::new(0));
    let lead = |started: Arc<AtomicUsize>, running: Arc<AtomicUsize>| -> Lead {
        Box::new(move |signal: ShutdownSignal| {
            let (started, running) = (started.clone(), running.clone());
            vec![Box::pin(async move {
                started.fetch_add(1, Ordering::SeqCst);
                running.fetch_add(1, Ordering::SeqCst);
                // Counted down however the controller ends: aborted, as when leadership is lost, or returning.
                let _running = Running(running);
                signal.initiated().await;
            }) as BoxFuture<'static, ()>]
        })
    };
    let shutdown_a = ShutdownSignal::new();
    let a = LeaderElector::new(lock.clone(), fast.clone(), "a");
    let run_a = tokio::spawn(a.run(shutdown_a.clone(), lead(started.clone(), running.clone())));
    wait_for(|| running.load(Ordering::SeqCst) == 1, "a leads").await;

    // Someone else writes the lease: a sees it at its next renewal and stops.
    let stolen = LeaderElectionRecord {
        holder_identity: "thief".into(),
        lease_duration_seconds: 1,
        ..LeaderElectionRecord::default()
    };
    let (_, version) = lock.get().await.unwrap().unwrap();
    lock.update(&stolen, &version).await.unwrap();
    wait_for(|| running.load(Ordering::SeqCst) == 0, "a stops leading").await;
    // The thief never renews: a takes the lease again after it expires.
    wait_for(|| running.load(Ordering::SeqCst) == 1, "a leads again").await;
    assert_eq!(started.load(Ordering::SeqCst), 2);

    let b_started = Arc::new(AtomicUsize::new(0));
    let b_running = Arc::new(AtomicUsize::new(0));
    let shutdown_b = ShutdownSignal::new();
    let b = LeaderElector::new(lock.clone(), fast, "b");
    let run_b = tokio::spawn(b.run(
        shutdown_b.clone(),
        lead(b_started.clone(), b_running.clone()),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        b_started.load(Ordering::SeqCst),
        0,
        "b waits while a renews"
    );

    let stopped = Instant::now();
    shutdown_a.initiate();
    run_a.await.unwrap();
    assert_eq!(running.load(Ordering::SeqCst), 0);
    wait_for(|| b_running.load(Ordering::SeqCst) == 1, "b takes over").await;
    let took = stopped.elapsed();
    assert!(took < Duration::from_millis(800), "took {took:?}");
    shutdown_b.initiate();
    run_b.await.unwrap();
    let stored = storage
        .get(
            "/registry/test/coordination.k8s.io/leases/kube-system/test-apiserver",
            &GetOptions::default(),
        )
        .await
        .unwrap();
    let lease: serde_json::Value = serde_json::from_slice(&stored.value).unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "");
}

struct Running(Arc<AtomicUsize>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn wait_for(done: impl Fn() -> bool, what: &str) {
    for _ in 0..100 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what}: not within 5s");
}
