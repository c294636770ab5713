//! The conformance cases. Each takes a fresh store and panics on a contract violation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::future::{Ready, ready};

use crate::{
    AllowDeletion, Attrs, AttrsFn, EventType, FieldSelector, GetOptions, LabelSelector,
    ListOptions, ListResult, NewValue, Preconditions, Predicate, ResourceKeys,
    ResourceVersionMatch, Storage, StorageError, StoredObject, UidFn, WatchEvent, WatchOptions,
    WatchStream, decode_continue,
};

type Store = Arc<dyn Storage>;

/// How long to wait for an event that must come.
const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------- helpers

/// A random prefix so cases never see each other's keys on a shared backend.
fn prefix() -> String {
    format!("/conformance-{}", uuid::Uuid::new_v4().simple())
}

/// A test object: JSON with the metadata a predicate or precondition reads.
fn object(name: &str, uid: &str, labels: &[(&str, &str)], data: &str) -> Bytes {
    let labels: serde_json::Map<String, serde_json::Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
        .collect();
    let v =
        serde_json::json!({"metadata": {"name": name, "uid": uid, "labels": labels}, "data": data});
    Bytes::from(serde_json::to_vec(&v).expect("json"))
}

fn plain(name: &str, data: &str) -> Bytes {
    object(name, &format!("uid-{name}"), &[], data)
}

fn json(value: &[u8]) -> serde_json::Value {
    serde_json::from_slice(value).unwrap_or(serde_json::Value::Null)
}

fn data_of(value: &[u8]) -> String {
    json(value)["data"].as_str().unwrap_or_default().to_string()
}

/// Reads labels and the fields `metadata.name` and `data` from a test object.
fn attrs_fn() -> AttrsFn {
    Arc::new(|value: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(value)
            .map_err(|e| StorageError::Internal(format!("bad test object: {e}")))?;
        let mut attrs = Attrs::default();
        if let Some(labels) = v["metadata"]["labels"].as_object() {
            for (k, l) in labels {
                attrs
                    .labels
                    .insert(k.clone(), l.as_str().unwrap_or_default().to_string());
            }
        }
        attrs.fields.insert(
            "metadata.name".into(),
            v["metadata"]["name"].as_str().unwrap_or_default().into(),
        );
        attrs
            .fields
            .insert("data".into(), v["data"].as_str().unwrap_or_default().into());
        Ok(attrs)
    })
}

