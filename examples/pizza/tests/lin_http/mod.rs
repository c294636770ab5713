//! Concurrent HTTP clients of a pizza server whose history is checked for linearizability: creates, gets,
//! updates (PUT with a resourceVersion: compare-and-swap, 409 on conflict; merge PATCH: read-modify-write) and
//! deletes (with and without a resourceVersion precondition) of a few pizzas.
//!
//! HTTP answers map to the model: 2xx is the operation's result (the value is the pizza's `lin` annotation, the
//! revision its resourceVersion), 409 AlreadyExists on create is "exists", 409 Conflict is a failed precondition,
//! 404 is "not found", and 5xx or a transport error or timeout is an operation of unknown outcome.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use apiserver::storage::testing::linearizability::{
    KeyedOperation, KvInput, KvOutput, Operation, Prev, Recorder, Rng, Version, check_kv_history,
    random_input, seen_revision,
};
use serde_json::{Value, json};

use crate::support::TestServer;

pub const PIZZAS: &str =
    "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas";
const CLIENTS: usize = 8;
const KEYS: u64 = 3;
const OPS_PER_CLIENT: usize = 30;
pub const TIMEOUT: Duration = Duration::from_secs(20);

pub fn histories() -> u64 {
    std::env::var("APISERVER_LIN_HISTORIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

fn pizza(name: &str, value: u64, resource_version: Option<u64>) -> Value {
    let mut metadata = json!({"name": name, "annotations": {"lin": value.to_string()}});
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv.to_string());
    }
    json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1beta1",
        "kind": "Pizza",
        "metadata": metadata,
        "spec": {"toppings": [{"name": "salami", "quantity": 1}]},
    })
}

