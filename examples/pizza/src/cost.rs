//! The cost controller: a pizza's `status.cost` is the sum over its toppings of quantity × the topping's cost. An
//! in-process controller keeps it current, through the status subresource, when a pizza is written or a
//! topping's cost changes; users cannot set it (the main resource ignores status).

use apiserver::controller::{Controller, ObjectKey, Reconciler};
use apiserver::registry::{ApiError, Store};
use apiserver::server::ShutdownSignal;

use crate::restaurant::{Pizza, Topping};

/// The controller's name in `--controllers`, in logs and in its post-start hook.
pub const COST_CONTROLLER: &str = "pizza-cost";

/// Runs the controller until the server shuts down.
pub async fn run(pizzas: Store<Pizza>, toppings: Store<Topping>, shutdown: ShutdownSignal) {
    let names = |pizza: &Pizza, topping: &Topping| pizza.spec.toppings.iter().any(|t| t.name == topping.metadata.name);
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
        let Some(pizza) = self.pizzas.find(namespace, &key.name).await? else {
            return Ok(()); // deleted since: nothing to do
        };
        let mut cost = 0.0;
        for topping in &pizza.spec.toppings {
            // A topping deleted since costs nothing until it exists again (its creation requeues).
            if let Some(found) = self.toppings.find(None, &topping.name).await? {
                cost += found.spec.cost * f64::from(topping.quantity);
            }
        }
        if pizza.status.cost == cost {
            return Ok(());
        }
        // The cost of these toppings, on the pizza if it still has them (a pizza changed since is reconciled again).
        let set_cost = |current: &mut Pizza| {
            if current.spec == pizza.spec {
                current.status.cost = cost;
            }
        };
        self.pizzas.status().modify(namespace, &key.name, set_cost).await?;
        Ok(())
    }
}
