//! `v1beta1`: both references and their type, as the hub. The preferred version of flunders.

use apiserver::meta::{Condition, ObjectMeta};

use crate::wardle;

/// A flunder.
///
/// `kubectl get` shows one column per kind of reference, the fields this version has.
#[apiserver::served(
    hub = "wardle::Flunder",
    version = "v1beta1",
    printcolumn(
        name = "Flunder",
        type_ = "string",
        json_path = ".spec.flunderReference"
    ),
    printcolumn(
        name = "Fischer",
        type_ = "string",
        json_path = ".spec.fischerReference"
    )
)]
pub struct Flunder {
    pub metadata: ObjectMeta,
    pub spec: FlunderSpec,
    pub status: FlunderStatus,
}

#[apiserver::served(hub = "wardle::FlunderSpec")]
pub struct FlunderSpec {
    /// A name of another flunder, mutually exclusive to the fischerReference.
    #[served(omitempty)]
    pub flunder_reference: String,
    /// A name of a fischer, mutually exclusive to the flunderReference.
    #[served(omitempty)]
    pub fischer_reference: String,
    /// The reference type: "Flunder" or "Fischer".
    #[served(omitempty)]
    pub reference_type: String,
}

#[apiserver::served(hub = "wardle::FlunderStatus")]
pub struct FlunderStatus {
    /// The flunder's current state: `Ready` is `True` when the flunder or fischer it refers to exists.
    #[served(omitempty)]
    pub conditions: Vec<Condition>,
}
