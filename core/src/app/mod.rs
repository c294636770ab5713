//! A whole server assembled from its resources, as upstream's `RecommendedOptions` → `Config` → `Complete` → `Run`
//! assemble a Go one: the command line ([`RecommendedOptions`] plus the backends' flags), the storage backend chosen
//! by `--storage-backend`, a watch-cached [`Store`] per resource, admission (NamespaceLifecycle and the admission
//! webhooks first, then the server's plugins), delegated or standalone authentication and authorization,
//! discovery, OpenAPI, health and readiness, metrics, audit, controllers selectable by `--controllers` (run by the
//! elected leader among replicas with `--leader-elect`, see [`crate::leader`]), and, when standalone, an admin token
//! and a kubeconfig that reaches the server.
//!
//! ```no_run
//! use apiserver::app::{App, RecommendedOptions, StartError, Started};
//! # use apiserver::registry::Strategy;
//! # use apiserver::runtime::{Resource, ResourceCodec};
//! # async fn build<Book: Resource>(codec: ResourceCodec<Book>, strategy: impl Strategy<Book> + 'static)
//! #     -> Result<(), StartError> {
//! #[derive(clap::Parser)]
//! /// Serves library.example.com.
//! struct Options {
//!     #[command(flatten)]
//!     server: RecommendedOptions,
//! }
//!
//! let options = <Options as clap::Parser>::parse();
//! let mut app = App::new("library-apiserver", options.server)
//!     .version(apiserver::version_info!())
//!     .open()
//!     .await?;
//! let books = app.store(codec, strategy)?;
//! app.controller("book-shelver", move |shutdown| {
//!     let books = books.clone();
//!     async move {
//!         // reconcile `books` until `shutdown`
//! #       drop((books, shutdown));
//!     }
//! });
//! let started: Started = app.bind().await?;
//! started.server.run_until_signal().await?;
//! # Ok(())
//! # }
//! ```

mod authorization;
mod backend;
mod options;
mod standalone;
mod storage_command;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;

#[cfg(feature = "cluster")]
use authorization::ServerAuthorizer;
use authorization::Shared;
pub use backend::{BackendSet, Memory, OpenContext, StorageBackend, open_error};
pub use options::{Mode, NoFlags, Options, RecommendedOptions, StorageMediaType, StorageOptions};

use crate::admission::{
    AdmissionOptions, Initializer, KindCheck, Plugin, PluginError, Plugins, check,
};
#[cfg(feature = "cluster")]
use crate::admission::{
    MUTATING_ADMISSION_POLICY, MUTATING_ADMISSION_WEBHOOK, MutatingPolicies, MutatingWebhooks,
    NAMESPACE_LIFECYCLE, NamespaceLifecycle, RESOURCE_QUOTA, ResourceQuotaAdmission,
    VALIDATING_ADMISSION_POLICY, VALIDATING_ADMISSION_WEBHOOK, ValidatingPolicies,
    ValidatingWebhooks,
};
use crate::auth::{
    ALL_AUTHENTICATED_GROUP, Authorizer, BearerTokens, DEFAULT_ALWAYS_ALLOW_PATHS,
    SYSTEM_PRIVILEGED_GROUP, User,
};
use crate::cluster::CoreCluster;
use crate::codec::MediaType;
use crate::controller::is_enabled;
use crate::discovery::Discovery;
use crate::endpoints::{Api, Provider, Subresource};
#[cfg(feature = "cluster")]
use crate::leader::ClusterLock;
use crate::leader::{Lead, LeaderElector, LeaseLock, StorageLock, default_identity};
use crate::metrics::Metrics;
use crate::openapi::OpenApi;
use crate::registry::{Store, Strategy};
use crate::runtime::{Resource, ResourceCodec};
use crate::server::{HealthCheck, ServeError, Server, ServerBuilder, ShutdownSignal, VersionInfo};
use crate::storage::Storage;
use crate::storage::encryption::{Encrypted, EncryptionConfig};
use crate::storage::instrumented::Instrumented;

/// The [`VersionInfo`] of the crate this is written in (its `CARGO_PKG_VERSION`), for [`App::version`].
#[macro_export]
macro_rules! version_info {
    () => {
        $crate::server::VersionInfo::for_crate(
            env!("CARGO_PKG_VERSION_MAJOR"),
            env!("CARGO_PKG_VERSION_MINOR"),
            env!("CARGO_PKG_VERSION"),
        )
    };
}

