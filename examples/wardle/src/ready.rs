//! The flunder-ready controller: a flunder's `Ready` condition is `True` when the flunder or fischer its spec refers
//! to exists (or it refers to nothing) and `False` while it does not, kept current as flunders and fischers come and
//! go. `kubectl wait --for=condition=Ready flunder/NAME` waits for it.
//!
//! Flunders have no status subresource (as upstream), so a status write is an update of the whole object and counts
//! as a change of generation: the condition does not record an observed generation, or every write would make
//! the next one.

use apiserver::async_trait;
use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::meta::{Condition, ConditionStatus, set_status_condition};
use apiserver::registry::{ApiError, ListRequest, Store, UpdatedObject, WriteOptions};
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
                let read = self.flunders.get(namespace, &spec.flunder_reference, None);
                ("flunder", exists(read.await)?)
            }
            FISCHER_REFERENCE => {
                let read = self.fischers.get(None, &spec.fischer_reference, None);
                ("fischer", exists(read.await)?)
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

/// Whether a read found its object.
fn exists<T>(read: Result<T, ApiError>) -> Result<bool, ApiError> {
    match read {
        Ok(_) => Ok(true),
        Err(e) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

impl Reconciler for ReadyReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<(), ApiError> {
        let namespace = key.namespace.as_deref();
        let flunder = match self.flunders.get(namespace, &key.name, None).await {
            Ok(flunder) => flunder,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        let ready = self.readiness(&flunder).await?;
        let mut conditions = flunder.status.conditions.clone();
        if !set_status_condition(&mut conditions, ready.clone()) {
            return Ok(());
        }
        let update = SetReady { flunder, ready };
        match (self.flunders)
            .update(namespace, &key.name, &update, WriteOptions::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The update: the condition set on the flunder as read (a change since conflicts and is reconciled again).
struct SetReady {
    flunder: Flunder,
    ready: Condition,
}

#[async_trait]
impl UpdatedObject<Flunder> for SetReady {
    async fn updated(&self, _current: Option<&Flunder>) -> Result<Flunder, ApiError> {
        let mut flunder = self.flunder.clone();
        set_status_condition(&mut flunder.status.conditions, self.ready.clone());
        Ok(flunder)
    }
}
