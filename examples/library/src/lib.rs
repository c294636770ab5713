//! A library of books (`library.example.com`): v2 (preferred) says a book has authors, v1 (the storage version)
//! knew only one author and is declared lossless, so a book with several authors keeps them all. The same books
//! are served in `archive.example.com` too, from the same storage.

use apiserver::admission::{Attributes, KindCheck, Operation};
use apiserver::app::{App, StartError, Started};
use apiserver::async_trait;
use apiserver::meta::ObjectMeta;
use apiserver::registry::{ApiError, Strategy};
use apiserver::runtime::ResourceCodec;
use apiserver::validation::{ErrorList, FieldError, Path};

/// The meaning of a book, whatever version a client speaks.
#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(
    group = "library.example.com",
    kind = "Book",
    namespaced,
    shortname = "bk",
    printcolumn(name = "Title", type_ = "string", json_path = ".spec.title")
)]
pub struct Book {
    pub metadata: ObjectMeta,
    pub spec: BookSpec,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct BookSpec {
    pub title: String,
    pub authors: Vec<String>,
}

pub mod v2 {
    use apiserver::meta::ObjectMeta;

    #[apiserver::served(hub = "crate::Book", version = "v2")]
    pub struct Book {
        pub metadata: ObjectMeta,
        pub spec: BookSpec,
    }

    #[apiserver::served(hub = "crate::BookSpec")]
    pub struct BookSpec {
        pub title: String,
        pub authors: Vec<String>,
    }
}

pub mod v1 {
    use apiserver::meta::ObjectMeta;

    #[apiserver::served(hub = "crate::Book", version = "v1", lossless)]
    pub struct Book {
        pub metadata: ObjectMeta,
        pub spec: BookSpec,
    }

    #[apiserver::served(hub = "crate::BookSpec")]
    pub struct BookSpec {
        pub title: String,
        /// The first author.
        #[versioned(rename = "authors", to_hub = "authors", from_hub = "first_author")]
        pub author: String,
    }

    fn authors(author: &str) -> Vec<String> {
        Some(author.to_string())
            .filter(|a| !a.is_empty())
            .into_iter()
            .collect()
    }

    fn first_author(authors: &[String]) -> String {
        authors.first().cloned().unwrap_or_default()
    }
}

/// v2 is preferred (added first); books are stored as v1.
pub fn book_codec() -> ResourceCodec<Book> {
    ResourceCodec::new()
        .version::<v2::Book>()
        .version::<v1::Book>()
        .storage_version("v1")
}

/// A book needs a title.
pub struct BookStrategy;

impl Strategy<Book> for BookStrategy {
    fn validate(&self, book: &Book) -> ErrorList {
        let mut errors = ErrorList::default();
        if book.spec.title.is_empty() {
            errors.push(FieldError::required(Path::new("spec").child("title"), ""));
        }
        errors
    }
}

/// `NoAnonymousBooks`: a book names at least one author.
pub struct NoAnonymousBooks;

#[async_trait]
impl KindCheck<Book> for NoAnonymousBooks {
    fn operations(&self) -> &'static [Operation] {
        &[Operation::Create]
    }

    async fn check(
        &self,
        attributes: &Attributes,
        book: &Book,
        _: Option<&Book>,
    ) -> Result<(), ApiError> {
        match book.spec.authors.is_empty() {
            true => Err(attributes.forbidden("a book needs an author")),
            false => Ok(()),
        }
    }
}

/// The command line: the framework's flags (the memory backend is the only one this server has).
pub type Options = apiserver::app::Options;

/// Assembles and binds the server; the caller runs it.
pub async fn start(options: Options) -> Result<Started, StartError> {
    let mut app = App::new("library-apiserver", options.server)
        .version(apiserver::version_info!())
        .open()
        .await?;
    let books = app.store(book_codec(), BookStrategy)?;
    // The same books in a second group, as `books.archive.example.com`.
    app.serve_in_group(&books, "archive.example.com");
    app.kind_check("NoAnonymousBooks", true, |_| Ok(NoAnonymousBooks));
    app.bind().await
}
