//! `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` (upstream's plugins of those names): the webhook
//! configurations a cluster administrator made in the core cluster apply to this server's resources too.
//!
//! Configurations are watched from the core cluster (informers); a request calls the webhooks whose rules,
//! namespace and object selectors match it, each in the version it asked for (`matchPolicy: Equivalent` converts
//! the request). Mutating webhooks run one after the other and their JSON patches are applied to the object in
//! that version (then converted back, with defaults); when one changed the object the mutating chain runs once more
//! ([`Reinvocation`](super::Reinvocation)), in which `reinvocationPolicy: IfNeeded` webhooks called before a later
//! change run again. Validating webhooks run in parallel. `failurePolicy`, `timeoutSeconds` and
//! `sideEffects` on dry runs, warnings, audit annotations and the error texts are upstream's.

mod client;
mod conditions;
mod hook;
pub(super) mod review;

use super::{MUTATING_ADMISSION_WEBHOOK, VALIDATING_ADMISSION_WEBHOOK};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::FutureExt;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::runtime::reflector::Store;
use serde_json::{Value, json};

use super::{AnyObject, Attributes, Initializer, Plugin, PluginError, matching};
use crate::cluster::CoreCluster;
use crate::registry::ApiError;
use crate::runtime::json_patch::JsonPatch;
use client::Clients;
use conditions::Conditions;
use hook::Hook;
use review::Invocation;

/// How long a request waits for the configurations to be loaded (upstream's `WaitForReady`: 10 s).
const READY_WAIT: Duration = Duration::from_secs(10);

/// Upstream's audit annotation prefixes.
const MUTATION_ANNOTATION: &str = "mutation.webhook.admission.k8s.io/";
const MUTATION_FAILED_OPEN: &str = "failed-open.mutation.webhook.admission.k8s.io/";
const VALIDATION_FAILED_OPEN: &str = "failed-open.validating.webhook.admission.k8s.io/";

/// A configuration kind watched from the core cluster.
trait Configuration:
    kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The webhooks of this configuration, in order.
    fn hooks(&self) -> Vec<Hook>;
}

impl Configuration for MutatingWebhookConfiguration {
    fn hooks(&self) -> Vec<Hook> {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        self.webhooks
            .iter()
            .flatten()
            .map(|w| Hook::mutating(name, w))
            .collect()
    }
}

impl Configuration for ValidatingWebhookConfiguration {
    fn hooks(&self) -> Vec<Hook> {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        self.webhooks
            .iter()
            .flatten()
            .map(|w| Hook::validating(name, w))
            .collect()
    }
}

/// What both plugins share: the configurations' informer, the core cluster (namespace labels, services) and the
/// webhook clients.
struct Webhooks<C: Configuration> {
    configurations: Store<C>,
    cluster: CoreCluster,
    clients: Clients,
    conditions: Conditions,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    /// `admit` or `validating`: the plugin's type in upstream's metric labels.
    kind: &'static str,
}

/// Why a webhook call did not allow the request.
enum Failure {
    /// The call failed (upstream's `ErrCallingWebhook`): `failurePolicy` decides.
    Calling(String),
    /// The webhook (or the dry-run rule) refused the request.
    Rejected(ApiError),
}

impl<C: Configuration> Webhooks<C> {
    fn start(
        initializer: &Initializer,
        plugin: &str,
        kind: &'static str,
    ) -> Result<Self, PluginError> {
        let cluster = initializer.core_cluster.clone().ok_or_else(|| {
            PluginError(format!(
                "{plugin}: needs the core cluster (--kubeconfig, or running in a pod)"
            ))
        })?;
        let auth = super::config::webhook_kubeconfig(initializer.configuration(plugin))
            .map_err(|e| PluginError(format!("{plugin}: {}", e.0)))?;
        let configurations = cluster.informer::<C>(plugin);
        Ok(Webhooks {
            configurations,
            clients: Clients::new(cluster.clone(), auth),
            conditions: Conditions::new(initializer.authorizer.clone()),
            metrics: initializer.metrics.clone(),
            kind,
            cluster,
        })
    }

