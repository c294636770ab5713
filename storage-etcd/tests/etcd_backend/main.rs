//! The etcd backend's integration tests, one test binary (each file a module): the crate is linked once per
//! change instead of once per file.
//!
//! `faults.rs` is a test binary of its own: a three-member etcd cluster whose leader and follower are killed under
//! load is a heavy neighbour for other tests, as `examples/pizza/tests/etcd_faults.rs` says of its own.

#[path = "../support/mod.rs"]
mod support;

mod conformance;
mod conformance_cached;
mod conformance_reliable;
mod etcd;
mod go_layout;
mod tls;
