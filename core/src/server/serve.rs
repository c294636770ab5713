//! The HTTPS server: bind, TLS, HTTP/1.1 and HTTP/2 on one port (hyper-util's auto connection), the filter
//! chain around the routes, post-start hooks, and graceful shutdown.
//!
//! Shutdown, when a signal arrives or the caller's future completes: `/readyz` fails at once; requests are
//! served as usual for `--shutdown-delay-duration`; then the listener closes, [`ShutdownSignal::draining`]
//! fires so streams (watches) end, every connection is told to finish (HTTP/1.1 closes after the current
//! response, HTTP/2 sends GOAWAY), and the server waits for in-flight requests up to the shutdown timeout.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::CertificateDer;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::dynamic_certificates::DynamicServingCertificates;
use super::filters::FilterChain;
use super::filters::{ConnectionWatches, InFlightLimits};
use super::healthz::{HealthCheck, HealthEndpoint, HookStatus};
use super::status::{method_not_allowed, not_found};
use super::tls::{self, ServingCertificate, TlsError};
use super::{ServingOptions, ShutdownSignal, VersionInfo};
use crate::audit::Auditor;
use crate::auth::{
    AlwaysDeny, AuthenticatedOrAnonymous, Authenticator, Authorizer, DEFAULT_ALWAYS_ALLOW_PATHS,
    PathAuthorizer, PeerCertificates, PrivilegedGroups, UnionAuthenticator, UnionAuthorizer,
};
use crate::metrics::{self, Metrics};
use crate::request::RequestInfoFactory;
use crate::storage::Storage;

/// How long a TLS handshake may take before the connection is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Upstream's default request timeout, used as the default bound on draining in-flight requests.
/// How long the `storage-readiness` hook waits for the watch caches (upstream's `--storage-initialization-timeout`).
const STORAGE_INITIALIZATION_TIMEOUT: Duration = Duration::from_secs(60);
const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(60);
/// Go's HTTP/2 streams per connection when `--http2-max-streams-per-connection` is 0.
const GO_HTTP2_MAX_STREAMS: u32 = 250;
/// What kube-apiserver lets a client send at once on HTTP/2 ("at least 99% of serialized resources in surveyed
/// clusters were smaller than 256kb"): frames and each stream's window of this size, and a connection window of
/// this times the streams allowed, so that most writes arrive in one frame without waiting for window updates.
const RESOURCE_BODY_99_PERCENTILE: u32 = 256 * 1024;
/// What a response stream may have waiting to be written before its body is asked for more: one piece of a
/// streamed list. Go's HTTP/2 server blocks a handler until its data is on the connection; h2's default (400 KiB
/// per stream) kept most of each list in memory while it waited, 3-4 MiB more peak RSS with four concurrent
/// LISTs of 2,000 pizzas (`apiserver-bench --lists 200`) at the same throughput. A larger chunk (an object of a
/// GET) is still sent whole.
const STREAM_SEND_BUFFER_BYTES: usize = 64 * 1024;
/// HTTP/2's largest window.
const MAX_HTTP2_WINDOW: u32 = (1 << 31) - 1;
/// The most bytes of request line and headers a client may send (Go's `http.DefaultMaxHeaderBytes`, 1 MiB, which
/// upstream's servers keep, plus the 4 KiB of slack Go's HTTP/1 reader allows); more is 431 over HTTP/1.1 and a
/// stream error over HTTP/2.
const MAX_HEADER_BYTES: usize = (1 << 20) + 4096;
/// The most header fields an HTTP/1.1 request may have (hyper's default is 100): upstream 1.38 takes 16,384 values
/// of a header (a front proxy's `X-Remote-Group` lines), with room for the usual headers beside them. Go limits
/// only the bytes; HTTP/2 is limited by [`MAX_HEADER_BYTES`] alone.
const MAX_HEADER_FIELDS: usize = 16_384 + 256;
/// A connection that has not started a request this long after its handshake is closed (upstream's
/// `ReadHeaderTimeout`, 32 s), so that clients that connect and say nothing cannot use up file descriptors.
const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(32);
/// A connection with no request in flight for this long is closed (upstream's HTTP/2 `IdleTimeout`).
const IDLE_CONNECTION_TIMEOUT: Duration = Duration::from_secs(90);

