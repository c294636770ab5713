//! The optimistic-concurrency loop of [`Storage::guaranteed_update`](super::Storage::guaranteed_update) and
//! [`Storage::delete`](super::Storage::delete), written once over the few conditional operations a backend provides
//! ([`OptimisticStore`]), so every backend follows the same rules (upstream etcd3's `GuaranteedUpdate` and
//! `Delete`):
//!
//! - Start from `cached_existing` when given (a guess, possibly stale), otherwise from a read of the key.
//! - Check the preconditions, then run `try_update` / `validate_deletion`, against that object.
//! - Write only if the key is still at the object's revision; on a conflict, start again from what the key holds
//!   now (the backend hands it back with the conflict, so a conflict costs no extra read).
//! - A failure computed against the cached guess is not final: the key is read once, and the loop starts again from
//!   the live object if its revision differs; otherwise the failure stands.
//! - When the new bytes equal the stored ones, or `try_update` keeps the object ([`NewValue::Keep`]), nothing is
//!   written and the current object is returned (a cached guess is confirmed first, as for a failure).
//! - With `ignore_not_found`, a missing key passes `None` to `try_update` and the result is created if the key is
//!   still absent.
//!
//! A backend implements [`OptimisticStore`] (on a private wrapper, so the primitives, which skip key validation,
//! stay out of its public API) and answers both [`Storage`](super::Storage) methods with [`guaranteed_update`] and
//! [`delete`].

use async_trait::async_trait;
use bytes::Bytes;

use super::{
    NewValue, Preconditions, StorageError, StoredObject, TryUpdate, ValidateDeletion, validate_key,
};

/// What a conditional write of an [`OptimisticStore`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Written: the object as stored, with the revision of the write; for a deletion, the deleted value with the
    /// revision of the deletion.
    Written(StoredObject),
    /// Nothing written because the new bytes equal the stored ones; this is the current object. Only
    /// [`OptimisticStore::compare_and_swap`] of a store whose [`OptimisticStore::swap_compares_values`] is true
    /// answers this (a deletion that gets it retries from the object, as on a conflict).
    Unchanged(StoredObject),
    /// The key was not in the expected state; this is what it holds now (`None`: absent).
    Conflict(Option<StoredObject>),
}

/// One read of a key by [`OptimisticStore::latest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Latest {
    /// The live object, `None` when the key is absent.
    pub object: Option<StoredObject>,
    /// The store's revision at the read, for stores that learn it with the read itself (etcd's response header);
    /// handed back to [`OptimisticStore::key_not_found`] so the error needs no extra round trip.
    pub revision: Option<u64>,
}

/// The conditional operations [`guaranteed_update`] and [`delete`] are built on. Each is one atomic step of the
/// backend (one lock, one transaction, one writer-thread decision); keys have been validated by the caller.
#[async_trait]
pub trait OptimisticStore: Send + Sync {
    /// Reads the latest value of `key`.
    async fn latest(&self, key: &str) -> Result<Latest, StorageError>;

    /// Stores `value` at `key` if the key is absent: [`Outcome::Written`], or [`Outcome::Conflict`] with the
    /// current object.
    async fn create_if_absent(&self, key: &str, value: Bytes) -> Result<Outcome, StorageError>;

    /// Replaces `key` with `value` if it is still at `expected.revision` (`expected` is the object `value` was
    /// computed from): [`Outcome::Written`], [`Outcome::Conflict`] with the current object (or its absence), or,
    /// for stores that compare values, [`Outcome::Unchanged`].
    async fn compare_and_swap(
        &self,
        key: &str,
        expected: &StoredObject,
        value: Bytes,
    ) -> Result<Outcome, StorageError>;

    /// Deletes `key` if it is still at `expected.revision`: [`Outcome::Written`] with the deleted value and the
    /// revision of the deletion, or [`Outcome::Conflict`] with the current object (or its absence).
    async fn compare_and_delete(
        &self,
        key: &str,
        expected: &StoredObject,
    ) -> Result<Outcome, StorageError>;

    /// The [`StorageError::KeyNotFound`] for `key`, found absent; `seen` is the [`Latest::revision`] of the last
    /// read of the key in this call, if any.
    async fn key_not_found(&self, key: &str, seen: Option<u64>) -> StorageError;

