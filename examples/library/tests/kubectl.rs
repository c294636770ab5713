//! The library server as a user drives it: kubectl against the server started in-process, standalone, on the
//! memory backend. A two-author book written in v2 is stored in v1 (one author, lossless) and read back whole.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

/// A library server started in-process on the memory backend, ready.
struct Library {
    kubeconfig: PathBuf,
    stop: apiserver::tokio::sync::oneshot::Sender<()>,
    task: apiserver::tokio::task::JoinHandle<Result<(), apiserver::server::ServeError>>,
    _dir: tempfile::TempDir,
}

impl Library {
    async fn start() -> Library {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().to_str().unwrap();
        let options =
            Options::parse_from(["library-apiserver", "--secure-port=0", "--data-dir", data]);
        let started = start(options).await.expect("server starts");
        let kubeconfig = started.kubeconfig.clone();
        let (stop, stopped) = apiserver::tokio::sync::oneshot::channel::<()>();
        let task = apiserver::tokio::spawn(started.server.run(async {
            let _ = stopped.await;
        }));
        let library = Library {
            kubeconfig,
            stop,
            task,
            _dir: dir,
        };
        for _ in 0..100 {
            if library
                .run(&["get", "--raw", "/readyz"], None)
                .await
                .status
                .success()
            {
                break;
            }
            apiserver::tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        library
    }

    /// Runs kubectl against the server, off the async threads.
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let kubeconfig = self.kubeconfig.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let stdin = stdin.map(str::to_string);
        apiserver::tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            kubectl(&kubeconfig, &args, stdin.as_deref())
        })
        .await
        .unwrap()
    }

    /// Runs kubectl and returns its stdout, failing the test when kubectl fails.
    async fn ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run(args, stdin).await;
        assert!(out.status.success(), "kubectl {args:?}: {}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

#[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
async fn books_keep_all_their_authors_through_the_one_author_storage_version() {
    let library = Library::start().await;
    let run = |args: &'static [&'static str], stdin: Option<&'static str>| {
        let run = library.run(args, stdin);
        async move { Ok::<_, ()>(run.await) }
    };

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

    library.stop().await;
}

