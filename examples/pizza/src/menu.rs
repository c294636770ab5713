//! The menu, provided from the toppings on every read rather than stored, and watched through the toppings' watch.

use apiserver::async_trait;
use apiserver::endpoints::Provider;
use apiserver::futures::StreamExt;
use apiserver::meta::ObjectMeta;
use apiserver::registry::{ApiError, ListRequest, ObjectList, Store, WatchChanges};

use crate::restaurant::{MenuItem, Topping};

/// Menu items from the toppings' store.
pub struct Menu(pub Store<Topping>);

fn item(topping: Topping) -> MenuItem {
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

#[async_trait]
impl Provider<MenuItem> for Menu {
    async fn get(&self, _: Option<&str>, name: &str) -> Result<Option<MenuItem>, ApiError> {
        match self.0.get(None, name, None).await {
            Ok(topping) => Ok(Some(item(topping))),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn list(&self, _: Option<&str>) -> Result<ObjectList<MenuItem>, ApiError> {
        let toppings = self.0.list(None, &ListRequest::default()).await?;
        Ok(ObjectList {
            metadata: toppings.metadata,
            items: toppings.items.into_iter().map(item).collect(),
        })
    }

    fn watches(&self) -> bool {
        true
    }

    /// The toppings' changes as menu changes, from the resourceVersions the list gave.
    async fn watch(
        &self,
        _: Option<&str>,
        request: &ListRequest,
    ) -> Result<WatchChanges<MenuItem>, ApiError> {
        let changes = self.0.watch_changes(None, request).await?;
        Ok(changes.map(|change| change.map(item)).boxed())
    }
}
