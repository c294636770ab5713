//! The wardle sample API server: `wardle.example.com` as Kubernetes' sample-apiserver serves it.
//!
//! `wardle` holds the hub types; `v1alpha1` and `v1beta1` are the served versions; `strategy` validates;
//! `admission` is the `BanFlunder` plugin; `ready` the controller of flunders' `Ready` condition; `server`
//! assembles the binary's server.

pub mod admission;
pub mod ready;
pub mod server;
pub mod strategy;
pub mod v1alpha1;
pub mod v1beta1;
pub mod wardle;

use apiserver::runtime::ResourceCodec;

/// Flunders are served in v1beta1 (preferred, as upstream's version priority says) and v1alpha1, stored as
/// v1alpha1.
pub fn flunder_codec() -> ResourceCodec<wardle::Flunder> {
    ResourceCodec::new()
        .version::<v1beta1::Flunder>()
        .version::<v1alpha1::Flunder>()
        .storage_version::<v1alpha1::Flunder>()
}

/// Fischers are served and stored in v1alpha1 only.
pub fn fischer_codec() -> ResourceCodec<wardle::Fischer> {
    ResourceCodec::new()
        .version::<v1alpha1::Fischer>()
        .storage_version::<v1alpha1::Fischer>()
}
