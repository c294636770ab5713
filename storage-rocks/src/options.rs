//! Command-line options of the RocksDB backend. The database directory itself is the server's `--data-dir` (or
//! any path) and is passed to [`RocksStorage::open`](crate::RocksStorage::open) separately.

use std::time::Duration;

/// Tuning of the RocksDB backend, as flags a server flattens into its own (`#[command(flatten)]`); argument ids
/// carry the `rocksdb_` prefix so they never clash with other backends' flattened options.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct RocksOptions {
    /// Acknowledge writes before RocksDB's write-ahead log is synced to disk. Much faster; a killed process still
    /// loses nothing (the log is in the OS page cache), but an OS crash or power loss can lose the last writes.
    #[arg(id = "rocksdb_unsafe_no_sync", long = "rocksdb-unsafe-no-sync")]
    pub unsafe_no_sync: bool,

    /// How often history is compacted: each run discards the revisions older than the one seen a run earlier, so
    /// at least this much history stays readable (upstream's `--etcd-compaction-interval`). `0` disables it.
    #[arg(
        id = "rocksdb_compaction_interval",
        long = "rocksdb-compaction-interval",
        default_value = "5m",
        value_parser = apiserver_storage::backend::parse_duration
    )]
    pub compaction_interval: Duration,

    /// How many events a watcher may fall behind before it is cut off with an error (so a slow client cannot
    /// grow the server's memory).
    #[arg(
        id = "rocksdb_watch_buffer",
        long = "rocksdb-watch-buffer",
        default_value_t = 1024
    )]
    pub watch_buffer: usize,
}

impl Default for RocksOptions {
    fn default() -> Self {
        RocksOptions {
            unsafe_no_sync: false,
            compaction_interval: Duration::from_secs(300),
            watch_buffer: 1024,
        }
    }
}

/// `--storage-backend rocksdb`: a database in `<data-dir>/rocksdb`; a store only read (a backup, a migration's
/// source) is followed, so its server may keep running.
#[async_trait::async_trait]
impl apiserver_storage::backend::StorageBackend for RocksOptions {
    fn names(&self) -> &'static [&'static str] {
        &["rocksdb"]
    }

    async fn open(
        &self,
        _: &str,
        context: apiserver_storage::backend::OpenContext<'_>,
    ) -> Result<std::sync::Arc<dyn apiserver_storage::Storage>, String> {
        let path = context.data_dir.join("rocksdb");
        let options = self.clone();
        let read_only = context.read_only;
        // Opening replays RocksDB's log: blocking work, off the async workers.
        tokio::task::spawn_blocking(move || {
            if read_only {
                crate::RocksStorage::open_secondary(path, &options)
            } else {
                crate::RocksStorage::open(path, &options)
            }
        })
        .await
        .map_err(|e| e.to_string())?
        .map(crate::RocksStorage::into_dyn)
        .map_err(apiserver_storage::backend::open_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        rocks: RocksOptions,
    }

    #[test]
    fn defaults_match_the_flags() {
        let cli = Cli::try_parse_from(["x"]).unwrap();
        assert_eq!(cli.rocks, RocksOptions::default());
        let cli = Cli::try_parse_from([
            "x",
            "--rocksdb-unsafe-no-sync",
            "--rocksdb-compaction-interval=0",
            "--rocksdb-watch-buffer=8",
        ])
        .unwrap();
        assert!(cli.rocks.unsafe_no_sync);
        assert_eq!(cli.rocks.compaction_interval, Duration::ZERO);
        assert_eq!(cli.rocks.watch_buffer, 8);
    }

    /// The flag takes Go's duration grammar, as `--etcd-compaction-interval` does.
    #[test]
    fn compaction_interval_is_a_go_duration() {
        let parse = |v: &str| {
            Cli::try_parse_from(["x", &format!("--rocksdb-compaction-interval={v}")])
                .map(|cli| cli.rocks.compaction_interval)
                .map_err(|e| e.to_string())
        };
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        let err = parse("90").unwrap_err();
        assert!(
            err.contains(r#"time: missing unit in duration "90""#),
            "{err}"
        );
        assert!(parse("5x").is_err());
        assert!(parse("-1m").is_err());
    }
}