fn uid_fn() -> UidFn {
    Arc::new(|value: &[u8]| {
        Ok(json(value)["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    })
}

fn labels(selector: &str) -> Predicate {
    Predicate::new(
        LabelSelector::parse(selector).expect("selector"),
        FieldSelector::everything(),
        attrs_fn(),
    )
}

fn fields(selector: &str) -> Predicate {
    Predicate::new(
        LabelSelector::everything(),
        FieldSelector::parse(selector).expect("selector"),
        attrs_fn(),
    )
}

async fn must_create(store: &Store, key: &str, value: Bytes) -> StoredObject {
    match store.create(key, value.clone()).await {
        Ok(o) => {
            assert_eq!(o.key, key);
            assert_eq!(o.value, value, "create must return the bytes written");
            o
        }
        Err(e) => panic!("create {key}: {e}"),
    }
}

async fn read(store: &Store, key: &str) -> Result<StoredObject, StorageError> {
    store.get(key, &GetOptions::default()).await
}

async fn set(store: &Store, key: &str, value: Bytes) -> StoredObject {
    let mut f = move |_cur: Option<StoredObject>| ready(Ok::<_, StorageError>(value.clone()));
    store
        .guaranteed_update(key, false, None, &mut f, None)
        .await
        .expect("update")
}

async fn delete(store: &Store, key: &str) -> StoredObject {
    store
        .delete(key, None, &mut AllowDeletion, None)
        .await
        .expect("delete")
}

fn set_to(
    value: Bytes,
) -> impl FnMut(Option<StoredObject>) -> Ready<Result<Bytes, StorageError>> + Send {
    move |_| ready(Ok(value.clone()))
}

async fn list_all(store: &Store, key: &str) -> ListResult {
    store
        .list(
            key,
            &ListOptions {
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("list")
}

fn keys_of(items: &[StoredObject]) -> Vec<String> {
    items.iter().map(|o| o.key.clone()).collect()
}

async fn open_watch(store: &Store, key: &str, opts: WatchOptions) -> WatchStream {
    store
        .watch(key, &opts)
        .await
        .unwrap_or_else(|e| panic!("watch {key}: {e}"))
}

fn from(rv: u64, recursive: bool) -> WatchOptions {
    WatchOptions {
        resource_version: Some(rv),
        recursive,
        ..Default::default()
    }
}

/// The next event, bookmarks included.
async fn next_any(w: &mut WatchStream) -> WatchEvent {
    match tokio::time::timeout(EVENT_TIMEOUT, w.next()).await {
        Ok(Some(ev)) => ev,
        Ok(None) => panic!("watch ended unexpectedly"),
        Err(_) => panic!("no watch event within {EVENT_TIMEOUT:?}"),
    }
}

/// The next non-bookmark event.
async fn next(w: &mut WatchStream) -> WatchEvent {
    loop {
        let ev = next_any(w).await;
        if ev.event_type != EventType::Bookmark {
            return ev;
        }
    }
}

async fn expect_event(w: &mut WatchStream, ty: EventType, key: &str, data: &str) -> WatchEvent {
    let ev = next(w).await;
    assert_eq!(
        (ev.event_type, ev.key.as_str()),
        (ty, key),
        "unexpected event {ev:?}"
    );
    if ev.event_type == EventType::Error {
        panic!("watch error: {:?}", ev.error);
    }
    assert_eq!(data_of(&ev.value), data, "event value of {ev:?}");
    ev
}

/// Writes a sentinel object and checks it is the next event: nothing else came in between.
async fn expect_sentinel_next(store: &Store, w: &mut WatchStream, key: &str) {
    let o = must_create(
        store,
        key,
        object("sentinel", "s", &[("sentinel", "true")], "sentinel"),
    )
    .await;
    let ev = next(w).await;
    assert_eq!(
        (ev.event_type, ev.key.as_str()),
        (EventType::Added, key),
        "expected the sentinel, got {ev:?}"
    );
    assert_eq!(ev.revision, o.revision);
}

fn assert_code(err: &StorageError, code: u16) {
    assert_eq!(err.code(), code, "unexpected error {err:?} ({err})");
}

// ---------------------------------------------------------------- store tests

/// Create stores the bytes, reports the revision, and Get reads them back.
pub async fn create(store: Store) {
    let p = prefix();
    let key = format!("{p}/ns/foo");
    let before = store.current_revision().await.expect("current_revision");
    let o = create_obj(&store, &key, plain("foo", "v1")).await;
    assert!(
        o.revision > before,
        "create revision {} not after {before}",
        o.revision
    );
    assert!(store.current_revision().await.expect("rev") >= o.revision);
    let got = read(&store, &key).await.expect("get");
    assert_eq!(got, o);
}

async fn create_obj(store: &Store, key: &str, value: Bytes) -> StoredObject {
    must_create(store, key, value).await
}

/// A second create of the same key is 409 AlreadyExists and changes nothing.
pub async fn create_with_key_exist(store: Store) {
    let key = format!("{}/foo", prefix());
    let o = create_obj(&store, &key, plain("foo", "v1")).await;
    let err = store
        .create(&key, plain("foo", "v2"))
        .await
        .expect_err("second create");
    assert!(err.is_exists(), "{err:?}");
    assert_eq!(err.status(), (409, "AlreadyExists"));
    assert_eq!(read(&store, &key).await.expect("get"), o);
}

/// Get: 404 for a missing key, "not older than" resourceVersion, 504 for a future one.
pub async fn get(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let err = read(&store, &key).await.expect_err("missing");
    assert!(err.is_not_found());
    assert_eq!(err.status(), (404, "NotFound"));
    let o = create_obj(&store, &key, plain("foo", "v1")).await;
    for rv in [None, Some(0), Some(o.revision)] {
        let got = store
            .get(
                &key,
                &GetOptions {
                    resource_version: rv,
                },
            )
            .await
            .expect("get");
        assert_eq!(got, o, "rv {rv:?}");
    }
    let current = store.current_revision().await.expect("rev");
    let too_large = current + 1000;
    let err = store
        .get(
            &key,
            &GetOptions {
                resource_version: Some(too_large),
            },
        )
        .await
        .expect_err("future rv");
    assert!(err.is_too_large_resource_version(), "{err:?}");
    assert_eq!(err.status(), (504, "Timeout"));
    assert!(
        err.to_string().starts_with(&format!(
            "Too large resource version: {too_large}, current: "
        )),
        "{err}"
    );
}

/// A non-recursive list reads exactly one key.
pub async fn get_list_non_recursive(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let o = create_obj(&store, &key, plain("foo", "v1")).await;
    create_obj(&store, &format!("{p}/foo/bar"), plain("bar", "v1")).await;
    create_obj(&store, &format!("{p}/foobar"), plain("foobar", "v1")).await;
    let l = store
        .list(&key, &ListOptions::default())
        .await
        .expect("list");
    assert_eq!(l.items, vec![o.clone()]);
    assert!(l.revision >= o.revision);
    let l = store
        .list(&format!("{p}/missing"), &ListOptions::default())
        .await
        .expect("list missing");
    assert!(l.items.is_empty());
    // Exact revision of a non-recursive read.
    set(&store, &key, plain("foo", "v2")).await;
    let l = store
        .list(
            &key,
            &ListOptions {
                resource_version: Some(o.revision),
                resource_version_match: Some(ResourceVersionMatch::Exact),
                ..Default::default()
            },
        )
        .await
        .expect("exact");
    assert_eq!(l.items, vec![o.clone()]);
    assert_eq!(l.revision, o.revision);
}

/// A recursive list of `/a` covers `/a/...` but never `/ab`.
pub async fn get_list_recursive_prefix(store: Store) {
    let p = prefix();
    let a = create_obj(&store, &format!("{p}/foo/a"), plain("a", "1")).await;
    let b = create_obj(&store, &format!("{p}/foo/b/c"), plain("c", "1")).await;
    create_obj(&store, &format!("{p}/foobar/x"), plain("x", "1")).await;
    create_obj(&store, &format!("{p}/foo"), plain("foo", "1")).await;
    for key in [format!("{p}/foo"), format!("{p}/foo/")] {
        let l = list_all(&store, &key).await;
        assert_eq!(
            keys_of(&l.items),
            vec![a.key.clone(), b.key.clone()],
            "list {key}"
        );
    }
}

/// Keys with `.`/`..` segments or no leading slash are refused with a 400 by every call.
pub async fn key_schema(store: Store) {
    let p = prefix();
    let keys = ResourceKeys::new(&p, "pizzas").expect("keys");
    let key = keys.namespaced("ns", "margherita").expect("key");
    assert_eq!(key, format!("{p}/pizzas/ns/margherita"));
    create_obj(&store, &key, plain("margherita", "1")).await;
    let bad = [
        format!("{p}/pizzas/../secrets/x"),
        format!("{p}/pizzas/./x"),
        format!("{p}/pizzas/.."),
        "relative/key".to_string(),
        String::new(),
    ];
    for k in &bad {
        assert_code(
            &store.create(k, plain("x", "1")).await.expect_err("create"),
            400,
        );
        assert_code(&read(&store, k).await.expect_err("get"), 400);
        assert_code(
            &store
                .list(
                    k,
                    &ListOptions {
                        recursive: true,
                        ..Default::default()
                    },
                )
                .await
                .expect_err("list"),
            400,
        );
        assert_code(
            &store.watch(k, &from(0, true)).await.err().expect("watch"),
            400,
        );
        assert_code(
            &store
                .delete(k, None, &mut AllowDeletion, None)
                .await
                .expect_err("delete"),
            400,
        );
        let mut f = set_to(plain("x", "1"));
        assert_code(
            &store
                .guaranteed_update(k, true, None, &mut f, None)
                .await
                .expect_err("update"),
            400,
        );
    }
    for name in ["..", ".", "a/b", ""] {
        assert_code(&keys.namespaced("ns", name).expect_err("bad name"), 400);
    }
    assert_eq!(list_all(&store, keys.root()).await.items.len(), 1);
}

/// Delete with UID preconditions: a mismatch is 409 with upstream's text; a match deletes and returns the last
/// value at the deletion revision.
pub async fn conditional_delete(store: Store) {
    let key = format!("{}/foo", prefix());
    let o = create_obj(&store, &key, object("foo", "A", &[], "v1")).await;
    let wrong = Preconditions::new().with_uid("B", uid_fn());
    let err = store
        .delete(&key, Some(&wrong), &mut AllowDeletion, None)
        .await
        .expect_err("uid mismatch");
    assert!(err.is_invalid_obj(), "{err:?}");
    assert_eq!(err.status(), (409, "Conflict"));
    assert!(
        err.to_string()
            .contains("Precondition failed: UID in precondition: B, UID in object meta: A"),
        "{err}"
    );
    let wrong_rv = Preconditions::new().with_resource_version(o.revision + 1000);
    let err = store
        .delete(&key, Some(&wrong_rv), &mut AllowDeletion, None)
        .await
        .expect_err("rv mismatch");
    assert!(
        err.to_string()
            .contains("Precondition failed: ResourceVersion in precondition:"),
        "{err}"
    );
    let right = Preconditions::new()
        .with_uid("A", uid_fn())
        .with_resource_version(o.revision);
    let d = store
        .delete(&key, Some(&right), &mut AllowDeletion, None)
        .await
        .expect("delete");
    assert_eq!(d.value, o.value);
    assert!(d.revision > o.revision);
    assert!(read(&store, &key).await.expect_err("gone").is_not_found());
    let err = store
        .delete(&key, None, &mut AllowDeletion, None)
        .await
        .expect_err("twice");
    assert!(err.is_not_found());
}

/// A correct cached object saves the read.
pub async fn delete_with_suggestion(store: Store) {
    let key = format!("{}/foo", prefix());
    let o = create_obj(&store, &key, plain("foo", "v1")).await;
    let d = store
        .delete(&key, None, &mut AllowDeletion, Some(o.clone()))
        .await
        .expect("delete");
    assert_eq!(d.value, o.value);
    assert!(read(&store, &key).await.is_err());
}

/// A stale cached object still deletes the current one, and returns the current value.
pub async fn delete_with_suggestion_and_conflict(store: Store) {
    let key = format!("{}/foo", prefix());
    let stale = create_obj(&store, &key, plain("foo", "v1")).await;
    let fresh = set(&store, &key, plain("foo", "v2")).await;
    let d = store
        .delete(&key, None, &mut AllowDeletion, Some(stale))
        .await
        .expect("delete");
    assert_eq!(d.value, fresh.value);
    assert!(d.revision > fresh.revision);
    assert!(read(&store, &key).await.is_err());
}

/// A cached object that was deleted meanwhile gives 404.
pub async fn delete_with_suggestion_of_deleted_object(store: Store) {
    let key = format!("{}/foo", prefix());
    let stale = create_obj(&store, &key, plain("foo", "v1")).await;
    delete(&store, &key).await;
    let err = store
        .delete(&key, None, &mut AllowDeletion, Some(stale))
        .await
        .expect_err("deleted");
    assert!(err.is_not_found(), "{err:?}");
}

/// A precondition that fails on a stale cached object but holds on the fresh one deletes.
pub async fn preconditional_delete_with_suggestion(store: Store) {
    let key = format!("{}/foo", prefix());
    let stale = create_obj(&store, &key, object("foo", "A", &[], "v1")).await;
    delete(&store, &key).await;
    create_obj(&store, &key, object("foo", "B", &[], "v2")).await;
    let pre = Preconditions::new().with_uid("B", uid_fn());
    let d = store
        .delete(&key, Some(&pre), &mut AllowDeletion, Some(stale))
        .await
        .expect("delete");
    assert_eq!(data_of(&d.value), "v2");
}

/// Validation runs on the object being deleted; a refusal on stale cached state is retried on fresh state, and a
/// refusal on fresh state is returned unchanged.
pub async fn validate_deletion_with_suggestion(store: Store) {
    let key = format!("{}/foo", prefix());
    let stale = create_obj(&store, &key, plain("foo", "v1")).await;
    set(&store, &key, plain("foo", "v2")).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let mut only_v2 = move |cur: StoredObject| {
        c.fetch_add(1, Ordering::SeqCst);
        ready(if data_of(&cur.value) == "v2" {
            Ok(())
        } else {
            Err(StorageError::Invalid("refusing v1".into()))
        })
    };
    let d = store
        .delete(&key, None, &mut only_v2, Some(stale))
        .await
        .expect("delete");
    assert_eq!(data_of(&d.value), "v2");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "validation runs on stale then fresh state"
    );

    let key2 = format!("{key}-2");
    create_obj(&store, &key2, plain("foo2", "v1")).await;
    let mut refuse =
        |_cur: StoredObject| ready(Err::<(), _>(StorageError::callback(std::fmt::Error)));
    let err = store
        .delete(&key2, None, &mut refuse, None)
        .await
        .expect_err("refused");
    match err {
        StorageError::Callback(e) => assert!(e.downcast_ref::<std::fmt::Error>().is_some()),
        e => panic!("callback error not passed through: {e:?}"),
    }
    assert!(read(&store, &key2).await.is_ok());
}

/// GuaranteedUpdate: sees the current object, writes a new revision, creates with ignore_not_found, 404 without.
pub async fn guaranteed_update(store: Store) {
    let key = format!("{}/foo", prefix());
    let mut f = set_to(plain("foo", "v1"));
    let err = store
        .guaranteed_update(&key, false, None, &mut f, None)
        .await
        .expect_err("missing");
    assert!(err.is_not_found());
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut record = move |cur: Option<StoredObject>| {
        let next = match &cur {
            None => "v1".to_string(),
            Some(o) => format!("{}+", data_of(&o.value)),
        };
        s.lock().expect("lock").push(cur.map(|o| data_of(&o.value)));
        ready(Ok(plain("foo", &next)))
    };
    let o1 = store
        .guaranteed_update(&key, true, None, &mut record, None)
        .await
        .expect("create on update");
    assert_eq!(data_of(&o1.value), "v1");
    let o2 = store
        .guaranteed_update(&key, false, None, &mut record, None)
        .await
        .expect("update");
    assert_eq!(data_of(&o2.value), "v1+");
    assert!(o2.revision > o1.revision);
    assert_eq!(read(&store, &key).await.expect("get"), o2);
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![None, Some("v1".to_string())]
    );
}

/// No write happens when the new bytes equal the stored bytes: the revision stays and watchers see nothing.
pub async fn guaranteed_update_checks_stored_data(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let o = create_obj(&store, &key, plain("foo", "v1")).await;
    let mut w = open_watch(&store, &p, from(o.revision, true)).await;
    let mut same = set_to(o.value.clone());
    let u = store
        .guaranteed_update(&key, false, None, &mut same, None)
        .await
        .expect("noop update");
    assert_eq!(
        u, o,
        "an unchanged update must return the stored object at its old revision"
    );
    let u = store
        .guaranteed_update(&key, false, None, &mut same, Some(o.clone()))
        .await
        .expect("noop cached");
    assert_eq!(u, o);
    assert_eq!(read(&store, &key).await.expect("get").revision, o.revision);
    expect_sentinel_next(&store, &mut w, &format!("{p}/sentinel")).await;
}

/// A try-update that keeps the object writes nothing and answers the live object; decided on a stale cached guess,
/// it is decided again on the live object; on a missing key it fails with not found and creates nothing.
pub async fn guaranteed_update_keep(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let stale = create_obj(&store, &key, plain("foo", "a")).await;
    let live = set(&store, &key, plain("foo", "b")).await;
    let mut w = open_watch(&store, &p, from(live.revision, true)).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut keep = move |cur: Option<StoredObject>| {
        s.lock().expect("lock").push(cur.map(|o| data_of(&o.value)));
        ready(Ok(NewValue::Keep))
    };
    let kept = store
        .guaranteed_update(&key, false, None, &mut keep, Some(stale))
        .await
        .expect("keep");
    assert_eq!(
        kept, live,
        "keeping answers the live object at its revision"
    );
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![Some("a".to_string()), Some("b".to_string())]
    );
    let missing = format!("{p}/missing");
    let err = store
        .guaranteed_update(&missing, true, None, &mut keep, None)
        .await
        .expect_err("nothing to keep");
    assert!(err.is_not_found(), "{err}");
    assert!(
        read(&store, &missing)
            .await
            .is_err_and(|e| e.is_not_found())
    );
    assert_eq!(read(&store, &key).await.expect("get"), live);
    expect_sentinel_next(&store, &mut w, &format!("{p}/sentinel")).await;
}

/// Two racing updates both land: the loser retries on the winner's value.
pub async fn guaranteed_update_with_conflict(store: Store) {
    let key = format!("{}/counter", prefix());
    create_obj(&store, &key, plain("counter", "0")).await;
    let (entered_tx, entered_rx) = tokio::sync::oneshot::channel::<()>();
    let (release_tx, release_rx) = tokio::sync::oneshot::channel::<()>();
    let slow_store = store.clone();
    let slow_key = key.clone();
    let slow = tokio::spawn(async move {
        let gates = Arc::new(tokio::sync::Mutex::new(Some((entered_tx, release_rx))));
        let attempts = Arc::new(AtomicUsize::new(0));
        let a = attempts.clone();
        let mut f = move |cur: Option<StoredObject>| {
            let gates = gates.clone();
            a.fetch_add(1, Ordering::SeqCst);
            async move {
                if let Some((entered, release)) = gates.lock().await.take() {
                    let _ = entered.send(());
                    let _ = release.await;
                }
                let n: u64 = data_of(&cur.expect("exists").value).parse().unwrap_or(0);
                Ok(plain("counter", &(n + 1).to_string()))
            }
        };
        let out = slow_store
            .guaranteed_update(&slow_key, false, None, &mut f, None)
            .await
            .expect("slow");
        (out, attempts.load(Ordering::SeqCst))
    });
    entered_rx.await.expect("slow update started");
    let mut inc = |cur: Option<StoredObject>| {
        let n: u64 = data_of(&cur.expect("exists").value).parse().unwrap_or(0);
        ready(Ok(plain("counter", &(n + 1).to_string())))
    };
    store
        .guaranteed_update(&key, false, None, &mut inc, None)
        .await
        .expect("fast");
    release_tx.send(()).expect("release");
    let (out, attempts) = slow.await.expect("join");
    assert_eq!(data_of(&out.value), "2");
    assert_eq!(attempts, 2, "the losing update must retry exactly once");
}

/// A stale cached object is only a guess: the write conflicts and the update re-runs on the current object.
pub async fn guaranteed_update_with_suggestion_and_conflict(store: Store) {
    let key = format!("{}/foo", prefix());
    let stale = create_obj(&store, &key, plain("foo", "a")).await;
    set(&store, &key, plain("foo", "b")).await;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut append = move |cur: Option<StoredObject>| {
        let d = data_of(&cur.expect("exists").value);
        s.lock().expect("lock").push(d.clone());
        ready(Ok(plain("foo", &format!("{d}c"))))
    };
    let out = store
        .guaranteed_update(&key, false, None, &mut append, Some(stale))
        .await
        .expect("update");
    assert_eq!(data_of(&out.value), "bc");
    assert_eq!(
        *seen.lock().expect("lock"),
        vec!["a".to_string(), "b".to_string()]
    );
}

/// Preconditions on UID and resourceVersion gate updates, with 409 and upstream's texts.
pub async fn guaranteed_update_preconditions(store: Store) {
    let key = format!("{}/foo", prefix());
    let o = create_obj(&store, &key, object("foo", "A", &[], "v1")).await;
    let mut f = set_to(object("foo", "A", &[], "v2"));
    let bad_uid = Preconditions::new().with_uid("B", uid_fn());
    let err = store
        .guaranteed_update(&key, false, Some(&bad_uid), &mut f, None)
        .await
        .expect_err("uid");
    assert_eq!(err.status(), (409, "Conflict"));
    assert!(
        err.to_string()
            .contains("Precondition failed: UID in precondition: B, UID in object meta: A"),
        "{err}"
    );
    let bad_rv = Preconditions::new().with_resource_version(o.revision + 1000);
    let err = store
        .guaranteed_update(&key, false, Some(&bad_rv), &mut f, None)
        .await
        .expect_err("rv");
    assert!(
        err.to_string().contains(&format!(
            "Precondition failed: ResourceVersion in precondition: {}, ResourceVersion in object meta: {}",
            o.revision + 1000,
            o.revision
        )),
        "{err}"
    );
    assert_eq!(read(&store, &key).await.expect("get"), o);
    let ok = Preconditions::new()
        .with_uid("A", uid_fn())
        .with_resource_version(o.revision);
    let u = store
        .guaranteed_update(&key, false, Some(&ok), &mut f, None)
        .await
        .expect("update");
    assert_eq!(data_of(&u.value), "v2");
}

/// An error from try-update is returned unchanged and nothing is written.
pub async fn guaranteed_update_error_passthrough(store: Store) {
    let key = format!("{}/foo", prefix());
    let o = create_obj(&store, &key, plain("foo", "v1")).await;
    let mut fail = |_cur: Option<StoredObject>| {
        ready(Err::<Bytes, _>(StorageError::callback(std::fmt::Error)))
    };
    let err = store
        .guaranteed_update(&key, false, None, &mut fail, None)
        .await
        .expect_err("fails");
    match err {
        StorageError::Callback(e) => assert!(e.downcast_ref::<std::fmt::Error>().is_some()),
        e => panic!("callback error not passed through: {e:?}"),
    }
    assert_eq!(read(&store, &key).await.expect("get"), o);
}

// ---------------------------------------------------------------- list tests

/// Lists are in key order, at a revision no older than the last write, and filter by labels and fields.
pub async fn list(store: Store) {
    let p = prefix();
    let mut want = Vec::new();
    for (ns, name, color) in [
        ("b", "x", "red"),
        ("a", "y", "blue"),
        ("a", "x", "red"),
        ("c", "z", "green"),
    ] {
        let key = format!("{p}/{ns}/{name}");
        want.push(create_obj(&store, &key, object(name, "u", &[("color", color)], name)).await);
    }
    let last = want.iter().map(|o| o.revision).max().unwrap_or(0);
    want.sort_by(|a, b| a.key.cmp(&b.key));
    let l = list_all(&store, &p).await;
    assert_eq!(l.items, want);
    assert!(l.revision >= last);
    assert!(l.continue_token.is_none());
    assert_eq!(l.remaining_item_count, None);
    let red = store
        .list(
            &p,
            &ListOptions {
                recursive: true,
                predicate: labels("color=red"),
                ..Default::default()
            },
        )
        .await
        .expect("label list");
    assert_eq!(
        keys_of(&red.items),
        vec![format!("{p}/a/x"), format!("{p}/b/x")]
    );
    let not_red = store
        .list(
            &p,
            &ListOptions {
                recursive: true,
                predicate: labels("color notin (red)"),
                ..Default::default()
            },
        )
        .await
        .expect("notin list");
    assert_eq!(
        keys_of(&not_red.items),
        vec![format!("{p}/a/y"), format!("{p}/c/z")]
    );
    let named = store
        .list(
            &p,
            &ListOptions {
                recursive: true,
                predicate: fields("metadata.name=z"),
                ..Default::default()
            },
        )
        .await
        .expect("field list");
    assert_eq!(keys_of(&named.items), vec![format!("{p}/c/z")]);
}

/// resourceVersionMatch: Exact reads history, NotOlderThan reads a state at least as new as the revision (the
/// latest from a backend, possibly older from a watch cache, as upstream; 504 when the store is behind), legacy
/// `limit + rv` is exact.
pub async fn list_resource_version_match(store: Store) {
    let p = prefix();
    let a1 = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    let b1 = create_obj(&store, &format!("{p}/b"), plain("b", "1")).await;
    let a2 = set(&store, &format!("{p}/a"), plain("a", "2")).await;
    let b_gone = delete(&store, &format!("{p}/b")).await;
    // What the prefix held at each revision: a list is right if its items are the state at its revision.
    let state_at = |rev: u64| -> Vec<StoredObject> {
        let a = if rev >= a2.revision { &a2 } else { &a1 };
        if rev >= b1.revision && rev < b_gone.revision {
            vec![a.clone(), b1.clone()]
        } else {
            vec![a.clone()]
        }
    };
    let opts = |rv: Option<u64>, m: Option<ResourceVersionMatch>, limit: u64| ListOptions {
        resource_version: rv,
        resource_version_match: m,
        recursive: true,
        limit,
        ..Default::default()
    };
    let exact = store
        .list(
            &p,
            &opts(Some(b1.revision), Some(ResourceVersionMatch::Exact), 0),
        )
        .await
        .expect("exact");
    assert_eq!(exact.revision, b1.revision);
    assert_eq!(exact.items, vec![a1.clone(), b1.clone()]);
    let exact = store
        .list(
            &p,
            &opts(Some(a1.revision), Some(ResourceVersionMatch::Exact), 0),
        )
        .await
        .expect("exact");
    assert_eq!(exact.items, vec![a1.clone()]);
    let newer = store
        .list(
            &p,
            &opts(
                Some(a1.revision),
                Some(ResourceVersionMatch::NotOlderThan),
                0,
            ),
        )
        .await
        .expect("not older than");
    assert!(newer.revision >= a1.revision, "{newer:?}");
    assert_eq!(newer.items, state_at(newer.revision));
    let legacy = store
        .list(&p, &opts(Some(b1.revision), None, 10))
        .await
        .expect("legacy exact");
    assert_eq!(legacy.items, vec![a1.clone(), b1.clone()]);
    assert_eq!(legacy.revision, b1.revision);
    let legacy = store
        .list(&p, &opts(Some(a1.revision), None, 0))
        .await
        .expect("legacy latest");
    assert!(legacy.revision >= a1.revision, "{legacy:?}");
    assert_eq!(legacy.items, state_at(legacy.revision));
    let future = store.current_revision().await.expect("rev") + 1000;
    for m in [Some(ResourceVersionMatch::NotOlderThan), None] {
        let err = store
            .list(&p, &opts(Some(future), m, 0))
            .await
            .expect_err("future");
        assert!(err.is_too_large_resource_version(), "{m:?}: {err:?}");
        assert_eq!(err.status(), (504, "Timeout"));
    }
    let err = store
        .list(&p, &opts(None, Some(ResourceVersionMatch::Exact), 0))
        .await
        .expect_err("exact without rv");
    assert_code(&err, 400);
}

/// Pages: continue tokens, one revision for all pages, remainingItemCount, later writes invisible.
pub async fn list_continuation(store: Store) {
    let p = prefix();
    for name in ["a", "b", "c"] {
        create_obj(&store, &format!("{p}/{name}"), plain(name, "1")).await;
    }
    let page = |token: Option<String>| ListOptions {
        recursive: true,
        limit: 1,
        continue_token: token,
        ..Default::default()
    };
    let p1 = store.list(&p, &page(None)).await.expect("page 1");
    assert_eq!(keys_of(&p1.items), vec![format!("{p}/a")]);
    assert_eq!(p1.remaining_item_count, Some(2));
    let t1 = p1.continue_token.clone().expect("continue after page 1");
    // Writes after the first page are not visible to later pages, nor counted in their remainingItemCount.
    set(&store, &format!("{p}/b"), plain("b", "2")).await;
    create_obj(&store, &format!("{p}/bb"), plain("bb", "1")).await;
    delete(&store, &format!("{p}/c")).await;
    let p2 = store.list(&p, &page(Some(t1))).await.expect("page 2");
    assert_eq!(keys_of(&p2.items), vec![format!("{p}/b")]);
    assert_eq!(data_of(&p2.items[0].value), "1");
    assert_eq!(p2.revision, p1.revision);
    assert_eq!(p2.remaining_item_count, Some(1));
    let p3 = store
        .list(
            &p,
            &ListOptions {
                limit: 2,
                ..page(p2.continue_token.clone())
            },
        )
        .await
        .expect("page 3");
    assert_eq!(keys_of(&p3.items), vec![format!("{p}/c")]);
    assert_eq!(p3.revision, p1.revision);
    assert!(p3.continue_token.is_none());
    assert_eq!(p3.remaining_item_count, None);
    // resourceVersion "0" is allowed with continue, any other is not.
    let with_zero = ListOptions {
        resource_version: Some(0),
        ..page(p1.continue_token.clone())
    };
    assert!(store.list(&p, &with_zero).await.is_ok());
    let with_rv = ListOptions {
        resource_version: Some(p1.revision),
        ..page(p1.continue_token.clone())
    };
    let err = store
        .list(&p, &with_rv)
        .await
        .expect_err("rv with continue");
    assert_code(&err, 400);
    assert_eq!(
        err.to_string(),
        "specifying resource version is not allowed when using continue"
    );
}

/// Filtered pages fill up to the limit, skip non-matching keys, and carry no remainingItemCount.
pub async fn list_continuation_with_filter(store: Store) {
    let p = prefix();
    for (name, hit) in [
        ("1", "yes"),
        ("2", "no"),
        ("3", "yes"),
        ("4", "no"),
        ("5", "yes"),
    ] {
        create_obj(
            &store,
            &format!("{p}/{name}"),
            object(name, "u", &[("hit", hit)], name),
        )
        .await;
    }
    let opts = |token: Option<String>| ListOptions {
        recursive: true,
        limit: 2,
        continue_token: token,
        predicate: labels("hit=yes"),
        ..Default::default()
    };
    let p1 = store.list(&p, &opts(None)).await.expect("page 1");
    assert_eq!(keys_of(&p1.items), vec![format!("{p}/1"), format!("{p}/3")]);
    assert_eq!(p1.remaining_item_count, None);
    let p2 = store
        .list(&p, &opts(p1.continue_token.clone()))
        .await
        .expect("page 2");
    assert_eq!(keys_of(&p2.items), vec![format!("{p}/5")]);
    assert_eq!(p2.revision, p1.revision);
    assert!(p2.continue_token.is_none());
}

/// After compaction a continue token at the compacted revision is a 410 carrying a token that continues at the
/// latest revision.
pub async fn list_inconsistent_continuation(store: Store) {
    let p = prefix();
    for name in ["a", "b", "c"] {
        create_obj(&store, &format!("{p}/{name}"), plain(name, "1")).await;
    }
    let opts = |token: Option<String>| ListOptions {
        recursive: true,
        limit: 1,
        continue_token: token,
        ..Default::default()
    };
    let p1 = store.list(&p, &opts(None)).await.expect("page 1");
    set(&store, &format!("{p}/b"), plain("b", "2")).await;
    let rev = store.current_revision().await.expect("rev");
    store.compact(rev).await.expect("compact");
    let err = store
        .list(&p, &opts(p1.continue_token.clone()))
        .await
        .expect_err("compacted");
    assert_eq!(err.status(), (410, "Expired"));
    let StorageError::Expired {
        message,
        continue_token,
    } = err
    else {
        panic!("not Expired")
    };
    assert!(
        message.starts_with("The provided continue parameter is too old"),
        "{message}"
    );
    let token = continue_token.expect("a fresh continue token");
    let rest = store
        .list(
            &p,
            &ListOptions {
                limit: 0,
                ..opts(Some(token))
            },
        )
        .await
        .expect("inconsistent continue");
    assert_eq!(
        keys_of(&rest.items),
        vec![format!("{p}/b"), format!("{p}/c")]
    );
    assert_eq!(data_of(&rest.items[0].value), "2");
    assert!(rest.revision >= rev);
}

/// Paging through many objects with various limits returns each exactly once, in order.
pub async fn list_paging(store: Store) {
    let p = prefix();
    let mut want = Vec::new();
    for i in 0..23 {
        want.push(
            create_obj(&store, &format!("{p}/{i:03}"), plain(&i.to_string(), "x"))
                .await
                .key,
        );
    }
    for limit in [1u64, 2, 5, 22, 23, 100] {
        let mut got = Vec::new();
        let mut token = None;
        let mut rev = None;
        loop {
            let l = store
                .list(
                    &p,
                    &ListOptions {
                        recursive: true,
                        limit,
                        continue_token: token.clone(),
                        ..Default::default()
                    },
                )
                .await
                .expect("page");
            assert!(l.items.len() as u64 <= limit);
            assert_eq!(
                *rev.get_or_insert(l.revision),
                l.revision,
                "all pages at one revision"
            );
            got.extend(keys_of(&l.items));
            if let Some(n) = l.remaining_item_count {
                assert_eq!(
                    n as usize,
                    want.len() - got.len(),
                    "remainingItemCount at limit {limit}"
                );
            }
            match l.continue_token {
                Some(t) => token = Some(t),
                None => break,
            }
        }
        assert_eq!(got, want, "limit {limit}");
    }
}

/// A rare matching object far down the keyspace is found in one filtered page.
pub async fn list_pagination_rare_object(store: Store) {
    let p = prefix();
    for i in 0..300 {
        let name = format!("{i:04}");
        let hit = if i == 299 { "yes" } else { "no" };
        create_obj(
            &store,
            &format!("{p}/{name}"),
            object(&name, "u", &[("hit", hit)], "x"),
        )
        .await;
    }
    let l = store
        .list(
            &p,
            &ListOptions {
                recursive: true,
                limit: 1,
                predicate: labels("hit=yes"),
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(keys_of(&l.items), vec![format!("{p}/0299")]);
    assert!(l.continue_token.is_none());
}

/// Tokens are upstream's: base64url (no padding) of `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`.
pub async fn list_continue_token_format(store: Store) {
    use base64::Engine;
    let p = prefix();
    for name in ["a", "b"] {
        create_obj(&store, &format!("{p}/ns/{name}"), plain(name, "1")).await;
    }
    let l = store
        .list(
            &p,
            &ListOptions {
                recursive: true,
                limit: 1,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    let token = l.continue_token.expect("token");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.as_bytes())
        .expect("base64url");
    let want = format!(
        r#"{{"v":"meta.k8s.io/v1","rv":{},"start":"ns/a\u0000"}}"#,
        l.revision
    );
    assert_eq!(String::from_utf8(raw).expect("utf8"), want);
    let (key, rv) = decode_continue(&token, &format!("{p}/")).expect("decode");
    assert_eq!((key, rv), (format!("{p}/ns/a\0"), l.revision as i64));
}

/// Garbage, tampered and path-escaping tokens are 400s.
pub async fn list_tampered_continue_token(store: Store) {
    use base64::Engine;
    let enc = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s.as_bytes());
    let p = prefix();
    for name in ["a", "b"] {
        create_obj(&store, &format!("{p}/x/{name}"), plain(name, "1")).await;
    }
    let l = store
        .list(
            &format!("{p}/x"),
            &ListOptions {
                recursive: true,
                limit: 1,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    let good = l.continue_token.expect("token");
    let mut flipped = good.clone().into_bytes();
    flipped[3] = if flipped[3] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(flipped).expect("ascii");
    for token in [
        "not a token".to_string(),
        "%%%".to_string(),
        tampered,
        format!("{good}x"),
        enc("{}"),
        enc(r#"{"v":"meta.k8s.io/v2","rv":1,"start":"a"}"#),
        enc(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
        enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":""}"#),
        enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../secret"}"#),
        enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"/../../secret"}"#),
        enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"a/./b"}"#),
    ] {
        let res = store
            .list(
                &format!("{p}/x"),
                &ListOptions {
                    recursive: true,
                    limit: 1,
                    continue_token: Some(token.clone()),
                    ..Default::default()
                },
            )
            .await;
        match res {
            Err(e) => assert_eq!(e.code(), 400, "token {token:?}: {e:?}"),
            // A flipped bit may still decode to a valid token for some other key under the prefix; then it must
            // stay inside the listed prefix.
            Ok(l) => assert!(
                l.items
                    .iter()
                    .all(|o| o.key.starts_with(&format!("{p}/x/"))),
                "token {token:?}"
            ),
        }
    }
    let err = store
        .list(
            &format!("{p}/x"),
            &ListOptions {
                recursive: true,
                continue_token: Some("%%%".into()),
                ..Default::default()
            },
        )
        .await
        .expect_err("garbage");
    assert!(
        err.to_string()
            .starts_with("invalid continue token: continue key is not valid"),
        "{err}"
    );
}

/// A list with no resourceVersion reads at the latest revision.
pub async fn consistent_list(store: Store) {
    let p = prefix();
    let o = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    let l = list_all(&store, &p).await;
    assert!(l.revision >= o.revision);
    let u = set(&store, &format!("{p}/a"), plain("a", "2")).await;
    let l = list_all(&store, &p).await;
    assert!(l.revision >= u.revision);
    assert_eq!(l.items, vec![u]);
    let current = store.current_revision().await.expect("rev");
    assert!(current >= l.revision);
}

/// A namespace prefix never matches a longer namespace.
pub async fn namespace_scoped_list(store: Store) {
    let p = prefix();
    let keys = ResourceKeys::new(&p, "pods").expect("keys");
    for (ns, name) in [("ns1", "a"), ("ns1", "b"), ("ns10", "c"), ("ns2", "d")] {
        create_obj(
            &store,
            &keys.namespaced(ns, name).expect("key"),
            plain(name, "1"),
        )
        .await;
    }
    let l = list_all(&store, &keys.list(Some("ns1")).expect("list key")).await;
    assert_eq!(
        keys_of(&l.items),
        vec![
            keys.namespaced("ns1", "a").expect("k"),
            keys.namespaced("ns1", "b").expect("k")
        ]
    );
    let l = list_all(&store, &keys.list(None).expect("list key")).await;
    assert_eq!(l.items.len(), 4);
}

/// Stats count the live objects under a prefix and their mean size.
pub async fn stats(store: Store) {
    let p = prefix();
    let s = store.stats(&format!("{p}/")).await.expect("stats");
    assert_eq!(s.object_count, 0);
    let mut total = 0;
    for name in ["a", "bb", "ccc"] {
        total += create_obj(&store, &format!("{p}/{name}"), plain(name, name))
            .await
            .value
            .len() as u64;
    }
    create_obj(&store, &format!("{p}x/other"), plain("other", "1")).await;
    let s = store.stats(&format!("{p}/")).await.expect("stats");
    assert_eq!(s.object_count, 3);
    assert_eq!(s.estimated_average_object_size_bytes, total / 3);
    delete(&store, &format!("{p}/a")).await;
    assert_eq!(
        store
            .stats(&format!("{p}/"))
            .await
            .expect("stats")
            .object_count,
        2
    );
}

/// compact_revision reports the latest compaction.
pub async fn compact_revision(store: Store) {
    let p = prefix();
    let o = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    store.compact(o.revision).await.expect("compact");
    assert!(store.compact_revision().await.expect("compact_revision") >= o.revision);
    let o2 = set(&store, &format!("{p}/a"), plain("a", "2")).await;
    store.compact(o2.revision).await.expect("compact");
    assert!(store.compact_revision().await.expect("compact_revision") >= o2.revision);
    assert_eq!(read(&store, &format!("{p}/a")).await.expect("get"), o2);
}

/// After compaction, lists and watches before the compacted revision are 410 with upstream's texts, while the
/// current state and newer history stay readable.
pub async fn compaction_expires_old_revisions(store: Store) {
    let p = prefix();
    let a = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    let a2 = set(&store, &format!("{p}/a"), plain("a", "2")).await;
    let b = create_obj(&store, &format!("{p}/b"), plain("b", "1")).await;
    store.compact(a2.revision).await.expect("compact");
    let exact = |rv: u64| ListOptions {
        resource_version: Some(rv),
        resource_version_match: Some(ResourceVersionMatch::Exact),
        recursive: true,
        ..Default::default()
    };
    let err = store
        .list(&p, &exact(a.revision))
        .await
        .expect_err("compacted list");
    assert_eq!(err.status(), (410, "Expired"));
    assert_eq!(
        err.to_string(),
        "The resourceVersion for the provided list is too old."
    );
    let l = store
        .list(&p, &exact(a2.revision))
        .await
        .expect("list at the compacted revision");
    assert_eq!(l.items, vec![a2.clone()]);
    let l = store
        .list(&p, &exact(b.revision))
        .await
        .expect("list after");
    assert_eq!(l.items, vec![a2.clone(), b.clone()]);
    let err = store
        .watch(&p, &from(a.revision, true))
        .await
        .err()
        .expect("compacted watch");
    assert_eq!(err.status(), (410, "Expired"));
    assert_eq!(
        err.to_string(),
        "The resourceVersion for the provided watch is too old."
    );
    let mut w = open_watch(&store, &p, from(a2.revision, true)).await;
    expect_event(&mut w, EventType::Added, &b.key, "1").await;
    assert_eq!(list_all(&store, &p).await.items, vec![a2, b]);
}

/// 64 concurrent compare-and-swap incrementers lose no update.
pub async fn concurrent_cas_increments(store: Store) {
    const WRITERS: usize = 64;
    const EACH: usize = 5;
    let key = format!("{}/counter", prefix());
    create_obj(&store, &key, plain("counter", "0")).await;
    let mut tasks = Vec::new();
    for _ in 0..WRITERS {
        let store = store.clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..EACH {
                let mut inc = |cur: Option<StoredObject>| {
                    let n: u64 = data_of(&cur.expect("exists").value).parse().unwrap_or(0);
                    ready(Ok(plain("counter", &(n + 1).to_string())))
                };
                store
                    .guaranteed_update(&key, false, None, &mut inc, None)
                    .await
                    .expect("increment");
            }
        }));
    }
    for t in tasks {
        t.await.expect("writer");
    }
    let o = read(&store, &key).await.expect("get");
    assert_eq!(
        data_of(&o.value),
        (WRITERS * EACH).to_string(),
        "lost updates"
    );
}

/// Of concurrent creates of one key exactly one wins.
pub async fn concurrent_create_one_wins(store: Store) {
    let key = format!("{}/one", prefix());
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = store.clone();
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            store.create(&key, plain("one", &i.to_string())).await
        }));
    }
    let mut wins = 0;
    for t in tasks {
        match t.await.expect("task") {
            Ok(_) => wins += 1,
            Err(e) => assert!(e.is_exists(), "{e:?}"),
        }
    }
    assert_eq!(wins, 1);
}

