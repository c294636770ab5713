//! Auditing from outside: a policy with a rule per level, the log file it produces (exactly the expected events,
//! stages and fields, `Audit-ID` matching the response header and kept when the client sends one), rotation by
//! size, and the webhook backend (a real HTTP receiver in the test) getting every event of a batch that was
//! still queued when the server shut down.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::{NO_COST_CONTROLLER, TestServer, call, send};

const GROUP: &str = "restaurant.programming-kubernetes.info";
const JSON: (&str, &str) = ("content-type", "application/json");

const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: None
  nonResourceURLs: ["/healthz*", "/readyz*", "/livez*"]
- level: RequestResponse
  omitManagedFields: true
  resources:
  - group: restaurant.programming-kubernetes.info
    resources: ["toppings"]
- level: Request
  verbs: ["create"]
  resources:
  - group: restaurant.programming-kubernetes.info
    resources: ["pizzas"]
- level: Metadata
  omitStages: ["RequestReceived"]
  resources:
  - group: restaurant.programming-kubernetes.info
"#;

fn write_policy(dir: &Path) -> String {
    let path = dir.join("policy.yaml");
    std::fs::write(&path, POLICY).unwrap();
    path.to_str().unwrap().to_string()
}

/// The events of a log file, grouped by audit ID in the order they were written.
fn events_by_id(text: &str) -> BTreeMap<String, Vec<Value>> {
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for line in text.lines() {
        let event: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("an audit line is not JSON ({e}): {line}"));
        assert_eq!(event["apiVersion"], "audit.k8s.io/v1");
        assert_eq!(event["kind"], "Event");
        let id = event["auditID"].as_str().expect("auditID").to_string();
        out.entry(id).or_default().push(event);
    }
    out
}

fn stages(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["stage"].as_str().unwrap())
        .collect()
}

