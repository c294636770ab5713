//! Durability under `kill -9`: this test binary re-executes itself as a child that writes in a loop (several
//! concurrent writers, creates and updates) and prints every acknowledged write; the parent kills it with SIGKILL,
//! reopens the database and checks that every acknowledged write is there and that the revisions have no holes; a
//! second scenario (`apiserver::storage::testing::crash`) kills it while a watch follows the writes and compaction
//! runs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apiserver::storage::testing::crash;
use apiserver::storage::{EventType, GetOptions, Storage, StoredObject, WatchOptions};
use apiserver_storage_rocks::{RocksOptions, RocksStorage};
use bytes::Bytes;
use futures::StreamExt;

/// Set (to the database directory) only in the child.
const CHILD_ENV: &str = "APISERVER_ROCKS_CRASH_CHILD_DIR";
const WRITERS: usize = 4;
/// Kill the child after this many acknowledgements…
const KILL_AFTER_ACKS: usize = 400;
/// …or after this long, whichever comes first (a loaded machine may be slow).
const KILL_AFTER: Duration = Duration::from_secs(120);

/// The harness's name of `test`, a test of this file: prefixed with the module's path once the file is a module of a
/// larger test binary (`--exact` must name the child test in full, or the child runs nothing).
fn test_name(test: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    }
}

fn options() -> RocksOptions {
    RocksOptions {
        compaction_interval: Duration::ZERO,
        ..RocksOptions::default()
    }
}

/// The child: does nothing unless started by [`acknowledged_writes_survive_sigkill`].
#[test]
fn crash_child_writer() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    crash::runtime().block_on(async move {
        let store = RocksStorage::open(&dir, &options()).expect("child: open");
        let out = Arc::new(Mutex::new(std::io::stdout()));
        let ack = move |o: &StoredObject| {
            let mut out = out.lock().expect("stdout lock");
            let value = std::str::from_utf8(&o.value).expect("utf8");
            writeln!(out, "ACK {} {} {}", o.revision, o.key, value).expect("stdout");
            out.flush().expect("stdout");
        };
        let start = store
            .create("/crash/start", Bytes::from("start"))
            .await
            .expect("child: create start");
        ack(&start);
        let mut tasks = Vec::new();
        for w in 0..WRITERS {
            let store = store.clone();
            let ack = ack.clone();
            tasks.push(tokio::spawn(async move {
                let counter = format!("/crash/counter-{w}");
                for i in 0u64.. {
                    let key = format!("/crash/w{w}/{i:08}");
                    let o = store
                        .create(&key, Bytes::from(format!("v{w}.{i}")))
                        .await
                        .expect("child: create");
                    ack(&o);
                    if i % 3 == 0 {
                        let value = Bytes::from(format!("c{w}.{i}"));
                        let mut set = move |_cur: Option<StoredObject>| {
                            futures::future::ready(Ok(value.clone()))
                        };
                        let o = store
                            .guaranteed_update(&counter, true, None, &mut set, None)
                            .await
                            .expect("child: update");
                        ack(&o);
                    }
                }
            }));
        }
        for t in tasks {
            t.await.expect("child writer");
        }
    });
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            test_name("crash_child_writer").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(rest) = line.strip_prefix("ACK ")
                && tx.send(rest.to_string()).is_err()
            {
                break;
            }
        }
    });
    let deadline = Instant::now() + KILL_AFTER;
    let mut acks = Vec::new();
    while acks.len() < KILL_AFTER_ACKS {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => acks.push(line),
            Err(_) => break,
        }
    }
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the child");
    reader.join().expect("reader thread");
    // Lines printed before the kill were acknowledged too.
    acks.extend(rx.try_iter());
    eprintln!(
        "crash test: killed the child after {} acknowledged writes",
        acks.len()
    );
    assert!(
        acks.len() >= 20,
        "the child acknowledged only {} writes (status {status:?})",
        acks.len()
    );

    let mut acked: BTreeMap<u64, (String, String)> = BTreeMap::new();
    for line in &acks {
        let mut parts = line.splitn(3, ' ');
        let (Some(rev), Some(key), Some(value)) = (parts.next(), parts.next(), parts.next()) else {
            panic!("bad ack line {line:?}");
        };
        let rev: u64 = rev.parse().expect("revision");
        assert!(
            acked
                .insert(rev, (key.to_string(), value.to_string()))
                .is_none(),
            "revision {rev} acknowledged twice"
        );
    }

    crash::runtime().block_on(async move {
        let store = RocksStorage::open(dir.path(), &options()).expect("reopen after SIGKILL");
        let current = store.current_revision().await.expect("current revision");
        let max_acked = *acked.keys().last().expect("acks");
        assert!(
            current >= max_acked,
            "current revision {current} is below the acknowledged {max_acked}"
        );
        // Revision 1 is the start marker; the log must hold every later revision, in order, once.
        let start = store
            .get("/crash/start", &GetOptions::default())
            .await
            .expect("start marker");
        assert_eq!(start.revision, 1);
        let mut seen: BTreeMap<u64, (String, String)> = BTreeMap::new();
        seen.insert(1, ("/crash/start".into(), "start".into()));
        if current > 1 {
            let mut w = store
                .watch(
                    "/crash",
                    &WatchOptions {
                        resource_version: Some(1),
                        recursive: true,
                        ..Default::default()
                    },
                )
                .await
                .expect("watch from revision 1");
            let mut expected = 2;
            while expected <= current {
                let ev = tokio::time::timeout(Duration::from_secs(60), w.next())
                    .await
                    .expect("replay stalled")
                    .expect("watch ended");
                assert!(
                    matches!(ev.event_type, EventType::Added | EventType::Modified),
                    "unexpected event {ev:?}"
                );
                assert_eq!(ev.revision, expected, "hole or disorder in revisions");
                let value = String::from_utf8(ev.value.to_vec()).expect("utf8");
                seen.insert(ev.revision, (ev.key.clone(), value));
                expected += 1;
            }
        }
        for (rev, (key, value)) in &acked {
            assert_eq!(
                seen.get(rev),
                Some(&(key.clone(), value.clone())),
                "acknowledged write {rev} {key} lost or changed"
            );
        }
        // The current state agrees with the log: every create is readable at its own revision.
        for (rev, (key, value)) in &acked {
            if key.contains("/w") {
                let o = store
                    .get(key, &GetOptions::default())
                    .await
                    .expect("acknowledged object");
                assert_eq!((o.revision, o.value.as_ref()), (*rev, value.as_bytes()));
            }
        }
        // Writing goes on from the recovered revision.
        let next = store
            .create("/crash/after", Bytes::from("after"))
            .await
            .expect("write after recovery");
        assert_eq!(next.revision, current + 1);
    });
}

