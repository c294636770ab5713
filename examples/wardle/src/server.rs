//! The wardle-apiserver: its command line and its resources and plugin, assembled by the framework.

use apiserver::app::{App, StartError, Started};
use apiserver::registry::DefaultStrategy;
use apiserver_storage_rocks::RocksOptions;

use crate::admission::{BAN_FLUNDER, BanFlunder};
use crate::ready::{self, READY_CONTROLLER};
use crate::strategy::FlunderStrategy;
use crate::{fischer_codec, flunder_codec};

/// Where objects are kept in the backend (upstream's etcd prefix).
pub const STORAGE_PREFIX: &str = "/registry/wardle.example.com";

/// The command line: the framework's flags and RocksDB's (the default backend; memory is always there too),
/// named and described after the package.
pub type Options = apiserver::app::Options<RocksOptions>;

/// Opens the storage, assembles the API and binds the server; the caller runs it. Controllers: flunder-ready (a
/// flunder's `Ready` condition from whether what it refers to exists).
pub async fn start(options: Options) -> Result<Started, StartError> {
    let mut app = App::new("wardle-apiserver", options.server)
        .version(apiserver::version_info!())
        .openapi_info("Wardle", "0.1")
        .storage_prefix(STORAGE_PREFIX)
        .backend(options.backend)
        .open()
        .await?;
    let flunders = app.store(flunder_codec(), FlunderStrategy)?;
    let fischers = app.store(fischer_codec(), DefaultStrategy)?;
    app.kind_check(BAN_FLUNDER, true, |init| {
        Ok(BanFlunder(init.listers.get()?))
    });
    app.controller(READY_CONTROLLER, move |shutdown| {
        ready::run(flunders.clone(), fischers.clone(), shutdown)
    });
    app.bind().await
}
