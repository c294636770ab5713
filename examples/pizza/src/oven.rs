//! The oven controller: an oven line burns as many ovens as `spec.replicas` asks for (at once: these ovens need no
//! warming up), and publishes its label selector, so that `kubectl scale` and autoscalers see the scale they set.

use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::registry::{ApiError, Store};
use apiserver::server::ShutdownSignal;

use crate::GROUP;
use crate::restaurant::Oven;

/// The controller's name in `--controllers`, in logs and in its post-start hook.
pub const OVEN_CONTROLLER: &str = "oven";

/// Runs the controller until the server shuts down.
pub async fn run(ovens: Store<Oven>, shutdown: ShutdownSignal) {
    Controller::new(OVEN_CONTROLLER).owns(ovens.clone()).run(OvenReconciler { ovens }, shutdown).await;
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
        // The ovens burning, on the oven line as it is (again after a conflict); nothing is written when they
        // already burn, nor when the line was deleted since.
        let light = |oven: &mut Oven| {
            oven.status.replicas = oven.spec.replicas;
            oven.status.selector = selector(oven);
        };
        let namespace = key.namespace.as_deref();
        self.ovens.status().modify(namespace, &key.name, light).await?;
        Ok(())
    }
}
