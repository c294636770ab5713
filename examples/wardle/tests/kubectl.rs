//! The wardle server in process on a free loopback port with a temporary data directory (the default backend,
//! RocksDB), driven by the installed kubectl through the kubeconfig the server writes: discovery, OpenAPI, both
//! flunder versions with v1alpha1's defaulting and conversion, upstream's validation messages, the BanFlunder
//! admission plugin, get, list and delete.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use apiserver::clap::Parser;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use wardle_apiserver::server::{Options, start};

const FLUNDERS_V1ALPHA1: &str = "flunders.v1alpha1.wardle.example.com";
const FLUNDERS_V1BETA1: &str = "flunders.v1beta1.wardle.example.com";
const FISCHER_YAML: &str = include_str!("../artifacts/fischer.yaml");
const FLUNDER_YAML: &str = include_str!("../artifacts/flunder.yaml");
const BANNED: &str = "this name may not be used, please change the resource name";

struct Server {
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Server {
    async fn start() -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let data_dir = dir.path().to_str().expect("utf-8 temp path");
        let options = Options::parse_from([
            "wardle-apiserver",
            "--secure-port=0",
            "--data-dir",
            data_dir,
        ]);
        let started = start(options).await.expect("server starts");
        let (stop, stopped) = oneshot::channel::<()>();
        let server = started.server;
        let task = tokio::spawn(async move {
            server
                .run(async {
                    let _ = stopped.await;
                })
                .await
                .expect("server runs");
        });
        let server = Server {
            kubeconfig: started.kubeconfig,
            _dir: dir,
            stop: Some(stop),
            task: Some(task),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !server
            .kubectl(&["get", "--raw", "/readyz"], None)
            .status
            .success()
        {
            assert!(Instant::now() < deadline, "the server did not become ready");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        server
    }

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task");
        }
    }

    /// Runs kubectl with this server's kubeconfig, and `stdin` as its input when given.
    fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .env_remove("KUBECONFIG")
            .env(
                "HOME",
                self.kubeconfig.parent().unwrap_or(Path::new("/tmp")),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl is installed");
        let mut input = child.stdin.take().expect("stdin");
        if let Some(stdin) = stdin {
            input.write_all(stdin.as_bytes()).expect("stdin written");
        }
        drop(input);
        child.wait_with_output().expect("kubectl runs")
    }

