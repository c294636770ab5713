//! The flows on a hand-written hub with a status subresource, on the memory backend.

use super::*;
use crate::meta::ObjectMeta;
use crate::registry::{DefaultStrategy, OPTIMISTIC_LOCK_ERROR_MSG};
use crate::runtime::{PrinterColumn, Scope, Versioned};
use crate::storage::memory::MemoryStorage;
use serde::{Deserialize, Serialize};

/// A hub with a spec and a status subresource, written by hand as `#[derive(Hub)]` with `status` would.
#[derive(Clone, Debug, Default, PartialEq)]
struct Gadget {
    pub metadata: ObjectMeta,
    pub spec: i64,
    pub status: i64,
}

impl Resource for Gadget {
    const GROUP: &'static str = "example.com";
    const KIND: &'static str = "Gadget";
    const PLURAL: &'static str = "gadgets";
    const SINGULAR: &'static str = "gadget";
    const SCOPE: Scope = Scope::Namespaced;
    const SHORT_NAMES: &'static [&'static str] = &[];
    const CATEGORIES: &'static [&'static str] = &[];
    const PRINTER_COLUMNS: &'static [PrinterColumn] = &[];
    const SUBRESOURCES: &'static [&'static str] = &["status"];
    const SELECTABLE_FIELDS: &'static [&'static str] = &[];
    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
    fn copy_status_from(&mut self, other: &Self) {
        self.status = other.status;
    }
}

#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
struct GadgetV1 {
    #[prost(message, required, tag = "1")]
    #[serde(default)]
    metadata: ObjectMeta,
    #[prost(int64, tag = "2")]
    #[serde(default)]
    spec: i64,
    #[prost(int64, tag = "3")]
    #[serde(default)]
    status: i64,
}

impl Versioned for GadgetV1 {
    type Hub = Gadget;
    const VERSION: &'static str = "v1";
    fn to_hub(&self) -> Result<Gadget, crate::runtime::ConversionError> {
        Ok(Gadget {
            metadata: self.metadata.clone(),
            spec: self.spec,
            status: self.status,
        })
    }
    fn from_hub(hub: &Gadget) -> Result<Self, crate::runtime::ConversionError> {
        Ok(GadgetV1 {
            metadata: hub.metadata.clone(),
            spec: hub.spec,
            status: hub.status,
        })
    }
}

fn store() -> Store<Gadget> {
    Store::new(
        Arc::new(MemoryStorage::new()),
        "/registry/example.com",
        ResourceCodec::new().version::<GadgetV1>(),
        Arc::new(DefaultStrategy),
        MediaType::Json,
    )
    .unwrap()
}

fn gadget(name: &str, spec: i64, status: i64) -> Gadget {
    Gadget {
        metadata: ObjectMeta {
            name: name.into(),
            namespace: "ns".into(),
            ..ObjectMeta::default()
        },
        spec,
        status,
    }
}

async fn update(store: &Store<Gadget>, object: Gadget) -> Result<Gadget, ApiError> {
    let name = object.metadata.name.clone();
    store
        .update(Some("ns"), &name, &Replace(object), WriteOptions::default())
        .await
        .map(|w| w.object)
}

#[tokio::test]
async fn create_clears_status_and_main_update_keeps_it() {
    let store = store();
    let created = store
        .create(Some("ns"), gadget("g", 1, 7), WriteOptions::default())
        .await
        .unwrap()
        .object;
    assert_eq!((created.status, created.metadata.generation), (0, 1));

    let mut status_only = created.clone();
    status_only.status = 5;
    let updated = update(&store, status_only).await.unwrap();
    assert_eq!(updated.status, 0, "the main resource does not write status");
    assert_eq!(updated.metadata.generation, 1);

    let mut spec_change = updated.clone();
    spec_change.spec = 2;
    let updated = update(&store, spec_change).await.unwrap();
    assert_eq!((updated.spec, updated.metadata.generation), (2, 2));
}

