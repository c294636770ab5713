//! A framework for Kubernetes-style API servers (aggregated extension apiservers) with pluggable storage.
//!
//! Modules follow the path of a request: `meta` (wire types), `runtime` (objects, scheme),
//! `codec` (JSON, YAML, protobuf), `storage` (the backend contract).

pub mod auth;
pub mod codec;
pub mod endpoints;
pub mod meta;
pub mod runtime;
pub mod server;
pub mod storage;

pub use apiserver_derive::*;
