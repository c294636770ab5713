//! `ValidatingAdmissionPolicy` (upstream's plugin of that name): the policies and bindings a cluster
//! administrator made in the core cluster validate this server's resources too, with CEL.
//!
//! Policies and bindings are watched from the core cluster. A binding applies its policy to a request when the
//! policy's `matchConstraints` and the binding's `matchResources` both match (rules, `matchPolicy`, namespace
//! and object selectors, exclusions). The policy's `matchConditions`, `variables`, `validations` and
//! `auditAnnotations` are evaluated over `object`, `oldObject`, `request`, `params` (each parameter object the
//! binding's `paramRef` selects, read from the core cluster) and `namespaceObject`, in the version the policy
//! matched. A failed validation follows the binding's `validationActions` (Deny, Warn, Audit); an evaluation error
//! follows the policy's `failurePolicy`. Every expression sees `authorizer` and `authorizer.requestResource` too
//! (see [`authorization`](super::authorization)), and variables hold any CEL value (a decision included). Texts are
//! upstream's. Not yet: type checking of expressions against the served schema.

use super::VALIDATING_ADMISSION_POLICY;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apiserver_cel::{Activation, Value as Cel};
use async_trait::async_trait;
use futures::FutureExt;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ParamKind, ParamRef,
    RuleWithOperations, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicySpec, Variable,
};
use kube::api::DynamicObject;
use kube::discovery::{ApiResource, Scope};
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::{Value, json};

use super::authorization::{self, AdmissionAuthorizer, RequestAuthorization};
use super::expressions::Programs;
use super::webhook::review::{Invocation, request};
use super::{AnyObject, Attributes, Initializer, Plugin, PluginError, WireCodec, matching};
use crate::cluster::CoreCluster;
use crate::meta::reason;
use crate::registry::{ApiError, Cause};

/// How long a request waits for the policies to be loaded (upstream's `WaitForReady`).
const READY_WAIT: Duration = Duration::from_secs(10);
/// Upstream's runtime cost budget for one policy evaluation.
const COST_BUDGET: u64 = 10_000_000;
/// The audit annotation listing failed validations under the `Audit` action.
const VALIDATION_FAILURE_ANNOTATION: &str = "validation.policy.admission.k8s.io/validation_failure";
/// Upstream's cap on the failures in that annotation.
const MAX_VALIDATION_FAILURES: usize = 50;

/// See the module documentation.
pub struct ValidatingPolicies {
    policies: Store<ValidatingAdmissionPolicy>,
    bindings: Store<ValidatingAdmissionPolicyBinding>,
    shared: PolicyCluster,
}

/// What validating and mutating admission policies share: the core cluster (namespaces, parameters), compiled
/// expressions, and the matching and parameter rules.
pub(super) struct PolicyCluster {
    pub cluster: CoreCluster,
    pub programs: Programs,
    /// The server's metrics (`apiserver_*_admission_policy_check_*`).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// The server's authorizer, for the `authorizer` variable.
    pub authorizer: Option<Arc<dyn AdmissionAuthorizer>>,
    /// Parameter kinds resolved through the core cluster's discovery, each with its informer (upstream reads
    /// parameters from informers too: no request to the core cluster per admission).
    param_resources: Mutex<HashMap<(String, String), ParamSource>>,
}

/// Where a parameter kind's objects come from.
#[derive(Clone)]
struct ParamSource {
    resource: ApiResource,
    namespaced: bool,
    objects: Store<DynamicObject>,
}

/// A refusal found while evaluating one binding.
struct Denial {
    policy: String,
    binding: Option<String>,
    message: String,
    reason: &'static str,
}

impl ValidatingPolicies {
    /// Builds the plugin and starts watching policies and bindings in the core cluster.
    pub fn build(initializer: &Initializer) -> Result<Arc<dyn Plugin>, PluginError> {
        let cluster = initializer.core_cluster.clone().ok_or_else(|| {
            PluginError(format!(
                "{VALIDATING_ADMISSION_POLICY}: needs the core cluster (--kubeconfig, or running in a pod)"
            ))
        })?;
        Ok(Arc::new(ValidatingPolicies {
            policies: cluster.informer(VALIDATING_ADMISSION_POLICY),
            bindings: cluster.informer("ValidatingAdmissionPolicyBinding"),
            shared: PolicyCluster::new(cluster, initializer),
        }))
    }
}

