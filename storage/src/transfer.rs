//! Moving a store's objects between backends: a backup file taken at one revision, a restore from it, and a live
//! migration that copies a consistent snapshot and then follows the source's watch.
//!
//! Values move as stored (the encoded object without its resourceVersion), under keys relative to the server's
//! prefix, so a restore may use another prefix. Every transfer ends with the target's revisions above the source's
//! and the target compacted at its current revision: a resourceVersion a client kept from the source is then
//! either expired on the target (410, and the client relists, as after an etcd compaction) or too large, never a
//! revision that means something else there.
//!
//! Writes into the target are reconciled, not replayed: the target ends equal to the source's snapshot whatever it
//! held before, so an interrupted restore or migration is resumed by running it again.

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::{
    AllowDeletion, EventType, ListOptions, ResourceVersionMatch, Storage, StorageError,
    StoredObject, WatchOptions,
};

/// The `format` of a backup file's header line.
pub const BACKUP_FORMAT: &str = "apiserver.storage.backup/v1";

/// Items per page when reading a snapshot.
const PAGE: u64 = 500;

/// Writes in flight at once while copying a snapshot (keys are independent; a backend over the network needs
/// several to reach its throughput).
const CONCURRENT_WRITES: usize = 16;

/// The most writes a target that cannot set its revision (etcd) is given to move it above the source's: about a
/// minute of etcd's writes. A larger gap (a backup of a store with years of writes, a damaged header) is refused
/// rather than filled for hours.
pub const MAX_FILLER_WRITES: u64 = 100_000;

/// The largest revision a backup may carry: etcd's revisions, and the SQL backends', are signed 64-bit.
const MAX_REVISION: u64 = i64::MAX as u64;

/// The longest header line read: a few fields and a prefix. What is not a backup (`/dev/zero`, a binary file)
/// fails here, after reading this much, instead of being read whole into memory as one line.
const MAX_HEADER_LINE: u64 = 64 * 1024;

/// The longest object line read: far above any object a server accepts (base64 of a few MiB), bounding memory.
const MAX_LINE: u64 = 64 * 1024 * 1024;

/// Why a transfer stopped.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// A backend failed.
    #[error("{side}: {source}")]
    Storage {
        /// `source` or `target`.
        side: &'static str,
        /// The backend's error.
        source: StorageError,
    },
    /// The backup file could not be read or written.
    #[error("backup file: {0}")]
    Io(#[from] std::io::Error),
    /// The backup file is not one this version wrote, or it was damaged.
    #[error("backup file: {0}")]
    Format(String),
}

fn source_err(source: StorageError) -> TransferError {
    TransferError::Storage {
        side: "source",
        source,
    }
}

fn target_err(source: StorageError) -> TransferError {
    TransferError::Storage {
        side: "target",
        source,
    }
}

/// What a transfer did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Objects in the snapshot (backup, restore) or in the source's last snapshot (migrate).
    pub objects: u64,
    /// Bytes of those objects' values.
    pub bytes: u64,
    /// The revision of the source's snapshot (the backup's revision for a restore).
    pub source_revision: u64,
    /// The target's revision at the end (0 for a backup).
    pub target_revision: u64,
    /// Objects written into the target (created or changed).
    pub written: u64,
    /// Objects deleted from the target because the source does not have them.
    pub deleted: u64,
    /// Watch events of the source applied while following it (migrate).
    pub events: u64,
    /// Wall-clock time.
    #[serde(skip)]
    pub elapsed: Duration,
}

