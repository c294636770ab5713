//! `MutatingAdmissionPolicy` (upstream's plugin of that name, admissionregistration.k8s.io/v1 since 1.36): the
//! mutating policies and bindings a cluster administrator made in the core cluster mutate this server's resources
//! too, with CEL, before the mutating webhooks run.
//!
//! Matching, parameters, `matchConditions` and `variables` are those of
//! [`ValidatingPolicies`](super::ValidatingPolicies). Each mutation of a matching policy is evaluated in order over
//! the object as the previous ones left it, in the version the policy matched: a `JSONPatch` expression gives a list
//! of `JSONPatch{op, path, from, value}` applied as RFC 6902 (a failed `test` leaves the object as it was), an
//! `ApplyConfiguration` expression gives an `Object{...}` merged into the object as server-side apply merges (map
//! lists by key, other lists and scalars replaced), without taking field ownership. The result is decoded back with
//! the version's defaults. A failure follows the policy's `failurePolicy`, with upstream's text (`policy 'p' with
//! binding 'b' denied request: ...`); an apply configuration may not set atomic lists, maps or structs. A change
//! makes the mutating chain run once more ([`Reinvocation`](super::Reinvocation)), in which policies with
//! `reinvocationPolicy: IfNeeded` that ran before a later change run again. Expressions see `authorizer` and
//! `authorizer.requestResource` as validating policies' do.

use super::MUTATING_ADMISSION_POLICY;
use std::borrow::Cow;
use std::sync::Arc;

use apiserver_cel::Value as Cel;
use async_trait::async_trait;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, ParamKind, ParamRef, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::Store;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::authorization::RequestAuthorization;
use super::policy::{PolicyCluster, activation, error_type, mentions, namespace_object};
use super::webhook::review::{Invocation, request};
use super::{AnyObject, Attributes, Initializer, Plugin, PluginError, WireCodec, matching};
use crate::fieldmanager::{Atom, ListKind, TypeRef, merge};
use crate::meta::reason;
use crate::registry::{ApiError, Cause};
use crate::runtime::json_patch::JsonPatch;

/// Upstream's runtime cost budget for one policy evaluation.
const COST_BUDGET: u64 = 10_000_000;

