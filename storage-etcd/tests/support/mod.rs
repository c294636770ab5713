//! A throwaway etcd for tests: Debian's `etcd` binary on free loopback ports (client and peer) with a temporary
//! data directory, started healthy and killed when dropped. Works as root and as any user.
//!
//! A watchdog shell process kills etcd and removes its data directory if the test process dies without
//! dropping the server (a crash or SIGKILL), so no etcd outlives the test run.
//!
//! Environment: `ETCD_BIN` names the binary (default `etcd` on `PATH`); `ETCD_TEST_DIR` is where data directories
//! go (default: the system temp directory).

#![allow(dead_code)]

use std::ffi::OsString;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver_storage_etcd::etcd_client::{self, Client, ConnectOptions};
use member::{default_binary, member_command, spawn_logged};

mod member;
use apiserver_storage_etcd::{EtcdConfig, EtcdStorage};

/// How long etcd may take to become healthy on a loaded machine.
const START_TIMEOUT: Duration = Duration::from_secs(90);

/// TLS files for etcd's serving side and the client CA it trusts.
#[derive(Clone, Debug)]
pub struct ServerTls {
    /// The CA that signed the server and client certificates.
    pub ca: PathBuf,
    /// etcd's serving certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

/// A running etcd.
pub struct EtcdServer {
    /// The etcd binary, kept for restarts.
    binary: OsString,
    child: Option<Child>,
    watchdog: Option<Child>,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    tls: Option<ServerTls>,
    /// A unique member name: the health probe checks it, so it never mistakes another test's etcd for ours.
    name: String,
    /// Client options the health probe uses (TLS needs a client certificate).
    probe: ConnectOptions,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl EtcdServer {
    /// Starts a plain-text etcd and waits until it answers.
    pub async fn start() -> EtcdServer {
        Self::start_with(default_binary(), None, ConnectOptions::new()).await
    }

    /// Starts envtest's etcd (3.5.30, from `$KUBEBUILDER_ASSETS`, which `scripts/test.sh` unpacks from
    /// `../shared/envtest`): an etcd whose progress notifications the watch cache can rely on (3.5.13 and later),
    /// where Debian's 3.4 sends consistent reads to etcd.
    pub async fn start_envtest() -> EtcdServer {
        let assets = apiserver::envtest::assets_dir().unwrap_or_else(|e| panic!("{e}"));
        Self::start_with(
            assets.join("etcd").into_os_string(),
            None,
            ConnectOptions::new(),
        )
        .await
    }

    /// Starts etcd serving TLS with `--client-cert-auth`; `probe` must carry a client identity.
    pub async fn start_tls(tls: ServerTls, probe: ConnectOptions) -> EtcdServer {
        Self::start_with(default_binary(), Some(tls), probe).await
    }

    async fn start_with(
        binary: OsString,
        tls: Option<ServerTls>,
        probe: ConnectOptions,
    ) -> EtcdServer {
        let root = std::env::var_os("ETCD_TEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        let mut last_log = String::new();
        // Free ports can be taken by someone else between probing and etcd binding them: retry with new ones.
        for _ in 0..3 {
            let dir = tempfile::Builder::new()
                .prefix("etcd-test-")
                .tempdir_in(&root)
                .expect("temporary etcd directory");
            let mut server = EtcdServer {
                binary: binary.clone(),
                child: None,
                watchdog: None,
                dir,
                client_port: free_port(),
                peer_port: free_port(),
                tls: tls.clone(),
                name: format!("test-{}", uuid::Uuid::new_v4().simple()),
                probe: probe.clone(),
            };
            server.spawn();
            if server.wait_healthy().await {
                return server;
            }
            last_log = server.log();
        }
        panic!("etcd did not start; last log:\n{last_log}");
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme(), self.client_port)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// The etcd process, while it runs (the bench measures its CPU).
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// etcd's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn spawn(&mut self) {
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let client = self.url();
        let mut cmd = member_command(
            &self.binary,
            &self.name,
            &self.data_dir(),
            &client,
            &peer,
            &format!("{}={peer}", self.name),
        );
        if let Some(tls) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&tls.cert)
                .arg("--key-file")
                .arg(&tls.key)
                .arg("--trusted-ca-file")
                .arg(&tls.ca)
                .arg("--client-cert-auth");
        }
        let child = spawn_logged(cmd, &self.log_path());
        // Kills etcd and removes the directory if this test process goes away without dropping us.
        let watchdog = Command::new("sh")
            .arg("-c")
            .arg(
                "while kill -0 \"$1\" 2>/dev/null && kill -0 \"$2\" 2>/dev/null; do sleep 1; done; \
                 if ! kill -0 \"$1\" 2>/dev/null; then kill -9 \"$2\" 2>/dev/null; rm -rf \"$3\"; fi",
            )
            .arg("etcd-watchdog")
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        self.child = Some(child);
        self.watchdog = watchdog;
    }

