//! A writer process killed with SIGKILL while a watch follows its writes and compaction runs (feature `testing`),
//! for the embedded backends, whose store lives in the server's own process.
//!
//! The test binary re-executes itself: the child ([`crash_child`]) creates objects from several tasks, follows
//! them with a watch and compacts all but the newest revisions over and over, printing a line for each fact; the
//! parent ([`run_and_kill`]) kills it mid-stream, reopens the store and [`check_after_crash`] checks that every
//! acknowledged write and compaction survived, and that neither the child's watch nor a watch after the restart
//! skipped or repeated an acknowledged write.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;

use crate::{EventType, GetOptions, Storage, WatchOptions};

/// Concurrent writers in the child.
const WRITERS: usize = 4;
/// Revisions the child's compactor keeps.
const KEEP: u64 = 50;
/// How often the child compacts.
const COMPACT_EVERY: Duration = Duration::from_millis(20);

/// The runtime a crash test's child and its parent's checks run on: two workers, as the server's machine has.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The child half: creates `<prefix>/w<writer>/<i>` forever while a watch follows the prefix and a compactor
/// compacts up to the newest revisions (never past the watch); prints `ACK <revision> <key> <value>`, `WATCHED <revision>`, `COMPACTED <revision>` and `WATCH-END
/// <why>` lines, each once its fact is true.
pub async fn crash_child(store: Arc<dyn Storage>, prefix: &str) {
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = move |line: String| {
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(out, "{line}").expect("stdout");
        out.flush().expect("stdout");
    };
    // Ends the test harness's `test <name> ... ` line (it has no newline yet), so that no fact is glued to it.
    say(String::new());
    let from = store.current_revision().await.expect("child: revision");
    let mut watch = store
        .watch(
            prefix,
            &WatchOptions {
                resource_version: Some(from),
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("child: watch");
    // The compactor never passes the watch, which would then rightly end with "compacted".
    let reached = Arc::new(AtomicU64::new(from));
    let watcher = {
        let (say, reached) = (say.clone(), reached.clone());
        tokio::spawn(async move {
            while let Some(event) = watch.next().await {
                match event.event_type {
                    EventType::Error => {
                        say(format!("WATCH-END {:?}", event.error));
                        return;
                    }
                    EventType::Bookmark => {}
                    _ => {
                        say(format!("WATCHED {}", event.revision));
                        reached.store(event.revision, Ordering::Release);
                    }
                }
            }
            say("WATCH-END stream ended".into());
        })
    };
    let compactor = {
        let (store, say, reached) = (store.clone(), say.clone(), reached.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(COMPACT_EVERY).await;
                let current = store.current_revision().await.expect("child: revision");
                let at = current
                    .saturating_sub(KEEP)
                    .min(reached.load(Ordering::Acquire));
                if at > 0 {
                    store.compact(at).await.expect("child: compact");
                    say(format!("COMPACTED {at}"));
                }
            }
        })
    };
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (store, say, prefix) = (store.clone(), say.clone(), prefix.to_string());
        writers.push(tokio::spawn(async move {
            for i in 0u64.. {
                let key = format!("{prefix}/w{w}/{i:08}");
                let value = format!("v{w}.{i}");
                let o = store
                    .create(&key, Bytes::from(value.clone()))
                    .await
                    .expect("child: create");
                say(format!("ACK {} {key} {value}", o.revision));
            }
        }));
    }
    for task in writers {
        task.await.expect("child writer");
    }
    watcher.abort();
    compactor.abort();
}

/// What the child printed before it was killed.
#[derive(Debug, Default)]
pub struct ChildLines {
    /// Acknowledged creates by revision: (key, value).
    pub acked: BTreeMap<u64, (String, String)>,
    /// Revisions the child's watch delivered, in order.
    pub watched: Vec<u64>,
    /// The newest compaction that returned.
    pub compacted: u64,
    /// Why the child's watch ended, if it did.
    pub watch_end: Option<String>,
}

impl ChildLines {
    fn read(&mut self, line: &str) {
        let mut parts = line.splitn(2, ' ');
        let (Some(kind), Some(rest)) = (parts.next(), parts.next()) else {
            return;
        };
        match kind {
            "ACK" => {
                let mut fields = rest.splitn(3, ' ');
                if let (Some(Ok(rev)), Some(key), Some(value)) =
                    (fields.next().map(str::parse), fields.next(), fields.next())
                {
                    let fresh = self
                        .acked
                        .insert(rev, (key.to_string(), value.to_string()))
                        .is_none();
                    assert!(fresh, "revision {rev} acknowledged twice");
                }
            }
            "WATCHED" => self.watched.extend(rest.parse::<u64>().ok()),
            "COMPACTED" => {
                self.compacted = self.compacted.max(rest.parse().unwrap_or(0));
            }
            "WATCH-END" => self.watch_end = Some(rest.to_string()),
            _ => {}
        }
    }
}

