//! Serving: flags, TLS, the filter chain, health and version endpoints, and graceful shutdown.
//!
//! A binary parses [`ServingOptions`] (flattened into its own clap parser), gives [`Server::builder`] an axum
//! [`Router`](axum::Router) of API routes, and runs it:
//!
//! ```no_run
//! # async fn run() -> Result<(), apiserver::server::ServeError> {
//! use apiserver::server::{HealthCheck, Server, ServingOptions};
//!
//! let api = axum::Router::new(); // the REST routes of the served groups
//! let server = Server::builder("pizza-apiserver")
//!     .options(ServingOptions::default())
//!     .routes(api)
//!     .health_check(HealthCheck::new("etcd", || async { Ok(()) }))
//!     .bind()
//!     .await?;
//! println!("serving on https://{}", server.local_addr());
//! server.run_until_signal().await
//! # }
//! ```
//!
//! Handlers read what the filters found through extractors, add warnings, and end long-running responses
//! when the server drains:
//!
//! ```
//! use apiserver::auth::User;
//! use apiserver::request::RequestInfo;
//! use apiserver::server::{ShutdownSignal, Warnings};
//! use axum::body::Body;
//!
//! async fn list(info: RequestInfo, user: User, warnings: Warnings) -> String {
//!     warnings.add("restaurant.example.com/v1alpha1 Pizza is deprecated; use v1beta1");
//!     format!("{} {} in {:?} as {}", info.verb, info.resource, info.namespace, user.name)
//! }
//!
//! async fn watch(shutdown: ShutdownSignal) -> Body {
//!     let events = futures::stream::pending::<Result<String, std::io::Error>>();
//!     Body::from_stream(shutdown.end_with_drain(events))
//! }
//!
//! let routes: axum::Router = axum::Router::new()
//!     .route("/apis/restaurant.example.com/v1/namespaces/{ns}/pizzas", axum::routing::get(list))
//!     .route("/apis/restaurant.example.com/v1/watch/pizzas", axum::routing::get(watch));
//! ```

mod dynamic_certificates;
pub mod filters;
mod healthz;
mod options;
mod serve;
mod shutdown;
pub mod status;
pub mod tls;
mod version;

pub use dynamic_certificates::SniCertKey;
pub use filters::{AuditId, FilterChain, Warnings};
pub use healthz::{CheckFuture, HealthCheck, HealthEndpoint};
pub use options::{DEFAULT_CERT_DIR, ServingOptions, parse_duration};
pub(crate) use serve::wait_for_signal;
pub use serve::{ConnectionInfo, ServeError, Server, ServerBuilder};
pub use shutdown::ShutdownSignal;
pub use tls::{ServingCertificate, TlsVersion};
pub use version::VersionInfo;