    async fn wait_healthy(&mut self) -> bool {
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                return false;
            }
            let probe = async {
                let mut c = Client::connect([self.url()], Some(self.probe.clone())).await?;
                c.get("health", None).await?;
                c.member_list().await
            };
            if let Ok(Ok(members)) = tokio::time::timeout(Duration::from_secs(3), probe).await {
                return members.members().iter().any(|m| m.name() == self.name);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// Kills etcd (keeping its data), as a crash would.
    pub fn stop(&mut self) {
        for child in [self.child.take(), self.watchdog.take()]
            .into_iter()
            .flatten()
        {
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts etcd again on the same ports and data, and waits until it answers.
    pub async fn restart(&mut self) {
        self.stop();
        // The old process released its ports when it died; retry a few times in case the kernel is slow.
        for _ in 0..5 {
            self.spawn();
            if self.wait_healthy().await {
                return;
            }
            self.stop();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        panic!("etcd did not restart; log:\n{}", self.log());
    }

    /// A configuration for this server with `prefix` and no compactor.
    pub fn config(&self, prefix: &str) -> EtcdConfig {
        EtcdConfig {
            compaction_interval: None,
            ..EtcdConfig::new([self.url()], prefix)
        }
    }

    /// A store on this server (no compactor).
    pub async fn store(&self) -> EtcdStorage {
        EtcdStorage::connect(self.config("/registry"))
            .await
            .expect("connect")
    }

    /// A raw etcd client.
    pub async fn client(&self) -> Client {
        Client::connect([self.url()], Some(self.probe.clone()))
            .await
            .expect("etcd client")
    }

    /// Where test files may go (removed with the server).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A fresh etcd and a store on it, as one `Arc<dyn Storage>` that stops etcd when dropped: what the conformance
/// factory hands each case, so cases that compact cannot disturb others. Test crates only: the bench harness
/// includes this file too, without the `testing` feature.
#[cfg(test)]
pub async fn fresh_store() -> Arc<dyn apiserver::storage::Storage> {
    let server = EtcdServer::start().await;
    let store = server.store().await;
    apiserver::storage::testing::keeping(store, server)
}

/// `fresh_store` on envtest's etcd, after checking that the store relies on its progress notifications.
pub async fn fresh_store_with_reliable_progress() -> Arc<dyn apiserver::storage::Storage> {
    use apiserver::storage::Storage;
    let server = EtcdServer::start_envtest().await;
    let store = server.store().await;
    assert!(
        store.reliable_progress(),
        "envtest's etcd should be 3.5.13 or later: consistent reads would not come from the cache"
    );
    apiserver::storage::testing::keeping(store, server)
}

/// Keeps `etcd_client` in use for test files that need only the harness.
pub type RawClient = etcd_client::Client;

/// A loopback TCP proxy in front of etcd that a test can cut (dropping every connection and refusing new ones)
/// and resume, to break a client's connection while etcd itself stays up.
pub struct Proxy {
    addr: std::net::SocketAddr,
    open: Arc<std::sync::atomic::AtomicBool>,
    conns: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// Starts proxying a new loopback port to `target` (`host:port`).
    pub async fn start(target: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy listener");
        let addr = listener.local_addr().expect("proxy address");
        let open = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let conns: Arc<std::sync::Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (o, c) = (open.clone(), conns.clone());
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !o.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let target = target.clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                c.lock().expect("proxy lock").push(task.abort_handle());
            }
        });
        Proxy {
            addr,
            open,
            conns,
            accept,
        }
    }

    /// The proxy's client URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Drops every proxied connection and refuses new ones until [`Proxy::resume`].
    pub fn cut(&self) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
        for c in self.conns.lock().expect("proxy lock").drain(..) {
            c.abort();
        }
    }

    /// Accepts connections again.
    pub fn resume(&self) {
        self.open.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}

impl EtcdServer {
    /// The client address as `host:port`, for a [`Proxy`].
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }
}
