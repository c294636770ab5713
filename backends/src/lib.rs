//! Every storage backend of the framework behind one set of flags: a server takes [`BackendOptions`] as its
//! backends' part of the command line and hands it to `apiserver::app::App::backend`. Each backend
//! is a cargo feature (`sqlite`, the default; `postgres`, `rocksdb`, `etcd`; `all`): a backend built out has no
//! flags, and `--storage-backend` naming it is refused by naming its feature. Memory is always there.
//!
//! ```no_run
//! use apiserver::app::{App, Options, StartError, Started};
//! use apiserver_backends::BackendOptions;
//!
//! async fn start(options: Options<BackendOptions>) -> Result<Started, StartError> {
//!     let app = App::new("my-apiserver", options.server).backend(options.backend).open().await?;
//!     app.bind().await
//! }
//! ```

use apiserver_storage::backend::{BackendSet, StorageBackend};

/// The flags of every backend this crate is built with.
#[derive(Clone, Debug, clap::Args)]
#[command(about = None, long_about = None)]
pub struct BackendOptions {
    /// SQLite and Postgres (`--storage-url`, ...).
    #[cfg(feature = "sqlite")]
    #[command(flatten)]
    pub sql: apiserver_storage_sql::SqlStorageOptions,

    /// RocksDB (`--rocksdb-*`).
    #[cfg(feature = "rocksdb")]
    #[command(flatten)]
    pub rocks: apiserver_storage_rocks::RocksOptions,

    /// etcd (`--etcd-*`).
    #[cfg(feature = "etcd")]
    #[command(flatten)]
    pub etcd: apiserver_storage_etcd::EtcdOptions,
}

impl BackendSet for BackendOptions {
    /// SQLite (the default) first, then RocksDB and etcd.
    // One push per backend built, each a cfg of its own.
    #[allow(clippy::vec_init_then_push)]
    fn backends(self) -> Vec<Box<dyn StorageBackend>> {
        #[allow(unused_mut)]
        let mut backends: Vec<Box<dyn StorageBackend>> = Vec::new();
        #[cfg(feature = "sqlite")]
        backends.push(Box::new(self.sql));
        #[cfg(feature = "rocksdb")]
        backends.push(Box::new(self.rocks));
        #[cfg(feature = "etcd")]
        backends.push(Box::new(self.etcd));
        backends
    }

    fn not_built(&self) -> Vec<(&'static str, &'static str)> {
        [
            (cfg!(feature = "sqlite"), "sqlite"),
            (cfg!(feature = "postgres"), "postgres"),
            (cfg!(feature = "rocksdb"), "rocksdb"),
            (cfg!(feature = "etcd"), "etcd"),
        ]
        .into_iter()
        .filter(|(built, _)| !built)
        .map(|(_, name)| (name, name))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use apiserver::app::Options;
    use clap::{CommandFactory, Parser};

    use super::BackendOptions;

    /// Every backend's flags flatten into one command line with the framework's, without clashing names.
    #[test]
    fn command_line_is_consistent() {
        Options::<BackendOptions>::command().debug_assert();
    }

    /// Every flag of the framework and of the backends has a help text.
    #[test]
    fn every_flag_has_help() {
        let command = Options::<BackendOptions>::command();
        let missing: Vec<_> = command
            .get_arguments()
            .chain(command.get_subcommands().flat_map(|c| c.get_arguments()))
            .filter(|arg| arg.get_help().is_none())
            .map(|arg| arg.get_id().to_string())
            .filter(|id| id != "help" && id != "version")
            .collect();
        assert_eq!(missing, Vec::<String>::new());
    }

    /// Two backends' flags of the same kind stay apart.
    #[test]
    fn backends_keep_their_own_flags() {
        let options = Options::<BackendOptions>::try_parse_from([
            "pizza-apiserver",
            "--rocksdb-watch-buffer=8",
            "--storage-watch-buffer=16",
        ])
        .expect("both backends' buffers parse");
        assert_eq!(options.backend.rocks.watch_buffer, 8);
        assert_eq!(options.backend.sql.watch_buffer, 16);
        assert_eq!(options.server.storage.backend, None);
    }
}
