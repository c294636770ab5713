//! The library server as a user drives it: kubectl against the server started in-process, standalone, on the
//! memory backend. A two-author book written in v2 is stored in v1 (one author, lossless) and read back whole.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use apiserver::testing::{KubectlOutput, TestServer};
use library_apiserver::{book_codec, start};

apiserver::round_trip_test!(books_round_trip, book_codec());

/// kubectl's stdout and stderr together.
fn text(out: &KubectlOutput) -> String {
    format!("{}{}", out.stdout, out.stderr)
}

const DUNE: &str = r#"{"apiVersion": "library.example.com/v2", "kind": "Book", "metadata": {"name": "dune"},
  "spec": {"title": "Dune", "authors": ["Frank Herbert", "Brian Herbert"]}}"#;

#[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
async fn books_keep_all_their_authors_through_the_one_author_storage_version() {
    let library = TestServer::start(start, &[]).await;

    let created = library.kubectl(&["create", "-f", "-"]).stdin(DUNE).await;
    assert!(created.success, "{}", text(&created));
    let v2 = library
        .kubectl(&[
            "get",
            "books.v2.library.example.com",
            "dune",
            "-o",
            "jsonpath={.spec.authors}",
        ])
        .await;
    assert_eq!(text(&v2), r#"["Frank Herbert","Brian Herbert"]"#);
    let v1 = library
        .kubectl(&["get", "books.v1.library.example.com", "dune", "-o", "json"])
        .await;
    let v1: apiserver::serde_json::Value = apiserver::serde_json::from_str(&v1.stdout).unwrap();
    assert_eq!(v1["spec"]["author"], "Frank Herbert");
    assert!(
        v1["metadata"]["annotations"]["books.library.example.com/v2"].is_string(),
        "{v1}"
    );
    let table = text(&library.kubectl(&["get", "books"]).await);
    assert!(table.starts_with("NAME   TITLE   AGE"), "{table}");

    let anonymous = r#"{"apiVersion": "library.example.com/v2", "kind": "Book", "metadata": {"name": "anon"},
      "spec": {"title": "Beowulf"}}"#;
    let refused = library
        .kubectl(&["create", "-f", "-"])
        .stdin(anonymous)
        .await;
    assert!(!refused.success);
    assert!(
        text(&refused).contains("a book needs an author"),
        "{}",
        text(&refused)
    );
    let untitled = r#"{"apiVersion": "library.example.com/v1", "kind": "Book", "metadata": {"name": "x"},
      "spec": {"author": "Homer"}}"#;
    let invalid = text(
        &library
            .kubectl(&["create", "-f", "-"])
            .stdin(untitled)
            .await,
    );
    assert!(invalid.contains("spec.title: Required value"), "{invalid}");

    library.stop().await;
}

