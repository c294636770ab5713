//! The on-disk layout: column families, key and value encodings.
//!
//! - `default`: metadata (`revision`, `compacted`, `purged`, `format`), each a big-endian u64.
//! - `latest`: `<key>` → `<revision BE><value>`, one entry per live key (deleted keys have none).
//! - `history`: `<key>\0<revision BE>` → `1<value>` or `0` (a deletion), every version not yet compacted.
//!   Keys never contain `\0` (`validate_key` refuses it), so the versions of one key are contiguous and in key order.
//! - `log`: `<revision BE>` → `<kind><previous revision BE><key>`, one record per write, in revision order. Values
//!   are not repeated here: a watch replay reads them from `history`.
//!
//! Every write puts its `latest`, `history` and `log` entries and the new `revision` in one atomic batch.

use apiserver_storage::StorageError;

/// Column family of the current value of each live key.
pub(crate) const CF_LATEST: &str = "latest";
/// Column family of every retained version of every key.
pub(crate) const CF_HISTORY: &str = "history";
/// Column family of the revision-ordered change log.
pub(crate) const CF_LOG: &str = "log";

/// Metadata key of the last committed revision.
pub(crate) const META_REVISION: &[u8] = b"revision";
/// Metadata key of the latest compacted revision.
pub(crate) const META_COMPACTED: &[u8] = b"compacted";
/// Metadata key of the last log record compaction has fully processed.
pub(crate) const META_PURGED: &[u8] = b"purged";
/// Metadata key of the layout version.
pub(crate) const META_FORMAT: &[u8] = b"format";
/// The layout version this code writes and reads.
pub(crate) const FORMAT_VERSION: u64 = 1;

const SEPARATOR: u8 = 0;

fn corrupt(key: &str, message: impl Into<String>) -> StorageError {
    StorageError::CorruptObj {
        key: key.to_string(),
        message: message.into(),
    }
}

/// A big-endian u64 read back from disk.
pub(crate) fn decode_u64(what: &str, raw: &[u8]) -> Result<u64, StorageError> {
    let bytes: [u8; 8] = raw
        .try_into()
        .map_err(|_| corrupt(what, format!("expected 8 bytes, found {}", raw.len())))?;
    Ok(u64::from_be_bytes(bytes))
}

/// `<key>\0<revision BE>`.
pub(crate) fn history_key(key: &str, revision: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 9);
    k.extend_from_slice(key.as_bytes());
    k.push(SEPARATOR);
    k.extend_from_slice(&revision.to_be_bytes());
    k
}

/// Splits a `history` key into the object key and the revision.
pub(crate) fn split_history_key(raw: &[u8]) -> Result<(&str, u64), StorageError> {
    let bad = || corrupt(&String::from_utf8_lossy(raw), "malformed history key");
    let split = raw.len().checked_sub(9).ok_or_else(bad)?;
    if raw[split] != SEPARATOR {
        return Err(bad());
    }
    let key = std::str::from_utf8(&raw[..split]).map_err(|_| bad())?;
    Ok((key, decode_u64(key, &raw[split + 1..])?))
}

/// A `history` value: the bytes, or `None` for a deletion.
pub(crate) fn history_value(value: Option<&[u8]>) -> Vec<u8> {
    match value {
        Some(v) => {
            let mut out = Vec::with_capacity(v.len() + 1);
            out.push(1);
            out.extend_from_slice(v);
            out
        }
        None => vec![0],
    }
}

/// Reads a `history` value back.
pub(crate) fn parse_history_value<'a>(
    key: &str,
    raw: &'a [u8],
) -> Result<Option<&'a [u8]>, StorageError> {
    match raw.split_first() {
        Some((1, v)) => Ok(Some(v)),
        Some((0, [])) => Ok(None),
        _ => Err(corrupt(key, "malformed history value")),
    }
}

/// A `latest` value: `<revision BE><value>`.
pub(crate) fn latest_value(revision: u64, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 8);
    out.extend_from_slice(&revision.to_be_bytes());
    out.extend_from_slice(value);
    out
}

