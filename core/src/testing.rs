//! A test kit (feature `testing`): a user's server started in-process, as its binary would start, on a free
//! loopback port with a temporary data directory, ready; with its kubeconfig, a kube-rs client and a kubectl
//! runner. Dropping it (or [`TestServer::stop`]) shuts the server down.
//!
//! A server crate turns the feature on for its tests only:
//!
//! ```toml
//! [dev-dependencies]
//! apiserver = { version = "...", features = ["testing"] }
//! ```
//!
//! The kit starts the server through the same `start` function [`main!`](crate::main) runs, with
//! `--bind-address=127.0.0.1 --secure-port=0 --data-dir <temporary>` before the test's own flags (a backend, say:
//! `--storage-backend=sqlite`). It waits for `/readyz`, so the watch caches have loaded when the test begins.
//!
//! ```
//! # use apiserver::app::{App, Options, StartError, Started};
//! # use apiserver::meta::ObjectMeta;
//! # use apiserver::runtime::ResourceCodec;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "library.example.com", kind = "Book", namespaced)]
//! # pub struct Book {
//! #     pub metadata: ObjectMeta,
//! # }
//! # mod v1 {
//! #     #[apiserver::served(hub = "super::Book", version = "v1")]
//! #     pub struct Book {
//! #         pub metadata: apiserver::meta::ObjectMeta,
//! #     }
//! # }
//! # struct BookStrategy;
//! # impl apiserver::registry::Strategy<Book> for BookStrategy {}
//! # async fn start(options: Options) -> Result<Started, StartError> {
//! #     let mut app = App::new("library-apiserver", options.server).open().await?;
//! #     app.store(ResourceCodec::new().version::<v1::Book>(), BookStrategy)?;
//! #     app.bind().await
//! # }
//! use apiserver::testing::TestServer;
//!
//! # #[apiserver::tokio::main(crate = "apiserver::tokio")]
//! # async fn main() {
//! // `start` is the function the binary hands to `apiserver::main!`.
//! let server = TestServer::start(start, &["--storage-backend=memory"]).await;
//!
//! // A kube-rs client, authenticated as the kubeconfig's admin.
//! let groups = server.client().await.list_api_groups().await.unwrap();
//! assert!(groups.groups.iter().any(|g| g.name == "library.example.com"));
//!
//! // kubectl (it must be installed): `ok` fails the test unless kubectl succeeds, and returns its stdout.
//! let book = r#"{"apiVersion": "library.example.com/v1", "kind": "Book", "metadata": {"name": "dune"}}"#;
//! server.kubectl(&["create", "-f", "-"]).stdin(book).ok().await;
//! assert_eq!(server.ok(&["get", "books", "-o", "name"]).await, "book.library.example.com/dune\n");
//! let missing = server.kubectl(&["get", "book", "emma"]).await;
//! assert!(!missing.success && missing.stderr.contains(r#""emma" not found"#), "{}", missing.stderr);
//!
//! server.stop().await;
//! # }
//! ```

use std::future::{Future, IntoFuture};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::app::Started;
use crate::server::{ServeError, ShutdownSignal};