#[tokio::test]
async fn status_update_writes_only_status() {
    let store = store();
    let status = store.status();
    let created = store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap()
        .object;
    let mut change = created.clone();
    change.spec = 9;
    change.status = 3;
    change.metadata.labels.insert("new".into(), "label".into());
    change
        .metadata
        .annotations
        .insert("new".into(), "note".into());
    change.metadata.finalizers.push("example.com/f".into());
    let updated = update(&status, change).await.unwrap();
    assert_eq!((updated.spec, updated.status), (1, 3));
    assert!(updated.metadata.labels.is_empty());
    assert!(updated.metadata.annotations.is_empty());
    assert!(updated.metadata.finalizers.is_empty());
    assert_eq!(
        updated.metadata.generation, 1,
        "status does not bump generation"
    );
    assert_ne!(
        updated.metadata.resource_version,
        created.metadata.resource_version
    );

    // Optimistic concurrency applies as on the main resource.
    let err = update(&status, created.clone()).await.unwrap_err();
    assert_eq!(err.code, 409);
    assert_eq!(
        err.message,
        format!(
            "Operation cannot be fulfilled on gadgets.example.com \"g\": {OPTIMISTIC_LOCK_ERROR_MSG}"
        )
    );

    // The subresource never creates.
    let err = update(&status, gadget("missing", 1, 1)).await.unwrap_err();
    assert_eq!((err.code, err.reason), (404, "NotFound"));
}

fn with_finalizers(mut object: Gadget, finalizers: &[&str]) -> Gadget {
    object.metadata.finalizers = finalizers.iter().map(|f| f.to_string()).collect();
    object
}

async fn delete(
    store: &Store<Gadget>,
    name: &str,
    request: DeleteRequest,
) -> Result<Deletion<Gadget>, ApiError> {
    store.delete(Some("ns"), name, &request, &NoAdmission).await
}

async fn get(store: &Store<Gadget>, name: &str) -> Result<Gadget, ApiError> {
    store.get(Some("ns"), name, None).await
}

