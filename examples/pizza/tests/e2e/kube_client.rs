//! kube-rs, a real Rust client, against the pizza server: discovery, a dynamic list, and a watcher stream.

use crate::support;

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

/// kube-rs's metadata watcher, the Rust counterpart of client-go's metadata informers through which
/// kube-controller-manager's garbage collector and quota controller see every resource, sees every change of
/// pizzas: with list-then-watch and with a streaming list (`sendInitialEvents`), each event's object a
/// `PartialObjectMetadata`.
#[tokio::test(flavor = "multi_thread")]
async fn metadata_watchers_see_every_change() {
    use kube::api::{DeleteParams, Patch, PatchParams};
    use kube::core::{ApiResource, GroupVersionKind, PartialObjectMeta};

    let server = TestServer::start(&[support::NO_COST_CONTROLLER]).await;
    let client = server.client().await;
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1beta1", "Pizza"),
        "pizzas",
    );
    let pizzas: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    let metadata: Api<PartialObjectMeta<DynamicObject>> =
        Api::namespaced_with(client.clone(), "default", &resource);
    let toppings: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, "v1beta1", "Topping"),
            "toppings",
        ),
    );
    let topping = serde_json::json!({
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Topping",
        "metadata": {"name": "mozzarella"}, "spec": {"cost": 1.0}
    });
    toppings
        .create(
            &PostParams::default(),
            &serde_json::from_value(topping).unwrap(),
        )
        .await
        .expect("create topping");
    let pizza = |name: &str| -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Pizza",
            "metadata": {"name": name},
            "spec": {"toppings": [{"name": "mozzarella", "quantity": 1}]}
        }))
        .unwrap()
    };
    pizzas
        .create(&PostParams::default(), &pizza("existing"))
        .await
        .expect("create pizza");

    let listed = metadata
        .list(&Default::default())
        .await
        .expect("metadata list");
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata.name.as_deref(), Some("existing"));

    for (round, config) in [
        ("list then watch", watcher::Config::default()),
        (
            "streaming list",
            watcher::Config::default().streaming_lists(),
        ),
    ] {
        let mut events = watcher(metadata.clone(), config).boxed();
        let mut next = async || {
            tokio::time::timeout(Duration::from_secs(10), events.next())
                .await
                .unwrap_or_else(|_| panic!("{round}: an event within 10 s"))
                .expect("stream open")
                .unwrap_or_else(|e| panic!("{round}: watcher error {e}"))
        };
        // The initial state: the existing pizza, then InitDone.
        let mut initial = Vec::new();
        loop {
            match next().await {
                watcher::Event::InitApply(object) => initial.push(object.metadata.name.unwrap()),
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        assert_eq!(initial, ["existing"], "{round}");

        let name = format!("new-{}", round.len());
        pizzas
            .create(&PostParams::default(), &pizza(&name))
            .await
            .expect("create pizza");
        let watcher::Event::Apply(added) = next().await else {
            panic!("{round}: the create arrives as Apply")
        };
        assert_eq!(added.metadata.name.as_deref(), Some(name.as_str()));
        assert!(added.metadata.uid.is_some() && added.metadata.resource_version.is_some());

        let labels =
            serde_json::json!({"metadata": {"labels": {"round": round.replace(' ', "-")}}});
        pizzas
            .patch(&name, &PatchParams::default(), &Patch::Merge(&labels))
            .await
            .expect("label pizza");
        let watcher::Event::Apply(modified) = next().await else {
            panic!("{round}: the label change arrives as Apply")
        };
        assert_eq!(
            modified
                .metadata
                .labels
                .unwrap_or_default()
                .get("round")
                .map(String::as_str),
            Some(round.replace(' ', "-").as_str())
        );

        pizzas
            .delete(&name, &DeleteParams::default())
            .await
            .expect("delete pizza");
        let watcher::Event::Delete(deleted) = next().await else {
            panic!("{round}: the delete arrives as Delete")
        };
        assert_eq!(deleted.metadata.name.as_deref(), Some(name.as_str()));
    }
}
