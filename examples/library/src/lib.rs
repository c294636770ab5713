//! A library of books (`library.example.com`): v2 (preferred) says a book has authors, v1 (the storage version)
//! knew only one author and is declared lossless, so a book with several authors keeps them all. v1 counted
//! copies in words (`"12 copies"`), v2 in numbers: a v1 count that is not a number is refused, naming the field.
//! The same books are served in `archive.example.com` too, from the same storage.

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
    pub copies: i64,
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
        /// How many copies the library holds.
        #[served(omitempty)]
        pub copies: i64,
    }
}

pub mod v1 {
    use apiserver::meta::ObjectMeta;
    use apiserver::runtime::ConversionError;

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
        /// How many copies the library holds, e.g. `"12 copies"`.
        #[served(omitempty)]
        #[versioned(to_hub = "count_copies", from_hub = "copies_in_words")]
        pub copies: String,
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

    /// `"12 copies"` (or `"12"`, `"1 copy"`) is 12; anything else is refused, the framework naming the field.
    fn count_copies(copies: &str) -> Result<i64, ConversionError> {
        if copies.is_empty() {
            return Ok(0);
        }
        let number = copies
            .strip_suffix(" copies")
            .or_else(|| copies.strip_suffix(" copy"))
            .unwrap_or(copies);
        number.parse().map_err(|_| {
            ConversionError::invalid(copies, "must be a number of copies, e.g. \"12 copies\"")
        })
    }

    fn copies_in_words(copies: &i64) -> String {
        match copies {
            0 => String::new(),
            1 => "1 copy".to_string(),
            n => format!("{n} copies"),
        }
    }
}

/// v2 is preferred (added first); books are stored as v1.
pub fn book_codec() -> ResourceCodec<Book> {
    ResourceCodec::new()
        .version::<v2::Book>()
        .version::<v1::Book>()
        .storage_version::<v1::Book>()
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
