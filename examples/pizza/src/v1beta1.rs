//! `v1beta1`: toppings with a name and a quantity. The preferred version.

use apiserver::meta::ObjectMeta;

use crate::restaurant;

/// A pizza.
#[apiserver::served(hub = "restaurant::Pizza", version = "v1beta1", default = "default_pizza")]
pub struct Pizza {
    pub metadata: ObjectMeta,
    pub spec: PizzaSpec,
    pub status: PizzaStatus,
}

#[apiserver::served(hub = "restaurant::PizzaSpec")]
pub struct PizzaSpec {
    /// The toppings; order does not matter. A strategic merge patch (`kubectl patch`, `kubectl apply`) merges
    /// toppings by name: a patch naming one topping changes only that one. Server-side apply tracks each topping
    /// by name: managers may own different toppings of one pizza.
    /// At most 10 distinct toppings (a CEL rule, checked whatever version a client writes).
    #[versioned(
        patch_strategy = "merge",
        patch_merge_key = "name",
        list_type = "map",
        list_map_keys = "name",
        validation(
            rule = "self.size() <= 10",
            message_expression = "'a pizza may have at most 10 distinct toppings, this one has ' + string(self.size())"
        )
    )]
    pub toppings: Vec<PizzaTopping>,
}

#[apiserver::served(hub = "restaurant::PizzaTopping")]
pub struct PizzaTopping {
    /// The name of a Topping object.
    pub name: String,
    /// How often the topping is put onto the pizza; 1 when unset or 0.
    pub quantity: Option<i32>,
}

#[apiserver::served(hub = "restaurant::PizzaStatus")]
pub struct PizzaStatus {
    /// The cost of the whole pizza including all toppings.
    #[served(omitempty)]
    pub cost: f64,
}

/// A topping (not served in v1beta1 by the reference server; served here).
#[apiserver::served(hub = "restaurant::Topping", version = "v1beta1")]
pub struct Topping {
    pub metadata: ObjectMeta,
    pub spec: ToppingSpec,
}

#[apiserver::served(hub = "restaurant::ToppingSpec")]
pub struct ToppingSpec {
    /// The cost of one portion; an update may at most double it (a CEL transition rule).
    #[versioned(validation(
        rule = "oldSelf == 0.0 || self <= oldSelf * 2.0",
        message = "a topping's cost may not rise by more than 100% in one update"
    ))]
    pub cost: f64,
}

/// An empty pizza is one portion each of salami, mozzarella and tomato; a topping without quantity is one portion.
fn default_pizza(pizza: &mut Pizza) {
    if pizza.spec.toppings.is_empty() {
        pizza.spec.toppings = ["salami", "mozzarella", "tomato"]
            .map(|name| PizzaTopping { name: name.to_string(), quantity: Some(1) })
            .to_vec();
    }
    for topping in &mut pizza.spec.toppings {
        if topping.quantity.unwrap_or(0) == 0 {
            topping.quantity = Some(1);
        }
    }
}

/// A line of ovens: how many should burn (`kubectl scale oven main --replicas=3`) and how many do. The sample's
/// type with a `scale` subresource; the oven controller lights what `spec.replicas` asks for. Only in v1beta1, its
/// own hub.
// Two printer columns of one type repeat `type_ = "integer"`, which clippy takes for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[apiserver::served(hub = "Self", version = "v1beta1")]
#[derive(apiserver::Hub)]
#[resource(
    group = "restaurant.programming-kubernetes.info",
    kind = "Oven",
    namespaced,
    status,
    scale(spec_replicas = ".spec.replicas", status_replicas = ".status.replicas", label_selector = ".status.selector"),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Burning", type_ = "integer", json_path = ".status.replicas"),
    versions(Self),
    storage_version(Self)
)]
pub struct Oven {
    pub metadata: ObjectMeta,
    pub spec: OvenSpec,
    pub status: OvenStatus,
}

#[apiserver::served(hub = "Self")]
pub struct OvenSpec {
    /// How many ovens should burn (what `kubectl scale` sets).
    pub replicas: i32,
}

#[apiserver::served(hub = "Self")]
pub struct OvenStatus {
    /// How many ovens burn.
    pub replicas: i32,
    /// The label selector of the ovens, for autoscalers.
    #[served(omitempty)]
    pub selector: String,
}

/// An item of the menu: one per topping with its price, computed from the toppings when asked, never stored (a
/// resource the server's code provides, as metrics-server provides its metrics). Read-only (`get`, `list` and
/// `watch`), only in v1beta1, its own hub.
#[apiserver::served(hub = "Self", version = "v1beta1")]
#[derive(apiserver::Hub)]
#[resource(
    group = "restaurant.programming-kubernetes.info",
    kind = "MenuItem",
    printcolumn(name = "Price", type_ = "number", json_path = ".price"),
    versions(Self)
)]
pub struct MenuItem {
    pub metadata: ObjectMeta,
    /// What one portion costs.
    pub price: f64,
}
