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
    printcolumn(name = "Cost", type_ = "number", json_path = ".status.cost")
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
    printcolumn(name = "Cost", type_ = "number", json_path = ".spec.cost")
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

/// A line of ovens: how many should burn (`kubectl scale oven main --replicas=3`) and how many do. The sample's
/// type with a `scale` subresource; the oven controller lights what `spec.replicas` asks for.
// Two printer columns of one type repeat `type_ = "integer"`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(
    group = "restaurant.programming-kubernetes.info",
    kind = "Oven",
    namespaced,
    status,
    scale(
        spec_replicas = ".spec.replicas",
        status_replicas = ".status.replicas",
        label_selector = ".status.selector"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Burning", type_ = "integer", json_path = ".status.replicas")
)]
pub struct Oven {
    pub metadata: ObjectMeta,
    pub spec: OvenSpec,
    pub status: OvenStatus,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct OvenSpec {
    /// How many ovens should burn.
    pub replicas: i32,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct OvenStatus {
    /// How many ovens burn.
    pub replicas: i32,
    /// The label selector of the ovens, for autoscalers.
    pub selector: String,
}

/// The menu: one item per topping with its price, computed from the toppings when asked, never stored (a resource
/// the server's code provides, as metrics-server provides its metrics).
#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(
    group = "restaurant.programming-kubernetes.info",
    kind = "MenuItem",
    printcolumn(name = "Price", type_ = "number", json_path = ".price")
)]
pub struct MenuItem {
    pub metadata: ObjectMeta,
    /// What one portion costs.
    pub price: f64,
}
