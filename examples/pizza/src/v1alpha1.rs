//! `v1alpha1`: toppings as a list of names, a repeated name meaning one more portion. The storage version.

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
    version = "v1alpha1",
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
    /// The names of the toppings; a name given twice means two portions.
    // Atomic: a strategic merge patch replaces the list whole and server-side apply owns it whole. Merging it as
    // a set would fold duplicates, which here are portions.
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(string, repeated, tag = "1")]
    #[versioned(
        to_hub = "fold_toppings",
        from_hub = "unfold_toppings",
        list_type = "atomic"
    )]
    pub toppings: Vec<String>,
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

/// A topping.
#[derive(
    Clone,
    PartialEq,
    Serialize,
    Deserialize,
    prost::Message,
    schemars::JsonSchema,
    apiserver::Versioned,
)]
#[versioned(hub = "restaurant::Topping", version = "v1alpha1")]
pub struct Topping {
    #[serde(default, deserialize_with = "apiserver::meta::null_as_default")]
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
    /// The reference server writes this as `Spec` (no JSON tag); we serve `spec` (see the README).
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

/// An empty pizza is a salami pizza with mozzarella and tomato.
fn default_pizza(pizza: &mut Pizza) {
    if pizza.spec.toppings.is_empty() {
        pizza.spec.toppings = ["salami", "mozzarella", "tomato"]
            .map(String::from)
            .to_vec();
    }
}

/// A repeated name is one more portion of its first occurrence.
fn fold_toppings(names: &[String]) -> Vec<restaurant::PizzaTopping> {
    // An index by name keeps this linear: a pizza may name a hundred thousand toppings.
    let mut index: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut toppings: Vec<restaurant::PizzaTopping> = Vec::new();
    for name in names {
        match index.get(name.as_str()) {
            Some(&i) => toppings[i].quantity = toppings[i].quantity.saturating_add(1),
            None => {
                index.insert(name, toppings.len());
                toppings.push(restaurant::PizzaTopping {
                    name: name.clone(),
                    quantity: 1,
                });
            }
        }
    }
    toppings
}

/// Each topping's name, once per portion.
fn unfold_toppings(toppings: &[restaurant::PizzaTopping]) -> Vec<String> {
    toppings
        .iter()
        .flat_map(|t| std::iter::repeat_n(t.name.clone(), t.quantity.max(0) as usize))
        .collect()
}