impl Report {
    /// Bytes of values moved per second.
    pub fn bytes_per_second(&self) -> f64 {
        self.bytes as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// One line of a backup file: a header, objects in key order, and an end line with the count and the SHA-256 of
/// every byte before it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum Line {
    Header {
        format: String,
        revision: u64,
        prefix: String,
    },
    Object {
        key: String,
        value: String,
    },
    End {
        objects: u64,
        sha256: String,
    },
}

/// A consistent snapshot of everything under `prefix` at `revision`, read in pages, as (key relative to the
/// prefix, value). Revision 0 is a store that was never written: empty.
fn snapshot<'a>(
    storage: &'a dyn Storage,
    prefix: &'a str,
    revision: u64,
) -> impl futures::Stream<Item = Result<(String, Bytes), TransferError>> + 'a {
    let start = (revision > 0).then_some(None::<String>);
    futures::stream::try_unfold(start, move |token| async move {
        let Some(token) = token else {
            return Ok::<_, TransferError>(None);
        };
        // The first page names the revision; the continue token carries it to the next ones (upstream refuses
        // both together).
        let first = token.is_none();
        let opts = ListOptions {
            resource_version: first.then_some(revision),
            resource_version_match: first.then_some(ResourceVersionMatch::Exact),
            recursive: true,
            limit: PAGE,
            continue_token: token,
            ..Default::default()
        };
        let page = storage.list(prefix, &opts).await.map_err(source_err)?;
        let items: Vec<Result<(String, Bytes), TransferError>> = page
            .items
            .into_iter()
            .map(|o| Ok((relative(prefix, &o.key).to_string(), o.value)))
            .collect();
        let next = page.continue_token.map(Some);
        Ok(Some((futures::stream::iter(items), next)))
    })
    .try_flatten()
}

fn relative<'k>(prefix: &str, key: &'k str) -> &'k str {
    key.strip_prefix(prefix).unwrap_or(key)
}