/// Histories of 8 concurrent clients doing random creates, gets, compare-and-swaps, read-modify-writes, upserts
/// and (conditional) deletes on 3 keys are linearizable, with revisions that are unique and never go backwards
/// (see [`linearizability`](super::linearizability)), and a watch of the keys sees every acknowledged write at its
/// revision, in order, once, and ends in the final state. `APISERVER_LIN_HISTORIES` sets how many histories (default
/// 3), `APISERVER_LIN_SEED` the first seed (default random); the count is printed.
pub async fn linearizable_history(store: Store) {
    use super::linearizability::{
        Recorder, Workload, check_kv_history, check_watch, encode_value, follow_watch, read_finals,
        record_storage_history,
    };
    let histories: u64 = std::env::var("APISERVER_LIN_HISTORIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let first_seed: u64 = std::env::var("APISERVER_LIN_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0);
    let (mut ops, mut ambiguous, mut events) = (0, 0, 0);
    for h in 0..histories {
        let seed = first_seed.wrapping_add(h * 1000);
        let workload = Workload {
            seed,
            ..Workload::default()
        };
        let p = prefix();
        // A first write, so the watch starts from a revision above 0 (0 would mean "the current state").
        let from = create_obj(&store, &format!("{p}/start"), encode_value("start", 0))
            .await
            .revision;
        let sentinel = format!("{p}/sentinel");
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = tokio::spawn(follow_watch(
            store.clone(),
            p.clone(),
            from,
            sentinel.clone(),
            stop.clone(),
        ));
        let rec = Recorder::new();
        record_storage_history(store.clone(), &p, &workload, &rec).await;
        let keys: Vec<String> = (0..workload.keys).map(|k| format!("{p}/k{k}")).collect();
        let finals = read_finals(store.as_ref(), &keys, &rec).await;
        create_obj(&store, &sentinel, encode_value("sentinel", 0)).await;
        let seen = tokio::time::timeout(EVENT_TIMEOUT, watcher)
            .await
            .expect("the watch saw the sentinel")
            .expect("watcher");
        stop.store(true, Ordering::SeqCst);
        let history = rec.history();
        let watch_violations = check_watch(&seen, &history, from, &finals, false);
        assert!(
            watch_violations.is_empty(),
            "history {h} (APISERVER_LIN_SEED={seed}): the watch disagrees: {watch_violations:#?}"
        );
        let report = tokio::task::spawn_blocking(move || check_kv_history(&history))
            .await
            .expect("checker");
        assert!(
            report.is_linearizable(),
            "history {h} (APISERVER_LIN_SEED={seed}) is not linearizable: {report}"
        );
        ops += report.operations;
        ambiguous += report.ambiguous;
        events += seen.len();
    }
    eprintln!(
        "linearizability: {histories} histories checked, {ops} operations ({ambiguous} ambiguous), \
         {events} watch events, seed {first_seed}"
    );
}

