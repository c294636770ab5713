//! managedFields as upstream keeps them, byte for byte (times aside): the kubectl sequences and raw requests
//! recorded against a real kube-apiserver with a CustomResourceDefinition of the same schema
//! (`fixtures/managed_fields/`, made by its `record.sh`; see its README) are replayed against this server, and
//! every step must leave the same managed fields, the same object and the same answer.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use support::{NO_COST_CONTROLLER, TestServer};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/managed_fields")
}

/// The recorded steps of a directory, in order.
fn steps(dir: &str) -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures().join(dir))
        .expect("fixtures")
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".normalized.json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap();
            (name, serde_json::from_str(&text).unwrap())
        })
        .collect()
}

/// Managed fields without times, in a fixed order; `None` when there are none.
fn managed_fields(object: &Value) -> Value {
    let mut entries: Vec<Value> = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for entry in &mut entries {
        if let Some(map) = entry.as_object_mut()
            && map.contains_key("time")
        {
            map.insert("time".into(), json!("TIME"));
        }
    }
    let key = |e: &Value| {
        ["operation", "manager", "apiVersion", "subresource"]
            .map(|k| e[k].as_str().unwrap_or_default().to_string())
    };
    entries.sort_by_key(key);
    Value::Array(entries)
}

/// Upstream's order of managedFields: operation (Apply first), then time, then manager.
fn assert_upstream_order(object: &Value) {
    let entries = object["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let key = |e: &Value| {
        (
            e["operation"].as_str().unwrap_or_default().to_string(),
            e["time"].as_str().unwrap_or_default().to_string(),
            e["manager"].as_str().unwrap_or_default().to_string(),
        )
    };
    for pair in entries.windows(2) {
        assert!(key(&pair[0]) <= key(&pair[1]), "{object}");
    }
}

/// What must match of an object: managed fields, labels, annotations, spec and status (an empty status and none
/// are the same: a typed object always has one).
fn comparable(object: &Value) -> Value {
    let meta = &object["metadata"];
    let status = match &object["status"] {
        Value::Object(map) if map.is_empty() => Value::Null,
        other => as_floats(other),
    };
    json!({
        "managedFields": managed_fields(object),
        "labels": meta["labels"],
        "annotations": meta["annotations"],
        "spec": as_floats(&object["spec"]),
        "status": status,
    })
}

/// Numbers as floats: this server writes a `double` as `20.0`, a custom resource keeps the `20` it was sent.
fn as_floats(value: &Value) -> Value {
    match value {
        Value::Number(n) => json!(n.as_f64()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), as_floats(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(as_floats).collect()),
        other => other.clone(),
    }
}

/// Every topping the sequences name, applied by alice at 1.5 (the recording's toppings step does the same, so its
/// managed fields stay as recorded; this server's admission needs toppings to exist before pizzas name them).
async fn toppings(server: &TestServer) {
    for name in [
        "salami",
        "mozzarella",
        "tomato",
        "olive",
        "ham",
        "pineapple",
        "mushroom",
        "basil",
    ] {
        let manifest = format!(
            "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Topping\nmetadata:\n  name: {name}\nspec:\n  cost: 1.5\n"
        );
        server.kubectl_stdin_ok(
            &["apply", "--server-side", "--field-manager=alice", "-f", "-"],
            &manifest,
        );
    }
}