fn digest(value: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, value);
    let mut out = [0; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Writes a backup of everything under `prefix` at the source's current revision to `out`, streaming.
pub async fn backup(
    storage: &dyn Storage,
    prefix: &str,
    out: &mut dyn Write,
) -> Result<Report, TransferError> {
    let started = Instant::now();
    let revision = storage.current_revision().await.map_err(source_err)?;
    let mut hash = ring::digest::Context::new(&ring::digest::SHA256);
    let mut report = Report {
        source_revision: revision,
        ..Default::default()
    };
    let mut write_line = |line: &Line, hash: &mut ring::digest::Context| -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec(line).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        hash.update(&bytes);
        out.write_all(&bytes)
    };
    write_line(
        &Line::Header {
            format: BACKUP_FORMAT.to_string(),
            revision,
            prefix: prefix.to_string(),
        },
        &mut hash,
    )?;
    let items = snapshot(storage, prefix, revision);
    futures::pin_mut!(items);
    while let Some((key, value)) = items.try_next().await? {
        report.objects += 1;
        report.bytes += value.len() as u64;
        write_line(
            &Line::Object {
                key,
                value: BASE64.encode(&value),
            },
            &mut hash,
        )?;
    }
    let end = Line::End {
        objects: report.objects,
        sha256: hex(hash.finish().as_ref()),
    };
    let mut bytes = serde_json::to_vec(&end).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    out.write_all(&bytes)?;
    out.flush()?;
    report.elapsed = started.elapsed();
    Ok(report)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads a backup's lines, checking the format, the order of lines and, at the end, the count and checksum.
struct BackupReader<R> {
    input: R,
    /// Lines read so far.
    lines: u64,
    hash: ring::digest::Context,
    revision: u64,
    objects: u64,
    ended: bool,
}

impl<R: BufRead> BackupReader<R> {
    fn open(input: R) -> Result<Self, TransferError> {
        let mut reader = BackupReader {
            input,
            lines: 0,
            hash: ring::digest::Context::new(&ring::digest::SHA256),
            revision: 0,
            objects: 0,
            ended: false,
        };
        match reader.line(MAX_HEADER_LINE)? {
            Some(Line::Header {
                format, revision, ..
            }) if format == BACKUP_FORMAT && revision > MAX_REVISION => {
                return Err(TransferError::Format(format!(
                    "revision {revision} is beyond the largest a store has ({MAX_REVISION})"
                )));
            }
            Some(Line::Header {
                format, revision, ..
            }) if format == BACKUP_FORMAT => reader.revision = revision,
            Some(Line::Header { format, .. }) => {
                return Err(TransferError::Format(format!(
                    "format {format:?} is not {BACKUP_FORMAT:?}"
                )));
            }
            _ => return Err(TransferError::Format("no header line".into())),
        }
        Ok(reader)
    }

    /// The next line, at most `max` bytes long.
    fn line(&mut self, max: u64) -> Result<Option<Line>, TransferError> {
        self.lines += 1;
        let number = self.lines;
        let mut bytes = Vec::new();
        let read = (&mut self.input)
            .take(max + 1)
            .read_until(b'\n', &mut bytes)?;
        if read == 0 {
            return Ok(None);
        }
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        } else if read as u64 > max {
            return Err(TransferError::Format(format!(
                "line {number}: longer than {max} bytes: not a backup this version wrote"
            )));
        }
        let text = std::str::from_utf8(&bytes)
            .map_err(|e| TransferError::Format(format!("line {number}: {e}")))?;
        let line: Line = serde_json::from_str(text)
            .map_err(|e| TransferError::Format(format!("line {number}: {e}")))?;
        if !matches!(line, Line::End { .. }) {
            self.hash.update(text.as_bytes());
            self.hash.update(b"\n");
        }
        Ok(Some(line))
    }

    /// The next object, or `None` after a verified end line.
    fn next_object(&mut self) -> Result<Option<(String, Bytes)>, TransferError> {
        if self.ended {
            return Ok(None);
        }
        match self.line(MAX_LINE)? {
            Some(Line::Object { key, value }) => {
                self.objects += 1;
                let value = BASE64.decode(value).map_err(|e| {
                    TransferError::Format(format!("object {key:?}: value is not base64: {e}"))
                })?;
                Ok(Some((key, Bytes::from(value))))
            }
            Some(Line::End { objects, sha256 }) => {
                let actual = hex(self.hash.clone().finish().as_ref());
                if objects != self.objects || sha256 != actual {
                    return Err(TransferError::Format(format!(
                        "damaged: the end line says {objects} objects with SHA-256 {sha256}, the file has {} \
                         with {actual}",
                        self.objects
                    )));
                }
                self.ended = true;
                Ok(None)
            }
            Some(Line::Header { .. }) => Err(TransferError::Format("a second header".into())),
            None => Err(TransferError::Format(
                "truncated: no end line (the backup did not finish)".into(),
            )),
        }
    }
}

/// Checks a backup file from end to end (format, count, checksum) without writing anything: what
/// [`restore`] does first.
pub fn verify_backup<R: BufRead>(input: R) -> Result<u64, TransferError> {
    let mut reader = BackupReader::open(input)?;
    while reader.next_object()?.is_some() {}
    Ok(reader.revision)
}

