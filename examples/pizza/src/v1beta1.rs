//! `v1beta1`: toppings with a name and a quantity. The preferred version.

use apiserver::meta::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::restaurant;

/// A pizza.
#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(
    hub = "restaurant::Pizza",
    version = "v1beta1",
    default = "default_pizza"
)]
pub struct Pizza {
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "2")]
    pub spec: PizzaSpec,
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "3")]
    pub status: PizzaStatus,
}

#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::PizzaSpec")]
pub struct PizzaSpec {
    /// The toppings; order does not matter. A strategic merge patch (`kubectl patch`, `kubectl apply`) merges
    /// toppings by name: a patch naming one topping changes only that one. Server-side apply tracks each topping
    /// by name: managers may own different toppings of one pizza.
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, repeated, tag = "1")]
    #[versioned(
        patch_strategy = "merge",
        patch_merge_key = "name",
        list_type = "map",
        list_map_keys = "name"
    )]
    pub toppings: Vec<PizzaTopping>,
}

#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::PizzaTopping")]
pub struct PizzaTopping {
    /// The name of a Topping object.
    #[serde(default)]
    #[prost(string, tag = "1")]
    pub name: String,
    /// How often the topping is put onto the pizza; 1 when unset or 0.
    #[serde(default)]
    #[prost(int32, optional, tag = "2")]
    pub quantity: Option<i32>,
}

#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::PizzaStatus")]
pub struct PizzaStatus {
    /// The cost of the whole pizza including all toppings.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[prost(double, tag = "1")]
    pub cost: f64,
}

/// A topping (not served in v1beta1 by the reference server; served here).
#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::Topping", version = "v1beta1")]
pub struct Topping {
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "2")]
    pub spec: ToppingSpec,
}

#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::ToppingSpec")]
pub struct ToppingSpec {
    /// The cost of one portion.
    #[serde(default)]
    #[prost(double, tag = "1")]
    pub cost: f64,
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// An empty pizza is one portion each of salami, mozzarella and tomato; a topping without quantity is one portion.
fn default_pizza(pizza: &mut Pizza) {
    if pizza.spec.toppings.is_empty() {
        pizza.spec.toppings = ["salami", "mozzarella", "tomato"]
            .map(|name| PizzaTopping {
                name: name.to_string(),
                quantity: Some(1),
            })
            .to_vec();
    }
    for topping in &mut pizza.spec.toppings {
        if topping.quantity.unwrap_or(0) == 0 {
            topping.quantity = Some(1);
        }
    }
}

/// A line of ovens (only in v1beta1).
#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::Oven", version = "v1beta1")]
pub struct Oven {
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "2")]
    pub spec: OvenSpec,
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "3")]
    pub status: OvenStatus,
}

#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::OvenSpec")]
pub struct OvenSpec {
    /// How many ovens should burn (what `kubectl scale` sets).
    #[serde(default)]
    #[prost(int32, tag = "1")]
    pub replicas: i32,
}

#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::OvenStatus")]
pub struct OvenStatus {
    /// How many ovens burn.
    #[serde(default)]
    #[prost(int32, tag = "1")]
    pub replicas: i32,
    /// The label selector of the ovens, for autoscalers.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[prost(string, tag = "2")]
    pub selector: String,
}
