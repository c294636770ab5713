//! The audit policy (`audit.k8s.io/v1` `Policy`): which requests are recorded, at which level and stages. The
//! first rule that matches a request decides; a request no rule matches is not recorded (upstream's
//! `policy.Checker`).

use std::path::Path;

use serde::Deserialize;

use crate::auth::Attributes;

/// How much of a request an event holds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize,
)]
pub enum Level {
    /// Not recorded.
    #[default]
    None,
    /// Who did what to which object, and the outcome; no bodies.
    Metadata,
    /// Metadata and the request body.
    Request,
    /// Metadata, the request body and the response body.
    RequestResponse,
}

/// When in a request's life an event is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
pub enum Stage {
    /// As soon as the request is authenticated, before anything else.
    RequestReceived,
    /// When the response headers are sent, for long-running requests (watches) only.
    ResponseStarted,
    /// When the response has been sent.
    ResponseComplete,
    /// When serving the request panicked.
    Panic,
}

/// The policy file's content.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    #[allow(dead_code)]
    metadata: Option<serde_json::Value>,
    /// The rules, first match wins.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
    /// Stages no event is written for, whatever the rule.
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Whether `metadata.managedFields` is left out of request and response bodies, unless a rule says otherwise.
    #[serde(default)]
    pub omit_managed_fields: bool,
}

/// One rule: every field that is set must match.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRule {
    /// The level of requests that match.
    pub level: Level,
    /// User names; empty matches every user.
    #[serde(default)]
    pub users: Vec<String>,
    /// Groups, any of which matches; empty matches every user.
    #[serde(default)]
    pub user_groups: Vec<String>,
    /// Verbs (`get`, `list`, `watch`, `create`, ... or lower-case methods for non-resource requests).
    #[serde(default)]
    pub verbs: Vec<String>,
    /// Resources, by group; a rule with resources matches resource requests only.
    #[serde(default)]
    pub resources: Vec<GroupResources>,
    /// Namespaces; `""` is cluster scope. A rule with namespaces matches resource requests only.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Non-resource paths; `*` at the end matches a prefix.
    #[serde(default, rename = "nonResourceURLs")]
    pub non_resource_urls: Vec<String>,
    /// Stages not written for requests this rule matches (added to the policy's).
    #[serde(default)]
    pub omit_stages: Vec<Stage>,
    /// Overrides the policy's `omitManagedFields` when set.
    #[serde(default)]
    pub omit_managed_fields: Option<bool>,
}

/// Resources of one API group.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GroupResources {
    /// The group; `""` is the core group.
    #[serde(default)]
    pub group: String,
    /// Resources (`pizzas`), subresources (`pizzas/status`, `*/status`, `pizzas/*`) or `*`; empty is all.
    #[serde(default)]
    pub resources: Vec<String>,
    /// Object names; empty is all.
    #[serde(default)]
    pub resource_names: Vec<String>,
}

/// What the policy decided for one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestAuditConfig {
    /// The level; [`Level::None`] when no rule matched.
    pub level: Level,
    /// Stages not written.
    pub omit_stages: Vec<Stage>,
    /// Whether `metadata.managedFields` is left out of bodies.
    pub omit_managed_fields: bool,
}

impl RequestAuditConfig {
    /// Whether an event is written at `stage`.
    pub fn writes(&self, stage: Stage) -> bool {
        self.level != Level::None && !self.omit_stages.contains(&stage)
    }
}

impl Policy {
    /// Reads and checks a policy file (YAML or JSON).
    pub fn load(path: &Path) -> Result<Policy, String> {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Policy::parse(&data).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses and checks a policy.
    pub fn parse(data: &[u8]) -> Result<Policy, String> {
        let (json, _) = crate::codec::yaml_to_json(data).map_err(|e| e.to_string())?;
        let policy: Policy = serde_json::from_slice(&json)
            .map_err(|e| format!("failed decoding audit policy: {e}"))?;
        if policy.api_version != "audit.k8s.io/v1" || policy.kind != "Policy" {
            return Err(format!(
                "unknown group version field {:?} in policy (want apiVersion audit.k8s.io/v1, kind Policy; got kind {:?})",
                policy.api_version, policy.kind
            ));
        }
        if policy.rules.is_empty() {
            return Err("loaded illegal policy with 0 rules".to_string());
        }
        for (i, rule) in policy.rules.iter().enumerate() {
            if !rule.non_resource_urls.is_empty()
                && (!rule.resources.is_empty() || !rule.namespaces.is_empty())
            {
                return Err(format!(
                    "rules[{i}].nonResourceURLs: Invalid value: {:?}: rules cannot apply to both regular resources and non-resource URLs",
                    rule.non_resource_urls
                ));
            }
            for url in &rule.non_resource_urls {
                if url.contains('*') && !url.ends_with('*') || url.matches('*').count() > 1 {
                    return Err(format!(
                        "rules[{i}].nonResourceURLs: Invalid value: {url:?}: non-resource URL rules may only use \"*\" matchers at the end of the path"
                    ));
                }
                if !url.starts_with('/') && url != "*" {
                    return Err(format!(
                        "rules[{i}].nonResourceURLs: Invalid value: {url:?}: non-resource URL rules must begin with \"/\" character"
                    ));
                }
            }
        }
        Ok(policy)
    }

    /// The level, stages and body handling for a request (its user is the authenticated one).
    pub fn evaluate(&self, request: &Attributes) -> RequestAuditConfig {
        let Some(rule) = self.rules.iter().find(|rule| rule.matches(request)) else {
            return RequestAuditConfig {
                level: Level::None,
                omit_stages: self.omit_stages.clone(),
                omit_managed_fields: self.omit_managed_fields,
            };
        };
        let mut omit_stages = self.omit_stages.clone();
        for stage in &rule.omit_stages {
            if !omit_stages.contains(stage) {
                omit_stages.push(*stage);
            }
        }
        RequestAuditConfig {
            level: rule.level,
            omit_stages,
            omit_managed_fields: rule.omit_managed_fields.unwrap_or(self.omit_managed_fields),
        }
    }
}

fn has(list: &[String], value: &str) -> bool {
    list.iter().any(|s| s == value)
}

impl PolicyRule {
    fn matches(&self, request: &Attributes) -> bool {
        if !self.users.is_empty() && !has(&self.users, &request.user.name) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !request
                .user
                .groups
                .iter()
                .any(|g| has(&self.user_groups, g))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, &request.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(request);
        }
        if !self.non_resource_urls.is_empty() {
            return !request.is_resource_request
                && self
                    .non_resource_urls
                    .iter()
                    .any(|spec| path_matches(&request.path, spec));
        }
        true
    }

