//! The inventory server in-process on SQLite, driven by kubectl; and the round trip of both versions.

use apiserver::testing::TestServer;
use inventory_apiserver::{Item, Warehouse, start};

apiserver::round_trip_test!(items_round_trip, Item::codec());
apiserver::round_trip_test!(warehouses_round_trip, Warehouse::codec());

const BERLIN: &str = r#"{"apiVersion": "inventory.example.com/v1", "kind": "Warehouse", "metadata": {"name": "berlin"},
  "spec": {"location": "Berlin", "capacity": 100}}"#;
const WIDGET: &str = r#"{"apiVersion": "inventory.example.com/v1beta1", "kind": "Item", "metadata": {"name": "widget"},
  "spec": {"sku": "WID-1", "quantity": "12 units", "warehouse": "berlin"}}"#;

#[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
async fn items_are_converted_validated_admitted_and_reserved() {
    let server = TestServer::start(start, &["--storage-backend=sqlite"]).await;
    server.kubectl(&["create", "-f", "-"]).stdin(BERLIN).ok().await;
    let dozen = WIDGET.replace("12 units", "a dozen");
    let refused = server.kubectl(&["create", "-f", "-"]).stdin(dozen).fails().await;
    assert!(refused.contains(r#"spec.quantity: Invalid value: "a dozen": must be a number of units, e.g. "12 units""#));
    server.kubectl(&["create", "-f", "-"]).stdin(WIDGET).ok().await;
    server.ok(&["wait", "--for=condition=Ready", "item/widget", "--timeout=20s"]).await;
    assert_eq!(
        server.ok(&["get", "item", "widget", "-o", "jsonpath={.spec.quantity} {.status.reserved}"]).await,
        "12 12"
    );
    let table = server.ok(&["get", "items.v1beta1.inventory.example.com"]).await;
    assert!(table.lines().nth(1).unwrap().contains("12 units"), "{table}");
    let lost = WIDGET.replace("widget", "lost").replace("berlin", "atlantis");
    let refused = server.kubectl(&["create", "-f", "-"]).stdin(lost).fails().await;
    assert!(refused.contains(r#"warehouse "atlantis" does not exist"#), "{refused}");
    server.ok(&["patch", "warehouse", "berlin", "--type=merge", "-p", r#"{"spec":{"capacity":5}}"#]).await;
    server.ok(&["wait", "--for=condition=Ready=false", "item/widget", "--timeout=20s"]).await;
    server.stop().await;
}
