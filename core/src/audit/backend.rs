//! Where audit events go: a log file (or stdout), written in the request's path or in batches, and a webhook
//! that gets `EventList`s in batches (upstream's `log`, `webhook` and `buffered` plugins).
//!
//! Events reach a backend already encoded (one JSON document and a newline each), so an event is serialized
//! once whatever the number of backends, and the log writes it as it is.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::RwLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use chrono::{NaiveDateTime, Utc};
use tokio::sync::mpsc;

/// The timestamp in rotated files' names (lumberjack's `2006-01-02T15-04-05.000`, UTC).
const BACKUP_TIME_FORMAT: &str = "%Y-%m-%dT%H-%M-%S%.3f";

/// Something events are written to in batches.
#[async_trait::async_trait]
pub trait Sink: Send + Sync + 'static {
    /// The plugin name for logs (`log`, `webhook`).
    fn name(&self) -> &'static str;
    /// Writes events (each a JSON document and a newline) in order.
    async fn write(&self, events: &[Bytes]) -> Result<(), String>;
}

/// The audit log: one JSON event per line, in a file with lumberjack's size-based rotation or on stdout.
pub struct LogSink {
    /// Writers share the file (appends of one `write` each do not interleave); rotation takes it alone.
    out: RwLock<LogOutput>,
}

enum LogOutput {
    Stdout,
    File(RotatingFile),
}

/// When the log file is rotated and which rotated files are kept.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rotation {
    /// Rotate once the file would grow past this many megabytes (0: never, as upstream since 1.36).
    pub max_size_mb: u64,
    /// Delete rotated files older than this many days (0: keep).
    pub max_age_days: u64,
    /// Keep at most this many rotated files (0: all).
    pub max_backups: usize,
}

struct RotatingFile {
    path: PathBuf,
    file: File,
    size: AtomicU64,
    rotation: Option<Rotation>,
}