/// Starting or running the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound.
    #[error("failed to listen on {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
    /// The serving certificate could not be loaded or generated.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// The configuration is inconsistent (e.g. a bad always-allow path).
    #[error("invalid server configuration: {0}")]
    Config(String),
    /// A post-start hook failed; the server shut down (upstream exits the process).
    #[error("PostStartHook {name:?} failed: {message}")]
    PostStartHook {
        /// The hook.
        name: String,
        /// Its error.
        message: String,
    },
}

/// What the connection a request came on knows, in every request's extensions (for logs and handlers); the
/// client's certificates go in as [`PeerCertificates`] too, for the authenticators.
#[derive(Clone, Debug)]
pub struct ConnectionInfo {
    /// The client's address.
    pub remote_addr: SocketAddr,
    /// The server address the connection came in on.
    pub local_addr: SocketAddr,
    /// The negotiated ALPN protocol (`h2`, `http/1.1`), if any.
    pub alpn_protocol: Option<Vec<u8>>,
    /// The client's certificate chain, leaf first; empty when the client sent none.
    pub peer_certificates: Vec<CertificateDer<'static>>,
}

type HookFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;
type HookFn = Box<dyn FnOnce(ShutdownSignal) -> HookFuture + Send>;

struct PostStartHook {
    name: String,
    run: HookFn,
    status: HookStatus,
}

type PreShutdownHook = (
    String,
    Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()> + Send>> + Send>,
);

/// Configures a [`Server`]: options, routes, health checks, hooks, authentication and authorization.
pub struct ServerBuilder {
    name: String,
    options: ServingOptions,
    default_cert_dir: Option<PathBuf>,
    certificate: Option<ServingCertificate>,
    routes: Router,
    version: VersionInfo,
    healthz: HealthEndpoint,
    livez: HealthEndpoint,
    readyz: HealthEndpoint,
    hooks: Vec<PostStartHook>,
    pre_shutdown_hooks: Vec<PreShutdownHook>,
    authenticators: Vec<Box<dyn Authenticator>>,
    anonymous: bool,
    authorizer: Option<Box<dyn Authorizer>>,
    always_allow_paths: Vec<String>,
    shutdown_timeout: Duration,
    connection_timeouts: ConnectionTimeouts,
    request_info: RequestInfoFactory,
    signal: ShutdownSignal,
    metrics: Arc<Metrics>,
    auditor: Option<Arc<Auditor>>,
}

/// When a connection that serves nothing is closed.
#[derive(Clone, Copy, Debug)]
struct ConnectionTimeouts {
    first_request: Duration,
    idle: Duration,
}

impl ServerBuilder {
    fn new(name: impl Into<String>) -> Self {
        ServerBuilder {
            name: name.into(),
            options: ServingOptions::default(),
            default_cert_dir: None,
            certificate: None,
            routes: Router::new(),
            version: VersionInfo::default(),
            healthz: HealthEndpoint::new("healthz"),
            livez: HealthEndpoint::new("livez"),
            readyz: HealthEndpoint::new("readyz"),
            hooks: Vec::new(),
            pre_shutdown_hooks: Vec::new(),
            authenticators: Vec::new(),
            anonymous: true,
            authorizer: None,
            always_allow_paths: DEFAULT_ALWAYS_ALLOW_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            connection_timeouts: ConnectionTimeouts {
                first_request: FIRST_REQUEST_TIMEOUT,
                idle: IDLE_CONNECTION_TIMEOUT,
            },
            request_info: RequestInfoFactory::default(),
            signal: ShutdownSignal::new(),
            metrics: Arc::new(Metrics::new()),
            auditor: None,
        }
    }

    /// Records metrics in this registry (shared with the storage and admission the routes use); by default
    /// the server makes its own.
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Audits requests with this policy and these backends ([`crate::audit::AuditOptions::auditor`]); `None`
    /// (the default) audits nothing. Queued events are written out when the server has drained.
    pub fn auditor(mut self, auditor: Option<Arc<Auditor>>) -> Self {
        self.auditor = auditor;
        self
    }

