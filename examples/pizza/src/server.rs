//! The pizza-apiserver: its command line, the storage backend it chose, and the assembled server.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use apiserver::admission::{
    AdmissionOptions, Initializer, NAMESPACE_LIFECYCLE, NamespaceLifecycle, Plugins,
};
use apiserver::audit::AuditOptions;
use apiserver::auth::{
    ALL_AUTHENTICATED_GROUP, AuthenticationOptions, AuthorizationOptions, BearerTokens,
    DEFAULT_ALWAYS_ALLOW_PATHS, SYSTEM_PRIVILEGED_GROUP, User,
};
use apiserver::cluster::{CoreApiOptions, CoreCluster};
use apiserver::codec::MediaType;
use apiserver::controller::is_enabled;
use apiserver::discovery::Discovery;
use apiserver::endpoints::{Api, DEFAULT_ENCODED_OBJECT_BYTES};
use apiserver::logging::LoggingOptions;
use apiserver::metrics::Metrics;
use apiserver::openapi::OpenApi;
use apiserver::registry::Store;
use apiserver::server::{HealthCheck, ServeError, Server, ServingOptions, VersionInfo};
use apiserver::storage::Storage;
use apiserver::storage::instrumented::Instrumented;
use apiserver::storage::memory::MemoryStorage;
use apiserver::telemetry::TracingOptions;
use apiserver_storage_etcd::{EtcdOptions, EtcdStorage, StorageMediaType};
use apiserver_storage_rocks::{RocksOptions, RocksStorage};
use apiserver_storage_sql::{SqlStorage, SqlStorageOptions};
use base64::Engine;

use crate::admission::{PIZZA_TOPPINGS, PizzaToppings};
use crate::cost::{self, COST_CONTROLLER};
use crate::oven::{self, OVEN_CONTROLLER};
use crate::restaurant::{Oven, Pizza, Topping};
use crate::strategy::{OvenStrategy, PizzaStrategy, ToppingStrategy};
use crate::{GROUP, oven_codec, pizza_codec, topping_codec};

/// Where objects are kept under in every backend (the Go pizza-apiserver's etcd prefix).
pub const STORAGE_PREFIX: &str = "/registry/pizza-apiserver.programming-kubernetes.info";

/// The storage engines the server can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// RocksDB embedded in the server, in DIR/rocksdb: durable, nothing else to run.
    Rocksdb,
    /// In process memory: gone when the server stops.
    Memory,
    /// SQLite: a file in --data-dir, or --storage-url sqlite://PATH.
    Sqlite,
    /// Postgres at --storage-url postgres://...; several servers may share one database.
    Postgres,
    /// etcd at --etcd-servers; several servers may share one etcd.
    Etcd,
}

/// The command line: upstream's serving and etcd flags plus the backend choice and the data directory.
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "pizza-apiserver",
    version,
    about = "The pizza sample API server (restaurant.programming-kubernetes.info)"
)]
pub struct Options {
    #[command(flatten)]
    pub serving: ServingOptions,

    #[command(flatten)]
    pub authentication: AuthenticationOptions,

    #[command(flatten)]
    pub authorization: AuthorizationOptions,

    #[command(flatten)]
    pub core_api: CoreApiOptions,

    #[command(flatten)]
    pub audit: AuditOptions,

    #[command(flatten)]
    pub logging: LoggingOptions,

    #[command(flatten)]
    pub tracing: TracingOptions,

    /// Where the server keeps its state: certificates, the kubeconfig it writes, and embedded databases.
    #[arg(long = "data-dir", default_value = "pizza-apiserver.local.data")]
    pub data_dir: PathBuf,

    /// The storage engine.
    #[arg(long = "storage-backend", value_enum, default_value_t = Backend::Rocksdb)]
    pub storage_backend: Backend,

    #[command(flatten)]
    pub rocks: RocksOptions,

    #[command(flatten)]
    pub sql: SqlStorageOptions,

    #[command(flatten)]
    pub etcd: EtcdOptions,

    /// The in-process controllers to run, as kube-controller-manager's flag: `*` for all (the default), `*,-name`
    /// for all but one; a list without `*` runs only the controllers it names. Known: pizza-cost (a pizza's
    /// status.cost from its toppings), oven (an oven line's status from its spec).
    #[arg(long = "controllers", value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,

    /// Bytes of objects kept encoded as lists serve them (per stored revision, version and media type), so that a
    /// LIST encodes each object once; 0 encodes every item on every request.
    #[arg(long = "encoded-object-cache-bytes", default_value_t = DEFAULT_ENCODED_OBJECT_BYTES)]
    pub encoded_object_cache_bytes: usize,
}

