//! The pizza sample's end-to-end tests, one test binary (each file a module): the server is linked once per change
//! instead of once per file. The tests of a binary run two at a time, as each file's did.
//!
//! Test binaries of their own, beside this one (see each file's comment):
//! - `watch_flood.rs` reads the process's RSS, which must be its server's and clients' only;
//! - `postgres_faults.rs` stops the Postgres every test of its binary shares;
//! - `etcd_faults.rs` runs three etcd processes and their elections, a heavy neighbour for other tests;
//! - `leader_election.rs` times takeovers against bounds of about a second, which a busy neighbour would stretch.
//! - `bounded_work.rs` measures a server process's CPU per request size, with requests of a minute of CPU before.

// Shared by the modules; one instance each, so the tests of this binary share one Postgres (each test makes its
// own database).
#[path = "../../../../storage-etcd/tests/support/mod.rs"]
mod etcd;
#[path = "../lin_http/mod.rs"]
mod lin_http;
#[path = "../../../../storage-sql/tests/common/pg.rs"]
#[allow(dead_code)]
mod pg;
#[path = "../support/mod.rs"]
mod support;

mod aggregated;
mod apply_properties;
mod audit;
mod backends;
mod cbor;
mod finalizers;
mod golden;
mod golden_managed_fields;
mod hostile;
mod http;
mod kube_client;
mod kubectl;
mod linearizability;
mod logging;
mod metadata;
mod metrics;
mod python_client;
mod round_trip;
mod standalone;
mod status;
mod storage_transfer;
mod tracing;