// ---------------------------------------------------------------- watch tests

/// A watch from a revision sees ADDED, MODIFIED (with the previous value) and DELETED (with the last value).
pub async fn watch(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let start = store.current_revision().await.expect("rev");
    let mut w = open_watch(&store, &p, from(start, true)).await;
    let c = create_obj(&store, &key, plain("foo", "1")).await;
    let u = set(&store, &key, plain("foo", "2")).await;
    let d = delete(&store, &key).await;
    let ev = expect_event(&mut w, EventType::Added, &key, "1").await;
    assert_eq!(ev.revision, c.revision);
    let ev = expect_event(&mut w, EventType::Modified, &key, "2").await;
    assert_eq!(ev.revision, u.revision);
    assert_eq!(ev.prev_value.as_deref().map(data_of), Some("1".to_string()));
    let ev = expect_event(&mut w, EventType::Deleted, &key, "2").await;
    assert_eq!(ev.revision, d.revision);
}

/// RV 0: the current state as ADDED (at each object's revision), then changes.
pub async fn watch_from_zero(store: Store) {
    let p = prefix();
    let a = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    let b = create_obj(&store, &format!("{p}/b"), plain("b", "1")).await;
    let a = set(&store, &a.key, plain("a", "2")).await;
    for rv in [Some(0), None] {
        let mut w = open_watch(
            &store,
            &p,
            WatchOptions {
                resource_version: rv,
                recursive: true,
                ..Default::default()
            },
        )
        .await;
        let mut initial = [next(&mut w).await, next(&mut w).await];
        initial.sort_by(|x, y| x.key.cmp(&y.key));
        for (ev, o) in initial.iter().zip([&a, &b]) {
            assert_eq!(
                (ev.event_type, &ev.key, &ev.value, ev.revision),
                (EventType::Added, &o.key, &o.value, o.revision)
            );
        }
        let c = create_obj(&store, &format!("{p}/c{}", rv.is_some()), plain("c", "1")).await;
        let ev = expect_event(&mut w, EventType::Added, &c.key, "1").await;
        assert_eq!(ev.revision, c.revision);
        delete(&store, &c.key).await;
    }
}

