//! The pizza-apiserver binary's logs, as an operator sees them: with `--logging-format=json -v=3` every stderr line
//! is a JSON object with upstream's keys, each request has its `"HTTP"` access line, and no line holds a
//! credential.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn json_logs_parse_line_by_line_and_hold_no_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_pizza-apiserver"))
        .args([
            "--secure-port=0",
            "--storage-backend=memory",
            "--logging-format=json",
            "-v",
            "3",
        ])
        .arg(format!("--data-dir={}", dir.path().display()))
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the server binary starts");
    let mut stdout = BufReader::new(server.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.starts_with("pizza-apiserver serving on "), "{first}");
    let kubeconfig = dir.path().join("kubeconfig");
    let kubectl = |args: &[&str]| {
        Command::new("kubectl")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .args(args)
            .output()
            .expect("kubectl runs")
    };
    // Ready once the caches are loaded.
    let mut ready = false;
    for _ in 0..100 {
        if kubectl(&["get", "--raw", "/readyz"]).status.success() {
            ready = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(ready);
    let listed = kubectl(&["get", "toppings.restaurant.programming-kubernetes.info"]);
    assert!(listed.status.success(), "{listed:?}");
    let refused = kubectl(&["--token=not-the-token", "get", "--raw", "/apis"]);
    assert!(!refused.status.success());

    let status = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut stderr = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(server.wait().unwrap().success());

    let token = std::fs::read_to_string(dir.path().join("admin-token")).unwrap();
    let token = token.trim();
    assert!(!token.is_empty());
    let mut http = Vec::new();
    for line in stderr.lines() {
        let entry: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line}"));
        assert!(entry["ts"].as_f64().is_some(), "{line}");
        assert!(entry["caller"].as_str().is_some(), "{line}");
        assert!(entry["msg"].as_str().is_some(), "{line}");
        assert!(
            !line.contains(token),
            "a log line holds the admin token: {line}"
        );
        assert!(
            !line.contains("not-the-token"),
            "a log line holds a token: {line}"
        );
        if entry["msg"] == "HTTP" {
            http.push(entry);
        }
    }
    let list =
        http.iter()
            .find(|e| {
                e["verb"] == "LIST"
                    && e["URI"].as_str().unwrap().starts_with(
                        "/apis/restaurant.programming-kubernetes.info/v1beta1/toppings",
                    )
            })
            .unwrap_or_else(|| panic!("the list's access line: {stderr}"));
    assert_eq!(list["v"], 3);
    assert_eq!(list["resp"], 200);
    assert!(list["userAgent"].as_str().unwrap().starts_with("kubectl/"));
    assert!(list["srcIP"].as_str().unwrap().starts_with("127.0.0.1:"));
    assert_eq!(list["audit-ID"].as_str().unwrap().len(), 36);
    assert!(list["latency"].as_str().unwrap().ends_with('s'));
    assert!(
        http.iter().any(|e| e["resp"] == 401 && e["URI"] == "/apis"),
        "the refused request's access line: {stderr}"
    );
}
