//! How the generic store treats pizzas, toppings and ovens.

use apiserver::registry::Strategy;
use apiserver::validation::{ErrorList, FieldError, Path};

use crate::restaurant::{Oven, Pizza, Topping};
use crate::validation::validate_pizza;

/// Pizzas are validated on create and, unlike the reference server (which validates only creates), on update
/// too (the strategy's default `validate_update`): an update cannot make a pizza that a create would refuse.
#[derive(Clone, Copy, Debug, Default)]
pub struct PizzaStrategy;

impl Strategy<Pizza> for PizzaStrategy {
    fn validate(&self, pizza: &Pizza) -> ErrorList {
        validate_pizza(pizza)
    }
}

/// Toppings have no rules beyond object metadata, as in the reference server.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToppingStrategy;

impl Strategy<Topping> for ToppingStrategy {}

/// Ovens: a desired count that is not negative.
#[derive(Clone, Copy, Debug, Default)]
pub struct OvenStrategy;

impl Strategy<Oven> for OvenStrategy {
    fn validate(&self, oven: &Oven) -> ErrorList {
        validate_oven(oven)
    }
}

fn validate_oven(oven: &Oven) -> ErrorList {
    let mut errors = ErrorList::default();
    if oven.spec.replicas < 0 {
        errors.push(FieldError::invalid(
            Path::new("spec").child("replicas"),
            &oven.spec.replicas,
            "must be greater than or equal to 0",
        ));
    }
    errors
}
