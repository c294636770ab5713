use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use bytes::Bytes;
use futures::StreamExt;

use super::*;
use crate::storage::labels::LabelSelector;
use crate::storage::{
    AllowDeletion, Attrs, EventType, FieldSelector, GetOptions, MemoryStorage, Predicate, Storage,
    StoredObject,
};

const PREFIX: &str = "/registry/example.com";
const GROUP: &str = "restaurant.example.com";

fn config(resources: &str, providers: &str) -> EncryptionConfig {
    let yaml = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: \
         [\"{resources}\"]\n  providers:\n{providers}"
    );
    EncryptionConfig::parse(yaml.as_bytes()).unwrap()
}

fn key(name: &str, fill: u8, len: usize) -> String {
    format!(
        "      - name: {name}\n        secret: {}\n",
        BASE64.encode(vec![fill; len])
    )
}

fn pizza(name: &str, label: &str) -> Bytes {
    Bytes::from(format!(
        r#"{{"metadata":{{"name":"{name}","uid":"uid-{name}","labels":{{"shape":"{label}"}}}},"spec":"SECRET-SAUCE"}}"#
    ))
}

fn store(inner: &Arc<MemoryStorage>, config: EncryptionConfig) -> Arc<dyn Storage> {
    Encrypted::wrap(inner.clone(), PREFIX, GROUP, Arc::new(config))
}

