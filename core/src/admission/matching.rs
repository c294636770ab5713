//! Which requests an admission webhook or policy applies to, and in which version (upstream's `rules`,
//! `namespace` and `object` predicates and policy `matching`): rules on operation, group, version,
//! resource/subresource and scope; `matchPolicy: Equivalent` trying the resource's other served versions;
//! namespace and object selectors.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector as WireSelector;

use crate::admission::Attributes;
use crate::registry::ApiError;
use crate::storage::{LabelSelector, Operator, Requirement, SelectorError};

/// The group, version and resource a rule is matched against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Gvr<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
}

fn exact_or_wildcard(items: &Option<Vec<String>>, requested: &str) -> bool {
    items
        .iter()
        .flatten()
        .any(|item| item == "*" || item == requested)
}

/// Upstream's `rules.Matcher.Matches` for one rule.
pub(crate) fn rule_matches(rule: &RuleWithOperations, attributes: &Attributes, gvr: &Gvr) -> bool {
    let namespace_resource = gvr.group.is_empty() && gvr.resource == "namespaces";
    let scope = match rule.scope.as_deref() {
        None | Some("*") => true,
        Some("Namespaced") => !namespace_resource && !attributes.namespace.is_empty(),
        Some("Cluster") => namespace_resource || attributes.namespace.is_empty(),
        Some(_) => false,
    };
    let operation = rule
        .operations
        .iter()
        .flatten()
        .any(|op| op == "*" || op == attributes.operation.as_str());
    let resource = rule.resources.iter().flatten().any(|item| {
        let (resource, subresource) = item.split_once('/').unwrap_or((item, ""));
        (resource == "*" || resource == gvr.resource)
            && (subresource == "*" || subresource == attributes.subresource)
    });
    scope
        && operation
        && exact_or_wildcard(&rule.api_groups, gvr.group)
        && exact_or_wildcard(&rule.api_versions, gvr.version)
        && resource
}