/// Runs `current_exe --exact <child_test>` with `env` set, reads its lines until `acks` writes were acknowledged (or
/// two minutes passed: a loaded machine), then kills it with SIGKILL and returns everything it printed.
pub fn run_and_kill(child_test: &str, env: (&str, &OsStr), acks: usize) -> ChildLines {
    let exe = std::env::current_exe().expect("current_exe");
    let mut child = Command::new(exe)
        .args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .env(env.0, env.1)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = ChildLines::default();
    let deadline = Instant::now() + Duration::from_secs(120);
    while lines.acked.len() < acks {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) => lines.read(&line),
            Err(_) => break,
        }
    }
    child.kill().expect("SIGKILL the child");
    let status = child.wait().expect("wait for the child");
    reader.join().expect("reader thread");
    // Lines printed before the kill are facts too.
    for line in rx.try_iter() {
        lines.read(&line);
    }
    assert!(!status.success(), "the child was killed, not finished");
    eprintln!(
        "crash: killed the child after {} acknowledged writes, {} watched, compacted at {}",
        lines.acked.len(),
        lines.watched.len(),
        lines.compacted
    );
    lines
}

/// Checks a store reopened after the kill against what the child printed: compaction ran and is not undone,
/// every acknowledged create is there as written, the child's watch delivered every acknowledged write it reached
/// in order and once, and a watch from the compacted revision now replays every later acknowledged write the same
/// way; then the store takes writes again.
pub async fn check_after_crash(store: Arc<dyn Storage>, prefix: &str, lines: &ChildLines) {
    assert!(
        lines.acked.len() >= 20,
        "too few writes before the kill: {lines:?}"
    );
    assert!(lines.compacted > 0, "the child never compacted");
    assert!(
        lines.watch_end.is_none(),
        "the child's watch ended: {:?}",
        lines.watch_end
    );
    in_order_without_skips(&lines.watched, &lines.acked, 0, "the child's watch");

    let compacted = store.compact_revision().await.expect("compact revision");
    assert!(
        compacted >= lines.compacted,
        "compaction at {} was acknowledged, the reopened store says {compacted}",
        lines.compacted
    );
    let current = store.current_revision().await.expect("current revision");
    let newest = *lines.acked.keys().last().expect("acks");
    assert!(
        current >= newest,
        "revision {current} is below the acknowledged {newest}"
    );
    for (rev, (key, value)) in &lines.acked {
        let o = store
            .get(key, &GetOptions::default())
            .await
            .unwrap_or_else(|e| panic!("acknowledged write {rev} {key} lost: {e}"));
        assert_eq!(
            (o.revision, o.value.as_ref()),
            (*rev, value.as_bytes()),
            "{key}"
        );
    }
    let mut watch = store
        .watch(
            prefix,
            &WatchOptions {
                resource_version: Some(compacted),
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("watch from the compacted revision");
    let mut replayed = Vec::new();
    while replayed.last().is_none_or(|r| *r < newest) {
        let event = tokio::time::timeout(Duration::from_secs(60), watch.next())
            .await
            .expect("the replay stalled")
            .expect("the replay ended");
        match event.event_type {
            EventType::Added | EventType::Modified | EventType::Deleted => {
                replayed.push(event.revision)
            }
            EventType::Bookmark => {}
            EventType::Error => panic!("the replay failed: {:?}", event.error),
        }
    }
    in_order_without_skips(
        &replayed,
        &lines.acked,
        compacted,
        "the watch after the restart",
    );
    store
        .create(&format!("{prefix}/after"), Bytes::from("after"))
        .await
        .expect("write after recovery");
}

/// `seen` is strictly increasing, and holds every acknowledged revision above `after` up to the last one seen.
fn in_order_without_skips(
    seen: &[u64],
    acked: &BTreeMap<u64, (String, String)>,
    after: u64,
    what: &str,
) {
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "{what} repeated or reordered revisions"
    );
    let Some(&last) = seen.last() else {
        panic!("{what} delivered nothing");
    };
    let seen: BTreeSet<u64> = seen.iter().copied().collect();
    let skipped: Vec<u64> = acked
        .range(after + 1..=last)
        .map(|(rev, _)| *rev)
        .filter(|rev| !seen.contains(rev))
        .collect();
    assert!(
        skipped.is_empty(),
        "{what} skipped acknowledged writes {skipped:?}"
    );
}
