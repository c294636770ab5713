//! The pizza-apiserver: its command line and its resources, plugins and controllers, assembled by the framework.

pub use apiserver::app::Mode;
use apiserver::app::{App, RecommendedOptions, StartError, Started};
use apiserver::clap;
#[cfg(feature = "etcd")]
use apiserver_storage_etcd::EtcdOptions;
#[cfg(feature = "rocksdb")]
use apiserver_storage_rocks::RocksOptions;
use apiserver_storage_sql::SqlStorageOptions;

use crate::admission::{PIZZA_TOPPINGS, PizzaToppings};
use crate::cost::{self, COST_CONTROLLER};
use crate::kitchen;
use crate::oven::{self, OVEN_CONTROLLER};
use crate::strategy::{OvenStrategy, PizzaStrategy, ToppingStrategy};
use crate::{menu, menu_codec, oven_codec, pizza_codec, topping_codec};

/// Where objects are kept under in every backend (the Go pizza-apiserver's etcd prefix).
pub const STORAGE_PREFIX: &str = "/registry/pizza-apiserver.programming-kubernetes.info";

/// The command line: the framework's flags and those of the backends the server is built with (SQLite, the
/// default, and memory, which has none; RocksDB, Postgres and etcd with their cargo features).
#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "pizza-apiserver",
    version,
    about = "The pizza sample API server (restaurant.programming-kubernetes.info)"
)]
pub struct Options {
    #[command(flatten)]
    pub server: RecommendedOptions,

    #[command(flatten)]
    pub sql: SqlStorageOptions,

    #[cfg(feature = "rocksdb")]
    #[command(flatten)]
    pub rocks: RocksOptions,

    #[cfg(feature = "etcd")]
    #[command(flatten)]
    pub etcd: EtcdOptions,
}

impl Options {
    /// Delegated when anything names a core cluster or a CA to trust, or the server runs in a pod.
    pub fn mode(&self) -> Mode {
        self.server.mode()
    }
}

/// Opens the storage, assembles the API and binds the server; the caller runs it. Controllers: pizza-cost (a
/// pizza's status.cost from its toppings), oven (an oven line's status from its spec); on Postgres and etcd only
/// the replica holding the leader election lease runs them (`--leader-elect`).
pub async fn start(options: Options) -> Result<Started, StartError> {
    let app = App::new("pizza-apiserver", options.server)
        .version(apiserver::version_info!())
        .storage_prefix(STORAGE_PREFIX)
        .backend(options.sql);
    #[cfg(feature = "rocksdb")]
    let app = app.backend(options.rocks);
    #[cfg(not(feature = "rocksdb"))]
    let app = app.without_backend("rocksdb", "rocksdb");
    #[cfg(not(feature = "postgres"))]
    let app = app.without_backend("postgres", "postgres");
    #[cfg(feature = "etcd")]
    let app = app.backend(options.etcd);
    #[cfg(not(feature = "etcd"))]
    let app = app.without_backend("etcd", "etcd");
    let mut app = app.open().await?;
    let pizzas = app.store(pizza_codec(), PizzaStrategy)?;
    let toppings = app.store(topping_codec(), ToppingStrategy)?;
    let ovens = app.store(oven_codec(), OvenStrategy)?;
    app.provided(menu_codec(), menu::Menu(toppings.clone()));
    app.subresource(&pizzas, "bake", kitchen::Bake);
    app.subresource(&pizzas, "log", kitchen::Log);
    app.kind_check(PIZZA_TOPPINGS, true, PizzaToppings::build);
    app.controller(COST_CONTROLLER, move |shutdown| {
        cost::run(pizzas.clone(), toppings.clone(), shutdown)
    });
    app.controller(OVEN_CONTROLLER, move |shutdown| {
        oven::run(ovens.clone(), shutdown)
    });
    app.bind().await
}

#[cfg(test)]
mod tests {
    use apiserver::clap::{CommandFactory, Parser};

    use super::Options;

    /// Every backend's flags flatten into one command line without clashing names.
    #[test]
    fn command_line_is_consistent() {
        Options::command().debug_assert();
    }

    /// Every flag of the framework and of the three backends has a help text.
    #[test]
    fn every_flag_has_help() {
        let command = Options::command();
        let missing: Vec<_> = command
            .get_arguments()
            .chain(command.get_subcommands().flat_map(|c| c.get_arguments()))
            .filter(|arg| arg.get_help().is_none())
            .map(|arg| arg.get_id().to_string())
            .filter(|id| id != "help" && id != "version")
            .collect();
        assert_eq!(missing, Vec::<String>::new());
    }

    #[cfg(feature = "rocksdb")]
    #[test]
    fn backends_keep_their_own_flags() {
        let options = Options::try_parse_from([
            "pizza-apiserver",
            "--rocksdb-watch-buffer=8",
            "--storage-watch-buffer=16",
        ])
        .expect("both backends' buffers parse");
        assert_eq!(options.rocks.watch_buffer, 8);
        assert_eq!(options.sql.watch_buffer, 16);
        assert_eq!(options.server.storage.backend, None);
    }
}
