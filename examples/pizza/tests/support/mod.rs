//! An in-process pizza server on a free loopback port with a temporary data directory, and clients for it: the
//! installed `kubectl` (through the kubeconfig the server writes) and kube-rs for raw HTTP.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use clap::Parser;
use pizza_apiserver::server::{Options, start};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub struct TestServer {
    pub url: String,
    pub kubeconfig: PathBuf,
    pub dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// The server's own runtime, when it has one ([`TestServer::start_isolated`]).
    runtime: Option<tokio::runtime::Runtime>,
}

impl TestServer {
    /// Starts the server with `args` after the port and data-dir flags (the default backend, SQLite, unless given).
    pub async fn start(args: &[&str]) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        Self::start_in(dir, args).await
    }

    pub async fn start_in(dir: tempfile::TempDir, args: &[&str]) -> TestServer {
        let server = Self::start_unready(dir, args).await;
        server.wait_ready().await;
        server
    }

    /// Starts the server on a Tokio runtime of its own, so that [`TestServer::kill`] can end all its tasks at once
    /// without running any shutdown code, as SIGKILL ends a process.
    pub async fn start_isolated(args: &[&str]) -> TestServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a runtime");
        let dir = tempfile::tempdir().expect("temp dir");
        let mut server = Self::start_on(Some(runtime.handle().clone()), dir, args).await;
        server.runtime = Some(runtime);
        server.wait_ready().await;
        server
    }

    /// Ends the server as SIGKILL would: every task of its runtime is dropped where it stands; nothing is released,
    /// flushed or drained. Only for servers from [`TestServer::start_isolated`].
    pub fn kill(mut self) {
        self.stop.take();
        self.runtime
            .take()
            .expect("an isolated server")
            .shutdown_background();
    }

    /// Starts the server without waiting for `/readyz`.
    pub async fn start_unready(dir: tempfile::TempDir, args: &[&str]) -> TestServer {
        Self::start_on(None, dir, args).await
    }

    async fn start_on(
        runtime: Option<tokio::runtime::Handle>,
        dir: tempfile::TempDir,
        args: &[&str],
    ) -> TestServer {
        let runtime = runtime.unwrap_or_else(tokio::runtime::Handle::current);
        let data_dir = dir.path().to_str().expect("utf-8 temp path").to_string();
        let mut argv = vec![
            "pizza-apiserver",
            "--secure-port=0",
            "--data-dir",
            &data_dir,
        ];
        argv.extend_from_slice(args);
        let options = Options::parse_from(argv);
        // A restart in the same process: the previous server's background tasks may still hold the embedded
        // database (its lock is released when the last of them ends), so wait for it as a new process would not
        // have to.
        let mut attempts = 0;
        let started = loop {
            match runtime
                .spawn(start(options.clone()))
                .await
                .expect("start runs")
            {
                Ok(started) => break started,
                Err(e) if attempts < 100 && e.to_string().contains("already open") => {
                    attempts += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("server starts: {e}"),
            }
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let server = started.server;
        let task = runtime.spawn(async move {
            server
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .expect("server runs");
        });
        TestServer {
            url: started.url,
            kubeconfig: started.kubeconfig,
            dir,
            stop: Some(stop),
            task: Some(task),
            runtime: None,
        }
    }

    /// Waits until `/readyz` answers 200 (the watch caches have loaded).
    async fn wait_ready(&self) {
        let client = self.client().await;
        for _ in 0..200 {
            let request = http::Request::get("/readyz")
                .body(kube::client::Body::from(Vec::new()))
                .unwrap();
            if let Ok(response) = client.send(request).await
                && response.status() == 200
            {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("server did not become ready");
    }

    /// Stops the server and waits for it to finish; returns the data directory for a restart.
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        let dir = tempfile::tempdir().expect("temp dir");
        std::mem::replace(&mut self.dir, dir)
    }

    /// A kube-rs client from the written kubeconfig.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    }

    /// A kube-rs client like [`TestServer::client`] but presenting `token` instead of the admin's (or no
    /// credential at all).
    pub async fn client_with_token(&self, token: Option<&str>) -> kube::Client {
        let written = std::fs::read_to_string(&self.kubeconfig).expect("kubeconfig");
        // The last `  user:` is the users entry (the context's `    user: <name>` comes first).
        let (head, _) = written
            .rsplit_once("  user:")
            .expect("a user in the kubeconfig");
        let user = match token {
            Some(token) => format!("  user:\n    token: {token}\n"),
            None => "  user: {}\n".to_string(),
        };
        let path = self
            .dir
            .path()
            .join(format!("kubeconfig-{}", uuid::Uuid::new_v4()));
        std::fs::write(&path, format!("{head}{user}")).expect("kubeconfig written");
        let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    }

    /// Runs kubectl with this server's kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        kubectl(&self.kubeconfig, args, None)
    }

    /// Runs kubectl with `stdin` as its input (`-f -`).
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        kubectl(&self.kubeconfig, args, Some(stdin))
    }

    /// Runs kubectl and returns its stdout, failing the test with stderr if it fails.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn kubectl_stdin_ok(&self, args: &[&str], stdin: &str) -> String {
        let out = self.kubectl_stdin(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Opens a streaming GET (e.g. a watch) and returns its status, headers and body stream.
    pub async fn stream(&self, path: &str, accept: &str) -> (u16, http::HeaderMap, Stream) {
        self.stream_with(path, &[("accept", accept)]).await
    }

    /// Opens a streaming GET with these headers.
    pub async fn stream_with(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, http::HeaderMap, Stream) {
        let mut request = http::Request::get(path);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(kube::client::Body::from(Vec::new())).unwrap();
        let response = self
            .client()
            .await
            .send(request)
            .await
            .expect("request sent");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let stream = Stream {
            body: response.into_body(),
            buf: Vec::new(),
        };
        (status, headers, stream)
    }

    /// A raw request through kube-rs: status, headers and body, whatever the status.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> (u16, http::HeaderMap, Vec<u8>) {
        let mut request = http::Request::builder().method(method).uri(path);
        for (k, v) in headers {
            request = request.header(*k, *v);
        }
        let response = self
            .client()
            .await
            .send(request.body(kube::client::Body::from(body)).unwrap())
            .await
            .expect("request sent");
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = http_body_util_collect(response.into_body()).await;
        (status, headers, body)
    }
}