    /// The serving flags.
    pub fn options(mut self, options: ServingOptions) -> Self {
        self.options = options;
        self
    }

    /// Where to keep generated certificates when `--cert-dir` is not given (e.g. `<data-dir>/certs`).
    pub fn default_cert_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.default_cert_dir = Some(dir.into());
        self
    }

    /// Runs `hook` once shutdown is initiated (upstream's `AddPreShutdownHook`); [`Server::run`] returns only
    /// after it finished, or after the shutdown timeout. For work that must be done before the process exits,
    /// such as releasing a leader election lease.
    pub fn pre_shutdown_hook<F, Fut>(mut self, name: impl Into<String>, hook: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.pre_shutdown_hooks
            .push((name.into(), Box::new(move || Box::pin(hook()))));
        self
    }

    /// Serves this certificate instead of the one the options name or generate; its `cert_file` and `key_file`
    /// are followed as `--tls-cert-file`'s are.
    pub fn certificate(mut self, certificate: ServingCertificate) -> Self {
        self.certificate = Some(certificate);
        self
    }

    /// Adds API routes (merged with routes added before). The server owns the fallbacks (404 and 405
    /// `Status`), so the routers given here should not set one.
    pub fn routes(mut self, routes: Router) -> Self {
        self.routes = self.routes.merge(routes);
        self
    }

    /// What `/version` reports.
    pub fn version(mut self, version: VersionInfo) -> Self {
        self.version = version;
        self
    }

    /// Adds a check to `/healthz`, `/livez` and `/readyz` (as upstream's `AddHealthChecks`).
    pub fn health_check(mut self, check: HealthCheck) -> Self {
        self.healthz.checks.push(check.clone());
        self.livez.checks.push(check.clone());
        self.readyz.checks.push(check);
        self
    }

    /// Adds a check to `/livez` only.
    pub fn livez_check(mut self, check: HealthCheck) -> Self {
        self.livez.checks.push(check);
        self
    }

    /// Adds a check to `/readyz` only (e.g. storage readiness, watch cache synced).
    pub fn readyz_check(mut self, check: HealthCheck) -> Self {
        self.readyz.checks.push(check);
        self
    }

    /// Checks a backend as upstream checks etcd: `<name>` on all three paths and `<name>-readiness` on `/readyz`
    /// (upstream's names are `etcd` and `etcd-readiness`), and the post-start hook `storage-readiness`, which
    /// finishes once every watch cache in `caches` holds its resource, or after a minute with a warning (upstream's
    /// `--storage-initialization-timeout` default; until then reads go to the backend).
    pub fn storage(
        self,
        name: &str,
        backend: Arc<dyn Storage>,
        caches: Vec<Arc<dyn Storage>>,
    ) -> Self {
        self.health_check(HealthCheck::storage(name, backend.clone()))
            .readyz_check(HealthCheck::storage(format!("{name}-readiness"), backend))
            .post_start_hook("storage-readiness", move |shutdown| async move {
                let deadline = tokio::time::Instant::now() + STORAGE_INITIALIZATION_TIMEOUT;
                loop {
                    let mut ready = true;
                    for cache in &caches {
                        ready &= cache.readiness().await.is_ok();
                    }
                    if ready || shutdown.is_initiated() {
                        return Ok(());
                    }
                    if tokio::time::Instant::now() >= deadline {
                        tracing::warn!(
                            "storage not ready after {STORAGE_INITIALIZATION_TIMEOUT:?}: going on"
                        );
                        return Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            })
    }

    /// Runs `hook` once the server is listening (e.g. start informers). Until it returns, the check
    /// `poststarthook/<name>` fails on all three health paths; if it fails, the server shuts down and
    /// [`Server::run`] returns [`ServeError::PostStartHook`]. The hook gets the shutdown signal to stop with.
    pub fn post_start_hook<F, Fut>(mut self, name: impl Into<String>, hook: F) -> Self
    where
        F: FnOnce(ShutdownSignal) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), String>> + Send + 'static,
    {
        let name = name.into();
        let status = HookStatus::default();
        let check = status.check(&name);
        self = self.health_check(check);
        self.hooks.push(PostStartHook {
            name,
            run: Box::new(move |signal| Box::pin(hook(signal))),
            status,
        });
        self
    }

    /// Adds an authenticator, tried in the order added, before the anonymous fallback.
    pub fn authenticator(mut self, authenticator: impl Authenticator) -> Self {
        self.authenticators.push(Box::new(authenticator));
        self
    }

    /// Whether requests no authenticator claims are `system:anonymous` (default) or refused with 401. A
    /// credential that was presented and failed is 401 either way.
    pub fn anonymous(mut self, enabled: bool) -> Self {
        self.anonymous = enabled;
        self
    }

    /// The authorizer asked after the always-allow paths and `system:masters` (default [`AlwaysDeny`]: without
    /// one, only those are allowed). [`crate::auth::AlwaysAllow`] serves anyone anything.
    pub fn authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizer = Some(Box::new(authorizer));
        self
    }

    /// Replaces the paths anyone may read without asking the authorizer
    /// ([`DEFAULT_ALWAYS_ALLOW_PATHS`]; a trailing `*` matches a prefix).
    pub fn always_allow_paths(mut self, paths: Vec<String>) -> Self {
        self.always_allow_paths = paths;
        self
    }

    /// How long draining waits for in-flight requests before giving up on them (default 60 s).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// How long a connection may go without starting its first request (default 32 s, upstream's
    /// `ReadHeaderTimeout`), and how long it may be idle between requests (default 90 s) before it is closed.
    pub fn connection_timeouts(mut self, first_request: Duration, idle: Duration) -> Self {
        self.connection_timeouts = ConnectionTimeouts {
            first_request,
            idle,
        };
        self
    }

    /// The server's shutdown signal, available before binding so that routes and hooks can hold it.
    pub fn shutdown_signal(&self) -> ShutdownSignal {
        self.signal.clone()
    }

    /// Loads or generates the certificate, assembles the handler chain and binds the listener.
    pub async fn bind(self) -> Result<Server, ServeError> {
        let (given, options) = (self.certificate, self.options.clone());
        let default_dir = self.default_cert_dir.clone();
        let (certificate, certificates) = tokio::task::spawn_blocking(move || {
            let certificate = match given {
                Some(c) => c,
                None => ServingCertificate::from_options(&options, default_dir.as_deref())?,
            };
            let certificates =
                DynamicServingCertificates::load(&certificate, &options.tls_sni_cert_key)?;
            Ok::<_, TlsError>((certificate, certificates))
        })
        .await
        .map_err(|e| ServeError::Config(format!("certificate task failed: {e}")))??;
        let tls = tls::server_config(&self.options, certificates.resolver())?;

        let mut union = UnionAuthenticator::new();
        for a in self.authenticators {
            union = union.with_boxed(a);
        }
        let authenticator = AuthenticatedOrAnonymous::new(Box::new(union), self.anonymous);
        let paths =
            PathAuthorizer::new(&self.always_allow_paths).map_err(|e| ServeError::Config(e.0))?;
        let authorizer = UnionAuthorizer::new()
            .with(PrivilegedGroups::default())
            .with(paths)
            .with_boxed(self.authorizer.unwrap_or_else(|| Box::new(AlwaysDeny)));

        let mut readyz = self.readyz;
        readyz
            .checks
            .push(HealthCheck::shutdown(self.signal.clone()));
        let health = self.metrics.health();
        let version = self.version;
        let app = Router::new()
            .merge(self.healthz.with_metrics(health.clone()).router())
            .merge(self.livez.with_metrics(health.clone()).router())
            .merge(readyz.with_metrics(health.clone()).router())
            .route(
                "/version",
                get(move || std::future::ready(version.response())),
            )
            .merge(metrics::router(self.metrics.clone()))
            .merge(self.routes)
            .fallback(|| std::future::ready(not_found()))
            .method_not_allowed_fallback(|| std::future::ready(method_not_allowed()));
        let app = FilterChain {
            request_info: Arc::new(self.request_info),
            authenticator: Arc::new(authenticator),
            authorizer: Arc::new(authorizer),
            limits: InFlightLimits::new(
                self.options.max_requests_inflight,
                self.options.max_mutating_requests_inflight,
            )
            .with_watches(
                self.options.max_watches,
                self.options.max_watches_per_connection,
            )
            .with_watches_per_user(self.options.effective_max_watches_per_user()),
            request_timeout: self.options.request_timeout,
            metrics: self.metrics.clone(),
            auditor: self.auditor.clone(),
        }
        .apply(app);

        let address = SocketAddr::new(self.options.bind_address, self.options.secure_port);
        let listener = TcpListener::bind(address)
            .await
            .map_err(|source| ServeError::Bind { address, source })?;
        let local_addr = listener
            .local_addr()
            .map_err(|source| ServeError::Bind { address, source })?;
        tracing::info!(name = %self.name, address = %local_addr, "serving securely");

        Ok(Server {
            name: self.name,
            options: self.options,
            listener,
            local_addr,
            tls: TlsAcceptor::from(tls),
            certificate,
            certificates,
            app,
            hooks: self.hooks,
            pre_shutdown_hooks: self.pre_shutdown_hooks,
            shutdown_timeout: self.shutdown_timeout,
            connection_timeouts: self.connection_timeouts,
            signal: self.signal,
            auditor: self.auditor,
            metrics: self.metrics,
        })
    }
}