    /// Waits (at most [`READY_WAIT`]) until the configurations and namespaces are loaded.
    async fn ready(&self, attributes: &Attributes) -> Result<(), ApiError> {
        let loaded = async {
            let _ = self.configurations.wait_until_ready().await;
            while !self.cluster.namespaces_synced() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let ready = self
            .configurations
            .wait_until_ready()
            .now_or_never()
            .is_some()
            && self.cluster.namespaces_synced();
        if ready || tokio::time::timeout(READY_WAIT, loaded).await.is_ok() {
            Ok(())
        } else {
            Err(attributes.forbidden("not yet ready to handle request"))
        }
    }

    /// Every webhook, configurations in name order (upstream sorts them so that the order is stable).
    fn hooks(&self) -> Vec<Hook> {
        let mut configurations = self.configurations.state();
        configurations.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
        configurations.iter().flat_map(|c| c.hooks()).collect()
    }

    /// The version `hook` is called in, or `None` when it does not apply to the request (upstream's
    /// `ShouldCallHook`).
    async fn should_call(
        &self,
        hook: &Hook,
        attributes: &Attributes,
        served: &[&'static str],
        labels: [Option<&BTreeMap<String, String>>; 2],
    ) -> Result<Option<String>, ApiError> {
        let Some(version) =
            matching::matched_version(&hook.rules, hook.equivalent, attributes, served)
        else {
            return Ok(None);
        };
        if !matching::namespace_selector_matches(
            &self.cluster,
            &hook.namespace_selector,
            attributes,
        )
        .await?
        {
            return Ok(None);
        }
        if !matching::object_selector_matches(&hook.object_selector, &labels)? {
            return Ok(None);
        }
        Ok(Some(version))
    }

    /// Whether the webhook's `matchConditions` hold for the request as it would be sent.
    async fn conditions_match(
        &self,
        hook: &Hook,
        invocation: &Invocation<'_>,
    ) -> Result<bool, ApiError> {
        if hook.match_conditions.is_empty() {
            return Ok(true);
        }
        let review = review::request(invocation, "", "v1");
        self.conditions
            .matches(hook, &review["request"], invocation.attributes)
            .await
    }

    /// Calls one webhook and checks its answer, counted and timed as upstream's `ObserveWebhook`.
    async fn call(
        &self,
        hook: &Hook,
        invocation: &Invocation<'_>,
        mutating: bool,
    ) -> Result<review::Verdict, Failure> {
        let started = std::time::Instant::now();
        let result = self.call_once(hook, invocation, mutating).await;
        if let Some(metrics) = &self.metrics {
            let operation = invocation.attributes.operation.as_str();
            let (code, rejected, error_type) = match &result {
                Ok(_) => (200, false, None),
                // Upstream reports a failed call as 503 (`error calling webhook`).
                Err(Failure::Calling(_)) => (503, !hook.fail_open, Some("calling_webhook_error")),
                Err(Failure::Rejected(refusal)) => (refusal.code, true, Some("no_error")),
            };
            metrics.admission_webhook(
                &hook.name,
                self.kind,
                operation,
                code,
                rejected,
                error_type,
                started.elapsed(),
            );
            if matches!(result, Err(Failure::Calling(_))) && hook.fail_open {
                metrics.admission_webhook_fail_open(&hook.name, self.kind);
            }
        }
        result
    }

    async fn call_once(
        &self,
        hook: &Hook,
        invocation: &Invocation<'_>,
        mutating: bool,
    ) -> Result<review::Verdict, Failure> {
        let attributes = invocation.attributes;
        if attributes.dry_run && !hook.allows_dry_run() {
            return Err(Failure::Rejected(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name
            ))));
        }
        let review_version = review::review_version(&hook.review_versions)
            .map_err(|e| Failure::Calling(format!("could not create admission objects: {e}")))?;
        let uid = uuid::Uuid::new_v4().to_string();
        let body = serde_json::to_vec(&review::request(invocation, &uid, review_version))
            .map_err(|e| Failure::Calling(format!("could not create admission objects: {e}")))?;
        let answer = self
            .clients
            .post(
                &hook.client,
                body,
                Duration::from_secs(hook.timeout_seconds),
            )
            .await
            .map_err(|e| Failure::Calling(format!("failed to call webhook: {}", e.0)))?;
        let verdict = review::verify(&answer, &uid, review_version, mutating, &hook.name)
            .map_err(|e| Failure::Calling(format!("received invalid webhook response: {e}")))?;
        for (key, value) in &verdict.audit_annotations {
            let _ = attributes.annotate(&format!("{}/{key}", hook.name), value);
        }
        for warning in &verdict.warnings {
            attributes.warn(warning);
        }
        match &verdict.refusal {
            Some(refusal) => Err(Failure::Rejected(refusal.clone())),
            None => Ok(verdict),
        }
    }
}

