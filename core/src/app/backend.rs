//! Choosing among the storage backends a binary was built with (`--storage-backend`); what a backend implements
//! ([`StorageBackend`]) is in `apiserver-storage`.

pub use apiserver_storage::backend::{BackendSet, Memory, OpenContext, StorageBackend, open_error};

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
    use std::sync::Arc;

    use super::*;
    use crate::storage::Storage;

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