/// One storage, two groups: a book created in `library.example.com` is read, listed, patched and watched as
/// `books.archive.example.com`, each group's clients seeing its own `apiVersion`; both are in discovery.
#[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
async fn books_are_served_in_a_second_group_from_the_same_storage() {
    let library = TestServer::start(start, &[]).await;
    library
        .kubectl(&["create", "-f", "-"])
        .stdin(DUNE)
        .ok()
        .await;
    // Read through the library first: what the server keeps encoded for it is not what the archive answers.
    let kept = library
        .ok(&["get", "books.v2.library.example.com", "dune", "-o", "json"])
        .await;
    assert!(
        kept.contains(r#""apiVersion": "library.example.com/v2""#),
        "{kept}"
    );

    let archived = library
        .ok(&["get", "books.v2.archive.example.com", "dune", "-o", "json"])
        .await;
    let archived: apiserver::serde_json::Value =
        apiserver::serde_json::from_str(&archived).unwrap();
    assert_eq!(archived["apiVersion"], "archive.example.com/v2");
    assert_eq!(
        archived["spec"]["authors"],
        apiserver::serde_json::json!(["Frank Herbert", "Brian Herbert"])
    );
    let names = library
        .ok(&["get", "books.archive.example.com", "-o", "name"])
        .await;
    assert_eq!(names.trim(), "book.archive.example.com/dune");

    // A patch through the archive is seen through the library; its managed fields name the archive's version.
    library
        .ok(&[
            "patch",
            "books.archive.example.com",
            "dune",
            "--type=merge",
            "-p",
            r#"{"spec":{"title":"Dune Messiah"}}"#,
        ])
        .await;
    let title = library
        .ok(&[
            "get",
            "books.library.example.com",
            "dune",
            "-o",
            "jsonpath={.spec.title}",
        ])
        .await;
    assert_eq!(title, "Dune Messiah");
    let managers = library
        .ok(&[
            "get",
            "books.library.example.com",
            "dune",
            "--show-managed-fields",
            "-o",
            "jsonpath={.metadata.managedFields[*].apiVersion}",
        ])
        .await;
    assert_eq!(managers, "library.example.com/v2 archive.example.com/v2");

    // Errors name the resource in the group asked for; admission applies in both.
    let missing = text(
        &library
            .kubectl(&["get", "books.archive.example.com", "nope"])
            .await,
    );
    assert!(
        missing.contains(r#"books.archive.example.com "nope" not found"#),
        "{missing}"
    );
    let anonymous = r#"{"apiVersion": "archive.example.com/v2", "kind": "Book", "metadata": {"name": "anon"},
      "spec": {"title": "Beowulf"}}"#;
    let refused = text(
        &library
            .kubectl(&["create", "-f", "-"])
            .stdin(anonymous)
            .await,
    );
    assert!(refused.contains("a book needs an author"), "{refused}");
    // A body of the other group sent to this one is refused, as upstream refuses a mismatched apiVersion.
    let crossed = text(
        &library
            .kubectl(&[
                "create",
                "--raw",
                "/apis/archive.example.com/v2/namespaces/default/books",
                "-f",
                "-",
            ])
            .stdin(DUNE)
            .await,
    );
    assert!(
        crossed.contains("the API version in the data (library.example.com/v2) does not match the expected API version (archive.example.com/v2)"),
        "{crossed}"
    );

    // Both groups in discovery.
    let resources = library.ok(&["api-resources", "-o", "wide"]).await;
    for group in ["library.example.com/v2", "archive.example.com/v2"] {
        assert!(
            resources
                .lines()
                .any(|l| l.starts_with("books ") && l.contains(group)),
            "{resources}"
        );
    }

    // A watch through the archive sees a book created through the library, in the archive's apiVersion.
    let mut watch = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(library.kubeconfig())
        .args([
            "get",
            "books.archive.example.com",
            "--watch",
            "--output-watch-events",
            "-o",
            "jsonpath={.type} {.object.apiVersion} {.object.metadata.name}{\"\\n\"}",
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
    apiserver::tokio::time::sleep(Duration::from_secs(2)).await;
    let emma = r#"{"apiVersion": "library.example.com/v1", "kind": "Book", "metadata": {"name": "emma"},
      "spec": {"title": "Emma", "author": "Jane Austen"}}"#;
    library
        .kubectl(&["create", "-f", "-"])
        .stdin(emma)
        .ok()
        .await;
    library
        .ok(&["delete", "books.library.example.com", "emma"])
        .await;
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline && !seen.iter().any(|l: &String| l.starts_with("DELETED")) {
        if let Ok(line) = lines_rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(line);
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();
    let emma_events: Vec<&str> = seen
        .iter()
        .filter(|l| l.ends_with(" emma"))
        .map(String::as_str)
        .collect();
    assert_eq!(
        emma_events,
        [
            "ADDED archive.example.com/v2 emma",
            "DELETED archive.example.com/v2 emma"
        ],
        "{seen:?}"
    );
    library.stop().await;
}
