//! A cluster of etcd members on loopback for fault tests (Debian's `etcd`, or `ETCD_BIN`), each member on free
//! client and peer ports with its data under one temporary directory; members can be killed (SIGKILL) and
//! restarted, and a watchdog kills them all if the test process dies. Shared by `storage-etcd/tests/faults.rs`
//! (through the storage layer) and the pizza server's `tests/etcd_faults.rs` (through HTTP).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

#[path = "member.rs"]
mod member;

use member::{default_binary, member_command, spawn_logged};
use std::time::{Duration, Instant};

use apiserver_storage_etcd::etcd_client::Client;

/// One member of the cluster.
pub struct Member {
    pub name: String,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

/// A 3-member etcd cluster with its data under one temporary directory, killed when dropped.
pub struct Cluster {
    dir: tempfile::TempDir,
    pub members: Vec<Member>,
    watchdog: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl Cluster {
    pub async fn start(size: usize) -> Cluster {
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

    pub fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.members[i].client_port)
    }

    pub fn urls(&self) -> Vec<String> {
        (0..self.members.len()).map(|i| self.url(i)).collect()
    }

    pub fn spawn(&mut self, i: usize) {
        let initial = self.initial_cluster();
        let client = self.url(i);
        let m = &self.members[i];
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let mut cmd = member_command(
            &default_binary(),
            &m.name,
            &self.dir.path().join(&m.name),
            &client,
            &peer,
            &initial,
        );
        cmd.arg("--initial-cluster-token")
            .arg(self.dir.path().file_name().expect("name"))
            // Fast failure detection on loopback, tolerant enough for a loaded 2-core machine.
            .arg("--heartbeat-interval")
            .arg("100")
            .arg("--election-timeout")
            .arg("1000");
        let child = spawn_logged(cmd, &self.dir.path().join(format!("{}.log", m.name)));
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

    pub fn kill(&mut self, i: usize) {
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
    pub async fn wait_healthy(&self, within: Duration) {
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
    pub async fn status(&self, i: usize) -> Option<(u64, u64)> {
        let mut c = Client::connect([self.url(i)], None).await.ok()?;
        c.get("health", None).await.ok()?;
        let s = c.status().await.ok()?;
        Some((s.header()?.member_id(), s.leader()))
    }

    /// The index of the current leader (asking every running member).
    pub async fn leader(&self) -> usize {
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

    /// The faults of the fault tests: kills the leader (SIGKILL), waits for another to be elected, restarts it,
    /// then kills a follower other than it and restarts that too, waiting for the cluster to be healthy after each
    /// restart. Returns what it did, in order.
    pub async fn kill_leader_then_follower(&mut self) -> Vec<String> {
        let mut faults = Vec::new();
        let leader = self.leader().await;
        self.kill(leader);
        faults.push(format!("killed leader {}", self.members[leader].name));
        tokio::time::sleep(Duration::from_secs(2)).await;
        let new_leader = self.leader().await;
        assert_ne!(new_leader, leader);
        self.spawn(leader);
        faults.push(format!("restarted {}", self.members[leader].name));
        self.wait_healthy(Duration::from_secs(30)).await;
        let current = self.leader().await;
        // A follower other than the member restarted just before, when there is one.
        let follower = (0..self.members.len())
            .find(|&i| i != current && i != leader)
            .expect("a follower");
        self.kill(follower);
        faults.push(format!("killed follower {}", self.members[follower].name));
        tokio::time::sleep(Duration::from_secs(2)).await;
        self.spawn(follower);
        faults.push(format!("restarted {}", self.members[follower].name));
        self.wait_healthy(Duration::from_secs(30)).await;
        faults
    }

    pub fn logs(&self) -> String {
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