/// Set (to the database directory) only in the child of the watch-and-compaction scenario.
const WATCH_CHILD_ENV: &str = "APISERVER_ROCKS_CRASH_WATCH_CHILD_DIR";

/// The child of [`acknowledged_writes_survive_sigkill_during_watch_and_compaction`]: does nothing otherwise.
#[test]
fn crash_child_with_watch_and_compaction() {
    let Some(dir) = std::env::var_os(WATCH_CHILD_ENV) else {
        return;
    };
    crash::runtime().block_on(async move {
        let store = RocksStorage::open(&dir, &options()).expect("child: open");
        crash::crash_child(Arc::new(store), "/crash").await;
    });
}

/// SIGKILL while a watch follows the writes and compaction runs: nothing acknowledged is lost, compaction is not
/// undone, and no watch skips or repeats a write, before or after the restart.
#[test]
fn acknowledged_writes_survive_sigkill_during_watch_and_compaction() {
    if std::env::var_os(CHILD_ENV).is_some() || std::env::var_os(WATCH_CHILD_ENV).is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = crash::run_and_kill(
        &test_name("crash_child_with_watch_and_compaction"),
        (WATCH_CHILD_ENV, dir.path().as_os_str()),
        1000,
    );
    crash::runtime().block_on(async move {
        let store = RocksStorage::open(dir.path(), &options()).expect("reopen after SIGKILL");
        crash::check_after_crash(Arc::new(store), "/crash", &lines).await;
    });
}