/// RV N: exactly the changes after N, from history.
pub async fn watch_from_non_zero(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let c = create_obj(&store, &key, plain("foo", "1")).await;
    set(&store, &key, plain("foo", "2")).await;
    set(&store, &key, plain("foo", "3")).await;
    let mut w = open_watch(&store, &key, from(c.revision, false)).await;
    expect_event(&mut w, EventType::Modified, &key, "2").await;
    expect_event(&mut w, EventType::Modified, &key, "3").await;
    set(&store, &key, plain("foo", "4")).await;
    expect_event(&mut w, EventType::Modified, &key, "4").await;
}

/// Dropping a watch releases it: many writes afterwards still complete, and other watches keep working.
pub async fn watch_drop_releases_writers(store: Store) {
    let p = prefix();
    let dropped = open_watch(&store, &p, from(0, true)).await;
    let mut kept = open_watch(
        &store,
        &format!("{p}/kept"),
        WatchOptions {
            recursive: false,
            ..from(0, false)
        },
    )
    .await;
    drop(dropped);
    for i in 0..300 {
        create_obj(&store, &format!("{p}/{i}"), plain(&i.to_string(), "1")).await;
    }
    create_obj(&store, &format!("{p}/kept"), plain("kept", "1")).await;
    expect_event(&mut kept, EventType::Added, &format!("{p}/kept"), "1").await;
}