    /// Whether [`compare_and_swap`](Self::compare_and_swap) itself compares the new bytes with the stored ones
    /// and answers [`Outcome::Unchanged`] without writing. Stores where that comparison is free, because the swap
    /// runs next to the stored value (under a lock, in a writer thread), say true. Otherwise (the default) the
    /// driver compares the new bytes with the object they were computed from and skips the swap when they are
    /// equal, confirming a cached guess with one read first: an unchanged update then costs no write round trip.
    fn swap_compares_values(&self) -> bool {
        false
    }
}

/// [`Storage::guaranteed_update`](super::Storage::guaranteed_update) on `store`.
pub async fn guaranteed_update<S: OptimisticStore + ?Sized>(
    store: &S,
    key: &str,
    ignore_not_found: bool,
    preconditions: Option<&Preconditions>,
    try_update: &mut dyn TryUpdate,
    cached_existing: Option<StoredObject>,
) -> Result<StoredObject, StorageError> {
    validate_key(key)?;
    let mut state = State::start(store, key, cached_existing).await?;
    loop {
        let Some(cur) = state.current.take() else {
            if !ignore_not_found {
                return Err(store.key_not_found(key, state.seen).await);
            }
            // Create on update.
            let new = match try_update.try_update(None).await? {
                NewValue::Write(new) => new,
                // Nothing to keep.
                NewValue::Keep => return Err(store.key_not_found(key, state.seen).await),
            };
            match store.create_if_absent(key, new).await? {
                Outcome::Written(obj) | Outcome::Unchanged(obj) => return Ok(obj),
                Outcome::Conflict(live) => {
                    state.conflict(live);
                    continue;
                }
            }
        };
        if let Some(p) = preconditions
            && let Err(e) = p.check(&cur)
        {
            state.stale_or_fail(store, key, &cur, e).await?;
            continue;
        }
        let new = match try_update.try_update(Some(cur.clone())).await {
            Ok(NewValue::Write(new)) => new,
            Ok(NewValue::Keep) => {
                // As for unchanged bytes: a cached state is confirmed before it is answered.
                if !state.from_cache || state.confirm(store, key, &cur).await? {
                    return Ok(cur);
                }
                continue;
            }
            Err(e) => {
                state.stale_or_fail(store, key, &cur, e).await?;
                continue;
            }
        };
        if !store.swap_compares_values() && new == cur.value {
            // A cached state is confirmed before "unchanged" is answered from it.
            if !state.from_cache || state.confirm(store, key, &cur).await? {
                return Ok(cur);
            }
            continue;
        }
        match store.compare_and_swap(key, &cur, new).await? {
            Outcome::Written(obj) | Outcome::Unchanged(obj) => return Ok(obj),
            // Retry on what is there now.
            Outcome::Conflict(live) => state.conflict(live),
        }
    }
}

/// [`Storage::delete`](super::Storage::delete) on `store`.
pub async fn delete<S: OptimisticStore + ?Sized>(
    store: &S,
    key: &str,
    preconditions: Option<&Preconditions>,
    validate_deletion: &mut dyn ValidateDeletion,
    cached_existing: Option<StoredObject>,
) -> Result<StoredObject, StorageError> {
    validate_key(key)?;
    let mut state = State::start(store, key, cached_existing).await?;
    loop {
        let Some(cur) = state.current.take() else {
            return Err(store.key_not_found(key, state.seen).await);
        };
        if let Some(p) = preconditions
            && let Err(e) = p.check(&cur)
        {
            state.stale_or_fail(store, key, &cur, e).await?;
            continue;
        }
        if let Err(e) = validate_deletion.validate(cur.clone()).await {
            state.stale_or_fail(store, key, &cur, e).await?;
            continue;
        }
        match store.compare_and_delete(key, &cur).await? {
            Outcome::Written(obj) => return Ok(obj),
            Outcome::Unchanged(live) => state.conflict(Some(live)),
            Outcome::Conflict(live) => state.conflict(live),
        }
    }
}

