//! The server under test: the pizza server started in this process, started as its own process (so that its CPU
//! and memory can be read from /proc), or any server given by a kubeconfig; and the etcd and Postgres it needs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use clap::Parser;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::oneshot;

use crate::client::Endpoint;

#[path = "../../storage-etcd/tests/support/mod.rs"]
pub mod etcd;
#[allow(dead_code)]
#[path = "../../storage-sql/tests/common/pg.rs"]
pub mod pg;

/// A storage backend of the pizza server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Rocksdb,
    Memory,
    Sqlite,
    Postgres,
    Etcd,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Rocksdb => "rocksdb",
            Backend::Memory => "memory",
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Etcd => "etcd",
        }
    }
}

/// The external services a backend runs on, started once per run and shared by the server and the raw baseline.
pub enum Service {
    None,
    /// A directory for the raw RocksDB baseline (the server keeps its own database in its data directory).
    Rocksdb(tempfile::TempDir),
    /// A SQLite file in a temporary directory.
    Sqlite(tempfile::TempDir),
    Postgres(String),
    Etcd(Box<etcd::EtcdServer>),
}

impl Service {
    pub async fn start(backend: Backend) -> Service {
        match backend {
            Backend::Memory => Service::None,
            Backend::Rocksdb => Service::Rocksdb(tempfile::tempdir().expect("temp dir")),
            Backend::Sqlite => Service::Sqlite(tempfile::tempdir().expect("temp dir")),
            Backend::Postgres => Service::Postgres(pg::server().fresh_database().await),
            Backend::Etcd => Service::Etcd(Box::new(etcd::EtcdServer::start().await)),
        }
    }

    /// The backend's own process, when it is one the harness started (etcd): its CPU is measured beside the
    /// server's.
    pub fn process(&self) -> Option<u32> {
        match self {
            Service::Etcd(server) => server.pid(),
            _ => None,
        }
    }

    /// The pizza server flags that select this backend.
    pub fn server_args(&self, backend: Backend) -> Vec<String> {
        let mut args = vec!["--storage-backend".to_string(), backend.name().to_string()];
        match self {
            Service::None | Service::Rocksdb(_) | Service::Sqlite(_) => {}
            Service::Postgres(url) => args.extend(["--storage-url".to_string(), url.clone()]),
            Service::Etcd(server) => args.extend(["--etcd-servers".to_string(), server.url()]),
        }
        args
    }
}

enum Guard {
    InProcess(Option<oneshot::Sender<()>>, tokio::task::JoinHandle<()>),
    Process(tokio::process::Child),
    Remote,
}

/// A running server and how to reach it.
pub struct Target {
    pub endpoint: Endpoint,
    /// The server's process id, when it runs as its own process.
    pub pid: Option<u32>,
    guard: Guard,
    _dir: Option<tempfile::TempDir>,
}

