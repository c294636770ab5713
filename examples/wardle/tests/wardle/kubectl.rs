//! The wardle server in process on a free loopback port with a temporary data directory (the default backend,
//! RocksDB), driven by the installed kubectl through the kubeconfig the server writes: discovery, OpenAPI, both
//! flunder versions with v1alpha1's defaulting and conversion, upstream's validation messages, the BanFlunder
//! admission plugin, the flunder-ready controller's `Ready` condition (`kubectl wait`), get, list and delete.

use std::time::{Duration, Instant};

use apiserver::testing::TestServer;
use wardle_apiserver::server::start;

const FLUNDERS_V1ALPHA1: &str = "flunders.v1alpha1.wardle.example.com";
const FLUNDERS_V1BETA1: &str = "flunders.v1beta1.wardle.example.com";
const FISCHER_YAML: &str = include_str!("../../artifacts/fischer.yaml");
const FLUNDER_YAML: &str = include_str!("../../artifacts/flunder.yaml");
const BANNED: &str = "this name may not be used, please change the resource name";

/// kubectl's stdout as JSON; fails the test when kubectl fails.
/// Waits (kubectl wait, 20 s) for a flunder's condition, e.g. `Ready` or `Ready=false`.
async fn wait(server: &TestServer, condition: &str, name: &str) {
    let flunder = format!("flunder/{name}");
    let condition = format!("--for=condition={condition}");
    let out = server
        .ok(&["wait", &condition, &flunder, "--timeout=20s"])
        .await;
    assert_eq!(
        out.trim(),
        format!("flunder.wardle.example.com/{name} condition met")
    );
}

