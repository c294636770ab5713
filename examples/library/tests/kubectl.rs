//! The library server as a user drives it: kubectl against the server started in-process, standalone, on the
//! memory backend. A two-author book written in v2 is stored in v1 (one author, lossless) and read back whole.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use apiserver::testing::{KubectlOutput, TestServer};
use library_apiserver::{book_codec, start};

apiserver::round_trip_test!(books_round_trip, book_codec());
// Stored protobuf names fields by tag: each served version's tags are kept in a checked-in table.
apiserver::protobuf_tags_test!(
    book_protobuf_tags,
    book_codec(),
    "tests/protobuf-tags/books.txt"
);

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

/// A request with a body of `content_type`, answered in JSON: the status code and the answer.
async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> (u16, apiserver::serde_json::Value) {
    use http_body_util::BodyExt;
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(kube::client::Body::from(body))
        .unwrap();
    let response = client.send(request).await.expect("request sent");
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, apiserver::serde_json::from_slice(&bytes).unwrap())
}

/// A v1 count of copies that is not a number is refused in every media type that can carry it (JSON, YAML, CBOR,
/// protobuf) and by patches: a 422 naming the field and the value sent, as upstream's field errors read, and
/// nothing is written.
#[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
async fn a_count_of_copies_that_is_not_a_number_is_refused_naming_it() {
    use apiserver::codec::{encode_cbor, encode_protobuf};
    use apiserver::serde_json::json;
    use library_apiserver::v1;

    let library = TestServer::start(start, &[]).await;
    let client = library.client().await;
    let books = "/apis/library.example.com/v1/namespaces/default/books";
    let book = v1::Book {
        metadata: apiserver::meta::ObjectMeta {
            name: "emma".into(),
            ..Default::default()
        },
        spec: v1::BookSpec {
            title: "Emma".into(),
            author: "Jane Austen".into(),
            copies: "a dozen".into(),
        },
    };
    let api_version = "library.example.com/v1";
    let json = json!({"apiVersion": api_version, "kind": "Book", "metadata": {"name": "emma"},
        "spec": {"title": "Emma", "author": "Jane Austen", "copies": "a dozen"}});
    let yaml = format!(
        "apiVersion: {api_version}\nkind: Book\nmetadata:\n  name: emma\nspec:\n  title: Emma\n  author: Jane Austen\n  copies: a dozen\n"
    );
    let message = r#"Book.library.example.com "emma" is invalid: spec.copies: Invalid value: "a dozen": must be a number of copies, e.g. "12 copies""#;
    let refused = |code: u16, status: &apiserver::serde_json::Value, how: &str| {
        assert_eq!(code, 422, "{how}: {status}");
        assert_eq!(status["reason"], "Invalid", "{how}");
        assert_eq!(status["message"], message, "{how}");
        assert_eq!(
            status["details"],
            json!({"name": "emma", "group": "library.example.com", "kind": "Book", "causes": [{
                "reason": "FieldValueInvalid",
                "message": r#"Invalid value: "a dozen": must be a number of copies, e.g. "12 copies""#,
                "field": "spec.copies"
            }]}),
            "{how}"
        );
    };
    for (content_type, body) in [
        (
            "application/json",
            apiserver::serde_json::to_vec(&json).unwrap(),
        ),
        ("application/yaml", yaml.into_bytes()),
        (
            "application/cbor",
            encode_cbor(api_version, "Book", &book).unwrap(),
        ),
        (
            "application/vnd.kubernetes.protobuf",
            encode_protobuf(api_version, "Book", &book).unwrap(),
        ),
    ] {
        let (code, status) = send(&client, "POST", books, content_type, body).await;
        refused(code, &status, content_type);
    }
    let (code, list) = send(&client, "GET", books, "application/json", Vec::new()).await;
    assert_eq!(code, 200);
    assert_eq!(list["items"], json!([]), "nothing was created");

    // Counted in words, the same book is created, and read as a number in v2.
    let mut good = json.clone();
    good["spec"]["copies"] = "12 copies".into();
    let body = apiserver::serde_json::to_vec(&good).unwrap();
    let (code, created) = send(&client, "POST", books, "application/json", body).await;
    assert_eq!(code, 201, "{created}");
    let v2 = "/apis/library.example.com/v2/namespaces/default/books/emma";
    let (_, read) = send(&client, "GET", v2, "application/json", Vec::new()).await;
    assert_eq!(read["spec"]["copies"], 12);

    // An update or a patch with a bad count is refused alike, and the book keeps its 12 copies.
    let mut update = created.clone();
    update["spec"]["copies"] = "a dozen".into();
    let body = apiserver::serde_json::to_vec(&update).unwrap();
    let emma = format!("{books}/emma");
    let (code, status) = send(&client, "PUT", &emma, "application/json", body).await;
    refused(code, &status, "update");
    let patch = br#"{"spec":{"copies":"a dozen"}}"#.to_vec();
    let (code, status) = send(
        &client,
        "PATCH",
        &emma,
        "application/merge-patch+json",
        patch,
    )
    .await;
    refused(code, &status, "merge patch");
    let apply = format!(
        "apiVersion: {api_version}\nkind: Book\nmetadata:\n  name: emma\nspec:\n  copies: a dozen\n"
    );
    let (code, status) = send(
        &client,
        "PATCH",
        &format!("{emma}?fieldManager=test&force=true"),
        "application/apply-patch+yaml",
        apply.into_bytes(),
    )
    .await;
    refused(code, &status, "apply");
    let (_, read) = send(&client, "GET", &emma, "application/json", Vec::new()).await;
    assert_eq!(read["spec"]["copies"], "12 copies");
    assert_eq!(
        read["metadata"]["resourceVersion"], created["metadata"]["resourceVersion"],
        "nothing was written"
    );

    // kubectl shows the same message.
    let refused = library
        .kubectl(&["create", "-f", "-"])
        .stdin(json.to_string())
        .fails()
        .await;
    let cause =
        r#"spec.copies: Invalid value: "a dozen": must be a number of copies, e.g. "12 copies""#;
    assert!(refused.contains(cause), "{refused}");

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
    use apiserver::clap::Parser;
    use apiserver::runtime::ResourceCodec;
    use library_apiserver::Options;

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
