//! Validation of pizzas (with the reference server's messages) and ovens, on the hub. Pizzas are validated on
//! create and, unlike the reference server (which validates only creates), on update too: an update cannot make a
//! pizza that a create would refuse. Toppings have no rules beyond object metadata, as in the reference server.

use std::collections::HashSet;

use apiserver::validation::{ErrorList, FieldError, Path};

use crate::restaurant::{Oven, Pizza};

/// The most portions of one topping: v1alpha1 writes a name once per portion, so an unbounded quantity would let
/// one object make every v1alpha1 read of it arbitrarily large (the reference server has no bound).
pub const MAX_QUANTITY: i32 = 1000;

/// Every topping needs a name, a positive quantity (at most [`MAX_QUANTITY`]) and a name not used before.
pub fn validate_pizza(pizza: &Pizza) -> ErrorList {
    let mut errors = ErrorList::new();
    let mut seen = HashSet::new();
    let toppings = Path::new("spec").child("toppings");
    for (i, topping) in pizza.spec.toppings.iter().enumerate() {
        let path = toppings.index(i);
        if topping.quantity <= 0 {
            errors.push(FieldError::invalid(path.child("quantity"), &topping.quantity, "cannot be negative or zero"));
        } else if topping.quantity > MAX_QUANTITY {
            let detail = format!("must be less than or equal to {MAX_QUANTITY}");
            errors.push(FieldError::invalid(path.child("quantity"), &topping.quantity, &detail));
        }
        if topping.name.is_empty() {
            errors.push(FieldError::invalid(path.child("name"), &topping.name, "cannot be empty"));
        } else if !seen.insert(topping.name.as_str()) {
            errors.push(FieldError::invalid(path.child("name"), &topping.name, "must be unique"));
        }
    }
    errors
}

/// An oven line's desired count is not negative.
pub fn validate_oven(oven: &Oven) -> ErrorList {
    let mut errors = ErrorList::default();
    if oven.spec.replicas < 0 {
        let replicas = Path::new("spec").child("replicas");
        errors.push(FieldError::invalid(replicas, &oven.spec.replicas, "must be greater than or equal to 0"));
    }
    errors
}
