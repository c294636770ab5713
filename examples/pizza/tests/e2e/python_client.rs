//! The official Kubernetes Python client against the pizza server: `tests/python/client.py` makes its own
//! assertions; this runs it and checks that it finished them all.
//!
//! The interpreter is `$PIZZA_TEST_PYTHON` (scripts/test.sh points it at a virtualenv with the `kubernetes`
//! package), else `python3`.

use crate::support;

use support::TestServer;

#[tokio::test(flavor = "multi_thread")]
async fn python_client_creates_lists_patches_and_watches() {
    let server = TestServer::start(&[]).await;
    let output = support::run_python("client.py", &server.kubeconfig).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("python client: ok"),
        "the Python client failed ({}); it needs `pip install kubernetes` (./scripts/test.sh sets that up)\n\
         stdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
}
