//! The `authorizer` variable of admission expressions (policies' and webhooks' match conditions), whose checks the
//! server's own authorizer answers. Upstream hands the authorizer to admission plugins through its
//! `WantsAuthorizer` initializer; here it is [`Initializer::authorizer`](super::Initializer::authorizer), an
//! [`AdmissionAuthorizer`] that the application wires to the server's authorizer.

use std::sync::Arc;

use apiserver_cel::authz::{self, Checks, Decision, Request, Resource, Subject};
use apiserver_cel::{Activation, Evaluation, Program};
use async_trait::async_trait;

/// The server's authorizer as admission asks it.
#[async_trait]
pub trait AdmissionAuthorizer: Send + Sync + 'static {
    /// Whether `request.subject` may do `request.check` (a resource check is about every API version, `*`). An
    /// authorizer that fails answers not allowed, with its error.
    async fn authorize(&self, request: &Request) -> Decision;
}

/// How many rounds of checks one evaluation may take (each asks at least one check the previous did not; the cost
/// limits allow far fewer).
const MAX_ROUNDS: usize = 64;

/// One admission request's checks: asked as its user, with its resource as `authorizer.requestResource`, each
/// distinct check asked once for the whole request.
#[derive(Clone)]
pub(crate) struct RequestAuthorization {
    authorizer: Arc<dyn AdmissionAuthorizer>,
    checks: Arc<Checks>,
    subject: Subject,
    resource: Resource,
}

impl RequestAuthorization {
    /// The checks of a request by `subject` on `resource` (see
    /// [`Attributes::authorization_target`](super::Attributes::authorization_target)), or `None` without an
    /// authorizer.
    pub fn new(
        authorizer: Option<&Arc<dyn AdmissionAuthorizer>>,
        (subject, resource): (Subject, Resource),
    ) -> Option<RequestAuthorization> {
        Some(RequestAuthorization {
            authorizer: authorizer?.clone(),
            checks: Checks::new(),
            subject,
            resource,
        })
    }

    /// Binds `authorizer` and `authorizer.requestResource`.
    pub fn bind(&self, activation: Activation) -> Activation {
        activation
            .bind(
                authz::AUTHORIZER,
                authz::authorizer(&self.checks, self.subject.clone()),
            )
            .bind(
                authz::REQUEST_RESOURCE,
                authz::request_resource(&self.checks, self.subject.clone(), self.resource.clone()),
            )
    }
}

/// Evaluates `program` within `limit`. With `authorization`, the checks the evaluation asks are answered by the
/// authorizer and the program evaluated again, until it asks nothing new (see [`Checks`]): no thread blocks on the
/// authorizer, so this is sound on any runtime, a current-thread one included.
pub(crate) async fn evaluate(
    program: &Program,
    activation: &Activation,
    limit: u64,
    authorization: Option<&RequestAuthorization>,
) -> Evaluation {
    let mut evaluation = program.evaluate_with_limit(activation, limit);
    let Some(authorization) = authorization else {
        return evaluation;
    };
    for _ in 0..MAX_ROUNDS {
        let pending = authorization.checks.take_pending();
        if pending.is_empty() {
            return evaluation;
        }
        for request in pending {
            let decision = authorization.authorizer.authorize(&request).await;
            authorization.checks.answer(request, decision);
        }
        evaluation = program.evaluate_with_limit(activation, limit);
    }
    Evaluation {
        result: Err(apiserver_cel::EvalError::Execution(
            "too many authorization checks".into(),
        )),
        cost: evaluation.cost,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Attributes;
    use crate::auth::User;
    use crate::runtime::GroupResource;
    use apiserver_cel::Value;
    use std::sync::Mutex;

    /// Records what it is asked; allows the `delete` verb only.
    #[derive(Default)]
    struct Recorder(Mutex<Vec<Request>>);

    #[async_trait]
    impl AdmissionAuthorizer for Recorder {
        async fn authorize(&self, request: &Request) -> Decision {
            self.0.lock().unwrap().push(request.clone());
            tokio::task::yield_now().await;
            let verb = match &request.check {
                authz::Check::Resource { verb, .. } | authz::Check::Path { verb, .. } => verb,
            };
            Decision {
                allowed: verb == "delete",
                reason: format!("asked {verb}"),
                error: None,
            }
        }
    }

    fn attributes() -> Attributes {
        Attributes {
            operation: crate::admission::Operation::Create,
            kind: Default::default(),
            resource: GroupResource {
                group: "restaurant.programming-kubernetes.info".into(),
                resource: "pizzas".into(),
            },
            version: "v1beta1".into(),
            subresource: String::new(),
            namespace: "default".into(),
            name: "margherita".into(),
            dry_run: false,
            user: User {
                name: "alice".into(),
                groups: vec!["devs".into()],
                ..User::default()
            },
            audit: None,
            warnings: None,
            wire: None,
            field_manager: String::new(),
            reinvocation: Arc::default(),
        }
    }

    /// On a current-thread runtime (where blocking on the authorizer would deadlock), every check is answered and
    /// each distinct one asked once, across expressions of the same request.
    #[tokio::test(flavor = "current_thread")]
    async fn checks_are_answered_on_a_current_thread_runtime() {
        let recorder = Arc::new(Recorder::default());
        let authorizer: Arc<dyn AdmissionAuthorizer> = recorder.clone();
        let authorization =
            RequestAuthorization::new(Some(&authorizer), attributes().authorization_target())
                .unwrap();
        let activation = authorization.bind(Activation::new());
        let program = Program::compile(
            "authorizer.requestResource.check('delete').allowed() && \
             !authorizer.group('').resource('pods').check('create').allowed() && \
             authorizer.requestResource.check('delete').reason() == 'asked delete'",
        )
        .unwrap();
        for _ in 0..2 {
            // three calls: over the per-expression limit, within a policy's budget
            let evaluation =
                evaluate(&program, &activation, 10_000_000, Some(&authorization)).await;
            assert_eq!(evaluation.result, Ok(Value::Bool(true)));
            assert!(
                evaluation.cost >= 2 * authz::CHECK_COST,
                "{}",
                evaluation.cost
            );
        }
        let asked = recorder.0.lock().unwrap().clone();
        assert_eq!(asked.len(), 2, "{asked:?}");
        assert_eq!(asked[0].subject.name, "alice");
        assert_eq!(
            asked[0].check,
            authz::Check::Resource {
                resource: Resource {
                    group: "restaurant.programming-kubernetes.info".into(),
                    resource: "pizzas".into(),
                    namespace: "default".into(),
                    name: "margherita".into(),
                    ..Resource::default()
                },
                verb: "delete".into(),
            }
        );
        // without an authorizer the variable is not there
        assert!(RequestAuthorization::new(None, attributes().authorization_target()).is_none());
        let plain = evaluate(&program, &Activation::new(), 1_000_000, None).await;
        assert!(plain.result.is_err());
    }
}
