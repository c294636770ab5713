//! The inventory server of the newcomer trial (`../shared/reference/newcomer-trial`), on the adoption API:
//! warehouses and the items they keep, an item's quantity a number in v1 and text ("12 units") in v1beta1, the
//! storage version. A v1beta1 quantity that is not a number of units is a 422 naming it; a controller reserves
//! each item's units and says so in a `Ready` condition.

pub mod controller;
pub mod types;

use apiserver::admission::{Attributes, KindCheck, Lister, Operation};
use apiserver::app::{App, StartError, Started};
use apiserver::async_trait;
use apiserver::registry::{ApiError, DefaultStrategy};
use apiserver_storage_sql::SqlStorageOptions;

pub use crate::types::{Item, Warehouse};

/// The framework's flags and SQLite's (memory is always there).
pub type Options = apiserver::app::Options<SqlStorageOptions>;

pub async fn start(options: Options) -> Result<Started, StartError> {
    let mut app = App::new("inventory-apiserver", options.server)
        .version(apiserver::version_info!())
        .backend(options.backend)
        .open()
        .await?;
    // Items and warehouses are validated by their CEL rules (`types::v1`).
    let warehouses = app.store(Warehouse::codec(), DefaultStrategy)?;
    let items = app.store(Item::codec(), DefaultStrategy)?;
    app.kind_check(WAREHOUSE_EXISTS, true, |init| Ok(WarehouseExists(init.listers.get()?)));
    app.controller(controller::RESERVATION_CONTROLLER, move |shutdown| {
        controller::run(items.clone(), warehouses.clone(), shutdown)
    });
    app.bind().await
}

/// The plugin's name in `--enable-admission-plugins` / `--disable-admission-plugins`.
pub const WAREHOUSE_EXISTS: &str = "WarehouseExists";

/// Refuses to create items naming a warehouse that does not exist (an item's warehouse cannot change after).
pub struct WarehouseExists(pub Lister<Warehouse>);

#[async_trait]
impl KindCheck<Item> for WarehouseExists {
    fn operations(&self) -> &'static [Operation] {
        &[Operation::Create]
    }

    async fn ready(&self) -> bool {
        self.0.has_synced().await
    }

    async fn check(&self, attributes: &Attributes, item: &Item, _: Option<&Item>) -> Result<(), ApiError> {
        match self.0.get(None, &item.spec.warehouse).await? {
            Some(_) => Ok(()),
            None => Err(attributes.forbidden(format!("warehouse {:?} does not exist", item.spec.warehouse))),
        }
    }
}