/// Makes everything under `prefix` in `target` equal to the backup read from `open()` (called twice: once to
/// verify the whole file before anything is written, once to restore it).
pub async fn restore<R: BufRead>(
    target: &dyn Storage,
    prefix: &str,
    mut open: impl FnMut() -> std::io::Result<R>,
    progress: &dyn Fn(&str),
) -> Result<Report, TransferError> {
    let started = Instant::now();
    let revision = verify_backup(open()?)?;
    progress(&format!("backup verified (revision {revision}); restoring"));
    let mut reader = BackupReader::open(open()?)?;
    let items = futures::stream::iter(std::iter::from_fn(move || reader.next_object().transpose()));
    let mut report = reconcile(target, prefix, revision, items, progress).await?;
    report.target_revision = finish(target, prefix, revision, progress).await?;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Copies everything under `source_prefix` in `source` to `target_prefix` in `target` at one revision, then, with
/// `follow`, applies the source's changes as they happen until `stop` completes, and ends with a last snapshot
/// so that nothing written to the source before `stop` is missing.
pub async fn migrate(
    source: &dyn Storage,
    source_prefix: &str,
    target: &dyn Storage,
    target_prefix: &str,
    follow: bool,
    stop: impl std::future::Future<Output = ()>,
    progress: &dyn Fn(&str),
) -> Result<Report, TransferError> {
    let started = Instant::now();
    let copy = || copy_current(source, source_prefix, target, target_prefix, progress);
    let mut report = copy().await?;
    let mut revision = report.source_revision;
    if follow {
        futures::pin_mut!(stop);
        let mut events: u64 = 0;
        // The revision of the target's last write: each change is written at a target revision above the
        // source's, so an object's resourceVersion never goes down nor comes back with another meaning.
        let mut target_revision = target.current_revision().await.map_err(target_err)?;
        'follow: loop {
            progress(&format!(
                "following the source from revision {revision} (stop with SIGINT or SIGTERM)"
            ));
            let opts = WatchOptions {
                resource_version: Some(revision),
                recursive: true,
                ..Default::default()
            };
            let mut watch = source
                .watch(source_prefix, &opts)
                .await
                .map_err(source_err)?;
            loop {
                let event = tokio::select! {
                    _ = &mut stop => break 'follow,
                    event = watch.next() => event,
                };
                let Some(event) = event else { continue 'follow };
                let key = format!("{target_prefix}{}", relative(source_prefix, &event.key));
                let change = matches!(
                    event.event_type,
                    EventType::Added | EventType::Modified | EventType::Deleted
                );
                if change && target_revision <= event.revision {
                    advance_revision(target, target_prefix, event.revision, progress).await?;
                }
                match event.event_type {
                    EventType::Added | EventType::Modified => {
                        target_revision = put(target, &key, event.value).await?;
                    }
                    EventType::Deleted => {
                        if let Some(revision) = remove(target, &key).await? {
                            target_revision = revision;
                        }
                    }
                    EventType::Bookmark => {}
                    EventType::Error => {
                        // Compacted past us, or the watch broke: take a new snapshot and follow from there.
                        progress(&format!(
                            "the source's watch ended ({}); copying a new snapshot",
                            event.error.map(|e| e.to_string()).unwrap_or_default()
                        ));
                        let again = copy().await?;
                        revision = again.source_revision;
                        report.written += again.written;
                        report.deleted += again.deleted;
                        target_revision = target.current_revision().await.map_err(target_err)?;
                        continue 'follow;
                    }
                }
                revision = revision.max(event.revision);
                events += 1;
                if events.is_multiple_of(1000) {
                    progress(&format!(
                        "{events} events applied (source revision {revision})"
                    ));
                }
            }
        }
        report.events = events;
        // Whatever the watch had not delivered yet: one last snapshot.
        let again = copy().await?;
        report.objects = again.objects;
        report.bytes = again.bytes;
        report.source_revision = again.source_revision;
        report.written += again.written;
        report.deleted += again.deleted;
    }
    report.target_revision =
        finish(target, target_prefix, report.source_revision, progress).await?;
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Makes the target hold what the source holds at its current revision.
async fn copy_current(
    source: &dyn Storage,
    source_prefix: &str,
    target: &dyn Storage,
    target_prefix: &str,
    progress: &dyn Fn(&str),
) -> Result<Report, TransferError> {
    let revision = source.current_revision().await.map_err(source_err)?;
    let items = snapshot(source, source_prefix, revision);
    reconcile(target, target_prefix, revision, items, progress).await
}

/// Makes `target` under `prefix` hold exactly `items` (keys relative to the prefix), taken from a source at
/// `source_revision`: first moves the target's revision above it, then writes what differs and deletes what the
/// source does not have.
async fn reconcile(
    target: &dyn Storage,
    prefix: &str,
    source_revision: u64,
    items: impl futures::Stream<Item = Result<(String, Bytes), TransferError>>,
    progress: &dyn Fn(&str),
) -> Result<Report, TransferError> {
    advance_revision(target, prefix, source_revision, progress).await?;
    // What the target holds now, by key: a digest of each value, so that unchanged objects are not rewritten.
    let current = target.current_revision().await.map_err(target_err)?;
    let existing: HashMap<String, [u8; 32]> = snapshot(target, prefix, current)
        .map_ok(|(key, value)| (key, digest(&value)))
        .try_collect()
        .await
        .map_err(|e| match e {
            TransferError::Storage { source, .. } => target_err(source),
            other => other,
        })?;
    let existing = std::sync::Mutex::new(existing);
    let report = std::sync::Mutex::new(Report {
        source_revision,
        ..Default::default()
    });
    items
        .map_ok(|(key, value)| {
            let existing = &existing;
            let report = &report;
            async move {
                let unchanged = existing
                    .lock()
                    .expect("reconcile map")
                    .remove(&key)
                    .is_some_and(|d| d == digest(&value));
                let size = value.len() as u64;
                if !unchanged {
                    put(target, &format!("{prefix}{key}"), value).await?;
                }
                let mut report = report.lock().expect("reconcile report");
                report.objects += 1;
                report.bytes += size;
                report.written += u64::from(!unchanged);
                if report.objects.is_multiple_of(10_000) {
                    progress(&format!("{} objects copied", report.objects));
                }
                Ok::<(), TransferError>(())
            }
        })
        .try_buffer_unordered(CONCURRENT_WRITES)
        .try_collect::<()>()
        .await?;
    let stale: Vec<String> = existing
        .into_inner()
        .expect("reconcile map")
        .into_keys()
        .collect();
    let mut report = report.into_inner().expect("reconcile report");
    for key in stale {
        remove(target, &format!("{prefix}{key}")).await?;
        report.deleted += 1;
    }
    Ok(report)
}

/// Writes `value` at `key`, creating or replacing it (nothing is written when the bytes are already there);
/// returns the object's revision.
async fn put(target: &dyn Storage, key: &str, value: Bytes) -> Result<u64, TransferError> {
    let mut update = |_: Option<StoredObject>| {
        let value = value.clone();
        async move { Ok(value) }
    };
    let stored = target
        .guaranteed_update(key, true, None, &mut update, None)
        .await
        .map_err(target_err)?;
    Ok(stored.revision)
}

/// Deletes `key` if it is there; returns the revision of the deletion.
async fn remove(target: &dyn Storage, key: &str) -> Result<Option<u64>, TransferError> {
    match target.delete(key, None, &mut AllowDeletion, None).await {
        Ok(deleted) => Ok(Some(deleted.revision)),
        Err(StorageError::KeyNotFound { .. }) => Ok(None),
        Err(e) => Err(target_err(e)),
    }
}

/// Moves the target's revision above `above`: in one step where the backend can set it
/// ([`Storage::bump_revision`]); otherwise (etcd) by writing to scratch keys beside the prefix (never under it, so
/// no watch of the server sees them) and deleting them, refusing a gap of more than [`MAX_FILLER_WRITES`].
async fn advance_revision(
    target: &dyn Storage,
    prefix: &str,
    above: u64,
    progress: &dyn Fn(&str),
) -> Result<(), TransferError> {
    let start = target.current_revision().await.map_err(target_err)?;
    if start > above {
        return Ok(());
    }
    let Some(next) = above.checked_add(1).filter(|n| *n <= MAX_REVISION) else {
        return Err(TransferError::Format(format!(
            "revision {above} is beyond the largest a store has ({MAX_REVISION})"
        )));
    };
    if target.bump_revision(next).await.map_err(target_err)? {
        return Ok(());
    }
    // Each scratch key is written in turn; the writes together take `above - start + 1` revisions at least.
    let needed = above - start + 1;
    if needed > MAX_FILLER_WRITES {
        return Err(target_err(StorageError::Invalid(format!(
            "its revision {start} is {needed} below the backup's {above}, and this backend moves its revision \
             only by writes; more than {MAX_FILLER_WRITES} are refused. For etcd: take a snapshot of the target \
             and restore it with `etcdutl snapshot restore --bump-revision {needed} --mark-compacted`, then run \
             this again"
        ))));
    }
    if needed > 1000 {
        progress(&format!(
            "moving the target's revision from {start} above the source's {above} with {needed} writes"
        ));
    }
    let keys: Vec<String> = (0..needed.min(CONCURRENT_WRITES as u64))
        .map(|i| format!("{}.revision-filler/{i}", prefix.trim_end_matches('/')))
        .collect();
    let per_key = needed.div_ceil(keys.len() as u64);
    futures::stream::iter(keys.iter())
        .map(|key| async move {
            for n in 0..per_key {
                put(target, key, Bytes::from(n.to_string())).await?;
            }
            Ok::<(), TransferError>(())
        })
        .buffer_unordered(CONCURRENT_WRITES)
        .try_collect::<()>()
        .await?;
    for key in &keys {
        remove(target, key).await?;
    }
    Ok(())
}

/// After the copy: the target's revision above the source's (the copy may have written nothing), and the target
/// compacted at its current revision, so that no revision from before the switch can be read or watched there.
async fn finish(
    target: &dyn Storage,
    prefix: &str,
    source_revision: u64,
    progress: &dyn Fn(&str),
) -> Result<u64, TransferError> {
    advance_revision(target, prefix, source_revision, progress).await?;
    let revision = target.current_revision().await.map_err(target_err)?;
    target.compact(revision).await.map_err(target_err)?;
    Ok(revision)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::MemoryStorage;

    const PREFIX: &str = "/registry/example.com";

    async fn store_with(objects: &[(&str, &str)], extra_writes: usize) -> Arc<MemoryStorage> {
        let store = Arc::new(MemoryStorage::new());
        for i in 0..extra_writes {
            let key = format!("{PREFIX}/noise/{i}");
            store.create(&key, Bytes::from("x")).await.unwrap();
            remove(store.as_ref(), &key).await.unwrap();
        }
        for (key, value) in objects {
            store
                .create(&format!("{PREFIX}{key}"), Bytes::from(value.to_string()))
                .await
                .unwrap();
        }
        store
    }

    async fn contents(store: &dyn Storage, prefix: &str) -> Vec<(String, Bytes)> {
        let revision = store.current_revision().await.unwrap();
        snapshot(store, prefix, revision)
            .try_collect()
            .await
            .unwrap()
    }

    fn quiet(_: &str) {}

    #[tokio::test]
    async fn a_backup_restores_into_another_prefix_with_revisions_above_the_source() {
        let source = store_with(&[("/pizzas/a", "A"), ("/pizzas/b", "B")], 40).await;
        let mut file = Vec::new();
        let report = backup(source.as_ref(), PREFIX, &mut file).await.unwrap();
        assert_eq!((report.objects, report.bytes), (2, 2));
        let source_revision = source.current_revision().await.unwrap();
        assert_eq!(report.source_revision, source_revision);

        // The target holds a stale object and one the backup does not have.
        let target = store_with(&[("/pizzas/a", "old"), ("/pizzas/z", "Z")], 0).await;
        let other = "/registry/other";
        for (key, value) in [("/pizzas/a", "old"), ("/pizzas/z", "Z")] {
            target
                .create(&format!("{other}{key}"), Bytes::from(value))
                .await
                .unwrap();
        }
        let report = restore(target.as_ref(), other, || Ok(&file[..]), &quiet)
            .await
            .unwrap();
        assert_eq!((report.written, report.deleted), (2, 1));
        assert!(report.target_revision > source_revision);
        assert_eq!(
            contents(target.as_ref(), other).await,
            contents(source.as_ref(), PREFIX).await
        );
        // Everything before the restore's end is compacted: an old revision is gone (410), not reinterpreted.
        assert_eq!(
            target.compact_revision().await.unwrap(),
            report.target_revision
        );
        // The first prefix of the target was not touched.
        assert_eq!(contents(target.as_ref(), PREFIX).await.len(), 2);
    }

    #[tokio::test]
    async fn stores_larger_than_a_page_move_whole() {
        let names: Vec<String> = (0..PAGE as usize * 2 + 7)
            .map(|i| format!("/pizzas/p{i}"))
            .collect();
        let objects: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "v")).collect();
        let source = store_with(&objects, 0).await;
        let mut file = Vec::new();
        let report = backup(source.as_ref(), PREFIX, &mut file).await.unwrap();
        assert_eq!(report.objects, names.len() as u64);
        let target = MemoryStorage::new();
        restore(&target, PREFIX, || Ok(&file[..]), &quiet)
            .await
            .unwrap();
        assert_eq!(contents(&target, PREFIX).await.len(), names.len());
        let migrated = MemoryStorage::new();
        let report = migrate(
            source.as_ref(),
            PREFIX,
            &migrated,
            PREFIX,
            false,
            async {},
            &quiet,
        )
        .await
        .unwrap();
        assert_eq!(report.written, names.len() as u64);
    }

    #[tokio::test]
    async fn an_empty_store_backs_up_and_restores() {
        let mut file = Vec::new();
        let report = backup(&MemoryStorage::new(), PREFIX, &mut file)
            .await
            .unwrap();
        assert_eq!((report.objects, report.source_revision), (0, 0));
        let target = MemoryStorage::new();
        let report = restore(&target, PREFIX, || Ok(&file[..]), &quiet)
            .await
            .unwrap();
        assert_eq!((report.objects, report.written, report.deleted), (0, 0, 0));
        assert!(contents(&target, PREFIX).await.is_empty());
    }

    #[tokio::test]
    async fn a_damaged_or_truncated_backup_writes_nothing() {
        let source = store_with(&[("/pizzas/a", "A"), ("/pizzas/b", "B")], 0).await;
        let mut file = Vec::new();
        backup(source.as_ref(), PREFIX, &mut file).await.unwrap();
        let text = String::from_utf8(file).unwrap();
        let damaged = text.replace(&BASE64.encode("B"), &BASE64.encode("C"));
        let truncated: String = text.lines().take(2).map(|l| format!("{l}\n")).collect();
        for (bad, expected) in [(damaged, "damaged"), (truncated, "truncated")] {
            let target = MemoryStorage::new();
            let before = target.current_revision().await.unwrap();
            let err = restore(&target, PREFIX, || Ok(bad.as_bytes()), &quiet)
                .await
                .unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
            assert_eq!(target.current_revision().await.unwrap(), before);
        }
        let err = verify_backup(
            &b"{\"header\":{\"format\":\"x\",\"revision\":1,\"prefix\":\"/\"}}\n"[..],
        )
        .unwrap_err();
        assert!(err.to_string().contains("is not"), "{err}");
    }

    /// `file` with its header's revision replaced by `revision` (and the checksum made to match).
    fn at_revision(file: &[u8], revision: u64) -> Vec<u8> {
        let text = std::str::from_utf8(file).unwrap();
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut header: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
        header["header"]["revision"] = revision.into();
        lines[0] = header.to_string();
        let last = lines.len() - 1;
        let body: String = lines[..last].iter().map(|l| format!("{l}\n")).collect();
        let mut end: serde_json::Value = serde_json::from_str(&lines[last]).unwrap();
        end["end"]["sha256"] = hex(digest(body.as_bytes()).as_ref()).into();
        format!("{body}{end}\n").into_bytes()
    }

    /// A backup at revision 10^7 or 2^62 restores in one step (before, one filler write per revision: hours, or
    /// forever), and the next write is above it.
    #[tokio::test]
    async fn a_backup_far_ahead_restores_in_one_step() {
        let source = store_with(&[("/pizzas/a", "A")], 0).await;
        let mut file = Vec::new();
        backup(source.as_ref(), PREFIX, &mut file).await.unwrap();
        for revision in [10_000_000, 1 << 62] {
            let file = at_revision(&file, revision);
            let target = MemoryStorage::new();
            let started = Instant::now();
            let report = restore(&target, PREFIX, || Ok(&file[..]), &quiet)
                .await
                .unwrap();
            assert!(started.elapsed() < Duration::from_secs(5));
            assert_eq!((report.source_revision, report.written), (revision, 1));
            assert!(report.target_revision > revision);
            let (_, value) = &contents(&target, PREFIX).await[0];
            assert_eq!(value, "A");
            let created = target
                .create(&format!("{PREFIX}/pizzas/b"), Bytes::from("B"))
                .await
                .unwrap();
            assert!(created.revision > report.target_revision);
        }
        // Beyond a signed 64-bit revision: refused before anything is written.
        let file = at_revision(&file, 1 << 63);
        let target = MemoryStorage::new();
        let err = restore(&target, PREFIX, || Ok(&file[..]), &quiet)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("beyond the largest"), "{err}");
        assert_eq!(target.current_revision().await.unwrap(), 0);
    }

    /// What is not a backup fails after reading a bounded amount: `/dev/zero` has no line end at all.
    #[tokio::test]
    async fn garbage_is_refused_after_a_bounded_read() {
        let target = MemoryStorage::new();
        let started = Instant::now();
        let zero = || std::fs::File::open("/dev/zero").map(std::io::BufReader::new);
        let err = restore(&target, PREFIX, zero, &quiet).await.unwrap_err();
        assert!(
            err.to_string().contains("line 1: longer than 65536 bytes"),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        let binary: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        let err = restore(&target, PREFIX, || Ok(&binary[..]), &quiet)
            .await
            .unwrap_err();
        assert!(err.to_string().starts_with("backup file: line 1"), "{err}");
        // An object line without an end, after a good header.
        let mut endless =
            br#"{"header":{"format":"apiserver.storage.backup/v1","revision":1,"prefix":"/"}}"#
                .to_vec();
        endless.push(b'\n');
        let endless = std::io::Cursor::new(endless).chain(std::io::repeat(b'a'));
        let mut endless = Some(std::io::BufReader::new(endless));
        let err = restore(&target, PREFIX, || Ok(endless.take().unwrap()), &quiet)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("line 2: longer than"), "{err}");
        assert_eq!(target.current_revision().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn migrate_follows_the_source_until_stopped() {
        let source = store_with(&[("/pizzas/a", "A"), ("/pizzas/b", "B")], 5).await;
        let target = Arc::new(MemoryStorage::new());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let writer = {
            let source = source.clone();
            tokio::spawn(async move {
                for i in 0..50 {
                    source
                        .create(&format!("{PREFIX}/pizzas/n{i}"), Bytes::from(i.to_string()))
                        .await
                        .unwrap();
                }
                remove(source.as_ref(), &format!("{PREFIX}/pizzas/a"))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                let _ = stop_tx.send(());
            })
        };
        let report = migrate(
            source.as_ref(),
            PREFIX,
            target.as_ref(),
            PREFIX,
            true,
            async {
                let _ = stop_rx.await;
            },
            &quiet,
        )
        .await
        .unwrap();
        writer.await.unwrap();
        assert_eq!(
            contents(target.as_ref(), PREFIX).await,
            contents(source.as_ref(), PREFIX).await
        );
        assert_eq!(report.objects, 51);
        assert!(report.target_revision > source.current_revision().await.unwrap());
        // Run again: nothing differs, nothing is written.
        let again = migrate(
            source.as_ref(),
            PREFIX,
            target.as_ref(),
            PREFIX,
            false,
            async {},
            &quiet,
        )
        .await
        .unwrap();
        assert_eq!((again.written, again.deleted), (0, 0));
    }
}
