//! kill -9 of a writer process on SQLite loses no acknowledged write.
//!
//! The test binary re-executes itself as the writer: with `SQL_CRASH_CHILD_DB` set, `crash_child_writer` opens
//! the store and writes from several tasks, printing `ACK <key> <revision>` after each write returns. The parent
//! kills it with SIGKILL mid-stream, reopens the file and checks every acknowledged write. A second scenario
//! (`apiserver::storage::testing::crash`) kills it while a watch follows the writes and compaction runs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::storage::testing::crash;
use apiserver::storage::{GetOptions, Storage};
use apiserver_storage_sql::SqlStorage;
use bytes::Bytes;

const CHILD_ENV: &str = "SQL_CRASH_CHILD_DB";

/// The harness's name of `test`, a test of this file: prefixed with the module's path once the file is a module of a
/// larger test binary (`--exact` must name the child test in full, or the child runs nothing).
fn test_name(test: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{test}"),
        None => test.to_string(),
    }
}

/// The writer half; a no-op unless started by `kill_9_loses_no_acknowledged_write`.
#[test]
fn crash_child_writer() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    crash::runtime().block_on(async move {
        // The default durability (synchronous=FULL).
        let store = SqlStorage::connect(&url).await.expect("open");
        let mut tasks = Vec::new();
        for t in 0..4 {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0.. {
                    let key = format!("/crash/{t}-{i}");
                    let o = store
                        .create(&key, Bytes::from(format!("value {t}-{i}")))
                        .await
                        .expect("create");
                    // One line per acknowledged write; println! locks stdout for the whole line.
                    println!("ACK {key} {}", o.revision);
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("state.db").display());
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            test_name("crash_child_writer").as_str(),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the writer");
    let stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut acked = BTreeMap::new();
        let mut lines = BufReader::new(stdout).lines();
        let started = Instant::now();
        while let Some(Ok(line)) = lines.next() {
            if let Some(rest) = line.strip_prefix("ACK ") {
                let mut parts = rest.split(' ');
                let (Some(key), Some(rev)) = (parts.next(), parts.next()) else {
                    continue;
                };
                let rev: u64 = rev.parse().expect("revision");
                acked.insert(key.to_string(), rev);
            }
            if acked.len() >= 300 || started.elapsed() > Duration::from_secs(120) {
                // The caller kills the writer now and reads what it had acknowledged until then.
                return (acked, lines);
            }
        }
        panic!(
            "the writer stopped before it was killed ({} acks)",
            acked.len()
        );
    });
    let (mut acked, lines) = reader.join().expect("reader");
    child.kill().expect("SIGKILL the writer");
    let status = child.wait().expect("wait");
    assert!(!status.success(), "the writer was killed, not finished");
    // Lines the writer printed before it died are acknowledgements too.
    for line in lines.map_while(Result::ok) {
        if let Some(rest) = line.strip_prefix("ACK ") {
            let mut parts = rest.split(' ');
            if let (Some(key), Some(Ok(rev))) = (parts.next(), parts.next().map(str::parse::<u64>))
            {
                acked.insert(key.to_string(), rev);
            }
        }
    }
    assert!(
        acked.len() >= 300,
        "too few writes before the kill: {}",
        acked.len()
    );

    let store = SqlStorage::connect(&url)
        .await
        .expect("reopen after the crash");
    for (key, rev) in &acked {
        let o = store
            .get(key, &GetOptions::default())
            .await
            .unwrap_or_else(|e| panic!("acknowledged write {key} at {rev} lost: {e}"));
        assert_eq!(o.revision, *rev, "{key}");
        let suffix = key.trim_start_matches("/crash/");
        assert_eq!(o.value, Bytes::from(format!("value {suffix}")));
    }
    // Revisions stay gap-free across the crash: every revision up to the current one holds a write.
    let current = store.current_revision().await.expect("rev");
    assert!(current >= acked.values().copied().max().unwrap_or(0));
    assert_eq!(store.log_rows().await.expect("rows"), current);
    // And the store takes writes again.
    store
        .create("/crash/after", Bytes::from("x"))
        .await
        .expect("write after recovery");
}

/// Set (to the database URL) only in the child of the watch-and-compaction scenario.
const WATCH_CHILD_ENV: &str = "SQL_CRASH_WATCH_CHILD_DB";

/// The child of [`kill_9_during_watch_and_compaction_loses_nothing`]: does nothing otherwise.
#[test]
fn crash_child_with_watch_and_compaction() {
    let Ok(url) = std::env::var(WATCH_CHILD_ENV) else {
        return;
    };
    crash::runtime().block_on(async move {
        let store = SqlStorage::connect(&url).await.expect("child: open");
        crash::crash_child(Arc::new(store), "/crash").await;
    });
}

/// kill -9 while a watch follows the writes and compaction runs: nothing acknowledged is lost, compaction is not
/// undone, and no watch skips or repeats a write, before or after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_watch_and_compaction_loses_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("state.db").display());
    let child_url = url.clone();
    let lines = tokio::task::spawn_blocking(move || {
        crash::run_and_kill(
            &test_name("crash_child_with_watch_and_compaction"),
            (WATCH_CHILD_ENV, std::ffi::OsStr::new(&child_url)),
            300,
        )
    })
    .await
    .expect("the child");
    let store = SqlStorage::connect(&url)
        .await
        .expect("reopen after the crash");
    crash::check_after_crash(Arc::new(store), "/crash", &lines).await;
}