/// Where one loop stands: the object the next attempt works on and where it came from.
struct State {
    /// The object to work on (`None`: the key is absent); taken by each attempt, set again before the next one.
    current: Option<StoredObject>,
    /// Whether `current` is the caller's cached guess rather than something the store answered in this call.
    from_cache: bool,
    /// The [`Latest::revision`] of the last read, for [`OptimisticStore::key_not_found`].
    seen: Option<u64>,
}

impl State {
    /// Starts from the cached guess, or else from a read.
    async fn start<S: OptimisticStore + ?Sized>(
        store: &S,
        key: &str,
        cached_existing: Option<StoredObject>,
    ) -> Result<State, StorageError> {
        Ok(match cached_existing {
            Some(c) => State {
                current: Some(c),
                from_cache: true,
                seen: None,
            },
            None => {
                let read = store.latest(key).await?;
                State {
                    current: read.object,
                    from_cache: false,
                    seen: read.revision,
                }
            }
        })
    }

    /// Continues from what a failed conditional write found (this keeps `seen`: no read happened).
    fn conflict(&mut self, live: Option<StoredObject>) {
        self.current = live;
        self.from_cache = false;
    }

    /// Continues from a fresh read.
    fn reread(&mut self, read: Latest) {
        self.current = read.object;
        self.seen = read.revision;
        self.from_cache = false;
    }

    /// After `err`, computed against `used`: final, unless `used` was the cached guess and the store has moved on,
    /// in which case the loop continues from the live object.
    async fn stale_or_fail<S: OptimisticStore + ?Sized>(
        &mut self,
        store: &S,
        key: &str,
        used: &StoredObject,
        err: StorageError,
    ) -> Result<(), StorageError> {
        if !self.from_cache || self.confirm(store, key, used).await? {
            return Err(err);
        }
        Ok(())
    }

    /// Whether `used` (a cached guess) is still the key's current object; when it is not, the loop goes on from
    /// the live one.
    async fn confirm<S: OptimisticStore + ?Sized>(
        &mut self,
        store: &S,
        key: &str,
        used: &StoredObject,
    ) -> Result<bool, StorageError> {
        let fresh = store.latest(key).await?;
        if fresh
            .object
            .as_ref()
            .is_some_and(|f| f.revision == used.revision)
        {
            return Ok(true);
        }
        self.reread(fresh);
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    //! The driver's rules on a one-key store that counts its calls; the conformance suite checks the backends.

    use std::future::ready;
    use std::sync::Mutex;

    use super::*;
    use crate::AllowDeletion;

    const KEY: &str = "/k";

    #[derive(Default)]
    struct Fake {
        compares_values: bool,
        state: Mutex<FakeState>,
    }

    #[derive(Default)]
    struct FakeState {
        revision: u64,
        object: Option<StoredObject>,
        reads: u32,
        writes: u32,
        not_found_seen: Option<Option<u64>>,
    }

    impl Fake {
        fn with(value: &'static str) -> Fake {
            let fake = Fake::default();
            fake.put(value);
            fake
        }

        fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
            self.state.lock().unwrap()
        }

        /// A write by someone else.
        fn put(&self, value: &'static str) -> StoredObject {
            let mut s = self.state();
            s.revision += 1;
            let obj = StoredObject {
                key: KEY.into(),
                value: Bytes::from(value),
                revision: s.revision,
            };
            s.object = Some(obj.clone());
            obj
        }

        fn write(&self, value: Option<Bytes>) -> StoredObject {
            let mut s = self.state();
            s.writes += 1;
            s.revision += 1;
            let old = s.object.take();
            s.object = value.clone().map(|value| StoredObject {
                key: KEY.into(),
                value,
                revision: s.revision,
            });
            StoredObject {
                key: KEY.into(),
                value: value.or(old.map(|o| o.value)).unwrap_or_default(),
                revision: s.revision,
            }
        }

        /// Reads and writes so far.
        fn counts(&self) -> (u32, u32) {
            let s = self.state();
            (s.reads, s.writes)
        }

        fn current(&self) -> Option<StoredObject> {
            self.state().object.clone()
        }
    }

    #[async_trait]
    impl OptimisticStore for Fake {
        async fn latest(&self, _key: &str) -> Result<Latest, StorageError> {
            let mut s = self.state();
            s.reads += 1;
            Ok(Latest {
                object: s.object.clone(),
                revision: Some(s.revision),
            })
        }

