//! A full disk under a backend (feature `testing`): a small tmpfs mounted for the test (needs root and a kernel
//! that allows the mount; [`SmallFs::mount`] says why not otherwise, and the caller skips rather than fakes it),
//! and the scenario [`check_disk_full`]: load, fill the filesystem, load, free it, load, reopen.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::linearizability::{
    KvInput, Recorder, RunStats, Workload, check_kv_history, read_finals, record_storage_history,
};
use crate::Storage;

/// A tmpfs of a fixed size mounted on a temporary directory, unmounted when dropped.
pub struct SmallFs {
    dir: PathBuf,
}

impl SmallFs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it, e.g. `"16m"`); `Err` with the reason when that is
    /// not possible here (not root, no mount permission in a container).
    pub fn mount(size: &str) -> Result<SmallFs, String> {
        let dir = std::env::temp_dir().join(format!(
            "apiserver-small-fs-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir(&dir).map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallFs { dir })
    }

    /// [`mount`](Self::mount), or `None` after saying on stderr that the calling test is skipped and why.
    pub fn mount_or_skip(size: &str) -> Option<SmallFs> {
        match SmallFs::mount(size) {
            Ok(fs) => Some(fs),
            Err(why) => {
                eprintln!("SKIPPED: cannot make a small filesystem here: {why}");
                None
            }
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Fills the filesystem with a file until writing fails; returns the file.
    pub fn fill(&self) -> PathBuf {
        use std::io::Write;
        let path = self.path().join("filler");
        let mut f = std::fs::File::create(&path).expect("filler file");
        let chunk = vec![0u8; 16 * 1024];
        while f.write_all(&chunk).is_ok() {}
        // The last bytes, smaller than a chunk.
        while f.write_all(&chunk[..512]).is_ok() {}
        let _ = f.sync_all();
        path
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let unmounted = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.dir)
            .status()
            .is_ok_and(|s| s.success());
        if unmounted {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// What [`check_disk_full`] saw, for the report.
#[derive(Debug)]
pub struct DiskFullReport {
    /// The load before the disk filled.
    pub before: RunStats,
    /// Writes of [`BALLAST_BYTES`] the store took after the filesystem was full, before one failed.
    pub ballast: usize,
    /// The load on a full disk.
    pub full: RunStats,
    /// How long the store took to write again once space returned.
    pub resumed: Duration,
    /// The load after space returned.
    pub after: RunStats,
    /// Operations checked for linearizability.
    pub operations: usize,
}

/// Runs the scenario on a store `open` opens in `fs` (called at the start, and after dropping the first store, to
/// reopen): a random load; the disk filled; the same load, in which writes must fail with a 5xx error (not hang,
/// not panic) while every read still answers; space freed, after which the same store must take writes again
/// within [`RESUME_WITHIN`] and be ready; the load again, which must succeed entirely; then the store reopened must
/// read what the first one read last. The whole history must be linearizable.
pub async fn check_disk_full<F, Fut>(fs: &SmallFs, open: F) -> DiskFullReport
where
    F: Fn(PathBuf) -> Fut,
    Fut: Future<Output = Arc<dyn Storage>>,
{
    let store = open(fs.path().to_path_buf()).await;
    let rec = Recorder::new();
    let prefix = "/registry/diskfull";
    let workload = |seed| Workload {
        clients: 4,
        keys: 4,
        ops_per_client: 40,
        op_timeout: Duration::from_secs(20),
        seed,
        duration: None,
    };
    let seed = uuid::Uuid::new_v4().as_u64_pair().0;
    let before = record_storage_history(store.clone(), prefix, &workload(seed), &rec).await;
    assert_eq!(
        before.errors + before.timeouts,
        0,
        "before the disk filled: {before:?}"
    );

    let filler = fs.fill();
    let ballast = use_up_reserves(store.as_ref()).await;
    let full_from = rec.now();
    let full = record_storage_history(store.clone(), prefix, &workload(seed + 100), &rec).await;
    let full_to = rec.now();
    assert_eq!(full.timeouts, 0, "calls hung on a full disk: {full:?}");
    assert!(full.errors > 0, "no write failed on a full disk: {full:?}");
    assert!(
        full.error_codes.keys().all(|c| *c >= 500),
        "a full disk must be a 5xx: {full:?}"
    );
    let history = rec.history();
    let failed_reads = history
        .iter()
        .filter(|k| k.op.call >= full_from && k.op.call <= full_to)
        .filter(|k| k.op.input == KvInput::Get && k.op.output.is_none())
        .count();
    assert_eq!(failed_reads, 0, "reads failed on a full disk: {full:?}");

    std::fs::remove_file(filler).expect("free the disk");
    let resumed = resume(store.as_ref()).await;
    let after = record_storage_history(store.clone(), prefix, &workload(seed + 200), &rec).await;
    assert_eq!(
        after.errors + after.timeouts,
        0,
        "writes did not resume once space returned: {after:?}"
    );

    let keys: Vec<String> = (0..4).map(|k| format!("{prefix}/k{k}")).collect();
    let finals = read_finals(store.as_ref(), &keys, &rec).await;
    drop(store);
    // The first store's background tasks may hold the database for a moment after the drop.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let reopened = open(fs.path().to_path_buf()).await;
    let again = read_finals(reopened.as_ref(), &keys, &rec).await;
    assert_eq!(finals, again, "the reopened store reads something else");

    let history = rec.history();
    let report = tokio::task::spawn_blocking(move || check_kv_history(&history))
        .await
        .expect("checker");
    assert!(report.is_linearizable(), "{report}");
    DiskFullReport {
        before,
        ballast,
        full,
        resumed,
        after,
        operations: report.operations,
    }
}

/// The size of each write the disk-full scenario makes to spend a backend's reserve (`use_up_reserves`).
pub const BALLAST_BYTES: usize = 64 * 1024;

/// Writes values of [`BALLAST_BYTES`] (under a prefix of their own) until one fails, and returns how many were
/// taken: a backend may have room set aside before the disk filled (RocksDB preallocates its write-ahead log, a
/// little more than a memtable), and only once that is spent is the disk full for it.
pub async fn use_up_reserves(store: &dyn Storage) -> usize {
    // Compressible, so that a backend that compresses what it flushes needs little room to recover.
    let value = bytes::Bytes::from(vec![b'x'; BALLAST_BYTES]);
    for i in 0..4096 {
        let key = format!("/registry/diskfull-ballast/{i}");
        if store.create(&key, value.clone()).await.is_err() {
            return i;
        }
    }
    panic!("the store took 4096 writes of {BALLAST_BYTES} bytes on a full disk");
}

/// How long a store may take to write again once space has returned (RocksDB looks every 5 s).
pub const RESUME_WITHIN: Duration = Duration::from_secs(30);

/// Waits until `store` takes a write (of a key outside the checked ones) and reports itself ready; how long that
/// took.
async fn resume(store: &dyn Storage) -> Duration {
    let start = std::time::Instant::now();
    let probe = "/registry/diskfull-probe/p";
    let mut last = String::new();
    while start.elapsed() < RESUME_WITHIN {
        match store
            .create(probe, bytes::Bytes::from_static(b"probe"))
            .await
        {
            Ok(_) => {
                let ready = store.readiness().await;
                assert!(ready.is_ok(), "a store that writes is not ready: {ready:?}");
                return start.elapsed();
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("writes did not resume within {RESUME_WITHIN:?} of space returning: {last}");
}
