//! `NamespaceLifecycle` (upstream's plugin of that name): namespaced objects can only be created or updated in
//! namespaces that exist in the core cluster, and nothing new can be created in a namespace being terminated.
//! Namespaces are read from the core cluster's informer; one not found there is looked up live before the
//! request is refused, as upstream does, so a namespace created a moment ago is not missed.

use super::NAMESPACE_LIFECYCLE;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Namespace;

use super::{AnyObject, Attributes, Initializer, Operation, Plugin, PluginError};
use crate::cluster::CoreCluster;
use crate::registry::{ApiError, Cause};
use crate::runtime::GroupResource;

/// How long a create waits for the informer to see a namespace it does not know yet (upstream: 50 ms).
const MISSING_NAMESPACE_WAIT: Duration = Duration::from_millis(50);

/// See the module documentation.
pub struct NamespaceLifecycle {
    cluster: CoreCluster,
}

impl NamespaceLifecycle {
    /// Builds the plugin from the initializer's core cluster; without one it cannot work (upstream's "missing
    /// namespaceLister").
    pub fn build(initializer: &Initializer) -> Result<Arc<dyn Plugin>, PluginError> {
        let cluster = initializer.core_cluster.clone().ok_or_else(|| {
            PluginError(format!(
                "{NAMESPACE_LIFECYCLE}: needs the core cluster (--kubeconfig, or running in a pod)"
            ))
        })?;
        Ok(Arc::new(NamespaceLifecycle { cluster }))
    }

    async fn live_lookup(&self, name: &str) -> Result<Namespace, ApiError> {
        let api = kube::Api::<Namespace>::all(self.cluster.client());
        match api.get_opt(name).await {
            Ok(Some(namespace)) => Ok(namespace),
            Ok(None) => Err(ApiError::not_found(
                &GroupResource {
                    group: String::new(),
                    resource: "namespaces".into(),
                },
                name,
            )),
            Err(e) => Err(ApiError::internal(e)),
        }
    }
}

#[async_trait]
impl Plugin for NamespaceLifecycle {
    fn handles(&self, operation: Operation) -> bool {
        // Deletes are always allowed.
        matches!(operation, Operation::Create | Operation::Update)
    }

    async fn admit(
        &self,
        a: &Attributes,
        _object: &mut AnyObject,
        _old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        if a.namespace.is_empty() {
            return Ok(());
        }
        if !self.cluster.namespaces_synced() {
            return Err(a.forbidden("not yet ready to handle request"));
        }
        let mut cached = self.cluster.namespace(&a.namespace);
        if cached.is_none() && a.operation == Operation::Create {
            tokio::time::sleep(MISSING_NAMESPACE_WAIT).await;
            cached = self.cluster.namespace(&a.namespace);
        }
        let namespace = match cached {
            Some(namespace) => (*namespace).clone(),
            None => self.live_lookup(&a.namespace).await?,
        };
        let terminating =
            namespace.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Terminating");
        if a.operation == Operation::Create && terminating {
            let mut refused = a.forbidden(format!(
                "unable to create new content in namespace {} because it is being terminated",
                a.namespace
            ));
            if let Some(details) = refused.details.as_mut() {
                details.causes.push(Cause {
                    reason: "NamespaceTerminating".into(),
                    message: format!("namespace {} is being terminated", a.namespace),
                    field: "metadata.namespace".into(),
                });
            }
            return Err(refused);
        }
        Ok(())
    }
}
