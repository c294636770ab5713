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

pub mod filters;
mod healthz;
mod options;
mod serve;
mod shutdown;
pub mod status;
pub mod tls;
mod version;

pub use filters::{AuditId, FilterChain, Warnings};
pub use healthz::{CheckFuture, HealthCheck, HealthEndpoint};
pub use options::{DEFAULT_CERT_DIR, ServingOptions, parse_duration};
pub use serve::{ConnectionInfo, ServeError, Server, ServerBuilder};
pub use shutdown::ShutdownSignal;
pub use tls::ServingCertificate;
pub use version::VersionInfo;