/// One storage, two groups: a book created in `library.example.com` is read, listed, patched and watched as
/// `books.archive.example.com`, each group's clients seeing its own `apiVersion`; both are in discovery.
#[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
async fn books_are_served_in_a_second_group_from_the_same_storage() {
    let library = Library::start().await;
    library.ok(&["create", "-f", "-"], Some(DUNE)).await;
    // Read through the library first: what the server keeps encoded for it is not what the archive answers.
    let kept = library
        .ok(
            &["get", "books.v2.library.example.com", "dune", "-o", "json"],
            None,
        )
        .await;
    assert!(
        kept.contains(r#""apiVersion": "library.example.com/v2""#),
        "{kept}"
    );

    let archived = library
        .ok(
            &["get", "books.v2.archive.example.com", "dune", "-o", "json"],
            None,
        )
        .await;
    let archived: apiserver::serde_json::Value =
        apiserver::serde_json::from_str(&archived).unwrap();
    assert_eq!(archived["apiVersion"], "archive.example.com/v2");
    assert_eq!(
        archived["spec"]["authors"],
        apiserver::serde_json::json!(["Frank Herbert", "Brian Herbert"])
    );
    let names = library
        .ok(&["get", "books.archive.example.com", "-o", "name"], None)
        .await;
    assert_eq!(names.trim(), "book.archive.example.com/dune");

    // A patch through the archive is seen through the library; its managed fields name the archive's version.
    library
        .ok(
            &[
                "patch",
                "books.archive.example.com",
                "dune",
                "--type=merge",
                "-p",
                r#"{"spec":{"title":"Dune Messiah"}}"#,
            ],
            None,
        )
        .await;
    let title = library
        .ok(
            &[
                "get",
                "books.library.example.com",
                "dune",
                "-o",
                "jsonpath={.spec.title}",
            ],
            None,
        )
        .await;
    assert_eq!(title, "Dune Messiah");
    let managers = library
        .ok(
            &[
                "get",
                "books.library.example.com",
                "dune",
                "--show-managed-fields",
                "-o",
                "jsonpath={.metadata.managedFields[*].apiVersion}",
            ],
            None,
        )
        .await;
    assert_eq!(managers, "library.example.com/v2 archive.example.com/v2");

    // Errors name the resource in the group asked for; admission applies in both.
    let missing = text(
        &library
            .run(&["get", "books.archive.example.com", "nope"], None)
            .await,
    );
    assert!(
        missing.contains(r#"books.archive.example.com "nope" not found"#),
        "{missing}"
    );
    let anonymous = r#"{"apiVersion": "archive.example.com/v2", "kind": "Book", "metadata": {"name": "anon"},
      "spec": {"title": "Beowulf"}}"#;
    let refused = text(&library.run(&["create", "-f", "-"], Some(anonymous)).await);
    assert!(refused.contains("a book needs an author"), "{refused}");
    // A body of the other group sent to this one is refused, as upstream refuses a mismatched apiVersion.
    let crossed = text(
        &library
            .run(
                &[
                    "create",
                    "--raw",
                    "/apis/archive.example.com/v2/namespaces/default/books",
                    "-f",
                    "-",
                ],
                Some(DUNE),
            )
            .await,
    );
    assert!(
        crossed.contains("the API version in the data (library.example.com/v2) does not match the expected API version (archive.example.com/v2)"),
        "{crossed}"
    );

    // Both groups in discovery.
    let resources = library.ok(&["api-resources", "-o", "wide"], None).await;
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
        .arg(&library.kubeconfig)
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
    library.ok(&["create", "-f", "-"], Some(emma)).await;
    library
        .ok(&["delete", "books.library.example.com", "emma"], None)
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

/// A type whose v1 has a CEL rule that cannot evaluate, and whose v2 has a printer column naming a field it does
/// not have: the server refuses to start with either, naming the rule or the column, as kube-apiserver refuses such
/// a CRD (tests/fixtures/crd_checks in the core crate).
mod broken {
    use apiserver::meta::ObjectMeta;

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "shelves.example.com", kind = "Shelf", namespaced)]
    pub struct Shelf {
        pub metadata: ObjectMeta,
        pub spec: ShelfSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct ShelfSpec {
        pub slots: i64,
    }

    pub mod v1 {
        use apiserver::meta::ObjectMeta;

        #[apiserver::served(hub = "super::Shelf", version = "v1")]
        pub struct Shelf {
            pub metadata: ObjectMeta,
            pub spec: ShelfSpec,
        }

        #[apiserver::served(hub = "super::ShelfSpec")]
        pub struct ShelfSpec {
            #[versioned(validation(rule = "self > 0 && self.nope"))]
            pub slots: i64,
        }
    }

    pub mod v2 {
        use apiserver::meta::ObjectMeta;

        #[apiserver::served(
            hub = "super::Shelf",
            version = "v2",
            printcolumn(name = "Slots", type_ = "integer", json_path = ".spec.slot")
        )]
        pub struct Shelf {
            pub metadata: ObjectMeta,
            pub spec: ShelfSpec,
        }

        #[apiserver::served(hub = "super::ShelfSpec")]
        pub struct ShelfSpec {
            pub slots: i64,
        }
    }

    pub struct Shelves;

    impl apiserver::registry::Strategy<Shelf> for Shelves {}
}

#[apiserver::tokio::test(crate = "apiserver::tokio")]
async fn a_rule_or_printer_column_that_cannot_work_refuses_to_start() {
    use apiserver::app::App;
    use apiserver::runtime::ResourceCodec;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let options = Options::parse_from(["shelves", "--secure-port=0", "--data-dir", data]);
    let mut app = App::new("shelves", options.server).open().await.unwrap();
    let codec = ResourceCodec::<broken::Shelf>::new().version::<broken::v1::Shelf>();
    let refused = app.store(codec, broken::Shelves).err().unwrap().to_string();
    assert_eq!(
        refused,
        "CEL validation rules of Shelf: v1: openAPIV3Schema.properties[spec].properties[slots].\
         x-kubernetes-validations[0].rule: Invalid value: {\"Rule\":\"self \\u003e 0 \\u0026\\u0026 self.nope\",\
         \"Message\":\"\",\"MessageExpression\":\"\",\"Reason\":null,\"FieldPath\":\"\",\"OptionalOldSelf\":null}: \
         compilation failed: ERROR: <input>:1:17: type 'int' does not support field selection\n \
         | self > 0 && self.nope\n | ................^"
    );
    let codec = ResourceCodec::<broken::Shelf>::new().version::<broken::v2::Shelf>();
    let refused = app.store(codec, broken::Shelves).err().unwrap().to_string();
    assert_eq!(
        refused,
        "printer columns of Shelf: spec.versions[0].additionalPrinterColumns[0].JSONPath: Invalid value: \
         \".spec.slot\": no field \"slot\" in the schema of version v2"
    );
}