/// A failed call under `failurePolicy: Fail` (upstream: 500 `Internal error occurred: failed calling webhook
/// "<name>": <why>`).
fn calling_error(hook: &Hook, why: &str) -> ApiError {
    ApiError::internal(format!("failed calling webhook {:?}: {why}", hook.name))
}

fn wire(attributes: &Attributes) -> Result<&Arc<dyn super::WireCodec>, ApiError> {
    attributes
        .wire
        .as_ref()
        .ok_or_else(|| ApiError::internal("admission webhooks: the request has no codec"))
}

/// See the module documentation.
pub struct ValidatingWebhooks(Webhooks<ValidatingWebhookConfiguration>);

impl ValidatingWebhooks {
    /// Builds the plugin and starts watching `ValidatingWebhookConfiguration`s in the core cluster.
    pub fn build(initializer: &Initializer) -> Result<Arc<dyn Plugin>, PluginError> {
        Ok(Arc::new(ValidatingWebhooks(Webhooks::start(
            initializer,
            VALIDATING_ADMISSION_WEBHOOK,
            "validating",
        )?)))
    }
}

#[async_trait]
impl Plugin for ValidatingWebhooks {
    async fn validate(
        &self,
        attributes: &Attributes,
        object: Option<&AnyObject>,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        let webhooks = &self.0;
        webhooks.ready(attributes).await?;
        let hooks = webhooks.hooks();
        if hooks.is_empty() {
            return Ok(());
        }
        let wire = wire(attributes)?;
        let served = wire.versions();
        let labels = [
            object.and_then(|o| wire.metadata(o)).map(|m| &m.labels),
            old.and_then(|o| wire.metadata(o)).map(|m| &m.labels),
        ];
        let mut relevant = Vec::new();
        for hook in hooks {
            if let Some(version) = webhooks
                .should_call(&hook, attributes, &served, labels)
                .await?
            {
                relevant.push((hook, version));
            }
        }
        if relevant.is_empty() {
            return Ok(());
        }
        // The objects in each version asked for, converted once.
        let mut versioned: BTreeMap<&str, (Option<Value>, Option<Value>)> = BTreeMap::new();
        for (_, version) in &relevant {
            if !versioned.contains_key(version.as_str()) {
                let encode = |o: Option<&AnyObject>| o.map(|o| wire.encode(o, version)).transpose();
                versioned.insert(version, (encode(object)?, encode(old)?));
            }
        }
        let invocation = |version: &'_ str| {
            let (object, old_object) = &versioned[version];
            Invocation {
                attributes,
                version: "",
                object: object.as_ref(),
                old_object: old_object.as_ref(),
            }
        };
        let mut called = Vec::new();
        for (hook, version) in &relevant {
            let invocation = Invocation {
                version,
                ..invocation(version)
            };
            if webhooks.conditions_match(hook, &invocation).await? {
                called.push((hook, invocation));
            }
        }
        let relevant: Vec<&Hook> = called.iter().map(|(hook, _)| *hook).collect();
        let calls = called
            .iter()
            .map(|(hook, invocation)| webhooks.call(hook, invocation, false));
        let results = futures::future::join_all(calls).await;
        let mut errors = Vec::new();
        for (index, (hook, result)) in relevant.into_iter().zip(results).enumerate() {
            match result {
                Ok(_) => {}
                Err(Failure::Calling(why)) if hook.fail_open => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing open: {why}");
                    let key = format!("{VALIDATION_FAILED_OPEN}round_0_index_{index}");
                    let _ = attributes.annotate(&key, &hook.name);
                }
                Err(Failure::Calling(why)) => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing closed: {why}");
                    errors.push(calling_error(hook, &why));
                }
                Err(Failure::Rejected(refusal)) => errors.push(refusal),
            }
        }
        match errors.into_iter().next() {
            Some(first) => Err(first),
            None => Ok(()),
        }
    }
}

