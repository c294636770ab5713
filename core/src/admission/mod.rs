//! Admission: named plugins that mutate and then validate objects on their way into storage (upstream
//! `k8s.io/apiserver/pkg/admission`).
//!
//! Plugins see hub objects as `dyn Any` and pick the kinds they care about by downcasting, as upstream plugins
//! check `a.GetKind()`. Handlers run the mutating phase themselves and hand the validating phase to the registry's
//! store as an [`AdmissionCheck`](crate::registry::AdmissionCheck), so that validation runs after the strategy and
//! inside the optimistic update loop, and admission never depends on the store.

//!
//! The plugins that read the core cluster (NamespaceLifecycle, ResourceQuota, the admission webhooks and
//! policies) are the `cluster` cargo feature; a build without it refuses them by name when they are enabled.

#[cfg(feature = "cluster")]
mod authorization;
mod chain;
mod config;
#[cfg(feature = "cluster")]
mod expressions;
#[cfg(feature = "cluster")]
mod matching;
#[cfg(feature = "cluster")]
mod mutating_policy;
#[cfg(feature = "cluster")]
mod namespace_lifecycle;
mod plugins;
#[cfg(feature = "cluster")]
mod policy;
mod reinvocation;
#[cfg(feature = "cluster")]
mod resource_quota;
mod typed;
#[cfg(feature = "cluster")]
mod webhook;
mod wire;

/// NamespaceLifecycle's name in `--enable-admission-plugins` / `--disable-admission-plugins`.
pub const NAMESPACE_LIFECYCLE: &str = "NamespaceLifecycle";
/// ResourceQuota's name.
pub const RESOURCE_QUOTA: &str = "ResourceQuota";
/// The mutating webhooks' plugin name.
pub const MUTATING_ADMISSION_WEBHOOK: &str = "MutatingAdmissionWebhook";
/// The validating webhooks' plugin name.
pub const VALIDATING_ADMISSION_WEBHOOK: &str = "ValidatingAdmissionWebhook";
/// The mutating admission policies' plugin name.
pub const MUTATING_ADMISSION_POLICY: &str = "MutatingAdmissionPolicy";
/// The validating admission policies' plugin name.
pub const VALIDATING_ADMISSION_POLICY: &str = "ValidatingAdmissionPolicy";

/// The plugins that need the core cluster, in upstream's order.
pub const CORE_CLUSTER_PLUGINS: &[&str] = &[
    NAMESPACE_LIFECYCLE,
    MUTATING_ADMISSION_POLICY,
    MUTATING_ADMISSION_WEBHOOK,
    VALIDATING_ADMISSION_POLICY,
    VALIDATING_ADMISSION_WEBHOOK,
    RESOURCE_QUOTA,
];

#[cfg(feature = "cluster")]
pub use authorization::AdmissionAuthorizer;
pub use chain::{AnyObject, Attributes, Chain, Operation, Plugin, ValidatingCheck};
#[cfg(feature = "cluster")]
pub use mutating_policy::{
    MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding, MutatingPolicies,
};
#[cfg(feature = "cluster")]
pub use namespace_lifecycle::NamespaceLifecycle;
pub use plugins::{AdmissionOptions, Initializer, Lister, Listers, PluginError, Plugins};
#[cfg(feature = "cluster")]
pub use policy::ValidatingPolicies;
pub use reinvocation::Reinvocation;
#[cfg(feature = "cluster")]
pub use resource_quota::{ResourceQuotaAdmission, object_count_name};
pub use typed::{KindCheck, check};
#[cfg(feature = "cluster")]
pub use webhook::{MutatingWebhooks, ValidatingWebhooks};
pub use wire::WireCodec;