/// Creates the topping the pizzas name and waits until admission sees it (a probe pizza is admitted).
pub async fn prepare(server: &TestServer) {
    let client = server.client().await;
    let topping = json!({
        "apiVersion": "restaurant.programming-kubernetes.info/v1alpha1",
        "kind": "Topping",
        "metadata": {"name": "salami"},
        "spec": {"cost": 0.2},
    });
    let path = "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings";
    let (status, body) = request(&client, "POST", path, "application/json", Some(topping))
        .await
        .expect("topping created");
    assert!(status == 201 || status == 409, "{status} {body}");
    for _ in 0..100 {
        let probe = pizza("lin-probe", 0, None);
        let (status, _) = request(&client, "POST", PIZZAS, "application/json", Some(probe))
            .await
            .expect("probe");
        if status == 201 || status == 409 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the topping never became visible to admission");
}

/// The version a pizza in an answer carries.
fn version(body: &Value) -> Version {
    let value = body["metadata"]["annotations"]["lin"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no lin annotation: {body}"));
    let revision = body["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion: {body}"));
    Version { value, revision }
}

/// Sends one request; `None` on a transport error or timeout.
pub async fn request(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<Value>,
) -> Option<(u16, Value)> {
    let mut builder = http::Request::builder().method(method).uri(path);
    let bytes = match body {
        Some(b) => {
            builder = builder.header("content-type", content_type);
            serde_json::to_vec(&b).expect("json")
        }
        None => Vec::new(),
    };
    let req = builder
        .body(kube::client::Body::from(bytes))
        .expect("request");
    let fut = async {
        let resp = client.send(req).await.ok()?;
        let status = resp.status().as_u16();
        use http_body_util::BodyExt;
        let body = resp.into_body().collect().await.ok()?.to_bytes();
        Some((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    };
    tokio::time::timeout(TIMEOUT, fut).await.ok().flatten()
}

/// Runs `input` on pizza `name` over HTTP and maps the answer to the model.
pub async fn run(client: &kube::Client, name: &str, input: KvInput) -> Option<KvOutput> {
    let item = format!("{PIZZAS}/{name}");
    let json_ct = "application/json";
    let (status, body) = match input {
        KvInput::Create(v) => {
            request(client, "POST", PIZZAS, json_ct, Some(pizza(name, v, None))).await?
        }
        KvInput::Get => request(client, "GET", &item, json_ct, None).await?,
        KvInput::Cas { expect, value } => {
            let body = pizza(name, value, Some(expect));
            request(client, "PUT", &item, json_ct, Some(body)).await?
        }
        KvInput::Update(v) => {
            let patch = json!({"metadata": {"annotations": {"lin": v.to_string()}}});
            let ct = "application/merge-patch+json";
            request(client, "PATCH", &item, ct, Some(patch)).await?
        }
        KvInput::Upsert(_) => unreachable!("not generated"),
        KvInput::Delete { expect } => {
            let body = expect.map(|rv| {
                json!({"kind": "DeleteOptions", "apiVersion": "v1",
                       "preconditions": {"resourceVersion": rv.to_string()}})
            });
            request(client, "DELETE", &item, json_ct, body).await?
        }
    };
    let reason = body["reason"].as_str().unwrap_or_default();
    let output = match (status, input) {
        (500.., _) | (429, _) => return None,
        // Admission's listers resyncing after the backend came back (upstream's answer and text): refused before
        // any write, counted as ambiguous all the same (a weaker check, never a wrong one).
        (403, _)
            if body["message"]
                .as_str()
                .is_some_and(|m| m.ends_with("not yet ready to handle request")) =>
        {
            return None;
        }
        (404, _) => KvOutput::NotFound,
        (409, KvInput::Create(_)) if reason == "AlreadyExists" => KvOutput::Exists,
        (409, KvInput::Cas { .. } | KvInput::Delete { .. }) if reason == "Conflict" => {
            KvOutput::PreconditionFailed
        }
        (200 | 201, KvInput::Create(_)) => KvOutput::Written {
            revision: version(&body).revision,
            prev: Prev::Absent,
        },
        (200, KvInput::Get) => KvOutput::Read(version(&body)),
        (200, KvInput::Cas { .. } | KvInput::Update(_)) => KvOutput::Written {
            revision: version(&body).revision,
            prev: Prev::Unobserved,
        },
        (200, KvInput::Delete { .. }) if body["kind"] == "Status" => KvOutput::Gone,
        (200, KvInput::Delete { .. }) => {
            let v = version(&body);
            KvOutput::Deleted {
                value: v.value,
                revision: v.revision,
            }
        }
        _ => panic!("unexpected answer {status} to {input:?} of {name}: {body}"),
    };
    Some(output)
}

/// Records one history of `CLIENTS` concurrent clients against `server` into `rec`: `OPS_PER_CLIENT` each, or
/// for `duration` when given. Returns the longest request.
pub async fn record_http_history(
    server: &TestServer,
    seed: u64,
    duration: Option<Duration>,
    rec: &Recorder,
) -> Duration {
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let client = server.client().await;
        let rec = rec.clone();
        let run_id = run_id[..8].to_string();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(seed.wrapping_add(c as u64));
            let mut next_value = (c as u64 + 1) * 1_000_000;
            let mut seen: BTreeMap<u64, u64> = BTreeMap::new();
            let started = std::time::Instant::now();
            let mut longest = Duration::ZERO;
            for n in 0.. {
                let more = match duration {
                    Some(d) => started.elapsed() < d,
                    None => n < OPS_PER_CLIENT,
                };
                if !more {
                    break;
                }
                let k = rng.below(KEYS);
                let name = format!("lin-{run_id}-{k}");
                let input = match random_input(&mut rng, &mut next_value, seen.get(&k).copied()) {
                    // No HTTP verb upserts pizzas: a merge patch instead.
                    KvInput::Upsert(v) => KvInput::Update(v),
                    i => i,
                };
                let call = rec.now();
                let sent = std::time::Instant::now();
                let output = run(&client, &name, input).await;
                longest = longest.max(sent.elapsed());
                let ret = rec.now();
                if let Some(rev) = seen_revision(output.as_ref()) {
                    seen.insert(k, rev);
                }
                if output.is_none() {
                    // Back off after a failure, as real clients do (and keep the history checkable).
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                rec.record(
                    &name,
                    Operation {
                        client: c,
                        call,
                        ret,
                        input,
                        output,
                    },
                );
            }
            longest
        }));
    }
    let mut longest = Duration::ZERO;
    for t in tasks {
        longest = longest.max(t.await.expect("client"));
    }
    longest
}

/// Records one history of concurrent clients against `server` and checks it; returns (operations, ambiguous).
pub async fn check_one_history(server: &TestServer, seed: u64) -> (usize, usize) {
    let rec = Recorder::new();
    record_http_history(server, seed, None, &rec).await;
    let history: Vec<KeyedOperation> = rec.history();
    let report = tokio::task::spawn_blocking(move || check_kv_history(&history))
        .await
        .expect("checker");
    assert!(
        report.is_linearizable(),
        "seed {seed}: the HTTP history is not linearizable: {report}"
    );
    (report.operations, report.ambiguous)
}
