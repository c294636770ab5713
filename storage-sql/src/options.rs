//! Command-line options of the SQL backends (`--storage-url` and tuning flags), for servers to flatten into their
//! own `clap` options.

use std::path::Path;
use std::time::Duration;

/// How hard SQLite syncs a commit to disk (`PRAGMA synchronous`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SqliteSynchronous {
    /// Sync the write-ahead log on every commit: an acknowledged write survives a power loss (the default).
    #[default]
    Full,
    /// Sync only at checkpoints: survives a crash of the process, may lose the last commits on power loss.
    Normal,
    /// Never sync (tests only).
    Off,
}

/// Options of the SQLite and Postgres backends.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct SqlStorageOptions {
    /// Where to store: `sqlite://PATH` or `postgres://USER:PASSWORD@HOST:PORT/DATABASE`. Without it, SQLite in
    /// the server's data directory.
    #[arg(
        long = "storage-url",
        env = "APISERVER_STORAGE_URL",
        value_name = "URL"
    )]
    pub url: Option<String>,
    /// Connections to the database (Postgres: the pool size; SQLite: readers besides the one writer).
    #[arg(long = "storage-max-connections", default_value_t = 8)]
    pub max_connections: u32,
    /// SQLite durability level.
    #[arg(long = "storage-sqlite-synchronous", value_enum, default_value_t = SqliteSynchronous::Full)]
    pub sqlite_synchronous: SqliteSynchronous,
    /// Revisions per compaction batch: each batch is one short transaction, so writers wait at most one batch.
    #[arg(long = "storage-compaction-batch", default_value_t = 1000)]
    pub compaction_batch: u64,
    /// How long one compaction call may run; what is left is continued by the next call.
    #[arg(long = "storage-compaction-timeout", default_value = "60s", value_parser = apiserver_storage::backend::parse_duration)]
    pub compaction_timeout: Duration,
    /// How often watches poll the database for writes they were not told about (other processes; on Postgres
    /// only a fallback behind LISTEN/NOTIFY).
    #[arg(long = "storage-watch-poll-interval", default_value = "1s", value_parser = apiserver_storage::backend::parse_duration)]
    pub watch_poll_interval: Duration,
    /// How many events a watcher may fall behind before it is cut off with an error.
    #[arg(long = "storage-watch-buffer", default_value_t = 1024)]
    pub watch_buffer: usize,
}

impl Default for SqlStorageOptions {
    fn default() -> Self {
        SqlStorageOptions {
            url: None,
            max_connections: 8,
            sqlite_synchronous: SqliteSynchronous::Full,
            compaction_batch: 1000,
            compaction_timeout: Duration::from_secs(60),
            watch_poll_interval: Duration::from_secs(1),
            watch_buffer: 1024,
        }
    }
}

impl SqlStorageOptions {
    /// Options for `url` with every other setting at its default.
    pub fn with_url(url: impl Into<String>) -> Self {
        SqlStorageOptions {
            url: Some(url.into()),
            ..Default::default()
        }
    }

    /// The URL to open: `--storage-url`, or `sqlite://<data_dir>/state.db`.
    pub fn url_or_default(&self, data_dir: &Path) -> String {
        match &self.url {
            Some(u) => u.clone(),
            None => format!("sqlite://{}", data_dir.join("state.db").display()),
        }
    }
}

/// `--storage-backend sqlite` (a file in the data directory unless `--storage-url` names one) and
/// `--storage-backend postgres` (at `--storage-url`).
#[async_trait::async_trait]
impl apiserver_storage::backend::StorageBackend for SqlStorageOptions {
    /// The engines this build has (cargo features `sqlite` and `postgres`), so that an unknown `--storage-backend`
    /// lists only what can be chosen.
    fn names(&self) -> &'static [&'static str] {
        &[
            #[cfg(feature = "sqlite")]
            "sqlite",
            #[cfg(feature = "postgres")]
            "postgres",
        ]
    }

    async fn open(
        &self,
        name: &str,
        context: apiserver_storage::backend::OpenContext<'_>,
    ) -> Result<std::sync::Arc<dyn apiserver_storage::Storage>, String> {
        let url = self.url_or_default(context.data_dir);
        let wanted = if name == "sqlite" {
            "sqlite:"
        } else {
            "postgres"
        };
        if !url.starts_with(wanted) {
            return Err(format!(
                "--storage-backend {name} needs a {wanted}... --storage-url, got {url:?}"
            ));
        }
        // A store only read (a backup) must be there: a mistyped --data-dir would otherwise create an empty one
        // and back it up.
        if context.read_only
            && let Some(path) = sqlite_path(&url)
            && !path.is_file()
        {
            return Err(format!(
                "no SQLite store at {}: is --data-dir (or --storage-url) right?",
                path.display()
            ));
        }
        let options = SqlStorageOptions {
            url: Some(url),
            ..self.clone()
        };
        crate::SqlStorage::open(&options)
            .await
            .map(crate::SqlStorage::into_dyn)
            .map_err(apiserver_storage::backend::open_error)
    }

    /// Replicas of a server share one Postgres database; a SQLite file belongs to one process.
    fn shared(&self, name: &str) -> bool {
        name == "postgres"
    }
}

/// The file of a `sqlite:` URL (`None` for an in-memory database).
fn sqlite_path(url: &str) -> Option<std::path::PathBuf> {
    let rest = url.strip_prefix("sqlite:")?;
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty() && path != ":memory:").then(|| std::path::PathBuf::from(path))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        storage: SqlStorageOptions,
    }

    #[test]
    fn parses_flags_and_defaults() {
        let cli = Cli::parse_from(["x"]);
        assert_eq!(cli.storage, SqlStorageOptions::default());
        let cli = Cli::parse_from([
            "x",
            "--storage-url",
            "postgres://u@127.0.0.1:5432/db",
            "--storage-compaction-timeout",
            "250ms",
            "--storage-sqlite-synchronous",
            "normal",
        ]);
        assert_eq!(
            cli.storage.url.as_deref(),
            Some("postgres://u@127.0.0.1:5432/db")
        );
        assert_eq!(cli.storage.compaction_timeout, Duration::from_millis(250));
        assert_eq!(cli.storage.sqlite_synchronous, SqliteSynchronous::Normal);
        assert_eq!(
            SqlStorageOptions::default().url_or_default(Path::new("/d")),
            "sqlite:///d/state.db"
        );
        // Go's duration grammar, as every duration flag.
        let cli = Cli::try_parse_from(["x", "--storage-watch-poll-interval=1m30s"]).unwrap();
        assert_eq!(cli.storage.watch_poll_interval, Duration::from_secs(90));
        assert!(Cli::try_parse_from(["x", "--storage-compaction-timeout=60"]).is_err());
    }

    /// An unknown `--storage-backend` lists only the engines compiled in.
    #[test]
    fn names_are_the_engines_built_in() {
        use apiserver_storage::backend::StorageBackend;
        let names = SqlStorageOptions::default().names();
        assert_eq!(names.contains(&"sqlite"), cfg!(feature = "sqlite"));
        assert_eq!(names.contains(&"postgres"), cfg!(feature = "postgres"));
    }
}
