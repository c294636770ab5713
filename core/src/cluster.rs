//! The core cluster: the kube-apiserver an aggregated server runs behind. Delegated authentication
//! (TokenReview, the `extension-apiserver-authentication` ConfigMap), delegated authorization
//! (SubjectAccessReview) and admission plugins (namespaces) reach it with kube-rs clients made here, from a
//! kubeconfig file or, when no file is named, from the pod's service account (upstream's
//! `rest.InClusterConfig`: `KUBERNETES_SERVICE_HOST`/`_PORT` and the mounted token).
//!
//! The client is the `cluster` cargo feature (kube-rs and k8s-openapi, about 50 crates). A server built without
//! it has no core cluster: a kubeconfig flag, or running in a pod, is refused at start with a message naming the
//! feature, rather than the server running without the delegation it was asked for.

use std::path::{Path, PathBuf};
#[cfg(feature = "cluster")]
use std::time::Duration;

/// Where the service account token of a pod is mounted.
const IN_CLUSTER_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// How long a request to the core cluster may take before it counts as failed (reviews are on every
/// uncached request's path, so they must not hang it).
#[cfg(feature = "cluster")]
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The core cluster could not be reached from the configuration given.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ClusterError(pub String);

/// upstream's `CoreAPIOptions`: how admission plugins and informers reach the core cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, clap::Args)]
pub struct CoreApiOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server. Without it, the in-cluster service account is
    /// used when the server runs in a pod.
    #[arg(long = "kubeconfig")]
    pub kubeconfig: Option<PathBuf>,
}

/// Whether the process runs in a pod with a service account (upstream's in-cluster conditions).
pub fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
        && std::env::var_os("KUBERNETES_SERVICE_PORT").is_some()
        && Path::new(IN_CLUSTER_TOKEN).exists()
}

/// What a build without the `cluster` feature says when asked to reach a core cluster (`what`: the flag or
/// condition that asked).
pub fn built_without(what: &str) -> ClusterError {
    ClusterError(format!(
        "{what}: this server was built without the core-cluster client (cargo feature `cluster`)"
    ))
}

/// Stands in for kube-rs's client configuration in a build without the `cluster` feature: there is none.
#[cfg(not(feature = "cluster"))]
#[derive(Clone, Copy, Debug)]
pub enum Config {}

/// A build without the `cluster` feature has no core cluster: `kubeconfig` or running in a pod is refused.
#[cfg(not(feature = "cluster"))]
pub async fn config(kubeconfig: Option<&Path>) -> Result<Option<Config>, ClusterError> {
    match kubeconfig {
        Some(path) => Err(built_without(&format!("kubeconfig {}", path.display()))),
        None if in_cluster() => Err(built_without("running in a pod (in-cluster configuration)")),
        None => Ok(None),
    }
}

/// No core cluster in a build without the `cluster` feature: nothing of this type exists.
#[cfg(not(feature = "cluster"))]
#[derive(Clone)]
pub struct CoreCluster {
    never: std::convert::Infallible,
}

#[cfg(not(feature = "cluster"))]
impl CoreCluster {
    /// Never called: there is no [`Config`] to call it with.
    pub fn start(config: &Config) -> Result<Self, ClusterError> {
        match *config {}
    }

    /// Whether the namespace informer has loaded the namespaces once.
    pub fn namespaces_synced(&self) -> bool {
        match self.never {}
    }
}

/// The client configuration for `kubeconfig`, else the in-cluster one, else `None` (no core cluster). The
/// `KUBECONFIG` variable is deliberately not read: which cluster decides who may do what is set by flags.
#[cfg(feature = "cluster")]
pub async fn config(kubeconfig: Option<&Path>) -> Result<Option<kube::Config>, ClusterError> {
    let mut config = match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| ClusterError(format!("{}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(|e| ClusterError(format!("{}: {e}", path.display())))?
        }
        None if in_cluster() => kube::Config::incluster()
            .map_err(|e| ClusterError(format!("in-cluster configuration: {e}")))?,
        None => return Ok(None),
    };
    config.connect_timeout = Some(REQUEST_TIMEOUT);
    Ok(Some(config))
}

