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
        value_parser = parse_duration
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

/// Parses `90`, `90s`, `500ms`, `5m` or `1h`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 30s, 5m, 1h"))?;
    let secs = |mult: u64| {
        n.checked_mul(mult)
            .map(Duration::from_secs)
            .ok_or_else(|| format!("duration {s:?} is too large"))
    };
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "" | "s" => secs(1),
        "m" => secs(60),
        "h" => secs(3600),
        _ => Err(format!("invalid duration unit in {s:?}: use ms, s, m or h")),
    }
}

/// `--storage-backend rocksdb`: a database in `<data-dir>/rocksdb`; a store only read (a backup, a migration's
/// source) is followed, so its server may keep running.
#[async_trait::async_trait]
impl apiserver::app::StorageBackend for RocksOptions {
    fn names(&self) -> &'static [&'static str] {
        &["rocksdb"]
    }

    async fn open(
        &self,
        _: &str,
        context: apiserver::app::OpenContext<'_>,
    ) -> Result<std::sync::Arc<dyn apiserver::storage::Storage>, String> {
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
        .map_err(apiserver::app::open_error)
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

    #[test]
    fn parses_durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5x").is_err());
        assert!(parse_duration("m").is_err());
        assert!(parse_duration("99999999999999999999h").is_err());
    }
}
