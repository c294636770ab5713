//! What a backend crate implements to be chosen by a server's `--storage-backend`: [`StorageBackend`] on its
//! options struct, which a binary hands to `apiserver::app::App::backend`. The memory backend is always there.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::memory::MemoryStorage;
use crate::{Storage, StorageError};

/// What a backend needs to know to open.
#[derive(Clone, Copy, Debug)]
pub struct OpenContext<'a> {
    /// The server's data directory (`--data-dir`): where an embedded database keeps its files.
    pub data_dir: &'a Path,
    /// The prefix of every key (`--etcd-prefix` or the server's default).
    pub prefix: &'a str,
    /// The store is only read (a backup, a migration's source) and its server may be running: a backend that
    /// one process owns opens it as a follower rather than taking it.
    pub read_only: bool,
}

/// A storage engine a server can be started on.
#[async_trait::async_trait]
pub trait StorageBackend: Send + Sync + 'static {
    /// The `--storage-backend` values it answers to (one crate may bring several, as SQLite and Postgres).
    fn names(&self) -> &'static [&'static str];

    /// Opens the backend called `name` (one of [`names`](Self::names)). The error is shown to whoever started
    /// the server, as it is.
    async fn open(&self, name: &str, context: OpenContext<'_>) -> Result<Arc<dyn Storage>, String>;

    /// Whether several server processes can run on one store of the backend `name` (a database server, not an
    /// embedded file): `--leader-elect` is then on by default, so that one replica runs the controllers.
    fn shared(&self, name: &str) -> bool {
        let _ = name;
        false
    }

    /// How storage metrics and spans name the backend (`etcd3` for etcd, as upstream); the name by default.
    fn metrics_name(&self, name: &str) -> &'static str {
        self.names()
            .iter()
            .find(|n| **n == name)
            .copied()
            .unwrap_or("other")
    }
}

/// What `App::backend` takes: one backend, or a set of them with the names of those the binary was built without
/// (as `apiserver-backends`' options, one cargo feature per backend).
pub trait BackendSet {
    /// The backends, in the order `--storage-backend` looks a name up (the first is the default).
    fn backends(self) -> Vec<Box<dyn StorageBackend>>;

    /// The backends this set could hold but the binary was built without: `(name, cargo feature)`, so that
    /// choosing one is refused by naming its feature.
    fn not_built(&self) -> Vec<(&'static str, &'static str)> {
        Vec::new()
    }
}

impl<B: StorageBackend> BackendSet for B {
    fn backends(self) -> Vec<Box<dyn StorageBackend>> {
        vec![Box::new(self)]
    }
}

/// A storage error as a startup message: an unreachable backend's own message says it all (the Status-style
/// wrapper is for clients).
pub fn open_error(error: StorageError) -> String {
    match error {
        StorageError::Unreachable { message, .. } => message,
        other => other.to_string(),
    }
}

/// The in-process backend: gone when the server stops.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory;

#[async_trait::async_trait]
impl StorageBackend for Memory {
    fn names(&self) -> &'static [&'static str] {
        &["memory"]
    }

    async fn open(&self, _: &str, context: OpenContext<'_>) -> Result<Arc<dyn Storage>, String> {
        if context.read_only {
            return Err(
                "the memory backend keeps nothing once its server stops: there is no store to read (choose \
                 the server's --storage-backend)"
                    .into(),
            );
        }
        Ok(Arc::new(MemoryStorage::new()))
    }
}

/// Parses a duration flag (a backend's or the server's) or `metav1.Duration` text with Go's `time.ParseDuration`
/// grammar ([`apiserver_gotext::parse_duration`]): an optionally signed sequence of decimal numbers with units
/// `ns us µs ms s m h`, e.g. `300ms`, `1.5h`, `2h45m`, `1m30s`, or `0`; errors are Go's (`time: invalid duration
/// "10"`). A negative duration is refused: no flag of ours has a meaning for one.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let nanos = apiserver_gotext::parse_duration(s).map_err(|e| e.to_string())?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("negative duration {s:?} is not allowed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        for (s, d) in [
            ("0", Duration::ZERO),
            ("0s", Duration::ZERO),
            ("15s", Duration::from_secs(15)),
            ("1m30s", Duration::from_secs(90)),
            ("1.5h", Duration::from_secs(5400)),
            ("300ms", Duration::from_millis(300)),
            ("2us", Duration::from_micros(2)),
            ("1h2m3s4ms", Duration::from_millis(3_723_004)),
            ("+1m", Duration::from_secs(60)),
            ("-0", Duration::ZERO),
        ] {
            assert_eq!(parse_duration(s).unwrap(), d, "{s}");
        }
        for (bad, message) in [
            ("", r#"time: invalid duration """#),
            ("10", r#"time: missing unit in duration "10""#),
            ("1x", r#"time: unknown unit "x" in duration "1x""#),
            ("1..5s", r#"time: missing unit in duration "1..5s""#),
            ("-5s", r#"negative duration "-5s" is not allowed"#),
        ] {
            assert_eq!(parse_duration(bad), Err(message.to_string()), "{bad}");
        }
    }
}
