//! Fuzz targets for every decoder and parser of the framework that takes client input (request bodies in JSON,
//! YAML, protobuf and CBOR, watch streams, selectors, continue tokens, query parameters, patches, request paths,
//! media types, CEL expressions) or reads configuration files.
//!
//! Each target is a plain function `fn(&[u8])`: it must return for every input, never panic, and stay within
//! bounded time and memory. Where a round trip must hold (decode, encode, decode again) it asserts it, so a
//! broken round trip is a crash too. The AFL++ harness (`src/bin/afl.rs`, feature `afl`) runs one of them under
//! the fuzzer; `tests/corpus.rs` replays every seed and every past crash through the same functions in the
//! ordinary test run, so fixed crashes stay fixed on machines without AFL.
//!
//! The served types are the pizza sample's own (`restaurant`, `v1alpha1`, `v1beta1`), compiled from its sources
//! here so the targets do not link the sample's storage backends (RocksDB, Postgres, etcd).

#![deny(missing_docs)]

// The pizza sample's own files, formatted by its `src/rustfmt.toml` (not by this crate's run of rustfmt).
#[allow(missing_docs)]
#[rustfmt::skip]
#[path = "../../examples/pizza/src/restaurant.rs"]
pub mod restaurant;
#[allow(missing_docs)]
#[rustfmt::skip]
#[path = "../../examples/pizza/src/v1alpha1.rs"]
pub mod v1alpha1;
#[allow(missing_docs)]
#[rustfmt::skip]
#[path = "../../examples/pizza/src/v1beta1.rs"]
pub mod v1beta1;

mod targets;

pub use targets::*;

/// A target: its name (as `scripts/fuzz.sh` and the corpus directories call it) and its function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, by name.
pub const TARGETS: &[Target] = &[
    ("decode", targets::decode),
    ("cbor", targets::cbor),
    ("codec", targets::codec),
    ("watch", targets::watch),
    ("selectors", targets::selectors),
    ("continue_token", targets::continue_token),
    ("request_info", targets::request_info),
    ("negotiate", targets::negotiate),
    ("query", targets::query),
    ("patch", targets::patch),
    ("request", targets::request),
    ("cel", targets::cel),
    ("config", targets::config),
];

/// The target called `name`.
pub fn target(name: &str) -> Option<fn(&[u8])> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
}

/// Splits fuzz input into at most `n` fields at NUL bytes (the last field keeps the rest, NULs included).
pub fn fields(data: &[u8], n: usize) -> Vec<&[u8]> {
    data.splitn(n, |b| *b == 0).collect()
}

/// The bytes as text, invalid UTF-8 replaced.
pub fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}