async fn raw(inner: &MemoryStorage, key: &str) -> Bytes {
    inner.get(key, &GetOptions::default()).await.unwrap().value
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Each provider seals what the server writes with upstream's prefix, nothing of the object is readable in the
/// backend, and reads open it.
#[tokio::test]
async fn every_provider_seals_values_with_upstreams_prefix() {
    for (provider, len, prefix) in [
        ("aescbc", 16, "k8s:enc:aescbc:v1:k1:"),
        ("aescbc", 24, "k8s:enc:aescbc:v1:k1:"),
        ("aescbc", 32, "k8s:enc:aescbc:v1:k1:"),
        ("aesgcm", 16, "k8s:enc:aesgcm:v1:k1:"),
        ("aesgcm", 24, "k8s:enc:aesgcm:v1:k1:"),
        ("aesgcm", 32, "k8s:enc:aesgcm:v1:k1:"),
        ("secretbox", 32, "k8s:enc:secretbox:v1:k1:"),
    ] {
        let inner = Arc::new(MemoryStorage::new());
        let providers = format!("  - {provider}:\n      keys:\n{}", key("k1", 7, len));
        let s = store(&inner, config(&format!("pizzas.{GROUP}"), &providers));
        let k = format!("{PREFIX}/pizzas/default/a");
        let created = s.create(&k, pizza("a", "round")).await.unwrap();
        assert_eq!(created.value, pizza("a", "round"));
        let stored = raw(&inner, &k).await;
        assert!(stored.starts_with(prefix.as_bytes()), "{provider}");
        assert!(!contains(&stored, b"SECRET-SAUCE"), "{provider}");
        assert!(!contains(&stored, b"round"), "{provider}");
        let read = s.get(&k, &GetOptions::default()).await.unwrap();
        assert_eq!(read.value, pizza("a", "round"), "{provider}");
        // Another resource of the group is not named: stored as it is.
        let other = format!("{PREFIX}/toppings/cheese");
        s.create(&other, Bytes::from("plain")).await.unwrap();
        assert_eq!(raw(&inner, &other).await, "plain");
    }
}

/// Values written by other implementations of the formats (OpenSSL's AES-CBC with PKCS#7, Python's AES-GCM with
/// the key as additional data) open: the layout is upstream's, byte for byte.
#[test]
fn values_sealed_elsewhere_open() {
    let cbc = config(
        "*.*",
        &format!("  - aescbc:\n      keys:\n{}", key("k1", 1, 16)),
    );
    let t = cbc.transformers("pizzas", GROUP).unwrap();
    let mut value = b"k8s:enc:aescbc:v1:k1:".to_vec();
    value.extend([2; 16]);
    value.extend(hex("f230676c38a7d716ebed81718e4fc8aa"));
    assert_eq!(
        t.open(&value, "any").unwrap(),
        (Bytes::from("hello"), false)
    );

    let gcm = config(
        "*.*",
        &format!("  - aesgcm:\n      keys:\n{}", key("k1", 3, 32)),
    );
    let t = gcm.transformers("pizzas", GROUP).unwrap();
    let mut value = b"k8s:enc:aesgcm:v1:k1:".to_vec();
    value.extend([4; 12]);
    value.extend(hex("28427fa1c2ac733b31f5d402a18b0bcad8d058db3b"));
    let key = "/registry/x/pizzas/default/a";
    assert_eq!(t.open(&value, key).unwrap().0, "hello");
    // The key is authenticated: the value moved to another key does not open.
    let err = t.open(&value, "/registry/x/pizzas/default/b").unwrap_err();
    assert!(err.contains("authentication failed"), "{err}");
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// A rotation: a new key first and the old one second reads every object; a no-op update of each (the
/// storage-version migrator's) rewrites it with the new key, and a second one writes nothing.
#[tokio::test]
async fn a_key_rotation_then_no_op_updates_leave_only_the_new_key() {
    let inner = Arc::new(MemoryStorage::new());
    let old = format!("  - aescbc:\n      keys:\n{}", key("old", 1, 32));
    let s = store(&inner, config("*.*", &old));
    let keys: Vec<String> = (0..5)
        .map(|i| format!("{PREFIX}/pizzas/default/p{i}"))
        .collect();
    for (i, k) in keys.iter().enumerate() {
        s.create(k, pizza(&format!("p{i}"), "round")).await.unwrap();
    }
    let rotated = format!(
        "  - aesgcm:\n      keys:\n{}{}  - aescbc:\n      keys:\n{}  - identity: {{}}\n",
        key("new", 2, 32),
        key("older", 5, 32),
        key("old", 1, 32)
    );
    let s = store(&inner, config("*.*", &rotated));
    for (i, k) in keys.iter().enumerate() {
        let expected = pizza(&format!("p{i}"), "round");
        assert_eq!(
            s.get(k, &GetOptions::default()).await.unwrap().value,
            expected
        );
        let mut same = |current: Option<StoredObject>| {
            let value = current.map(|c| c.value).unwrap_or_default();
            async move { Ok(value) }
        };
        let before = inner.current_revision().await.unwrap();
        let updated = s
            .guaranteed_update(k, false, None, &mut same, None)
            .await
            .unwrap();
        assert_eq!(updated.value, expected);
        assert!(
            inner.current_revision().await.unwrap() > before,
            "stale: rewritten"
        );
        let stored = raw(&inner, k).await;
        assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:new:"));
        // Sealed with the first key now: a no-op writes nothing.
        let at = inner.current_revision().await.unwrap();
        s.guaranteed_update(k, false, None, &mut same, None)
            .await
            .unwrap();
        assert_eq!(inner.current_revision().await.unwrap(), at);
    }
    // Objects written before encryption (identity last) still read, and move to the new key the same way.
    let plain = format!("{PREFIX}/pizzas/default/plain");
    inner
        .create(&plain, pizza("plain", "square"))
        .await
        .unwrap();
    assert_eq!(
        s.get(&plain, &GetOptions::default()).await.unwrap().value,
        pizza("plain", "square")
    );
    // Without the old key, an old value is an error, not garbage.
    let only_new = format!("  - aesgcm:\n      keys:\n{}", key("new", 2, 32));
    let s2 = store(&inner, config("*.*", &only_new));
    let err = s2.get(&plain, &GetOptions::default()).await.unwrap_err();
    assert!(
        err.to_string().contains("no matching prefix found"),
        "{err}"
    );
}

fn attrs() -> crate::storage::AttrsFn {
    Arc::new(|value: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(value)
            .map_err(|e| crate::storage::StorageError::Internal(e.to_string()))?;
        let mut attrs = Attrs::default();
        if let Some(labels) = v["metadata"]["labels"].as_object() {
            for (k, l) in labels {
                attrs
                    .labels
                    .insert(k.clone(), l.as_str().unwrap_or_default().to_string());
            }
        }
        Ok(attrs)
    })
}

/// Selectors, UID preconditions and deletion checks see the objects in the clear; lists page by selected objects.
#[tokio::test]
async fn selectors_and_preconditions_see_values_in_the_clear() {
    let inner = Arc::new(MemoryStorage::new());
    let providers = format!("  - secretbox:\n      keys:\n{}", key("k", 9, 32));
    let s = store(&inner, config(&format!("*.{GROUP}"), &providers));
    for i in 0..7 {
        let shape = if i % 2 == 0 { "round" } else { "square" };
        s.create(
            &format!("{PREFIX}/pizzas/default/p{i}"),
            pizza(&format!("p{i}"), shape),
        )
        .await
        .unwrap();
    }
    let predicate = Predicate::new(
        LabelSelector::parse("shape=round").unwrap(),
        FieldSelector::everything(),
        attrs(),
    );
    let mut names = Vec::new();
    let mut token = None;
    loop {
        let page = s
            .list(
                &format!("{PREFIX}/pizzas"),
                &ListOptions {
                    recursive: true,
                    limit: 2,
                    continue_token: token.take(),
                    predicate: predicate.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert!(page.items.len() <= 2);
        names.extend(
            page.items
                .iter()
                .map(|o| o.key.rsplit('/').next().unwrap().to_string()),
        );
        match page.continue_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    assert_eq!(names, ["p0", "p2", "p4", "p6"]);

    // A watch with the selector: a relabel out of it is DELETED, back into it ADDED.
    let from = inner.current_revision().await.unwrap();
    let mut watch = s
        .watch(
            &format!("{PREFIX}/pizzas"),
            &WatchOptions {
                resource_version: Some(from),
                recursive: true,
                predicate: predicate.clone(),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let k = format!("{PREFIX}/pizzas/default/p0");
    for shape in ["square", "round"] {
        let mut relabel = |_: Option<StoredObject>| {
            let value = pizza("p0", shape);
            async move { Ok(value) }
        };
        s.guaranteed_update(&k, false, None, &mut relabel, None)
            .await
            .unwrap();
    }
    let first = watch.next().await.unwrap();
    let second = watch.next().await.unwrap();
    assert_eq!(
        (first.event_type, second.event_type),
        (EventType::Deleted, EventType::Added)
    );
    assert_eq!(second.value, pizza("p0", "round"));

    // A UID precondition reads the UID from the opened value.
    let uid_of: crate::storage::UidFn = Arc::new(|v: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(v)
            .map_err(|e| crate::storage::StorageError::Internal(e.to_string()))?;
        Ok(v["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    });
    let wrong = Preconditions::new().with_uid("nope", uid_of.clone());
    let err = s
        .delete(&k, Some(&wrong), &mut AllowDeletion, None)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("UID in object meta: uid-p0"),
        "{err}"
    );
    let right = Preconditions::new().with_uid("uid-p0", uid_of);
    let deleted = s
        .delete(&k, Some(&right), &mut AllowDeletion, None)
        .await
        .unwrap();
    assert_eq!(deleted.value, pizza("p0", "round"));
}

/// A configuration upstream refuses is refused with upstream's text.
#[test]
fn a_bad_configuration_is_refused_with_upstreams_text() {
    let parse = |providers: &str| {
        let yaml = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n- resources: \
             [secrets]\n  providers:\n{providers}"
        );
        EncryptionConfig::parse(yaml.as_bytes()).unwrap_err()
    };
    assert_eq!(
        parse(&format!("  - aescbc:\n      keys:\n{}", key("k", 1, 8))),
        "error while parsing file: resources[0].providers[0].aescbc.keys[0].secret: Invalid value: \
         \"REDACTED\": secret is not of the expected length, got 8, expected one of [16 24 32]"
    );
    assert_eq!(
        parse("  - secretbox:\n      keys:\n      - name: k\n        secret: '!!'\n"),
        "error while parsing file: resources[0].providers[0].secretbox.keys[0].secret: Invalid value: \
         \"REDACTED\": secrets must be base64 encoded"
    );
    assert!(parse("  - aesgcm: {}\n      ").contains(
        "resources[0].providers[0].aesgcm.keys: Required value: at least one keys is required"
    ));
    assert!(
        parse("  - identity: {}\n    aescbc: {}\n").contains("more than one provider specified")
    );
    let kms =
        parse("  - kms:\n      apiVersion: v2\n      name: k\n      endpoint: unix:///k.sock\n");
    assert!(
        kms.contains("providers[0].kms") && kms.contains("no KMS plugin client"),
        "{kms}"
    );
    let err = EncryptionConfig::parse(b"apiVersion: v1\nkind: Pod\n").unwrap_err();
    assert!(err.contains("no kind \"Pod\" is registered"), "{err}");
}
