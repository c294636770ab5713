//! How the generic store treats pizzas and toppings.

use apiserver::registry::Strategy;
use apiserver::validation::ErrorList;

use crate::restaurant::{Pizza, Topping};
use crate::validation::validate_pizza;

/// Pizzas are validated on create and, unlike the reference server (which validates only creates), on update
/// too: an update cannot make a pizza that a create would refuse.
#[derive(Clone, Copy, Debug, Default)]
pub struct PizzaStrategy;

impl Strategy<Pizza> for PizzaStrategy {
    fn validate(&self, pizza: &Pizza) -> ErrorList {
        validate_pizza(pizza)
    }

    fn validate_update(&self, new: &Pizza, _old: &Pizza) -> ErrorList {
        validate_pizza(new)
    }
}

/// Toppings have no rules beyond object metadata, as in the reference server.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToppingStrategy;

impl Strategy<Topping> for ToppingStrategy {}
