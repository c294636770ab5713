//! Where a lease is kept: a `coordination.k8s.io/v1` `Lease` in the core cluster (as kube-controller-manager
//! keeps its own), or, for servers without a core cluster, one key in the server's own storage, so that replicas
//! sharing a Postgres database or an etcd cluster elect through it.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::LeaderElectionRecord;
use crate::storage::{
    GetOptions, Preconditions, ResourceKeys, Storage, StorageError, StoredObject,
};

/// A lock write failed.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Someone else wrote the lease since it was read (or created it first).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The store failed, or the record could not be read.
    #[error("{0}")]
    Failed(String),
}

/// client-go's `resourcelock.Interface` for one lease: reads give the record with a version, and writes happen
/// only if the lease is still at the version given, so two candidates cannot both win a race.
#[async_trait]
pub trait LeaseLock: Send + Sync + 'static {
    /// The record and its version, or `None` when there is no lease yet.
    async fn get(&self) -> Result<Option<(LeaderElectionRecord, String)>, LockError>;

    /// Creates the lease; [`LockError::Conflict`] when it exists. Returns the new version.
    async fn create(&self, record: &LeaderElectionRecord) -> Result<String, LockError>;

    /// Writes the lease if it is still at `version`; [`LockError::Conflict`] otherwise. Returns the new version.
    async fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &str,
    ) -> Result<String, LockError>;

    /// `<namespace>/<name>`, for logs.
    fn describe(&self) -> String;
}

/// The lease as an object of the core cluster's `coordination.k8s.io/v1` API.
pub struct ClusterLock {
    api: kube::Api<Lease>,
    namespace: String,
    name: String,
}

impl ClusterLock {
    /// The lease `<namespace>/<name>` through `client` (which needs get, create and update on leases there).
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        ClusterLock {
            api: kube::Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    fn lease(&self, record: &LeaderElectionRecord, version: Option<&str>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                resource_version: version.map(str::to_string),
                ..ObjectMeta::default()
            },
            spec: Some(record.to_spec()),
        }
    }
}

fn cluster_error(e: kube::Error) -> LockError {
    match e {
        kube::Error::Api(status) if status.code == 409 => LockError::Conflict(status.message),
        other => LockError::Failed(other.to_string()),
    }
}

fn written_version(lease: Lease) -> String {
    lease.metadata.resource_version.unwrap_or_default()
}

#[async_trait]
impl LeaseLock for ClusterLock {
    async fn get(&self) -> Result<Option<(LeaderElectionRecord, String)>, LockError> {
        let found = self.api.get_opt(&self.name).await.map_err(cluster_error)?;
        Ok(found.map(|lease| {
            let record = LeaderElectionRecord::from_spec(&lease.spec.clone().unwrap_or_default());
            (record, written_version(lease))
        }))
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<String, LockError> {
        self.api
            .create(&Default::default(), &self.lease(record, None))
            .await
            .map(written_version)
            .map_err(cluster_error)
    }

    async fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &str,
    ) -> Result<String, LockError> {
        self.api
            .replace(
                &self.name,
                &Default::default(),
                &self.lease(record, Some(version)),
            )
            .await
            .map(written_version)
            .map_err(cluster_error)
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// The lease as one key of the server's own storage, `<prefix>/coordination.k8s.io/leases/<namespace>/<name>`
/// (group-qualified, so that no served resource's keys can meet it), holding the `Lease` as JSON; the version is
/// the key's revision, and writes are [`Storage::create`] and [`Storage::guaranteed_update`] with a
/// resourceVersion precondition.
pub struct StorageLock {
    storage: Arc<dyn Storage>,
    key: String,
    namespace: String,
    name: String,
}

impl StorageLock {
    /// The lease `<namespace>/<name>` in `storage`, under `prefix` (the server's storage prefix). Fails when the
    /// name or namespace cannot be a key segment.
    pub fn new(
        storage: Arc<dyn Storage>,
        prefix: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Self, StorageError> {
        let key =
            ResourceKeys::new(prefix, "coordination.k8s.io/leases")?.namespaced(namespace, name)?;
        Ok(StorageLock {
            storage,
            key,
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// The key the lease is kept at.
    pub fn key(&self) -> &str {
        &self.key
    }

    fn encode(&self, record: &LeaderElectionRecord) -> Result<Bytes, LockError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(record.to_spec()),
        };
        serde_json::to_vec(&lease)
            .map(Bytes::from)
            .map_err(|e| LockError::Failed(e.to_string()))
    }
}

fn storage_error(e: StorageError) -> LockError {
    match e {
        StorageError::KeyExists { .. }
        | StorageError::InvalidObj { .. }
        | StorageError::ResourceVersionConflicts { .. } => LockError::Conflict(e.to_string()),
        other => LockError::Failed(other.to_string()),
    }
}

fn decode(stored: &StoredObject) -> Result<LeaderElectionRecord, LockError> {
    let lease: Lease = serde_json::from_slice(&stored.value)
        .map_err(|e| LockError::Failed(format!("{}: not a Lease: {e}", stored.key)))?;
    Ok(LeaderElectionRecord::from_spec(
        &lease.spec.unwrap_or_default(),
    ))
}

#[async_trait]
impl LeaseLock for StorageLock {
    async fn get(&self) -> Result<Option<(LeaderElectionRecord, String)>, LockError> {
        match self.storage.get(&self.key, &GetOptions::default()).await {
            Ok(stored) => Ok(Some((decode(&stored)?, stored.revision.to_string()))),
            Err(StorageError::KeyNotFound { .. }) => Ok(None),
            Err(e) => Err(storage_error(e)),
        }
    }

    async fn create(&self, record: &LeaderElectionRecord) -> Result<String, LockError> {
        let value = self.encode(record)?;
        self.storage
            .create(&self.key, value)
            .await
            .map(|stored| stored.revision.to_string())
            .map_err(storage_error)
    }

    async fn update(
        &self,
        record: &LeaderElectionRecord,
        version: &str,
    ) -> Result<String, LockError> {
        let revision: u64 = version
            .parse()
            .map_err(|_| LockError::Failed(format!("not a revision: {version:?}")))?;
        let value = self.encode(record)?;
        let preconditions = Preconditions::new().with_resource_version(revision);
        let mut write = |_current: Option<StoredObject>| {
            let value = value.clone();
            async move { Ok(value) }
        };
        self.storage
            .guaranteed_update(&self.key, false, Some(&preconditions), &mut write, None)
            .await
            .map(|stored| stored.revision.to_string())
            .map_err(storage_error)
    }

    fn describe(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}