/// Starting the server failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("storage: {0}")]
    Storage(String),
    #[error(transparent)]
    Audit(#[from] apiserver::audit::AuditError),
    #[error("core cluster: {0}")]
    Cluster(#[from] apiserver::cluster::ClusterError),
    #[error("admission: {0}")]
    Admission(#[from] apiserver::admission::PluginError),
    #[error("--controllers: {0}")]
    Controllers(String),
    #[error(transparent)]
    Serve(#[from] ServeError),
}

/// Who decides who may do what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No core cluster: the server's own admin token (in the kubeconfig it writes) may do anything; anonymous
    /// clients may read health, version, discovery and OpenAPI, nothing else.
    Standalone,
    /// Behind a core cluster: front-proxy headers, client certificates and TokenReview authenticate,
    /// SubjectAccessReview authorizes, namespaces come from the cluster.
    Delegated,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Standalone => {
                "standalone (the admin token in the kubeconfig may do anything; anonymous requests may read \
                 health, version, discovery and OpenAPI only)"
            }
            Mode::Delegated => {
                "delegated (authentication by front-proxy headers, client certificates and TokenReview, \
                 authorization by SubjectAccessReview, namespaces from the core cluster)"
            }
        })
    }
}

/// A bound pizza server, with where a client finds it.
pub struct PizzaServer {
    pub server: Server,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The kubeconfig written for this server (with the admin token when standalone, no credentials when
    /// delegated).
    pub kubeconfig: PathBuf,
    /// How requests are authenticated and authorized.
    pub mode: Mode,
}

impl Options {
    /// Delegated when anything names a core cluster or a CA to trust, or the server runs in a pod.
    pub fn mode(&self) -> Mode {
        if self.authentication.is_delegating()
            || self.authorization.is_delegating()
            || self.core_api.kubeconfig.is_some()
        {
            Mode::Delegated
        } else {
            Mode::Standalone
        }
    }
}

/// Opens the storage, assembles the API and binds the server; the caller runs it.
pub async fn start(options: Options) -> Result<PizzaServer, StartError> {
    let data_dir = &options.data_dir;
    std::fs::create_dir_all(data_dir).map_err(|source| StartError::DataDir {
        path: data_dir.clone(),
        source,
    })?;
    let metrics = Arc::new(Metrics::new());
    let backend = open_backend(&options).await?;
    let format = match options.etcd.storage_media_type {
        StorageMediaType::Json => MediaType::Json,
        StorageMediaType::Protobuf => MediaType::Protobuf,
    };
    let prefix = options
        .etcd
        .etcd_prefix
        .clone()
        .unwrap_or_else(|| STORAGE_PREFIX.to_string());
    let storage_error = |e: apiserver::storage::StorageError| StartError::Storage(e.to_string());
    let backend_name = match options.storage_backend {
        Backend::Rocksdb => "rocksdb",
        Backend::Memory => "memory",
        Backend::Sqlite => "sqlite",
        Backend::Postgres => "postgres",
        Backend::Etcd => "etcd3",
    };
    let backend = Instrumented::wrap(backend, backend_name, &prefix, GROUP, metrics.clone());
    let toppings = Store::<Topping>::cached(
        backend.clone(),
        &prefix,
        topping_codec(),
        Arc::new(ToppingStrategy),
        format,
        Some(&metrics),
    )
    .map_err(storage_error)?;
    let pizzas = Store::<Pizza>::cached(
        backend.clone(),
        &prefix,
        pizza_codec(),
        Arc::new(PizzaStrategy),
        format,
        Some(&metrics),
    )
    .map_err(storage_error)?;
    let ovens = Store::<Oven>::cached(
        backend.clone(),
        &prefix,
        oven_codec(),
        Arc::new(OvenStrategy),
        format,
        Some(&metrics),
    )
    .map_err(storage_error)?;

    let mode = options.mode();
    let core_cluster =
        match apiserver::cluster::config(options.core_api.kubeconfig.as_deref()).await? {
            Some(config) => Some(CoreCluster::start(&config)?),
            None => None,
        };
    let mut initializer = Initializer::default();
    initializer.listers.insert(toppings.clone());
    initializer.core_cluster = core_cluster.clone();
    // Upstream's recommended order: NamespaceLifecycle first (on by default when there is a core cluster), then
    // the server's own plugins.
    let plugins = Plugins::new()
        .register(
            NAMESPACE_LIFECYCLE,
            core_cluster.is_some(),
            NamespaceLifecycle::build,
        )
        .register(PIZZA_TOPPINGS, true, PizzaToppings::build);
    let admission = plugins
        .build(
            &AdmissionOptions {
                enable: options.serving.enable_admission_plugins.clone(),
                disable: options.serving.disable_admission_plugins.clone(),
            },
            &initializer,
        )?
        .with_metrics(metrics.clone());

    let api = Api::new(admission)
        .encoded_object_cache_bytes(options.encoded_object_cache_bytes)
        .resource(pizzas.clone())
        .resource(toppings.clone())
        .resource(ovens.clone());
    let descriptions = api.descriptions();
    let discovery = Discovery::new(&descriptions);
    let openapi = OpenApi::new(&descriptions, "pizza-apiserver", env!("CARGO_PKG_VERSION"));
    let caches: Vec<Arc<dyn Storage>> = vec![
        pizzas.storage().clone(),
        toppings.storage().clone(),
        ovens.storage().clone(),
    ];
    // Upstream's names on etcd; the other backends' checks are named after them.
    let check_name = match backend_name {
        "etcd3" => "etcd",
        other => other,
    };
    let mut builder = Server::builder("pizza-apiserver")
        .metrics(metrics.clone())
        .storage(check_name, backend.clone(), caches)
        .auditor(options.audit.auditor().await?)
        .options(options.serving.clone())
        .anonymous(options.authentication.anonymous_auth);
    let token = match mode {
        Mode::Standalone => {
            let token = admin_token(data_dir)?;
            let admin = User {
                name: ADMIN_USER.to_string(),
                groups: vec![
                    SYSTEM_PRIVILEGED_GROUP.to_string(),
                    ALL_AUTHENTICATED_GROUP.to_string(),
                ],
                ..User::default()
            };
            let paths = options
                .authorization
                .always_allow_paths
                .clone()
                .unwrap_or_else(|| {
                    DEFAULT_ALWAYS_ALLOW_PATHS
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                });
            builder = builder
                .authenticator(BearerTokens::new().with(token.clone(), admin))
                .always_allow_paths(paths);
            Some(token)
        }
        Mode::Delegated => {
            builder = builder
                .authenticator(
                    options
                        .authentication
                        .delegate()
                        .await?
                        .with_metrics(metrics.clone())
                        .authenticator(),
                )
                .always_allow_paths(options.authorization.delegated_always_allow_paths());
            if let Some(authorizer) = options.authorization.delegate().await? {
                builder = builder.authorizer(authorizer.with_metrics(metrics.clone()));
            }
            None
        }
    };
    if let Some(cluster) = core_cluster {
        builder = builder.readyz_check(HealthCheck::new("informer-sync", move || {
            let synced = cluster.namespaces_synced();
            async move {
                synced
                    .then_some(())
                    .ok_or_else(|| "namespaces not yet synced from the core cluster".to_string())
            }
        }));
    }
    {
        let (api, metrics) = (api.clone(), metrics.clone());
        builder = builder.post_start_hook(
            "storage-object-count-tracker-hook",
            move |shutdown| async move {
                api.count_objects(&metrics).await;
                tokio::spawn(api.track_object_counts(metrics, shutdown));
                Ok(())
            },
        );
    }
    let known = [COST_CONTROLLER, OVEN_CONTROLLER];
    let enabled =
        |name| is_enabled(&options.controllers, name, &known).map_err(StartError::Controllers);
    if enabled(OVEN_CONTROLLER)? {
        let ovens = ovens.clone();
        builder = builder.post_start_hook(
            format!("start-{OVEN_CONTROLLER}-controller"),
            move |shutdown| async move {
                tokio::spawn(oven::run(ovens, shutdown));
                Ok(())
            },
        );
    }
    if enabled(COST_CONTROLLER)? {
        let (pizzas, toppings) = (pizzas.clone(), toppings.clone());
        builder = builder.post_start_hook(
            format!("start-{COST_CONTROLLER}"),
            move |shutdown| async move {
                tokio::spawn(cost::run(pizzas, toppings, shutdown));
                Ok(())
            },
        );
    }
    let server = builder
        .default_cert_dir(data_dir.join("certs"))
        .version(VersionInfo::for_crate(
            env!("CARGO_PKG_VERSION_MAJOR"),
            env!("CARGO_PKG_VERSION_MINOR"),
            env!("CARGO_PKG_VERSION"),
        ))
        .routes(
            api.router()
                .merge(discovery.router())
                .merge(openapi.router()),
        )
        .bind()
        .await?;

    let url = format!("https://127.0.0.1:{}", server.local_addr().port());
    let kubeconfig = data_dir.join("kubeconfig");
    write_kubeconfig(
        &kubeconfig,
        &url,
        token.as_deref(),
        &server,
        &options.serving,
    )?;
    Ok(PizzaServer {
        server,
        url,
        kubeconfig,
        mode,
    })
}

async fn open_backend(options: &Options) -> Result<Arc<dyn Storage>, StartError> {
    let error = |e: &dyn std::fmt::Display| StartError::Storage(e.to_string());
    // At startup the storage error's own message says it all; the Status-style wrapper is for clients.
    let open_error = |e: apiserver::storage::StorageError| match e {
        apiserver::storage::StorageError::Unreachable { message, .. } => {
            StartError::Storage(message)
        }
        other => StartError::Storage(other.to_string()),
    };
    match options.storage_backend {
        Backend::Memory => Ok(Arc::new(MemoryStorage::new())),
        Backend::Rocksdb => {
            let path = options.data_dir.join("rocksdb");
            let rocks = options.rocks.clone();
            // Opening replays RocksDB's log: blocking work, off the async workers.
            let store = tokio::task::spawn_blocking(move || RocksStorage::open(path, &rocks))
                .await
                .map_err(|e| error(&e))?
                .map_err(open_error)?;
            Ok(store.into_dyn())
        }
        Backend::Sqlite | Backend::Postgres => {
            let url = options.sql.url_or_default(&options.data_dir);
            let wanted = if options.storage_backend == Backend::Sqlite {
                "sqlite:"
            } else {
                "postgres"
            };
            if !url.starts_with(wanted) {
                return Err(StartError::Storage(format!(
                    "--storage-backend {:?} needs a {wanted}... --storage-url, got {url:?}",
                    options.storage_backend
                )));
            }
            let sql = SqlStorageOptions {
                url: Some(url),
                ..options.sql.clone()
            };
            Ok(SqlStorage::open(&sql).await.map_err(open_error)?.into_dyn())
        }
        Backend::Etcd => Ok(EtcdStorage::from_options(&options.etcd, STORAGE_PREFIX)
            .await
            .map_err(|e| error(&e))?
            .into_dyn()),
    }
}

/// The user the written kubeconfig authenticates as (in `system:masters`).
pub const ADMIN_USER: &str = "pizza-admin";

/// The admin's bearer token: made on first start and kept in `DIR/admin-token` (mode 0600), so a kubeconfig
/// stays valid across restarts.
fn admin_token(data_dir: &Path) -> Result<String, StartError> {
    let path = data_dir.join("admin-token");
    let io_error = |source| StartError::DataDir {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(token) if !token.trim().is_empty() => return Ok(token.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_error(e)),
    }
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    write_private(&path, token.as_bytes()).map_err(io_error)?;
    Ok(token)
}

/// Writes a file only its owner may read (mode 0600, also when it existed with wider permissions).
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(contents)
}

