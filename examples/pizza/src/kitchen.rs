//! Subresources answered by the kitchen rather than by storage: `POST pizzas/{name}/bake` answers with a
//! `BakeReceipt` (a kind of its own), `GET pizzas/{name}/log` streams what the kitchen did, line by line, as
//! `pods/log` streams a container's output.

use apiserver::async_trait;
use apiserver::endpoints::{Answer, Subresource, SubresourceRequest};
use apiserver::registry::ApiError;
use apiserver::serde_json::json;

use crate::GROUP;
use crate::restaurant::Pizza;

/// `pizzas/bake`: bakes a pizza and hands over the receipt.
pub struct Bake;

#[async_trait]
impl Subresource<Pizza> for Bake {
    fn verbs(&self) -> &'static [&'static str] {
        &["create"]
    }

    fn response_kind(&self) -> Option<(&'static str, &'static str, &'static str)> {
        Some((GROUP, "v1beta1", "BakeReceipt"))
    }

    async fn serve(&self, request: SubresourceRequest<Pizza>) -> Result<Answer, ApiError> {
        let namespace = request.namespace.as_deref();
        let pizza = request.store.get(namespace, &request.name, None).await?;
        let portions: i32 = pizza.spec.toppings.iter().map(|t| t.quantity).sum();
        Ok(Answer::Object(json!({
            "apiVersion": format!("{GROUP}/v1beta1"),
            "kind": "BakeReceipt",
            "pizza": pizza.metadata.name,
            "portions": portions,
            "cost": pizza.status.cost,
            "bakedBy": request.user.name,
        })))
    }
}

/// `pizzas/log`: one line per step of making the pizza.
pub struct Log;

#[async_trait]
impl Subresource<Pizza> for Log {
    fn verbs(&self) -> &'static [&'static str] {
        &["get"]
    }

    async fn serve(&self, request: SubresourceRequest<Pizza>) -> Result<Answer, ApiError> {
        let namespace = request.namespace.as_deref();
        let pizza = request.store.get(namespace, &request.name, None).await?;
        let mut lines = vec![format!("{}: dough rolled\n", pizza.metadata.name)];
        lines.extend(
            pizza.spec.toppings.iter().map(|t| format!("{}: {} x {}\n", pizza.metadata.name, t.quantity, t.name)),
        );
        lines.push(format!("{}: into the oven\n", pizza.metadata.name));
        Ok(Answer::Text(Box::pin(apiserver::futures::stream::iter(lines))))
    }
}
