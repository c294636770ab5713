//! The `item-reservation` controller: reserves each item's units in its warehouse (at most the warehouse's
//! capacity) and says so in `status.reserved` and a `Ready` condition.

use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::meta::{Condition, ConditionStatus, set_status_condition};
use apiserver::registry::{ApiError, Store};
use apiserver::server::ShutdownSignal;

use crate::types::{Item, Warehouse};

pub const RESERVATION_CONTROLLER: &str = "item-reservation";

pub async fn run(items: Store<Item>, warehouses: Store<Warehouse>, shutdown: ShutdownSignal) {
    // A warehouse's change requeues the items it keeps.
    let keeps = |item: &Item, warehouse: &Warehouse| item.spec.warehouse == warehouse.metadata.name;
    Controller::new(RESERVATION_CONTROLLER)
        .owns(items.clone())
        .watches_for(warehouses.clone(), items.clone(), keeps)
        .run(Reservations { items, warehouses }, shutdown)
        .await;
}

struct Reservations {
    items: Store<Item>,
    warehouses: Store<Warehouse>,
}

impl Reconciler for Reservations {
    async fn reconcile(&self, key: &ObjectKey) -> Result<(), ApiError> {
        let namespace = key.namespace.as_deref();
        let Some(item) = self.items.find(namespace, &key.name).await? else { return Ok(()) };
        let capacity = self.warehouses.find(None, &item.spec.warehouse).await?.map(|w| w.spec.capacity);
        // Computed on the item as it is when written (again after a conflict); nothing is written when it is right.
        self.items.status().modify(namespace, &key.name, |item| reserve(item, capacity)).await?;
        Ok(())
    }
}

/// Gives the item the status it should have, given its warehouse's capacity (None: no such warehouse).
fn reserve(item: &mut Item, capacity: Option<i64>) {
    let quantity = item.spec.quantity.max(0);
    let (reserved, ready, reason, message) = match capacity {
        None => (0, false, "WarehouseNotFound", format!("warehouse {} does not exist", item.spec.warehouse)),
        Some(c) if c < quantity => (c.max(0), false, "OverCapacity", format!("only {c} of {quantity} units fit")),
        Some(_) => (quantity, true, "Reserved", format!("{quantity} units reserved")),
    };
    let status = if ready { ConditionStatus::True } else { ConditionStatus::False };
    let ready = Condition::new("Ready", status, reason, message).observed_at(item.metadata.generation);
    item.status.reserved = reserved;
    set_status_condition(&mut item.status.conditions, ready);
}