/// Reads a `latest` value back: the revision that wrote it and the bytes.
pub(crate) fn parse_latest_value<'a>(
    key: &str,
    raw: &'a [u8],
) -> Result<(u64, &'a [u8]), StorageError> {
    if raw.len() < 8 {
        return Err(corrupt(key, "malformed latest value"));
    }
    let (rev, value) = raw.split_at(8);
    Ok((decode_u64(key, rev)?, value))
}

/// What a write did to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteKind {
    /// The key did not exist.
    Create = 1,
    /// The key existed and got a new value.
    Update = 2,
    /// The key was deleted.
    Delete = 3,
}

/// One `log` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LogRecord {
    pub(crate) kind: WriteKind,
    /// The revision of the value this write replaced (0 for a create).
    pub(crate) prev_revision: u64,
    pub(crate) key: String,
}

impl LogRecord {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.key.len() + 9);
        out.push(self.kind as u8);
        out.extend_from_slice(&self.prev_revision.to_be_bytes());
        out.extend_from_slice(self.key.as_bytes());
        out
    }

    pub(crate) fn decode(revision: u64, raw: &[u8]) -> Result<Self, StorageError> {
        let what = format!("log record {revision}");
        if raw.len() < 9 {
            return Err(corrupt(&what, "too short"));
        }
        let kind = match raw[0] {
            1 => WriteKind::Create,
            2 => WriteKind::Update,
            3 => WriteKind::Delete,
            k => return Err(corrupt(&what, format!("unknown kind {k}"))),
        };
        let prev_revision = decode_u64(&what, &raw[1..9])?;
        let key = std::str::from_utf8(&raw[9..])
            .map_err(|_| corrupt(&what, "key is not UTF-8"))?
            .to_string();
        Ok(LogRecord {
            kind,
            prev_revision,
            key,
        })
    }
}

/// The exclusive upper bound of every byte string that starts with `prefix` (`None`: no bound).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_keys_round_trip_and_sort_by_key_then_revision() {
        let k = history_key("/a/b", 258);
        assert_eq!(split_history_key(&k).unwrap(), ("/a/b", 258));
        let mut keys = [
            history_key("/a/b", 2),
            history_key("/a", 300),
            history_key("/a/b", 1),
            history_key("/a0", 1),
            history_key("/a", 1),
        ];
        keys.sort();
        let decoded: Vec<_> = keys.iter().map(|k| split_history_key(k).unwrap()).collect();
        assert_eq!(
            decoded,
            vec![("/a", 1), ("/a", 300), ("/a/b", 1), ("/a/b", 2), ("/a0", 1)]
        );
        assert!(split_history_key(b"short").is_err());
        assert!(split_history_key(b"/a/b\x01\0\0\0\0\0\0\0\x01").is_err());
    }

    #[test]
    fn values_round_trip() {
        assert_eq!(
            parse_history_value("k", &history_value(Some(b"x"))).unwrap(),
            Some(&b"x"[..])
        );
        assert_eq!(
            parse_history_value("k", &history_value(Some(b""))).unwrap(),
            Some(&b""[..])
        );
        assert_eq!(
            parse_history_value("k", &history_value(None)).unwrap(),
            None
        );
        assert!(parse_history_value("k", b"").is_err());
        assert!(parse_history_value("k", b"\0x").is_err());
        assert_eq!(
            parse_latest_value("k", &latest_value(7, b"v")).unwrap(),
            (7, &b"v"[..])
        );
        assert!(parse_latest_value("k", b"1234567").is_err());
        let r = LogRecord {
            kind: WriteKind::Update,
            prev_revision: 9,
            key: "/x/y".into(),
        };
        assert_eq!(LogRecord::decode(10, &r.encode()).unwrap(), r);
        assert!(LogRecord::decode(10, b"\x07\0\0\0\0\0\0\0\0/x").is_err());
    }

    #[test]
    fn prefix_end_bounds_the_prefix() {
        assert_eq!(prefix_end(b"/a/").unwrap(), b"/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff").unwrap(), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), None);
    }
}