/// admissionregistration.k8s.io/v1 `MutatingAdmissionPolicy` (k8s-openapi has no v1 type of it yet).
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct MutatingAdmissionPolicy {
    /// The policy's name and other `metadata`.
    pub metadata: ObjectMeta,
    /// What the policy matches and how it mutates.
    #[serde(default)]
    pub spec: MutatingAdmissionPolicySpec,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MutatingAdmissionPolicySpec {
    pub param_kind: Option<ParamKind>,
    pub match_constraints: Option<MatchResources>,
    pub variables: Option<Vec<Variable>>,
    pub mutations: Option<Vec<Mutation>>,
    pub failure_policy: Option<String>,
    pub match_conditions: Option<Vec<MatchCondition>>,
    pub reinvocation_policy: Option<String>,
}

/// One mutation: `patchType` `ApplyConfiguration` or `JSONPatch`, with its expression.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Mutation {
    pub patch_type: String,
    pub apply_configuration: Option<Expression>,
    pub json_patch: Option<Expression>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct Expression {
    pub expression: String,
}

/// admissionregistration.k8s.io/v1 `MutatingAdmissionPolicyBinding`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct MutatingAdmissionPolicyBinding {
    /// The binding's name and other `metadata`.
    pub metadata: ObjectMeta,
    /// Which policy it binds, to which resources, with which parameters.
    #[serde(default)]
    pub spec: MutatingAdmissionPolicyBindingSpec,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MutatingAdmissionPolicyBindingSpec {
    pub policy_name: String,
    pub param_ref: Option<ParamRef>,
    pub match_resources: Option<MatchResources>,
}

macro_rules! cluster_resource {
    ($type:ty, $kind:literal, $plural:literal) => {
        impl kube::Resource for $type {
            type DynamicType = ();
            type Scope = kube::core::ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                "admissionregistration.k8s.io".into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                "v1".into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}
cluster_resource!(
    MutatingAdmissionPolicy,
    "MutatingAdmissionPolicy",
    "mutatingadmissionpolicies"
);
cluster_resource!(
    MutatingAdmissionPolicyBinding,
    "MutatingAdmissionPolicyBinding",
    "mutatingadmissionpolicybindings"
);

/// See the module documentation.
pub struct MutatingPolicies {
    policies: Store<MutatingAdmissionPolicy>,
    bindings: Store<MutatingAdmissionPolicyBinding>,
    shared: PolicyCluster,
}

impl MutatingPolicies {
    /// Builds the plugin and starts watching policies and bindings in the core cluster.
    pub fn build(initializer: &Initializer) -> Result<Arc<dyn Plugin>, PluginError> {
        let cluster = initializer.core_cluster.clone().ok_or_else(|| {
            PluginError(format!(
                "{MUTATING_ADMISSION_POLICY}: needs the core cluster (--kubeconfig, or running in a pod)"
            ))
        })?;
        Ok(Arc::new(MutatingPolicies {
            policies: cluster.informer(MUTATING_ADMISSION_POLICY),
            bindings: cluster.informer("MutatingAdmissionPolicyBinding"),
            shared: PolicyCluster::new(cluster, initializer),
        }))
    }

    /// Runs one policy's conditions, variables and mutations over `object` (in its matched version) for one
    /// parameter; `Ok(false)` when a condition did not hold.
    async fn mutate(
        &self,
        names: (&str, &str),
        spec: &MutatingAdmissionPolicySpec,
        base: &[(&str, &Value)],
        object: &mut Value,
        schema: TypeRef<'_>,
        authorization: Option<&RequestAuthorization>,
    ) -> Result<bool, String> {
        let mut budget = COST_BUDGET;
        let mut variables = std::collections::BTreeMap::new();
        for condition in spec.match_conditions.iter().flatten() {
            let activation = bind(base, object, &variables, authorization);
            let evaluated = self.shared.evaluate(
                &condition.expression,
                &activation,
                &mut budget,
                authorization,
            );
            match evaluated.await? {
                Cel::Bool(true) => {}
                Cel::Bool(false) => return Ok(false),
                _ => {
                    return Err(format!(
                        "expression '{}' resulted in error: no matching overload",
                        condition.expression
                    ));
                }
            }
        }
        for variable in spec.variables.iter().flatten() {
            // A variable that fails is left out: an expression using it fails in turn.
            let activation = bind(base, object, &variables, authorization);
            let evaluated = self.shared.evaluate(
                &variable.expression,
                &activation,
                &mut budget,
                authorization,
            );
            if let Ok(value) = evaluated.await {
                variables.insert(variable.name.clone(), value);
            }
        }
        // A failing mutation is reported; the others still apply, as upstream's. Each is measured.
        let mut first_error = None;
        for mutation in spec.mutations.iter().flatten() {
            let started = std::time::Instant::now();
            let activation = bind(base, object, &variables, authorization);
            let applied = self
                .apply_mutation(
                    mutation,
                    &activation,
                    object,
                    schema,
                    &mut budget,
                    authorization,
                )
                .await;
            let kind = match &applied {
                Ok(()) => "no_error",
                Err(e) => error_type(e),
            };
            if let Some(metrics) = &self.shared.metrics {
                metrics.mutating_policy_check(names.0, names.1, kind, started.elapsed());
            }
            if let Err(e) = applied {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(true),
        }
    }

    /// Evaluates one mutation (over `activation`, which binds `object` as it is now) and applies its patch.
    async fn apply_mutation(
        &self,
        mutation: &Mutation,
        activation: &apiserver_cel::Activation,
        object: &mut Value,
        schema: TypeRef<'_>,
        budget: &mut u64,
        authorization: Option<&RequestAuthorization>,
    ) -> Result<(), String> {
        let (expression, json_patch) = match mutation.patch_type.as_str() {
            "JSONPatch" => (mutation.json_patch.as_ref(), true),
            "ApplyConfiguration" => (mutation.apply_configuration.as_ref(), false),
            other => return Err(format!("unsupported patch type: {other:?}")),
        };
        let expression = expression
            .map(|e| e.expression.as_str())
            .unwrap_or_default();
        let program = self.shared.programs.get_mutation(expression)?;
        let result =
            PolicyCluster::run(&program, expression, activation, budget, authorization).await?;
        let result = apiserver_cel::value_to_json(&result).map_err(|e| e.to_string())?;
        if json_patch {
            return apply_json_patch(object, result);
        }
        let Value::Object(_) = result else {
            return Err(format!(
                "unsupported return type from ApplyConfiguration expression: {result}"
            ));
        };
        let atomics = atomics(&result, schema, String::new());
        if !atomics.is_empty() {
            return Err(format!(
                "error applying patch: invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: {}",
                atomics.join(", ")
            ));
        }
        *object = merge(Some(object), Some(&result), schema)
            .map_err(|e| format!("error applying patch: failed to merge patch: {e}"))?
            .unwrap_or(Value::Null);
        Ok(())
    }
}

/// The variables a policy's expressions see: `base` (those they name), `object` as it is now, and `variables`.
fn bind(
    base: &[(&str, &Value)],
    object: &Value,
    variables: &std::collections::BTreeMap<String, Cel>,
    authorization: Option<&RequestAuthorization>,
) -> apiserver_cel::Activation {
    let mut all = base.to_vec();
    all.push(("object", object));
    activation(&all, variables, authorization)
}

/// The paths where an apply configuration sets an atomic list, map or struct (upstream's `findAtomics`): setting
/// one would drop whatever the configuration does not repeat, which a policy author rarely means.
fn atomics(value: &Value, ty: TypeRef<'_>, path: String) -> Vec<String> {
    let mut found = Vec::new();
    match (value, ty.atom(Some(value))) {
        (Value::Object(map), Atom::Map { fields, atomic, .. }) => {
            if atomic {
                found.push(path.clone());
            }
            for (key, item) in map {
                if let (field, true) = TypeRef::field(fields, TypeRef::DEDUCED, key) {
                    found.extend(atomics(item, field, format!("{path}.{key}")));
                }
            }
        }
        (Value::Array(list), Atom::List { items, kind }) => {
            if kind == ListKind::Atomic {
                found.push(path.clone());
            }
            for (index, item) in list.iter().enumerate() {
                found.extend(atomics(item, items, format!("{path}[{index}]")));
            }
        }
        _ => {}
    }
    found
}

/// Applies a `JSONPatch` expression's result: a list of operations; a failed `test` leaves `object` as it was.
fn apply_json_patch(object: &mut Value, operations: Value) -> Result<(), String> {
    let Value::Array(operations) = operations else {
        return Err("type mismatch: JSONPatchType.expression should evaluate to array".to_string());
    };
    let operations = operations
        .into_iter()
        .map(|op| match op {
            Value::Object(op) => Ok(op),
            other => Err(format!(
                "type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got {other}"
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut patched = object.clone();
    match JsonPatch::from_operations(operations).apply(&mut patched) {
        Ok(()) => {
            *object = patched;
            Ok(())
        }
        Err(e) if e.failed_test() => Ok(()),
        Err(e) => Err(format!("JSON Patch: {e}")),
    }
}

/// Whether any expression of the policy names `variable` (see `ValidatingPolicies`).
fn names_variable(spec: &MutatingAdmissionPolicySpec, variable: &str) -> bool {
    let own = spec.mutations.iter().flatten().filter_map(|m| {
        m.json_patch
            .as_ref()
            .or(m.apply_configuration.as_ref())
            .map(|e| e.expression.as_str())
    });
    mentions(&spec.match_conditions, &spec.variables, own, variable)
}

#[async_trait]
impl Plugin for MutatingPolicies {
    fn handles(&self, operation: super::Operation) -> bool {
        operation != super::Operation::Delete
    }

    async fn admit(
        &self,
        attributes: &Attributes,
        object: &mut AnyObject,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        let configuration = self
            .shared
            .configuration(&self.policies, &self.bindings, attributes);
        let Some((bindings, policies)) = configuration.await? else {
            return Ok(());
        };
        let wire: Arc<dyn WireCodec> = attributes
            .wire
            .clone()
            .ok_or_else(|| ApiError::internal("admission policies: the request has no codec"))?;
        let served = wire.versions();
        let reinvocation = &attributes.reinvocation;
        let is_reinvoke = reinvocation.is_reinvoke();
        reinvocation.begin(MUTATING_ADMISSION_POLICY, wire.as_ref(), object)?;
        let old_labels = old.and_then(|o| wire.metadata(o)).map(|m| m.labels.clone());
        let mut namespace: Option<Value> = None;
        let mut refusals: Vec<String> = Vec::new();
        let authorization = self.shared.authorization(attributes);
        for binding in &bindings {
            let spec = &binding.spec;
            let Some(policy) = policies.get(&spec.policy_name) else {
                continue;
            };
            let policy_spec = &policy.spec;
            let labels = wire.metadata(object).map(|m| m.labels.clone());
            let matched = self.shared.binding_matches(
                policy_spec.match_constraints.as_ref(),
                spec.match_resources.as_ref(),
                attributes,
                &served,
                [labels.as_ref(), old_labels.as_ref()],
            );
            let Some(version) = matched.await? else {
                continue;
            };
            let binding_name = binding.metadata.name.clone().unwrap_or_default();
            let policy_name = policy.metadata.name.clone().unwrap_or_default();
            let fail_open = policy_spec.failure_policy.as_deref() == Some("Ignore");
            let mut refuse = |message: String| {
                if fail_open {
                    tracing::debug!(policy = %policy_name, "mutating policy error ignored: {message}");
                } else {
                    refusals.push(format!(
                        "policy '{policy_name}' with binding '{binding_name}' denied request: {message}"
                    ));
                }
            };
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
                Err(e) => {
                    refuse(format!("failed to configure binding: {e}"));
                    continue;
                }
            };
            let uses = |variable: &str| names_variable(policy_spec, variable);
            let mut value = wire.encode(object, &version)?;
            let previous = old
                .map(|o| wire.encode(o, &version))
                .transpose()?
                .unwrap_or(Value::Null);
            if namespace.is_none() && uses("namespaceObject") {
                namespace = Some(if attributes.namespace.is_empty() {
                    Value::Null
                } else {
                    namespace_object(
                        &*matching::namespace(&self.shared.cluster, &attributes.namespace).await?,
                    )
                });
            }
            let namespace_value = namespace.clone().unwrap_or(Value::Null);
            let if_needed = policy_spec.reinvocation_policy.as_deref() == Some("IfNeeded");
            for param in &params {
                let param = param.clone().unwrap_or(Value::Null);
                let key = format!(
                    "{policy_name}/{binding_name}/{}/{}",
                    param["metadata"]["namespace"].as_str().unwrap_or_default(),
                    param["metadata"]["name"].as_str().unwrap_or_default()
                );
                if is_reinvoke
                    && !reinvocation.with(MUTATING_ADMISSION_POLICY, |r| r.should_reinvoke(&key))
                {
                    continue;
                }
                let before = value.clone();
                let admission_request = if uses("request") {
                    let invocation = Invocation {
                        attributes,
                        version: &version,
                        object: Some(&value),
                        old_object: Some(&previous).filter(|v| !v.is_null()),
                    };
                    request(&invocation, "", "v1")["request"].take()
                } else {
                    Value::Null
                };
                let base: Vec<(&str, &Value)> = [
                    ("oldObject", &previous),
                    ("request", &admission_request),
                    ("params", &param),
                    ("namespaceObject", &namespace_value),
                ]
                .into_iter()
                .filter(|(name, _)| uses(name))
                .collect();
                let schema = TypeRef(wire.schema(&version));
                // Mutations before a failing one stay applied, as upstream's.
                let names = (policy_name.as_str(), binding_name.as_str());
                let mutated = self.mutate(
                    names,
                    policy_spec,
                    &base,
                    &mut value,
                    schema,
                    authorization.as_ref(),
                );
                if let Err(message) = mutated.await {
                    refuse(message);
                }
                let changed = value != before;
                if changed {
                    wire.decode_into(&value, &version, object)?;
                    value = wire.encode(object, &version)?;
                    reinvocation.set_should_reinvoke();
                }
                reinvocation.with(MUTATING_ADMISSION_POLICY, |r| {
                    if changed {
                        r.require_reinvoking_previously_invoked();
                    }
                    if if_needed {
                        r.invoked(&key);
                    }
                });
            }
        }
        reinvocation.end(MUTATING_ADMISSION_POLICY, wire.as_ref(), object)?;
        let Some(first) = refusals.first().cloned() else {
            return Ok(());
        };
        // Upstream: a Forbidden error whose reason is Invalid, every refusal a cause.
        let mut error = attributes.forbidden(&first);
        error.message = first;
        error.reason = reason::INVALID;
        if let Some(details) = error.details.as_mut() {
            details
                .causes
                .extend(refusals.into_iter().map(|message| Cause {
                    message,
                    ..Cause::default()
                }));
        }
        Err(error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patches_apply_in_order_and_a_failed_test_changes_nothing() {
        let mut object = json!({"metadata": {"labels": {"a": "1"}}});
        apply_json_patch(
            &mut object,
            json!([{"op": "add", "path": "/metadata/labels/b", "value": "2"},
                   {"op": "remove", "path": "/metadata/labels/a"}]),
        )
        .unwrap();
        assert_eq!(object, json!({"metadata": {"labels": {"b": "2"}}}));
        apply_json_patch(
            &mut object,
            json!([{"op": "add", "path": "/metadata/labels/c", "value": "3"},
                   {"op": "test", "path": "/metadata/labels/b", "value": "9"}]),
        )
        .unwrap();
        assert_eq!(object, json!({"metadata": {"labels": {"b": "2"}}}));
        let err = apply_json_patch(
            &mut object,
            json!([{"op": "remove", "path": "/spec/nothing"}]),
        )
        .unwrap_err();
        assert!(err.starts_with("JSON Patch: "), "{err}");
        assert!(apply_json_patch(&mut object, json!({"op": "add"})).is_err());
    }

    #[test]
    fn apply_configurations_may_not_set_atomic_parts() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "finalizers": {"type": "array", "items": {"type": "string"}},
            }},
            "spec": {"type": "object", "properties": {
                "toppings": {"type": "array", "x-kubernetes-list-type": "map",
                             "x-kubernetes-list-map-keys": ["name"],
                             "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                "oven": {"type": "object", "x-kubernetes-map-type": "atomic",
                         "properties": {"size": {"type": "integer"}}},
            }},
        }});
        let ty = TypeRef(Some(&schema));
        let granular =
            json!({"metadata": {"labels": {"a": "b"}}, "spec": {"toppings": [{"name": "x"}]}});
        assert!(atomics(&granular, ty, String::new()).is_empty());
        let atomic = json!({"metadata": {"finalizers": ["f"]}, "spec": {"oven": {"size": 1}}});
        assert_eq!(
            atomics(&atomic, ty, String::new()),
            [".metadata.finalizers", ".spec.oven"]
        );
    }
}
