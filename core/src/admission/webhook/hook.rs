//! One webhook of a configuration, mutating or validating, as the dispatcher needs it.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MutatingWebhook, RuleWithOperations, ValidatingWebhook, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as WireSelector;

/// A webhook (upstream's `WebhookAccessor`).
#[derive(Clone, Debug)]
pub(super) struct Hook {
    pub configuration: String,
    pub name: String,
    pub client: WebhookClientConfig,
    pub rules: Vec<RuleWithOperations>,
    /// `Fail` unless `Ignore`.
    pub fail_open: bool,
    /// `Equivalent` (the default) rather than `Exact`.
    pub equivalent: bool,
    pub namespace_selector: Option<WireSelector>,
    pub object_selector: Option<WireSelector>,
    pub side_effects: String,
    /// Seconds; upstream's v1 default is 10.
    pub timeout_seconds: u64,
    pub review_versions: Vec<String>,
    pub match_conditions: Vec<MatchCondition>,
    /// `reinvocationPolicy: IfNeeded` (mutating only).
    pub reinvoke: bool,
}

/// Upstream's default `timeoutSeconds` in admissionregistration v1.
const DEFAULT_TIMEOUT_SECONDS: u64 = 10;

impl Hook {
    #[allow(clippy::too_many_arguments)]
    fn new(
        configuration: &str,
        name: &str,
        client: &WebhookClientConfig,
        rules: &Option<Vec<RuleWithOperations>>,
        failure_policy: &Option<String>,
        match_policy: &Option<String>,
        selectors: (&Option<WireSelector>, &Option<WireSelector>),
        side_effects: &str,
        timeout_seconds: Option<i32>,
        review_versions: &[String],
        match_conditions: &Option<Vec<MatchCondition>>,
    ) -> Hook {
        Hook {
            configuration: configuration.to_string(),
            name: name.to_string(),
            client: client.clone(),
            rules: rules.clone().unwrap_or_default(),
            fail_open: failure_policy.as_deref() == Some("Ignore"),
            equivalent: match_policy.as_deref() != Some("Exact"),
            namespace_selector: selectors.0.clone(),
            object_selector: selectors.1.clone(),
            side_effects: side_effects.to_string(),
            timeout_seconds: timeout_seconds
                .and_then(|t| u64::try_from(t).ok())
                .unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            review_versions: review_versions.to_vec(),
            match_conditions: match_conditions.clone().unwrap_or_default(),
            reinvoke: false,
        }
    }

    pub fn mutating(configuration: &str, w: &MutatingWebhook) -> Hook {
        let mut hook = Hook::new(
            configuration,
            &w.name,
            &w.client_config,
            &w.rules,
            &w.failure_policy,
            &w.match_policy,
            (&w.namespace_selector, &w.object_selector),
            &w.side_effects,
            w.timeout_seconds,
            &w.admission_review_versions,
            &w.match_conditions,
        );
        hook.reinvoke = w.reinvocation_policy.as_deref() == Some("IfNeeded");
        hook
    }

    pub fn validating(configuration: &str, w: &ValidatingWebhook) -> Hook {
        Hook::new(
            configuration,
            &w.name,
            &w.client_config,
            &w.rules,
            &w.failure_policy,
            &w.match_policy,
            (&w.namespace_selector, &w.object_selector),
            &w.side_effects,
            w.timeout_seconds,
            &w.admission_review_versions,
            &w.match_conditions,
        )
    }

    /// Whether the webhook may be called on a dry run (upstream: side effects `None` or `NoneOnDryRun`).
    pub fn allows_dry_run(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }
}
