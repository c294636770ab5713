//! The shared storage conformance suite against a real Postgres 15 (a fresh database per case).

use crate::common;

apiserver::storage_conformance!(|| async { common::pg_store().await.into_dyn() });