        async fn create_if_absent(
            &self,
            _key: &str,
            value: Bytes,
        ) -> Result<Outcome, StorageError> {
            if let Some(live) = self.current() {
                return Ok(Outcome::Conflict(Some(live)));
            }
            Ok(Outcome::Written(self.write(Some(value))))
        }

        async fn compare_and_swap(
            &self,
            _key: &str,
            expected: &StoredObject,
            value: Bytes,
        ) -> Result<Outcome, StorageError> {
            match self.current() {
                Some(live) if live.revision == expected.revision => {
                    if self.compares_values && live.value == value {
                        return Ok(Outcome::Unchanged(live));
                    }
                    Ok(Outcome::Written(self.write(Some(value))))
                }
                live => Ok(Outcome::Conflict(live)),
            }
        }

        async fn compare_and_delete(
            &self,
            _key: &str,
            expected: &StoredObject,
        ) -> Result<Outcome, StorageError> {
            match self.current() {
                Some(live) if live.revision == expected.revision => {
                    Ok(Outcome::Written(self.write(None)))
                }
                live => Ok(Outcome::Conflict(live)),
            }
        }

        async fn key_not_found(&self, key: &str, seen: Option<u64>) -> StorageError {
            self.state().not_found_seen = Some(seen);
            StorageError::KeyNotFound {
                key: key.into(),
                revision: seen.unwrap_or(0),
            }
        }

        fn swap_compares_values(&self) -> bool {
            self.compares_values
        }
    }

    fn same_bytes(cur: Option<StoredObject>) -> std::future::Ready<Result<Bytes, StorageError>> {
        ready(Ok(cur.map(|c| c.value).unwrap_or_default()))
    }

    #[tokio::test]
    async fn unchanged_bytes_are_not_written() {
        // Compared by the driver: no swap at all when the object was read in this call.
        let fake = Fake::with("a");
        let got = guaranteed_update(&fake, KEY, false, None, &mut same_bytes, None)
            .await
            .unwrap();
        assert_eq!(Some(got), fake.current());
        assert_eq!(fake.counts(), (1, 0));

        // Compared by the store's swap.
        let fake = Fake {
            compares_values: true,
            ..Fake::with("a")
        };
        let got = guaranteed_update(&fake, KEY, false, None, &mut same_bytes, None)
            .await
            .unwrap();
        assert_eq!(Some(got), fake.current());
        assert_eq!(fake.state().writes, 0);
    }

    #[tokio::test]
    async fn unchanged_from_a_cached_guess_is_confirmed_first() {
        let fake = Fake::with("a");
        let guess = fake.current();
        let got = guaranteed_update(&fake, KEY, false, None, &mut same_bytes, guess.clone())
            .await
            .unwrap();
        assert_eq!(Some(got), guess);
        assert_eq!(fake.counts(), (1, 0));

        // A stale guess: the update runs again on the live object.
        let stale = fake.current();
        let live = fake.put("b");
        let mut seen = Vec::new();
        let mut update = |cur: Option<StoredObject>| {
            seen.push(cur.clone().unwrap().value);
            same_bytes(cur)
        };
        let got = guaranteed_update(&fake, KEY, false, None, &mut update, stale)
            .await
            .unwrap();
        assert_eq!(got, live);
        assert_eq!(seen, ["a", "b"]);
        assert_eq!(fake.state().writes, 0);
    }

