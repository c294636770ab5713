//! The hub (internal) types: what flunders and fischers mean, independent of any wire version.

use apiserver::meta::{Condition, ObjectMeta};

/// The reference type of a flunder that refers to another flunder.
pub const FLUNDER_REFERENCE: &str = "Flunder";
/// The reference type of a flunder that refers to a fischer.
pub const FISCHER_REFERENCE: &str = "Fischer";
/// The condition a flunder is `True` in when what it refers to exists (or it refers to nothing).
pub const READY: &str = "Ready";

/// An example type with a spec and a status (no status subresource, as upstream).
#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(group = "wardle.example.com", kind = "Flunder", namespaced)]
pub struct Flunder {
    pub metadata: ObjectMeta,
    pub spec: FlunderSpec,
    pub status: FlunderStatus,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlunderSpec {
    /// A name of another flunder, mutually exclusive to the fischer reference.
    pub flunder_reference: String,
    /// A name of a fischer, mutually exclusive to the flunder reference.
    pub fischer_reference: String,
    /// [`FLUNDER_REFERENCE`], [`FISCHER_REFERENCE`] or empty.
    pub reference_type: String,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlunderStatus {
    /// [`READY`], kept by the `flunder-ready` controller.
    pub conditions: Vec<Condition>,
}

/// A cluster-wide list of flunder names that may not be used (see the `BanFlunder` admission plugin).
#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(group = "wardle.example.com", kind = "Fischer")]
pub struct Fischer {
    pub metadata: ObjectMeta,
    pub disallowed_flunders: Vec<String>,
}
