//! The pizza sample API server: types, defaults, conversion and validation of
//! `restaurant.programming-kubernetes.info`, as in programming-kubernetes/pizza-apiserver.
//!
//! `restaurant` holds the hub types (what a pizza means); `v1alpha1` and `v1beta1` are the served versions;
//! `strategy` and `admission` are the per-type rules; `server` assembles the binary's server.

pub mod admission;
pub mod cost;
pub mod kitchen;
pub mod menu;
pub mod oven;
pub mod restaurant;
pub mod server;
pub mod strategy;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

/// The API group.
pub const GROUP: &str = "restaurant.programming-kubernetes.info";

use apiserver::runtime::ResourceCodec;

/// Pizzas are served in v1beta1 (preferred) and v1alpha1, and stored as v1alpha1, as the reference server does.
pub fn pizza_codec() -> ResourceCodec<restaurant::Pizza> {
    ResourceCodec::new()
        .version::<v1beta1::Pizza>()
        .version::<v1alpha1::Pizza>()
        .storage_version::<v1alpha1::Pizza>()
}

/// Toppings are served in v1beta1 (beyond the reference) and v1alpha1, and stored as v1alpha1.
pub fn topping_codec() -> ResourceCodec<restaurant::Topping> {
    ResourceCodec::new()
        .version::<v1beta1::Topping>()
        .version::<v1alpha1::Topping>()
        .storage_version::<v1alpha1::Topping>()
}

/// The menu is served in v1beta1 (provided, not stored).
pub fn menu_codec() -> ResourceCodec<restaurant::MenuItem> {
    ResourceCodec::new().version::<v1beta1::MenuItem>()
}

/// Ovens are served and stored in v1beta1.
pub fn oven_codec() -> ResourceCodec<restaurant::Oven> {
    ResourceCodec::new()
        .version::<v1beta1::Oven>()
        .storage_version::<v1beta1::Oven>()
}