async fn get(server: &TestServer, path: &str) -> Value {
    let (code, _, body) = server.raw("GET", path, &[], vec![]).await;
    assert_eq!(code, 200, "GET {path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// Replays kubectl steps: each command through `sh` with the server's kubeconfig.
async fn replay_kubectl(server: &TestServer, dir: &str) {
    for (name, step) in steps(dir) {
        let command = step["command"].as_str().unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .env("KUBECONFIG", &server.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        {
            use std::io::Write;
            let mut stdin = child.stdin.take().unwrap();
            if let Some(input) = step["stdin"].as_str() {
                stdin.write_all(input.as_bytes()).unwrap();
            }
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            step["exitCode"].as_i64().map(|c| c as i32),
            "{dir}/{name}: {command}: {stderr}"
        );
        if out.status.code() != Some(0) {
            let first = |s: &str| s.lines().next().unwrap_or_default().to_string();
            assert_eq!(
                first(&stderr),
                first(step["stderr"].as_str().unwrap()),
                "{dir}/{name}"
            );
        }
        let path = step["objectPath"]
            .as_str()
            .unwrap()
            .trim_start_matches("GET ");
        let object = get(server, path).await;
        assert_upstream_order(&object);
        assert_eq!(
            comparable(&object),
            comparable(&step["object"]),
            "{dir}/{name}: {command}\nours: {object}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_sequence_v1beta1_map_list() {
    let server = TestServer::start(&["--storage-backend=memory", NO_COST_CONTROLLER]).await;
    toppings(&server).await;
    replay_kubectl(&server, "v1beta1").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_sequence_v1alpha1_atomic_list() {
    let server = TestServer::start(&["--storage-backend=memory", NO_COST_CONTROLLER]).await;
    toppings(&server).await;
    replay_kubectl(&server, "v1alpha1").await;
}

/// Replays raw requests: status code, message, causes and managed fields of the answer.
#[tokio::test(flavor = "multi_thread")]
async fn raw_requests() {
    let server = TestServer::start(&["--storage-backend=memory", NO_COST_CONTROLLER]).await;
    toppings(&server).await;
    for (name, step) in steps("raw") {
        // The request as sent (the normalized file has placeholders for times and identities).
        let sent = fixtures()
            .join("raw")
            .join(name.replace(".normalized.json", ".json"));
        let sent: Value = serde_json::from_str(&std::fs::read_to_string(sent).unwrap()).unwrap();
        let request = &sent["request"];
        let path = request["path"].as_str().unwrap();
        if !path.starts_with("/apis/restaurant") {
            continue; // core resources, recorded for reference only
        }
        let method = request["method"].as_str().unwrap();
        let mut body = match &request["body"] {
            Value::Null => Vec::new(),
            Value::String(text) => text.clone().into_bytes(),
            object => {
                // A PUT of a recorded object: this server's identity and version of it.
                let mut object = object.clone();
                let current = get(&server, path).await;
                for key in ["resourceVersion", "uid", "creationTimestamp"] {
                    object["metadata"][key] = current["metadata"][key].clone();
                }
                serde_json::to_vec(&object).unwrap()
            }
        };
        if method == "GET" {
            body.clear();
        }
        let mut headers = Vec::new();
        if let Some(content_type) = request["contentType"].as_str() {
            headers.push(("content-type", content_type));
        }
        if let Some(agent) = request["userAgent"].as_str() {
            headers.push(("user-agent", agent));
        }
        let (code, _, answer) = server.raw(method, path, &headers, body).await;
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(
            code as i64,
            step["status"].as_i64().unwrap(),
            "{name}: {answer}"
        );
        let recorded = &step["body"];
        if recorded["kind"] == "Status" {
            let message = answer["message"].as_str().unwrap_or_default();
            let want = recorded["message"].as_str().unwrap_or_default();
            if name.contains("invalid-yaml") {
                // The YAML parser's own words differ; upstream's prefix does not.
                let prefix = "error decoding YAML: error converting YAML to JSON: ";
                assert!(
                    message.starts_with(prefix) && want.starts_with(prefix),
                    "{name}: {message}"
                );
            } else {
                assert_eq!(message, want, "{name}");
                assert_eq!(answer["reason"], recorded["reason"], "{name}: {answer}");
                assert_eq!(
                    answer["details"]["causes"], recorded["details"]["causes"],
                    "{name}: {answer}"
                );
            }
        } else {
            assert_upstream_order(&answer);
            assert_eq!(
                managed_fields(&answer),
                managed_fields(recorded),
                "{name}\nours: {answer}"
            );
            assert_eq!(
                as_floats(&answer["spec"]),
                as_floats(&recorded["spec"]),
                "{name}: {answer}"
            );
        }
    }
}