    fn matches_resource(&self, request: &Attributes) -> bool {
        if !request.is_resource_request {
            return false;
        }
        if !self.namespaces.is_empty() && !has(&self.namespaces, &request.namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let resource = request.resource.as_str();
        let subresource = request.subresource.as_str();
        let combined = if subresource.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{subresource}")
        };
        self.resources
            .iter()
            .filter(|gr| gr.group == request.api_group)
            .any(|gr| {
                if gr.resources.is_empty() {
                    return true;
                }
                if !gr.resource_names.is_empty() && !has(&gr.resource_names, &request.name) {
                    return false;
                }
                gr.resources.iter().any(|spec| {
                    spec == "*"
                        || *spec == combined
                        || (!subresource.is_empty() && spec.strip_prefix("*/") == Some(subresource))
                        || spec.strip_suffix("/*") == Some(resource)
                })
            })
    }
}

fn path_matches(path: &str, spec: &str) -> bool {
    spec == "*"
        || spec == path
        || spec
            .strip_suffix('*')
            .is_some_and(|prefix| path.starts_with(prefix))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::User;

    fn policy(yaml: &str) -> Policy {
        Policy::parse(yaml.as_bytes()).unwrap()
    }

    fn request(user: &str, verb: &str, namespace: &str, resource: &str, name: &str) -> Attributes {
        let (resource, subresource) = resource.split_once('/').unwrap_or((resource, ""));
        Attributes {
            user: User {
                name: user.into(),
                groups: vec!["system:authenticated".into()],
                ..User::default()
            },
            verb: verb.into(),
            is_resource_request: true,
            namespace: namespace.into(),
            api_group: "restaurant.programming-kubernetes.info".into(),
            api_version: "v1alpha1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.into(),
            ..Attributes::default()
        }
    }

    const POLICY: &str = r#"
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  users: ["system:kube-proxy"]
- level: RequestResponse
  resources:
  - group: restaurant.programming-kubernetes.info
    resources: ["pizzas"]
    resourceNames: ["margherita"]
- level: Request
  verbs: ["create", "update", "patch"]
  namespaces: ["kitchen"]
- level: Metadata
  resources:
  - group: restaurant.programming-kubernetes.info
    resources: ["*/status"]
  omitStages: [ResponseStarted]
  omitManagedFields: true
- level: None
  nonResourceURLs: ["/healthz*", "/version"]
- level: Metadata
"#;

    #[test]
    fn the_first_matching_rule_decides() {
        let p = policy(POLICY);
        let level = |a: &Attributes| p.evaluate(a).level;
        assert_eq!(
            level(&request(
                "system:kube-proxy",
                "get",
                "",
                "pizzas",
                "margherita"
            )),
            Level::None
        );
        assert_eq!(
            level(&request("alice", "get", "kitchen", "pizzas", "margherita")),
            Level::RequestResponse
        );
        assert_eq!(
            level(&request("alice", "create", "kitchen", "toppings", "")),
            Level::Request
        );
        assert_eq!(
            level(&request("alice", "get", "kitchen", "toppings", "")),
            Level::Metadata
        );
        let status = p.evaluate(&request("alice", "update", "default", "pizzas/status", "x"));
        assert_eq!(status.level, Level::Metadata);
        assert!(status.omit_managed_fields);
        assert_eq!(
            status.omit_stages,
            vec![Stage::RequestReceived, Stage::ResponseStarted]
        );
        assert!(!status.writes(Stage::RequestReceived));
        assert!(status.writes(Stage::ResponseComplete));

        let mut healthz = request("alice", "get", "", "", "");
        healthz.is_resource_request = false;
        healthz.path = "/healthz/ping".into();
        assert_eq!(level(&healthz), Level::None);
        healthz.path = "/metrics".into();
        assert_eq!(level(&healthz), Level::Metadata);
    }

    #[test]
    fn group_rules_match_any_group_of_the_user() {
        let p = policy(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n  userGroups: [admins]\n",
        );
        let mut a = request("bob", "get", "", "pizzas", "");
        assert_eq!(p.evaluate(&a).level, Level::None);
        a.user.groups.push("admins".into());
        assert_eq!(p.evaluate(&a).level, Level::Request);
    }

    #[test]
    fn bad_policies_are_refused() {
        for (yaml, want) in [
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules: []\n",
                "0 rules",
            ),
            (
                "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\nrules:\n- level: None\n",
                "unknown group version",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Everything\n",
                "unknown variant",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  nonResourceURLs: ['/a*b']\n",
                "only use",
            ),
            (
                "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: None\n  verb: [get]\n",
                "unknown field",
            ),
        ] {
            let err = Policy::parse(yaml.as_bytes()).unwrap_err();
            assert!(err.contains(want), "{yaml}: {err}");
        }
    }
}