/// A delete reaches a watch on that key.
pub async fn delete_triggers_watch(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let c = create_obj(&store, &key, plain("foo", "1")).await;
    let mut w = open_watch(&store, &key, from(c.revision, false)).await;
    delete(&store, &key).await;
    expect_event(&mut w, EventType::Deleted, &key, "1").await;
}

/// DELETED carries the last object at the deletion revision (upstream `WatchDeleteEventObjectHaveLatestRV`).
pub async fn watch_delete_event_object_has_latest_rv(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let c = create_obj(&store, &key, plain("foo", "1")).await;
    let mut w = open_watch(&store, &p, from(c.revision, true)).await;
    let d = delete(&store, &key).await;
    let ev = expect_event(&mut w, EventType::Deleted, &key, "1").await;
    assert_eq!(ev.revision, d.revision);
    assert!(ev.revision > c.revision);
}

/// A recursive watch on the resource root sees every object, and nothing outside it.
pub async fn cluster_scoped_watch(store: Store) {
    let p = prefix();
    let keys = ResourceKeys::new(&p, "toppings").expect("keys");
    let mut w = open_watch(&store, &keys.list(None).expect("k"), from(0, true)).await;
    create_obj(&store, &format!("{p}/toppingsx"), plain("other", "1")).await;
    let cheese = keys.cluster("cheese").expect("k");
    create_obj(&store, &cheese, plain("cheese", "1")).await;
    expect_event(&mut w, EventType::Added, &cheese, "1").await;
    let mut one = open_watch(&store, &cheese, from(0, false)).await;
    expect_event(&mut one, EventType::Added, &cheese, "1").await;
    set(&store, &cheese, plain("cheese", "2")).await;
    expect_event(&mut one, EventType::Modified, &cheese, "2").await;
    expect_event(&mut w, EventType::Modified, &cheese, "2").await;
}