    #[tokio::test]
    async fn keep_writes_nothing_and_answers_the_live_object() {
        let fake = Fake::with("a");
        let mut keep = |_: Option<StoredObject>| ready(Ok(NewValue::Keep));
        let got = guaranteed_update(&fake, KEY, false, None, &mut keep, None)
            .await
            .unwrap();
        assert_eq!(Some(got), fake.current());
        assert_eq!(fake.counts(), (1, 0));

        // Decided on a stale guess: decided again on the live object, which is answered.
        let stale = fake.current();
        let live = fake.put("b");
        let mut seen = Vec::new();
        let mut keep = |cur: Option<StoredObject>| {
            seen.push(cur.unwrap().value);
            ready(Ok(NewValue::Keep))
        };
        let got = guaranteed_update(&fake, KEY, false, None, &mut keep, stale)
            .await
            .unwrap();
        assert_eq!(got, live);
        assert_eq!(seen, ["a", "b"]);
        assert_eq!(fake.state().writes, 0);

        // Nothing to keep: not found, and nothing is created.
        let fake = Fake::default();
        let mut keep = |_: Option<StoredObject>| ready(Ok(NewValue::Keep));
        let err = guaranteed_update(&fake, KEY, true, None, &mut keep, None)
            .await
            .unwrap_err();
        assert!(err.is_not_found(), "{err}");
        assert_eq!((fake.current(), fake.state().writes), (None, 0));
    }

    #[tokio::test]
    async fn a_failure_on_a_cached_guess_is_retried_once_on_the_live_object() {
        let fake = Fake::with("a");
        let stale = fake.current().unwrap();
        let live = fake.put("b");
        let pre = Preconditions::new().with_resource_version(live.revision);
        let mut update = |_: Option<StoredObject>| ready(Ok(Bytes::from("c")));
        let got = guaranteed_update(&fake, KEY, false, Some(&pre), &mut update, Some(stale))
            .await
            .unwrap();
        assert_eq!(got.value, "c");

        // The guess is current: the failure stands after one read.
        let fake = Fake::with("a");
        let guess = fake.current();
        let reads = fake.state().reads;
        let pre = Preconditions::new().with_resource_version(99);
        let err = delete(&fake, KEY, Some(&pre), &mut AllowDeletion, guess)
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::InvalidObj { .. }), "{err}");
        assert_eq!(fake.state().reads, reads + 1);

        // Not from a cache: no read, the failure stands.
        let fake = Fake::with("a");
        let mut refuse = |_: StoredObject| ready(Err(StorageError::Internal("no".into())));
        let err = delete(&fake, KEY, None, &mut refuse, None)
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::Internal(_)), "{err}");
        assert_eq!(fake.state().reads, 1);
    }

    #[tokio::test]
    async fn conflicts_retry_on_what_the_write_found() {
        let fake = Fake::with("a");
        let mut calls = 0;
        let mut update = |cur: Option<StoredObject>| {
            calls += 1;
            if calls == 1 {
                fake.put("b");
            }
            let cur = cur.unwrap();
            ready(Ok(Bytes::from(format!(
                "{}+",
                String::from_utf8_lossy(&cur.value)
            ))))
        };
        let got = guaranteed_update(&fake, KEY, false, None, &mut update, None)
            .await
            .unwrap();
        assert_eq!(got.value, "b+");
        assert_eq!(fake.counts(), (1, 1));

        let guess = fake.current();
        let live = fake.put("c");
        let deleted = delete(&fake, KEY, None, &mut AllowDeletion, guess)
            .await
            .unwrap();
        assert_eq!(deleted.value, live.value);
        assert_eq!(deleted.revision, live.revision + 1);
        assert_eq!(fake.current(), None);
    }

    #[tokio::test]
    async fn missing_keys_fail_with_the_last_read_revision_or_are_created() {
        let fake = Fake::default();
        let mut update = |cur: Option<StoredObject>| {
            assert!(cur.is_none());
            ready(Ok(Bytes::from("new")))
        };
        let err = guaranteed_update(&fake, KEY, false, None, &mut update, None)
            .await
            .unwrap_err();
        assert!(err.is_not_found());
        assert_eq!(fake.state().not_found_seen, Some(Some(0)));
        let created = guaranteed_update(&fake, KEY, true, None, &mut update, None)
            .await
            .unwrap();
        assert_eq!(created.value, "new");

        // Deleted behind a cached guess: the failed write tells, and no read happened.
        let guess = fake.current();
        fake.write(None);
        let err = delete(&fake, KEY, None, &mut AllowDeletion, guess)
            .await
            .unwrap_err();
        assert!(err.is_not_found());
        assert_eq!(fake.state().not_found_seen, Some(None));

        assert!(matches!(
            delete(&fake, "no-slash", None, &mut AllowDeletion, None).await,
            Err(StorageError::InvalidKey(_))
        ));
    }
}