/// Upstream's `error_type` label of a policy check: `compile_error`, `out_of_budget`, else `invalid_error` (a
/// failed validation included, as upstream labels it).
pub(super) fn error_type(message: &str) -> &'static str {
    if message.starts_with("compilation") {
        "compile_error"
    } else if message.contains("cost limit exceeded") || message.contains("out of cost budget") {
        "out_of_budget"
    } else {
        "invalid_error"
    }
}

impl PolicyCluster {
    pub fn new(cluster: CoreCluster, initializer: &Initializer) -> PolicyCluster {
        PolicyCluster {
            cluster,
            metrics: initializer.metrics.clone(),
            authorizer: initializer.authorizer.clone(),
            programs: Programs::default(),
            param_resources: Mutex::new(HashMap::new()),
        }
    }

    /// The bindings (in name order, as upstream evaluates them) and the policies by name, once the informers of
    /// both (and of the namespaces) are loaded; `None` when there is no binding.
    #[allow(clippy::type_complexity)]
    pub async fn configuration<P, B>(
        &self,
        policies: &Store<P>,
        bindings: &Store<B>,
        attributes: &Attributes,
    ) -> Result<Option<(Vec<Arc<B>>, HashMap<String, Arc<P>>)>, ApiError>
    where
        P: kube::Resource<DynamicType = ()> + Clone + 'static,
        B: kube::Resource<DynamicType = ()> + Clone + 'static,
    {
        let loaded = || {
            policies.wait_until_ready().now_or_never().is_some()
                && bindings.wait_until_ready().now_or_never().is_some()
        };
        self.ready(loaded, attributes).await?;
        let mut bound = bindings.state();
        if bound.is_empty() {
            return Ok(None);
        }
        bound.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
        let by_name = policies
            .state()
            .into_iter()
            .map(|p| (p.meta().name.clone().unwrap_or_default(), p))
            .collect();
        Ok(Some((bound, by_name)))
    }

