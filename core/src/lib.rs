//! A framework for Kubernetes-style API servers (aggregated extension apiservers) with pluggable storage.
//!
//! # From an empty crate to kubectl
//!
//! A server is a crate that depends on `apiserver` (and, for persistent storage, a backend crate such as
//! `apiserver-storage-rocks`); everything else it needs is re-exported. `examples/library` is this guide as a
//! crate, with its kubectl test. **The [`guide`] goes on step by step** through status, validation and CEL rules,
//! admission, a controller, choosing a backend and testing.
//!
//! 1. **A hub type** says what an object means, in plain Rust, with its identity (group, kind, scope, columns):
//!    `#[derive(Hub)]`.
//! 2. **Served versions** are the wire shapes clients see, one struct per version, each with one attribute,
//!    [`served`], which implies serde with Kubernetes' rules, protobuf, the OpenAPI schema and the conversion to and
//!    from the hub (fields that differ name their conversion functions).
//! 3. **A codec** lists the versions: the first added is the preferred one; `.storage_version::<v1::Book>()` picks the
//!    one objects are stored in. A version that cannot say all the hub says is declared `lossless`.
//! 4. **A strategy** ([`registry::Strategy`]) validates and prepares objects; **admission plugins**
//!    ([`admission::Plugin`]) see every write.
//! 5. **The server** ([`app::App`]) takes the command line, opens the chosen backend, serves each type's store
//!    with discovery, OpenAPI, authentication and authorization (standalone or delegated to a cluster), and writes
//!    a kubeconfig: `kubectl --kubeconfig <data-dir>/kubeconfig get books` works at once.
//!
//! ```no_run
//! use apiserver::app::{App, Options, StartError, Started};
//! use apiserver::meta::ObjectMeta;
//! use apiserver::registry::Strategy;
//! use apiserver::runtime::ResourceCodec;
//!
//! /// 1. The hub.
//! #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! #[resource(group = "library.example.com", kind = "Book", namespaced)]
//! pub struct Book {
//!     pub metadata: ObjectMeta,
//!     pub spec: BookSpec,
//! }
//!
//! #[derive(Clone, Debug, Default, PartialEq)]
//! pub struct BookSpec {
//!     pub title: String,
//! }
//!
//! /// 2. A served version.
//! mod v1 {
//!     use apiserver::meta::ObjectMeta;
//!
//!     #[apiserver::served(hub = "super::Book", version = "v1")]
//!     pub struct Book {
//!         pub metadata: ObjectMeta,
//!         pub spec: BookSpec,
//!     }
//!
//!     #[apiserver::served(hub = "super::BookSpec")]
//!     pub struct BookSpec {
//!         pub title: String,
//!     }
//! }
//!
//! /// 4. The rules (here: none beyond the framework's).
//! struct BookStrategy;
//! impl Strategy<Book> for BookStrategy {}
//!
//! /// 5. The server: the framework's command line (`Options<RocksOptions>` would add RocksDB's flags), the
//! /// stores, the plugins.
//! async fn start(options: Options) -> Result<Started, StartError> {
//!     let mut app = App::new("library-apiserver", options.server).open().await?;
//!     // 3. The codec: v1, stored as v1.
//!     app.store(ResourceCodec::new().version::<v1::Book>(), BookStrategy)?;
//!     app.bind().await
//! }
//!
//! // `--help` names and describes the binary after its package.
//! apiserver::main!(start);
//! # #[cfg(any())] fn main() {} // (so that rustdoc keeps the modules above at the top level)
//! ```
//!
//! # Cargo features
//!
//! All on by default, so that every flag of upstream's generic apiserver works. A server that needs less turns
//! them off (`apiserver = { version = "...", default-features = false, features = [...] }`) and builds about 100
//! fewer crates; a flag of a feature it was built without is refused at start with a message naming the feature,
//! never ignored.
//!
//! | feature | what it brings | what needs it |
//! |---|---|---|
//! | `cluster` | kube-rs and k8s-openapi (the core cluster's client); turns on `cel` | `--kubeconfig`, `--authentication-kubeconfig`, `--authorization-kubeconfig` and running in a pod (delegated authentication by TokenReview and the `extension-apiserver-authentication` ConfigMap, SubjectAccessReview), the admission plugins that read the cluster (NamespaceLifecycle, ResourceQuota, admission webhooks and policies), leader election on a Lease in the cluster, `--audit-webhook-config-file`, `envtest` (with `testing`) |
//! | `cel` | the CEL interpreter (`apiserver-cel`) | types with validation rules (`#[versioned(validation(rule = ...))]`) |
//! | `otel` | OpenTelemetry and its OTLP/gRPC exporter (tonic) | `--tracing-config-file` |
//! | `testing` (off by default) | proptest | the storage conformance suite, `round_trip_test!`, `envtest` |
//!
//! Without `cluster`, a server is standalone (its admin token, or client certificates and front-proxy headers
//! from `--client-ca-file` and `--requestheader-client-ca-file`); leader election runs on a Lease in its own
//! storage.
//!
//! # Modules
//!
//! They follow the path of a request: [`app`] (a whole server), [`server`] (TLS, the filter chain, health,
//! shutdown), [`request`] (what a request is about), [`auth`] (authentication, authorization), [`audit`],
//! [`endpoints`] (REST handlers), [`admission`] (plugins), [`registry`] (the generic store and strategies),
//! [`validation`] (field errors), [`runtime`] (objects, versions, conversion), [`codec`] (JSON, YAML, protobuf),
//! [`meta`] (wire types), [`storage`] (the backend contract, the memory backend, the watch cache), beside
//! [`discovery`], [`openapi`], [`metrics`], [`logging`], [`telemetry`], [`cluster`] (the core cluster) and
//! [`controller`] (in-process controllers) with [`leader`] (leader election among replicas).
//!
//! # Writing a storage backend
//!
//! A backend crate depends on `apiserver-storage` (the contract, re-exported here as [`storage`]), not on this
//! crate, so that it does not rebuild when the server changes. Implement [`storage::Storage`] (its doc comments are
//! the contract: revisions, preconditions, list paging and consistency, watch semantics and errors), prove it with
//! the shared conformance suite (with the `testing` feature,
//! `apiserver_storage::storage_conformance!(|| async { Arc::new(MyStore::new().await) as Arc<dyn Storage> });` in
//! the backend's tests: the backend is done when the whole suite passes; `apiserver::storage::testing::cached`
//! runs it through the watch cache), and let servers choose it by flag by implementing [`app::StorageBackend`]
//! (`apiserver_storage::backend::StorageBackend`) on the backend's `clap` options. `guaranteed_update` and `delete` need not
//! be written again: implement the four conditional operations of [`storage::optimistic::OptimisticStore`] and
//! call its driver, as every backend here does.
//!
//! # Testing a server
//!
//! The `testing` feature (turn it on in the server's `[dev-dependencies]`) brings a test kit: `testing::TestServer`
//! starts the server in-process, as its binary would, on a free loopback port with a temporary data directory and
//! any backend, and gives its kubeconfig, a kube-rs client and a kubectl runner; `round_trip_test!` writes the test
//! that every served version and media type keeps what the hub holds.
#![cfg_attr(
    feature = "testing",
    doc = "See [`testing`] and [`round_trip_test!`]; `examples/library/tests/kubectl.rs` uses both."
)]
#![cfg_attr(
    not(feature = "testing"),
    doc = "These docs were built without the feature: `cargo doc --features apiserver/testing` shows both."
)]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]

pub mod admission;
pub mod app;
pub mod audit;
pub mod auth;
pub mod cluster;
pub mod codec;
pub mod controller;
pub mod discovery;
pub mod endpoints;
pub mod fieldmanager;
pub mod guide;
pub mod leader;
pub mod logging;
// A real kube-apiserver and etcd on loopback for end-to-end tests; only with the `testing` feature (which turns
// `cluster` on).
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod envtest;
pub mod meta;
pub mod metrics;
pub mod openapi;
pub mod registry;
pub mod request;
pub mod runtime;
pub mod server;
pub mod storage;
/// The backend conformance suite as one `#[test]` per case (`apiserver_storage::storage_conformance!`).
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub use apiserver_storage::storage_conformance;
pub mod telemetry;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod tls_verify;
pub mod validation;
pub mod warning;

pub use apiserver_derive::{Hub, Versioned, served};

// Re-exported for the code the derives generate and so that users need no direct dependency on them.
pub use async_trait::async_trait;
pub use clap;
pub use futures;
pub use prost;
pub use schemars;
pub use schemars::JsonSchema;
pub use serde;
pub use serde_json;
pub use tokio;
pub use tracing;
