//! The library server as a user drives it: kubectl against the server started in-process, standalone, on the
//! memory backend. A two-author book written in v2 is stored in v1 (one author, lossless) and read back whole.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use apiserver::clap::Parser;
use library_apiserver::{Options, book_codec, start};

apiserver::round_trip_test!(books_round_trip, book_codec());

fn kubectl(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubectl runs (it must be on PATH)");
    if let Some(input) = stdin {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    child.wait_with_output().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const DUNE: &str = r#"{"apiVersion": "library.example.com/v2", "kind": "Book", "metadata": {"name": "dune"},
  "spec": {"title": "Dune", "authors": ["Frank Herbert", "Brian Herbert"]}}"#;

#[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
async fn books_keep_all_their_authors_through_the_one_author_storage_version() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let options = Options::parse_from(["library-apiserver", "--secure-port=0", "--data-dir", data]);
    let started = start(options).await.expect("server starts");
    let kubeconfig = started.kubeconfig.clone();
    let (stop, stopped) = apiserver::tokio::sync::oneshot::channel::<()>();
    let task = apiserver::tokio::spawn(started.server.run(async {
        let _ = stopped.await;
    }));
    let run = move |args: &'static [&'static str], stdin: Option<&'static str>| {
        let kubeconfig = kubeconfig.clone();
        apiserver::tokio::task::spawn_blocking(move || kubectl(&kubeconfig, args, stdin))
    };
    for _ in 0..100 {
        if run(&["get", "--raw", "/readyz"], None)
            .await
            .unwrap()
            .status
            .success()
        {
            break;
        }
        apiserver::tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    let created = run(&["create", "-f", "-"], Some(DUNE)).await.unwrap();
    assert!(created.status.success(), "{}", text(&created));
    let v2 = run(
        &[
            "get",
            "books.v2.library.example.com",
            "dune",
            "-o",
            "jsonpath={.spec.authors}",
        ],
        None,
    );
    assert_eq!(
        text(&v2.await.unwrap()),
        r#"["Frank Herbert","Brian Herbert"]"#
    );
    let v1 = run(
        &["get", "books.v1.library.example.com", "dune", "-o", "json"],
        None,
    )
    .await
    .unwrap();
    let v1: apiserver::serde_json::Value = apiserver::serde_json::from_slice(&v1.stdout).unwrap();
    assert_eq!(v1["spec"]["author"], "Frank Herbert");
    assert!(
        v1["metadata"]["annotations"]["books.library.example.com/v2"].is_string(),
        "{v1}"
    );
    let table = text(&run(&["get", "books"], None).await.unwrap());
    assert!(table.starts_with("NAME   TITLE   AGE"), "{table}");

    let anonymous = r#"{"apiVersion": "library.example.com/v2", "kind": "Book", "metadata": {"name": "anon"},
      "spec": {"title": "Beowulf"}}"#;
    let refused = run(&["create", "-f", "-"], Some(anonymous)).await.unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("a book needs an author"),
        "{}",
        text(&refused)
    );
    let untitled = r#"{"apiVersion": "library.example.com/v1", "kind": "Book", "metadata": {"name": "x"},
      "spec": {"author": "Homer"}}"#;
    let invalid = text(&run(&["create", "-f", "-"], Some(untitled)).await.unwrap());
    assert!(invalid.contains("spec.title: Required value"), "{invalid}");

    let _ = stop.send(());
    task.await.unwrap().unwrap();
}
