//! A backend measured: every call's latency in `etcd_request_duration_seconds{operation,type}` (etcd, as upstream)
//! or `apiserver_storage_request_duration_seconds{backend,operation,type}` (the other backends), failures in the
//! matching `*_request_errors_total` (the backend's errors that would be a 5xx), each LIST in `apiserver_storage_list_*{group,resource}`,
//! and a span per call (`Create etcd3`, `Get rocksdb`, ...) when spans are exported. `type` is the resource, read
//! from the key.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use bytes::Bytes;
use tracing::Instrument;

use super::{
    GetOptions, ListOptions, ListResult, Preconditions, Stats, Storage, StorageError, StoredObject,
    TryUpdate, ValidateDeletion, WatchOptions, WatchStream,
};
use crate::metrics::Metrics;
use crate::telemetry::SPAN_TARGET;

/// A backend whose calls are measured.
pub struct Instrumented {
    inner: Arc<dyn Storage>,
    backend: &'static str,
    prefix: String,
    group: String,
    metrics: Arc<Metrics>,
}

impl Instrumented {
    /// Measures `inner`, named `backend` (`etcd3` for etcd, as upstream's spans name it; `rocksdb`, `sqlite`,
    /// `postgres`, `memory`), whose keys start with `prefix` and hold the resources of API group `group`.
    pub fn wrap(
        inner: Arc<dyn Storage>,
        backend: &'static str,
        prefix: &str,
        group: &str,
        metrics: Arc<Metrics>,
    ) -> Arc<dyn Storage> {
        Arc::new(Instrumented {
            inner,
            backend,
            prefix: prefix.trim_end_matches('/').to_string(),
            group: group.to_string(),
            metrics,
        })
    }

    /// The resource a key belongs to: the first path part after the prefix.
    fn resource<'k>(&self, key: &'k str) -> &'k str {
        key.strip_prefix(self.prefix.as_str())
            .unwrap_or(key)
            .trim_start_matches('/')
            .split('/')
            .next()
            .unwrap_or_default()
    }

    async fn observe<T>(
        &self,
        operation: &'static str,
        span_name: &'static str,
        key: &str,
        call: impl Future<Output = Result<T, StorageError>>,
    ) -> Result<T, StorageError> {
        let resource = self.resource(key);
        let span = if crate::telemetry::in_traced_request() {
            tracing::trace_span!(
                target: SPAN_TARGET,
                "storage",
                otel.name = format!("{span_name} {}", self.backend),
                key,
                resource,
                backend = self.backend,
            )
        } else {
            tracing::Span::none()
        };
        let started = Instant::now();
        let result = call.instrument(span).await;
        // Not found, exists, conflicts and bad input are answers; failures are what would be a 5xx. The caller's
        // own error from inside an update (a 422, 403 or 409 of validation, admission or a precondition) is no
        // storage failure either, as upstream counts only the etcd client's errors.
        let failed = result
            .as_ref()
            .is_err_and(|e| !matches!(e, StorageError::Callback(_)) && e.code() >= 500);
        self.metrics
            .storage_call(self.backend, operation, resource, started.elapsed(), failed);
        result
    }
}

#[async_trait]
impl Storage for Instrumented {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        self.observe("create", "Create", key, self.inner.create(key, value))
            .await
    }

    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        self.observe("get", "Get", key, self.inner.get(key, opts))
            .await
    }

    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        let name = if opts.recursive {
            "List(recursive=true)"
        } else {
            "List(recursive=false)"
        };
        let result = self
            .observe("list", name, key, self.inner.list(key, opts))
            .await;
        if let Ok(list) = &result {
            self.metrics.storage_list(
                &self.group,
                self.resource(key),
                list.evaluated,
                list.items.len() as u64,
            );
        }
        result
    }

    async fn guaranteed_update(
        &self,
        key: &str,
        ignore_not_found: bool,
        preconditions: Option<&Preconditions>,
        try_update: &mut dyn TryUpdate,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        let call = self.inner.guaranteed_update(
            key,
            ignore_not_found,
            preconditions,
            try_update,
            cached_existing,
        );
        self.observe("update", "GuaranteedUpdate", key, call).await
    }

    async fn delete(
        &self,
        key: &str,
        preconditions: Option<&Preconditions>,
        validate_deletion: &mut dyn ValidateDeletion,
        cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        let call = self
            .inner
            .delete(key, preconditions, validate_deletion, cached_existing);
        self.observe("delete", "Delete", key, call).await
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
        self.observe("watch", "Watch", key, self.inner.watch(key, opts))
            .await
    }

    async fn current_revision(&self) -> Result<u64, StorageError> {
        self.inner.current_revision().await
    }

    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        self.inner.compact(revision).await
    }

    async fn compact_revision(&self) -> Result<u64, StorageError> {
        self.inner.compact_revision().await
    }

    async fn bump_revision(&self, revision: u64) -> Result<bool, StorageError> {
        self.inner.bump_revision(revision).await
    }

    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        self.observe("listWithCount", "Count", prefix, self.inner.stats(prefix))
            .await
    }

    async fn readiness(&self) -> Result<(), StorageError> {
        self.inner.readiness().await
    }

    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        self.inner.request_watch_progress().await
    }

    fn reliable_progress(&self) -> bool {
        self.inner.reliable_progress()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    /// Issue 36: an update refused by its caller (validation, admission, a precondition) counted as a storage
    /// error; only the backend's own failures do.
    #[tokio::test]
    async fn callers_errors_are_not_storage_errors() {
        let metrics = Arc::new(Metrics::new());
        let storage = Instrumented::wrap(
            Arc::new(MemoryStorage::new()),
            "memory",
            "/registry/example.com",
            "example.com",
            metrics.clone(),
        );
        let key = "/registry/example.com/gadgets/ns/g";
        storage
            .create(key, Bytes::from_static(b"{}"))
            .await
            .unwrap();
        let errors = || {
            metrics
                .storage_errors
                .with_label_values(&["memory", "update", "gadgets"])
                .get()
        };
        let refused = std::io::Error::other("the caller's 422");
        let mut refuse = |_: Option<StoredObject>| {
            let refused = StorageError::callback(std::io::Error::other(refused.to_string()));
            async move { Err::<Bytes, _>(refused) }
        };
        let err = storage
            .guaranteed_update(key, false, None, &mut refuse, None)
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::Callback(_)), "{err}");
        assert_eq!(errors(), 0);
        let mut fail = |_: Option<StoredObject>| async {
            Err::<Bytes, _>(StorageError::Internal("the backend broke".into()))
        };
        storage
            .guaranteed_update(key, false, None, &mut fail, None)
            .await
            .unwrap_err();
        assert_eq!(errors(), 1);
    }
}
