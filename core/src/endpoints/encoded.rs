//! Objects kept encoded, per stored revision and served form (version × media type × whole object or list item), so
//! that a GET or LIST encodes each object once rather than on every request: decoding stored bytes, converting and encoding cost ~10 µs per item,
//! copying the kept bytes a fraction of that. A stored key and revision name one exact stored value, so entries never
//! go stale; the least recently used leave when the byte budget is spent.

use std::sync::Mutex;

use bytes::Bytes;
use lru::LruCache;

use crate::codec::MediaType;
use crate::registry::ApiError;
use crate::storage::StoredObject;

/// The default budget of the encoded-object cache (`--encoded-object-cache-bytes`).
pub const DEFAULT_ENCODED_OBJECT_BYTES: usize = 64 * 1024 * 1024;

/// What an entry costs beyond its bytes (key, map slot, list links).
const ENTRY_OVERHEAD: usize = 96;

/// Whether an encoding is a whole object (a GET's body) or an item of a list (without `kind`, or the envelope).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Form {
    Object,
    ListItem,
}

/// What an entry is found by: the stored revision (one per write in a store) and the served form, both plain
/// numbers, so that a lookup neither allocates nor hashes strings. The entry holds the object's key as well: two
/// stores behind one API may use the same revision, and a hit on another key's encoding is a miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct EntryKey {
    revision: u64,
    form: u32,
}

struct Entry {
    key: Box<str>,
    bytes: Bytes,
}

impl Entry {
    fn cost(&self) -> usize {
        self.bytes.len() + self.key.len() + ENTRY_OVERHEAD
    }
}

/// A served form: the group and version, the media type and whole object or list item.
#[derive(Clone, Debug, PartialEq, Eq)]
struct FormSpec {
    api_version: String,
    media_type: MediaType,
    form: Form,
}

struct Entries {
    lru: LruCache<EntryKey, Entry>,
    bytes: usize,
    /// The forms seen so far, numbered by their index (a handful per API).
    forms: Vec<FormSpec>,
}

impl Entries {
    fn form_id(&mut self, spec: FormSpec) -> u32 {
        let index = match self.forms.iter().position(|f| *f == spec) {
            Some(index) => index,
            None => {
                self.forms.push(spec);
                self.forms.len() - 1
            }
        };
        u32::try_from(index).unwrap_or(u32::MAX)
    }
}

/// Encoded objects shared by every resource of an API, within a byte budget.
pub(crate) struct EncodedObjects {
    budget: usize,
    entries: Mutex<Entries>,
}

impl Default for EncodedObjects {
    fn default() -> Self {
        Self::new(DEFAULT_ENCODED_OBJECT_BYTES)
    }
}