#[tokio::test]
async fn finalizers_keep_a_deleted_object_until_removed() {
    let store = store();
    let created = store
        .create(
            Some("ns"),
            with_finalizers(gadget("g", 1, 0), &["example.com/f"]),
            WriteOptions::default(),
        )
        .await
        .unwrap()
        .object;
    let Deletion::Pending(pending) = delete(&store, "g", DeleteRequest::default()).await.unwrap()
    else {
        panic!("an object with finalizers stays");
    };
    assert!(pending.metadata.deletion_timestamp.is_some());
    assert_eq!(pending.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(
        pending.metadata.generation, 2,
        "the first deletion bumps generation"
    );
    assert_ne!(
        pending.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(get(&store, "g").await.unwrap(), pending);

    // A second delete changes nothing and answers the object.
    let again = delete(&store, "g", DeleteRequest::default()).await.unwrap();
    assert!(
        matches!(&again, Deletion::Pending(o) if *o == pending),
        "{again:?}"
    );

    // No new finalizers once deleting.
    let added = with_finalizers(
        pending.clone(),
        &["example.com/f", "example.com/g", "a.io/b"],
    );
    let err = update(&store, added).await.unwrap_err();
    assert_eq!(err.code, 422);
    assert_eq!(
        err.message,
        "Gadget.example.com \"g\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"a.io/b\", \"example.com/g\"}"
    );
    // The deletion marks cannot be taken back.
    let mut undeleted = pending.clone();
    undeleted.metadata.deletion_grace_period_seconds = Some(5);
    let err = update(&store, undeleted).await.unwrap_err();
    assert!(
        err.message
            .contains("metadata.deletionGracePeriodSeconds: Invalid value: 5: field is immutable"),
        "{}",
        err.message
    );

    // Removing the last finalizer deletes it; the update answers the object. A dry run deletes nothing.
    let emptied = with_finalizers(pending.clone(), &[]);
    let dry = store
        .update(
            Some("ns"),
            "g",
            &Replace(emptied.clone()),
            WriteOptions {
                dry_run: true,
                ..WriteOptions::default()
            },
        )
        .await
        .unwrap();
    assert!(dry.object.metadata.finalizers.is_empty());
    assert_eq!(get(&store, "g").await.unwrap(), pending);
    let answer = update(&store, emptied).await.unwrap();
    assert!(answer.metadata.finalizers.is_empty());
    assert_eq!(get(&store, "g").await.unwrap_err().code, 404);
}

#[tokio::test]
async fn deletion_without_finalizers_is_immediate_and_dry_run_changes_nothing() {
    let store = store();
    store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap();
    store
        .create(
            Some("ns"),
            with_finalizers(gadget("h", 1, 0), &["example.com/f"]),
            WriteOptions::default(),
        )
        .await
        .unwrap();
    let dry = DeleteRequest {
        dry_run: true,
        ..DeleteRequest::default()
    };
    let before = get(&store, "g").await.unwrap();
    assert!(delete(&store, "g", dry.clone()).await.unwrap().deleted());
    assert_eq!(get(&store, "g").await.unwrap(), before);
    let before = get(&store, "h").await.unwrap();
    let Deletion::Pending(would) = delete(&store, "h", dry).await.unwrap() else {
        panic!("a dry run shows the pending object");
    };
    assert!(would.metadata.deletion_timestamp.is_some());
    assert_eq!(
        would.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(get(&store, "h").await.unwrap(), before);

    // gracePeriodSeconds means nothing to a type without graceful deletion.
    let graceful = DeleteRequest {
        grace_period_seconds: Some(30),
        ..DeleteRequest::default()
    };
    assert!(delete(&store, "g", graceful).await.unwrap().deleted());
    assert_eq!(get(&store, "g").await.unwrap_err().code, 404);
}

#[tokio::test]
async fn propagation_policies_add_garbage_collector_finalizers() {
    let store = store();
    for (name, policy, orphan, finalizer) in [
        ("o", Some("Orphan"), None, Some(FINALIZER_ORPHAN_DEPENDENTS)),
        (
            "f",
            Some("Foreground"),
            None,
            Some(FINALIZER_DELETE_DEPENDENTS),
        ),
        ("b", Some("Background"), None, None),
        ("d", None, Some(true), Some(FINALIZER_ORPHAN_DEPENDENTS)),
        ("n", None, None, None),
    ] {
        store
            .create(Some("ns"), gadget(name, 1, 0), WriteOptions::default())
            .await
            .unwrap();
        let request = DeleteRequest {
            propagation_policy: policy.map(str::to_string),
            orphan_dependents: orphan,
            ..DeleteRequest::default()
        };
        let deletion = delete(&store, name, request).await.unwrap();
        match finalizer {
            Some(f) => {
                let Deletion::Pending(object) = deletion else {
                    panic!("{name}: {deletion:?}")
                };
                assert_eq!(object.metadata.finalizers, vec![f.to_string()], "{name}");
                assert!(object.metadata.deletion_timestamp.is_some(), "{name}");
            }
            None => {
                assert!(deletion.deleted(), "{name}: {deletion:?}");
                assert_eq!(get(&store, name).await.unwrap_err().code, 404, "{name}");
            }
        }
    }
}

#[tokio::test]
async fn delete_preconditions_conflict_with_upstream_texts() {
    let store = store();
    let created = store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap()
        .object;
    let wrong_uid = DeleteRequest {
        preconditions: DeletePreconditions {
            uid: Some("other".into()),
            resource_version: None,
        },
        ..DeleteRequest::default()
    };
    let err = delete(&store, "g", wrong_uid).await.unwrap_err();
    assert_eq!(err.code, 409);
    assert_eq!(
        err.message,
        format!(
            "Operation cannot be fulfilled on Gadget.example.com \"g\": the UID in the precondition (other) does not match the UID in record ({}). The object might have been deleted and then recreated",
            created.metadata.uid
        )
    );
    let wrong_rv = DeleteRequest {
        preconditions: DeletePreconditions {
            uid: None,
            resource_version: Some("12345".into()),
        },
        ..DeleteRequest::default()
    };
    let err = delete(&store, "g", wrong_rv).await.unwrap_err();
    assert_eq!(
        err.message,
        format!(
            "Operation cannot be fulfilled on Gadget.example.com \"g\": the ResourceVersion in the precondition (12345) does not match the ResourceVersion in record ({}). The object might have been modified",
            created.metadata.resource_version
        )
    );
    assert!(get(&store, "g").await.is_ok());
    let right = DeleteRequest {
        preconditions: DeletePreconditions {
            uid: Some(created.metadata.uid.clone()),
            resource_version: Some(created.metadata.resource_version.clone()),
        },
        ..DeleteRequest::default()
    };
    assert!(delete(&store, "g", right).await.unwrap().deleted());
}

/// Deletes gracefully, 30 s unless the request says otherwise.
struct Graceful;

impl Strategy<Gadget> for Graceful {
    fn graceful_delete_supported(&self) -> bool {
        true
    }
    fn check_graceful_delete(&self, _object: &Gadget, grace: &mut Option<i64>) -> bool {
        grace.get_or_insert(30);
        true
    }
}

#[tokio::test]
async fn graceful_deletion_waits_for_a_zero_grace_delete() {
    let store = Store::new(
        Arc::new(MemoryStorage::new()),
        "/registry/example.com",
        ResourceCodec::new().version::<GadgetV1>(),
        Arc::new(Graceful),
        MediaType::Json,
    )
    .unwrap();
    store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap();
    let Deletion::Pending(pending) = delete(&store, "g", DeleteRequest::default()).await.unwrap()
    else {
        panic!("a graceful delete leaves the object");
    };
    let meta = &pending.metadata;
    assert_eq!(meta.deletion_grace_period_seconds, Some(30));
    let left = meta.deletion_timestamp.unwrap().0 - chrono::Utc::now();
    assert!((28..=30).contains(&left.num_seconds()), "{left:?}");
    assert_eq!(meta.generation, 2);
    // A longer grace period changes nothing.
    let longer = DeleteRequest {
        grace_period_seconds: Some(60),
        ..DeleteRequest::default()
    };
    assert!(matches!(
        delete(&store, "g", longer).await.unwrap(),
        Deletion::AlreadyPending(_)
    ));
    assert_eq!(get(&store, "g").await.unwrap(), pending);
    // A shorter one moves the timestamp earlier.
    let shorter = DeleteRequest {
        grace_period_seconds: Some(10),
        ..DeleteRequest::default()
    };
    let Deletion::Pending(shortened) = delete(&store, "g", shorter).await.unwrap() else {
        panic!("still pending");
    };
    assert_eq!(shortened.metadata.deletion_grace_period_seconds, Some(10));
    assert!(shortened.metadata.deletion_timestamp < pending.metadata.deletion_timestamp);
    // Zero deletes.
    let now = DeleteRequest {
        grace_period_seconds: Some(0),
        ..DeleteRequest::default()
    };
    assert!(delete(&store, "g", now).await.unwrap().deleted());
    assert_eq!(get(&store, "g").await.unwrap_err().code, 404);
}

#[tokio::test]
async fn find_answers_none_for_a_missing_object() {
    let store = store();
    assert_eq!(store.find(Some("ns"), "g").await.unwrap(), None);
    let created = store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap()
        .object;
    assert_eq!(store.find(Some("ns"), "g").await.unwrap(), Some(created));
    // In another namespace: nothing either.
    assert_eq!(store.find(Some("other"), "g").await.unwrap(), None);
}

#[tokio::test]
async fn closures_are_updates() {
    let store = store();
    store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap();
    let double = |current: Option<&Gadget>| -> Result<Gadget, ApiError> {
        let mut gadget = current
            .cloned()
            .ok_or_else(|| ApiError::bad_request("none"))?;
        gadget.spec *= 2;
        Ok(gadget)
    };
    let written = store
        .update(Some("ns"), "g", &double, WriteOptions::default())
        .await
        .unwrap();
    assert_eq!((written.object.spec, written.created), (2, false));
    // Its error ends the update.
    let err = store
        .update(Some("ns"), "h", &double, WriteOptions::default())
        .await
        .unwrap_err();
    assert_eq!((err.code, err.message.as_str()), (400, "none"));
}

#[tokio::test]
async fn modify_writes_changes_only_and_finds_nothing_missing() {
    let store = store();
    let created = store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap()
        .object;
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let set_status = |gadget: &mut Gadget| {
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        gadget.status = gadget.spec + 6;
    };
    let written = store
        .status()
        .modify(Some("ns"), "g", set_status)
        .await
        .unwrap()
        .expect("the gadget exists");
    assert_eq!((written.object.status, written.created), (7, false));
    assert_ne!(
        written.object.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(get(&store, "g").await.unwrap(), written.object);

    // The same again changes nothing: nothing is written, the answer is the stored object.
    let again = store
        .status()
        .modify(Some("ns"), "g", set_status)
        .await
        .unwrap()
        .expect("the gadget exists");
    assert_eq!(again.object, written.object);
    assert_eq!(
        store
            .storage()
            .current_revision()
            .await
            .unwrap()
            .to_string(),
        written.object.metadata.resource_version,
        "no write"
    );

    // On the status subresource only status is written; on the main resource status is not.
    let both = |gadget: &mut Gadget| {
        gadget.spec = 40;
        gadget.status = 41;
    };
    let status_only = store
        .status()
        .modify(Some("ns"), "g", both)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (status_only.object.spec, status_only.object.status),
        (1, 41)
    );
    let main = store.modify(Some("ns"), "g", both).await.unwrap().unwrap();
    assert_eq!((main.object.spec, main.object.status), (40, 41));
    assert_eq!(main.object.metadata.generation, 2);

    // Missing: None, and `change` never ran.
    let before = runs.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        store
            .status()
            .modify(Some("ns"), "missing", set_status)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .modify(Some("ns"), "missing", set_status)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), before);

    // Other errors are errors: a change the strategy refuses.
    let renamed = |gadget: &mut Gadget| gadget.metadata.namespace = "elsewhere".into();
    let err = store.modify(Some("ns"), "g", renamed).await.unwrap_err();
    assert_eq!(err.code, 400, "{err:?}");
}

#[tokio::test]
async fn modify_removing_the_last_finalizer_deletes() {
    let store = store();
    store
        .create(
            Some("ns"),
            with_finalizers(gadget("g", 1, 0), &["example.com/f"]),
            WriteOptions::default(),
        )
        .await
        .unwrap();
    assert!(matches!(
        delete(&store, "g", DeleteRequest::default()).await.unwrap(),
        Deletion::Pending(_)
    ));
    let written = store
        .modify(Some("ns"), "g", |g: &mut Gadget| {
            g.metadata.finalizers.clear()
        })
        .await
        .unwrap()
        .expect("it existed");
    assert!(written.object.metadata.finalizers.is_empty());
    assert!(written.object.metadata.deletion_timestamp.is_some());
    assert_eq!(store.find(Some("ns"), "g").await.unwrap(), None);
}

/// Issue 36: a grace period past chrono's range panicked (500 from the panic filter); it is a 400 and the
/// object is left as it was.
#[tokio::test]
async fn a_grace_period_out_of_range_is_a_bad_request() {
    let store = Store::new(
        Arc::new(MemoryStorage::new()),
        "/registry/example.com",
        ResourceCodec::new().version::<GadgetV1>(),
        Arc::new(Graceful),
        MediaType::Json,
    )
    .unwrap();
    let created = store
        .create(Some("ns"), gadget("g", 1, 0), WriteOptions::default())
        .await
        .unwrap();
    for grace in [i64::MAX, i64::MAX / 1000, 400_000_000_000] {
        let request = DeleteRequest {
            grace_period_seconds: Some(grace),
            ..DeleteRequest::default()
        };
        let err = delete(&store, "g", request).await.unwrap_err();
        assert_eq!((err.code, err.reason), (400, "BadRequest"), "{grace}");
        assert_eq!(
            err.message,
            format!(
                "gracePeriodSeconds: Invalid value: {grace}: the deletion time would be outside the years 0 to 9999"
            )
        );
    }
    assert_eq!(get(&store, "g").await.unwrap(), created.object);
    // Once the delete is pending, a longer grace period, however large, changes nothing.
    let pending = DeleteRequest {
        grace_period_seconds: Some(60),
        ..DeleteRequest::default()
    };
    assert!(!delete(&store, "g", pending).await.unwrap().deleted());
    let longer = DeleteRequest {
        grace_period_seconds: Some(i64::MAX),
        ..DeleteRequest::default()
    };
    assert!(matches!(
        delete(&store, "g", longer).await.unwrap(),
        Deletion::AlreadyPending(_)
    ));
}