    /// Waits (at most upstream's 10 s) until `loaded` says the policies and bindings are, and the namespaces.
    async fn ready(
        &self,
        loaded: impl Fn() -> bool,
        attributes: &Attributes,
    ) -> Result<(), ApiError> {
        let synced = || loaded() && self.cluster.namespaces_synced();
        if synced() {
            return Ok(());
        }
        let wait = async {
            while !synced() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::time::timeout(READY_WAIT, wait)
            .await
            .map_err(|_| attributes.forbidden("not yet ready to handle request"))
    }

    /// The version `resources` matches the request in, or `None`; `rules_optional`: a binding's match
    /// resources without rules do not constrain (a policy's always do).
    pub async fn matches(
        &self,
        resources: &MatchResources,
        rules_optional: bool,
        attributes: &Attributes,
        served: &[&'static str],
        labels: [Option<&BTreeMap<String, String>>; 2],
    ) -> Result<Option<String>, ApiError> {
        if !matching::namespace_selector_matches(
            &self.cluster,
            &resources.namespace_selector,
            attributes,
        )
        .await?
            || !matching::object_selector_matches(&resources.object_selector, &labels)?
        {
            return Ok(None);
        }
        let equivalent = resources.match_policy.as_deref() != Some("Exact");
        let named = |rules: &Option<Vec<NamedRuleWithOperations>>| -> Vec<RuleWithOperations> {
            rules
                .iter()
                .flatten()
                .filter(|r| {
                    let names = r.resource_names.as_deref().unwrap_or_default();
                    names.is_empty() || names.contains(&attributes.name)
                })
                .map(|r| RuleWithOperations {
                    api_groups: r.api_groups.clone(),
                    api_versions: r.api_versions.clone(),
                    operations: r.operations.clone(),
                    resources: r.resources.clone(),
                    scope: r.scope.clone(),
                })
                .collect()
        };
        let excluded = named(&resources.exclude_resource_rules);
        if matching::matched_version(&excluded, equivalent, attributes, served).is_some() {
            return Ok(None);
        }
        if rules_optional && resources.resource_rules.as_ref().is_none_or(Vec::is_empty) {
            return Ok(Some(attributes.version.clone()));
        }
        Ok(matching::matched_version(
            &named(&resources.resource_rules),
            equivalent,
            attributes,
            served,
        ))
    }

    /// The version a binding applies its policy in, or `None`: the policy's `matchConstraints` and the binding's
    /// `matchResources` (when it has them) must both match.
    pub async fn binding_matches(
        &self,
        constraints: Option<&MatchResources>,
        binding_resources: Option<&MatchResources>,
        attributes: &Attributes,
        served: &[&'static str],
        labels: [Option<&BTreeMap<String, String>>; 2],
    ) -> Result<Option<String>, ApiError> {
        let no_constraints = MatchResources::default();
        let constraints = constraints.unwrap_or(&no_constraints);
        let Some(version) = self
            .matches(constraints, false, attributes, served, labels)
            .await?
        else {
            return Ok(None);
        };
        if let Some(resources) = binding_resources
            && self
                .matches(resources, true, attributes, served, labels)
                .await?
                .is_none()
        {
            return Ok(None);
        }
        Ok(Some(version))
    }

    /// The parameter kind's resource, whether it is namespaced, and its informer (started on first use), from the
    /// core cluster's discovery.
    async fn param_source(&self, kind: &ParamKind) -> Result<ParamSource, String> {
        let api_version = kind.api_version.clone().unwrap_or_default();
        let kind_name = kind.kind.clone().unwrap_or_default();
        let key = (api_version.clone(), kind_name.clone());
        if let Some(found) = self
            .param_resources
            .lock()
            .ok()
            .and_then(|c| c.get(&key).cloned())
        {
            return Ok(found);
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", &api_version));
        let gvk = kube::core::GroupVersionKind::gvk(group, version, &kind_name);
        let (resource, capabilities) = kube::discovery::pinned_kind(&self.cluster.client(), &gvk)
            .await
            .map_err(|_| format!("paramKind kind `{api_version}, Kind={kind_name}` not known"))?;
        let mut cache = self
            .param_resources
            .lock()
            .map_err(|_| "parameter informers unavailable".to_string())?;
        let source = cache.entry(key).or_insert_with(|| ParamSource {
            objects: self
                .cluster
                .dynamic_informer(&resource, &format!("{kind_name} parameters")),
            namespaced: capabilities.scope == Scope::Namespaced,
            resource,
        });
        Ok(source.clone())
    }

    /// The parameter objects a binding selects (upstream's `CollectParams`), from the kind's informer: `[None]`
    /// when the policy takes no parameters; an error is a configuration error.
    pub async fn params(
        &self,
        kind: Option<&ParamKind>,
        reference: Option<&ParamRef>,
        namespace: &str,
    ) -> Result<Vec<Option<Value>>, String> {
        let (Some(kind), Some(reference)) = (kind, reference) else {
            return Ok(vec![None]);
        };
        let source = self.param_source(kind).await?;
        if tokio::time::timeout(READY_WAIT, source.objects.wait_until_ready())
            .await
            .is_err()
        {
            return Err(format!(
                "paramKind kind `{}, Kind={}` not yet synced to use for admission",
                kind.api_version.as_deref().unwrap_or_default(),
                kind.kind.as_deref().unwrap_or_default()
            ));
        }
        let ref_namespace = reference.namespace.as_deref().unwrap_or_default();
        let namespace = if source.namespaced {
            if !ref_namespace.is_empty() {
                Some(ref_namespace)
            } else if !namespace.is_empty() {
                Some(namespace)
            } else {
                return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
            }
        } else if !ref_namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        } else {
            None
        };
        let name = reference.name.as_deref().unwrap_or_default();
        let found: Vec<Arc<DynamicObject>> = match (name, &reference.selector) {
            ("", None) => return Err("one of name or selector must be provided".into()),
            (name, Some(_)) if !name.is_empty() => {
                return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
            }
            (name, None) => {
                let mut object =
                    ObjectRef::<DynamicObject>::new_with(name, source.resource.clone());
                if let Some(namespace) = namespace {
                    object = object.within(namespace);
                }
                source.objects.get(&object).into_iter().collect()
            }
            (_, Some(selector)) => {
                let selector =
                    matching::selector(&Some(selector.clone())).map_err(|e| e.to_string())?;
                let mut found: Vec<Arc<DynamicObject>> = source
                    .objects
                    .state()
                    .into_iter()
                    .filter(|o| namespace.is_none() || o.metadata.namespace.as_deref() == namespace)
                    .filter(|o| {
                        let empty = BTreeMap::new();
                        let labels = o.metadata.labels.as_ref().unwrap_or(&empty);
                        selector.as_ref().is_none_or(|s| s.matches(labels))
                    })
                    .collect();
                found.sort_by(|a, b| {
                    (&a.metadata.namespace, &a.metadata.name)
                        .cmp(&(&b.metadata.namespace, &b.metadata.name))
                });
                found
            }
        };
        if found.is_empty() && reference.parameter_not_found_action.as_deref() == Some("Deny") {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            );
        }
        found
            .into_iter()
            .map(|o| {
                let mut value = serde_json::to_value(&*o).map_err(|e| e.to_string())?;
                // The informer's objects carry no type; parameters show theirs, as upstream's wrapped params.
                value["apiVersion"] = source.resource.api_version.clone().into();
                value["kind"] = source.resource.kind.clone().into();
                Ok(Some(value))
            })
            .collect()
    }

    /// The authorization checks of one request, when the server has an authorizer.
    pub fn authorization(&self, attributes: &Attributes) -> Option<RequestAuthorization> {
        RequestAuthorization::new(self.authorizer.as_ref(), attributes.authorization_target())
    }

    /// Evaluates `expression` over `variables`; a non-bool result is an error for validations and conditions.
    pub async fn evaluate(
        &self,
        expression: &str,
        activation: &Activation,
        budget: &mut u64,
        authorization: Option<&RequestAuthorization>,
    ) -> Result<Cel, String> {
        let program = self.programs.get(expression)?;
        Self::run(&program, expression, activation, budget, authorization).await
    }

    /// Runs a compiled `program` (of `expression`) within what is left of `budget`.
    pub async fn run(
        program: &apiserver_cel::Program,
        expression: &str,
        activation: &Activation,
        budget: &mut u64,
        authorization: Option<&RequestAuthorization>,
    ) -> Result<Cel, String> {
        let evaluation = authorization::evaluate(program, activation, *budget, authorization).await;
        *budget = budget.saturating_sub(evaluation.cost);
        evaluation
            .result
            .map_err(|e| format!("expression '{expression}' resulted in error: {e}"))
    }
}

/// The variables every expression sees; `variables` holds the policy's variables evaluated so far.
pub(super) fn activation(
    base: &[(&str, &Value)],
    variables: &BTreeMap<String, Cel>,
    authorization: Option<&RequestAuthorization>,
) -> Activation {
    let mut activation = Activation::new();
    for (name, value) in base {
        activation = activation.bind_json(name, value);
    }
    if let Some(authorization) = authorization {
        activation = authorization.bind(activation);
    }
    if variables.is_empty() {
        return activation;
    }
    activation.bind_map(
        "variables",
        variables.iter().map(|(k, v)| (k.clone(), v.clone())),
    )
}

/// Whether any expression of the policy names `variable` (a variable no expression names is not converted to
/// CEL at all: the request and namespace objects are large and most policies read only `object`).
fn names_variable(spec: &ValidatingAdmissionPolicySpec, variable: &str) -> bool {
    let own = spec
        .validations
        .iter()
        .flatten()
        .flat_map(|v| std::iter::once(v.expression.as_str()).chain(v.message_expression.as_deref()))
        .chain(
            spec.audit_annotations
                .iter()
                .flatten()
                .map(|a| a.value_expression.as_str()),
        );
    mentions(&spec.match_conditions, &spec.variables, own, variable)
}

/// Whether any of a policy's expressions (its match conditions, its variables, and `own`, those of its kind)
/// names `variable`.
pub(super) fn mentions<'a>(
    conditions: &'a Option<Vec<MatchCondition>>,
    variables: &'a Option<Vec<Variable>>,
    own: impl Iterator<Item = &'a str>,
    variable: &str,
) -> bool {
    conditions
        .iter()
        .flatten()
        .map(|c| c.expression.as_str())
        .chain(variables.iter().flatten().map(|v| v.expression.as_str()))
        .chain(own)
        .any(|e| e.contains(variable))
}

/// Upstream's `reasonToCode`.
pub(super) fn reason_code(reason: &str) -> (u16, &'static str) {
    match reason {
        reason::FORBIDDEN => (403, reason::FORBIDDEN),
        reason::UNAUTHORIZED => (401, reason::UNAUTHORIZED),
        reason::REQUEST_ENTITY_TOO_LARGE => (413, reason::REQUEST_ENTITY_TOO_LARGE),
        _ => (422, reason::INVALID),
    }
}

/// The Namespace as `namespaceObject` shows it (upstream's `CreateNamespaceObject`: no managed fields).
pub(super) fn namespace_object(namespace: &k8s_openapi::api::core::v1::Namespace) -> Value {
    let mut value = serde_json::to_value(namespace).unwrap_or(Value::Null);
    if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("managedFields");
    }
    value
}