/// An open streaming response (a watch), read as it arrives.
pub struct Stream {
    body: kube::client::Body,
    /// Everything read so far.
    pub buf: Vec<u8>,
}

impl Stream {
    /// Reads until `done(&buf)`; panics with `what` if that takes longer than `within`.
    pub async fn read_until(&mut self, within: Duration, what: &str, done: impl Fn(&[u8]) -> bool) {
        use http_body_util::BodyExt;
        let deadline = tokio::time::Instant::now() + within;
        while !done(&self.buf) {
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .unwrap_or_else(|_| panic!("{what} within {within:?}"))
                .expect("stream still open")
                .expect("stream readable");
            if let Ok(chunk) = frame.into_data() {
                self.buf.extend_from_slice(&chunk);
            }
        }
    }

    /// Waits for the stream to end: `Ok` when it ends cleanly, `Err` with the transport error otherwise.
    pub async fn end(mut self, within: Duration) -> Result<(), String> {
        use http_body_util::BodyExt;
        tokio::time::timeout(within, async {
            loop {
                match self.body.frame().await {
                    None => return Ok(()),
                    Some(Err(e)) => return Err(e.to_string()),
                    Some(Ok(_)) => {}
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the stream did not end within {within:?}"))
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // A runtime may not be dropped where blocking is not allowed (in the test's own runtime).
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// The body as JSON, or a panic that shows it.
pub fn parse(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(body)))
}

/// A request through the admin's client with at most one extra header and a JSON body (`null` for none): the
/// status and the answer as JSON.
pub async fn call(
    server: &TestServer,
    method: &str,
    path: &str,
    header: Option<(&str, &str)>,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    let headers: Vec<(&str, &str)> = header.into_iter().collect();
    let body = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).expect("JSON body")
    };
    let (code, _, body) = server.raw(method, path, &headers, body).await;
    (code, parse(&body))
}

/// Sends a request (a JSON body when given) and returns the status and the answer as JSON (or as a JSON string
/// when it is not JSON).
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<serde_json::Value>,
) -> (u16, serde_json::Value) {
    let mut request = http::Request::builder().method(method).uri(path);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let body = match body {
        Some(body) => {
            request = request.header("content-type", "application/json");
            serde_json::to_vec(&body).expect("JSON body")
        }
        None => Vec::new(),
    };
    let response = client
        .send(
            request
                .body(kube::client::Body::from(body))
                .expect("request"),
        )
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let bytes = http_body_util_collect(response.into_body()).await;
    let value = serde_json::from_slice(&bytes).unwrap_or_else(|_| {
        serde_json::Value::String(String::from_utf8_lossy(&bytes).into_owned())
    });
    (status, value)
}

async fn http_body_util_collect(body: kube::client::Body) -> Vec<u8> {
    use http_body_util::BodyExt;
    body.collect().await.expect("body read").to_bytes().to_vec()
}

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut command = Command::new("kubectl");
    command
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", kubeconfig.parent().unwrap_or(Path::new("/tmp")))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("kubectl is installed");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    } else {
        drop(child.stdin.take());
    }
    child.wait_with_output().expect("kubectl runs")
}

/// The example manifests of the kubectl tour (`docs/running.md`).
/// Leaves out the cost controller, for tests that write a pizza's status themselves or count its events.
#[allow(dead_code)]
pub const NO_COST_CONTROLLER: &str = "--controllers=*,-pizza-cost";
pub const TOPPINGS: &str = include_str!("../../artifacts/toppings.yaml");
pub const MARGHERITA: &str = include_str!("../../artifacts/margherita.yaml");

/// Runs `tests/python/<script>` with the server's kubeconfig as its argument, under `$PIZZA_TEST_PYTHON`
/// (`scripts/test.sh` points it at a virtualenv with the packages the scripts import), else `python3`.
pub async fn run_python(script: &str, kubeconfig: &Path) -> Output {
    let python = std::env::var("PIZZA_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(script);
    let kubeconfig = kubeconfig.to_path_buf();
    tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .arg(script)
            .arg(&kubeconfig)
            .output()
            .unwrap_or_else(|e| panic!("running {python}: {e}"))
    })
    .await
    .expect("the client process")
}
