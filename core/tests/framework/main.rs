//! The framework's integration tests, one test binary (each file a module): the crate is linked once per change
//! instead of once per file. The tests of a binary run two at a time, as each file's did.
//!
//! `server_tls.rs` is a test binary of its own: it installs the process's global tracing subscriber to capture the
//! server's log lines, which would capture every other test's lines too.

#[path = "../server_support/mod.rs"]
mod server_support;

mod codec_fuzz;
mod codec_json;
mod codec_media;
mod codec_protobuf;
mod codec_yaml;
mod derive_ui;
mod discovery_openapi;
mod envtest;
mod lossless;
mod meta_json;
mod meta_malformed;
mod meta_protobuf;
mod provided;
mod server_filters;
mod server_health;
mod server_limits;
mod server_shutdown;
mod storage_watch_cache;
