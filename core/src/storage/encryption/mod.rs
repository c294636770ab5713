//! Encryption at rest (upstream `--encryption-provider-config`): a storage layer that seals each value on its way
//! into the backend and opens it on its way out, per resource as an `EncryptionConfiguration` says, so that every
//! backend holds ciphertext and the layers above see the objects as before.
//!
//! Selectors are evaluated on opened values (a backend cannot read sealed ones): lists and watches with a selector
//! read everything from the backend and select here. An update that changes nothing is not written, unless the
//! stored value was sealed with another key than the first (upstream's "stale"): that is how a key rotation
//! reaches every object, by a no-op update of each (the storage-version migrator's path).

mod cipher;
mod config;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;

pub use config::{EncryptionConfig, Transformers};

use super::{
    GetOptions, ListOptions, ListResult, NewValue, Preconditions, Predicate, Stats, Storage,
    StorageError, StoredObject, TryUpdate, ValidateDeletion, WatchEvent, WatchOptions, WatchStream,
    encode_continue, plan_list,
};

/// A backend whose values, for the resources of one API group that the configuration names, are sealed.
#[derive(Clone)]
pub struct Encrypted {
    inner: Arc<dyn Storage>,
    /// The server's storage prefix, with a trailing slash: the resource is the key's next segment.
    prefix: String,
    group: String,
    config: Arc<EncryptionConfig>,
}

impl Encrypted {
    /// `inner` with the values of `group`'s resources under `prefix` sealed as `config` says.
    pub fn wrap(
        inner: Arc<dyn Storage>,
        prefix: &str,
        group: &str,
        config: Arc<EncryptionConfig>,
    ) -> Arc<dyn Storage> {
        Arc::new(Encrypted {
            inner,
            prefix: format!("{}/", prefix.trim_end_matches('/')),
            group: group.to_string(),
            config,
        })
    }

    /// The transformers of the resource `key` belongs to (`None`: stored in the clear).
    fn transformers(&self, key: &str) -> Option<Arc<Transformers>> {
        let rest = key.strip_prefix(&self.prefix)?;
        let resource = rest.split('/').next().filter(|r| !r.is_empty())?;
        self.config.transformers(resource, &self.group)
    }

    fn seal(&self, key: &str, value: &Bytes) -> Result<Bytes, StorageError> {
        match self.transformers(key) {
            Some(t) => t.seal(value, key).map_err(|e| transform_error(key, e)),
            None => Ok(value.clone()),
        }
    }

    /// The value in the clear and whether it is stale.
    fn open(&self, key: &str, value: &Bytes) -> Result<(Bytes, bool), StorageError> {
        match self.transformers(key) {
            Some(t) => t.open(value, key).map_err(|e| transform_error(key, e)),
            None => Ok((value.clone(), false)),
        }
    }

    fn open_object(&self, mut obj: StoredObject) -> Result<StoredObject, StorageError> {
        obj.value = self.open(&obj.key, &obj.value)?.0;
        Ok(obj)
    }

    fn open_event(&self, mut event: WatchEvent) -> Result<WatchEvent, StorageError> {
        if event.key.is_empty() {
            return Ok(event);
        }
        event.value = self.open(&event.key, &event.value)?.0;
        if let Some(prev) = &event.prev_value {
            event.prev_value = Some(self.open(&event.key, prev)?.0);
        }
        Ok(event)
    }
}

/// The try-update step of a sealed value: the preconditions and `inner` see the value in the clear, the backend
/// gets it sealed. (The preconditions are checked here, not by the backend: a UID is read from the opened value.)
struct Sealing<'a> {
    store: &'a Encrypted,
    key: &'a str,
    preconditions: Option<&'a Preconditions>,
    inner: &'a mut dyn TryUpdate,
}

#[async_trait]
impl TryUpdate for Sealing<'_> {
    async fn try_update(
        &mut self,
        current: Option<StoredObject>,
    ) -> Result<NewValue, StorageError> {
        let Some(raw) = current else {
            return match self.inner.try_update(None).await? {
                NewValue::Write(new) => Ok(NewValue::Write(self.store.seal(self.key, &new)?)),
                NewValue::Keep => Ok(NewValue::Keep),
            };
        };
        let (value, stale) = self.store.open(self.key, &raw.value)?;
        let opened = StoredObject {
            value: value.clone(),
            ..raw.clone()
        };
        if let Some(p) = self.preconditions {
            p.check(&opened)?;
        }
        let new = match self.inner.try_update(Some(opened)).await? {
            NewValue::Write(new) => new,
            NewValue::Keep => return Ok(NewValue::Keep),
        };
        if !stale && new == value {
            // Unchanged and sealed with the first key: the stored bytes, so that nothing is written.
            return Ok(NewValue::Write(raw.value));
        }
        Ok(NewValue::Write(self.store.seal(self.key, &new)?))
    }
}

/// The validate-deletion step of a sealed value: the preconditions, then `inner`, see it in the clear.
struct Opening<'a> {
    store: &'a Encrypted,
    preconditions: Option<&'a Preconditions>,
    inner: &'a mut dyn ValidateDeletion,
}

#[async_trait]
impl ValidateDeletion for Opening<'_> {
    async fn validate(&mut self, current: StoredObject) -> Result<(), StorageError> {
        let opened = self.store.open_object(current)?;
        if let Some(p) = self.preconditions {
            p.check(&opened)?;
        }
        self.inner.validate(opened).await
    }
}

fn transform_error(key: &str, message: String) -> StorageError {
    StorageError::Internal(format!("unable to transform key {key:?}: {message}"))
}

