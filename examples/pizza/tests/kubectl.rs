//! The pizza server driven by the installed kubectl, through the kubeconfig the server writes, with no special
//! flags: discovery, OpenAPI validation, CRUD in both versions, selectors, paging, patches, conflicts, watch.

mod support;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{MARGHERITA, TOPPINGS, TestServer};

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
        header.contains("NAME") && header.contains("COST") && header.contains("CREATED AT"),
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

    // Apply (client-side) of a changed manifest falls back to a merge patch and works.
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
    let server = TestServer::start(&[]).await;
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
