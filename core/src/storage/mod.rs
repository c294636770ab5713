//! The storage layer. The contract every backend implements ([`Storage`], keys, continue tokens, selectors, the
//! memory backend, backup and restore, and behind the `testing` feature the conformance suite) is the
//! `apiserver-storage` crate, re-exported here whole, so that a backend crate depends on it alone and does not
//! rebuild when the server changes. What only a server needs stays here: the [`WatchCache`] in front of each
//! resource and the [`instrumented`] layer (both feed the server's metrics and traces).

pub use apiserver_storage::*;

pub mod cache;
mod counted;
pub mod encryption;
pub mod instrumented;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use cache::{CacheConfig, WatchCache};
