//! Fault injection with real processes: a 3-member etcd cluster on loopback under a write and watch load through
//! the etcd backend; the leader is killed (SIGKILL) and restarted, then a follower. Asserted: every request ends
//! within its timeout (errors, not hangs), the recorded history is linearizable (operations that failed
//! ambiguously may or may not have happened), no acknowledged write is lost (the final reads are part of the
//! history), and a watch that re-establishes itself after failures sees every revision once, in order, with no
//! gap, ending in the final state.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use apiserver::storage::Storage;
use apiserver::storage::testing::linearizability::{
    Recorder, Workload, check_kv_history, check_watch, encode_value, follow_watch, read_finals,
    record_storage_history,
};
use apiserver_storage_etcd::etcd_client::Client;
use apiserver_storage_etcd::{EtcdConfig, EtcdStorage};

/// One member of the cluster.
struct Member {
    name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A 3-member etcd cluster with its data under one temporary directory, killed when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    members: Vec<Member>,
    watchdog: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl Cluster {
    async fn start(size: usize) -> Cluster {
        let root = std::env::var_os("ETCD_TEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("etcd-cluster-")
            .tempdir_in(root)
            .expect("cluster directory");
        let token = uuid::Uuid::new_v4().simple().to_string();
        let members = (0..size)
            .map(|i| Member {
                name: format!("m{i}-{}", &token[..8]),
                client_port: free_port(),
                peer_port: free_port(),
                child: None,
            })
            .collect();
        let mut cluster = Cluster {
            dir,
            members,
            watchdog: None,
        };
        for i in 0..size {
            cluster.spawn(i);
        }
        cluster.spawn_watchdog();
        cluster.wait_healthy(Duration::from_secs(90)).await;
        cluster
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    fn urls(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.url(i)).collect()
    }

    fn spawn(&mut self, i: usize) {
        let bin = std::env::var_os("ETCD_BIN").unwrap_or_else(|| "etcd".into());
        let initial = self.initial_cluster();
        let client = self.url(i);
        let m = &self.members[i];
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let data = self.dir.path().join(&m.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("{}.log", m.name)))
            .expect("etcd log");
        let mut cmd = Command::new(&bin);
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("ETCD") {
                cmd.env_remove(k);
            }
        }
        cmd.arg("--name")
            .arg(&m.name)
            .arg("--data-dir")
            .arg(&data)
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(initial)
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--initial-cluster-token")
            .arg(self.dir.path().file_name().expect("name"))
            // Fast failure detection on loopback, tolerant enough for a loaded 2-core machine.
            .arg("--heartbeat-interval")
            .arg("100")
            .arg("--election-timeout")
            .arg("1000")
            .arg("--logger")
            .arg("zap")
            .arg("--log-level")
            .arg("warn");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {bin:?} (Debian package etcd-server): {e}"));
        std::fs::write(
            self.dir
                .path()
                .join(format!("{}.pid", self.members[i].name)),
            child.id().to_string(),
        )
        .expect("pid file");
        self.members[i].child = Some(child);
    }