impl Target {
    /// The pizza server inside this process (no CPU or memory figures: they would be the harness's too).
    pub async fn in_process(args: &[String]) -> Result<Target, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let data_dir = dir.path().to_string_lossy().into_owned();
        let mut argv = vec![
            "pizza-apiserver".to_string(),
            "--secure-port=0".into(),
            "--data-dir".into(),
            data_dir,
        ];
        argv.extend(args.iter().cloned());
        let options =
            pizza_apiserver::server::Options::try_parse_from(argv).map_err(|e| e.to_string())?;
        let started = pizza_apiserver::server::start(options)
            .await
            .map_err(|e| e.to_string())?;
        let endpoint = Endpoint::from_kubeconfig(&started.kubeconfig)?;
        let (stop, stopped) = oneshot::channel::<()>();
        let server = started.server;
        let task = tokio::spawn(async move {
            let _ = server
                .run(async {
                    let _ = stopped.await;
                })
                .await;
        });
        let target = Target {
            endpoint,
            pid: None,
            guard: Guard::InProcess(Some(stop), task),
            _dir: Some(dir),
        };
        target.wait_ready().await?;
        Ok(target)
    }

    /// The pizza server binary as a child process; it prints its URL and kubeconfig path when serving.
    pub async fn process(binary: &Path, args: &[String]) -> Result<Target, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        Self::process_in(binary, args, dir, Duration::from_secs(60)).await
    }

    /// Stops a server this harness started as a process and starts it again on the same data directory, waiting
    /// up to `ready_within` for it; returns it with the time from its start until it was ready (its caches filled
    /// from the store).
    pub async fn restart(
        mut self,
        binary: &Path,
        args: &[String],
        ready_within: Duration,
    ) -> Result<(Target, Duration), String> {
        let dir = self._dir.take().ok_or("no data directory to restart on")?;
        self.stop().await;
        let started = std::time::Instant::now();
        let target = Self::process_in(binary, args, dir, ready_within).await?;
        Ok((target, started.elapsed()))
    }

    /// The pizza server binary as a child process on the data directory `dir`, ready within `ready_within`.
    async fn process_in(
        binary: &Path,
        args: &[String],
        dir: tempfile::TempDir,
        ready_within: Duration,
    ) -> Result<Target, String> {
        forget_cached_pages(binary);
        let mut child = tokio::process::Command::new(binary)
            .arg("--secure-port=0")
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", binary.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let kubeconfig = loop {
            let line = tokio::time::timeout(ready_within, lines.next_line())
                .await
                .map_err(|_| format!("the server did not start within {ready_within:?}"))?
                .map_err(|e| e.to_string())?
                .ok_or("the server exited before serving")?;
            if let Some(path) = line.split("kubeconfig: ").nth(1) {
                break PathBuf::from(path.trim());
            }
        };
        // Keep reading stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let target = Target {
            endpoint: Endpoint::from_kubeconfig(&kubeconfig)?,
            pid: child.id(),
            guard: Guard::Process(child),
            _dir: Some(dir),
        };
        target.wait_ready_within(ready_within).await?;
        Ok(target)
    }

    /// Any server of the pizza API, reached through its kubeconfig.
    pub async fn remote(kubeconfig: &Path) -> Result<Target, String> {
        let target = Target {
            endpoint: Endpoint::from_kubeconfig(kubeconfig)?,
            pid: None,
            guard: Guard::Remote,
            _dir: None,
        };
        target.wait_ready().await?;
        Ok(target)
    }

    /// Waits for `/readyz`, or for `/healthz` on a server that has no `/readyz` (404: k8s.io/apiserver before
    /// 1.16, such as the Go pizza-apiserver).
    async fn wait_ready(&self) -> Result<(), String> {
        self.wait_ready_within(Duration::from_secs(60)).await
    }

    async fn wait_ready_within(&self, within: Duration) -> Result<(), String> {
        let client = self.endpoint.client(true)?;
        let mut path = "/readyz";
        let deadline = std::time::Instant::now() + within;
        while std::time::Instant::now() < deadline {
            if let Ok(r) = client
                .get(format!("{}{path}", self.endpoint.url))
                .send()
                .await
            {
                if r.status().is_success() {
                    return Ok(());
                }
                if r.status() == reqwest::StatusCode::NOT_FOUND && path == "/readyz" {
                    path = "/healthz";
                    continue;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(format!("{} did not become ready", self.endpoint.url))
    }

    /// Stops a server this harness started.
    pub async fn stop(mut self) {
        match &mut self.guard {
            Guard::InProcess(stop, task) => {
                if let Some(stop) = stop.take() {
                    let _ = stop.send(());
                }
                let _ = task.await;
            }
            Guard::Process(child) => {
                if let Some(pid) = child.id() {
                    // SIGTERM: the server drains and exits.
                    let _ = std::process::Command::new("kill")
                        .arg(pid.to_string())
                        .status();
                }
                let _ = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
            }
            Guard::Remote => {}
        }
    }
}

/// Asks the kernel to drop `binary`'s pages from the page cache, so that the server's code is read from disk as
/// after a reboot. The server's RSS counts the code it maps, and how much of it depends on how its pages entered the
/// cache: a binary just linked or copied sits in large folios from the writes, and Linux maps a whole folio on a
/// fault, so the same server measured 4 MiB more idle RSS (37 against 33 MiB on RocksDB) than once its pages were
/// read by faults. Best effort: pages still mapped by a running process stay, and a failure only means the figures
/// may carry that difference.
fn forget_cached_pages(binary: &Path) {
    if let Ok(file) = std::fs::File::open(binary) {
        // Dirty pages are not dropped: write them first.
        let _ = file.sync_data();
        let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
    }
}

/// The pizza-apiserver binary next to this executable (same target directory and profile).
pub fn default_server_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [
        dir.join("pizza-apiserver"),
        dir.parent()?.join("pizza-apiserver"),
    ]
    .into_iter()
    .find(|p| p.exists())
}
