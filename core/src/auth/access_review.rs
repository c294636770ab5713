//! Authorization asked of the core cluster: a `SubjectAccessReview` (authorization.k8s.io/v1) per distinct
//! question, with allowed answers remembered for `--authorization-webhook-cache-authorized-ttl` and the others
//! for `--authorization-webhook-cache-unauthorized-ttl` (upstream's delegating webhook authorizer).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use k8s_openapi::api::authorization::v1::{
    FieldSelectorAttributes, LabelSelectorAttributes, NonResourceAttributes, ResourceAttributes,
    SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    FieldSelectorRequirement, LabelSelectorRequirement,
};
use kube::api::{Api, PostParams};

use super::cache::ExpiringCache;
use super::token_review::{counted, with_retries};
use super::{Attributes, AuthorizationError, Authorizer, Decision, SelectorRequirement};
use crate::metrics::{Delegated, Metrics};

/// How many answers are remembered (the seed's figure).
pub const CACHE_CAPACITY: usize = 1024;

/// Asks the core cluster whether a user may do what a request does.
pub struct SubjectAccessReviewAuthorizer {
    reviews: Api<SubjectAccessReview>,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: ExpiringCache<String, (Decision, String)>,
    metrics: Option<Arc<Metrics>>,
}

impl SubjectAccessReviewAuthorizer {
    /// Reviews through `client`; allowed answers are remembered for `allowed_ttl`, denied and no-opinion ones for
    /// `denied_ttl`.
    pub fn new(client: kube::Client, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        SubjectAccessReviewAuthorizer {
            reviews: Api::all(client),
            allowed_ttl,
            denied_ttl,
            cache: ExpiringCache::new(CACHE_CAPACITY),
            metrics: None,
        }
    }

    /// Counts reviews in `apiserver_delegated_authz_request_*`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// The review's spec for a request's attributes.
pub fn review_spec(a: &Attributes) -> SubjectAccessReviewSpec {
    let some = |s: &str| Some(s.to_string());
    let mut spec = SubjectAccessReviewSpec {
        user: some(&a.user.name),
        uid: (!a.user.uid.is_empty()).then(|| a.user.uid.clone()),
        groups: Some(a.user.groups.clone()),
        extra: (!a.user.extra.is_empty()).then(|| a.user.extra.clone()),
        ..SubjectAccessReviewSpec::default()
    };
    if a.is_resource_request {
        spec.resource_attributes = Some(ResourceAttributes {
            namespace: some(&a.namespace),
            verb: some(&a.verb),
            group: some(&a.api_group),
            version: some(&a.api_version),
            resource: some(&a.resource),
            subresource: some(&a.subresource),
            name: some(&a.name),
            field_selector: (!a.field_selector.is_empty()).then(|| FieldSelectorAttributes {
                requirements: Some(
                    a.field_selector
                        .iter()
                        .map(|r| {
                            let (key, operator, values) = parts(r);
                            FieldSelectorRequirement {
                                key,
                                operator,
                                values,
                            }
                        })
                        .collect(),
                ),
                raw_selector: None,
            }),
            label_selector: (!a.label_selector.is_empty()).then(|| LabelSelectorAttributes {
                requirements: Some(
                    a.label_selector
                        .iter()
                        .map(|r| {
                            let (key, operator, values) = parts(r);
                            LabelSelectorRequirement {
                                key,
                                operator,
                                values,
                            }
                        })
                        .collect(),
                ),
                raw_selector: None,
            }),
        });
    } else {
        spec.non_resource_attributes = Some(NonResourceAttributes {
            path: some(&a.path),
            verb: some(&a.verb),
        });
    }
    spec
}

/// A requirement's key, operator and values (omitted when there are none), as the review's types hold them.
fn parts(r: &SelectorRequirement) -> (String, String, Option<Vec<String>>) {
    (
        r.key.clone(),
        r.operator.clone(),
        (!r.values.is_empty()).then(|| r.values.clone()),
    )
}

#[async_trait]
impl Authorizer for SubjectAccessReviewAuthorizer {
    async fn authorize(
        &self,
        attributes: &Attributes,
    ) -> Result<(Decision, String), AuthorizationError> {
        let spec = review_spec(attributes);
        // The spec serializes with sorted maps and fixed field order: equal questions give equal keys.
        let key = serde_json::to_string(&spec).map_err(|e| AuthorizationError(e.to_string()))?;
        if let Some(answer) = self.cache.get(&key) {
            return Ok(answer);
        }
        let review = SubjectAccessReview {
            spec,
            ..SubjectAccessReview::default()
        };
        let params = PostParams::default();
        let reviewed = with_retries(|| {
            counted(
                self.metrics.as_deref(),
                Delegated::Authorization,
                self.reviews.create(&params, &review),
            )
        })
        .await
        .map_err(|e| AuthorizationError(format!("subject access review failed: {e}")))?;
        let status = reviewed.status.unwrap_or_default();
        let reason = status.reason.unwrap_or_default();
        let answer = if status.allowed {
            (Decision::Allow, reason)
        } else if status.denied == Some(true) {
            (Decision::Deny, reason)
        } else {
            (Decision::NoOpinion, reason)
        };
        let ttl = if status.allowed {
            self.allowed_ttl
        } else {
            self.denied_ttl
        };
        self.cache.insert(key, answer.clone(), ttl);
        Ok(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::User;

    #[test]
    fn resource_and_path_reviews() {
        let user = User {
            name: "alice".into(),
            uid: "u1".into(),
            groups: vec!["devs".into()],
            ..User::default()
        };
        let a = Attributes {
            user: user.clone(),
            verb: "create".into(),
            is_resource_request: true,
            namespace: "ns".into(),
            api_group: "g".into(),
            api_version: "v1".into(),
            resource: "pizzas".into(),
            ..Attributes::default()
        };
        let json = serde_json::to_value(review_spec(&a)).unwrap();
        assert_eq!(json["user"], "alice");
        assert_eq!(json["uid"], "u1");
        assert_eq!(json["groups"][0], "devs");
        assert_eq!(json["resourceAttributes"]["verb"], "create");
        assert_eq!(json["resourceAttributes"]["resource"], "pizzas");
        assert_eq!(json["resourceAttributes"]["namespace"], "ns");
        assert!(json.get("nonResourceAttributes").is_none());
        assert!(json["resourceAttributes"].get("fieldSelector").is_none());
        let narrowed = Attributes {
            field_selector: vec![SelectorRequirement {
                key: "spec.nodeName".into(),
                operator: "In".into(),
                values: vec!["n1".into()],
            }],
            label_selector: vec![SelectorRequirement {
                key: "app".into(),
                operator: "Exists".into(),
                values: vec![],
            }],
            ..a.clone()
        };
        let json = serde_json::to_value(review_spec(&narrowed)).unwrap();
        assert_eq!(
            json["resourceAttributes"]["fieldSelector"],
            serde_json::json!({"requirements": [{"key": "spec.nodeName", "operator": "In", "values": ["n1"]}]})
        );
        assert_eq!(
            json["resourceAttributes"]["labelSelector"],
            serde_json::json!({"requirements": [{"key": "app", "operator": "Exists"}]})
        );
        let p = Attributes {
            user,
            verb: "get".into(),
            path: "/metrics".into(),
            ..Attributes::default()
        };
        let json = serde_json::to_value(review_spec(&p)).unwrap();
        assert_eq!(json["nonResourceAttributes"]["path"], "/metrics");
        assert!(json.get("resourceAttributes").is_none());
    }
}
