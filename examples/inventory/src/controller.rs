//! The `item-reservation` controller: reserves each item's units in its warehouse (at most the warehouse's
//! capacity) and says so in `status.reserved` and a `Ready` condition.

use apiserver::async_trait;
use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::meta::{Condition, ConditionStatus, set_status_condition};
use apiserver::registry::{ApiError, Store, UpdatedObject, WriteOptions};
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
        let item = match self.items.get(namespace, &key.name, None).await {
            Err(e) if e.is_not_found() => return Ok(()),
            item => item?,
        };
        let capacity = match self.warehouses.get(None, &item.spec.warehouse, None).await {
            Err(e) if e.is_not_found() => None,
            warehouse => Some(warehouse?.spec.capacity),
        };
        if reserve(item.clone(), capacity) == item {
            return Ok(());
        }
        let update = Reserve { capacity };
        match self.items.status().update(namespace, &key.name, &update, WriteOptions::default()).await {
            Err(e) if e.is_not_found() => Ok(()),
            written => written.map(drop),
        }
    }
}

/// The item with the status it should have, given its warehouse's capacity (None: no such warehouse).
fn reserve(mut item: Item, capacity: Option<i64>) -> Item {
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
    item
}

/// The status update, computed on the item as it is when written (it may run again after a conflict).
struct Reserve {
    capacity: Option<i64>,
}

#[async_trait]
impl UpdatedObject<Item> for Reserve {
    async fn updated(&self, current: Option<&Item>) -> Result<Item, ApiError> {
        Ok(reserve(current.cloned().unwrap_or_default(), self.capacity))
    }
}
