//! `pizza-apiserver storage backup|restore|migrate`, run as the binary a user runs: every ordered pair of the
//! persistent backends with 2,000 pizzas written (some relabelled, some deleted), a live migration with a writer
//! for every ordered pair of distinct backends (a RocksDB source is followed while its server owns it), a restore
//! into each backend, and resourceVersions that only grow across the switch.

use crate::support;

use crate::etcd;
use crate::pg;

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{TOPPINGS, TestServer};

const BIN: &str = env!("CARGO_BIN_EXE_pizza-apiserver");

const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";

/// Where one store lives, as the server's flags say it; the directory holds the embedded databases (and keeps the
/// server from writing its default data directory into the working directory).
struct Place {
    /// The storage flags but `--data-dir`.
    backend: Vec<String>,
    /// Every flag, `--data-dir` included.
    flags: Vec<String>,
    /// The data directory, lent to a server while one runs on the place.
    dir: Option<tempfile::TempDir>,
}

impl Place {
    async fn new(backend: &str, etcd: &etcd::EtcdServer) -> Place {
        let dir = tempfile::tempdir().unwrap();
        let mut flags = vec![format!("--storage-backend={backend}")];
        match backend {
            "postgres" => flags.push(format!(
                "--storage-url={}",
                pg::server().fresh_database().await
            )),
            "etcd" => {
                flags.push(format!("--etcd-servers={}", etcd.url()));
                // One etcd for all: each place its own prefix.
                flags.push(format!("--etcd-prefix=/place-{}", uuid::Uuid::new_v4()));
            }
            _ => {}
        }
        let backend = flags.clone();
        flags.push(format!("--data-dir={}", dir.path().display()));
        Place {
            backend,
            flags,
            dir: Some(dir),
        }
    }

    /// A pizza server on this place.
    async fn serve(&mut self) -> TestServer {
        let args: Vec<&str> = self.backend.iter().map(String::as_str).collect();
        TestServer::start_in(self.dir.take().expect("no server running"), &args).await
    }

    async fn stop(&mut self, server: TestServer) {
        self.dir = Some(server.stop().await);
    }