/// Selects events of a watch made with [`Predicate::everything`] as a backend would with `predicate`: a change
/// that moves an object into the selection is ADDED, out of it DELETED (with its last selected value).
fn select(predicate: &Predicate, event: WatchEvent) -> Option<WatchEvent> {
    use super::EventType::{Added, Bookmark, Deleted, Error, Modified};
    let matches = |v: &[u8]| predicate.matches(v);
    let result = (|| -> Result<Option<WatchEvent>, StorageError> {
        Ok(match event.event_type {
            Bookmark | Error => Some(event),
            Added => matches(&event.value)?.then_some(event),
            Deleted => matches(&event.value)?.then_some(event),
            Modified => {
                let now = matches(&event.value)?;
                let before = match &event.prev_value {
                    Some(prev) => matches(prev)?,
                    None => false,
                };
                match (before, now) {
                    (true, true) => Some(event),
                    (false, true) => Some(WatchEvent {
                        event_type: Added,
                        ..event
                    }),
                    (true, false) => Some(WatchEvent {
                        event_type: Deleted,
                        value: event.prev_value.clone().unwrap_or_default(),
                        ..event
                    }),
                    (false, false) => None,
                }
            }
        })
    })();
    result.unwrap_or_else(|e| Some(WatchEvent::error(e)))
}

#[async_trait]
impl Storage for Encrypted {
    async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
        let sealed = self.seal(key, &value)?;
        let mut created = self.inner.create(key, sealed).await?;
        created.value = value;
        Ok(created)
    }

    async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
        self.open_object(self.inner.get(key, opts).await?)
    }

    async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
        if opts.predicate.is_everything() {
            let mut page = self.inner.list(key, opts).await?;
            page.items = page
                .items
                .into_iter()
                .map(|o| self.open_object(o))
                .collect::<Result<_, _>>()?;
            return Ok(page);
        }
        // Select here: read pages of everything until `limit` objects are selected.
        let plan = plan_list(key, opts)?;
        let mut inner_opts = ListOptions {
            predicate: Predicate::everything(),
            ..opts.clone()
        };
        let mut result = ListResult::default();
        loop {
            let page = self.inner.list(key, &inner_opts).await?;
            result.revision = page.revision;
            result.evaluated += page.evaluated;
            let mut items = page.items.into_iter();
            while let Some(obj) = items.next() {
                let obj = self.open_object(obj)?;
                let last = obj.key.clone();
                if opts.predicate.matches(&obj.value)? {
                    result.items.push(obj);
                }
                if opts.limit > 0 && result.items.len() as u64 >= opts.limit {
                    let more = !items.as_slice().is_empty() || page.continue_token.is_some();
                    if more {
                        result.continue_token = Some(encode_continue(
                            &format!("{last}\0"),
                            plan.range.as_str(),
                            i64::try_from(page.revision).unwrap_or(i64::MAX),
                        )?);
                    }
                    return Ok(result);
                }
            }
            match page.continue_token {
                Some(token) => {
                    inner_opts.continue_token = Some(token);
                    inner_opts.resource_version = None;
                    inner_opts.resource_version_match = None;
                }
                None => return Ok(result),
            }
        }
    }

    async fn guaranteed_update(
        &self,
        key: &str,
        ignore_not_found: bool,
        preconditions: Option<&Preconditions>,
        try_update: &mut dyn TryUpdate,
        _cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        let mut sealing = Sealing {
            store: self,
            key,
            preconditions,
            inner: try_update,
        };
        // The cached object is in the clear; the backend's first guess must be what it stores: it reads.
        let stored = self
            .inner
            .guaranteed_update(key, ignore_not_found, None, &mut sealing, None)
            .await?;
        self.open_object(stored)
    }

    async fn delete(
        &self,
        key: &str,
        preconditions: Option<&Preconditions>,
        validate_deletion: &mut dyn ValidateDeletion,
        _cached_existing: Option<StoredObject>,
    ) -> Result<StoredObject, StorageError> {
        let mut opening = Opening {
            store: self,
            preconditions,
            inner: validate_deletion,
        };
        let deleted = self.inner.delete(key, None, &mut opening, None).await?;
        self.open_object(deleted)
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
        let predicate = opts.predicate.clone();
        let inner_opts = WatchOptions {
            predicate: Predicate::everything(),
            ..opts.clone()
        };
        let stream = self.inner.watch(key, &inner_opts).await?;
        let this = self.clone();
        Ok(stream
            .filter_map(move |event| {
                let event = match this.open_event(event) {
                    Ok(event) => select(&predicate, event),
                    Err(e) => Some(WatchEvent::error(e)),
                };
                futures::future::ready(event)
            })
            .boxed())
    }

    async fn current_revision(&self) -> Result<u64, StorageError> {
        self.inner.current_revision().await
    }

    async fn compact(&self, revision: u64) -> Result<(), StorageError> {
        self.inner.compact(revision).await
    }

    async fn compact_revision(&self) -> Result<u64, StorageError> {
        self.inner.compact_revision().await
    }

    async fn bump_revision(&self, revision: u64) -> Result<bool, StorageError> {
        self.inner.bump_revision(revision).await
    }

    async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
        self.inner.stats(prefix).await
    }

    async fn readiness(&self) -> Result<(), StorageError> {
        self.inner.readiness().await
    }

    async fn request_watch_progress(&self) -> Result<(), StorageError> {
        self.inner.request_watch_progress().await
    }

    fn reliable_progress(&self) -> bool {
        self.inner.reliable_progress()
    }
}

#[cfg(test)]
mod tests;
