//! `--transfer N`: the server binary's `storage restore` into each backend and `storage migrate` between every
//! ordered pair of them, with N pizzas of about a kilobyte, each into a fresh target; the figures are the
//! commands' own (the transfer, without the process's start).

use std::path::{Path, PathBuf};
use std::time::Instant;

use apiserver::storage::transfer;
use apiserver::storage::{MemoryStorage, Storage};
use bytes::Bytes;

use crate::target::{Backend, Service, etcd, pg};

/// Where the pizza server keeps its objects in every backend.
const PREFIX: &str = "/registry/pizza-apiserver.programming-kubernetes.info";

/// One restore or migration.
#[derive(Debug, serde::Serialize)]
pub struct Transfer {
    pub from: String,
    pub to: String,
    pub objects: u64,
    pub bytes: u64,
    pub seconds: f64,
    pub bytes_per_second: f64,
}

/// A fresh store of `backend`: its server flags (with a data directory of its own).
async fn place(backend: Backend, etcd: &etcd::EtcdServer, dir: &Path) -> Vec<String> {
    let data_dir = dir.join(uuid::Uuid::new_v4().to_string());
    let mut flags = vec![
        format!("--storage-backend={}", backend.name()),
        format!("--data-dir={}", data_dir.display()),
    ];
    match backend {
        Backend::Postgres => flags.push(format!(
            "--storage-url={}",
            pg::server().fresh_database().await
        )),
        Backend::Etcd => {
            flags.push(format!("--etcd-servers={}", etcd.url()));
            flags.push(format!("--etcd-prefix=/bench-{}", uuid::Uuid::new_v4()));
        }
        _ => {}
    }
    flags
}

/// Runs `binary storage <command> <flags>`; returns its summary line.
async fn storage(binary: &Path, command: &[&str], flags: &[String]) -> Result<String, String> {
    let out = tokio::process::Command::new(binary)
        .arg("storage")
        .args(command)
        .args(flags)
        .output()
        .await
        .map_err(|e| format!("{}: {e}", binary.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("storage {command:?}: {stderr}"));
    }
    stderr
        .lines()
        .last()
        .map(str::to_string)
        .ok_or_else(|| "no summary".to_string())
}

/// Reads objects, bytes and seconds from a summary line (`N objects (B bytes, ...) ... in S s`).
fn parse_summary(line: &str) -> Option<(u64, u64, f64)> {
    let after = |marker: &str| line.split(marker).nth(1);
    let objects = after(": ")?.split(' ').next()?.parse().ok()?;
    let bytes = after(" objects (")?.split(' ').next()?.parse().ok()?;
    let seconds = after(" in ")?.trim_end_matches('s').parse().ok()?;
    Some((objects, bytes, seconds))
}

fn record(from: &str, to: &str, line: &str) -> Result<Transfer, String> {
    let (objects, bytes, seconds) =
        parse_summary(line).ok_or_else(|| format!("unreadable summary: {line}"))?;
    Ok(Transfer {
        from: from.to_string(),
        to: to.to_string(),
        objects,
        bytes,
        seconds,
        bytes_per_second: bytes as f64 / seconds.max(1e-3),
    })
}

/// A backup file of `objects` pizzas, written through the library's own backup of a memory store.
async fn seed(objects: usize, path: &PathBuf) -> Result<(), String> {
    let store = MemoryStorage::new();
    for i in 0..objects {
        let pizza = serde_json::json!({
            "kind": "Pizza",
            "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
            "metadata": {
                "name": format!("pizza-{i}"),
                "namespace": "default",
                "uid": uuid::Uuid::new_v4().to_string(),
                "creationTimestamp": "2026-11-25T00:00:00Z",
                "labels": {"bench": "transfer", "n": i.to_string()},
                "annotations": {"note": "x".repeat(600)},
            },
            "spec": {"toppings": ["mozzarella", "tomato", "salami"]},
            "status": {"cost": 1.5},
        });
        let key = format!("{PREFIX}/pizzas/default/pizza-{i}");
        store
            .create(&key, Bytes::from(serde_json::to_vec(&pizza).unwrap()))
            .await
            .map_err(|e| e.to_string())?;
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| e.to_string())?);
    transfer::backup(&store, PREFIX, &mut file)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Restores N pizzas into each backend, then migrates between every ordered pair.
pub async fn run(
    binary: &Path,
    backends: &[Backend],
    objects: usize,
) -> Result<Vec<Transfer>, String> {
    let backends: Vec<Backend> = backends
        .iter()
        .copied()
        .filter(|b| *b != Backend::Memory)
        .collect();
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let Service::Etcd(etcd) = Service::start(Backend::Etcd).await else {
        unreachable!("an etcd service");
    };
    let file = dir.path().join("seed.backup");
    seed(objects, &file).await?;
    let file = file.to_string_lossy().into_owned();
    let mut results = Vec::new();
    let mut sources = Vec::new();
    for backend in &backends {
        let flags = place(*backend, &etcd, dir.path()).await;
        let started = Instant::now();
        let line = storage(binary, &["restore", "--from", &file], &flags).await?;
        eprintln!(
            "restore → {}: {line} ({:.1}s with the process)",
            backend.name(),
            started.elapsed().as_secs_f64()
        );
        results.push(record("backup file", backend.name(), &line)?);
        sources.push((*backend, flags));
    }
    for (from, source) in &sources {
        for to in backends.iter().filter(|b| *b != from) {
            let target = place(*to, &etcd, dir.path()).await;
            let quoted = target
                .iter()
                .map(|f| format!("'{f}'"))
                .collect::<Vec<_>>()
                .join(" ");
            let line = storage(binary, &["migrate", "--to", &quoted], source).await?;
            eprintln!("{} → {}: {line}", from.name(), to.name());
            results.push(record(from.name(), to.name(), &line)?);
        }
    }
    Ok(results)
}

/// The table: one row per transfer.
pub fn table(results: &[Transfer]) -> String {
    let mut out = String::from(
        "| from | to | objects | MiB | seconds | MiB/s |\n|---|---|---|---|---|---|\n",
    );
    for t in results {
        out.push_str(&format!(
            "| {} | {} | {} | {:.1} | {:.2} | {:.1} |\n",
            t.from,
            t.to,
            t.objects,
            t.bytes as f64 / (1 << 20) as f64,
            t.seconds,
            t.bytes_per_second / (1 << 20) as f64
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn summary_lines_parse() {
        let line = "pizza-apiserver: 57 objects (33585 bytes, 7537 bytes/s) at source revision 127; target revision \
                    195; 39 written, 0 deleted, 43 events followed, in 4.5s";
        assert_eq!(super::parse_summary(line), Some((57, 33585, 4.5)));
    }
}
