//! Storage backends chosen by `--storage-backend`: each backend crate implements [`StorageBackend`] on its
//! options struct, and a binary hands the ones it was built with to [`App::backend`](super::App::backend). The
//! memory backend is always there.

use std::path::Path;
use std::sync::Arc;

use crate::storage::memory::MemoryStorage;
use crate::storage::{Storage, StorageError};

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

/// The backend `wanted` names among `backends` (the first when `None`), with its name. A backend the binary was
/// built without (`unbuilt`: its name and cargo feature) is refused by saying so, not as an unknown name.
pub(super) fn choose<'a>(
    backends: &'a [Box<dyn StorageBackend>],
    unbuilt: &[(&str, &str)],
    wanted: Option<&str>,
) -> Result<(&'a dyn StorageBackend, &'static str), String> {
    let all = || {
        backends
            .iter()
            .flat_map(|b| b.names().iter().map(move |n| (b, *n)))
    };
    let found = match wanted {
        None => all().next(),
        Some(wanted) => all().find(|(_, n)| *n == wanted),
    };
    found.map(|(b, n)| (b.as_ref(), n)).ok_or_else(|| {
        let known: Vec<&str> = all().map(|(_, n)| n).collect();
        if let Some((name, feature)) = unbuilt.iter().find(|(n, _)| Some(*n) == wanted) {
            return format!(
                "--storage-backend {name:?}: this server was built without it (cargo feature `{feature}`); its \
                 backends: {}",
                known.join(", ")
            );
        }
        format!(
            "--storage-backend {:?} is not one of this server's backends: {}",
            wanted.unwrap_or_default(),
            known.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Sql;

    #[async_trait::async_trait]
    impl StorageBackend for Sql {
        fn names(&self) -> &'static [&'static str] {
            &["sqlite", "postgres"]
        }
        async fn open(&self, _: &str, _: OpenContext<'_>) -> Result<Arc<dyn Storage>, String> {
            Err("not here".into())
        }
    }

    #[test]
    fn the_first_backend_is_the_default_and_names_choose() {
        let backends: Vec<Box<dyn StorageBackend>> = vec![Box::new(Sql), Box::new(Memory)];
        let unbuilt = [("rocksdb", "rocksdb")];
        assert_eq!(choose(&backends, &unbuilt, None).unwrap().1, "sqlite");
        assert_eq!(
            choose(&backends, &unbuilt, Some("postgres")).unwrap().1,
            "postgres"
        );
        assert_eq!(
            choose(&backends, &unbuilt, Some("memory")).unwrap().1,
            "memory"
        );
        assert_eq!(
            choose(&backends, &unbuilt, Some("mongo")).err().unwrap(),
            "--storage-backend \"mongo\" is not one of this server's backends: sqlite, postgres, memory"
        );
        assert_eq!(
            choose(&backends, &unbuilt, Some("rocksdb")).err().unwrap(),
            "--storage-backend \"rocksdb\": this server was built without it (cargo feature `rocksdb`); its \
             backends: sqlite, postgres, memory"
        );
    }
}
