//! Where a lease is kept: a `coordination.k8s.io/v1` `Lease` in the core cluster (as kube-controller-manager
//! keeps its own), or, for servers without a core cluster, one key in the server's own storage, so that replicas
//! sharing a Postgres database or an etcd cluster elect through it.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use chrono::{DateTime, Utc};
#[cfg(feature = "cluster")]
use k8s_openapi::api::coordination::v1::Lease;
#[cfg(feature = "cluster")]
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

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
#[cfg(feature = "cluster")]
pub struct ClusterLock {
    api: kube::Api<Lease>,
    namespace: String,
    name: String,
}

#[cfg(feature = "cluster")]
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

#[cfg(feature = "cluster")]
fn cluster_error(e: kube::Error) -> LockError {
    match e {
        kube::Error::Api(status) if status.code == 409 => LockError::Conflict(status.message),
        other => LockError::Failed(other.to_string()),
    }
}

#[cfg(feature = "cluster")]
fn written_version(lease: Lease) -> String {
    lease.metadata.resource_version.unwrap_or_default()
}

#[cfg(feature = "cluster")]
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
        let lease = StoredLease {
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
            metadata: StoredMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
            },
            spec: Some(StoredSpec {
                acquire_time: record.acquire_time.map(MicroTime),
                holder_identity: Some(record.holder_identity.clone()),
                lease_duration_seconds: Some(record.lease_duration_seconds),
                lease_transitions: Some(record.leader_transitions),
                renew_time: record.renew_time.map(MicroTime),
            }),
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
    let lease: StoredLease = serde_json::from_slice(&stored.value)
        .map_err(|e| LockError::Failed(format!("{}: not a Lease: {e}", stored.key)))?;
    let spec = lease.spec.unwrap_or_default();
    Ok(LeaderElectionRecord {
        holder_identity: spec.holder_identity.unwrap_or_default(),
        lease_duration_seconds: spec.lease_duration_seconds.unwrap_or_default(),
        acquire_time: spec.acquire_time.map(|t| t.0),
        renew_time: spec.renew_time.map(|t| t.0),
        leader_transitions: spec.lease_transitions.unwrap_or_default(),
    })
}

/// A `coordination.k8s.io/v1` `Lease` as the storage lock keeps it: the fields it writes, in the JSON
/// k8s-openapi writes (so the lease reads the same with or without the `cluster` feature, which brings
/// k8s-openapi; fields it does not write are ignored on reading).
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredLease {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: StoredMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<StoredSpec>,
}

#[derive(Default, Serialize, Deserialize)]
struct StoredMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
}

#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StoredSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    acquire_time: Option<MicroTime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder_identity: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_duration_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_transitions: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    renew_time: Option<MicroTime>,
}

/// metav1.MicroTime: RFC 3339 with six fractional digits, in UTC.
struct MicroTime(DateTime<Utc>);

impl Serialize for MicroTime {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0.format("%Y-%m-%dT%H:%M:%S%.6fZ"))
    }
}

impl<'de> Deserialize<'de> for MicroTime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        DateTime::parse_from_rfc3339(&text)
            .map(|t| MicroTime(t.with_timezone(&Utc)))
            .map_err(serde::de::Error::custom)
    }
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

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;

    /// The storage lock's own Lease type and k8s-openapi's read each other's JSON: a lease written by a build
    /// without the `cluster` feature is the same lease for one with it, and the other way round.
    #[test]
    fn stored_leases_are_k8s_openapi_leases() {
        let record = LeaderElectionRecord {
            holder_identity: "a_1".into(),
            lease_duration_seconds: 15,
            acquire_time: DateTime::from_timestamp_micros(1_700_000_000_123_456),
            renew_time: DateTime::from_timestamp_micros(1_700_000_005_000_001),
            leader_transitions: 3,
        };
        let lock = StorageLock::new(
            Arc::new(crate::storage::memory::MemoryStorage::new()),
            "/registry/test",
            "kube-system",
            "test",
        )
        .unwrap();
        let ours = lock.encode(&record).unwrap();
        let theirs: Lease = serde_json::from_slice(&ours).unwrap();
        assert_eq!(theirs.metadata.name.as_deref(), Some("test"));
        assert_eq!(theirs.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(
            LeaderElectionRecord::from_spec(theirs.spec.as_ref().unwrap()),
            record
        );
        assert_eq!(
            serde_json::to_value(&theirs).unwrap(),
            serde_json::from_slice::<serde_json::Value>(&ours).unwrap()
        );
        let stored = StoredObject {
            key: lock.key().to_string(),
            value: serde_json::to_vec(&theirs).unwrap().into(),
            revision: 1,
        };
        assert_eq!(decode(&stored).unwrap(), record);
    }
}
