//! One committed write as watchers see it, and how a watcher's predicate turns it into an event.

use bytes::Bytes;

use super::{EventType, Predicate, StoredObject, WatchEvent};

/// A committed write: the key, its new value (`None` for a deletion), the value before, and its revision.
/// Backends and the watch cache keep these in their change history and share them among watchers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// The revision of the write, as `metadata.resourceVersion` gives it.
    pub revision: u64,
    /// The storage key of the object written.
    pub key: String,
    /// The new value; `None` for a deletion.
    pub value: Option<Bytes>,
    /// The value before the write; `None` for a create (or when unknown).
    pub prev: Option<Bytes>,
    /// The revision that wrote `prev` (0 when unknown), so that the history can give the object as it was.
    pub prev_revision: u64,
}

impl Change {
    /// The event a watcher with `predicate` sees for this write (upstream etcd3 watcher `transform`): a
    /// modification that moves an object into or out of the selection is an ADDED or a DELETED; a deletion carries
    /// the last value. `None` when the watcher sees nothing.
    pub fn event_for(&self, predicate: &Predicate) -> Option<WatchEvent> {
        let object = |value: &Bytes| StoredObject {
            key: self.key.clone(),
            value: value.clone(),
            revision: self.revision,
        };
        let selected = |value: &Bytes| predicate.matches(value).unwrap_or(false);
        match (&self.value, &self.prev) {
            (Some(new), None) => {
                selected(new).then(|| WatchEvent::object(EventType::Added, object(new), None))
            }
            (Some(new), Some(old)) => {
                let (was, is) = if predicate.is_everything() {
                    (true, true)
                } else {
                    (selected(old), selected(new))
                };
                match (was, is) {
                    (true, true) => Some(WatchEvent::object(
                        EventType::Modified,
                        object(new),
                        Some(old.clone()),
                    )),
                    (false, true) => Some(WatchEvent::object(
                        EventType::Added,
                        object(new),
                        Some(old.clone()),
                    )),
                    (true, false) => Some(WatchEvent::object(
                        EventType::Deleted,
                        object(old),
                        Some(old.clone()),
                    )),
                    (false, false) => None,
                }
            }
            (None, Some(old)) => selected(old)
                .then(|| WatchEvent::object(EventType::Deleted, object(old), Some(old.clone()))),
            (None, None) => None,
        }
    }
}