/// A watch on a namespace prefix sees only that namespace.
pub async fn namespace_scoped_watch(store: Store) {
    let p = prefix();
    let keys = ResourceKeys::new(&p, "pizzas").expect("keys");
    let rv = store.current_revision().await.expect("rev");
    let mut w = open_watch(&store, &keys.list(Some("ns1")).expect("k"), from(rv, true)).await;
    create_obj(
        &store,
        &keys.namespaced("ns10", "a").expect("k"),
        plain("a", "1"),
    )
    .await;
    create_obj(
        &store,
        &keys.namespaced("ns2", "b").expect("k"),
        plain("b", "1"),
    )
    .await;
    let mine = keys.namespaced("ns1", "c").expect("k");
    create_obj(&store, &mine, plain("c", "1")).await;
    expect_event(&mut w, EventType::Added, &mine, "1").await;
    expect_sentinel_next(
        &store,
        &mut w,
        &keys.namespaced("ns1", "sentinel").expect("k"),
    )
    .await;
}

/// With a predicate, MODIFIED becomes ADDED when an object enters the selection and DELETED (with the old value)
/// when it leaves; changes outside the selection are not reported.
pub async fn watch_predicate_transitions(store: Store) {
    let p = prefix();
    let key = format!("{p}/foo");
    let rv = store.current_revision().await.expect("rev");
    let opts = WatchOptions {
        predicate: labels("color=red"),
        ..from(rv, true)
    };
    let mut w = open_watch(&store, &p, opts).await;
    create_obj(&store, &key, object("foo", "u", &[("color", "blue")], "1")).await;
    let entered = set(&store, &key, object("foo", "u", &[("color", "red")], "2")).await;
    set(&store, &key, object("foo", "u", &[("color", "red")], "3")).await;
    let left = set(&store, &key, object("foo", "u", &[("color", "green")], "4")).await;
    set(
        &store,
        &key,
        object("foo", "u", &[("color", "yellow")], "5"),
    )
    .await;
    let ev = expect_event(&mut w, EventType::Added, &key, "2").await;
    assert_eq!(ev.revision, entered.revision);
    expect_event(&mut w, EventType::Modified, &key, "3").await;
    let ev = expect_event(&mut w, EventType::Deleted, &key, "3").await;
    assert_eq!(ev.revision, left.revision);
    let s = format!("{p}/sentinel");
    let o = create_obj(
        &store,
        &s,
        object("sentinel", "s", &[("color", "red")], "s"),
    )
    .await;
    let ev = expect_event(&mut w, EventType::Added, &s, "s").await;
    assert_eq!(ev.revision, o.revision);
    // Field selectors too.
    let mut wf = open_watch(
        &store,
        &p,
        WatchOptions {
            predicate: fields("metadata.name=foo"),
            ..from(0, true)
        },
    )
    .await;
    expect_event(&mut wf, EventType::Added, &key, "5").await;
    set(&store, &s, object("sentinel", "s", &[], "s2")).await;
    set(&store, &key, object("foo", "u", &[], "6")).await;
    expect_event(&mut wf, EventType::Modified, &key, "6").await;
}