impl LogSink {
    /// Opens (creating, mode 0600) `path` for appending, or stdout for `-`.
    pub fn open(path: &Path, rotation: Rotation) -> Result<LogSink, String> {
        if path == Path::new("-") {
            return Ok(LogSink {
                out: RwLock::new(LogOutput::Stdout),
            });
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let file = open_append(path)?;
        let metadata = file
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // Only a regular file rotates: renaming `/dev/null` or a pipe away would put a plain file in its place.
        let rotates = rotation.max_size_mb > 0 && metadata.is_file();
        Ok(LogSink {
            out: RwLock::new(LogOutput::File(RotatingFile {
                path: path.to_path_buf(),
                file,
                size: AtomicU64::new(metadata.len()),
                rotation: rotates.then_some(rotation),
            })),
        })
    }

    /// Writes the events (lines) in one write call.
    pub fn write_now(&self, events: &[Bytes]) -> Result<(), String> {
        match events {
            [one] => self.write_lines(one),
            many => self.write_lines(&many.concat()),
        }
    }

    /// Writes `buf` (whole lines) in one write call, rotating the file first if it would grow past its size.
    ///
    /// The write, and the wait for a rotation in progress (a rename, a new file and a directory scan), happen in
    /// the request's path (blocking mode: the line is in the file when this returns). On a multi-threaded Tokio
    /// runtime the worker says so first (`block_in_place`), so that its other tasks move to another thread
    /// rather than wait behind the disk.
    pub fn write_lines(&self, buf: &[u8]) -> Result<(), String> {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime)
                if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                tokio::task::block_in_place(|| self.write_lines_now(buf))
            }
            _ => self.write_lines_now(buf),
        }
    }

    fn write_lines_now(&self, buf: &[u8]) -> Result<(), String> {
        {
            let out = self.out.read().unwrap_or_else(|p| p.into_inner());
            match &*out {
                LogOutput::Stdout => {
                    return std::io::stdout()
                        .lock()
                        .write_all(buf)
                        .map_err(|e| e.to_string());
                }
                LogOutput::File(file) if !file.is_full(buf.len()) => return file.append(buf),
                LogOutput::File(_) => {}
            }
        }
        let mut out = self.out.write().unwrap_or_else(|p| p.into_inner());
        if let LogOutput::File(file) = &mut *out {
            if file.is_full(buf.len()) {
                file.rotate()?;
            }
            file.append(buf)?;
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Sink for LogSink {
    fn name(&self) -> &'static str {
        "log"
    }

    async fn write(&self, events: &[Bytes]) -> Result<(), String> {
        self.write_now(events)
    }
}

fn open_append(path: &Path) -> Result<File, String> {
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

impl RotatingFile {
    /// Whether `len` more bytes would take the file past its rotation size.
    fn is_full(&self, len: usize) -> bool {
        self.rotation.is_some_and(|rotation| {
            let size = self.size.load(Ordering::Relaxed);
            size > 0 && size + len as u64 > rotation.max_size_mb * 1024 * 1024
        })
    }

    fn append(&self, buf: &[u8]) -> Result<(), String> {
        (&self.file).write_all(buf).map_err(|e| e.to_string())?;
        self.size.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Renames the file to `<name>-<time><ext>`, opens a new one, and prunes rotated files.
    fn rotate(&mut self) -> Result<(), String> {
        let Some(rotation) = self.rotation else {
            return Ok(());
        };
        let (stem, ext) = split_name(&self.path);
        let time = Utc::now().format(BACKUP_TIME_FORMAT);
        let backup = self.path.with_file_name(format!("{stem}-{time}{ext}"));
        std::fs::rename(&self.path, &backup).map_err(|e| format!("rotating audit log: {e}"))?;
        self.file = open_append(&self.path)?;
        self.size.store(0, Ordering::Relaxed);
        if let Err(e) = prune(&self.path, rotation) {
            tracing::warn!("pruning rotated audit logs: {e}");
        }
        Ok(())
    }
}

/// `audit.log` → (`audit`, `.log`).
fn split_name(path: &Path) -> (String, String) {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match name.rfind('.') {
        Some(dot) if dot > 0 => (name[..dot].to_string(), name[dot..].to_string()),
        _ => (name, String::new()),
    }
}

/// Deletes rotated files beyond `max_backups` (oldest first) and older than `max_age_days`.
fn prune(path: &Path, rotation: Rotation) -> std::io::Result<()> {
    let (stem, ext) = split_name(path);
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => dir.to_path_buf(),
        None => PathBuf::from("."),
    };
    let mut backups: Vec<(NaiveDateTime, PathBuf)> = std::fs::read_dir(&dir)?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let time = name.strip_prefix(&format!("{stem}-"))?.strip_suffix(&ext)?;
            let time = NaiveDateTime::parse_from_str(time, BACKUP_TIME_FORMAT).ok()?;
            Some((time, entry.path()))
        })
        .collect();
    backups.sort_by_key(|b| std::cmp::Reverse(b.0));
    let cutoff = Utc::now().naive_utc()
        - chrono::Duration::days(i64::try_from(rotation.max_age_days).unwrap_or(i64::MAX / 2));
    for (i, (time, path)) in backups.iter().enumerate() {
        let too_many = rotation.max_backups > 0 && i >= rotation.max_backups;
        let too_old = rotation.max_age_days > 0 && *time < cutoff;
        if too_many || too_old {
            std::fs::remove_file(path)?;
        }
    }
    Ok(())
}

/// The audit webhook: `POST`s an `audit.k8s.io/v1` `EventList` per batch to the server its kubeconfig names,
/// retrying failed batches with backoff (upstream's `webhook` plugin).
#[cfg(feature = "cluster")]
pub struct WebhookSink {
    client: kube::Client,
    initial_backoff: Duration,
}

/// How often a failed batch is tried in all (upstream's `DefaultRetryBackoff` steps).
#[cfg(feature = "cluster")]
const WEBHOOK_ATTEMPTS: u32 = 5;

#[cfg(feature = "cluster")]
impl WebhookSink {
    /// A sink for the kubeconfig at `path` (its current context's server is the webhook URL).
    pub async fn new(path: &Path, initial_backoff: Duration) -> Result<WebhookSink, String> {
        let config = crate::cluster::config(Some(path))
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("{}: no cluster", path.display()))?;
        let client = crate::cluster::request_client(&config).map_err(|e| e.to_string())?;
        Ok(WebhookSink {
            client,
            initial_backoff,
        })
    }

    async fn post(&self, body: Vec<u8>) -> Result<(), String> {
        // An authority-form URI has no path, so the client sends to the kubeconfig's URL exactly as written
        // (a path would be appended to it).
        let request = http::Request::post(http::Uri::from_static("audit-webhook"))
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(body)
            .map_err(|e| e.to_string())?;
        self.client
            .request_text(request)
            .await
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

#[cfg(feature = "cluster")]
#[async_trait::async_trait]
impl Sink for WebhookSink {
    fn name(&self) -> &'static str {
        "webhook"
    }

    async fn write(&self, events: &[Bytes]) -> Result<(), String> {
        let mut body = Vec::with_capacity(events.iter().map(|e| e.len() + 1).sum::<usize>() + 80);
        body.extend_from_slice(
            br#"{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":["#,
        );
        for (i, event) in events.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            body.extend_from_slice(event);
        }
        body.extend_from_slice(b"]}");
        let mut wait = self.initial_backoff;
        let mut attempt = 1;
        loop {
            match self.post(body.clone()).await {
                Ok(()) => return Ok(()),
                Err(e) if attempt >= WEBHOOK_ATTEMPTS => return Err(e),
                Err(e) => {
                    tracing::debug!(attempt, "audit webhook failed, retrying: {e}");
                    tokio::time::sleep(wait).await;
                    wait = wait.mul_f64(1.5);
                    attempt += 1;
                }
            }
        }
    }
}

