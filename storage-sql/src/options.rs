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
    #[arg(long = "storage-compaction-timeout", default_value = "60s", value_parser = parse_duration)]
    pub compaction_timeout: Duration,
    /// How often watches poll the database for writes they were not told about (other processes; on Postgres
    /// only a fallback behind LISTEN/NOTIFY).
    #[arg(long = "storage-watch-poll-interval", default_value = "1s", value_parser = parse_duration)]
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

/// Parses `250ms`, `5s`, `2m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 500ms, 5s, 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("invalid duration unit in {s:?}: use ms, s, m or h")),
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `--storage-backend sqlite` (a file in the data directory unless `--storage-url` names one) and
/// `--storage-backend postgres` (at `--storage-url`).
#[async_trait::async_trait]
impl apiserver::app::StorageBackend for SqlStorageOptions {
    fn names(&self) -> &'static [&'static str] {
        // only the databases this build has: a server names the missing one with `App::without_backend`
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
        context: apiserver::app::OpenContext<'_>,
    ) -> Result<std::sync::Arc<dyn apiserver::storage::Storage>, String> {
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
        let options = SqlStorageOptions {
            url: Some(url),
            ..self.clone()
        };
        crate::SqlStorage::open(&options)
            .await
            .map(crate::SqlStorage::into_dyn)
            .map_err(apiserver::app::open_error)
    }

    /// Replicas of a server share one Postgres database; a SQLite file belongs to one process.
    fn shared(&self, name: &str) -> bool {
        name == "postgres"
    }
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
        assert!(parse_duration("5x").is_err());
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
    }
}