/// A request as the admin: its status and the `Audit-ID` the server answered with.
async fn request(
    server: &TestServer,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&Value>,
) -> (u16, String) {
    let body = body
        .map(|b| serde_json::to_vec(b).unwrap())
        .unwrap_or_default();
    let (code, headers, _) = server.raw(method, path, headers, body).await;
    let id = headers
        .get("audit-id")
        .expect("Audit-ID header")
        .to_str()
        .unwrap()
        .to_string();
    (code, id)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_log_holds_exactly_the_events_the_policy_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path());
    let log = dir.path().join("audit.log");
    let log_arg = format!("--audit-log-path={}", log.display());
    let policy_arg = format!("--audit-policy-file={policy}");
    let server = TestServer::start(&[
        "--storage-backend=memory",
        NO_COST_CONTROLLER,
        &policy_arg,
        &log_arg,
    ])
    .await;

    // RequestResponse: a topping, with the client's own Audit-ID.
    let topping = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Topping",
        "metadata": {"name": "basil"}, "spec": {"cost": 0.5}});
    let (code, id) = request(
        &server,
        "POST",
        &format!("/apis/{GROUP}/v1alpha1/toppings"),
        &[JSON, ("audit-id", "client-chosen-id")],
        Some(&topping),
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(id, "client-chosen-id");

    // Request: a pizza create.
    let pizza = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Pizza",
        "metadata": {"name": "margherita", "namespace": "default"}, "spec": {"toppings": ["basil"]}});
    let pizzas = format!("/apis/{GROUP}/v1alpha1/namespaces/default/pizzas");
    let (code, create_id) = request(&server, "POST", &pizzas, &[JSON], Some(&pizza)).await;
    assert_eq!(code, 201);

    // Refused by admission: the plugin's annotation is in the event.
    let unknown = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Pizza",
        "metadata": {"name": "hawaii", "namespace": "default"}, "spec": {"toppings": ["pineapple"]}});
    let (code, refused_id) = request(&server, "POST", &pizzas, &[JSON], Some(&unknown)).await;
    assert_eq!(code, 403);

    // Metadata without RequestReceived: a missing pizza, and a watch.
    let (code, missing_id) = request(&server, "GET", &format!("{pizzas}/nope"), &[], None).await;
    assert_eq!(code, 404);
    let watch = format!("/apis/{GROUP}/v1alpha1/pizzas?watch=1&timeoutSeconds=1");
    let (code, watch_id) = request(&server, "GET", &watch, &[], None).await;
    assert_eq!(code, 200);

    // Refused: a bad token (authentication) and anonymous (authorization).
    let (code, _) = send(
        &server.client_with_token(Some("not-a-token")).await,
        "GET",
        &pizzas,
        &[],
        None,
    )
    .await;
    assert_eq!(code, 401);
    let (code, _) = send(
        &server.client_with_token(None).await,
        "GET",
        &pizzas,
        &[],
        None,
    )
    .await;
    assert_eq!(code, 403);

    // Not audited.
    let (code, _, _) = server.raw("GET", "/healthz", &[], vec![]).await;
    assert_eq!(code, 200);
    let (code, _) = call(&server, "GET", "/version", None, Value::Null).await;
    assert_eq!(code, 200);

    let _dir = server.stop().await;
    let text = std::fs::read_to_string(&log).unwrap();
    let events = events_by_id(&text);
    assert_eq!(events.len(), 7, "{text}");
    let refused_create = &events[&refused_id];
    assert_eq!(
        stages(refused_create),
        ["RequestReceived", "ResponseComplete"]
    );
    assert_eq!(
        refused_create[1]["annotations"],
        json!({
            "authorization.k8s.io/decision": "allow",
            "authorization.k8s.io/reason": "",
            "pizzatoppings.admission.restaurant.programming-kubernetes.info/unknown-topping": "pineapple",
        })
    );
    assert_eq!(refused_create[1]["responseStatus"]["code"], 403);

    let topping_events = &events["client-chosen-id"];
    assert_eq!(
        stages(topping_events),
        ["RequestReceived", "ResponseComplete"]
    );
    let done = &topping_events[1];
    assert_eq!(done["level"], "RequestResponse");
    assert_eq!(done["verb"], "create");
    assert_eq!(done["user"]["username"], "pizza-admin");
    assert_eq!(done["sourceIPs"], json!(["127.0.0.1"]));
    assert_eq!(
        done["objectRef"],
        json!({"resource": "toppings", "name": "basil", "apiGroup": GROUP, "apiVersion": "v1alpha1"})
    );
    assert_eq!(done["responseStatus"], json!({"metadata": {}, "code": 201}));
    assert_eq!(done["requestObject"], topping);
    assert_eq!(done["responseObject"]["metadata"]["name"], "basil");
    assert!(done["responseObject"]["metadata"]["uid"].is_string());
    assert!(
        done["responseObject"]["metadata"]
            .get("managedFields")
            .is_none(),
        "omitManagedFields: {done}"
    );
    assert_eq!(
        done["annotations"],
        json!({"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""})
    );
    assert!(
        topping_events[0].get("annotations").is_none(),
        "no decision yet at RequestReceived"
    );
    assert!(topping_events[0].get("responseStatus").is_none());

    let create = &events[&create_id];
    assert_eq!(stages(create), ["RequestReceived", "ResponseComplete"]);
    assert_eq!(create[1]["level"], "Request");
    assert_eq!(create[1]["requestObject"], pizza);
    assert!(create[1].get("responseObject").is_none());
    assert_eq!(create[1]["objectRef"]["name"], "margherita");
    assert_eq!(create[1]["objectRef"]["namespace"], "default");

    let missing = &events[&missing_id];
    assert_eq!(stages(missing), ["ResponseComplete"]);
    assert_eq!(missing[0]["level"], "Metadata");
    assert_eq!(missing[0]["responseStatus"]["code"], 404);
    assert_eq!(missing[0]["responseStatus"]["reason"], "NotFound");
    assert_eq!(
        missing[0]["responseStatus"]["message"],
        format!("pizzas.{GROUP} \"nope\" not found")
    );
    assert!(missing[0].get("requestObject").is_none());

    let watch = &events[&watch_id];
    assert_eq!(stages(watch), ["ResponseStarted", "ResponseComplete"]);
    assert_eq!(watch[0]["verb"], "watch");
    assert!(watch[1].get("responseObject").is_none());

    let refused: Vec<&Vec<Value>> = events
        .iter()
        .filter(|(id, _)| ![&create_id, &missing_id, &watch_id, &refused_id].contains(id))
        .filter(|(id, _)| id.as_str() != "client-chosen-id")
        .map(|(_, e)| e)
        .collect();
    let unauthenticated = refused
        .iter()
        .find(|e| e[0]["responseStatus"]["code"] == 401)
        .expect("the 401 is audited");
    assert_eq!(stages(unauthenticated), ["ResponseStarted"]);
    assert_eq!(unauthenticated[0]["user"], json!({}));
    // As kube-apiserver 1.36.2 logs a bad token (recorded by hand with a Metadata policy).
    assert_eq!(
        unauthenticated[0]["responseStatus"],
        json!({"metadata": {}, "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    let forbidden = refused
        .iter()
        .find(|e| e[0]["responseStatus"]["code"] == 403)
        .expect("the 403 is audited");
    assert_eq!(stages(forbidden), ["ResponseComplete"]);
    assert_eq!(forbidden[0]["user"]["username"], "system:anonymous");
    assert_eq!(
        forbidden[0]["annotations"]["authorization.k8s.io/decision"],
        "forbid"
    );
    assert_eq!(forbidden[0]["responseStatus"]["reason"], "Forbidden");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_log_rotates_by_size_and_keeps_maxbackup_files() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path());
    let log = dir.path().join("logs").join("audit.log");
    let log_arg = format!("--audit-log-path={}", log.display());
    let policy_arg = format!("--audit-policy-file={policy}");
    let server = TestServer::start(&[
        "--storage-backend=memory",
        NO_COST_CONTROLLER,
        &policy_arg,
        &log_arg,
        "--audit-log-maxsize=1",
        "--audit-log-maxbackup=1",
    ])
    .await;
    // Each create is logged with its request and response: about 2 × 200 KB per event.
    let big = "x".repeat(200 * 1024);
    for i in 0..8 {
        let topping = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Topping",
            "metadata": {"name": format!("t{i}"), "annotations": {"note": big}}, "spec": {"cost": 1.0}});
        let (code, _) = call(
            &server,
            "POST",
            &format!("/apis/{GROUP}/v1alpha1/toppings"),
            Some(JSON),
            topping,
        )
        .await;
        assert_eq!(code, 201);
    }
    let _dir = server.stop().await;
    let mut files: Vec<String> = std::fs::read_dir(log.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "one current file, one backup: {files:?}");
    assert!(
        files[0].starts_with("audit-") && files[0].ends_with(".log"),
        "{files:?}"
    );
    assert_eq!(files[1], "audit.log");
    for file in &files {
        let path = log.parent().unwrap().join(file);
        assert!(std::fs::metadata(&path).unwrap().len() <= 1024 * 1024);
        events_by_id(&std::fs::read_to_string(path).unwrap());
    }
}

/// A webhook receiver: every `EventList` posted to it.
async fn start_receiver() -> (String, Arc<Mutex<Vec<Value>>>) {
    let received: Arc<Mutex<Vec<Value>>> = Arc::default();
    let store = received.clone();
    let app = axum::Router::new().route(
        "/audit",
        axum::routing::post(move |body: axum::body::Bytes| {
            let store = store.clone();
            async move {
                let list: Value = serde_json::from_slice(&body).expect("EventList JSON");
                store.lock().unwrap().push(list);
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/audit", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, received)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_gets_every_queued_event_when_the_server_shuts_down() {
    let dir = tempfile::tempdir().unwrap();
    let policy = write_policy(dir.path());
    let (url, received) = start_receiver().await;
    let kubeconfig = dir.path().join("webhook.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: audit\n  cluster:\n    server: {url}\n\
             users:\n- name: audit\n  user: {{}}\ncontexts:\n- name: audit\n  context:\n    cluster: audit\n    user: audit\n\
             current-context: audit\n"
        ),
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let server = TestServer::start(&[
        "--storage-backend=memory",
        NO_COST_CONTROLLER,
        &format!("--audit-policy-file={policy}"),
        &format!("--audit-webhook-config-file={}", kubeconfig.display()),
        // Batches wait long enough that only shutdown can send them.
        "--audit-webhook-batch-max-wait=10m",
        &format!("--audit-log-path={}", log.display()),
        "--audit-log-mode=batch",
    ])
    .await;
    for name in ["a", "b", "c"] {
        let topping = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Topping",
            "metadata": {"name": name}, "spec": {"cost": 1.0}});
        let (code, _) = call(
            &server,
            "POST",
            &format!("/apis/{GROUP}/v1alpha1/toppings"),
            Some(JSON),
            topping,
        )
        .await;
        assert_eq!(code, 201);
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        received.lock().unwrap().is_empty(),
        "the batch is still waiting"
    );
    let _dir = server.stop().await;

    let lists = received.lock().unwrap().clone();
    assert_eq!(lists.len(), 1, "one batch: {lists:?}");
    assert_eq!(lists[0]["kind"], "EventList");
    assert_eq!(lists[0]["apiVersion"], "audit.k8s.io/v1");
    let items = lists[0]["items"].as_array().unwrap();
    assert_eq!(items.len(), 6, "three creates, two stages each");
    let names: Vec<&str> = items
        .iter()
        .filter(|e| e["stage"] == "ResponseComplete")
        .map(|e| e["objectRef"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    // The batched log has the same events.
    let logged: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(&logged, items);
}