/// Starting the server failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A file in or the data directory itself could not be created, read or written.
    #[error("data directory {path}: {source}")]
    DataDir {
        /// The directory or file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// The storage backend could not be chosen or opened, or a store over it built.
    #[error("storage: {0}")]
    Storage(String),
    /// The audit policy or log could not be set up.
    #[error(transparent)]
    Audit(#[from] crate::audit::AuditError),
    /// The core cluster could not be reached from the configuration given.
    #[error("core cluster: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
    /// An admission plugin could not be configured.
    #[error("admission: {0}")]
    Admission(#[from] PluginError),
    /// A type's CEL validation rules do not compile, or could cost more than upstream allows.
    #[error("CEL validation rules of {0}")]
    Rules(String),
    /// A version's printer column is not a valid column of its schema.
    #[error("printer columns of {0}")]
    PrinterColumns(String),
    /// `--controllers` names a controller the server does not have.
    #[error("--controllers: {0}")]
    Controllers(String),
    /// The `--leader-elect-*` flags are not a valid election.
    #[error("leader election: {0}")]
    LeaderElection(String),
    /// The server could not be bound or configured (address, TLS, settings).
    #[error(transparent)]
    Serve(#[from] ServeError),
    /// Not a failure: the start function runs under `<server> storage ...`, which took the storage once
    /// [`App::open`] had opened it; the server is not assembled.
    #[error("the storage was handed over to a storage command")]
    StorageHandedOver,
}

/// A server before its storage is open: its name, command line and the backends it can run on.
pub struct App {
    name: String,
    options: RecommendedOptions,
    backends: Vec<Box<dyn StorageBackend>>,
    unbuilt: Vec<(&'static str, &'static str)>,
    prefix: Option<String>,
    version: Option<VersionInfo>,
    openapi_info: Option<(String, String)>,
}

impl App {
    /// A server called `name` (its binary's name: in logs, certificates, the kubeconfig and the default data
    /// directory `<name>.local.data`).
    pub fn new(name: impl Into<String>, options: RecommendedOptions) -> App {
        App {
            name: name.into(),
            options,
            backends: Vec::new(),
            unbuilt: Vec::new(),
            prefix: None,
            version: None,
            openapi_info: None,
        }
    }

    /// Adds a backend `--storage-backend` may choose, or a set of them ([`BackendSet`]); the first one added is
    /// the default. The memory backend is always available after the ones added.
    pub fn backend(mut self, backends: impl BackendSet) -> App {
        self.unbuilt.extend(backends.not_built());
        self.backends.extend(backends.backends());
        self
    }

    /// Names a backend this binary was built without (its cargo `feature` off): `--storage-backend name` is then
    /// refused with a message naming the feature, rather than as an unknown backend.
    pub fn without_backend(mut self, name: &'static str, feature: &'static str) -> App {
        self.unbuilt.push((name, feature));
        self
    }

    /// The prefix of every storage key when `--etcd-prefix` is not given (default: `/registry/<name>`).
    pub fn storage_prefix(mut self, prefix: impl Into<String>) -> App {
        self.prefix = Some(prefix.into());
        self
    }

    /// What `/version` reports (use [`version_info!`](crate::version_info)).
    pub fn version(mut self, version: VersionInfo) -> App {
        self.version = Some(version);
        self
    }

    /// The `info.title` and `info.version` of the OpenAPI documents, as upstream's `OpenAPIConfig.Info` (default:
    /// the server's name and the version `/version` reports).
    pub fn openapi_info(mut self, title: impl Into<String>, version: impl Into<String>) -> App {
        self.openapi_info = Some((title.into(), version.into()));
        self
    }

    /// Creates the data directory, opens the chosen backend and connects to the core cluster when there is one.
    pub async fn open(mut self) -> Result<Assembly, StartError> {
        #[cfg(not(feature = "cluster"))]
        refuse_cluster_flags(&self.options)?;
        self.backends.push(Box::new(Memory));
        let storage = &self.options.storage;
        let data_dir = storage
            .data_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("{}.local.data", self.name)));
        // A store only read (a backup) is not created: the embedded backends refuse a mistyped --data-dir
        // instead of backing up an empty store.
        let read_only = storage_command::reads_only();
        if !read_only {
            std::fs::create_dir_all(&data_dir).map_err(|source| StartError::DataDir {
                path: data_dir.clone(),
                source,
            })?;
        }
        let prefix = storage
            .prefix
            .clone()
            .or(self.prefix.take())
            .unwrap_or_else(|| format!("/registry/{}", self.name));
        let (chosen, backend_name) =
            backend::choose(&self.backends, &self.unbuilt, storage.backend.as_deref())
                .map_err(StartError::Storage)?;
        let backend = chosen
            .open(
                backend_name,
                OpenContext {
                    data_dir: &data_dir,
                    prefix: &prefix,
                    read_only,
                },
            )
            .await
            .map_err(StartError::Storage)?;
        if storage_command::hand_over(&backend, &prefix, backend_name) {
            return Err(StartError::StorageHandedOver);
        }
        let encryption = match &storage.encryption_provider_config {
            Some(path) => Some(Arc::new(
                EncryptionConfig::load(path).map_err(StartError::Storage)?,
            )),
            None => None,
        };
        let metrics_name = chosen.metrics_name(backend_name);
        let shared_storage = chosen.shared(backend_name);
        let core_cluster =
            match crate::cluster::config(self.options.core_api.kubeconfig.as_deref()).await? {
                Some(config) => Some(CoreCluster::start(&config)?),
                None => None,
            };
        let mode = self.options.mode();
        let format = storage.media_type.media_type();
        // Upstream's recommended order: NamespaceLifecycle, the policies and webhooks (mutating, then validating;
        // on when there is a core cluster), then the server's own plugins.
        #[cfg(feature = "cluster")]
        let delegated = core_cluster.is_some();
        #[cfg(feature = "cluster")]
        let plugins = Plugins::new()
            .register(NAMESPACE_LIFECYCLE, delegated, NamespaceLifecycle::build)
            .register(
                MUTATING_ADMISSION_POLICY,
                delegated,
                MutatingPolicies::build,
            )
            .register(
                MUTATING_ADMISSION_WEBHOOK,
                delegated,
                MutatingWebhooks::build,
            )
            .register(
                VALIDATING_ADMISSION_POLICY,
                delegated,
                ValidatingPolicies::build,
            )
            .register(
                VALIDATING_ADMISSION_WEBHOOK,
                delegated,
                ValidatingWebhooks::build,
            );
        // Without the core-cluster client its plugins are known by name, and refused when enabled.
        #[cfg(not(feature = "cluster"))]
        let plugins =
            crate::admission::CORE_CLUSTER_PLUGINS
                .iter()
                .fold(Plugins::new(), |plugins, name| {
                    plugins.register(name, false, move |_: &Initializer| {
                        Err(PluginError(
                            crate::cluster::built_without(&format!("admission plugin {name}")).0,
                        ))
                    })
                });
        let storage_versions = parse_storage_versions(&self.options.storage.storage_versions)?;
        let metrics = Arc::new(Metrics::new());
        Ok(Assembly {
            initializer: Initializer {
                core_cluster: core_cluster.clone(),
                metrics: Some(metrics.clone()),
                ..Initializer::default()
            },
            name: self.name,
            options: self.options,
            version: self.version,
            openapi_info: self.openapi_info,
            data_dir,
            prefix,
            format,
            metrics,
            backend,
            backend_name,
            metrics_name,
            shared_storage,
            encryption,
            instrumented: HashMap::new(),
            storage_versions,
            core_cluster,
            mode,
            plugins,
            resources: Vec::new(),
            caches: Vec::new(),
            controllers: Vec::new(),
            configure: Vec::new(),
        })
    }
}

/// A build without the `cluster` feature refuses the flags that name a core cluster, by name.
#[cfg(not(feature = "cluster"))]
fn refuse_cluster_flags(options: &RecommendedOptions) -> Result<(), StartError> {
    let flags = [
        ("--kubeconfig", &options.core_api.kubeconfig),
        (
            "--authentication-kubeconfig",
            &options.authentication.authentication_kubeconfig,
        ),
        (
            "--authorization-kubeconfig",
            &options.authorization.authorization_kubeconfig,
        ),
    ];
    match flags.iter().find(|(_, value)| value.is_some()) {
        Some((flag, _)) => Err(crate::cluster::built_without(flag).into()),
        None => Ok(()),
    }
}

/// `--storage-version` entries (`resource.group=version`) by resource.
fn parse_storage_versions(entries: &[String]) -> Result<HashMap<String, String>, StartError> {
    entries
        .iter()
        .filter(|e| !e.is_empty())
        .map(|entry| match entry.split_once('=') {
            Some((resource, version)) if resource.contains('.') && !version.is_empty() => {
                Ok((resource.to_string(), version.to_string()))
            }
            _ => Err(StartError::Storage(format!(
                "--storage-version: {entry:?} is not RESOURCE.GROUP=VERSION"
            ))),
        })
        .collect()
}

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;
/// A controller's run function: called each time the controllers start (again after leadership is regained).
type Controller = Arc<dyn Fn(ShutdownSignal) -> BoxFuture + Send + Sync>;

/// A server with its storage open, gathering its resources, admission plugins and controllers.
pub struct Assembly {
    name: String,
    options: RecommendedOptions,
    version: Option<VersionInfo>,
    openapi_info: Option<(String, String)>,
    data_dir: PathBuf,
    prefix: String,
    format: MediaType,
    metrics: Arc<Metrics>,
    backend: Arc<dyn Storage>,
    backend_name: &'static str,
    metrics_name: &'static str,
    /// Whether several replicas can share the backend (the default of `--leader-elect`).
    shared_storage: bool,
    /// `--encryption-provider-config`: the values of the resources it names are sealed.
    encryption: Option<Arc<EncryptionConfig>>,
    /// The backend measured for each API group (storage LIST metrics are labelled by group).
    instrumented: HashMap<String, Arc<dyn Storage>>,
    /// `--storage-version` entries by `resource.group`, taken out as their resources are added.
    storage_versions: HashMap<String, String>,
    core_cluster: Option<CoreCluster>,
    mode: Mode,
    initializer: Initializer,
    plugins: Plugins,
    resources: Vec<Box<dyn FnOnce(Api) -> Api + Send>>,
    caches: Vec<Arc<dyn Storage>>,
    controllers: Vec<(String, Controller)>,
    configure: Vec<Box<dyn FnOnce(ServerBuilder) -> ServerBuilder + Send>>,
}

impl Assembly {
    /// Serves a resource: a watch-cached store over the backend, in discovery and OpenAPI in the order added,
    /// and listed for admission plugins ([`Initializer::listers`]).
    pub fn store<T: Resource, S: Strategy<T> + 'static>(
        &mut self,
        codec: ResourceCodec<T>,
        strategy: S,
    ) -> Result<Store<T>, StartError> {
        codec
            .check_rules()
            .map_err(|errors| StartError::Rules(format!("{}: {}", T::KIND, errors.join("; "))))?;
        codec.check_printer_columns().map_err(|errors| {
            StartError::PrinterColumns(format!("{}: {}", T::KIND, errors.join("; ")))
        })?;
        let codec = match self
            .storage_versions
            .remove(&format!("{}.{}", T::PLURAL, T::GROUP))
        {
            Some(version) => codec.with_storage_version(&version).ok_or_else(|| {
                StartError::Storage(format!(
                    "--storage-version: {}.{} is not served in version {version:?} (served: {})",
                    T::PLURAL,
                    T::GROUP,
                    codec.versions().collect::<Vec<_>>().join(", ")
                ))
            })?,
            None => codec,
        };
        let backend = self
            .instrumented
            .entry(T::GROUP.to_string())
            .or_insert_with(|| {
                let backend = match &self.encryption {
                    Some(config) => Encrypted::wrap(
                        self.backend.clone(),
                        &self.prefix,
                        T::GROUP,
                        config.clone(),
                    ),
                    None => self.backend.clone(),
                };
                Instrumented::wrap(
                    backend,
                    self.metrics_name,
                    &self.prefix,
                    T::GROUP,
                    self.metrics.clone(),
                )
            })
            .clone();
        let store = Store::<T>::cached(
            backend,
            &self.prefix,
            codec,
            Arc::new(strategy),
            self.format,
            Some(&self.metrics),
        )
        .map_err(|e| StartError::Storage(e.to_string()))?;
        self.initializer.listers.insert(store.clone());
        self.caches.push(store.storage().clone());
        let served = store.clone();
        self.resources
            .push(Box::new(move |api| api.resource(served)));
        Ok(store)
    }

    /// Serves a stored resource in API group `group` as well (one storage, two groups, as upstream serves
    /// `events` in the core group and `events.k8s.io`): clients of either group read and write the same objects,
    /// each seeing its own group's `apiVersion`; discovery, OpenAPI, authorization and admission see two
    /// resources. Returns the store of the second group.
    pub fn serve_in_group<T: Resource>(
        &mut self,
        store: &Store<T>,
        group: &'static str,
    ) -> Store<T> {
        let store = store.in_group(group);
        let served = store.clone();
        self.resources
            .push(Box::new(move |api| api.resource(served)));
        store
    }

    /// Serves a resource whose objects `provider` gives (`get`, `list`, and `watch` when the provider watches),
    /// in discovery and OpenAPI in the order added, authorized and audited as stored ones.
    pub fn provided<T: Resource>(&mut self, codec: ResourceCodec<T>, provider: impl Provider<T>) {
        self.resources
            .push(Box::new(move |api| api.provided(codec, provider)));
    }

    /// Serves the subresource `name` of a stored resource with user code (an action such as `pizzas/bake`, or a
    /// stream such as `pizzas/log`), listed in discovery and authorized as `<verb> <plural>/<name>`.
    pub fn subresource<T: Resource>(
        &mut self,
        store: &Store<T>,
        name: &'static str,
        handler: impl Subresource<T>,
    ) {
        let store = store.clone();
        self.resources
            .push(Box::new(move |api| api.subresource(&store, name, handler)));
    }

    /// Registers an admission plugin after those registered before (`--enable-admission-plugins` and
    /// `--disable-admission-plugins` name it); `build` gets the stores' listers and the core cluster.
    pub fn admission_plugin<F>(&mut self, name: &str, enabled_by_default: bool, build: F)
    where
        F: Fn(&Initializer) -> Result<Arc<dyn Plugin>, PluginError> + Send + Sync + 'static,
    {
        self.plugins = std::mem::take(&mut self.plugins).register(name, enabled_by_default, build);
    }

    /// Registers a validating plugin about one kind ([`KindCheck`], wrapped by [`check`]) as
    /// [`Assembly::admission_plugin`] does; `build` makes the rule from the initializer (its listers, the core
    /// cluster).
    pub fn kind_check<T, C, F>(&mut self, name: &str, enabled_by_default: bool, build: F)
    where
        T: Resource,
        C: KindCheck<T>,
        F: Fn(&Initializer) -> Result<C, PluginError> + Send + Sync + 'static,
    {
        self.admission_plugin(name, enabled_by_default, move |initializer| {
            Ok(check(build(initializer)?))
        });
    }

    /// Runs a controller until `shutdown` fires, unless `--controllers` leaves it out. Without leader election it
    /// starts once the server listens (post-start hook `start-<name>-controller`); with `--leader-elect` it starts
    /// each time this replica acquires the lease, and `shutdown` fires (and the future is dropped) when leadership
    /// is lost, so `run` may be called more than once.
    pub fn controller<F, Fut>(&mut self, name: &str, run: F)
    where
        F: Fn(ShutdownSignal) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.controllers.push((
            name.to_string(),
            Arc::new(move |shutdown| Box::pin(run(shutdown))),
        ));
    }

    /// Changes the server builder before it binds (extra health checks, routes, post-start hooks, ...).
    pub fn configure(
        &mut self,
        change: impl FnOnce(ServerBuilder) -> ServerBuilder + Send + 'static,
    ) {
        self.configure.push(Box::new(change));
    }

    /// The server's metrics registry.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The core cluster, when the server runs behind one.
    pub fn core_cluster(&self) -> Option<&CoreCluster> {
        self.core_cluster.as_ref()
    }

    /// The candidate for the controllers' lease when `--leader-elect` (or its default) asks for an election and
    /// some controller is enabled: the lease in the core cluster when there is one, else in the server's storage.
    fn leader_elector(&self, no_controllers: bool) -> Result<Option<LeaderElector>, StartError> {
        let options = &self.options.leader_election;
        if !options.enabled(self.shared_storage) {
            return Ok(None);
        }
        let config = options
            .config(&self.name)
            .map_err(StartError::LeaderElection)?;
        if no_controllers {
            return Ok(None);
        }
        // On a Lease in the core cluster when there is one, as kube-controller-manager's; else in the storage.
        #[cfg(feature = "cluster")]
        let in_cluster = self.core_cluster.as_ref().map(|cluster| {
            let lock = ClusterLock::new(cluster.client(), &config.namespace, &config.name);
            (Arc::new(lock) as Arc<dyn LeaseLock>, "the core cluster")
        });
        #[cfg(not(feature = "cluster"))]
        let in_cluster = None;
        let (lock, place): (Arc<dyn LeaseLock>, &str) = match in_cluster {
            Some(found) => found,
            None => (
                Arc::new(
                    StorageLock::new(
                        self.backend.clone(),
                        &self.prefix,
                        &config.namespace,
                        &config.name,
                    )
                    .map_err(|e| StartError::LeaderElection(e.to_string()))?,
                ),
                self.backend_name,
            ),
        };
        let elector =
            LeaderElector::new(lock, config, default_identity()).with_metrics(&self.metrics);
        tracing::info!(
            identity = %elector.identity(),
            "leader election: the controllers run on the holder of lease {} in {place}",
            elector.lock_description()
        );
        Ok(Some(elector))
    }

    /// Builds admission, the API, discovery and OpenAPI, authentication and authorization, and binds the server;
    /// standalone, it also writes the admin's kubeconfig to `<data-dir>/kubeconfig`. The caller runs it.
    pub async fn bind(mut self) -> Result<Started, StartError> {
        if let Some(unknown) = self.storage_versions.keys().next() {
            return Err(StartError::Storage(format!(
                "--storage-version: this server stores no resource {unknown:?}"
            )));
        }
        let controllers = std::mem::take(&mut self.controllers);
        let names: Vec<String> = controllers.iter().map(|(n, _)| n.clone()).collect();
        let known: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut enabled = Vec::new();
        for (name, run) in controllers {
            if is_enabled(&self.options.controllers, &name, &known)
                .map_err(StartError::Controllers)?
            {
                enabled.push((name, run));
            }
        }
        let elector = self.leader_elector(enabled.is_empty())?;
        let options = &self.options;
        // The authorizer, asked by the filter chain and by admission's CEL `authorizer`.
        let (paths, configured): (Vec<String>, Option<Arc<dyn Authorizer>>) = match self.mode {
            Mode::Standalone => (
                options
                    .authorization
                    .always_allow_paths
                    .clone()
                    .unwrap_or_else(|| {
                        DEFAULT_ALWAYS_ALLOW_PATHS
                            .iter()
                            .map(|s| s.to_string())
                            .collect()
                    }),
                None,
            ),
            Mode::Delegated => (options.authorization.delegated_always_allow_paths(), {
                #[cfg(feature = "cluster")]
                let authorizer =
                    options.authorization.delegate().await?.map(|a| {
                        Arc::new(a.with_metrics(self.metrics.clone())) as Arc<dyn Authorizer>
                    });
                #[cfg(not(feature = "cluster"))]
                let authorizer: Option<Arc<dyn Authorizer>> = options
                    .authorization
                    .delegate()
                    .await?
                    .map(|never| match never {});
                authorizer
            }),
        };
        #[cfg(feature = "cluster")]
        let initializer = Initializer {
            authorizer: Some(Arc::new(
                ServerAuthorizer::new(&paths, configured.clone())
                    .map_err(|e| ServeError::Config(e.0))?,
            )),
            ..self.initializer.clone()
        };
        // No admission plugin asks the authorizer (CEL's `authorizer`); the paths are still checked here.
        #[cfg(not(feature = "cluster"))]
        let initializer = {
            crate::auth::PathAuthorizer::new(&paths).map_err(|e| ServeError::Config(e.0))?;
            self.initializer.clone()
        };
        // ResourceQuota runs last, as upstream orders it: what it charges is charged only if nothing refuses the
        // request after it. Off by default: it needs the core cluster and RBAC on its ResourceQuotas.
        #[cfg(feature = "cluster")]
        let plugins = self
            .plugins
            .register(RESOURCE_QUOTA, false, ResourceQuotaAdmission::build);
        #[cfg(not(feature = "cluster"))]
        let plugins = self.plugins;
        let admission = plugins
            .build(
                &AdmissionOptions {
                    enable: options.serving.enable_admission_plugins.clone(),
                    disable: options.serving.disable_admission_plugins.clone(),
                    config_file: options.serving.admission_control_config_file.clone(),
                },
                &initializer,
            )?
            .with_metrics(self.metrics.clone());
        let api = self
            .resources
            .into_iter()
            .fold(Api::new(admission), |api, add| add(api))
            .encoded_object_cache_bytes(options.storage.encoded_object_cache_bytes);
        let descriptions = api.descriptions();
        let discovery = Discovery::new(&descriptions);
        let version = self
            .version
            .unwrap_or_else(|| VersionInfo::for_crate("0", "0", "0.0.0"));
        let (title, info_version) = self.openapi_info.unwrap_or_else(|| {
            let version = version.git_version.trim_start_matches('v').to_string();
            (self.name.clone(), version)
        });
        let openapi = OpenApi::new(&descriptions, &title, &info_version);
        // Upstream's check names on etcd; the other backends' are named after them.
        let mut builder = Server::builder(self.name.clone())
            .metrics(self.metrics.clone())
            .storage(self.backend_name, self.backend.clone(), self.caches)
            .auditor(options.audit.auditor().await?)
            .options(options.serving.clone())
            .anonymous(options.authentication.anonymous_auth);
        let token = match self.mode {
            Mode::Standalone => {
                let token = standalone::admin_token(&self.data_dir).map_err(|source| {
                    StartError::DataDir {
                        path: self.data_dir.join("admin-token"),
                        source,
                    }
                })?;
                let admin = User {
                    name: admin_user(&self.name),
                    groups: vec![
                        SYSTEM_PRIVILEGED_GROUP.to_string(),
                        ALL_AUTHENTICATED_GROUP.to_string(),
                    ],
                    ..User::default()
                };
                builder = builder
                    .authenticator(BearerTokens::new().with(token.clone(), admin))
                    .always_allow_paths(paths);
                Some(token)
            }
            Mode::Delegated => {
                let authentication = options.authentication.delegate().await?;
                builder = builder
                    .authenticator(
                        authentication
                            .with_metrics(self.metrics.clone())
                            .authenticator(),
                    )
                    .always_allow_paths(paths);
                if let Some(authorizer) = configured {
                    builder = builder.authorizer(Shared(authorizer));
                }
                None
            }
        };
        if let Some(cluster) = self.core_cluster {
            builder = builder.readyz_check(HealthCheck::new("informer-sync", move || {
                let synced = cluster.namespaces_synced();
                async move {
                    synced.then_some(()).ok_or_else(|| {
                        "namespaces not yet synced from the core cluster".to_string()
                    })
                }
            }));
        }
        {
            let (api, metrics) = (api.clone(), self.metrics.clone());
            builder = builder.post_start_hook(
                "storage-object-count-tracker-hook",
                move |shutdown| async move {
                    api.count_objects(&metrics).await;
                    tokio::spawn(api.track_object_counts(metrics, shutdown));
                    Ok(())
                },
            );
        }
        match elector {
            None => {
                for (name, run) in enabled {
                    builder = builder.post_start_hook(
                        format!("start-{name}-controller"),
                        move |shutdown| async move {
                            tokio::spawn(run(shutdown));
                            Ok(())
                        },
                    );
                }
            }
            Some(elector) => {
                let lead: Lead = Box::new(move |leading| {
                    enabled
                        .iter()
                        .map(|(name, run)| {
                            tracing::info!(controller = %name, "starting controller");
                            run(leading.clone())
                        })
                        .collect()
                });
                // The pre-shutdown hook waits for the election to end: the lease released before the process exits.
                let (ended, election_ended) = tokio::sync::oneshot::channel::<()>();
                builder = builder
                    .post_start_hook("start-leader-election", move |shutdown| async move {
                        tokio::spawn(async move {
                            elector.run(shutdown, lead).await;
                            drop(ended);
                        });
                        Ok(())
                    })
                    .pre_shutdown_hook("release-leader-election-lease", move || async move {
                        let _ = election_ended.await;
                    });
            }
        }
        for change in self.configure {
            builder = change(builder);
        }
        let server = builder
            .default_cert_dir(self.data_dir.join("certs"))
            .version(version)
            .routes(
                api.router()
                    .merge(discovery.router())
                    .merge(openapi.router()),
            )
            .bind()
            .await?;

        let url = format!("https://127.0.0.1:{}", server.local_addr().port());
        let kubeconfig = self.data_dir.join("kubeconfig");
        standalone::write_kubeconfig(
            &kubeconfig,
            &self.name,
            &url,
            token.as_deref(),
            &server,
            &options.serving,
        )
        .map_err(|source| StartError::DataDir {
            path: kubeconfig.clone(),
            source,
        })?;
        Ok(Started {
            server,
            url,
            kubeconfig,
            mode: self.mode,
            backend: self.backend_name,
        })
    }
}