impl EncodedObjects {
    /// Keeps at most `budget` bytes of encoded objects (0: none; every item is encoded each time).
    pub fn new(budget: usize) -> Self {
        EncodedObjects {
            budget,
            entries: Mutex::new(Entries {
                lru: LruCache::unbounded(),
                bytes: 0,
                forms: Vec::new(),
            }),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `items` in `form` as `api_version` (`<group>/<version>`: one storage may be served in two groups) in
    /// `media_type`, from what is kept, and from `encode` for the rest (which are then kept).
    pub fn encoded(
        &self,
        items: &[StoredObject],
        api_version: &str,
        media_type: MediaType,
        form: Form,
        mut encode: impl FnMut(&StoredObject) -> Result<Vec<u8>, ApiError>,
    ) -> Result<Vec<Bytes>, ApiError> {
        if self.budget == 0 {
            return items
                .iter()
                .map(|stored| encode(stored).map(Bytes::from))
                .collect();
        }
        let (form, mut found): (u32, Vec<Option<Bytes>>) = {
            let mut entries = self.entries();
            let form = entries.form_id(FormSpec {
                api_version: api_version.to_string(),
                media_type,
                form,
            });
            let found = items
                .iter()
                .map(|stored| {
                    let key = EntryKey {
                        revision: stored.revision,
                        form,
                    };
                    entries
                        .lru
                        .get(&key)
                        .filter(|entry| *entry.key == *stored.key)
                        .map(|entry| entry.bytes.clone())
                })
                .collect();
            (form, found)
        };
        let mut fresh = Vec::new();
        for (slot, stored) in found.iter_mut().zip(items) {
            if slot.is_none() {
                let mut encoded = encode(stored)?;
                // Kept for long: without the encoder's spare capacity.
                encoded.shrink_to_fit();
                let encoded = Bytes::from(encoded);
                let key = EntryKey {
                    revision: stored.revision,
                    form,
                };
                fresh.push((
                    key,
                    Entry {
                        key: stored.key.as_str().into(),
                        bytes: encoded.clone(),
                    },
                ));
                *slot = Some(encoded);
            }
        }
        if !fresh.is_empty() {
            let mut entries = self.entries();
            for (key, entry) in fresh {
                let cost = entry.cost();
                if cost > self.budget {
                    continue;
                }
                entries.bytes += cost;
                if let Some(old) = entries.lru.put(key, entry) {
                    entries.bytes -= old.cost();
                }
                while entries.bytes > self.budget {
                    match entries.lru.pop_lru() {
                        Some((_, old)) => entries.bytes -= old.cost(),
                        None => break,
                    }
                }
            }
        }
        Ok(found.into_iter().flatten().collect())
    }

    /// Bytes kept now.
    #[cfg(test)]
    fn kept(&self) -> usize {
        self.entries().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(key: &str, revision: u64) -> StoredObject {
        StoredObject {
            key: key.into(),
            value: Bytes::new(),
            revision,
        }
    }

    #[test]
    fn encodes_each_revision_once_and_stays_within_budget() {
        let cache = EncodedObjects::new(2 * (100 + ENTRY_OVERHEAD + 8 + 7));
        let encoded = std::cell::Cell::new(0);
        let mut encode = |s: &StoredObject| {
            encoded.set(encoded.get() + 1);
            Ok(vec![s.revision as u8; 100])
        };
        let items = [stored("/r/a/1", 1), stored("/r/a/2", 2)];
        let first = cache
            .encoded(
                &items,
                "v1beta1",
                MediaType::Json,
                Form::ListItem,
                &mut encode,
            )
            .unwrap();
        let again = cache
            .encoded(
                &items,
                "v1beta1",
                MediaType::Json,
                Form::ListItem,
                &mut encode,
            )
            .unwrap();
        assert_eq!(first, again);
        assert_eq!(encoded.get(), 2, "the second list reuses both");
        // Another form, and a new revision, are encoded anew; the budget holds two entries.
        cache
            .encoded(
                &items[..1],
                "v1alpha1",
                MediaType::Json,
                Form::ListItem,
                &mut encode,
            )
            .unwrap();
        cache
            .encoded(
                &[stored("/r/a/1", 3)],
                "v1beta1",
                MediaType::Json,
                Form::ListItem,
                &mut encode,
            )
            .unwrap();
        assert_eq!(encoded.get(), 4);
        assert!(cache.kept() <= 2 * (100 + ENTRY_OVERHEAD + 8 + 7));
        // An error from the encoder is the list's error.
        let failed = cache.encoded(
            &[stored("/r/a/9", 9)],
            "v1",
            MediaType::Json,
            Form::Object,
            |_| Err(ApiError::internal("broken")),
        );
        assert!(failed.is_err());
    }

    /// Two stores behind one API number their writes alike: an entry of one key is never served for another.
    #[test]
    fn one_revision_of_two_keys_is_two_entries() {
        let cache = EncodedObjects::default();
        let encode = |s: &StoredObject| Ok(s.key.clone().into_bytes());
        let list = |key: &str| {
            cache
                .encoded(
                    &[stored(key, 7)],
                    "v1",
                    MediaType::Json,
                    Form::Object,
                    encode,
                )
                .unwrap()
        };
        assert_eq!(list("/a/x"), vec![Bytes::from_static(b"/a/x")]);
        assert_eq!(list("/b/x"), vec![Bytes::from_static(b"/b/x")]);
        assert_eq!(list("/a/x"), vec![Bytes::from_static(b"/a/x")]);
    }
}