    /// Kills every member and removes the directory if the test process dies without dropping the cluster.
    fn spawn_watchdog(&mut self) {
        // Members restarted later get new pids: each spawn rewrites its pid file, which the watchdog reads at the end.
        self.watchdog = Command::new("sh")
            .arg("-c")
            .arg(
                "while kill -0 \"$1\" 2>/dev/null; do sleep 1; done; \
                 for f in \"$2\"/*.pid; do kill -9 \"$(cat \"$f\")\" 2>/dev/null; done; rm -rf \"$2\"",
            )
            .arg("etcd-cluster-watchdog")
            .arg(std::process::id().to_string())
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(
                self.dir
                    .path()
                    .join(format!("{}.pid", self.members[i].name)),
            );
        }
    }

    /// Every running member answers a linearizable read and agrees on one leader.
    async fn wait_healthy(&self, within: Duration) {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            let mut leaders = Vec::new();
            let mut ok = true;
            for (i, m) in self.members.iter().enumerate() {
                if m.child.is_none() {
                    continue;
                }
                match tokio::time::timeout(Duration::from_secs(3), self.status(i)).await {
                    Ok(Some((_, leader))) if leader != 0 => leaders.push(leader),
                    _ => ok = false,
                }
            }
            leaders.dedup();
            if ok && leaders.len() == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the etcd cluster is not healthy; logs:\n{}", self.logs());
    }

    /// (member id, leader id) as member `i` reports them, after a successful read through it.
    async fn status(&self, i: usize) -> Option<(u64, u64)> {
        let mut c = Client::connect([self.url(i)], None).await.ok()?;
        c.get("health", None).await.ok()?;
        let s = c.status().await.ok()?;
        Some((s.header()?.member_id(), s.leader()))
    }

    /// The index of the current leader (asking every running member).
    async fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let mut ids = Vec::new();
            let mut leader = None;
            for i in 0..self.members.len() {
                if self.members[i].child.is_none() {
                    continue;
                }
                if let Ok(Some((id, l))) =
                    tokio::time::timeout(Duration::from_secs(3), self.status(i)).await
                {
                    ids.push((i, id));
                    leader = Some(l);
                }
            }
            if let Some(l) = leader
                && let Some((i, _)) = ids.iter().find(|(_, id)| *id == l)
            {
                return *i;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("no etcd leader; logs:\n{}", self.logs());
    }

    fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let log = std::fs::read_to_string(self.dir.path().join(format!("{}.log", m.name)))
                    .unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                format!(
                    "--- {}\n{}",
                    m.name,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// How long one storage call may take before the test counts it as a hang.
const OP_TIMEOUT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_and_follower_killed_under_load() {
    let mut cluster = Cluster::start(3).await;
    let store: Arc<dyn Storage> = EtcdStorage::connect(EtcdConfig {
        compaction_interval: None,
        ..EtcdConfig::new(cluster.urls(), "/registry")
    })
    .await
    .expect("connect")
    .into_dyn();
    let prefix = "/registry/faults".to_string();
    let from = store.current_revision().await.expect("revision");
    let sentinel = format!("{prefix}/sentinel");
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = tokio::spawn(follow_watch(
        store.clone(),
        prefix.clone(),
        from,
        sentinel.clone(),
        stop.clone(),
    ));
    let workload = Workload {
        clients: 8,
        keys: 4,
        op_timeout: OP_TIMEOUT,
        seed: uuid::Uuid::new_v4().as_u64_pair().0,
        duration: Some(Duration::from_secs(14)),
        ..Workload::default()
    };
    let rec = Recorder::new();
    let load = tokio::spawn({
        let (store, prefix, workload, rec) =
            (store.clone(), prefix.clone(), workload.clone(), rec.clone());
        async move { record_storage_history(store, &prefix, &workload, &rec).await }
    });

    // The faults: kill the leader, restart it, then kill a follower and restart it.
    let mut faults = Vec::new();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let leader = cluster.leader().await;
    cluster.kill(leader);
    faults.push(format!("killed leader {}", cluster.members[leader].name));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let new_leader = cluster.leader().await;
    assert_ne!(new_leader, leader);
    cluster.spawn(leader);
    faults.push(format!("restarted {}", cluster.members[leader].name));
    cluster.wait_healthy(Duration::from_secs(30)).await;
    let current = cluster.leader().await;
    // A follower other than the member restarted just before, when there is one.
    let follower = (0..3)
        .find(|&i| i != current && i != leader)
        .expect("a follower");
    cluster.kill(follower);
    faults.push(format!(
        "killed follower {}",
        cluster.members[follower].name
    ));
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.spawn(follower);
    faults.push(format!("restarted {}", cluster.members[follower].name));
    cluster.wait_healthy(Duration::from_secs(30)).await;

    let stats = load.await.expect("load");
    let keys: Vec<String> = (0..workload.keys)
        .map(|k| format!("{prefix}/k{k}"))
        .collect();
    let finals = read_finals(store.as_ref(), &keys, &rec).await;
    store
        .create(&sentinel, encode_value("sentinel", 0))
        .await
        .expect("sentinel");
    let events = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .expect("the watch saw the sentinel")
        .expect("watcher");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);

    eprintln!(
        "etcd faults: {faults:?}; {} answered, {} errors, {} timeouts, longest call {:?}, {} watch events",
        stats.answered,
        stats.errors,
        stats.timeouts,
        stats.longest,
        events.len()
    );
    assert_eq!(
        stats.timeouts, 0,
        "calls hung past {OP_TIMEOUT:?} instead of failing"
    );
    assert!(
        stats.answered > 100,
        "too little load got through: {stats:?}"
    );
    let history = rec.history();
    let watch = check_watch(&events, &history, from, &finals, true);
    assert!(watch.is_empty(), "the watch disagrees: {watch:#?}");
    let report = tokio::task::spawn_blocking(move || check_kv_history(&history))
        .await
        .expect("checker");
    eprintln!("etcd faults: {report}");
    assert!(report.is_linearizable(), "{report}");
}
