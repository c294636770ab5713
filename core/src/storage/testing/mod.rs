//! The backend conformance suite (feature `testing`): `apiserver_storage::testing`, re-exported, plus
//! [`cached`], which runs it through the server's watch cache.

pub use apiserver_storage::testing::*;

mod cached;

pub use cached::{CachePerPrefix, cached};
