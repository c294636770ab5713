//! The server's authorizer, shared by the authorization filter and admission (whose CEL `authorizer` asks it).
//! Without the `cluster` feature no admission plugin asks the authorizer (CEL's `authorizer`), and only [`Shared`]
//! is left.

use std::sync::Arc;

#[cfg(feature = "cluster")]
use apiserver_cel::authz::{Check, Decision, Request};
use async_trait::async_trait;

#[cfg(feature = "cluster")]
use crate::admission::AdmissionAuthorizer;
use crate::auth::{Attributes, AuthorizationError, Authorizer, Decision as AuthDecision};
#[cfg(feature = "cluster")]
use crate::auth::{PathAuthorizer, PrivilegedGroups, SelectorRequirement, UnionAuthorizer, User};
#[cfg(feature = "cluster")]
use crate::storage::{FieldOperator, FieldSelector, LabelSelector, Operator};

/// One authorizer behind an `Arc`, handed to the server builder while admission keeps another handle on it.
pub(super) struct Shared(pub Arc<dyn Authorizer>);

#[async_trait]
impl Authorizer for Shared {
    async fn authorize(
        &self,
        attributes: &Attributes,
    ) -> Result<(AuthDecision, String), AuthorizationError> {
        self.0.authorize(attributes).await
    }
}

/// What admission asks: the same union the filter chain asks (`system:masters`, the always-allow paths, then the
/// configured authorizer, the delegated one with its cache when there is one).
#[cfg(feature = "cluster")]
pub(super) struct ServerAuthorizer(UnionAuthorizer);

#[cfg(feature = "cluster")]
impl ServerAuthorizer {
    pub(super) fn new(
        paths: &[String],
        configured: Option<Arc<dyn Authorizer>>,
    ) -> Result<ServerAuthorizer, AuthorizationError> {
        let union = UnionAuthorizer::new()
            .with(PrivilegedGroups::default())
            .with(PathAuthorizer::new(paths)?);
        Ok(ServerAuthorizer(match configured {
            Some(configured) => union.with(Shared(configured)),
            None => union.with(crate::auth::AlwaysDeny),
        }))
    }
}

/// The attributes of a check (upstream's `AttributesRecord` of the authz library: resource checks at version `*`).
#[cfg(feature = "cluster")]
fn attributes(request: &Request) -> Attributes {
    let subject = &request.subject;
    let user = User {
        name: subject.name.clone(),
        uid: subject.uid.clone(),
        groups: subject.groups.clone(),
        extra: subject.extra.clone(),
    };
    match &request.check {
        Check::Path { path, verb } => Attributes {
            user,
            verb: verb.clone(),
            path: path.clone(),
            ..Attributes::default()
        },
        Check::Resource { resource, verb } => Attributes {
            user,
            verb: verb.clone(),
            is_resource_request: true,
            namespace: resource.namespace.clone(),
            api_group: resource.group.clone(),
            api_version: "*".into(),
            resource: resource.resource.clone(),
            subresource: resource.subresource.clone(),
            name: resource.name.clone(),
            field_selector: field_requirements(&resource.field_selector),
            label_selector: label_requirements(&resource.label_selector),
            path: String::new(),
        },
    }
}

/// A field selector's requirements as the review carries them (upstream's `fieldSelectorToAuthorizationAPI`): none
/// when it does not parse (the authz library drops it), `=`/`==` as `In`, `!=` as `NotIn`.
#[cfg(feature = "cluster")]
fn field_requirements(selector: &str) -> Vec<SelectorRequirement> {
    if selector.is_empty() {
        return Vec::new();
    }
    let Ok(parsed) = FieldSelector::parse(selector) else {
        return Vec::new();
    };
    parsed
        .requirements()
        .iter()
        .map(|r| SelectorRequirement {
            key: r.field.clone(),
            operator: match r.operator {
                FieldOperator::Equals => "In",
                FieldOperator::NotEquals => "NotIn",
            }
            .into(),
            values: vec![r.value.clone()],
        })
        .collect()
}

/// A label selector's requirements as the review carries them (upstream's `labelSelectorToAuthorizationAPI`): none
/// when it does not parse, `=`/`==`/`in` as `In`, `!=`/`notin` as `NotIn`, `Exists`, `DoesNotExist`; `gt` and `lt`
/// are left out (requirements only narrow, so the question asked is the same or wider).
#[cfg(feature = "cluster")]
fn label_requirements(selector: &str) -> Vec<SelectorRequirement> {
    if selector.is_empty() {
        return Vec::new();
    }
    let Ok(parsed) = LabelSelector::parse(selector) else {
        return Vec::new();
    };
    parsed
        .requirements()
        .iter()
        .filter_map(|r| {
            let operator = match r.operator() {
                Operator::Equals | Operator::DoubleEquals | Operator::In => "In",
                Operator::NotEquals | Operator::NotIn => "NotIn",
                Operator::Exists => "Exists",
                Operator::DoesNotExist => "DoesNotExist",
                Operator::GreaterThan | Operator::LessThan => return None,
            };
            Some(SelectorRequirement {
                key: r.key().to_string(),
                operator: operator.into(),
                values: r.values().to_vec(),
            })
        })
        .collect()
}

