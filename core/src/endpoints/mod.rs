//! The HTTP side of API resources. For now only request-info parsing, which the filter chain needs
//! before any handler runs; the per-verb handlers plug in here later.

pub mod request_info;

pub use request_info::{RequestInfo, RequestInfoFactory};