/// A bound server, ready to [`run`](Server::run).
pub struct Server {
    name: String,
    options: ServingOptions,
    listener: TcpListener,
    local_addr: SocketAddr,
    tls: TlsAcceptor,
    certificate: ServingCertificate,
    certificates: DynamicServingCertificates,
    app: Router,
    hooks: Vec<PostStartHook>,
    pre_shutdown_hooks: Vec<PreShutdownHook>,
    shutdown_timeout: Duration,
    connection_timeouts: ConnectionTimeouts,
    signal: ShutdownSignal,
    auditor: Option<Arc<Auditor>>,
    metrics: Arc<Metrics>,
}

impl Server {
    /// Starts configuring a server; `name` appears in logs.
    pub fn builder(name: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name)
    }

    /// The address actually bound (the port is known here when `--secure-port=0`).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The PEM of the CA that signed a generated serving certificate, for a kubeconfig's
    /// `certificate-authority-data` or an `APIService`'s `caBundle`. `None` with `--tls-cert-file`.
    pub fn ca_pem(&self) -> Option<&str> {
        self.certificate.ca_pem.as_deref()
    }

    /// The serving certificate loaded at the start (its files are read again while the server runs: new
    /// connections get what they hold then).
    pub fn certificate(&self) -> &ServingCertificate {
        &self.certificate
    }

    /// The options the server was built with (handlers need e.g. `min_request_timeout`).
    pub fn options(&self) -> &ServingOptions {
        &self.options
    }

    /// The shutdown signal: trigger it with [`ShutdownSignal::initiate`], or select on it.
    pub fn shutdown_signal(&self) -> ShutdownSignal {
        self.signal.clone()
    }

    /// The whole handler (filter chain, health, version, routes) without TLS or a listener, for in-process
    /// tests with `tower::ServiceExt::oneshot`.
    pub fn handler(&self) -> Router {
        self.app.clone()
    }

    /// Serves until SIGINT or SIGTERM, then shuts down gracefully. A second signal exits the process at once,
    /// as upstream does.
    pub async fn run_until_signal(self) -> Result<(), ServeError> {
        self.run(async {
            wait_for_signal().await;
            tracing::info!("received a termination signal, shutting down");
            tokio::spawn(async {
                wait_for_signal().await;
                tracing::error!("received a second termination signal, exiting");
                std::process::exit(1);
            });
        })
        .await
    }

    /// Serves until `shutdown` completes or the shutdown signal is initiated, then shuts down gracefully
    /// and returns once connections have drained (or the shutdown timeout passed).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), ServeError> {
        let Server {
            name,
            options,
            listener,
            local_addr,
            tls,
            certificates,
            app,
            hooks,
            pre_shutdown_hooks,
            shutdown_timeout,
            connection_timeouts,
            signal,
            auditor,
            metrics,
            ..
        } = self;

        // Until the listener closes: no handshakes after that.
        tokio::spawn(certificates.keep_current(signal.draining()));

        let fatal: Arc<Mutex<Option<ServeError>>> = Arc::default();
        for hook in hooks {
            let signal = signal.clone();
            let fatal = fatal.clone();
            tokio::spawn(async move {
                let result = (hook.run)(signal.clone()).await;
                hook.status.finish(result.clone());
                if let Err(message) = result {
                    tracing::error!(hook = %hook.name, "post-start hook failed: {message}");
                    if let Ok(mut f) = fatal.lock() {
                        f.get_or_insert(ServeError::PostStartHook {
                            name: hook.name,
                            message,
                        });
                    }
                    signal.initiate();
                }
            });
        }

        let pre_shutdown: Vec<_> = pre_shutdown_hooks
            .into_iter()
            .map(|(name, hook)| {
                let initiated = signal.initiated();
                (
                    name,
                    tokio::spawn(async move {
                        initiated.await;
                        hook().await;
                    }),
                )
            })
            .collect();

        let delay = options.shutdown_delay_duration;
        let initiated = signal.initiated();
        let stop = async {
            tokio::select! {
                _ = shutdown => {}
                _ = initiated => {}
            }
            signal.initiate();
            tracing::info!(name = %name, ?delay, "shutdown initiated, /readyz now fails");
            tokio::time::sleep(delay).await;
        };
        tokio::pin!(stop);

        let serving = Serving {
            local_addr,
            tls,
            app,
            signal: signal.clone(),
            timeouts: connection_timeouts,
            metrics,
            http2_max_streams: match options.http2_max_streams_per_connection {
                0 => GO_HTTP2_MAX_STREAMS,
                n => n,
            },
        };
        let graceful = GracefulShutdown::new();
        loop {
            tokio::select! {
                biased;
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, remote_addr)) => {
                        tokio::spawn(serve_connection(
                            stream,
                            remote_addr,
                            serving.clone(),
                            graceful.watcher(),
                        ));
                    }
                    Err(e) => {
                        // Usually out of file descriptors: back off instead of spinning.
                        tracing::warn!("accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
            }
        }

        drop(listener);
        signal.start_draining();
        tracing::info!(name = %name, open_connections = graceful.count(), "draining connections");
        if tokio::time::timeout(shutdown_timeout, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!(
                ?shutdown_timeout,
                "connections still open after the shutdown timeout"
            );
        }
        for (hook, task) in pre_shutdown {
            if tokio::time::timeout(shutdown_timeout, task).await.is_err() {
                tracing::warn!(%hook, ?shutdown_timeout, "pre-shutdown hook still running after the shutdown timeout");
            }
        }
        if let Some(auditor) = auditor {
            auditor.shutdown().await;
        }
        tracing::info!(name = %name, "server stopped");

        let fatal = fatal.lock().ok().and_then(|mut f| f.take());
        match fatal {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// What every connection of a server is served with.
#[derive(Clone)]
struct Serving {
    local_addr: SocketAddr,
    tls: TlsAcceptor,
    app: Router,
    signal: ShutdownSignal,
    timeouts: ConnectionTimeouts,
    metrics: Arc<Metrics>,
    http2_max_streams: u32,
}

async fn serve_connection(
    stream: TcpStream,
    remote_addr: SocketAddr,
    serving: Serving,
    watcher: Watcher,
) {
    let Serving {
        local_addr,
        tls,
        app,
        signal,
        timeouts,
        metrics,
        http2_max_streams,
    } = serving;
    let _ = stream.set_nodelay(true);
    let stream = match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => {
            metrics.tls_handshake_errors.inc();
            tracing::debug!(%remote_addr, "TLS handshake failed: {e}");
            return;
        }
        Err(_) => {
            tracing::debug!(%remote_addr, "TLS handshake timed out");
            return;
        }
    };
    if signal.is_draining() {
        return;
    }
    let (_, session) = stream.get_ref();
    let info = ConnectionInfo {
        remote_addr,
        local_addr,
        alpn_protocol: session.alpn_protocol().map(<[u8]>::to_vec),
        peer_certificates: session
            .peer_certificates()
            .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect())
            .unwrap_or_default(),
    };
    let activity = Activity::default();
    let tracked = activity.clone();
    let peer_certificates = PeerCertificates(info.peer_certificates.clone());
    let watches = ConnectionWatches::default();
    let service = tower::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(info.clone());
        request.extensions_mut().insert(peer_certificates.clone());
        request.extensions_mut().insert(watches.clone());
        request.extensions_mut().insert(signal.clone());
        let busy = tracked.begin();
        let app = app.clone();
        async move {
            let response = app.oneshot(request).await?;
            Ok::<_, std::convert::Infallible>(busy.attach(response))
        }
    });

    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .max_buf_size(MAX_HEADER_BYTES)
        .max_headers(MAX_HEADER_FIELDS);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(http2_max_streams)
        .max_frame_size(RESOURCE_BODY_99_PERCENTILE)
        .initial_stream_window_size(RESOURCE_BODY_99_PERCENTILE)
        .initial_connection_window_size(
            RESOURCE_BODY_99_PERCENTILE
                .saturating_mul(http2_max_streams)
                .min(MAX_HTTP2_WINDOW),
        )
        .max_header_list_size(MAX_HEADER_BYTES as u32)
        .max_send_buf_size(STREAM_SEND_BUFFER_BYTES);
    let connection = builder
        .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
    tokio::select! {
        ended = watcher.watch(connection.into_owned()) => {
            if let Err(e) = ended {
                tracing::debug!(%remote_addr, "connection ended with an error: {e}");
            }
        }
        () = activity.idle(timeouts) => tracing::debug!(%remote_addr, "closing an idle connection"),
    }
}

