//! The CEL crate's integration tests, one test binary (each file a module).

mod conversion;
mod cost;
mod hostile;
mod libraries;
