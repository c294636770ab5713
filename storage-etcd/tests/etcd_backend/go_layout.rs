//! Compatibility with the data of the Go pizza-apiserver: with its default prefix, keys are
//! `<prefix>/pizzas/<namespace>/<name>` and `<prefix>/toppings/<name>`, values are the bytes it wrote (v1alpha1
//! JSON from apimachinery's encoder, without resourceVersion), and resourceVersion is the key's mod_revision.
//! Storage treats values as opaque, so this checks keys, prefixes and that bytes pass through unchanged both ways.

use crate::support;

use apiserver::storage::{GetOptions, ListOptions, ResourceKeys, Storage};
use apiserver_storage_etcd::etcd_client::GetOptions as RawGet;
use apiserver_storage_etcd::{EtcdOptions, EtcdStorage};
use bytes::Bytes;
use support::EtcdServer;

/// The pizza-apiserver's `--etcd-prefix` default.
const PIZZA_PREFIX: &str = "/registry/pizza-apiserver.programming-kubernetes.info";

/// A Pizza as the Go server stores it (apimachinery's JSON encoder ends with a newline).
const GO_PIZZA: &str = concat!(
    r#"{"kind":"Pizza","apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","#,
    r#""metadata":{"name":"margherita","namespace":"default","uid":"3b1a9f0e-4c1e-4b8e-9a57-0c2f9d6f6a11","#,
    r#""creationTimestamp":"2019-04-01T10:00:00Z"},"spec":{"toppings":["mozzarella","tomato"]},"status":{}}"#,
    "\n"
);
const GO_TOPPING: &str = concat!(
    r#"{"kind":"Topping","apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","#,
    r#""metadata":{"name":"mozzarella","uid":"9d8c7b6a-1111-2222-3333-444455556666","#,
    r#""creationTimestamp":"2019-04-01T09:00:00Z"},"spec":{"cost":1}}"#,
    "\n"
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_and_writes_the_go_pizza_apiserver_layout() {
    let etcd = EtcdServer::start().await;
    let mut raw = etcd.client().await;

    // What a Go pizza-apiserver left in etcd.
    let pizza_key = format!("{PIZZA_PREFIX}/pizzas/default/margherita");
    let topping_key = format!("{PIZZA_PREFIX}/toppings/mozzarella");
    raw.put(pizza_key.as_str(), GO_PIZZA, None)
        .await
        .expect("put");
    raw.put(topping_key.as_str(), GO_TOPPING, None)
        .await
        .expect("put");
    let pizza_rev =
        raw.get(pizza_key.as_str(), None).await.expect("get").kvs()[0].mod_revision() as u64;

    // Our server with default flags: the prefix is the server's default, keys are built by ResourceKeys.
    let opts = EtcdOptions {
        etcd_servers: vec![etcd.url()],
        etcd_compaction_interval: std::time::Duration::ZERO,
        ..Default::default()
    };
    let config = opts.config(PIZZA_PREFIX).expect("config");
    assert_eq!(config.prefix, PIZZA_PREFIX);
    let store = EtcdStorage::connect(config.clone()).await.expect("connect");
    let pizzas = ResourceKeys::new(&config.prefix, "pizzas").expect("keys");
    let toppings = ResourceKeys::new(&config.prefix, "toppings").expect("keys");
    assert_eq!(
        pizzas.namespaced("default", "margherita").expect("key"),
        pizza_key
    );
    assert_eq!(toppings.cluster("mozzarella").expect("key"), topping_key);

    // Reads see the Go objects byte for byte, with RV = mod_revision.
    let got = store
        .get(&pizza_key, &GetOptions::default())
        .await
        .expect("get");
    assert_eq!(got.value, Bytes::from_static(GO_PIZZA.as_bytes()));
    assert_eq!(got.revision, pizza_rev);
    let ns = store
        .list(
            &pizzas.list(Some("default")).expect("key"),
            &ListOptions {
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(ns.items, vec![got.clone()]);
    let all_toppings = store
        .list(
            &toppings.list(None).expect("key"),
            &ListOptions {
                recursive: true,
                ..Default::default()
            },
        )
        .await
        .expect("list");
    assert_eq!(all_toppings.items.len(), 1);
    assert_eq!(all_toppings.items[0].value.as_ref(), GO_TOPPING.as_bytes());

    // Writes land where the Go server looks, with exactly the bytes given.
    let ours = GO_PIZZA.replace("margherita", "hawaii");
    let key = pizzas.namespaced("default", "hawaii").expect("key");
    let created = store
        .create(&key, Bytes::from(ours.clone()))
        .await
        .expect("create");
    let resp = raw
        .get(
            format!("{PIZZA_PREFIX}/pizzas/").as_str(),
            Some(RawGet::new().with_prefix()),
        )
        .await
        .expect("raw list");
    let keys: Vec<&[u8]> = resp.kvs().iter().map(|kv| kv.key()).collect();
    assert_eq!(
        keys,
        vec![
            format!("{PIZZA_PREFIX}/pizzas/default/hawaii").as_bytes(),
            pizza_key.as_bytes()
        ]
    );
    assert_eq!(resp.kvs()[0].value(), ours.as_bytes());
    assert_eq!(resp.kvs()[0].mod_revision() as u64, created.revision);
    // Nothing else was written under the prefix (no bookkeeping keys of ours beside the objects).
    let everything = raw
        .get(
            PIZZA_PREFIX,
            Some(RawGet::new().with_prefix().with_keys_only()),
        )
        .await
        .expect("raw");
    assert_eq!(everything.kvs().len(), 3);
}