/// What a connection is doing: how many requests are being served, and when the last one finished. A request
/// counts from its headers until its response body has been sent or dropped (a watch counts for as long as it
/// streams), so a connection is idle only when nothing is being served on it.
#[derive(Clone, Default)]
struct Activity(Arc<Mutex<ActivityState>>);

struct ActivityState {
    serving: usize,
    requests: u64,
    quiet_since: tokio::time::Instant,
}

impl Default for ActivityState {
    fn default() -> Self {
        ActivityState {
            serving: 0,
            requests: 0,
            quiet_since: tokio::time::Instant::now(),
        }
    }
}

impl Activity {
    fn update(&self, f: impl FnOnce(&mut ActivityState)) {
        let mut state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut state);
    }

    /// Counts a request as being served until the returned guard is dropped.
    fn begin(&self) -> InFlight {
        self.update(|s| {
            s.serving += 1;
            s.requests += 1;
        });
        InFlight(self.clone())
    }

    /// Completes once the connection has been quiet for too long: `first_request` before its first request,
    /// `idle` after.
    async fn idle(&self, timeouts: ConnectionTimeouts) {
        loop {
            let deadline = {
                let s = self.0.lock().unwrap_or_else(|p| p.into_inner());
                if s.serving > 0 {
                    None
                } else if s.requests == 0 {
                    Some(s.quiet_since + timeouts.first_request)
                } else {
                    Some(s.quiet_since + timeouts.idle)
                }
            };
            match deadline {
                Some(deadline) if deadline <= tokio::time::Instant::now() => return,
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => tokio::time::sleep(Duration::from_secs(1)).await,
            }
        }
    }
}

/// One request being served; dropping it ends the count.
struct InFlight(Activity);

impl InFlight {
    /// Keeps counting until the response body has been sent or dropped.
    fn attach(self, response: axum::response::Response) -> axum::response::Response {
        let (parts, body) = response.into_parts();
        let body = axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
            let _serving = &self;
            frame
        }));
        axum::response::Response::from_parts(parts, body)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.update(|s| {
            s.serving = s.serving.saturating_sub(1);
            s.quiet_since = tokio::time::Instant::now();
        });
    }
}

/// Completes on SIGINT or SIGTERM.
#[cfg(unix)]
pub(crate) async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Completes on Ctrl-C.
#[cfg(not(unix))]
pub(crate) async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ShutdownSignal {
    type Rejection = axum::response::Response;

    async fn from_request_parts(
        parts: &mut http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<ShutdownSignal>()
            .cloned()
            .ok_or_else(|| super::status::internal_error("no shutdown signal found for request"))
    }
}