/// sendInitialEvents: ADDED for the current state, then the `initial-events-end` bookmark, then changes.
pub async fn watch_initialization_signal(store: Store) {
    let p = prefix();
    let a = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    let b = create_obj(&store, &format!("{p}/b"), plain("b", "1")).await;
    let opts = WatchOptions {
        resource_version: None,
        recursive: true,
        send_initial_events: Some(true),
        allow_watch_bookmarks: true,
        ..Default::default()
    };
    let mut w = open_watch(&store, &p, opts).await;
    let mut keys = vec![next(&mut w).await.key, next(&mut w).await.key];
    keys.sort();
    assert_eq!(keys, vec![a.key.clone(), b.key.clone()]);
    let bm = loop {
        let ev = next_any(&mut w).await;
        assert_eq!(
            ev.event_type,
            EventType::Bookmark,
            "expected the initial-events-end bookmark, got {ev:?}"
        );
        if ev.initial_events_end {
            break ev;
        }
    };
    assert!(bm.revision >= b.revision);
    let c = create_obj(&store, &format!("{p}/c"), plain("c", "1")).await;
    let ev = expect_event(&mut w, EventType::Added, &c.key, "1").await;
    assert!(ev.revision > bm.revision);
}

/// sendInitialEvents with RV N: the state at N, then every change after N.
pub async fn watch_initial_events_at_revision(store: Store) {
    let p = prefix();
    let a = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    set(&store, &a.key, plain("a", "2")).await;
    let opts = WatchOptions {
        resource_version: Some(a.revision),
        recursive: true,
        send_initial_events: Some(true),
        allow_watch_bookmarks: true,
        ..Default::default()
    };
    let mut w = open_watch(&store, &p, opts).await;
    let ev = expect_event(&mut w, EventType::Added, &a.key, "1").await;
    assert_eq!(ev.revision, a.revision);
    let bm = next_any(&mut w).await;
    assert!(
        bm.event_type == EventType::Bookmark && bm.initial_events_end,
        "{bm:?}"
    );
    expect_event(&mut w, EventType::Modified, &a.key, "2").await;
}

/// sendInitialEvents=false with no RV: changes from now only.
pub async fn send_initial_events_false(store: Store) {
    let p = prefix();
    create_obj(&store, &format!("{p}/old"), plain("old", "1")).await;
    let opts = WatchOptions {
        resource_version: Some(0),
        recursive: true,
        send_initial_events: Some(false),
        ..Default::default()
    };
    let mut w = open_watch(&store, &p, opts).await;
    let n = create_obj(&store, &format!("{p}/new"), plain("new", "1")).await;
    let ev = expect_event(&mut w, EventType::Added, &n.key, "1").await;
    assert_eq!(ev.revision, n.revision);
}

/// A requested progress notification arrives as a BOOKMARK at a revision no older than the watch has seen.
pub async fn progress_notify(store: Store) {
    let p = prefix();
    let o = create_obj(&store, &format!("{p}/a"), plain("a", "1")).await;
    let opts = WatchOptions {
        progress_notify: true,
        ..from(o.revision, true)
    };
    let mut w = open_watch(&store, &p, opts).await;
    let b = create_obj(&store, &format!("{p}/b"), plain("b", "1")).await;
    expect_event(&mut w, EventType::Added, &b.key, "1").await;
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    loop {
        store
            .request_watch_progress()
            .await
            .expect("request progress");
        match tokio::time::timeout(Duration::from_secs(2), w.next()).await {
            Ok(Some(ev)) if ev.event_type == EventType::Bookmark => {
                assert!(
                    ev.revision >= b.revision,
                    "bookmark {} older than seen {}",
                    ev.revision,
                    b.revision
                );
                assert!(ev.key.is_empty() && ev.value.is_empty());
                return;
            }
            Ok(Some(ev)) => panic!("unexpected event {ev:?}"),
            Ok(None) => panic!("watch ended"),
            Err(_) => assert!(
                tokio::time::Instant::now() < deadline,
                "no progress bookmark"
            ),
        }
    }
}

/// Under concurrent writers a watch sees every write exactly once, in strictly increasing revision order.
pub async fn watch_sees_every_revision_in_order(store: Store) {
    const WRITERS: usize = 8;
    const EACH: usize = 25;
    let p = prefix();
    let start = create_obj(&store, &format!("{p}/start"), plain("start", "0")).await;
    let mut w = open_watch(&store, &p, from(start.revision, true)).await;
    let mut tasks = Vec::new();
    for t in 0..WRITERS {
        let store = store.clone();
        let p = p.clone();
        tasks.push(tokio::spawn(async move {
            let mut revs = Vec::new();
            let key = format!("{p}/w{t}");
            revs.push(
                store
                    .create(&key, plain("w", "0"))
                    .await
                    .expect("create")
                    .revision,
            );
            for i in 1..EACH {
                let mut f = set_to(plain("w", &i.to_string()));
                revs.push(
                    store
                        .guaranteed_update(&key, false, None, &mut f, None)
                        .await
                        .expect("update")
                        .revision,
                );
            }
            revs
        }));
    }
    let mut written = BTreeSet::new();
    for t in tasks {
        written.extend(t.await.expect("writer"));
    }
    assert_eq!(
        written.len(),
        WRITERS * EACH,
        "each write takes its own revision"
    );
    let mut seen = Vec::new();
    let mut per_key: BTreeMap<String, usize> = BTreeMap::new();
    while seen.len() < written.len() {
        let ev = next(&mut w).await;
        assert_ne!(ev.event_type, EventType::Error, "{:?}", ev.error);
        let n = per_key.entry(ev.key.clone()).or_default();
        assert_eq!(
            data_of(&ev.value),
            n.to_string(),
            "per-key order of {}",
            ev.key
        );
        *n += 1;
        seen.push(ev.revision);
    }
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "revisions out of order"
    );
    assert_eq!(
        seen.into_iter().collect::<BTreeSet<_>>(),
        written,
        "missed or foreign revisions"
    );
    expect_sentinel_next(&store, &mut w, &format!("{p}/sentinel")).await;
}
