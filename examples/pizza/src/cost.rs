//! The cost controller: a pizza's `status.cost` is the sum over its toppings of quantity × the topping's cost. An
//! in-process controller keeps it current, through the status subresource, when a pizza is written or a
//! topping's cost changes; users cannot set it (the main resource ignores status).

use apiserver::async_trait;
use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::registry::{ApiError, Store, UpdatedObject, WriteOptions};
use apiserver::server::ShutdownSignal;

use crate::restaurant::{Pizza, Topping};

/// The controller's name in `--controllers`, in logs and in its post-start hook.
pub const COST_CONTROLLER: &str = "pizza-cost";

/// Runs the controller until the server shuts down.
pub async fn run(pizzas: Store<Pizza>, toppings: Store<Topping>, shutdown: ShutdownSignal) {
    let names = |pizza: &Pizza, topping: &Topping| {
        pizza
            .spec
            .toppings
            .iter()
            .any(|t| t.name == topping.metadata.name)
    };
    Controller::new(COST_CONTROLLER)
        .owns(pizzas.clone())
        .watches_for(toppings.clone(), pizzas.clone(), names)
        .run(CostReconciler { pizzas, toppings }, shutdown)
        .await;
}

struct CostReconciler {
    pizzas: Store<Pizza>,
    toppings: Store<Topping>,
}

impl Reconciler for CostReconciler {
    async fn reconcile(&self, key: &ObjectKey) -> Result<(), ApiError> {
        let namespace = key.namespace.as_deref();
        let pizza = match self.pizzas.get(namespace, &key.name, None).await {
            Ok(pizza) => pizza,
            Err(e) if e.is_not_found() => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut cost = 0.0;
        for topping in &pizza.spec.toppings {
            match self.toppings.get(None, &topping.name, None).await {
                Ok(found) => cost += found.spec.cost * f64::from(topping.quantity),
                // A topping deleted since: it costs nothing until it exists again (its creation requeues).
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e),
            }
        }
        if pizza.status.cost == cost {
            return Ok(());
        }
        let written = self
            .pizzas
            .status()
            .update(
                namespace,
                &key.name,
                &SetCost { pizza, cost },
                WriteOptions::default(),
            )
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// The status update: the cost, on the pizza as read (a pizza changed since conflicts and is reconciled again).
struct SetCost {
    pizza: Pizza,
    cost: f64,
}

#[async_trait]
impl UpdatedObject<Pizza> for SetCost {
    async fn updated(&self, _current: Option<&Pizza>) -> Result<Pizza, ApiError> {
        let mut pizza = self.pizza.clone();
        pizza.status.cost = self.cost;
        Ok(pizza)
    }
}