/// How a batching backend groups events.
#[derive(Clone, Copy, Debug)]
pub struct BatchConfig {
    /// Events queued before new ones are dropped.
    pub buffer_size: usize,
    /// Most events per write.
    pub max_size: usize,
    /// Longest an event waits for its batch to fill.
    pub max_wait: Duration,
}

/// Queues events for a task that writes them in batches; a full queue drops events (with an error in the
/// log), so a slow sink never holds up requests.
pub struct Batched {
    name: &'static str,
    max_size: usize,
    /// Wakes the writer early when a whole batch is queued.
    full: std::sync::Arc<tokio::sync::Notify>,
    queue: RwLock<Option<mpsc::Sender<Bytes>>>,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Batched {
    /// Starts the writing task.
    pub fn start(sink: std::sync::Arc<dyn Sink>, config: BatchConfig) -> Batched {
        let (tx, mut rx) = mpsc::channel::<Bytes>(config.buffer_size.max(1));
        let name = sink.name();
        let max_size = config.max_size.max(1);
        let full = std::sync::Arc::new(tokio::sync::Notify::new());
        let woken = full.clone();
        let task = tokio::spawn(async move {
            let mut batch = Vec::with_capacity(max_size);
            loop {
                let Some(first) = rx.recv().await else { break };
                batch.push(first);
                let filled = rx.len() + 1 >= max_size;
                if max_size > 1 && !config.max_wait.is_zero() && !filled && !rx.is_closed() {
                    // The batch fills while the writer sleeps: waiting on the queue instead would wake the writer
                    // (a thread switch) for every event, which costs more than writing it.
                    let deadline = tokio::time::Instant::now() + config.max_wait;
                    tokio::select! {
                        _ = tokio::time::sleep_until(deadline) => {}
                        _ = woken.notified() => {}
                    }
                }
                while batch.len() < max_size {
                    match rx.try_recv() {
                        Ok(event) => batch.push(event),
                        Err(_) => break,
                    }
                }
                if let Err(e) = sink.write(&batch).await {
                    tracing::error!(
                        plugin = name,
                        events = batch.len(),
                        "Error in audit plugin '{name}' affecting {} audit events: {e}",
                        batch.len()
                    );
                }
                batch.clear();
            }
        });
        Batched {
            name,
            max_size,
            full,
            queue: RwLock::new(Some(tx)),
            task: tokio::sync::Mutex::new(Some(task)),
        }
    }

    /// Queues an event; `false` when the queue is full or closed (the event is dropped).
    pub fn enqueue(&self, event: Bytes) -> bool {
        let queue = self.queue.read().unwrap_or_else(|p| p.into_inner());
        let sent = queue.as_ref().is_some_and(|q| {
            let sent = q.try_send(event).is_ok();
            if sent && self.max_size > 1 && q.max_capacity() - q.capacity() >= self.max_size {
                self.full.notify_one();
            }
            sent
        });
        if !sent {
            tracing::error!(
                plugin = self.name,
                "Error in audit plugin '{}' affecting 1 audit events: audit buffer queue blocked",
                self.name
            );
        }
        sent
    }

    /// Stops taking events and waits until every queued one has been written.
    pub async fn shutdown(&self) {
        drop(self.queue.write().unwrap_or_else(|p| p.into_inner()).take());
        // A writer waiting for its batch to fill writes it now.
        self.full.notify_one();
        if let Some(task) = self.task.lock().await.take() {
            let _ = task.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the size of each batch written.
    #[derive(Default)]
    struct Batches(std::sync::Mutex<Vec<usize>>);

    #[async_trait::async_trait]
    impl Sink for Batches {
        fn name(&self) -> &'static str {
            "test"
        }

        async fn write(&self, events: &[Bytes]) -> Result<(), String> {
            self.0.lock().unwrap().push(events.len());
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_full_batch_and_shutdown_do_not_wait_for_max_wait() {
        let sink = std::sync::Arc::new(Batches::default());
        let batched = Batched::start(
            sink.clone(),
            BatchConfig {
                buffer_size: 100,
                max_size: 3,
                max_wait: Duration::from_secs(600),
            },
        );
        for _ in 0..3 {
            assert!(batched.enqueue(Bytes::from_static(b"{}\n")));
        }
        let waited = tokio::time::timeout(Duration::from_secs(60), async {
            while sink.0.lock().unwrap().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "a full batch is written at once");
        assert_eq!(*sink.0.lock().unwrap(), vec![3]);
        // One event waits for its batch to fill, until shutdown writes it.
        assert!(batched.enqueue(Bytes::from_static(b"{}\n")));
        tokio::time::timeout(Duration::from_secs(60), batched.shutdown())
            .await
            .expect("shutdown writes what is queued without waiting out max_wait");
        assert_eq!(*sink.0.lock().unwrap(), vec![3, 1]);
        assert!(!batched.enqueue(Bytes::from_static(b"{}\n")));
    }

    /// Issue 36: a blocking-mode write waiting for the log (a rotation holds it) held its Tokio worker, and every
    /// task queued on that worker waited too; the worker now hands its tasks to another thread first.
    #[test]
    fn a_log_write_that_waits_does_not_stall_the_runtime() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sink = std::sync::Arc::new(
            LogSink::open(&dir.path().join("audit.log"), Rotation::default()).unwrap(),
        );
        // A rotation in progress, as far as writers can tell.
        let rotating = sink.out.write().unwrap();
        let writer = runtime.spawn({
            let sink = sink.clone();
            async move { sink.write_lines(b"{}\n") }
        });
        std::thread::sleep(Duration::from_millis(100));
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.spawn(async move { tx.send(()).unwrap() });
        let other_task_ran = rx.recv_timeout(Duration::from_secs(5));
        drop(rotating);
        assert!(
            other_task_ran.is_ok(),
            "a task queued behind the waiting write did not run"
        );
        runtime.block_on(writer).unwrap().unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("audit.log")).unwrap(),
            b"{}\n"
        );
    }

    /// Found by the bench: an audit log at `/dev/null` renamed the device away once it "grew" past maxsize.
    #[cfg(unix)]
    #[test]
    fn a_log_that_is_not_a_regular_file_never_rotates() {
        let dir = tempfile::tempdir().unwrap();
        // A link to the device: if it rotated, the link (not the device) would be renamed.
        let path = dir.path().join("audit.log");
        std::os::unix::fs::symlink("/dev/null", &path).unwrap();
        let sink = LogSink::open(
            &path,
            Rotation {
                max_size_mb: 1,
                ..Rotation::default()
            },
        )
        .unwrap();
        let line = Bytes::from(vec![b'x'; 600 * 1024]);
        for _ in 0..4 {
            sink.write_now(std::slice::from_ref(&line)).unwrap();
        }
        let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1, "nothing rotated");
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn the_log_rotates_and_keeps_max_backups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let sink = LogSink::open(
            &path,
            Rotation {
                max_size_mb: 1,
                max_age_days: 0,
                max_backups: 2,
            },
        )
        .unwrap();
        let mut line = vec![b'x'; 100 * 1024 - 1];
        line.push(b'\n');
        let line = Bytes::from(line);
        for _ in 0..40 {
            sink.write_now(std::slice::from_ref(&line)).unwrap();
            // Distinct backup names need distinct milliseconds.
            std::thread::sleep(Duration::from_millis(2));
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(names[2], "audit.log");
        for backup in &names[..2] {
            assert!(backup.starts_with("audit-") && backup.ends_with(".log"));
            let size = std::fs::metadata(dir.path().join(backup)).unwrap().len();
            assert!(size <= 1024 * 1024 && size > 900 * 1024, "{backup}: {size}");
        }
    }

    #[test]
    fn rotated_files_older_than_max_age_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let old = dir.path().join("audit-2020-01-02T03-04-05.000.log");
        let recent = Utc::now() - chrono::Duration::days(1);
        let recent = dir
            .path()
            .join(format!("audit-{}.log", recent.format(BACKUP_TIME_FORMAT)));
        let unrelated = dir.path().join("other-2020-01-02T03-04-05.000.log");
        for file in [&path, &old, &recent, &unrelated] {
            std::fs::write(file, b"{}\n").unwrap();
        }
        let rotation = Rotation {
            max_size_mb: 1,
            max_age_days: 30,
            max_backups: 0,
        };
        prune(&path, rotation).unwrap();
        assert!(!old.exists(), "older than 30 days");
        assert!(recent.exists() && path.exists() && unrelated.exists());
    }
}
