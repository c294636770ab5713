//! The pizza-apiserver: its command line and its resources, plugins and controllers, assembled by the framework.

pub use apiserver::app::Mode;
use apiserver::app::{App, StartError, Started};
use apiserver::endpoints::View;
use apiserver::registry::DefaultStrategy;
use apiserver_backends::BackendOptions;

use crate::admission::{PIZZA_TOPPINGS, PizzaToppings};
use crate::cost::{self, COST_CONTROLLER};
use crate::kitchen;
use crate::menu;
use crate::oven::{self, OVEN_CONTROLLER};
use crate::restaurant::{MenuItem, Oven, Pizza, Topping};
use crate::validation::{validate_oven, validate_pizza};

/// Where objects are kept under in every backend (the Go pizza-apiserver's etcd prefix).
pub const STORAGE_PREFIX: &str = "/registry/pizza-apiserver.programming-kubernetes.info";

/// The command line: the framework's flags and those of the backends the server is built with (SQLite, the
/// default, and memory, which has none; RocksDB, Postgres and etcd with their cargo features).
pub type Options = apiserver::app::Options<BackendOptions>;

/// Opens the storage, assembles the API and binds the server; the caller runs it. Controllers: pizza-cost (a
/// pizza's status.cost from its toppings), oven (an oven line's status from its spec); on Postgres and etcd only
/// the replica holding the leader election lease runs them (`--leader-elect`).
pub async fn start(options: Options) -> Result<Started, StartError> {
    let mut app = App::new("pizza-apiserver", options.server)
        .version(apiserver::version_info!())
        .storage_prefix(STORAGE_PREFIX)
        .backend(options.backend)
        .open()
        .await?;
    let pizzas = app.store(Pizza::codec(), validate_pizza)?;
    let toppings = app.store(Topping::codec(), DefaultStrategy)?;
    let ovens = app.store(Oven::codec(), validate_oven)?;
    app.provided(MenuItem::codec(), View::new(toppings.clone(), menu::item));
    app.subresource(&pizzas, "bake", kitchen::Bake);
    app.subresource(&pizzas, "log", kitchen::Log);
    app.kind_check(PIZZA_TOPPINGS, true, |init| Ok(PizzaToppings(init.listers.get()?)));
    app.controller(COST_CONTROLLER, move |shutdown| cost::run(pizzas.clone(), toppings.clone(), shutdown));
    app.controller(OVEN_CONTROLLER, move |shutdown| oven::run(ovens.clone(), shutdown));
    app.bind().await
}
