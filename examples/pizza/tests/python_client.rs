//! The official Kubernetes Python client against the pizza server: `tests/python/client.py` makes its own
//! assertions; this runs it and checks that it finished them all.
//!
//! The interpreter is `$PIZZA_TEST_PYTHON` (scripts/test.sh points it at a virtualenv with the `kubernetes`
//! package), else `python3`.

mod support;

use std::process::Command;

use support::TestServer;

#[tokio::test(flavor = "multi_thread")]
async fn python_client_creates_lists_patches_and_watches() {
    let server = TestServer::start(&[]).await;
    let python = std::env::var("PIZZA_TEST_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/client.py");
    let kubeconfig = server.kubeconfig.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .arg(script)
            .arg(&kubeconfig)
            .output()
            .unwrap_or_else(|e| panic!("running {python}: {e}"))
    })
    .await
    .expect("the client process");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("python client: ok"),
        "the Python client failed ({}); it needs `pip install kubernetes` (./scripts/test.sh sets that up)\n\
         stdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
}