/// See the module documentation.
pub struct MutatingWebhooks(Webhooks<MutatingWebhookConfiguration>);

impl MutatingWebhooks {
    /// Builds the plugin and starts watching `MutatingWebhookConfiguration`s in the core cluster.
    pub fn build(initializer: &Initializer) -> Result<Arc<dyn Plugin>, PluginError> {
        Ok(Arc::new(MutatingWebhooks(Webhooks::start(
            initializer,
            MUTATING_ADMISSION_WEBHOOK,
            "admit",
        )?)))
    }
}

/// The object being mutated, in the version of the last webhook called.
struct Versioned {
    version: String,
    value: Value,
}

impl MutatingWebhooks {
    /// One pass over the webhooks: all of them in the chain's first pass; in its second (reinvocation) pass only
    /// the `IfNeeded` ones called before a later change (upstream's `webhookReinvokeContext`).
    async fn round(
        &self,
        hooks: &[Hook],
        attributes: &Attributes,
        object: &mut AnyObject,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        let webhooks = &self.0;
        let wire = wire(attributes)?;
        let served = wire.versions();
        let reinvocation = &attributes.reinvocation;
        let is_reinvoke = reinvocation.is_reinvoke();
        let round = usize::from(is_reinvoke);
        reinvocation.begin(MUTATING_ADMISSION_WEBHOOK, wire.as_ref(), object)?;
        let mut old_versioned: BTreeMap<String, Option<Value>> = BTreeMap::new();
        let mut current: Option<Versioned> = None;
        for (index, hook) in hooks.iter().enumerate() {
            let key = format!("{}/{}", hook.configuration, hook.name);
            if is_reinvoke
                && !reinvocation.with(MUTATING_ADMISSION_WEBHOOK, |r| r.should_reinvoke(&key))
            {
                continue;
            }
            let labels = [
                wire.metadata(object).map(|m| m.labels.clone()),
                old.and_then(|o| wire.metadata(o)).map(|m| m.labels.clone()),
            ];
            let Some(version) = webhooks
                .should_call(
                    hook,
                    attributes,
                    &served,
                    [labels[0].as_ref(), labels[1].as_ref()],
                )
                .await?
            else {
                continue;
            };
            let value = match current.take() {
                Some(c) if c.version == version => c.value,
                _ => wire.encode(object, &version)?,
            };
            if !old_versioned.contains_key(&version) {
                let encoded = old.map(|o| wire.encode(o, &version)).transpose()?;
                old_versioned.insert(version.clone(), encoded);
            }
            let invocation = Invocation {
                attributes,
                version: &version,
                object: Some(&value),
                old_object: old_versioned[&version].as_ref(),
            };
            if !webhooks.conditions_match(hook, &invocation).await? {
                current = Some(Versioned { version, value });
                continue;
            }
            let result = webhooks.call(hook, &invocation, true).await;
            let mut changed = false;
            let outcome = match result {
                Ok(verdict) => match verdict.patch {
                    Some(patch) => {
                        let patched = apply_patch(hook, &patch, &value)?;
                        let patched_version = patched_version(&patched, &value, &served)?;
                        wire.decode_into(&patched, patched_version, object)?;
                        // The object as it now reads in this version, defaults applied.
                        let now = wire.encode(object, &version)?;
                        changed = now != value;
                        current = Some(Versioned {
                            version: version.clone(),
                            value: now,
                        });
                        Ok(())
                    }
                    None => {
                        current = Some(Versioned { version, value });
                        Ok(())
                    }
                },
                Err(failure) => Err(failure),
            };
            let annotation = |prefix: &str| format!("{prefix}round_{round}_index_{index}");
            let _ = attributes.annotate(
                &annotation(MUTATION_ANNOTATION),
                &json!({"configuration": hook.configuration, "webhook": hook.name, "mutated": changed})
                    .to_string(),
            );
            reinvocation.with(MUTATING_ADMISSION_WEBHOOK, |r| {
                if changed {
                    r.require_reinvoking_previously_invoked();
                }
                if hook.reinvoke {
                    r.invoked(&key);
                }
            });
            if changed {
                reinvocation.set_should_reinvoke();
            }
            match outcome {
                Ok(()) => {}
                Err(Failure::Calling(why)) if hook.fail_open => {
                    tracing::warn!(webhook = %hook.name, "failed calling webhook, failing open: {why}");
                    let _ = attributes.annotate(&annotation(MUTATION_FAILED_OPEN), &hook.name);
                }
                Err(Failure::Calling(why)) => return Err(calling_error(hook, &why)),
                Err(Failure::Rejected(refusal)) => return Err(refusal),
            }
        }
        reinvocation.end(MUTATING_ADMISSION_WEBHOOK, wire.as_ref(), object)
    }
}