#[cfg(feature = "cluster")]
#[async_trait]
impl AdmissionAuthorizer for ServerAuthorizer {
    async fn authorize(&self, request: &Request) -> Decision {
        match self.0.authorize(&attributes(request)).await {
            Ok((decision, reason)) => Decision {
                allowed: decision == AuthDecision::Allow,
                reason,
                error: None,
            },
            Err(e) => Decision {
                allowed: false,
                reason: String::new(),
                error: Some(e.0),
            },
        }
    }
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;
    use apiserver_cel::authz::{Resource, Subject};
    use std::sync::Mutex;

    /// Fails every question, remembering what it was asked.
    #[derive(Default)]
    struct Failing(Mutex<Vec<Attributes>>);

    #[async_trait]
    impl Authorizer for Failing {
        async fn authorize(
            &self,
            attributes: &Attributes,
        ) -> Result<(AuthDecision, String), AuthorizationError> {
            self.0.lock().unwrap().push(attributes.clone());
            Err(AuthorizationError(
                "subject access review failed: refused".into(),
            ))
        }
    }

    fn request(subject: Subject, check: Check) -> Request {
        Request { subject, check }
    }

    #[tokio::test]
    async fn checks_ask_the_union_the_filter_chain_asks() {
        let failing = Arc::new(Failing::default());
        let server = ServerAuthorizer::new(
            &["/healthz".into()],
            Some(failing.clone() as Arc<dyn Authorizer>),
        )
        .unwrap();
        let pods = Check::Resource {
            resource: Resource {
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: "scale".into(),
                namespace: "ns".into(),
                name: "web".into(),
                ..Resource::default()
            },
            verb: "update".into(),
        };
        // an authorizer error is a decision that is not allowed, with the error
        let alice = Subject {
            name: "alice".into(),
            groups: vec!["devs".into()],
            ..Subject::default()
        };
        let decision = server
            .authorize(&request(alice.clone(), pods.clone()))
            .await;
        assert_eq!(
            decision,
            Decision {
                allowed: false,
                reason: String::new(),
                error: Some("subject access review failed: refused".into()),
            }
        );
        let asked = failing.0.lock().unwrap()[0].clone();
        assert!(asked.is_resource_request);
        assert_eq!(asked.api_version, "*");
        assert_eq!(
            (
                asked.api_group.as_str(),
                asked.resource.as_str(),
                asked.subresource.as_str(),
                asked.namespace.as_str(),
                asked.name.as_str(),
                asked.verb.as_str(),
                asked.user.name.as_str(),
            ),
            (
                "apps",
                "deployments",
                "scale",
                "ns",
                "web",
                "update",
                "alice"
            )
        );
        // selectors narrow the question as upstream's webhook authorizer sends them; one that does not parse is
        // left out
        let narrowed = Check::Resource {
            resource: Resource {
                resource: "pods".into(),
                field_selector: "spec.nodeName=n1,status.phase!=Failed".into(),
                label_selector: "app in (web,api),!canary,tier,rank>2".into(),
                ..Resource::default()
            },
            verb: "list".into(),
        };
        server.authorize(&request(alice.clone(), narrowed)).await;
        let asked = failing.0.lock().unwrap()[1].clone();
        let requirement = |key: &str, operator: &str, values: &[&str]| SelectorRequirement {
            key: key.into(),
            operator: operator.into(),
            values: values.iter().map(|v| v.to_string()).collect(),
        };
        assert_eq!(
            asked.field_selector,
            vec![
                requirement("spec.nodeName", "In", &["n1"]),
                requirement("status.phase", "NotIn", &["Failed"]),
            ]
        );
        assert_eq!(
            asked.label_selector,
            vec![
                requirement("app", "In", &["api", "web"]),
                requirement("canary", "DoesNotExist", &[]),
                requirement("tier", "Exists", &[]),
            ]
        );
        let unparsable = Check::Resource {
            resource: Resource {
                resource: "pods".into(),
                field_selector: "spec.nodeName".into(),
                label_selector: "app in (".into(),
                ..Resource::default()
            },
            verb: "list".into(),
        };
        server.authorize(&request(alice.clone(), unparsable)).await;
        let asked = failing.0.lock().unwrap()[2].clone();
        assert!(asked.field_selector.is_empty() && asked.label_selector.is_empty());
        // system:masters and the always-allow paths are allowed before the configured authorizer is asked
        let admin = Subject {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Subject::default()
        };
        assert!(server.authorize(&request(admin, pods)).await.allowed);
        let health = Check::Path {
            path: "/healthz".into(),
            verb: "get".into(),
        };
        assert!(server.authorize(&request(alice, health)).await.allowed);
        assert_eq!(failing.0.lock().unwrap().len(), 3);
        // without a configured authorizer the rest is denied
        let standalone = ServerAuthorizer::new(&[], None).unwrap();
        let bob = Subject {
            name: "bob".into(),
            ..Subject::default()
        };
        let decision = standalone
            .authorize(&request(
                bob,
                Check::Path {
                    path: "/metrics".into(),
                    verb: "get".into(),
                },
            ))
            .await;
        assert!(
            !decision.allowed && decision.error.is_none(),
            "{decision:?}"
        );
    }
}