/// Writes a kubeconfig that reaches this server: its URL, the CA of its serving certificate, and the admin's
/// bearer token when there is one. Mode 0600: it holds the credential.
fn write_kubeconfig(
    path: &Path,
    url: &str,
    token: Option<&str>,
    server: &Server,
    serving: &ServingOptions,
) -> Result<(), StartError> {
    let authority = match (server.ca_pem(), &serving.tls_cert_file) {
        (Some(pem), _) => format!(
            "certificate-authority-data: {}",
            base64::engine::general_purpose::STANDARD.encode(pem)
        ),
        (None, Some(cert)) => format!("certificate-authority: {}", cert.display()),
        (None, None) => "insecure-skip-tls-verify: true".to_string(),
    };
    let user = match token {
        Some(token) => format!("\n    token: {token}"),
        None => " {}".to_string(),
    };
    let kubeconfig = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: pizza-apiserver
  cluster:
    server: {url}
    {authority}
contexts:
- name: pizza-apiserver
  context:
    cluster: pizza-apiserver
    user: pizza-apiserver
    namespace: default
current-context: pizza-apiserver
users:
- name: pizza-apiserver
  user:{user}
"
    );
    write_private(path, kubeconfig.as_bytes()).map_err(|source| StartError::DataDir {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::{Backend, Options};

    /// Every backend's flags flatten into one command line without clashing names.
    #[test]
    fn command_line_is_consistent() {
        Options::command().debug_assert();
    }

    #[test]
    fn rocksdb_is_the_default_backend() {
        let options = Options::try_parse_from(["pizza-apiserver"]).expect("no flags parse");
        assert_eq!(options.storage_backend, Backend::Rocksdb);
        let options = Options::try_parse_from([
            "pizza-apiserver",
            "--rocksdb-watch-buffer=8",
            "--storage-watch-buffer=16",
        ])
        .expect("both backends' buffers parse");
        assert_eq!(options.rocks.watch_buffer, 8);
        assert_eq!(options.sql.watch_buffer, 16);
    }
}