    /// kubectl's stdout; fails the test with its stderr when it fails.
    fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl(args, stdin);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// kubectl's stderr; fails the test when kubectl succeeds.
    fn fails(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.kubectl(args, stdin);
        assert!(
            !out.status.success(),
            "kubectl {args:?} succeeded: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args, None);
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
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
    let server = Server::start().await;
    let create = ["create", "-f", "-"];

    // Discovery: flunders (namespaced, preferred v1beta1) and fischers (cluster-scoped, v1alpha1).
    let out = server.ok(&["api-resources", "--api-group=wardle.example.com"], None);
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
    let versions = server.ok(&["api-versions"], None);
    assert!(
        versions.contains("wardle.example.com/v1alpha1")
            && versions.contains("wardle.example.com/v1beta1"),
        "{versions}"
    );
    let explain = server.ok(&["explain", "flunders.spec"], None);
    assert!(
        explain.contains("flunderReference") && explain.contains("fischerReference"),
        "{explain}"
    );

    // OpenAPI: upstream's title and version.
    let v2 = server.json(&["get", "--raw", "/openapi/v2"]);
    assert_eq!(
        v2["info"],
        serde_json::json!({ "title": "Wardle", "version": "0.1" })
    );
    let v3 = server.json(&[
        "get",
        "--raw",
        "/openapi/v3/apis/wardle.example.com/v1beta1",
    ]);
    assert_eq!(v3["info"]["title"], "Wardle");

    // BanFlunder: a name a fischer disallows is refused on create.
    let out = server.ok(&create, Some(&fischer("banner", &["forbidden", "evil"])));
    assert_eq!(out.trim(), "fischer.wardle.example.com/banner created");
    let stderr = server.fails(
        &create,
        Some(&flunder("v1beta1", "forbidden", serde_json::json!({}))),
    );
    assert!(
        stderr.contains(&format!(
            "flunders.wardle.example.com \"forbidden\" is forbidden: {BANNED}"
        )),
        "{stderr}"
    );
    let stderr = server.fails(
        &create,
        Some(&flunder("v1alpha1", "evil", serde_json::json!({}))),
    );
    assert!(
        stderr.contains("(Forbidden)") && stderr.contains(BANNED),
        "{stderr}"
    );

    // v1alpha1: the reference goes to the field its type names; a reference without a type refers to a flunder.
    let out = server.ok(
        &create,
        Some(&flunder(
            "v1alpha1",
            "my-first-flunder",
            serde_json::json!({ "reference": "other" }),
        )),
    );
    assert_eq!(
        out.trim(),
        "flunder.wardle.example.com/my-first-flunder created"
    );
    let read = server.json(&["get", FLUNDERS_V1BETA1, "my-first-flunder", "-o", "json"]);
    assert_eq!(read["apiVersion"], "wardle.example.com/v1beta1");
    assert_eq!(
        read["spec"],
        serde_json::json!({ "flunderReference": "other", "referenceType": "Flunder" })
    );
    assert_eq!(read["status"], serde_json::json!({}));
    let read = server.json(&["get", FLUNDERS_V1ALPHA1, "my-first-flunder", "-o", "json"]);
    assert_eq!(
        read["spec"],
        serde_json::json!({ "reference": "other", "referenceType": "Flunder" })
    );
    server.ok(
        &create,
        Some(&flunder(
            "v1alpha1",
            "fished",
            serde_json::json!({ "reference": "banner", "referenceType": "Fischer" }),
        )),
    );
    let read = server.json(&["get", FLUNDERS_V1BETA1, "fished", "-o", "json"]);
    assert_eq!(
        read["spec"],
        serde_json::json!({ "fischerReference": "banner", "referenceType": "Fischer" })
    );

    // v1beta1 in, v1alpha1 out.
    server.ok(
        &create,
        Some(&flunder(
            "v1beta1",
            "beta",
            serde_json::json!({ "fischerReference": "banner", "referenceType": "Fischer" }),
        )),
    );
    let read = server.json(&["get", FLUNDERS_V1ALPHA1, "beta", "-o", "json"]);
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
        let stderr = server.fails(&create, Some(&flunder(version, "invalid", spec)));
        assert!(
            stderr.contains(r#"The Flunder "invalid" is invalid: "#) && stderr.contains(message),
            "{stderr}"
        );
    }
    let stderr = server.fails(&["get", "flunder", "invalid"], None);
    assert!(stderr.contains("(NotFound)"), "{stderr}");

    // Get and list.
    let names = server.ok(&["get", "flunders", "-o", "name"], None);
    assert_eq!(
        names.lines().collect::<Vec<_>>(),
        [
            "flunder.wardle.example.com/beta",
            "flunder.wardle.example.com/fished",
            "flunder.wardle.example.com/my-first-flunder",
        ]
    );
    let table = server.ok(&["get", "flunders"], None);
    assert!(
        table.lines().next().unwrap_or_default().starts_with("NAME"),
        "{table}"
    );
    assert_eq!(table.lines().count(), 4, "{table}");
    // Printer columns per served version: each shows the fields its version has.
    let beta = server.ok(&["get", FLUNDERS_V1BETA1, "fished"], None);
    let lines: Vec<Vec<&str>> = beta
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines[0], ["NAME", "FLUNDER", "FISCHER", "AGE"], "{beta}");
    // the Flunder cell is empty: "banner" stands under FISCHER
    let (header, row) = (beta.lines().next().unwrap(), beta.lines().nth(1).unwrap());
    assert_eq!(header.find("FISCHER"), row.find("banner"), "{beta}");
    let alpha = server.ok(&["get", FLUNDERS_V1ALPHA1, "fished"], None);
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
    let list = server.json(&["get", "fischers", "-o", "json"]);
    assert_eq!(
        list["items"][0]["disallowedFlunders"],
        serde_json::json!(["forbidden", "evil"])
    );
    let out = server.ok(
        &[
            "get",
            "fischer",
            "banner",
            "-o",
            "jsonpath={.metadata.name}",
        ],
        None,
    );
    assert_eq!(out, "banner");

    // Delete: gone from reads; once the fischer is gone its names are free.
    let out = server.ok(&["delete", "flunder", "my-first-flunder"], None);
    assert_eq!(
        out.trim(),
        "flunder.wardle.example.com \"my-first-flunder\" deleted"
    );
    let stderr = server.fails(&["get", "flunder", "my-first-flunder"], None);
    assert!(stderr.contains("(NotFound)"), "{stderr}");
    let out = server.ok(&["delete", "fischer", "banner"], None);
    assert_eq!(out.trim(), "fischer.wardle.example.com \"banner\" deleted");
    let deadline = Instant::now() + Duration::from_secs(10);
    let allowed = flunder("v1beta1", "forbidden", serde_json::json!({}));
    loop {
        let out = server.kubectl(&create, Some(&allowed));
        if out.status.success() {
            break;
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(BANNED), "{stderr}");
        assert!(Instant::now() < deadline, "still banned: {stderr}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The README's manifests.
    server.ok(&create, Some(FISCHER_YAML));
    let stderr = server.fails(
        &create,
        Some(&flunder(
            "v1beta1",
            "forbidden-flunder",
            serde_json::json!({}),
        )),
    );
    assert!(stderr.contains(BANNED), "{stderr}");
    server.ok(&create, Some(FLUNDER_YAML));
    let out = server.ok(
        &[
            "get",
            FLUNDERS_V1BETA1,
            "-l",
            "sample-label=true",
            "-o",
            "jsonpath={.items[*].spec}",
        ],
        None,
    );
    assert_eq!(
        out,
        r#"{"flunderReference":"my-second-flunder","referenceType":"Flunder"}"#
    );

    server.ok(&["delete", "flunders", "--all"], None);
    assert_eq!(server.ok(&["get", "flunders", "-o", "name"], None), "");

    server.stop().await;
}
