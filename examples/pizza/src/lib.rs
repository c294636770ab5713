//! The pizza sample API server: types, defaults, conversion and validation of
//! `restaurant.programming-kubernetes.info`, as in programming-kubernetes/pizza-apiserver.
//!
//! `restaurant` holds the hub types (what a pizza means); `v1alpha1` and `v1beta1` are the served versions;
//! `validation` and `admission` are the per-type rules; `server` assembles the binary's server.

pub mod admission;
pub mod cost;
pub mod kitchen;
pub mod menu;
pub mod oven;
pub mod restaurant;
pub mod server;
pub mod v1alpha1;
pub mod v1beta1;
pub mod validation;

/// The API group.
pub const GROUP: &str = "restaurant.programming-kubernetes.info";