/// How long a started server may take to answer `/readyz` (its watch caches load from storage first).
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A server running in-process for a test; shut down when dropped or by [`TestServer::stop`].
pub struct TestServer {
    url: String,
    kubeconfig: PathBuf,
    signal: ShutdownSignal,
    task: Option<JoinHandle<Result<(), ServeError>>>,
    // Last: removed once the server has been told to stop.
    dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts the server `start` assembles (the function a binary hands to [`main!`](crate::main)) with `args`
    /// after the kit's flags, runs it on the current Tokio runtime and waits until it is ready.
    ///
    /// # Panics
    ///
    /// When the flags do not parse, the server does not start or does not become ready in a minute: the test
    /// fails with the reason.
    pub async fn start<O, E, F, Fut>(start: F, args: &[&str]) -> TestServer
    where
        O: clap::Parser,
        E: std::fmt::Display,
        F: FnOnce(O) -> Fut,
        Fut: Future<Output = Result<Started, E>>,
    {
        let dir = tempfile::tempdir().expect("a temporary data directory");
        let data_dir = dir
            .path()
            .to_str()
            .expect("a UTF-8 temporary path")
            .to_string();
        let name = O::command().get_name().to_string();
        let mut argv = vec![
            name.as_str(),
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--data-dir",
            &data_dir,
        ];
        argv.extend_from_slice(args);
        let options =
            O::try_parse_from(argv.iter().copied()).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let started = start(options)
            .await
            .unwrap_or_else(|e| panic!("the server did not start: {e}"));
        let signal = started.server.shutdown_signal();
        let task = tokio::spawn(started.server.run(std::future::pending()));
        let server = TestServer {
            url: started.url,
            kubeconfig: started.kubeconfig,
            signal,
            task: Some(task),
            dir,
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&self) {
        let client = self.client().await;
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut last = String::from("no answer yet");
        while Instant::now() < deadline {
            let request = http::Request::get("/readyz?verbose")
                .body(Vec::new())
                .expect("a request");
            match client.request_text(request).await {
                Ok(_) => return,
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the server at {} did not become ready: {last}", self.url);
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The kubeconfig the server wrote, with the admin's credentials when standalone.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The server's data directory (removed when the kit is dropped).
    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A kube-rs client from the kubeconfig: typed APIs, or any request through `request`/`request_text`.
    pub async fn client(&self) -> kube::Client {
        let kubeconfig =
            kube::config::Kubeconfig::read_from(&self.kubeconfig).expect("the written kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .expect("a client configuration from the kubeconfig");
        kube::Client::try_from(config).expect("a client")
    }

    /// kubectl with `args` and this server's kubeconfig; add input with [`Kubectl::stdin`], then `.await` it for
    /// its [`KubectlOutput`] or call [`Kubectl::ok`] or [`Kubectl::fails`].
    pub fn kubectl(&self, args: &[&str]) -> Kubectl {
        Kubectl {
            kubeconfig: self.kubeconfig.clone(),
            home: self.dir.path().to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin: None,
        }
    }

    /// kubectl's stdout; the test fails unless kubectl succeeds. Short for `kubectl(args).ok()`.
    pub async fn ok(&self, args: &[&str]) -> String {
        self.kubectl(args).ok().await
    }

    /// Shuts the server down gracefully and waits until it has.
    ///
    /// # Panics
    ///
    /// When the server ends with an error (or does not end in a minute).
    pub async fn stop(mut self) {
        self.signal.initiate();
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("the server stops within a minute")
                .expect("the server task")
                .expect("the server ran without error");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.signal.initiate();
    }
}

/// A kubectl command about to run against a [`TestServer`], off the async threads, with `HOME` in the server's
/// data directory (so no discovery cache is shared) and no `KUBECONFIG` from the environment.
#[must_use = "a kubectl command runs when awaited"]
pub struct Kubectl {
    kubeconfig: PathBuf,
    home: PathBuf,
    args: Vec<String>,
    stdin: Option<String>,
}

/// What kubectl printed, and whether it succeeded.
#[derive(Clone, Debug)]
pub struct KubectlOutput {
    /// Its standard output.
    pub stdout: String,
    /// Its standard error (errors, warnings).
    pub stderr: String,
    /// Whether it exited with 0.
    pub success: bool,
}

impl Kubectl {
    /// `input` on kubectl's standard input (for `-f -`).
    pub fn stdin(mut self, input: impl Into<String>) -> Kubectl {
        self.stdin = Some(input.into());
        self
    }

    /// Runs kubectl and returns its stdout; the test fails, with kubectl's stderr, unless it succeeds.
    pub async fn ok(self) -> String {
        let args = self.args.clone();
        let out = self.await;
        assert!(out.success, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    /// Runs kubectl and returns its stderr; the test fails, with kubectl's stdout, if it succeeds.
    pub async fn fails(self) -> String {
        let args = self.args.clone();
        let out = self.await;
        assert!(!out.success, "kubectl {args:?} succeeded: {}", out.stdout);
        out.stderr
    }

    fn run(self) -> KubectlOutput {
        use std::io::Write;
        use std::process::{Command, Stdio};

        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(&self.args)
            .env_remove("KUBECONFIG")
            .env("HOME", &self.home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl runs (it must be on PATH)");
        let mut input = child.stdin.take().expect("kubectl's stdin");
        if let Some(text) = &self.stdin {
            input
                .write_all(text.as_bytes())
                .expect("kubectl reads its input");
        }
        // Closed: kubectl reading `-f -` sees the end of its input.
        drop(input);
        let out = child.wait_with_output().expect("kubectl ends");
        KubectlOutput {
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            success: out.status.success(),
        }
    }
}

impl IntoFuture for Kubectl {
    type Output = KubectlOutput;
    type IntoFuture = Pin<Box<dyn Future<Output = KubectlOutput> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            tokio::task::spawn_blocking(move || self.run())
                .await
                .expect("kubectl's thread")
        })
    }
}
