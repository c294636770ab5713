//! The flunder-ready controller: a flunder's `Ready` condition is `True` when the flunder or fischer its spec refers
//! to exists (or it refers to nothing) and `False` while it does not, kept current as flunders and fischers come and
//! go. `kubectl wait --for=condition=Ready flunder/NAME` waits for it.
//!
//! Flunders have no status subresource (as upstream), so a status write is an update of the whole object and counts
//! as a change of generation: the condition does not record an observed generation, or every write would make
//! the next one.

use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::meta::{Condition, ConditionStatus, set_status_condition};
use apiserver::registry::{ApiError, ListRequest, Store};
use apiserver::server::ShutdownSignal;

use crate::wardle::{FISCHER_REFERENCE, FLUNDER_REFERENCE, Fischer, Flunder, READY};

/// The controller's name in `--controllers`, in logs and in its post-start hook.
pub const READY_CONTROLLER: &str = "flunder-ready";

/// Runs the controller until the server shuts down.
pub async fn run(flunders: Store<Flunder>, fischers: Store<Fischer>, shutdown: ShutdownSignal) {
    let (of_flunders, of_fischers) = (flunders.clone(), flunders.clone());
    Controller::new(READY_CONTROLLER)
        .watches(flunders.clone(), move |flunder: Flunder| {
            let flunders = of_flunders.clone();
            async move {
                let mut keys = referring(&flunders, FLUNDER_REFERENCE, &flunder).await;
                keys.push(ObjectKey::of(&flunder));
                keys
            }
        })
        .watches(fischers.clone(), move |fischer: Fischer| {
            let flunders = of_fischers.clone();
            async move { referring(&flunders, FISCHER_REFERENCE, &fischer).await }
        })
        .run(ReadyReconciler { flunders, fischers }, shutdown)
        .await;
}

/// The flunders that refer to `object` (of `reference_type`), as the watch cache holds them.
async fn referring(
    flunders: &Store<Flunder>,
    reference_type: &str,
    object: &impl apiserver::runtime::Resource,
) -> Vec<ObjectKey> {
    let meta = object.metadata();
    let cached = ListRequest {
        resource_version: Some(0),
        ..ListRequest::default()
    };
    let namespace = (reference_type == FLUNDER_REFERENCE).then_some(meta.namespace.as_str());
    match flunders.list(namespace, &cached).await {
        Ok(list) => list
            .items
            .iter()
            .filter(|f| f.spec.reference_type == reference_type)
            .filter(|f| match reference_type {
                FLUNDER_REFERENCE => f.spec.flunder_reference == meta.name,
                _ => f.spec.fischer_reference == meta.name,
            })
            .map(ObjectKey::of)
            .collect(),
        Err(error) => {
            apiserver::tracing::warn!(%error, "listing flunders for a reference failed");
            Vec::new()
        }
    }
}

struct ReadyReconciler {
    flunders: Store<Flunder>,
    fischers: Store<Fischer>,
}

impl ReadyReconciler {
    /// The `Ready` condition `flunder` should have now.
    async fn readiness(&self, flunder: &Flunder) -> Result<Condition, ApiError> {
        let spec = &flunder.spec;
        let (kind, found) = match spec.reference_type.as_str() {
            FLUNDER_REFERENCE => {
                let namespace = Some(flunder.metadata.namespace.as_str());
                let read = self.flunders.find(namespace, &spec.flunder_reference);
                ("flunder", read.await?.is_some())
            }
            FISCHER_REFERENCE => {
                let read = self.fischers.find(None, &spec.fischer_reference);
                ("fischer", read.await?.is_some())
            }
            _ => {
                let message = "the flunder refers to nothing";
                return Ok(Condition::new(
                    READY,
                    ConditionStatus::True,
                    "NoReference",
                    message,
                ));
            }
        };
        let name = match kind {
            "flunder" => &spec.flunder_reference,
            _ => &spec.fischer_reference,
        };
        Ok(if found {
            let message = format!("{kind} {name:?} exists");
            Condition::new(READY, ConditionStatus::True, "ReferenceFound", message)
        } else {
            let message = format!("{kind} {name:?} not found");
            Condition::new(READY, ConditionStatus::False, "ReferenceNotFound", message)
        })
    }
}

impl Reconciler for ReadyReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<(), ApiError> {
        let namespace = key.namespace.as_deref();
        let Some(flunder) = self.flunders.find(namespace, &key.name).await? else {
            return Ok(()); // deleted since: nothing to do
        };
        let ready = self.readiness(&flunder).await?;
        // The condition for this spec, on the flunder if it still has it (a flunder changed since is reconciled
        // again); nothing is written when the condition is already there.
        let set_ready = |current: &mut Flunder| {
            if current.spec == flunder.spec {
                set_status_condition(&mut current.status.conditions, ready.clone());
            }
        };
        self.flunders
            .modify(namespace, &key.name, set_ready)
            .await?;
        Ok(())
    }
}
