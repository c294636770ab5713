//! The hub (internal) types: what pizzas and toppings mean, independent of any wire version.

use apiserver::meta::ObjectMeta;

/// A pizza: toppings, each with how often it is put on. Its status (the cost) is written through the `status`
/// subresource only.
#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(
    group = "restaurant.programming-kubernetes.info",
    kind = "Pizza",
    namespaced,
    status,
    printcolumn(name = "Cost", type_ = "number", json_path = ".status.cost"),
    // Served in v1beta1 (preferred) and v1alpha1, and stored as v1alpha1, as the reference server does.
    versions(crate::v1beta1::Pizza, crate::v1alpha1::Pizza),
    storage_version(crate::v1alpha1::Pizza)
)]
pub struct Pizza {
    pub metadata: ObjectMeta,
    pub spec: PizzaSpec,
    pub status: PizzaStatus,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PizzaSpec {
    /// Toppings in the order first named; names are unique once validated.
    pub toppings: Vec<PizzaTopping>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PizzaTopping {
    /// The name of a Topping object.
    pub name: String,
    /// How often the topping is put onto the pizza.
    pub quantity: i32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PizzaStatus {
    /// The cost of the whole pizza including all toppings.
    pub cost: f64,
}

/// A topping, cluster-wide, with what it costs.
#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(
    group = "restaurant.programming-kubernetes.info",
    kind = "Topping",
    printcolumn(name = "Cost", type_ = "number", json_path = ".spec.cost"),
    // Served in v1beta1 (beyond the reference) and v1alpha1, and stored as v1alpha1.
    versions(crate::v1beta1::Topping, crate::v1alpha1::Topping),
    storage_version(crate::v1alpha1::Topping)
)]
pub struct Topping {
    pub metadata: ObjectMeta,
    pub spec: ToppingSpec,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToppingSpec {
    /// The cost of one portion.
    pub cost: f64,
}

/// Ovens and the menu are served in one version, whose types are their own hubs.
pub use crate::v1beta1::{MenuItem, Oven, OvenSpec, OvenStatus};