    /// The flags as one shell-quoted string, for `migrate --to`.
    fn quoted(&self) -> String {
        self.flags
            .iter()
            .map(|f| format!("'{f}'"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The store's objects as a backup lists them (keys relative to the prefix, values as stored), sorted.
    fn objects(&self) -> Vec<Value> {
        let out = storage(&["backup", "--to", "-"], &self.flags);
        let mut objects: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter_map(|l| l.get("object").cloned())
            .collect();
        objects.sort_by_key(|o| o["key"].as_str().unwrap().to_string());
        objects
    }
}

/// How many of a store's objects are served ones: the leader election lease that servers on postgres and etcd
/// keep in the store (and transfers carry along) is not.
fn api_objects(objects: &[Value]) -> usize {
    objects
        .iter()
        .filter(|o| {
            !o["key"]
                .as_str()
                .unwrap()
                .contains("/coordination.k8s.io/leases/")
        })
        .count()
}

/// Runs `pizza-apiserver storage <command> <flags>`, failing the test if it fails; returns stdout.
fn storage(command: &[&str], flags: &[String]) -> Vec<u8> {
    let out = std::process::Command::new(BIN)
        .arg("storage")
        .args(command)
        .args(flags)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "storage {command:?} {flags:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if command[0] != "backup" {
        return out.stderr;
    }
    out.stdout
}

/// The summary line's count of objects written.
fn written(stderr: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(stderr);
    let (before, _) = text
        .rsplit_once(" written")
        .unwrap_or_else(|| panic!("no summary: {text}"));
    before.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Toppings and `count` pizzas, some changed and some deleted, written through `server`; returns the largest
/// resourceVersion the server answered.
async fn fill(server: &TestServer, count: usize) -> u64 {
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let mut max = 0;
    for i in 0..count {
        max = max.max(write(server, i).await);
    }
    max
}

fn pizza(i: usize) -> Value {
    json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Pizza",
        "metadata": {"name": format!("p{i}"), "labels": {"n": i.to_string()}},
        "spec": {"toppings": [{"name": "mozzarella", "quantity": 1 + i % 3}]},
    })
}

/// Step `i` of a workload: create pizza i; every third step also relabels pizza i/2, every fifth deletes pizza
/// i/3. Returns the largest resourceVersion answered.
async fn write(server: &TestServer, i: usize) -> u64 {
    let rv = |body: &[u8]| -> u64 {
        support::parse(body)["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|rv| rv.parse().ok())
            .unwrap_or(0)
    };
    let (code, _, body) = server
        .raw("POST", PIZZAS, &[], serde_json::to_vec(&pizza(i)).unwrap())
        .await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let mut max = rv(&body);
    if i % 3 == 2 {
        let patch = json!({"metadata": {"labels": {"changed": "yes"}}});
        let (code, _, body) = server
            .raw(
                "PATCH",
                &format!("{PIZZAS}/p{}", i / 2),
                &[("content-type", "application/merge-patch+json")],
                serde_json::to_vec(&patch).unwrap(),
            )
            .await;
        assert!(code == 200 || code == 404, "{code}");
        max = max.max(rv(&body));
    }
    if i % 5 == 4 {
        let (code, _, body) = server
            .raw("DELETE", &format!("{PIZZAS}/p{}", i / 3), &[], vec![])
            .await;
        assert!(code == 200 || code == 404, "{code}");
        max = max.max(rv(&body));
    }
    max
}

/// The resourceVersion of each pizza a server lists, and the list's.
async fn versions(server: &TestServer) -> (HashMap<String, u64>, u64) {
    let (code, _, body) = server.raw("GET", PIZZAS, &[], vec![]).await;
    assert_eq!(code, 200);
    let list = support::parse(&body);
    let rv = |meta: &Value| -> u64 { meta["resourceVersion"].as_str().unwrap().parse().unwrap() };
    let items = list["items"].as_array().unwrap().iter();
    let pizzas = items
        .map(|i| {
            (
                i["metadata"]["name"].as_str().unwrap().to_string(),
                rv(&i["metadata"]),
            )
        })
        .collect();
    (pizzas, rv(&list["metadata"]))
}

/// After the switch to `place`: each pizza's resourceVersion is above the one the source served for it (never
/// lower, never the same number for another state), a list's is above every resourceVersion the source answered
/// (`source_max`), and a watch from one of the source's resourceVersions is expired (410): the client relists, as
/// after an etcd compaction.
async fn assert_switch(
    place: &mut Place,
    source: &HashMap<String, u64>,
    source_max: u64,
    expected: usize,
) {
    let server = place.serve().await;
    let (pizzas, list_rv) = versions(&server).await;
    assert!(list_rv > source_max, "{list_rv} <= {source_max}");
    assert_eq!(pizzas.len(), source.len());
    for (name, rv) in &pizzas {
        assert!(*rv > source[name], "{name}: {rv} <= {}", source[name]);
    }
    let toppings = server.kubectl_ok(&["get", "toppings", "-o", "name"]);
    assert_eq!(pizzas.len() + toppings.lines().count(), expected);
    let (code, _, body) = server
        .raw(
            "GET",
            &format!("{PIZZAS}?watch=1&resourceVersion={source_max}&timeoutSeconds=5"),
            &[],
            vec![],
        )
        .await;
    let text = String::from_utf8_lossy(&body);
    assert!(
        code == 410 || text.contains("\"code\":410"),
        "{code}: {text}"
    );
    place.stop(server).await;
}

/// Every ordered pair of persistent backends: a fresh target gets exactly the source's objects; running the same
/// migration again writes nothing. Then a backup restores into a fresh store of each backend.
#[tokio::test(flavor = "multi_thread")]
async fn every_pair_of_backends_migrates_and_restores() {
    let etcd = etcd::EtcdServer::start().await;
    let backends = ["sqlite", "rocksdb", "postgres", "etcd"];
    // The seed: a server on SQLite, stopped.
    let mut seed = Place::new("sqlite", &etcd).await;
    let server = seed.serve().await;
    let source_max = fill(&server, 2000).await;
    let (source_versions, _) = versions(&server).await;
    seed.stop(server).await;
    let expected = seed.objects();
    assert!(expected.len() > 1500, "{}", expected.len());

    let mut sources = vec![("sqlite", seed)];
    for backend in &backends[1..] {
        let target = Place::new(backend, &etcd).await;
        let stderr = storage(&["migrate", "--to", &target.quoted()], &sources[0].1.flags);
        assert_eq!(written(&stderr), expected.len() as u64);
        assert_eq!(target.objects(), expected, "sqlite → {backend}");
        sources.push((backend, target));
    }
    for (from, source) in &sources[1..] {
        for to in backends.iter().filter(|b| *b != from) {
            let target = Place::new(to, &etcd).await;
            let stderr = storage(&["migrate", "--to", &target.quoted()], &source.flags);
            assert_eq!(written(&stderr), expected.len() as u64, "{from} → {to}");
            assert_eq!(target.objects(), expected, "{from} → {to}");
            let again = storage(&["migrate", "--to", &target.quoted()], &source.flags);
            assert_eq!(written(&again), 0, "{from} → {to} again");
        }
    }

    let file = tempfile::NamedTempFile::new().unwrap();
    let path = file.path().to_str().unwrap();
    storage(&["backup", "--to", path], &sources[0].1.flags);
    for backend in backends {
        let mut target = Place::new(backend, &etcd).await;
        storage(&["restore", "--from", path], &target.flags);
        assert_eq!(target.objects(), expected, "restore into {backend}");
        if backend == "rocksdb" {
            assert_switch(
                &mut target,
                &source_versions,
                source_max,
                api_objects(&expected),
            )
            .await;
        }
    }
}

/// Pizzas written before a live migration starts.
const LIVE_FILL: usize = 1000;

/// A server serves `source` and a writer keeps writing while `migrate --follow` copies it to `target`; after
/// SIGTERM the target holds exactly what the source holds, and a server on the target answers with larger
/// resourceVersions only.
async fn live_migration(source_backend: &str, target_backend: &str) {
    let etcd = etcd::EtcdServer::start().await;
    let mut source = Place::new(source_backend, &etcd).await;
    let mut target = Place::new(target_backend, &etcd).await;
    let server = source.serve().await;
    let mut source_max = fill(&server, LIVE_FILL).await;

    let mut migrate = tokio::process::Command::new(BIN)
        .arg("storage")
        .args(["migrate", "--follow", "--to", &target.quoted()])
        .args(&source.flags)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(migrate.stderr.take().unwrap());
    let mut log = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !log.contains("following the source") {
        assert!(
            Instant::now() < deadline,
            "migrate did not start following: {log}"
        );
        let mut line = String::new();
        let n = tokio::io::AsyncBufReadExt::read_line(&mut stderr, &mut line)
            .await
            .unwrap();
        assert!(n > 0, "migrate ended: {log}");
        log.push_str(&line);
    }
    // The live writer, while the migration follows.
    let writing = Instant::now();
    let mut i = LIVE_FILL;
    while writing.elapsed() < Duration::from_secs(3) {
        source_max = source_max.max(write(&server, i).await);
        i += 1;
    }
    // The switch: the source's server stops (its controllers write too), then the migration.
    let (source_versions, list_rv) = versions(&server).await;
    source_max = source_max.max(list_rv);
    source.stop(server).await;
    let pid = migrate.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = tokio::time::timeout(Duration::from_secs(60), migrate.wait())
        .await
        .expect("migrate stops after SIGTERM")
        .unwrap();
    tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut log)
        .await
        .unwrap();
    assert!(status.success(), "{log}");
    assert!(!log.contains(" 0 events followed"), "{log}");

    let expected = source.objects();
    assert_eq!(target.objects(), expected, "{log}");
    assert_switch(
        &mut target,
        &source_versions,
        source_max,
        api_objects(&expected),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_rocksdb_to_sqlite() {
    live_migration("rocksdb", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_rocksdb_to_postgres() {
    live_migration("rocksdb", "postgres").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_rocksdb_to_etcd() {
    live_migration("rocksdb", "etcd").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_sqlite_to_rocksdb() {
    live_migration("sqlite", "rocksdb").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_sqlite_to_postgres() {
    live_migration("sqlite", "postgres").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_sqlite_to_etcd() {
    live_migration("sqlite", "etcd").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_postgres_to_sqlite() {
    live_migration("postgres", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_postgres_to_rocksdb() {
    live_migration("postgres", "rocksdb").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_postgres_to_etcd() {
    live_migration("postgres", "etcd").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_etcd_to_sqlite() {
    live_migration("etcd", "sqlite").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_etcd_to_rocksdb() {
    live_migration("etcd", "rocksdb").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn live_migration_from_etcd_to_postgres() {
    live_migration("etcd", "postgres").await;
}

/// What a damaged backup does: nothing is written, and the error says why.
#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_backup_is_refused_before_anything_is_written() {
    let etcd = etcd::EtcdServer::start().await;
    let mut seed = Place::new("sqlite", &etcd).await;
    let server = seed.serve().await;
    fill(&server, 5).await;
    seed.stop(server).await;
    let backup = storage(&["backup", "--to", "-"], &seed.flags);
    let text = String::from_utf8(backup).unwrap();
    let cut: String = text.lines().take(3).map(|l| format!("{l}\n")).collect();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), cut).unwrap();
    let target = Place::new("rocksdb", &etcd).await;
    let out = std::process::Command::new(BIN)
        .args([
            "storage",
            "restore",
            "--from",
            file.path().to_str().unwrap(),
        ])
        .args(&target.flags)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("truncated"), "{stderr}");
    assert!(target.objects().is_empty());
}

/// `backup` (a `storage backup --to -` output) with its header's revision replaced by `revision` and its checksum
/// made to match.
fn at_revision(backup: &[u8], revision: u64) -> Vec<u8> {
    let text = std::str::from_utf8(backup).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut header: Value = serde_json::from_str(&lines[0]).unwrap();
    header["header"]["revision"] = revision.into();
    lines[0] = header.to_string();
    let last = lines.len() - 1;
    let body: String = lines[..last].iter().map(|l| format!("{l}\n")).collect();
    let sha = ring::digest::digest(&ring::digest::SHA256, body.as_bytes());
    let sha: String = sha.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let mut end: Value = serde_json::from_str(&lines[last]).unwrap();
    end["end"]["sha256"] = sha.into();
    format!("{body}{end}\n").into_bytes()
}

/// A backup whose revision is far above the target's (10^7, 2^62) restores in seconds on every backend that sets
/// its revision in one step (it took one write per revision: 3 hours for 10^7), and a server on the target answers
/// above it. etcd moves its revision only by writes: it refuses the gap at once, saying what to do.
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_far_ahead_of_the_target_takes_seconds() {
    let etcd = etcd::EtcdServer::start().await;
    let mut seed = Place::new("sqlite", &etcd).await;
    let server = seed.serve().await;
    fill(&server, 3).await;
    seed.stop(server).await;
    let backup = storage(&["backup", "--to", "-"], &seed.flags);
    for revision in [10_000_000_u64, 1 << 62] {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), at_revision(&backup, revision)).unwrap();
        let path = file.path().to_str().unwrap();
        for backend in ["sqlite", "rocksdb", "postgres", "etcd"] {
            let mut target = Place::new(backend, &etcd).await;
            let started = Instant::now();
            let out = std::process::Command::new(BIN)
                .args(["storage", "restore", "--from", path])
                .args(&target.flags)
                .output()
                .unwrap();
            let elapsed = started.elapsed();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(elapsed < Duration::from_secs(30), "{backend}: {elapsed:?}");
            if backend == "etcd" {
                assert!(!out.status.success(), "{stderr}");
                assert!(
                    stderr.contains("moves its revision only by writes")
                        && stderr.contains("--bump-revision"),
                    "{stderr}"
                );
                assert!(target.objects().is_empty());
                continue;
            }
            assert!(out.status.success(), "{backend}: {stderr}");
            let server = target.serve().await;
            let (pizzas, list_rv) = versions(&server).await;
            assert_eq!(pizzas.len(), 3, "{backend}");
            assert!(list_rv > revision, "{backend}: {list_rv} <= {revision}");
            let created = write(&server, 100).await;
            assert!(created > list_rv, "{backend}: {created} <= {list_rv}");
            target.stop(server).await;
        }
    }
}

/// A backup file is readable by its owner only (it holds every object), and a backup of a data directory with no
/// store in it (a mistyped `--data-dir`) fails instead of writing an empty backup, creating nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_backup_is_private_and_needs_a_store() {
    use std::os::unix::fs::PermissionsExt;
    let etcd = etcd::EtcdServer::start().await;
    let mut seed = Place::new("sqlite", &etcd).await;
    let server = seed.serve().await;
    fill(&server, 2).await;
    seed.stop(server).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pizzas.backup");
    // A file left by an earlier backup with a wider mode is narrowed too.
    std::fs::write(dir.path().join("pizzas.partial"), "old").unwrap();
    std::fs::set_permissions(
        dir.path().join("pizzas.partial"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    storage(&["backup", "--to", file.to_str().unwrap()], &seed.flags);
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    assert!(!std::fs::read(&file).unwrap().is_empty());

    let missing = dir.path().join("typo");
    let out_file = dir.path().join("typo.backup");
    for (backend, expected) in [
        ("sqlite", "no SQLite store at"),
        ("rocksdb", "no database there"),
        ("memory", "keeps nothing"),
    ] {
        let out = std::process::Command::new(BIN)
            .args(["storage", "backup", "--to", out_file.to_str().unwrap()])
            .arg(format!("--storage-backend={backend}"))
            .arg(format!("--data-dir={}", missing.display()))
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{backend}: {stderr}");
        assert!(stderr.contains(expected), "{backend}: {stderr}");
        assert!(!out_file.exists(), "{backend}");
        assert!(!missing.exists(), "{backend}");
    }
}

/// A restore from what is not a backup (`/dev/zero`: no line end ever) fails at once, after reading 64 KiB (it read
/// the whole "line": 3.6 GB before it was stopped).
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_from_garbage_fails_fast() {
    let etcd = etcd::EtcdServer::start().await;
    let target = Place::new("sqlite", &etcd).await;
    let started = Instant::now();
    let out = std::process::Command::new(BIN)
        .args(["storage", "restore", "--from", "/dev/zero"])
        .args(&target.flags)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("line 1: longer than 65536 bytes"),
        "{stderr}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(target.objects().is_empty());
}

/// Storage-version migration (kube-controller-manager's `storage-version-migrator-controller`, GA and on by default
/// since 1.37): a server restarted with `--storage-version` reads the objects written in the old version, shows the
/// new version's hash in discovery, and the migrator's request for each object (recorded in
/// `reference/kcm-requests/`: an apply of only `apiVersion`, `kind`, `metadata.uid` and `metadata.resourceVersion`,
/// `fieldManager=storage-version-migrator-controller`, after a metadata list) rewrites it in the new version; one
/// whose resourceVersion has moved on is refused with a 409 and nothing is written.
#[tokio::test(flavor = "multi_thread")]
async fn the_storage_version_migrator_rewrites_every_object() {
    const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
    let dir = tempfile::tempdir().unwrap();
    let flags = vec![
        "--storage-backend=sqlite".to_string(),
        format!("--data-dir={}", dir.path().display()),
    ];
    let stored_versions = |flags: &[String]| -> std::collections::BTreeMap<String, String> {
        let out = storage(&["backup", "--to", "-"], flags);
        String::from_utf8(out)
            .unwrap()
            .lines()
            .filter_map(|l| {
                serde_json::from_str::<Value>(l)
                    .unwrap()
                    .get("object")
                    .cloned()
            })
            .filter(|o| o["key"].as_str().unwrap().contains("/pizzas/"))
            .map(|o| {
                use base64::Engine;
                let value = base64::engine::general_purpose::STANDARD
                    .decode(o["value"].as_str().unwrap())
                    .unwrap();
                let object: Value = serde_json::from_slice(&value).unwrap();
                (
                    object["metadata"]["name"].as_str().unwrap().to_string(),
                    object["apiVersion"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let discovery_hash = async |server: &TestServer| {
        let (code, _, body) = server
            .raw(
                "GET",
                "/apis/restaurant.programming-kubernetes.info/v1beta1",
                &[],
                vec![],
            )
            .await;
        assert_eq!(code, 200);
        support::parse(&body)["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "pizzas")
            .unwrap()["storageVersionHash"]
            .as_str()
            .unwrap()
            .to_string()
    };

    let server = TestServer::start_in(
        dir,
        &["--storage-backend=sqlite", support::NO_COST_CONTROLLER],
    )
    .await;
    fill(&server, 12).await;
    let before = discovery_hash(&server).await;
    let dir = server.stop().await;
    let old = stored_versions(&flags);
    assert!(old.len() >= 8, "{old:?}");
    assert!(
        old.values().all(|v| v.ends_with("/v1alpha1")),
        "pizzas are stored in v1alpha1: {old:?}"
    );

    let server = TestServer::start_in(
        dir,
        &[
            "--storage-backend=sqlite",
            support::NO_COST_CONTROLLER,
            "--storage-version=pizzas.restaurant.programming-kubernetes.info=v1beta1",
        ],
    )
    .await;
    let after = discovery_hash(&server).await;
    assert_ne!(
        before, after,
        "the storage version hash changes with the storage version"
    );
    assert_eq!(
        after,
        apiserver::runtime::storage_version_hash(
            "restaurant.programming-kubernetes.info",
            "v1beta1",
            "Pizza"
        )
    );

    // The migrator: a metadata list, then one apply per object with what the list said.
    let (code, _, body) = server
        .raw(
            "GET",
            &format!("{PIZZAS}?limit=500"),
            &[("accept", METADATA_LIST)],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    let items = support::parse(&body)["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), old.len());
    let apply = |meta: &Value| {
        json!({
            "kind": "Pizza",
            "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
            "metadata": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
        })
    };
    let migrate = async |meta: &Value| {
        server
            .raw(
                "PATCH",
                &format!(
                    "{PIZZAS}/{}?fieldManager=storage-version-migrator-controller",
                    meta["name"].as_str().unwrap()
                ),
                &[
                    ("content-type", "application/apply-patch+yaml"),
                    ("accept", "application/json"),
                ],
                serde_json::to_vec(&apply(meta)).unwrap(),
            )
            .await
    };
    // One object changes after the list: its migration is refused, and retried from a fresh read.
    let changed = &items[0]["metadata"];
    let patch = json!({"metadata": {"labels": {"moved": "on"}}});
    let (code, _, _) = server
        .raw(
            "PATCH",
            &format!("{PIZZAS}/{}", changed["name"].as_str().unwrap()),
            &[("content-type", "application/merge-patch+json")],
            serde_json::to_vec(&patch).unwrap(),
        )
        .await;
    assert_eq!(code, 200);
    let (code, _, body) = migrate(changed).await;
    assert_eq!(code, 409, "{}", String::from_utf8_lossy(&body));
    for item in &items[1..] {
        let (code, _, body) = migrate(&item["metadata"]).await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let migrated = support::parse(&body);
        // Nothing about the object changed but where it is kept: no manager entry for the migrator.
        let managers: Vec<&str> = migrated["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["manager"].as_str().unwrap())
            .collect();
        assert!(
            !managers.contains(&"storage-version-migrator-controller"),
            "{managers:?}"
        );
    }
    let name = changed["name"].as_str().unwrap();
    let (_, _, body) = server
        .raw("GET", &format!("{PIZZAS}/{name}"), &[], vec![])
        .await;
    let (code, _, body) = migrate(&support::parse(&body)["metadata"]).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let dir = server.stop().await;

    let new = stored_versions(&flags);
    assert_eq!(
        new.keys().collect::<Vec<_>>(),
        old.keys().collect::<Vec<_>>()
    );
    assert!(
        new.values().all(|v| v.ends_with("/v1beta1")),
        "every pizza is rewritten in v1beta1: {new:?}"
    );
    drop(dir);

    // A version the server does not serve, or a resource it does not store, is refused at start.
    for bad in [
        "--storage-version=pizzas.restaurant.programming-kubernetes.info=v9",
        "--storage-version=sauces.restaurant.programming-kubernetes.info=v1beta1",
        "--storage-version=pizzas",
    ] {
        let out = std::process::Command::new(BIN)
            .args(["--secure-port=0", "--storage-backend=memory", bad])
            .arg(format!(
                "--data-dir={}",
                tempfile::tempdir().unwrap().path().display()
            ))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--storage-version"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// An `EncryptionConfiguration` with one aesgcm provider per key, in order, for pizzas only.
fn encryption_config(dir: &std::path::Path, name: &str, keys: &[(&str, u8)]) -> String {
    use base64::Engine;
    let providers: String = keys
        .iter()
        .map(|(key, fill)| {
            format!(
                "  - aesgcm:\n      keys:\n      - name: {key}\n        secret: {}\n",
                base64::engine::general_purpose::STANDARD.encode([*fill; 32])
            )
        })
        .collect();
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: \
             [pizzas.restaurant.programming-kubernetes.info]\n  providers:\n{providers}"
        ),
    )
    .unwrap();
    path.display().to_string()
}

/// Whether `needle` is in any file under `dir`.
fn in_files(dir: &std::path::Path, needle: &[u8]) -> bool {
    std::fs::read_dir(dir).unwrap().any(|entry| {
        let path = entry.unwrap().path();
        if path.is_dir() {
            return in_files(&path, needle);
        }
        let bytes = std::fs::read(&path).unwrap_or_default();
        bytes.windows(needle.len()).any(|w| w == needle)
    })
}

/// The stored values of the pizzas in a backup of `flags`' store.
fn stored_pizzas(flags: &[String]) -> Vec<Vec<u8>> {
    use base64::Engine;
    let out = storage(&["backup", "--to", "-"], flags);
    String::from_utf8(out)
        .unwrap()
        .lines()
        .filter_map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap()
                .get("object")
                .cloned()
        })
        .filter(|o| o["key"].as_str().unwrap().contains("/pizzas/"))
        .map(|o| {
            base64::engine::general_purpose::STANDARD
                .decode(o["value"].as_str().unwrap())
                .unwrap()
        })
        .collect()
}

/// `--encryption-provider-config`: the SQLite file holds no plaintext of a pizza written through the server (the
/// toppings, not named in the file, are there in the clear: the search works), every stored pizza has upstream's
/// prefix, reads decrypt; after a rotation (new key first, old second) a no-op update of each pizza leaves only the
/// new key's prefix; a file upstream refuses stops the server at start with upstream's text.
#[tokio::test(flavor = "multi_thread")]
async fn encryption_at_rest_and_a_key_rotation() {
    let etcd = etcd::EtcdServer::start().await;
    let mut place = Place::new("sqlite", &etcd).await;
    let keys = tempfile::tempdir().unwrap();
    let first = encryption_config(keys.path(), "first.yaml", &[("key1", 1)]);
    let rotated = encryption_config(keys.path(), "rotated.yaml", &[("key2", 2), ("key1", 1)]);
    let serve = |place: &mut Place, config: &str| {
        let mut args = place.backend.clone();
        args.push(format!("--encryption-provider-config={config}"));
        let dir = place.dir.take().unwrap();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            TestServer::start_in(dir, &args).await
        }
    };
    let server = serve(&mut place, &first).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    for i in 0..3 {
        let mut body = pizza(i);
        body["metadata"]["labels"]["secret"] = json!("PLAINTEXT-MARKER");
        let (code, _, body) = server
            .raw("POST", PIZZAS, &[], serde_json::to_vec(&body).unwrap())
            .await;
        assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    }
    let (code, _, body) = server
        .raw("GET", &format!("{PIZZAS}/p1"), &[], vec![])
        .await;
    assert_eq!(code, 200);
    assert_eq!(
        support::parse(&body)["metadata"]["labels"]["secret"],
        "PLAINTEXT-MARKER"
    );
    place.stop(server).await;
    let data = place.dir.as_ref().unwrap().path().to_path_buf();
    assert!(!in_files(&data, b"PLAINTEXT-MARKER"));
    assert!(in_files(&data, b"mozzarella"));
    let stored = stored_pizzas(&place.flags);
    assert_eq!(stored.len(), 3);
    for value in &stored {
        assert!(value.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
    }

    // Rotation: every pizza reads; a no-op update (GET, then PUT of the same object) rewrites it with the new key.
    let server = serve(&mut place, &rotated).await;
    for i in 0..3 {
        let url = format!("{PIZZAS}/p{i}");
        let (code, _, body) = server.raw("GET", &url, &[], vec![]).await;
        assert_eq!(code, 200);
        let (code, _, put) = server.raw("PUT", &url, &[], body).await;
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&put));
    }
    place.stop(server).await;
    for value in stored_pizzas(&place.flags) {
        assert!(value.starts_with(b"k8s:enc:aesgcm:v1:key2:"));
    }
    assert!(!in_files(
        place.dir.as_ref().unwrap().path(),
        b"PLAINTEXT-MARKER"
    ));

    // A key of the wrong length: upstream's error, and the server does not start.
    let bad = keys.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: [\"*.*\"]\n  \
         providers:\n  - aescbc:\n      keys:\n      - name: k\n        secret: cGFzc3dvcmQ=\n",
    )
    .unwrap();
    let out = std::process::Command::new(BIN)
        .args(["--secure-port=0", "--bind-address=127.0.0.1"])
        .args(&place.flags)
        .arg(format!("--encryption-provider-config={}", bad.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \"REDACTED\": secret is not of \
             the expected length, got 8, expected one of [16 24 32]"
        ),
        "{stderr}"
    );
}
