//! Standalone mode (no core cluster): the admin token of the written kubeconfig may do anything; anonymous
//! clients may read health, version, discovery and OpenAPI only; a credential that fails is 401, never anonymous.

use crate::support;

use serde_json::{Value, json};
use support::{TestServer, send};

const TOPPINGS: &str = "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings";

fn topping(name: &str) -> Value {
    json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
        "kind": "Topping",
        "metadata": {"name": name},
        "spec": {"cost": 1.0}
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn anonymous_and_bad_credentials_get_nothing() {
    let server = TestServer::start(&["--storage-backend=memory"]).await;
    let admin = server.client().await;
    let anonymous = server.client_with_token(None).await;
    let wrong = server.client_with_token(Some("0123456789abcdef")).await;

    // The kubeconfig holds the admin token: only its owner may read it.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&server.kubeconfig)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);

    // Anonymous: health, version, discovery and OpenAPI only.
    for path in [
        "/healthz",
        "/readyz",
        "/livez",
        "/version",
        "/apis",
        "/openapi/v2",
        "/apis/restaurant.programming-kubernetes.info/v1alpha1",
    ] {
        let (code, body) = send(&anonymous, "GET", path, &[], None).await;
        let allowed = !path.starts_with("/apis/restaurant");
        assert_eq!(code == 200, allowed, "{path}: {code} {body}");
    }
    let (code, status) = send(&anonymous, "POST", TOPPINGS, &[], Some(topping("anon"))).await;
    assert_eq!(code, 403, "{status}");
    assert_eq!(
        status["message"],
        "toppings.restaurant.programming-kubernetes.info is forbidden: User \"system:anonymous\" cannot create resource \"toppings\" in API group \"restaurant.programming-kubernetes.info\" at the cluster scope"
    );
    let (code, _) = send(&anonymous, "DELETE", TOPPINGS, &[], None).await;
    assert_eq!(code, 403);
    // Headers claiming an identity change nothing without a trusted proxy certificate.
    let spoofed = [
        ("X-Remote-User", "system:admin"),
        ("X-Remote-Group", "system:masters"),
    ];
    let (code, _) = send(
        &anonymous,
        "POST",
        TOPPINGS,
        &spoofed,
        Some(topping("spoofed")),
    )
    .await;
    assert_eq!(code, 403);
    // An admin asking to act as someone else is that someone (anonymous may not impersonate at all).
    let (code, status) = send(
        &admin,
        "POST",
        TOPPINGS,
        &[("Impersonate-User", "bob")],
        Some(topping("bob")),
    )
    .await;
    assert_eq!(code, 403, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("User \"bob\" cannot create"),
        "{status}"
    );
    let (code, _) = send(
        &anonymous,
        "GET",
        TOPPINGS,
        &[("Impersonate-User", "pizza-admin")],
        None,
    )
    .await;
    assert_eq!(code, 403);

    // Credentials that fail are 401, whatever their shape; malformed ones are no credential (anonymous).
    for (client, header, want) in [
        (&wrong, None, 401),
        (&anonymous, Some("Bearer nope"), 401),
        (&anonymous, Some("bearer nope"), 401),
        (&anonymous, Some("Bearer "), 403),
        (&anonymous, Some("Basic YWRtaW46YWRtaW4="), 403),
    ] {
        let headers: Vec<(&str, &str)> = header.map(|h| ("Authorization", h)).into_iter().collect();
        let (code, status) = send(client, "POST", TOPPINGS, &headers, Some(topping("bad"))).await;
        assert_eq!(code, want, "{header:?}: {status}");
        if want == 401 {
            assert_eq!(status["reason"], "Unauthorized");
        }
    }

    // Nothing above was stored; the admin can create.
    let (code, list) = send(&admin, "GET", TOPPINGS, &[], None).await;
    assert_eq!(code, 200);
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "{list}");
    let (code, _) = send(&admin, "POST", TOPPINGS, &[], Some(topping("ok"))).await;
    assert_eq!(code, 201);
    server.stop().await;
}