/// The standalone admin's user name: the server's name without `-apiserver`, then `-admin` (`pizza-admin`).
pub fn admin_user(server_name: &str) -> String {
    let short = server_name
        .strip_suffix("-apiserver")
        .unwrap_or(server_name);
    format!("{short}-admin")
}

/// A bound server, with where a client finds it.
pub struct Started {
    /// The server, bound; [`Server::run`] serves it.
    pub server: Server,
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    /// The kubeconfig written for this server (with the admin token when standalone, no credentials when
    /// delegated).
    pub kubeconfig: PathBuf,
    /// How requests are authenticated and authorized.
    pub mode: Mode,
    /// The storage backend's name.
    pub backend: &'static str,
}

/// What a binary says of itself in `--help` and `--version`: its Cargo package's name, version and description,
/// as [`main!`](crate::main) reads them.
#[derive(Clone, Copy, Debug)]
pub struct Package {
    /// The package name (`CARGO_PKG_NAME`): the command's name in `--help` and in errors.
    pub name: &'static str,
    /// The package version (`CARGO_PKG_VERSION`), shown by `--version`.
    pub version: &'static str,
    /// The package description (`CARGO_PKG_DESCRIPTION`), shown as `--help`'s about text; may be empty.
    pub description: &'static str,
}

/// A server binary's `main` (written for you by [`main!`](crate::main)): parses the command line into `start`'s
/// options `O` (the framework's generic [`Options`] named and described after `package`), starts logs and traces
/// as the [`RecommendedOptions`] among them say, then `start`, prints where the server is, and serves until
/// SIGINT or SIGTERM. Errors go to stderr as `<name>: <error>` with a failing exit code.
///
/// `<name> storage backup|restore|migrate` runs `start` only until [`App::open`] has opened the storage its flags
/// choose, and moves the objects ([`transfer`](crate::storage::transfer)).
pub async fn main<O, E, F, Fut>(package: Package, start: F) -> ExitCode
where
    O: clap::Parser,
    E: std::fmt::Display,
    F: Fn(O) -> Fut,
    Fut: Future<Output = Result<Started, E>>,
{
    use clap::FromArgMatches;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let mut command = O::command();
    // The framework's own `Options` carries the framework's name until the binary's package names it.
    if command.get_name() == env!("CARGO_PKG_NAME") {
        command = command.name(package.name).version(package.version);
        if !package.description.is_empty() {
            command = command.about(package.description);
        }
    }
    let name = command.get_name().to_string();
    // The server's flags may follow `storage <command>` too: they say which store the command works on. (clap
    // allows neither required nor positional arguments to be global: a binary's own such arguments stay put.)
    let command = command
        .mut_args(|arg| {
            if arg.is_required_set() || arg.is_positional() {
                arg
            } else {
                arg.global(true)
            }
        })
        .subcommand(storage_command::command());
    // One parse gives both the binary's options and the framework's among them (flattened, they share ids).
    let matches = command.get_matches();
    if let Some(("storage", sub)) = matches.subcommand() {
        return storage_command::run(&name, &matches, sub, &start).await;
    }
    let options = O::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let server = RecommendedOptions::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let telemetry = match server.tracing.start() {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let target = name.replace('-', "_");
    tracing_subscriber::registry()
        .with(server.logging.layer(&[target.as_str()]))
        .with(telemetry.as_ref().map(|t| t.layer()))
        .init();
    let started = match start(options).await {
        Ok(started) => started,
        Err(e) => {
            eprintln!("{name}: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Written without panicking: a server must not die because whoever started it closed its stdout.
    let banner = format!(
        "{name} serving on {} (storage: {}); kubeconfig: {}\nmode: {}\ntry: kubectl --kubeconfig {} api-resources\n",
        started.url,
        started.backend,
        started.kubeconfig.display(),
        started.mode,
        started.kubeconfig.display()
    );
    let _ = std::io::Write::write_all(&mut std::io::stdout(), banner.as_bytes());
    let result = started.server.run_until_signal().await;
    if let Some(telemetry) = telemetry {
        telemetry.shutdown().await;
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A server binary's whole `main` in one line, `apiserver::main!(my_server::start);`: a Tokio runtime running
/// [`app::main`](crate::app::main) with the binary's package name, version and description.
#[macro_export]
macro_rules! main {
    ($start:expr) => {
        fn main() -> ::std::process::ExitCode {
            let package = $crate::app::Package {
                name: env!("CARGO_PKG_NAME"),
                version: env!("CARGO_PKG_VERSION"),
                description: env!("CARGO_PKG_DESCRIPTION"),
            };
            match $crate::tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on($crate::app::main(package, $start)),
                Err(e) => {
                    eprintln!("{}: {e}", package.name);
                    ::std::process::ExitCode::FAILURE
                }
            }
        }
    };
}
