//! `v1alpha1`: one reference and its type. The storage version, and the only one of fischers.

use apiserver::meta::{Condition, ObjectMeta};

use crate::wardle::{self, FISCHER_REFERENCE, FLUNDER_REFERENCE};

/// A flunder.
///
/// `kubectl get` shows the reference as this version writes it (a name and its type); v1beta1 has its own columns.
#[apiserver::served(
    hub = "wardle::Flunder",
    version = "v1alpha1",
    default = "defaults",
    printcolumn(name = "Reference", type_ = "string", json_path = ".spec.reference"),
    printcolumn(
        name = "Reference Type",
        type_ = "string",
        json_path = ".spec.referenceType"
    )
)]
pub struct Flunder {
    pub metadata: ObjectMeta,
    pub spec: FlunderSpec,
    pub status: FlunderStatus,
}

/// Converted whole by `to_hub` and `from_hub` below: two fields here, three in the hub.
#[apiserver::served(hub = "wardle::FlunderSpec", to_hub = "to_hub", from_hub = "from_hub")]
pub struct FlunderSpec {
    /// A name of another flunder or fischer, depending on the reference type.
    #[served(omitempty)]
    pub reference: String,
    /// The reference type, defaults to "Flunder" if reference is set.
    #[served(omitempty)]
    pub reference_type: Option<String>,
}

#[apiserver::served(hub = "wardle::FlunderStatus")]
pub struct FlunderStatus {
    /// The flunder's current state: `Ready` is `True` when the flunder or fischer it refers to exists.
    #[served(omitempty)]
    pub conditions: Vec<Condition>,
}

/// A fischer.
#[apiserver::served(hub = "wardle::Fischer", version = "v1alpha1")]
pub struct Fischer {
    pub metadata: ObjectMeta,
    /// Flunder names that are disallowed.
    #[served(omitempty)]
    pub disallowed_flunders: Vec<String>,
}

/// A reference without a type refers to a flunder.
fn defaults(flunder: &mut Flunder) {
    let spec = &mut flunder.spec;
    let untyped = spec.reference_type.as_ref().is_none_or(String::is_empty);
    if untyped && !spec.reference.is_empty() {
        spec.reference_type = Some(FLUNDER_REFERENCE.to_string());
    }
}

/// The reference goes to the field its type names. An unknown type is kept (validation refuses it) and its
/// reference dropped; upstream drops both.
fn to_hub(spec: &FlunderSpec) -> wardle::FlunderSpec {
    let mut hub = wardle::FlunderSpec::default();
    match spec.reference_type.as_deref() {
        Some(FLUNDER_REFERENCE) => hub.flunder_reference = spec.reference.clone(),
        Some(FISCHER_REFERENCE) => hub.fischer_reference = spec.reference.clone(),
        _ => {}
    }
    hub.reference_type = spec.reference_type.clone().unwrap_or_default();
    hub
}

/// The reference is the field the type names.
fn from_hub(hub: &wardle::FlunderSpec) -> FlunderSpec {
    let mut spec = FlunderSpec::default();
    match hub.reference_type.as_str() {
        FLUNDER_REFERENCE => spec.reference = hub.flunder_reference.clone(),
        FISCHER_REFERENCE => spec.reference = hub.fischer_reference.clone(),
        _ => {}
    }
    spec.reference_type = Some(hub.reference_type.clone()).filter(|t| !t.is_empty());
    spec
}
