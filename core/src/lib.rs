//! A framework for Kubernetes-style API servers (aggregated extension apiservers) with pluggable storage.
//!
//! Modules follow the path of a request: `meta` (wire types), `runtime` (objects, scheme),
//! `codec` (JSON, YAML, protobuf), `endpoints` (REST handlers), `admission` (plugins), `validation` (field errors), `registry` (the generic store and strategies),
//! `storage` (the backend contract, memory backend, watch cache).

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
pub mod logging;
// A real kube-apiserver and etcd on loopback for end-to-end tests; only with the `testing` feature.
#[cfg(feature = "testing")]
pub mod envtest;
pub mod meta;
pub mod metrics;
pub mod openapi;
pub mod registry;
pub mod request;
pub mod runtime;
pub mod server;
pub mod storage;
pub mod telemetry;
pub mod validation;

pub use apiserver_derive::{Hub, Versioned, served};

// Re-exported for the code the derives generate and so that users need no direct dependency on them.
pub use async_trait::async_trait;
pub use clap;
pub use prost;
pub use schemars;
pub use schemars::JsonSchema;
pub use serde;
pub use serde_json;
pub use tokio;
pub use tracing;