/// The version a webhook is called in, or `None` when none of its rules match: the request's own version, or with
/// `matchPolicy: Equivalent` the first other served version of the resource a rule names (upstream converts the
/// request to that version).
pub(crate) fn matched_version(
    rules: &[RuleWithOperations],
    equivalent: bool,
    attributes: &Attributes,
    served: &[&'static str],
) -> Option<String> {
    let group = attributes.resource.group.as_str();
    let resource = attributes.resource.resource.as_str();
    let own = Gvr {
        group,
        version: &attributes.version,
        resource,
    };
    if rules.iter().any(|r| rule_matches(r, attributes, &own)) {
        return Some(attributes.version.clone());
    }
    if !equivalent {
        return None;
    }
    for rule in rules {
        for version in served.iter().filter(|v| **v != attributes.version) {
            let equivalent = Gvr {
                group,
                version,
                resource,
            };
            if rule_matches(rule, attributes, &equivalent) {
                return Some(version.to_string());
            }
        }
    }
    None
}

/// A `metav1.LabelSelector` as a selector (upstream's `LabelSelectorAsSelector`): `None` when it is absent or
/// empty (matches everything).
pub(crate) fn selector(
    wire: &Option<WireSelector>,
) -> Result<Option<LabelSelector>, SelectorError> {
    let Some(wire) = wire else {
        return Ok(None);
    };
    let mut selector = LabelSelector::everything();
    for (key, value) in wire.match_labels.iter().flatten() {
        selector = selector.with_requirement(Requirement::new(
            key,
            Operator::Equals,
            vec![value.clone()],
        )?);
    }
    for expression in wire.match_expressions.iter().flatten() {
        let operator = match expression.operator.as_str() {
            "In" => Operator::In,
            "NotIn" => Operator::NotIn,
            "Exists" => Operator::Exists,
            "DoesNotExist" => Operator::DoesNotExist,
            other => {
                return Err(SelectorError(format!(
                    "{other:?} is not a valid label selector operator"
                )));
            }
        };
        let values = expression.values.clone().unwrap_or_default();
        selector = selector.with_requirement(Requirement::new(&expression.key, operator, values)?);
    }
    Ok((!selector.is_empty()).then_some(selector))
}

/// Whether the object selector matches the new or the old object's labels (upstream `MatchObjectSelector`).
pub(crate) fn object_selector_matches(
    object_selector: &Option<WireSelector>,
    labels: &[Option<&BTreeMap<String, String>>],
) -> Result<bool, ApiError> {
    match selector(object_selector).map_err(ApiError::internal)? {
        None => Ok(true),
        Some(selector) => Ok(labels.iter().flatten().any(|l| selector.matches(l))),
    }
}

/// The request's namespace from the core cluster's informer, else looked up live (upstream's
/// `GetNamespaceLabels`); 404 when it does not exist.
pub(crate) async fn namespace(
    cluster: &crate::cluster::CoreCluster,
    name: &str,
) -> Result<Arc<Namespace>, ApiError> {
    if let Some(namespace) = cluster.namespace(name) {
        return Ok(namespace);
    }
    match kube::Api::<Namespace>::all(cluster.client())
        .get_opt(name)
        .await
    {
        Ok(Some(namespace)) => Ok(Arc::new(namespace)),
        Ok(None) => Err(ApiError::not_found(
            &crate::runtime::GroupResource {
                group: String::new(),
                resource: "namespaces".into(),
            },
            name,
        )),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// Whether a namespace selector admits the request: cluster-scoped requests match any selector (upstream
/// `MatchNamespaceSelector`).
pub(crate) async fn namespace_selector_matches(
    cluster: &crate::cluster::CoreCluster,
    namespace_selector: &Option<WireSelector>,
    attributes: &Attributes,
) -> Result<bool, ApiError> {
    if attributes.namespace.is_empty() {
        return Ok(true);
    }
    match selector(namespace_selector).map_err(ApiError::internal)? {
        None => Ok(true),
        Some(selector) => {
            let namespace = namespace(cluster, &attributes.namespace).await?;
            let labels = namespace.metadata.labels.clone().unwrap_or_default();
            Ok(selector.matches(&labels))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use crate::auth::User;
    use crate::runtime::{GroupResource, GroupVersionKind};

    fn attributes(operation: Operation, namespace: &str, subresource: &str) -> Attributes {
        let mut a = Attributes {
            operation,
            kind: GroupVersionKind::default(),
            resource: GroupResource {
                group: "restaurant.example.com".into(),
                resource: "pizzas".into(),
            },
            version: "v1alpha1".into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: "p".into(),
            dry_run: false,
            user: User::anonymous(),
            audit: None,
            warnings: None,
            wire: None,
            field_manager: String::new(),
            reinvocation: Default::default(),
        };
        a.subresource = subresource.into();
        a
    }

    fn rule(
        groups: &[&str],
        versions: &[&str],
        resources: &[&str],
        ops: &[&str],
    ) -> RuleWithOperations {
        let owned = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        RuleWithOperations {
            api_groups: owned(groups),
            api_versions: owned(versions),
            resources: owned(resources),
            operations: owned(ops),
            scope: None,
        }
    }

    #[test]
    fn rules_match_as_upstream() {
        let create = attributes(Operation::Create, "default", "");
        let gvr = Gvr {
            group: "restaurant.example.com",
            version: "v1alpha1",
            resource: "pizzas",
        };
        let cases = [
            (rule(&["*"], &["*"], &["*"], &["*"]), true),
            (
                rule(
                    &["restaurant.example.com"],
                    &["v1alpha1"],
                    &["pizzas"],
                    &["CREATE"],
                ),
                true,
            ),
            (
                rule(
                    &["restaurant.example.com"],
                    &["v1alpha1"],
                    &["pizzas"],
                    &["UPDATE"],
                ),
                false,
            ),
            (rule(&["other"], &["*"], &["*"], &["*"]), false),
            (rule(&["*"], &["v1"], &["*"], &["*"]), false),
            (rule(&["*"], &["*"], &["toppings"], &["*"]), false),
            // `*` alone does not match subresources, `*/*` does; `pizzas/status` only the subresource.
            (rule(&["*"], &["*"], &["pizzas/status"], &["*"]), false),
            (rule(&["*"], &["*"], &["*/*"], &["*"]), true),
        ];
        for (rule, want) in cases {
            assert_eq!(rule_matches(&rule, &create, &gvr), want, "{rule:?}");
        }
        let status = attributes(Operation::Update, "default", "status");
        assert!(!rule_matches(
            &rule(&["*"], &["*"], &["*"], &["*"]),
            &status,
            &gvr
        ));
        assert!(rule_matches(
            &rule(&["*"], &["*"], &["*/*"], &["*"]),
            &status,
            &gvr
        ));
        assert!(rule_matches(
            &rule(&["*"], &["*"], &["pizzas/status"], &["*"]),
            &status,
            &gvr
        ));
        assert!(rule_matches(
            &rule(&["*"], &["*"], &["*/status"], &["*"]),
            &status,
            &gvr
        ));

        let mut namespaced = rule(&["*"], &["*"], &["*"], &["*"]);
        namespaced.scope = Some("Namespaced".into());
        let mut cluster = namespaced.clone();
        cluster.scope = Some("Cluster".into());
        assert!(rule_matches(&namespaced, &create, &gvr));
        assert!(!rule_matches(&cluster, &create, &gvr));
        let cluster_scoped = attributes(Operation::Create, "", "");
        assert!(!rule_matches(&namespaced, &cluster_scoped, &gvr));
        assert!(rule_matches(&cluster, &cluster_scoped, &gvr));
    }

    #[test]
    fn equivalent_versions() {
        let create = attributes(Operation::Create, "default", "");
        let served = ["v1alpha1", "v1beta1"];
        let beta_only = vec![rule(&["*"], &["v1beta1"], &["pizzas"], &["*"])];
        assert_eq!(
            matched_version(&beta_only, true, &create, &served).as_deref(),
            Some("v1beta1")
        );
        assert_eq!(matched_version(&beta_only, false, &create, &served), None);
        let both = vec![rule(&["*"], &["*"], &["pizzas"], &["*"])];
        assert_eq!(
            matched_version(&both, true, &create, &served).as_deref(),
            Some("v1alpha1")
        );
    }

    #[test]
    fn selectors() {
        let wire = WireSelector {
            match_labels: Some([("a".to_string(), "1".to_string())].into()),
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "b".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["x".into()]),
                },
            ]),
        };
        let s = selector(&Some(wire)).unwrap().unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(s.matches(&labels(&[("a", "1")])));
        assert!(s.matches(&labels(&[("a", "1"), ("b", "y")])));
        assert!(!s.matches(&labels(&[("a", "1"), ("b", "x")])));
        assert!(!s.matches(&labels(&[("a", "2")])));
        assert!(selector(&Some(WireSelector::default())).unwrap().is_none());
        let bad = WireSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "b".into(),
                    operator: "Near".into(),
                    values: None,
                },
            ]),
            ..WireSelector::default()
        };
        assert!(selector(&Some(bad)).is_err());
    }
}
