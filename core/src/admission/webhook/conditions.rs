//! A webhook's `matchConditions` (upstream's `matchconditions.Matcher`): CEL expressions over `object`,
//! `oldObject`, `request` and `authorizer`, all of which must be true for the webhook to be called. A condition that is false
//! skips the webhook; one that fails to evaluate refuses the request under `failurePolicy: Fail` and skips the
//! webhook under `Ignore`.

use std::sync::Arc;

use apiserver_cel::{Activation, Value};

use super::hook::Hook;
use crate::admission::authorization::AdmissionAuthorizer;
use crate::admission::authorization::{RequestAuthorization, evaluate};
use crate::admission::expressions::Programs;
use crate::registry::ApiError;

/// Upstream's runtime cost budget for one webhook's match conditions.
const COST_BUDGET: u64 = 1_000_000;

/// The match conditions' compiled programs, and the authorizer their `authorizer` asks.
pub(super) struct Conditions {
    programs: Programs,
    authorizer: Option<Arc<dyn AdmissionAuthorizer>>,
}

impl Conditions {
    /// No program compiled yet.
    pub fn new(authorizer: Option<Arc<dyn AdmissionAuthorizer>>) -> Conditions {
        Conditions {
            programs: Programs::default(),
            authorizer,
        }
    }

    /// Whether the webhook applies: `request` is the AdmissionRequest the webhook would get, whose `object` and
    /// `oldObject` are bound as variables of their own too.
    pub async fn matches(
        &self,
        hook: &Hook,
        request: &serde_json::Value,
        attributes: &crate::admission::Attributes,
    ) -> Result<bool, ApiError> {
        if hook.match_conditions.is_empty() {
            return Ok(true);
        }
        let authorization =
            RequestAuthorization::new(self.authorizer.as_ref(), attributes.authorization_target());
        let mut activation = Activation::new()
            .bind_json("object", &request["object"])
            .bind_json("oldObject", &request["oldObject"])
            .bind_json("request", request);
        if let Some(authorization) = &authorization {
            activation = authorization.bind(activation);
        }
        let mut errors = Vec::new();
        let mut budget = COST_BUDGET;
        for condition in &hook.match_conditions {
            let evaluated = match self.programs.get(&condition.expression) {
                Ok(program) => {
                    let evaluation =
                        evaluate(&program, &activation, budget, authorization.as_ref()).await;
                    budget = budget.saturating_sub(evaluation.cost);
                    evaluation.result.map_err(|e| e.to_string())
                }
                Err(e) => Err(e),
            };
            match evaluated {
                Ok(Value::Bool(false)) => return Ok(false),
                Ok(Value::Bool(true)) => {}
                Ok(other) => errors.push(format!(
                    "expression '{}' resulted in error: no such overload: {other:?} is not a bool",
                    condition.expression
                )),
                Err(e) => errors.push(format!(
                    "expression '{}' resulted in error: {e}",
                    condition.expression
                )),
            }
        }
        if errors.is_empty() || hook.fail_open {
            return Ok(errors.is_empty());
        }
        let why = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        Err(attributes.forbidden(why))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{Attributes, Operation};
    use crate::auth::User;
    use crate::runtime::GroupResource;
    use apiserver_cel::authz::{Check, Decision, Request};
    use async_trait::async_trait;
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhook;
    use serde_json::json;

    /// Allows `delete` to `alice` only.
    struct AliceDeletes;

    #[async_trait]
    impl AdmissionAuthorizer for AliceDeletes {
        async fn authorize(&self, request: &Request) -> Decision {
            let delete = matches!(&request.check, Check::Resource { verb, .. } if verb == "delete");
            Decision {
                allowed: delete && request.subject.name == "alice",
                ..Decision::default()
            }
        }
    }

    fn attributes(user: &str) -> Attributes {
        Attributes {
            operation: Operation::Create,
            kind: Default::default(),
            resource: GroupResource {
                group: "g".into(),
                resource: "pizzas".into(),
            },
            version: "v1".into(),
            subresource: String::new(),
            namespace: "ns".into(),
            name: "p".into(),
            dry_run: false,
            user: User {
                name: user.into(),
                ..User::default()
            },
            audit: None,
            warnings: None,
            wire: None,
            field_manager: String::new(),
            reinvocation: Arc::default(),
        }
    }

    /// A webhook's match condition asks the authorizer about the request's user and resource.
    #[tokio::test]
    async fn match_conditions_see_the_authorizer() {
        let webhook: ValidatingWebhook = serde_json::from_value(json!({
            "name": "w.example.com",
            "clientConfig": {"url": "https://127.0.0.1:1/"},
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "matchConditions": [{"name": "deleters", "expression": "authorizer.requestResource.check('delete').allowed()"}],
        }))
        .unwrap();
        let hook = Hook::validating("c", &webhook);
        let request = json!({"object": {"metadata": {"name": "p"}}, "oldObject": null});
        let conditions = Conditions::new(Some(Arc::new(AliceDeletes)));
        assert!(
            conditions
                .matches(&hook, &request, &attributes("alice"))
                .await
                .unwrap()
        );
        assert!(
            !conditions
                .matches(&hook, &request, &attributes("bob"))
                .await
                .unwrap()
        );
        // without an authorizer the condition fails, refusing under failurePolicy Fail
        let err = Conditions::new(None)
            .matches(&hook, &request, &attributes("alice"))
            .await
            .unwrap_err();
        assert!(
            err.message.contains("undeclared reference to 'authorizer'"),
            "{}",
            err.message
        );
    }
}
