//! The `PizzaToppings` admission plugin: a pizza may only name toppings that exist.

use apiserver::admission::{Attributes, KindCheck, Lister};
use apiserver::async_trait;
use apiserver::registry::ApiError;

use crate::restaurant::{Pizza, Topping};

/// The plugin's name in `--enable-admission-plugins` / `--disable-admission-plugins`.
pub const PIZZA_TOPPINGS: &str = "PizzaToppings";

/// The audit annotation of a refusal: the topping that does not exist.
pub const UNKNOWN_TOPPING_ANNOTATION: &str =
    "pizzatoppings.admission.restaurant.programming-kubernetes.info/unknown-topping";

/// Refuses pizzas (on create and update, not status updates) naming a topping that does not exist, reading toppings
/// from the server's own watch cache as the reference server reads them from its informer.
pub struct PizzaToppings(pub Lister<Topping>);

#[async_trait]
impl KindCheck<Pizza> for PizzaToppings {
    async fn ready(&self) -> bool {
        self.0.has_synced().await
    }

    async fn check(&self, attributes: &Attributes, pizza: &Pizza, _: Option<&Pizza>) -> Result<(), ApiError> {
        for topping in &pizza.spec.toppings {
            // As the reference plugin, only "not found" refuses; other lister errors let the pizza through.
            if let Ok(None) = self.0.get(None, &topping.name).await {
                // Auditors see which topping a refused pizza named.
                let _ = attributes.annotate(UNKNOWN_TOPPING_ANNOTATION, &topping.name);
                return Err(attributes.forbidden(format!("unknown topping: {}", topping.name)));
            }
        }
        Ok(())
    }
}