/// Applies a webhook's JSON patch to the object as the webhook saw it (upstream: 500 on a patch that does not
/// decode or apply).
fn apply_patch(hook: &Hook, patch: &[u8], value: &Value) -> Result<Value, ApiError> {
    let patch = JsonPatch::decode(patch).map_err(|e| {
        calling_error(
            hook,
            &format!("received undecodable patch in webhook response: {e}"),
        )
    })?;
    let mut patched = value.clone();
    patch.apply(&mut patched).map_err(ApiError::internal)?;
    Ok(patched)
}

/// The version a patched object is read from. A patch may move it to another served version of the same group
/// (it is converted from there, as upstream converts a webhook's answer); one that makes it something else is
/// refused with kube-apiserver 1.36's answers for a custom resource: 500 for a missing or mistyped `kind` or
/// `apiVersion`, another group or an unserved version (the decoder's and the converter's errors), 422 for another
/// kind. Before, the patched `kind` and `apiVersion` were ignored.
fn patched_version<'v>(
    patched: &Value,
    original: &Value,
    served: &[&'v str],
) -> Result<&'v str, ApiError> {
    for field in ["apiVersion", "kind"] {
        let go_type = match patched.get(field) {
            None | Some(Value::Null | Value::String(_)) => continue,
            Some(Value::Number(_)) => "number",
            Some(Value::Bool(_)) => "bool",
            Some(Value::Array(_)) => "array",
            Some(Value::Object(_)) => "object",
        };
        return Err(ApiError::internal(format!(
            "couldn't get version/kind; json parse error: json: cannot unmarshal {go_type} into Go struct field .{field} of type string"
        )));
    }
    let text = |v: &'_ Value, field: &str| {
        v.get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (text(patched, "apiVersion"), text(patched, "kind"));
    for (value, field) in [(&kind, "Kind"), (&api_version, "apiVersion")] {
        if value.is_empty() {
            return Err(ApiError::internal(format!(
                "Object '{field}' is missing in '{patched}'"
            )));
        }
    }
    let (original_version, original_kind) = (text(original, "apiVersion"), text(original, "kind"));
    let group_of = |gv: &str| {
        gv.rsplit_once('/')
            .map(|(g, _)| g.to_string())
            .unwrap_or_default()
    };
    let (group, version) = match api_version.rsplit_once('/') {
        Some((g, v)) => (g.to_string(), v),
        None => (String::new(), api_version.as_str()),
    };
    if group != group_of(&original_version) {
        return Err(ApiError::new(
            500,
            "",
            format!(
                "{group}/{version}, Kind={kind} is unstructured and is not suitable for converting to \"{original_version}\""
            ),
        ));
    }
    let Some(version) = served.iter().copied().find(|v| *v == version) else {
        return Err(ApiError::new(
            500,
            "",
            format!("request to convert CR from an invalid group/version: {api_version}"),
        ));
    };
    if kind != original_kind {
        let name = original
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let error = crate::validation::FieldError::invalid(
            crate::validation::Path::new("kind"),
            kind.as_str(),
            &format!("must be {original_kind}"),
        );
        return Err(ApiError::invalid(
            &crate::runtime::GroupKind { group, kind },
            name,
            &vec![error].into(),
        ));
    }
    Ok(version)
}

