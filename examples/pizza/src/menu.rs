//! The menu: one item per topping with its price, provided from the toppings on every read rather than stored, and
//! watched through the toppings' watch.

use apiserver::meta::ObjectMeta;

use crate::restaurant::{MenuItem, Topping};

/// A topping's menu item: its name, identity, resourceVersion and labels, and its cost as the price.
pub fn item(topping: Topping) -> MenuItem {
    MenuItem {
        metadata: ObjectMeta {
            name: topping.metadata.name,
            uid: topping.metadata.uid,
            resource_version: topping.metadata.resource_version,
            creation_timestamp: topping.metadata.creation_timestamp,
            labels: topping.metadata.labels,
            ..ObjectMeta::default()
        },
        price: topping.spec.cost,
    }
}
