//! The pizza server driven by the installed kubectl, through the kubeconfig the server writes, with no special
//! flags: discovery, OpenAPI validation, CRUD in both versions, selectors, paging, patches, conflicts, watch.

use crate::support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{MARGHERITA, NO_COST_CONTROLLER, TOPPINGS, TestServer, parse};

const PIZZAS_V1ALPHA1: &str = "pizzas.v1alpha1.restaurant.programming-kubernetes.info";

#[tokio::test(flavor = "multi_thread")]
async fn api_resources_and_explain() {
    let server = TestServer::start(&[]).await;
    let out = server.kubectl_ok(&[
        "api-resources",
        "--api-group=restaurant.programming-kubernetes.info",
    ]);
    let pizzas = out
        .lines()
        .find(|l| l.starts_with("pizzas"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        pizzas.contains("restaurant.programming-kubernetes.info/v1beta1"),
        "{pizzas}"
    );
    assert!(
        pizzas.contains("true") && pizzas.contains("Pizza"),
        "{pizzas}"
    );
    let toppings = out
        .lines()
        .find(|l| l.starts_with("toppings"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        toppings.contains("false") && toppings.contains("Topping"),
        "{toppings}"
    );

    let versions = server.kubectl_ok(&["api-versions"]);
    assert!(
        versions.contains("restaurant.programming-kubernetes.info/v1alpha1"),
        "{versions}"
    );
    assert!(
        versions.contains("restaurant.programming-kubernetes.info/v1beta1"),
        "{versions}"
    );

    let explain = server.kubectl_ok(&["explain", "pizzas.spec.toppings"]);
    assert!(
        explain.contains("quantity") && explain.contains("name"),
        "{explain}"
    );
    let explain = server.kubectl_ok(&[
        "explain",
        "toppings.spec",
        "--api-version=restaurant.programming-kubernetes.info/v1alpha1",
    ]);
    assert!(explain.contains("cost"), "{explain}");
}

#[tokio::test(flavor = "multi_thread")]
async fn create_get_list_patch_delete() {
    let server = TestServer::start(&[]).await;
    let out = server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    assert!(
        out.contains("topping.restaurant.programming-kubernetes.info/mozzarella created"),
        "{out}"
    );
    let out = server.kubectl_stdin_ok(&["create", "-f", "-"], MARGHERITA);
    assert!(
        out.contains("pizza.restaurant.programming-kubernetes.info/margherita created"),
        "{out}"
    );

    // Client-side strictness is the server's: an unknown field is refused, nothing is stored.
    let typo = MARGHERITA
        .replace("margherita", "typo")
        .replace("toppings:", "topings:");
    let out = server.kubectl_stdin(&["create", "-f", "-"], &typo);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown field \"spec.topings\""),
        "{stderr}"
    );

    // The preferred version shows quantities, v1alpha1 the names repeated.
    let yaml = server.kubectl_ok(&["get", "pizzas", "margherita", "-o", "yaml"]);
    assert!(
        yaml.contains("apiVersion: restaurant.programming-kubernetes.info/v1beta1"),
        "{yaml}"
    );
    assert!(
        yaml.contains("name: mozzarella") && yaml.contains("quantity: 1"),
        "{yaml}"
    );
    let yaml = server.kubectl_ok(&["get", PIZZAS_V1ALPHA1, "margherita", "-o", "yaml"]);
    assert!(
        yaml.contains("apiVersion: restaurant.programming-kubernetes.info/v1alpha1"),
        "{yaml}"
    );
    assert!(yaml.contains("- mozzarella\n  - tomato"), "{yaml}");

    // Tables, selectors and paging.
    let table = server.kubectl_ok(&["get", "toppings"]);
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("NAME") && header.contains("COST") && header.contains("AGE"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 4, "{table}");
    let out = server.kubectl_ok(&["get", "pizzas", "-l", "style=classic", "-o", "name"]);
    assert_eq!(
        out.trim(),
        "pizza.restaurant.programming-kubernetes.info/margherita"
    );
    let out = server.kubectl_ok(&["get", "pizzas", "-l", "style notin (classic)", "-o", "name"]);
    assert_eq!(out.trim(), "");
    let out = server.kubectl_ok(&[
        "get",
        "toppings",
        "--field-selector",
        "metadata.name=salami",
        "-o",
        "name",
    ]);
    assert_eq!(
        out.trim(),
        "topping.restaurant.programming-kubernetes.info/salami"
    );
    let out = server.kubectl_ok(&["get", "toppings", "--chunk-size=1", "-o", "name", "-v=6"]);
    assert_eq!(out.lines().count(), 3, "{out}");
    // A list of one name (kubectl wait does this): a list, not the object.
    let out = server.kubectl_ok(&[
        "wait",
        "--for=jsonpath={.spec.toppings[0].quantity}=1",
        "pizza/margherita",
        "--timeout=20s",
    ]);
    assert!(out.contains("condition met"), "{out}");
    let out = server.kubectl_ok(&[
        "get",
        "pizzas",
        "--field-selector",
        "metadata.name=margherita",
        "-o",
        "name",
    ]);
    assert_eq!(
        out.trim(),
        "pizza.restaurant.programming-kubernetes.info/margherita"
    );
    let out = server.kubectl_ok(&["get", "pizzas", "-A", "-o", "name"]);
    assert_eq!(out.lines().count(), 1, "{out}");

    // Label, annotate, merge and JSON patches.
    let out = server.kubectl_ok(&["label", "pizza", "margherita", "size=large"]);
    assert!(out.contains("labeled"), "{out}");
    let out = server.kubectl_ok(&["annotate", "pizza", "margherita", "oven=wood"]);
    assert!(out.contains("annotated"), "{out}");
    let out = server.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"spec":{"toppings":[{"name":"salami","quantity":2}]}}"#,
    ]);
    assert!(out.contains("patched"), "{out}");
    let out = server.kubectl_ok(&[
        "patch",
        "pizza",
        "margherita",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/metadata/labels/crust","value":"thin"}]"#,
    ]);
    assert!(out.contains("patched"), "{out}");
    let json = server.kubectl_ok(&["get", "pizza", "margherita", "-o", "json"]);
    let pizza: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(pizza["metadata"]["labels"]["size"], "large");
    assert_eq!(pizza["metadata"]["labels"]["crust"], "thin");
    assert_eq!(pizza["metadata"]["annotations"]["oven"], "wood");
    assert_eq!(
        pizza["spec"]["toppings"],
        serde_json::json!([{"name": "salami", "quantity": 2}])
    );
    assert_eq!(pizza["metadata"]["generation"], 2);

    // A replace from a stale copy conflicts.
    let mut stale = pizza.clone();
    stale["metadata"]["resourceVersion"] = serde_json::Value::String("1".into());
    let out = server.kubectl_stdin(&["replace", "-f", "-"], &stale.to_string());
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the object has been modified; please apply your changes to the latest version and try again"), "{stderr}");

    // An unknown topping is refused by admission.
    let out = server.kubectl(&[
        "patch",
        "pizza",
        "margherita",
        "--type=merge",
        "-p",
        r#"{"spec":{"toppings":[{"name":"pineapple","quantity":1}]}}"#,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("pizzas.restaurant.programming-kubernetes.info \"margherita\" is forbidden: unknown topping: pineapple"), "{stderr}");

    // Apply (client-side) of a changed manifest works (a v1alpha1 manifest: its list of names is replaced whole).
    let applied = MARGHERITA.replace("- tomato", "- tomato\n  - salami");
    let out = server.kubectl_stdin_ok(&["apply", "-f", "-"], &applied);
    assert!(
        out.contains("configured") || out.contains("created"),
        "{out}"
    );

    // Delete one, then by label.
    let out = server.kubectl_ok(&["delete", "pizza", "margherita"]);
    assert!(out.contains("deleted"), "{out}");
    server.kubectl_ok(&["label", "toppings", "salami", "tomato", "meat=maybe"]);
    let out = server.kubectl_ok(&["delete", "toppings", "-l", "meat=maybe"]);
    assert_eq!(out.matches("deleted").count(), 2, "{out}");
    let out = server.kubectl_ok(&["get", "toppings", "-o", "name"]);
    assert_eq!(
        out.trim(),
        "topping.restaurant.programming-kubernetes.info/mozzarella"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn get_watch_sees_added_modified_deleted() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args([
            "get",
            "pizzas",
            "--watch",
            "--output-watch-events",
            "--request-timeout=30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl");
    let stdout = watch.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    // Give kubectl time to list and start watching before the writes.
    std::thread::sleep(Duration::from_secs(2));
    server.kubectl_stdin_ok(&["create", "-f", "-"], MARGHERITA);
    server.kubectl_ok(&["label", "pizza", "margherita", "size=large"]);
    server.kubectl_ok(&["delete", "pizza", "margherita"]);

    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && !seen.iter().any(|l: &String| l.starts_with("DELETED")) {
        if let Ok(line) = lines_rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(line);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let events: Vec<&str> = seen
        .iter()
        .filter(|l| l.contains("margherita"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(events, ["ADDED", "MODIFIED", "DELETED"], "{seen:?}");
}

const SMP_PIZZA: &str = "apiVersion: restaurant.programming-kubernetes.info/v1beta1
kind: Pizza
metadata:
  name: smp
spec:
  toppings:
  - name: mozzarella
    quantity: 1
  - name: tomato
    quantity: 2
";

fn toppings_of(server: &TestServer, name: &str) -> Vec<(String, i64)> {
    let json = server.kubectl_ok(&["get", "pizza", name, "-o", "json"]);
    let pizza: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut toppings: Vec<(String, i64)> = pizza["spec"]["toppings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["quantity"].as_i64().unwrap(),
            )
        })
        .collect();
    toppings.sort();
    toppings
}

fn owned(toppings: &[(&str, i64)]) -> Vec<(String, i64)> {
    toppings.iter().map(|(n, q)| (n.to_string(), *q)).collect()
}

/// kubectl's write path with strategic merge patch: `kubectl patch` without `--type`, client-side `kubectl apply`
/// (which computes a strategic merge patch from the published `x-kubernetes-patch-*` extensions), `kubectl edit`.
#[tokio::test(flavor = "multi_thread")]
async fn strategic_merge_patch_apply_and_edit() {
    let server = TestServer::start(&[]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let out = server.kubectl_stdin_ok(&["apply", "-f", "-"], SMP_PIZZA);
    assert!(out.contains("created"), "{out}");

    // No --type: a strategic merge patch, merged by topping name.
    let out = server.kubectl_ok(&[
        "patch",
        "pizza",
        "smp",
        "-p",
        r#"{"spec":{"toppings":[{"name":"salami","quantity":3}]}}"#,
    ]);
    assert!(out.contains("patched"), "{out}");
    assert_eq!(
        toppings_of(&server, "smp"),
        owned(&[("mozzarella", 1), ("salami", 3), ("tomato", 2)])
    );

    // Client-side apply of a changed manifest sends a strategic merge patch: the topping added by someone else
    // (salami) stays, the changed one changes.
    let changed = SMP_PIZZA.replace("quantity: 2", "quantity: 4");
    let out = server.kubectl_stdin(&["apply", "-f", "-", "-v=8"], &changed);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("application/strategic-merge-patch+json"),
        "{stderr}"
    );
    assert_eq!(
        toppings_of(&server, "smp"),
        owned(&[("mozzarella", 1), ("salami", 3), ("tomato", 4)])
    );
    // Applied again without tomato: the patch deletes it by name ($patch: delete).
    let without_tomato = "apiVersion: restaurant.programming-kubernetes.info/v1beta1
kind: Pizza
metadata:
  name: smp
spec:
  toppings:
  - name: mozzarella
    quantity: 1
";
    let out = server.kubectl_stdin_ok(&["apply", "-f", "-"], without_tomato);
    assert!(out.contains("configured"), "{out}");
    assert_eq!(
        toppings_of(&server, "smp"),
        owned(&[("mozzarella", 1), ("salami", 3)])
    );
    // The same manifest again: kubectl still sends a patch (its $setElementOrder names only mozzarella while the
    // pizza also has salami, as for any list another writer added to), which changes nothing and writes nothing.
    let rv = |server: &TestServer| {
        server.kubectl_ok(&[
            "get",
            "pizza",
            "smp",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    // The cost controller writes the status after each change of toppings: wait until nothing writes any more, so
    // that what the apply writes (nothing) is all that can move the resourceVersion.
    let mut before = rv(&server);
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let now = rv(&server);
        if now == before {
            break;
        }
        before = now;
    }
    server.kubectl_stdin_ok(&["apply", "-f", "-"], without_tomato);
    assert_eq!(rv(&server), before);
    assert_eq!(
        toppings_of(&server, "smp"),
        owned(&[("mozzarella", 1), ("salami", 3)])
    );

    // kubectl edit with an editor that changes the file.
    let dir = tempfile::tempdir().unwrap();
    let editor = dir.path().join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/quantity: 3/quantity: 7/' \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&editor, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["edit", "pizza", "smp"])
        .env_remove("KUBECONFIG")
        .env("HOME", dir.path())
        .env("KUBE_EDITOR", &editor)
        .output()
        .expect("kubectl runs");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("edited"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        toppings_of(&server, "smp"),
        owned(&[("mozzarella", 1), ("salami", 7)])
    );

    // A malformed strategic merge patch is refused and changes nothing.
    let before = server.kubectl_ok(&[
        "get",
        "pizza",
        "smp",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    let out = server.kubectl(&[
        "patch",
        "pizza",
        "smp",
        "-p",
        r#"{"spec":{"toppings":[{"quantity":2}]}}"#,
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("map: map[quantity:2] does not contain declared merge key: name"),
        "{stderr}"
    );
    let out = server.kubectl(&[
        "patch",
        "pizza",
        "smp",
        "-p",
        r#"{"spec":{"$retainKeys":"toppings"}}"#,
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid patch format of retainKeys"),
        "{stderr}"
    );
    let after = server.kubectl_ok(&[
        "get",
        "pizza",
        "smp",
        "-o",
        "jsonpath={.metadata.resourceVersion}",
    ]);
    assert_eq!(before, after);
}

/// Moving from client-side to server-side apply, as users of Helm, Flux and Argo CD do: the first
/// `kubectl apply --server-side` over an object `kubectl apply` made takes over the fields the last-applied
/// annotation set without conflicts, another manager's field still conflicts, and `--force-conflicts` takes it.
#[tokio::test(flavor = "multi_thread")]
async fn client_side_apply_then_server_side_apply() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let manifest = |toppings: &str| {
        format!(
            "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Pizza\nmetadata:\n  name: csa\nspec:\n  toppings: {toppings}\n"
        )
    };
    server.kubectl_stdin_ok(
        &["apply", "-f", "-"],
        &manifest("[{name: mozzarella, quantity: 1}, {name: tomato, quantity: 1}]"),
    );
    server.kubectl_ok(&["label", "pizza", "csa", "owner=someone"]);
    let out = server.kubectl_stdin_ok(
        &["apply", "--server-side", "-f", "-"],
        &manifest("[{name: mozzarella, quantity: 2}, {name: tomato, quantity: 1}]"),
    );
    assert!(out.contains("serverside-applied"), "{out}");
    let pizza = parse(
        server
            .kubectl_ok(&["get", "pizza", "csa", "-o", "json", "--show-managed-fields"])
            .as_bytes(),
    );
    assert_eq!(pizza["spec"]["toppings"][0]["quantity"], 2, "{pizza}");
    let applied =
        pizza["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .as_str()
            .unwrap();
    assert!(applied.contains(r#""quantity":2"#), "{applied}");
    let managers: Vec<&str> = pizza["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["manager"].as_str().unwrap())
        .collect();
    assert!(managers.contains(&"kubectl"), "{managers:?}");

    // A label another manager set is theirs: applying a different value conflicts, forcing takes it.
    let labelled = "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Pizza\nmetadata:\n  name: csa\n  labels: {owner: me}\nspec:\n  toppings: [{name: mozzarella, quantity: 2}, {name: tomato, quantity: 1}]\n";
    let out = server.kubectl_stdin(&["apply", "--server-side", "-f", "-"], labelled);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"conflict with "kubectl-label" using restaurant.programming-kubernetes.info/v1beta1: .metadata.labels.owner"#),
        "{stderr}"
    );
    server.kubectl_stdin_ok(
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        labelled,
    );
    let out = server.kubectl_ok(&[
        "get",
        "pizza",
        "csa",
        "-o",
        "jsonpath={.metadata.labels.owner}",
    ]);
    assert_eq!(out, "me");
}

/// The scale subresource (`autoscaling/v1` `Scale`) of ovens: `kubectl scale` with and without a precondition,
/// the oven controller's status, discovery, and what the server refuses.
#[tokio::test(flavor = "multi_thread")]
async fn scale_an_oven_line() {
    let server = TestServer::start(&[]).await;
    let oven = "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Oven\nmetadata:\n  name: main\nspec:\n  replicas: 1\n";
    server.kubectl_stdin_ok(&["create", "-f", "-"], oven);
    let out = server.kubectl_ok(&["scale", "oven", "main", "--replicas=3"]);
    assert!(
        out.contains("oven.restaurant.programming-kubernetes.info/main scaled"),
        "{out}"
    );
    let out = server.kubectl(&[
        "scale",
        "oven",
        "main",
        "--replicas=5",
        "--current-replicas=2",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Expected replicas to be 2, was 3"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    server.kubectl_ok(&[
        "scale",
        "oven",
        "main",
        "--replicas=4",
        "--current-replicas=3",
    ]);
    // The oven controller lights what was asked for and publishes the selector.
    let mut scale = serde_json::Value::Null;
    for _ in 0..100 {
        scale = parse(
            server
                .kubectl_ok(&["get", "oven", "main", "--subresource=scale", "-o", "json"])
                .as_bytes(),
        );
        if scale["status"]["replicas"] == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(scale["apiVersion"], "autoscaling/v1", "{scale}");
    assert_eq!(scale["kind"], "Scale", "{scale}");
    assert_eq!(scale["spec"]["replicas"], 4, "{scale}");
    assert_eq!(scale["status"]["replicas"], 4, "{scale}");
    assert_eq!(
        scale["status"]["selector"], "restaurant.programming-kubernetes.info/oven=main",
        "{scale}"
    );
    let table = server.kubectl_ok(&["get", "oven", "main"]);
    assert!(
        table
            .lines()
            .any(|l| l.split_whitespace().take(3).eq(["main", "4", "4"])),
        "{table}"
    );

    // Discovery names the Scale kind of autoscaling/v1, as upstream does.
    let resources = parse(
        server
            .kubectl_ok(&[
                "get",
                "--raw",
                "/apis/restaurant.programming-kubernetes.info/v1beta1",
            ])
            .as_bytes(),
    );
    let scale_resource = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "ovens/scale")
        .cloned()
        .unwrap_or_else(|| panic!("{resources}"));
    assert_eq!(scale_resource["group"], "autoscaling");
    assert_eq!(scale_resource["version"], "v1");
    assert_eq!(scale_resource["kind"], "Scale");

    // Refused: a negative count (422), a stale resourceVersion (409); nothing changes.
    let path =
        "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/ovens/main/scale";
    let (code, _, body) = server
        .raw(
            "PATCH",
            path,
            &[("content-type", "application/merge-patch+json")],
            br#"{"spec":{"replicas":-1}}"#.to_vec(),
        )
        .await;
    let status = parse(&body);
    assert_eq!(code, 422, "{status}");
    assert_eq!(
        status["message"],
        "Scale.autoscaling \"main\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    let stale = serde_json::json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "main", "namespace": "default", "resourceVersion": "1"},
        "spec": {"replicas": 9}
    });
    let (code, _, body) = server
        .raw(
            "PUT",
            path,
            &[("content-type", "application/json")],
            serde_json::to_vec(&stale).unwrap(),
        )
        .await;
    assert_eq!(code, 409, "{}", String::from_utf8_lossy(&body));
    // A PUT's Scale must be a Scale naming this oven, and its UID is a precondition: before, these wrote 9
    // replicas (kube-apiserver 1.36's answers for a CRD's scale).
    let uid = server.kubectl_ok(&["get", "oven", "main", "-o", "jsonpath={.metadata.uid}"]);
    for (metadata, kind, code, message) in [
        (
            serde_json::json!({"name": "other"}),
            "Scale",
            400,
            "the name of the object (other) does not match the name on the URL (main)".to_string(),
        ),
        (
            serde_json::json!({"namespace": "default"}),
            "Scale",
            400,
            "the name of the object (main based on URL) was undeterminable: name must be provided".to_string(),
        ),
        (
            serde_json::json!({"name": "main", "namespace": "elsewhere"}),
            "Scale",
            400,
            "the namespace of the provided object does not match the namespace sent on the request".to_string(),
        ),
        (
            serde_json::json!({"name": "main"}),
            "Oven",
            400,
            "no kind is registered for the type v1.Scale in scheme \"pkg/apiserver/customresource_handler.go:781\"".to_string(),
        ),
        (
            serde_json::json!({"name": "main", "uid": "0d5e5e9b-0000-4000-8000-000000000000"}),
            "Scale",
            409,
            format!("Operation cannot be fulfilled on ovens.restaurant.programming-kubernetes.info \"main\": StorageError: invalid object, Code: 4, Key: /registry/pizza-apiserver.programming-kubernetes.info/ovens/default/main, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 0d5e5e9b-0000-4000-8000-000000000000, UID in object meta: {uid}"),
        ),
    ] {
        let scale = serde_json::json!({
            "apiVersion": "autoscaling/v1", "kind": kind, "metadata": metadata, "spec": {"replicas": 9}
        });
        let (got, _, body) = server
            .raw(
                "PUT",
                path,
                &[("content-type", "application/json")],
                serde_json::to_vec(&scale).unwrap(),
            )
            .await;
        let status = parse(&body);
        assert_eq!(got, code, "{scale}: {status}");
        assert_eq!(status["message"], message, "{scale}");
    }
    let out = server.kubectl_ok(&["get", "oven", "main", "-o", "jsonpath={.spec.replicas}"]);
    assert_eq!(out, "4");
}

/// `kubectl diff` (client-side and server-side) and `apply --server-side --dry-run=server` show a change and make
/// none.
#[tokio::test(flavor = "multi_thread")]
async fn diff_and_server_dry_run_apply_change_nothing() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    server.kubectl_stdin_ok(&["apply", "--server-side", "-f", "-"], MARGHERITA);
    let changed = MARGHERITA.replace("- tomato", "- salami");
    for args in [
        &["diff", "-f", "-"][..],
        &["diff", "--server-side", "-f", "-"][..],
    ] {
        let out = server.kubectl_stdin(args, &changed);
        // kubectl diff exits 1 when there are differences.
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            shown.contains("-  - tomato") && shown.contains("+  - salami"),
            "{args:?}: {shown}"
        );
    }
    let out = server.kubectl_stdin_ok(
        &["apply", "--server-side", "--dry-run=server", "-f", "-"],
        &changed,
    );
    assert!(out.contains("serverside-applied (server dry run)"), "{out}");
    let toppings = server.kubectl_ok(&[
        "get",
        "pizzas.v1alpha1.restaurant.programming-kubernetes.info",
        "margherita",
        "-o",
        "jsonpath={.spec.toppings}",
    ]);
    assert_eq!(toppings, r#"["mozzarella","tomato"]"#);
}

/// `--controllers` as kube-controller-manager reads it: `*,-oven` runs the cost controller and not the oven
/// controller; an unknown name stops the server from starting.
#[tokio::test(flavor = "multi_thread")]
async fn controllers_flag_chooses_the_controllers() {
    let server = TestServer::start(&["--controllers=*,-oven"]).await;
    let oven = "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Oven\nmetadata:\n  name: main\nspec:\n  replicas: 2\n";
    server.kubectl_stdin_ok(&["create", "-f", "-"], oven);
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    server.kubectl_stdin_ok(&["create", "-f", "-"], MARGHERITA);
    // The cost controller runs: mozzarella (1.0) and tomato (0.1).
    let mut cost = String::new();
    for _ in 0..100 {
        cost = server.kubectl_ok(&[
            "get",
            "pizza",
            "margherita",
            "-o",
            "jsonpath={.status.cost}",
        ]);
        if cost == "1.1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(cost, "1.1");
    // The oven controller does not: the oven, created first, still burns nothing.
    let burning = server.kubectl_ok(&["get", "oven", "main", "-o", "jsonpath={.status.replicas}"]);
    assert_eq!(burning, "0");

    let dir = tempfile::tempdir().unwrap();
    let options = <pizza_apiserver::server::Options as clap::Parser>::parse_from([
        "pizza-apiserver",
        "--secure-port=0",
        "--storage-backend=memory",
        "--controllers=*,-nosuch",
        "--data-dir",
        dir.path().to_str().unwrap(),
    ]);
    let error = pizza_apiserver::server::start(options)
        .await
        .err()
        .expect("refused");
    assert_eq!(
        error.to_string(),
        "--controllers: \"nosuch\" is not in the list of known controllers"
    );
}

/// Subresources answered by the server's code: an action answering with another kind and a text stream, both in
/// discovery with their own verbs.
#[tokio::test(flavor = "multi_thread")]
async fn bake_and_log_subresources() {
    let server = TestServer::start(&[]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    server.kubectl_stdin_ok(&["create", "-f", "-"], MARGHERITA);
    let base =
        "/apis/restaurant.programming-kubernetes.info/v1beta1/namespaces/default/pizzas/margherita";

    let receipt = server.kubectl_stdin_ok(
        &["create", "--raw", &format!("{base}/bake"), "-f", "-"],
        "{}",
    );
    let receipt = parse(receipt.as_bytes());
    assert_eq!(receipt["kind"], "BakeReceipt");
    assert_eq!(receipt["pizza"], "margherita");
    assert_eq!(receipt["bakedBy"], "pizza-admin");
    assert!(receipt["portions"].as_i64().unwrap() > 0, "{receipt}");

    let log = server.kubectl_ok(&["get", "--raw", &format!("{base}/log")]);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.first(), Some(&"margherita: dough rolled"), "{log}");
    assert_eq!(lines.last(), Some(&"margherita: into the oven"), "{log}");
    assert!(lines.len() > 2, "{log}");

    // Only the declared verbs: GET of the action and POST to the log are 405.
    let out = server.kubectl(&["get", "--raw", &format!("{base}/bake")]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("MethodNotAllowed")
            || String::from_utf8_lossy(&out.stderr).contains("405"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A missing pizza is the usual 404.
    let out = server.kubectl(&[
        "get",
        "--raw",
        &base
            .replace("margherita", "nosuch")
            .to_string()
            .replace("nosuch", "nosuch/log"),
    ]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let discovery = parse(
        server
            .kubectl_ok(&[
                "get",
                "--raw",
                "/apis/restaurant.programming-kubernetes.info/v1beta1",
            ])
            .as_bytes(),
    );
    let resources = discovery["resources"].as_array().unwrap();
    let find = |name: &str| {
        resources
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {discovery}"))
    };
    assert_eq!(find("pizzas/bake")["verbs"], serde_json::json!(["create"]));
    assert_eq!(find("pizzas/bake")["kind"], "BakeReceipt");
    assert_eq!(find("pizzas/log")["verbs"], serde_json::json!(["get"]));
}

/// A resource the server's code provides (the menu, from the toppings): get and list with tables and selectors,
/// no writes, `get` and `list` in discovery.
#[tokio::test(flavor = "multi_thread")]
async fn the_menu_is_provided_not_stored() {
    let server = TestServer::start(&[]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let table = server.kubectl_ok(&["get", "menuitems"]);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("PRICE") && table.contains("mozzarella"),
        "{table}"
    );
    let price = server.kubectl_ok(&["get", "menuitem", "mozzarella", "-o", "jsonpath={.price}"]);
    let cost = server.kubectl_ok(&[
        "get",
        "topping",
        "mozzarella",
        "-o",
        "jsonpath={.spec.cost}",
    ]);
    assert_eq!(price, cost);
    let names = server.kubectl_ok(&[
        "get",
        "menuitems",
        "--field-selector=metadata.name=tomato",
        "-o",
        "name",
    ]);
    assert_eq!(
        names.trim(),
        "menuitem.restaurant.programming-kubernetes.info/tomato"
    );
    let out = server.kubectl(&["get", "menuitem", "truffle"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NotFound"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = server.kubectl(&["delete", "menuitem", "mozzarella"]);
    assert!(!out.status.success());
    let resources = server.kubectl_ok(&[
        "api-resources",
        "--api-group=restaurant.programming-kubernetes.info",
        "-o",
        "wide",
    ]);
    let menu = resources
        .lines()
        .find(|l| l.starts_with("menuitems"))
        .unwrap_or_else(|| panic!("{resources}"));
    assert!(menu.contains(" get,list,watch "), "{menu}");
}

const TRUFFLE: &str = "apiVersion: restaurant.programming-kubernetes.info/v1alpha1
kind: Topping
metadata:
  name: truffle
spec:
  cost: 5
";

/// The provided menu follows the toppings' watch: `kubectl get menuitems -w` lists (with the list's
/// resourceVersion) and then sees a new topping ADDED, its price MODIFIED and its removal DELETED.
#[tokio::test(flavor = "multi_thread")]
async fn get_watch_follows_the_provided_menu() {
    let server = TestServer::start(&[]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);
    let list = parse(
        server
            .kubectl_ok(&[
                "get",
                "--raw",
                "/apis/restaurant.programming-kubernetes.info/v1beta1/menuitems",
            ])
            .as_bytes(),
    );
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    assert!(rv.parse::<u64>().is_ok_and(|rv| rv > 0), "{list}");
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args([
            "get",
            "menuitems",
            "--watch",
            "--output-watch-events",
            "--request-timeout=30s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl");
    let stdout = watch.stdout.take().unwrap();
    let (lines_tx, lines_rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_secs(2));
    server.kubectl_stdin_ok(&["create", "-f", "-"], TRUFFLE);
    server.kubectl_ok(&[
        "patch",
        "topping",
        "truffle",
        "--type=merge",
        "-p",
        r#"{"spec":{"cost":7}}"#,
    ]);
    server.kubectl_ok(&["delete", "topping", "truffle"]);

    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && !seen.iter().any(|l: &String| l.starts_with("DELETED")) {
        if let Ok(line) = lines_rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(line);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let events: Vec<(&str, &str)> = seen
        .iter()
        .filter(|l| l.contains("truffle"))
        .filter_map(|l| {
            let mut cells = l.split_whitespace();
            Some((cells.next()?, cells.nth(1)?))
        })
        .collect();
    assert_eq!(
        events,
        [("ADDED", "5"), ("MODIFIED", "7"), ("DELETED", "7")],
        "{seen:?}"
    );
    // The toppings that were there when kubectl listed are in its table, not in the watch.
    assert!(seen.iter().any(|l| l.contains("mozzarella")), "{seen:?}");
}

/// The sample's CEL rules on types, declared on v1beta1 and checked whatever version kubectl writes: at most 10
/// distinct toppings (the message expression's text), a topping's cost at most doubled per update (a transition
/// rule); the rules are in the published OpenAPI.
#[tokio::test(flavor = "multi_thread")]
async fn cel_rules_on_types() {
    let server = TestServer::start(&[NO_COST_CONTROLLER]).await;
    server.kubectl_stdin_ok(&["create", "-f", "-"], TOPPINGS);

    let names: Vec<String> = (0..11).map(|i| format!("\"t{i}\"")).collect();
    let eleven = format!(
        "apiVersion: restaurant.programming-kubernetes.info/v1alpha1\nkind: Pizza\nmetadata:\n  name: everything\nspec:\n  toppings: [{}]\n",
        names.join(", ")
    );
    let out = server.kubectl_stdin(&["create", "-f", "-"], &eleven);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.toppings: Invalid value: \"array\": a pizza may have at most 10 distinct toppings, this one has 11"),
        "{err}"
    );
    let out = server.kubectl(&["get", "pizza", "everything"]);
    assert!(!out.status.success(), "a refused pizza was stored");

    // 1.0 to 2.0 doubles; 2.0 to 5.0 is more.
    server.kubectl_ok(&[
        "patch",
        "topping",
        "mozzarella",
        "--type=merge",
        "-p",
        r#"{"spec":{"cost":2.0}}"#,
    ]);
    let out = server.kubectl(&[
        "patch",
        "topping",
        "mozzarella",
        "--type=merge",
        "-p",
        r#"{"spec":{"cost":5.0}}"#,
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("spec.cost: Invalid value: \"number\": a topping's cost may not rise by more than 100% in one update"),
        "{err}"
    );
    let cost = server.kubectl_ok(&[
        "get",
        "topping",
        "mozzarella",
        "-o",
        "jsonpath={.spec.cost}",
    ]);
    assert_eq!(cost, "2");
    // Other changes to the topping are not blocked by the rule (its cost is unchanged: ratcheting).
    server.kubectl_ok(&["label", "topping", "mozzarella", "fresh=yes"]);

    let (code, _, body) = server
        .raw(
            "GET",
            "/openapi/v3/apis/restaurant.programming-kubernetes.info/v1beta1",
            &[],
            vec![],
        )
        .await;
    assert_eq!(code, 200);
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains("x-kubernetes-validations"),
        "the rules are not in OpenAPI v3"
    );
    assert!(
        text.contains("self.size() <= 10"),
        "the rule's text is not in OpenAPI v3"
    );
}