#[async_trait]
impl Plugin for MutatingWebhooks {
    async fn admit(
        &self,
        attributes: &Attributes,
        object: &mut AnyObject,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        self.0.ready(attributes).await?;
        let hooks = self.0.hooks();
        if hooks.is_empty() {
            return Ok(());
        }
        self.round(&hooks, attributes, object, old).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A webhook's patch of `kind` or `apiVersion` was dropped without a word; kube-apiserver 1.36 answers these
    /// for a custom resource (measured with a mutating webhook on a CRD).
    #[test]
    fn a_patch_may_not_change_what_the_object_is() {
        let original = json!({
            "apiVersion": "restaurant.example.com/v1beta1", "kind": "Pizza",
            "metadata": {"name": "p"}, "spec": {}
        });
        let served = ["v1alpha1", "v1beta1"];
        let patched = |field: &str, value: Value| {
            let mut p = original.clone();
            match value {
                Value::Null => p.as_object_mut().unwrap().remove(field),
                v => p.as_object_mut().unwrap().insert(field.into(), v),
            };
            p
        };
        let err = |p: &Value| patched_version(p, &original, &served).unwrap_err();

        assert_eq!(
            patched_version(&original, &original, &served).unwrap(),
            "v1beta1"
        );
        let other_version = patched("apiVersion", json!("restaurant.example.com/v1alpha1"));
        assert_eq!(
            patched_version(&other_version, &original, &served).unwrap(),
            "v1alpha1"
        );

        let e = err(&patched("kind", json!("Oven")));
        assert_eq!((e.code, e.reason), (422, "Invalid"));
        assert_eq!(
            e.message,
            "Oven.restaurant.example.com \"p\" is invalid: kind: Invalid value: \"Oven\": must be Pizza"
        );
        let e = err(&patched("apiVersion", json!("other.com/v1")));
        assert_eq!((e.code, e.reason), (500, ""));
        assert_eq!(
            e.message,
            "other.com/v1, Kind=Pizza is unstructured and is not suitable for converting to \"restaurant.example.com/v1beta1\""
        );
        let e = err(&patched("apiVersion", json!("restaurant.example.com/v9")));
        assert_eq!(
            e.message,
            "request to convert CR from an invalid group/version: restaurant.example.com/v9"
        );
        let e = err(&patched("kind", Value::Null));
        assert_eq!((e.code, e.reason), (500, "InternalError"));
        assert_eq!(
            e.message,
            "Internal error occurred: Object 'Kind' is missing in '{\"apiVersion\":\"restaurant.example.com/v1beta1\",\"metadata\":{\"name\":\"p\"},\"spec\":{}}'"
        );
        let e = err(&patched("kind", json!(7)));
        assert_eq!(
            e.message,
            "Internal error occurred: couldn't get version/kind; json parse error: json: cannot unmarshal number into Go struct field .kind of type string"
        );
    }
}