/// What evaluating one binding with one parameter gave.
#[derive(Default)]
struct Outcome {
    /// Failed validations and errors under `failurePolicy: Fail`: (message, reason).
    failed: Vec<(String, &'static str)>,
    /// Errors ignored under `failurePolicy: Ignore`.
    ignored: Vec<String>,
    annotations: Vec<(String, String)>,
}

impl ValidatingPolicies {
    /// Evaluates a policy's conditions, variables, validations and audit annotations for one parameter.
    async fn evaluate_policy(
        &self,
        policy: &ValidatingAdmissionPolicy,
        base: &[(&str, &Value)],
        authorization: Option<&RequestAuthorization>,
    ) -> Outcome {
        let Some(spec) = policy.spec.as_ref() else {
            return Outcome::default();
        };
        let fail_open = spec.failure_policy.as_deref() == Some("Ignore");
        let name = policy.metadata.name.clone().unwrap_or_default();
        let mut outcome = Outcome::default();
        let mut budget = COST_BUDGET;
        let error = |outcome: &mut Outcome, message: String| {
            if fail_open {
                outcome.ignored.push(message);
            } else {
                outcome.failed.push((message, reason::INVALID));
            }
        };
        let mut variables = BTreeMap::new();
        for condition in spec.match_conditions.iter().flatten() {
            let bound = activation(base, &variables, authorization);
            let evaluated =
                self.shared
                    .evaluate(&condition.expression, &bound, &mut budget, authorization);
            match evaluated.await {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => return outcome,
                Ok(_) => {
                    error(
                        &mut outcome,
                        format!(
                            "expression '{}' resulted in error: no matching overload",
                            condition.expression
                        ),
                    );
                    return outcome;
                }
                Err(e) => {
                    error(&mut outcome, e);
                    return outcome;
                }
            }
        }
        for variable in spec.variables.iter().flatten() {
            // A variable that fails is left out: an expression using it fails in turn.
            let bound = activation(base, &variables, authorization);
            let evaluated =
                self.shared
                    .evaluate(&variable.expression, &bound, &mut budget, authorization);
            if let Ok(value) = evaluated.await {
                variables.insert(variable.name.clone(), value);
            }
        }
        let activation = activation(base, &variables, authorization);
        for validation in spec.validations.iter().flatten() {
            let evaluated = self.shared.evaluate(
                &validation.expression,
                &activation,
                &mut budget,
                authorization,
            );
            match evaluated.await {
                Ok(Cel::Bool(true)) => {}
                Ok(Cel::Bool(false)) => {
                    let mut from_expression = None;
                    if let Some(e) = validation.message_expression.as_deref() {
                        let message =
                            self.shared
                                .evaluate(e, &activation, &mut budget, authorization);
                        if let Ok(Cel::String(s)) = message.await {
                            let s = s.trim().to_string();
                            from_expression =
                                (!s.is_empty() && !s.contains('\n') && s.len() <= 5 * 1024)
                                    .then_some(s);
                        }
                    }
                    let message = from_expression
                        .or_else(|| {
                            validation
                                .message
                                .as_deref()
                                .map(str::trim)
                                .filter(|m| !m.is_empty())
                                .map(String::from)
                        })
                        .unwrap_or_else(|| {
                            format!("failed expression: {}", validation.expression.trim())
                        });
                    let (_, reason) =
                        reason_code(validation.reason.as_deref().unwrap_or(reason::INVALID));
                    outcome.failed.push((message, reason));
                }
                Ok(_) => error(
                    &mut outcome,
                    format!(
                        "expression '{}' resulted in error: no matching overload",
                        validation.expression
                    ),
                ),
                Err(e) => error(&mut outcome, e),
            }
        }
        for annotation in spec.audit_annotations.iter().flatten() {
            let evaluated = self.shared.evaluate(
                &annotation.value_expression,
                &activation,
                &mut budget,
                authorization,
            );
            match evaluated.await {
                Ok(Cel::String(value)) => outcome
                    .annotations
                    .push((format!("{name}/{}", annotation.key), value.to_string())),
                Ok(Cel::Null) => {}
                Ok(_) => error(
                    &mut outcome,
                    format!(
                        "valueExpression '{}' resulted in unsupported return type",
                        annotation.value_expression
                    ),
                ),
                Err(e) => error(&mut outcome, e),
            }
        }
        outcome
    }
}

#[async_trait]
impl Plugin for ValidatingPolicies {
    async fn validate(
        &self,
        attributes: &Attributes,
        object: Option<&AnyObject>,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        let configuration = self
            .shared
            .configuration(&self.policies, &self.bindings, attributes);
        let Some((bindings, policies)) = configuration.await? else {
            return Ok(());
        };
        let wire: &Arc<dyn WireCodec> = attributes
            .wire
            .as_ref()
            .ok_or_else(|| ApiError::internal("admission policies: the request has no codec"))?;
        let served = wire.versions();
        let labels = [
            object.and_then(|o| wire.metadata(o)).map(|m| &m.labels),
            old.and_then(|o| wire.metadata(o)).map(|m| &m.labels),
        ];
        // Per version: the object, the old object and (when an expression names it) the AdmissionRequest.
        let mut versioned: BTreeMap<String, (Value, Value, Option<Value>)> = BTreeMap::new();
        let mut namespace: Option<Value> = None;
        let mut denials = Vec::new();
        let mut audit_failures = Vec::new();
        let (no_binding, no_policy) = Default::default();
        let authorization = self.shared.authorization(attributes);
        for binding in &bindings {
            let spec = binding.spec.as_ref().unwrap_or(&no_binding);
            let Some(policy) = spec.policy_name.as_deref().and_then(|n| policies.get(n)) else {
                continue;
            };
            let policy_spec = policy.spec.as_ref().unwrap_or(&no_policy);
            let matched = self.shared.binding_matches(
                policy_spec.match_constraints.as_ref(),
                spec.match_resources.as_ref(),
                attributes,
                &served,
                labels,
            );
            let Some(version) = matched.await? else {
                continue;
            };
            let binding_name = binding.metadata.name.clone().unwrap_or_default();
            let policy_name = policy.metadata.name.clone().unwrap_or_default();
            let fail_open = policy_spec.failure_policy.as_deref() == Some("Ignore");
            let params = match self
                .shared
                .params(
                    policy_spec.param_kind.as_ref(),
                    spec.param_ref.as_ref(),
                    &attributes.namespace,
                )
                .await
            {
                Ok(params) => params,
                Err(e) if fail_open => {
                    tracing::debug!(policy = %policy_name, "policy configuration error ignored: {e}");
                    continue;
                }
                Err(e) => {
                    denials.push(Denial {
                        policy: policy_name,
                        binding: Some(binding_name),
                        message: format!("failed to configure binding: {e}"),
                        reason: reason::INVALID,
                    });
                    continue;
                }
            };
            let uses = |variable: &str| names_variable(policy_spec, variable);
            if !versioned.contains_key(&version) {
                let encode = |o: Option<&AnyObject>| -> Result<Value, ApiError> {
                    Ok(o.map(|o| wire.encode(o, &version))
                        .transpose()?
                        .unwrap_or(Value::Null))
                };
                versioned.insert(version.clone(), (encode(object)?, encode(old)?, None));
            }
            if let Some((new, previous, admission_request @ None)) = versioned.get_mut(&version)
                && uses("request")
            {
                let invocation = Invocation {
                    attributes,
                    version: &version,
                    object: Some(&*new).filter(|v| !v.is_null()),
                    old_object: Some(&*previous).filter(|v| !v.is_null()),
                };
                *admission_request = Some(request(&invocation, "", "v1")["request"].take());
            }
            if namespace.is_none() && uses("namespaceObject") {
                namespace = Some(if attributes.namespace.is_empty() {
                    Value::Null
                } else {
                    namespace_object(
                        &*matching::namespace(&self.shared.cluster, &attributes.namespace).await?,
                    )
                });
            }
            let (new, previous, admission_request) = &versioned[&version];
            let admission_request = admission_request.as_ref().unwrap_or(&Value::Null);
            let namespace_value = namespace.as_ref().unwrap_or(&Value::Null);
            let actions = spec.validation_actions.clone().unwrap_or_default();
            for param in &params {
                let param = param.clone().unwrap_or(Value::Null);
                let base: Vec<(&str, &Value)> = [
                    ("object", new),
                    ("oldObject", previous),
                    ("request", admission_request),
                    ("params", &param),
                    ("namespaceObject", namespace_value),
                ]
                .into_iter()
                .filter(|(name, _)| uses(name))
                .collect();
                let started = std::time::Instant::now();
                let outcome = self
                    .evaluate_policy(policy, &base, authorization.as_ref())
                    .await;
                let elapsed = started.elapsed();
                let observe = |message: &str, action: &str| {
                    if let Some(metrics) = &self.shared.metrics {
                        metrics.validating_policy_check(
                            &policy_name,
                            &binding_name,
                            error_type(message),
                            action,
                            elapsed,
                        );
                    }
                };
                for message in &outcome.ignored {
                    observe(message, "allow");
                }
                for (message, _) in &outcome.failed {
                    for action in &actions {
                        observe(message, &action.to_lowercase());
                    }
                }
                for (key, value) in &outcome.annotations {
                    let _ = attributes.annotate(key, value);
                }
                for (index, (message, reason)) in outcome.failed.into_iter().enumerate() {
                    for action in &actions {
                        match action.as_str() {
                            "Deny" => denials.push(Denial {
                                policy: policy_name.clone(),
                                binding: Some(binding_name.clone()),
                                message: message.clone(),
                                reason,
                            }),
                            "Warn" => attributes.warn(&format!(
                                "Validation failed for ValidatingAdmissionPolicy '{policy_name}' with binding '{binding_name}': {message}"
                            )),
                            "Audit" => audit_failures.push(json!({
                                "message": message,
                                "policy": policy_name,
                                "binding": binding_name,
                                "expressionIndex": index,
                                "validationActions": actions,
                            })),
                            _ => {}
                        }
                    }
                }
            }
        }
        if !audit_failures.is_empty() {
            audit_failures.truncate(MAX_VALIDATION_FAILURES);
            let _ = attributes.annotate(
                VALIDATION_FAILURE_ANNOTATION,
                &Value::Array(audit_failures).to_string(),
            );
        }
        let Some(denial) = denials.into_iter().next() else {
            return Ok(());
        };
        let message = match &denial.binding {
            Some(binding) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{binding}' denied request: {}",
                denial.policy, denial.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                denial.policy, denial.message
            ),
        };
        let mut error = attributes.forbidden(&message);
        let (code, reason) = reason_code(denial.reason);
        error.code = code;
        error.reason = reason;
        if let Some(details) = error.details.as_mut() {
            details.causes.push(Cause {
                message,
                ..Cause::default()
            });
        }
        Err(error)
    }
}
