//! A storage version that cannot say everything the hub says (one author where the hub has several) loses nothing
//! when declared `lossless`: the rest is kept in an annotation that only that version shows.

use apiserver::codec::{FieldValidation, MediaType};
use apiserver::meta::ObjectMeta;
use apiserver::runtime::ResourceCodec;

mod library {
    use apiserver::meta::ObjectMeta;

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "library.example.com", kind = "Book", namespaced)]
    pub struct Book {
        pub metadata: ObjectMeta,
        pub spec: BookSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct BookSpec {
        pub title: String,
        pub authors: Vec<String>,
    }
}

mod v2 {
    use apiserver::meta::ObjectMeta;

    #[apiserver::served(hub = "super::library::Book", version = "v2")]
    pub struct Book {
        pub metadata: ObjectMeta,
        pub spec: BookSpec,
    }

    #[apiserver::served(hub = "super::library::BookSpec")]
    pub struct BookSpec {
        pub title: String,
        pub authors: Vec<String>,
    }
}

/// One author only; `lossless` or not, to show the difference.
macro_rules! v1 {
    ($module:ident, $($lossless:ident)?) => {
        mod $module {
            use apiserver::meta::ObjectMeta;

            #[apiserver::served(hub = "super::library::Book", version = "v1" $(, $lossless)?)]
            pub struct Book {
                pub metadata: ObjectMeta,
                pub spec: BookSpec,
            }

            #[apiserver::served(hub = "super::library::BookSpec")]
            pub struct BookSpec {
                pub title: String,
                #[versioned(rename = "authors", to_hub = "authors", from_hub = "first_author")]
                pub author: String,
            }

            fn authors(author: &str) -> Vec<String> {
                if author.is_empty() { Vec::new() } else { vec![author.to_string()] }
            }

            fn first_author(authors: &[String]) -> String {
                authors.first().cloned().unwrap_or_default()
            }
        }
    };
}

v1!(v1_lossless, lossless);
v1!(v1_lossy,);

const KEPT: &str = "books.library.example.com/v2";

fn book(authors: &[&str]) -> library::Book {
    library::Book {
        metadata: ObjectMeta {
            name: "dune".into(),
            namespace: "default".into(),
            ..ObjectMeta::default()
        },
        spec: library::BookSpec {
            title: "Dune".into(),
            authors: authors.iter().map(|a| a.to_string()).collect(),
        },
    }
}

fn lossless() -> ResourceCodec<library::Book> {
    ResourceCodec::new()
        .version::<v2::Book>()
        .version::<v1_lossless::Book>()
        .storage_version::<v1_lossless::Book>()
}

fn json(
    codec: &ResourceCodec<library::Book>,
    book: &library::Book,
    version: &str,
) -> serde_json::Value {
    serde_json::from_slice(&codec.encode(book, version, MediaType::Json).unwrap()).unwrap()
}

fn decode(
    codec: &ResourceCodec<library::Book>,
    bytes: &[u8],
    format: MediaType,
    version: &str,
) -> library::Book {
    codec
        .decode(bytes, format, version, FieldValidation::Strict)
        .unwrap()
        .object
}

#[test]
fn two_authors_survive_the_one_author_version_in_every_format() {
    let codec = lossless();
    let dune = book(&["Frank Herbert", "Brian Herbert"]);
    for format in MediaType::ALL {
        let bytes = codec.encode(&dune, "v1", format).unwrap();
        assert_eq!(decode(&codec, &bytes, format, "v1"), dune, "{format:?}");
    }
    let stored = json(&codec, &dune, "v1");
    assert_eq!(
        stored["spec"],
        serde_json::json!({"title": "Dune", "author": "Frank Herbert"})
    );
    assert_eq!(
        stored["metadata"]["annotations"][KEPT],
        r#"{"spec":{"authors":["Frank Herbert","Brian Herbert"],"title":"Dune"}}"#
    );
    // The version that can say it all never shows the annotation.
    assert!(
        json(&codec, &dune, "v2")["metadata"]
            .get("annotations")
            .is_none()
    );
}

#[test]
fn what_the_version_can_say_alone_gets_no_annotation() {
    let codec = lossless();
    for authors in [&[][..], &["Frank Herbert"][..]] {
        let stored = json(&codec, &book(authors), "v1");
        assert!(stored["metadata"].get("annotations").is_none(), "{stored}");
    }
}

#[test]
fn a_change_made_in_the_one_author_version_wins_over_the_kept_authors() {
    let codec = lossless();
    let mut stored = json(&codec, &book(&["Frank Herbert", "Brian Herbert"]), "v1");
    stored["spec"]["author"] = "Kevin J. Anderson".into();
    let edited = decode(&codec, stored.to_string().as_bytes(), MediaType::Json, "v1");
    assert_eq!(edited, book(&["Kevin J. Anderson"]));
    // A metadata-only change keeps them.
    let mut stored = json(&codec, &book(&["Frank Herbert", "Brian Herbert"]), "v1");
    stored["metadata"]["labels"] = serde_json::json!({"genre": "sf"});
    let labelled = decode(&codec, stored.to_string().as_bytes(), MediaType::Json, "v1");
    assert_eq!(labelled.spec.authors, ["Frank Herbert", "Brian Herbert"]);
    assert_eq!(labelled.metadata.labels["genre"], "sf");
    assert!(labelled.metadata.annotations.is_empty());
}

#[test]
fn without_lossless_the_second_author_is_lost() {
    let codec = ResourceCodec::<library::Book>::new()
        .version::<v2::Book>()
        .version::<v1_lossy::Book>();
    let dune = book(&["Frank Herbert", "Brian Herbert"]);
    let bytes = codec.encode(&dune, "v1", MediaType::Json).unwrap();
    assert_eq!(
        decode(&codec, &bytes, MediaType::Json, "v1"),
        book(&["Frank Herbert"])
    );
}

apiserver::round_trip_test!(lossless_books_round_trip, lossless());

/// The generated test catches the version that drops authors.
#[test]
#[should_panic(expected = "does not round-trip")]
fn the_round_trip_test_catches_a_lossy_version() {
    let codec = ResourceCodec::<library::Book>::new()
        .version::<v2::Book>()
        .version::<v1_lossy::Book>();
    apiserver::runtime::round_trip::check(&codec, |_| true);
}
