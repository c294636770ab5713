//! The oven controller: an oven line burns as many ovens as `spec.replicas` asks for (at once: these ovens need no
//! warming up), and publishes its label selector, so that `kubectl scale` and autoscalers see the scale they set.

use apiserver::async_trait;
use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::registry::{ApiError, Store, UpdatedObject, WriteOptions};
use apiserver::server::ShutdownSignal;

use crate::GROUP;
use crate::restaurant::Oven;

/// The controller's name in `--controllers`, in logs and in its post-start hook.
pub const OVEN_CONTROLLER: &str = "oven";

/// Runs the controller until the server shuts down.
pub async fn run(ovens: Store<Oven>, shutdown: ShutdownSignal) {
    Controller::new(OVEN_CONTROLLER)
        .owns(ovens.clone())
        .run(OvenReconciler { ovens }, shutdown)
        .await;
}

struct OvenReconciler {
    ovens: Store<Oven>,
}

/// The selector of an oven line's ovens.
fn selector(oven: &Oven) -> String {
    format!("{GROUP}/oven={}", oven.metadata.name)
}

impl Reconciler for OvenReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<(), ApiError> {
        let namespace = key.namespace.as_deref();
        let oven = match self.ovens.get(namespace, &key.name, None).await {
            Ok(oven) => oven,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        if oven.status.replicas == oven.spec.replicas && oven.status.selector == selector(&oven) {
            return Ok(());
        }
        match self
            .ovens
            .status()
            .update(namespace, &key.name, &Light(oven), WriteOptions::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The status update: the ovens burning, on the oven line as read (a change since conflicts and is reconciled
/// again).
struct Light(Oven);

#[async_trait]
impl UpdatedObject<Oven> for Light {
    async fn updated(&self, _current: Option<&Oven>) -> Result<Oven, ApiError> {
        let mut oven = self.0.clone();
        oven.status.replicas = oven.spec.replicas;
        oven.status.selector = selector(&oven);
        Ok(oven)
    }
}
