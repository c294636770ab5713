//! `v1alpha1`: toppings as a list of names, a repeated name meaning one more portion. The storage version.

use apiserver::meta::ObjectMeta;

use crate::restaurant;

/// A pizza.
#[apiserver::served(hub = "restaurant::Pizza", version = "v1alpha1", default = "default_pizza")]
pub struct Pizza {
    pub metadata: ObjectMeta,
    pub spec: PizzaSpec,
    // The same status as v1beta1's.
    pub status: crate::v1beta1::PizzaStatus,
}

#[apiserver::served(hub = "restaurant::PizzaSpec")]
pub struct PizzaSpec {
    /// The names of the toppings; a name given twice means two portions.
    // Atomic: a strategic merge patch replaces the list whole and server-side apply owns it whole. Merging it as
    // a set would fold duplicates, which here are portions.
    #[versioned(to_hub = "fold_toppings", from_hub = "unfold_toppings", list_type = "atomic")]
    pub toppings: Vec<String>,
}

/// A topping.
#[apiserver::served(hub = "restaurant::Topping", version = "v1alpha1")]
pub struct Topping {
    pub metadata: ObjectMeta,
    /// The reference server writes this as `Spec` (no JSON tag); we serve `spec` (see docs/divergences.md).
    pub spec: ToppingSpec,
}

#[apiserver::served(hub = "restaurant::ToppingSpec")]
pub struct ToppingSpec {
    /// The cost of one portion.
    pub cost: f64,
}

/// An empty pizza is a salami pizza with mozzarella and tomato.
fn default_pizza(pizza: &mut Pizza) {
    if pizza.spec.toppings.is_empty() {
        pizza.spec.toppings = ["salami", "mozzarella", "tomato"].map(String::from).to_vec();
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
                toppings.push(restaurant::PizzaTopping { name: name.clone(), quantity: 1 });
            }
        }
    }
    toppings
}

/// Each topping's name, once per portion.
fn unfold_toppings(toppings: &[restaurant::PizzaTopping]) -> Vec<String> {
    toppings.iter().flat_map(|t| std::iter::repeat_n(t.name.clone(), t.quantity.max(0) as usize)).collect()
}