async fn json(server: &TestServer, args: &[&str]) -> serde_json::Value {
    let out = server.ok(args).await;
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn fischer(name: &str, disallowed: &[&str]) -> String {
    format!(
        "apiVersion: wardle.example.com/v1alpha1\nkind: Fischer\nmetadata:\n  name: {name}\n\
         disallowedFlunders: {disallowed:?}\n"
    )
}

/// A flunder manifest in `version` with `spec` (a JSON object, which is YAML too).
fn flunder(version: &str, name: &str, spec: serde_json::Value) -> String {
    format!(
        "apiVersion: wardle.example.com/{version}\nkind: Flunder\nmetadata:\n  name: {name}\nspec: {spec}\n"
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_serves_flunders_and_fischers() {
    let server = TestServer::start(start, &[]).await;
    let create = ["create", "-f", "-"];

    // Discovery: flunders (namespaced, preferred v1beta1) and fischers (cluster-scoped, v1alpha1).
    let out = server
        .ok(&["api-resources", "--api-group=wardle.example.com"])
        .await;
    let line = |name: &str| -> String {
        out.lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        line("flunders"),
        "flunders wardle.example.com/v1beta1 true Flunder"
    );
    assert_eq!(
        line("fischers"),
        "fischers wardle.example.com/v1alpha1 false Fischer"
    );
    let versions = server.ok(&["api-versions"]).await;
    assert!(
        versions.contains("wardle.example.com/v1alpha1")
            && versions.contains("wardle.example.com/v1beta1"),
        "{versions}"
    );
    let explain = server.ok(&["explain", "flunders.spec"]).await;
    assert!(
        explain.contains("flunderReference") && explain.contains("fischerReference"),
        "{explain}"
    );

    // OpenAPI: upstream's title and version.
    let v2 = json(&server, &["get", "--raw", "/openapi/v2"]).await;
    assert_eq!(
        v2["info"],
        serde_json::json!({ "title": "Wardle", "version": "0.1" })
    );
    let v3 = json(
        &server,
        &[
            "get",
            "--raw",
            "/openapi/v3/apis/wardle.example.com/v1beta1",
        ],
    )
    .await;
    assert_eq!(v3["info"]["title"], "Wardle");

    // BanFlunder: a name a fischer disallows is refused on create.
    let out = server
        .kubectl(&create)
        .stdin(fischer("banner", &["forbidden", "evil"]))
        .ok()
        .await;
    assert_eq!(out.trim(), "fischer.wardle.example.com/banner created");
    let stderr = server
        .kubectl(&create)
        .stdin(flunder("v1beta1", "forbidden", serde_json::json!({})))
        .fails()
        .await;
    assert!(
        stderr.contains(&format!(
            "flunders.wardle.example.com \"forbidden\" is forbidden: {BANNED}"
        )),
        "{stderr}"
    );
    let stderr = server
        .kubectl(&create)
        .stdin(flunder("v1alpha1", "evil", serde_json::json!({})))
        .fails()
        .await;
    assert!(
        stderr.contains("(Forbidden)") && stderr.contains(BANNED),
        "{stderr}"
    );

    // v1alpha1: the reference goes to the field its type names; a reference without a type refers to a flunder.
    let out = server
        .kubectl(&create)
        .stdin(flunder(
            "v1alpha1",
            "my-first-flunder",
            serde_json::json!({ "reference": "other" }),
        ))
        .ok()
        .await;
    assert_eq!(
        out.trim(),
        "flunder.wardle.example.com/my-first-flunder created"
    );
    let read = json(
        &server,
        &["get", FLUNDERS_V1BETA1, "my-first-flunder", "-o", "json"],
    )
    .await;
    assert_eq!(read["apiVersion"], "wardle.example.com/v1beta1");
    assert_eq!(
        read["spec"],
        serde_json::json!({ "flunderReference": "other", "referenceType": "Flunder" })
    );
    let read = json(
        &server,
        &["get", FLUNDERS_V1ALPHA1, "my-first-flunder", "-o", "json"],
    )
    .await;
    assert_eq!(
        read["spec"],
        serde_json::json!({ "reference": "other", "referenceType": "Flunder" })
    );
    // The flunder-ready controller: `Ready` is False while the flunder referred to is missing, True once it exists.
    wait(&server, "Ready=false", "my-first-flunder").await;
    let ready = json(
        &server,
        &["get", "flunder", "my-first-flunder", "-o", "json"],
    )
    .await;
    let condition = &ready["status"]["conditions"][0];
    assert_eq!(
        (
            &condition["type"],
            &condition["reason"],
            &condition["message"]
        ),
        (
            &serde_json::json!("Ready"),
            &serde_json::json!("ReferenceNotFound"),
            &serde_json::json!("flunder \"other\" not found")
        ),
        "{ready}"
    );
    assert!(condition["lastTransitionTime"].is_string(), "{ready}");
    server
        .kubectl(&create)
        .stdin(flunder("v1beta1", "other", serde_json::json!({})))
        .ok()
        .await;
    wait(&server, "Ready", "my-first-flunder").await;
    wait(&server, "Ready", "other").await;
    // Descriptions are upstream's (kubectl wraps them: compare words).
    let explain = server.ok(&["explain", "flunders.status.conditions"]).await;
    let explain = explain.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        explain.contains("lastTransitionTime is the last time the condition transitioned")
            && explain.contains("status of the condition, one of True, False, Unknown."),
        "{explain}"
    );
    server
        .kubectl(&create)
        .stdin(flunder(
            "v1alpha1",
            "fished",
            serde_json::json!({ "reference": "banner", "referenceType": "Fischer" }),
        ))
        .ok()
        .await;
    let read = json(&server, &["get", FLUNDERS_V1BETA1, "fished", "-o", "json"]).await;
    assert_eq!(
        read["spec"],
        serde_json::json!({ "fischerReference": "banner", "referenceType": "Fischer" })
    );
    wait(&server, "Ready", "fished").await;

    // v1beta1 in, v1alpha1 out.
    server
        .kubectl(&create)
        .stdin(flunder(
            "v1beta1",
            "beta",
            serde_json::json!({ "fischerReference": "banner", "referenceType": "Fischer" }),
        ))
        .ok()
        .await;
    let read = json(&server, &["get", FLUNDERS_V1ALPHA1, "beta", "-o", "json"]).await;
    assert_eq!(read["apiVersion"], "wardle.example.com/v1alpha1");
    assert_eq!(
        read["spec"],
        serde_json::json!({ "reference": "banner", "referenceType": "Fischer" })
    );

    // Validation: 422 with upstream's messages (kubectl prints an Invalid status this way), nothing stored.
    for (version, spec, message) in [
        (
            "v1beta1",
            serde_json::json!({ "flunderReference": "a", "fischerReference": "b", "referenceType": "Flunder" }),
            r#"spec.fischerReference: Invalid value: "b": cannot be set with flunderReference at the same time"#,
        ),
        (
            "v1beta1",
            serde_json::json!({ "flunderReference": "a", "referenceType": "Fischer" }),
            r#"spec.flunderReference: Invalid value: "a": cannot be set if referenceType is not Flunder"#,
        ),
        (
            "v1beta1",
            serde_json::json!({ "referenceType": "Fischer" }),
            r#"spec.fischerReference: Invalid value: "": cannot be empty if referenceType is Fischer"#,
        ),
        (
            "v1alpha1",
            serde_json::json!({ "reference": "a", "referenceType": "Bogus" }),
            r#"spec.referenceType: Invalid value: "Bogus": must be Flunder or Fischer"#,
        ),
    ] {
        let stderr = server
            .kubectl(&create)
            .stdin(flunder(version, "invalid", spec))
            .fails()
            .await;
        assert!(
            stderr.contains(r#"The Flunder "invalid" is invalid: "#) && stderr.contains(message),
            "{stderr}"
        );
    }
    let stderr = server.kubectl(&["get", "flunder", "invalid"]).fails().await;
    assert!(stderr.contains("(NotFound)"), "{stderr}");

    // Get and list.
    let names = server.ok(&["get", "flunders", "-o", "name"]).await;
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        [
            "flunder.wardle.example.com/beta",
            "flunder.wardle.example.com/fished",
            "flunder.wardle.example.com/my-first-flunder",
            "flunder.wardle.example.com/other",
        ]
    );
    let table = server.ok(&["get", "flunders"]).await;
    assert!(
        table.lines().next().unwrap_or_default().starts_with("NAME"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 5, "{table}");
    // Printer columns per served version: each shows the fields its version has.
    let beta = server.ok(&["get", FLUNDERS_V1BETA1, "fished"]).await;
    let lines: Vec<Vec<&str>> = beta
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "FLUNDER", "FISCHER", "AGE"], "{beta}");
    // the Flunder cell is empty: "banner" stands under FISCHER
    let (header, row) = (beta.lines().next().unwrap(), beta.lines().nth(1).unwrap());
    assert_eq!(header.find("FISCHER"), row.find("banner"), "{beta}");
    let alpha = server.ok(&["get", FLUNDERS_V1ALPHA1, "fished"]).await;
    let lines: Vec<Vec<&str>> = alpha
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        lines[0],
        ["NAME", "REFERENCE", "REFERENCE", "TYPE", "AGE"],
        "{alpha}"
    );
    assert_eq!(lines[1][..3], ["fished", "banner", "Fischer"], "{alpha}");
    let list = json(&server, &["get", "fischers", "-o", "json"]).await;
    assert_eq!(
        list["items"][0]["disallowedFlunders"],
        serde_json::json!(["forbidden", "evil"])
    );
    let out = server
        .ok(&[
            "get",
            "fischer",
            "banner",
            "-o",
            "jsonpath={.metadata.name}",
        ])
        .await;
    assert_eq!(out, "banner");

    // Delete: gone from reads; once the fischer is gone its names are free.
    let out = server.ok(&["delete", "flunder", "my-first-flunder"]).await;
    assert_eq!(
        out.trim(),
        "flunder.wardle.example.com \"my-first-flunder\" deleted"
    );
    let stderr = server
        .kubectl(&["get", "flunder", "my-first-flunder"])
        .fails()
        .await;
    assert!(stderr.contains("(NotFound)"), "{stderr}");
    let out = server.ok(&["delete", "fischer", "banner"]).await;
    assert_eq!(out.trim(), "fischer.wardle.example.com \"banner\" deleted");
    // A fischer gone: the flunders that refer to it are no longer ready.
    wait(&server, "Ready=false", "fished").await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let allowed = flunder("v1beta1", "forbidden", serde_json::json!({}));
    loop {
        let out = server.kubectl(&create).stdin(&allowed).await;
        if out.success {
            break;
        }
        let stderr = out.stderr;
        assert!(stderr.contains(BANNED), "{stderr}");
        assert!(Instant::now() < deadline, "still banned: {stderr}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The manifests of `docs/samples.md`'s wardle walkthrough.
    server.kubectl(&create).stdin(FISCHER_YAML).ok().await;
    let stderr = server
        .kubectl(&create)
        .stdin(flunder(
            "v1beta1",
            "forbidden-flunder",
            serde_json::json!({}),
        ))
        .fails()
        .await;
    assert!(stderr.contains(BANNED), "{stderr}");
    server.kubectl(&create).stdin(FLUNDER_YAML).ok().await;
    let out = server
        .ok(&[
            "get",
            FLUNDERS_V1BETA1,
            "-l",
            "sample-label=true",
            "-o",
            "jsonpath={.items[*].spec}",
        ])
        .await;
    assert_eq!(
        out,
        r#"{"flunderReference":"my-second-flunder","referenceType":"Flunder"}"#
    );

    server.ok(&["delete", "flunders", "--all"]).await;
    assert_eq!(server.ok(&["get", "flunders", "-o", "name"]).await, "");

    server.stop().await;
}