/// A client for short requests (reviews, gets): each must answer within ten seconds.
#[cfg(feature = "cluster")]
pub fn request_client(config: &kube::Config) -> Result<kube::Client, ClusterError> {
    let mut config = config.clone();
    config.read_timeout = Some(REQUEST_TIMEOUT);
    config.write_timeout = Some(REQUEST_TIMEOUT);
    kube::Client::try_from(config).map_err(|e| ClusterError(e.to_string()))
}

/// A client for watches, which stay open for minutes.
#[cfg(feature = "cluster")]
pub fn watch_client(config: &kube::Config) -> Result<kube::Client, ClusterError> {
    kube::Client::try_from(config.clone()).map_err(|e| ClusterError(e.to_string()))
}

/// The core cluster as admission plugins use it: a client, and informers (a watch-fed local copy) of the
/// objects they read on every request (upstream's `SharedInformerFactory` handed over by a plugin initializer).
#[cfg(feature = "cluster")]
#[derive(Clone)]
pub struct CoreCluster {
    client: kube::Client,
    watch_client: kube::Client,
    namespaces: kube::runtime::reflector::Store<k8s_openapi::api::core::v1::Namespace>,
}

#[cfg(feature = "cluster")]
impl CoreCluster {
    /// Connects and starts the namespace informer in the background (it reconnects by itself; see
    /// [`CoreCluster::namespaces_synced`]).
    pub fn start(config: &kube::Config) -> Result<Self, ClusterError> {
        use kube::runtime::reflector;

        let mut cluster = CoreCluster {
            client: request_client(config)?,
            watch_client: watch_client(config)?,
            namespaces: reflector::store().0,
        };
        cluster.namespaces = cluster.informer("namespace");
        Ok(cluster)
    }

    /// Starts an informer of cluster-scoped objects of kind `K` in the background (it reconnects by itself, with
    /// backoff; failures are logged under `what`) and returns its store.
    pub fn informer<K>(&self, what: &str) -> kube::runtime::reflector::Store<K>
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        let (store, writer) = kube::runtime::reflector::store();
        spawn_reflector(writer, kube::Api::<K>::all(self.watch_client.clone()), what);
        store
    }

    /// Starts an informer of any kind in all namespaces (the kind found by discovery: admission policies'
    /// parameters) and returns its store.
    pub fn dynamic_informer(
        &self,
        resource: &kube::discovery::ApiResource,
        what: &str,
    ) -> kube::runtime::reflector::Store<kube::api::DynamicObject> {
        let writer = kube::runtime::reflector::store::Writer::new(resource.clone());
        let store = writer.as_reader();
        let api =
            kube::Api::<kube::api::DynamicObject>::all_with(self.watch_client.clone(), resource);
        spawn_reflector(writer, api, what);
        store
    }

    /// A client for requests to the core cluster.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Whether the namespace informer has loaded the namespaces once.
    pub fn namespaces_synced(&self) -> bool {
        // `wait_until_ready` completes at once when ready, and never before.
        futures::FutureExt::now_or_never(self.namespaces.wait_until_ready()).is_some()
    }

    /// The namespace from the informer, if it has been seen.
    pub fn namespace(
        &self,
        name: &str,
    ) -> Option<std::sync::Arc<k8s_openapi::api::core::v1::Namespace>> {
        self.namespaces
            .get(&kube::runtime::reflector::ObjectRef::new(name))
    }
}

/// Fills `writer` from a watch of `api` in the background, reconnecting with backoff; failures are logged under
/// `what`.
#[cfg(feature = "cluster")]
fn spawn_reflector<K>(
    writer: kube::runtime::reflector::store::Writer<K>,
    api: kube::Api<K>,
    what: &str,
) where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, reflector, watcher};

    let what = what.to_string();
    let stream = reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .for_each(move |event| {
            if let Err(e) = event {
                tracing::warn!("{what} informer: {e}");
            }
            futures::future::ready(())
        });
    tokio::spawn(stream);
}
