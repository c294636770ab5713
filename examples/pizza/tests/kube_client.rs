//! kube-rs, a real Rust client, against the pizza server: discovery, a dynamic list, and a watcher stream.

mod support;

use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DynamicObject, PostParams};
use kube::discovery::{Discovery, Scope};
use kube::runtime::watcher;
use support::TestServer;

const GROUP: &str = "restaurant.programming-kubernetes.info";

#[tokio::test(flavor = "multi_thread")]
async fn discovery_list_and_watch() {
    let server = TestServer::start(&[]).await;
    let client = server.client().await;

    // Only our group: this server has no core group (`/api` lists no versions), as any aggregated server
    // reached directly rather than through kube-apiserver.
    let discovery = Discovery::new(client.clone())
        .filter(&[GROUP])
        .run()
        .await
        .expect("discovery");
    // Aggregated discovery (one request) finds the same.
    let aggregated = Discovery::new(client.clone())
        .filter(&[GROUP])
        .run_aggregated()
        .await
        .expect("aggregated discovery");
    assert_eq!(
        aggregated.get(GROUP).and_then(|g| g.preferred_version()),
        Some("v1beta1")
    );
    let group = discovery.get(GROUP).expect("the pizza group is discovered");
    assert_eq!(group.preferred_version(), Some("v1beta1"));
    let (pizzas, caps) = group
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.plural == "pizzas")
        .expect("pizzas");
    assert_eq!(caps.scope, Scope::Namespaced);
    assert_eq!(pizzas.kind, "Pizza");
    let (toppings, caps) = group
        .recommended_resources()
        .into_iter()
        .find(|(r, _)| r.plural == "toppings")
        .expect("toppings");
    assert_eq!(caps.scope, Scope::Cluster);

    let topping_api: Api<DynamicObject> = Api::all_with(client.clone(), &toppings);
    let mozzarella: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": format!("{GROUP}/{}", toppings.version),
        "kind": "Topping",
        "metadata": {"name": "mozzarella"},
        "spec": {"cost": 1.0}
    }))
    .unwrap();
    topping_api
        .create(&PostParams::default(), &mozzarella)
        .await
        .expect("create topping");

    let pizza_api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &pizzas);
    assert!(
        pizza_api
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    let mut events = watcher(pizza_api.clone(), watcher::Config::default()).boxed();
    // The initial (empty) list ends with InitDone; then the create arrives as Apply.
    loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("watcher event")
            .expect("stream open")
            .expect("no watcher error");
        if matches!(event, watcher::Event::InitDone) {
            break;
        }
    }
    let pizza: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": format!("{GROUP}/v1beta1"),
        "kind": "Pizza",
        "metadata": {"name": "margherita"},
        "spec": {"toppings": [{"name": "mozzarella", "quantity": 2}]}
    }))
    .unwrap();
    pizza_api
        .create(&PostParams::default(), &pizza)
        .await
        .expect("create pizza");
    let applied = loop {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("watcher event")
            .expect("stream open")
            .expect("no watcher error");
        if let watcher::Event::Apply(object) = event {
            break object;
        }
    };
    assert_eq!(applied.metadata.name.as_deref(), Some("margherita"));
    assert_eq!(applied.data["spec"]["toppings"][0]["quantity"], 2);

    let list = pizza_api.list(&Default::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    assert!(list.metadata.resource_version.is_some());
}
