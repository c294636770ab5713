//! Admission: named plugins that mutate and then validate objects on their way into storage (upstream
//! `k8s.io/apiserver/pkg/admission`).
//!
//! Plugins see hub objects as `dyn Any` and pick the kinds they care about by downcasting, as upstream plugins
//! check `a.GetKind()`. Handlers run the mutating phase themselves and hand the validating phase to the registry's
//! store as an [`AdmissionCheck`](crate::registry::AdmissionCheck), so that validation runs after the strategy and
//! inside the optimistic update loop, and admission never depends on the store.

mod authorization;
mod chain;
mod config;
mod expressions;
mod matching;
mod mutating_policy;
mod namespace_lifecycle;
mod plugins;
mod policy;
mod reinvocation;
mod resource_quota;
mod typed;
mod webhook;
mod wire;

pub use authorization::AdmissionAuthorizer;
pub use chain::{AnyObject, Attributes, Chain, Operation, Plugin, ValidatingCheck};
pub use mutating_policy::{
    MUTATING_ADMISSION_POLICY, MutatingAdmissionPolicy, MutatingAdmissionPolicyBinding,
    MutatingPolicies,
};
pub use namespace_lifecycle::{NAMESPACE_LIFECYCLE, NamespaceLifecycle};
pub use plugins::{AdmissionOptions, Initializer, Lister, Listers, PluginError, Plugins};
pub use policy::{VALIDATING_ADMISSION_POLICY, ValidatingPolicies};
pub use reinvocation::Reinvocation;
pub use resource_quota::{RESOURCE_QUOTA, ResourceQuotaAdmission, object_count_name};
pub use typed::{KindCheck, check};
pub use webhook::{
    MUTATING_ADMISSION_WEBHOOK, MutatingWebhooks, VALIDATING_ADMISSION_WEBHOOK, ValidatingWebhooks,
};
pub use wire::WireCodec;
