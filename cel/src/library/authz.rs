//! Kubernetes' authorization library (k8s.io/apiserver/pkg/cel/library/authz.go, with the selectors of
//! `AuthzSelectors`, on by default since `AuthorizeWithSelectors` went GA in 1.34): the `authorizer` variable of
//! admission policies and webhook match conditions.
//!
//! `authorizer.path(p)` and `authorizer.group(g).resource(r)` (then `.subresource(s)`, `.namespace(ns)`,
//! `.name(n)`, `.fieldSelector(f)`, `.labelSelector(l)`) build a check; `.check(verb)` asks it and gives a decision
//! with `.allowed()`, `.reason()`, `.errored()` and `.error()`. `authorizer.serviceAccount(ns, name)` asks as that
//! service account instead of the request's user; `authorizer.requestResource` is the request's own resource.
//!
//! Evaluation is synchronous and authorizers are not: a check answers from [`Checks`], and a check it has no answer
//! for yet is recorded as pending and fails the evaluation. The caller asks the pending checks, answers them and
//! evaluates again (see [`Checks`]).

use super::format::{dns1123_label, dns1123_subdomain};
use super::{error, opaque, opaque_arg, string, string_arg, values_fn};
use cel::common::types::{STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// The name of the variable (upstream's).
pub const AUTHORIZER: &str = "authorizer";
/// The name of the request's own resource check (upstream binds it as this qualified variable).
pub const REQUEST_RESOURCE: &str = "authorizer.requestResource";

pub use crate::cost::CHECK_COST;

const AUTHORIZER_TYPE: &str = "kubernetes.authorization.Authorizer";
const PATH_CHECK_TYPE: &str = "kubernetes.authorization.PathCheck";
const GROUP_CHECK_TYPE: &str = "kubernetes.authorization.GroupCheck";
const RESOURCE_CHECK_TYPE: &str = "kubernetes.authorization.ResourceCheck";
const DECISION_TYPE: &str = "kubernetes.authorization.Decision";

/// Who a check asks about (upstream's `user.Info`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Subject {
    /// The user name.
    pub name: String,
    /// The user's UID, empty when unknown.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// The authenticator's extra information.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl Subject {
    /// A service account as its tokens authenticate (upstream's `ServiceAccountInfo.UserInfo`):
    /// `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts` and `system:serviceaccounts:<ns>`.
    pub fn service_account(namespace: &str, name: &str) -> Subject {
        Subject {
            name: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            ..Subject::default()
        }
    }
}

/// A resource as a check names it. The version is always `*` (upstream's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Resource {
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource, empty for none.
    pub subresource: String,
    /// The namespace, empty for the cluster scope.
    pub namespace: String,
    /// The object name, empty for all.
    pub name: String,
    /// A field selector as written (`fieldSelector(...)`), empty for none.
    pub field_selector: String,
    /// A label selector as written (`labelSelector(...)`), empty for none.
    pub label_selector: String,
}

/// What is asked.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Check {
    /// A non-resource path and an HTTP verb (`authorizer.path(p).check(verb)`).
    Path {
        /// The path as given.
        path: String,
        /// The verb as given.
        verb: String,
    },
    /// A resource and an API verb.
    Resource {
        /// The resource.
        resource: Resource,
        /// The verb as given.
        verb: String,
    },
}

/// One authorization question: may `subject` do `check`?
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Request {
    /// Who.
    pub subject: Subject,
    /// What.
    pub check: Check,
}

/// An authorizer's answer as CEL sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Whether the decision is "allow" ("deny" and "no opinion" are not).
    pub allowed: bool,
    /// The authorizer's reason, possibly empty.
    pub reason: String,
    /// The authorizer's error, if it failed.
    pub error: Option<String>,
}

/// The answers of one request's checks, and the checks asked that have none yet.
///
/// Authorizers are asynchronous and CEL evaluation is not, so an evaluation cannot wait for one. Blocking the
/// evaluating thread on the authorizer would need a multi-threaded runtime (`block_in_place`) or `'static` copies of
/// everything the evaluation reads (`spawn_blocking`). Instead a check without an answer is recorded here and
/// fails the evaluation; the caller asks the pending checks, [`answer`](Checks::answer)s them and evaluates again.
/// Evaluation is deterministic, so each round gets at least one check further, and the last round, which asks nothing
/// new, is exactly the evaluation upstream makes with the same decisions. Answers are kept for the whole admission
/// request, as upstream's per-request caching authorizer keeps them.
#[derive(Debug, Default)]
pub struct Checks {
    answers: Mutex<HashMap<Request, Decision>>,
    pending: Mutex<Vec<Request>>,
}

impl Checks {
    /// No answer yet.
    pub fn new() -> Arc<Checks> {
        Arc::default()
    }

    /// The checks asked since the last call that have no answer, each once.
    pub fn take_pending(&self) -> Vec<Request> {
        self.pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// Records the answer to `request`.
    pub fn answer(&self, request: Request, decision: Decision) {
        if let Ok(mut answers) = self.answers.lock() {
            answers.insert(request, decision);
        }
    }

    fn ask(&self, request: Request) -> Result<Decision, ExecutionError> {
        if let Some(found) = self
            .answers
            .lock()
            .ok()
            .and_then(|a| a.get(&request).cloned())
        {
            return Ok(found);
        }
        if let Ok(mut pending) = self.pending.lock()
            && !pending.contains(&request)
        {
            pending.push(request);
        }
        Err(error(PENDING))
    }
}

/// The error of a check not answered yet: the caller answers it and evaluates again, so no one sees it.
pub const PENDING: &str = "authorization check pending";

/// The `authorizer` variable: checks asked as `subject`, answered from `checks`.
pub fn authorizer(checks: &Arc<Checks>, subject: Subject) -> Value {
    opaque(Authorizer {
        checks: checks.clone(),
        subject,
    })
}

/// The `authorizer.requestResource` variable: a resource check of `resource` (its selectors ignored) asked as
/// `subject`.
pub fn request_resource(checks: &Arc<Checks>, subject: Subject, resource: Resource) -> Value {
    opaque(ResourceCheck {
        authorizer: Authorizer {
            checks: checks.clone(),
            subject,
        },
        resource: Resource {
            field_selector: String::new(),
            label_selector: String::new(),
            ..resource
        },
    })
}

#[derive(Clone, Debug)]
struct Authorizer {
    checks: Arc<Checks>,
    subject: Subject,
}

impl PartialEq for Authorizer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.checks, &other.checks) && self.subject == other.subject
    }
}

impl Eq for Authorizer {}

impl Opaque for Authorizer {
    fn runtime_type_name(&self) -> &str {
        AUTHORIZER_TYPE
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct PathCheck {
    authorizer: Authorizer,
    path: String,
}

impl Opaque for PathCheck {
    fn runtime_type_name(&self) -> &str {
        PATH_CHECK_TYPE
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct GroupCheck {
    authorizer: Authorizer,
    group: String,
}

impl Opaque for GroupCheck {
    fn runtime_type_name(&self) -> &str {
        GROUP_CHECK_TYPE
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct ResourceCheck {
    authorizer: Authorizer,
    resource: Resource,
}

impl Opaque for ResourceCheck {
    fn runtime_type_name(&self) -> &str {
        RESOURCE_CHECK_TYPE
    }
}

impl Opaque for Decision {
    fn runtime_type_name(&self) -> &str {
        DECISION_TYPE
    }
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let t = Type::new_opaque_type;
    for name in [
        AUTHORIZER_TYPE,
        PATH_CHECK_TYPE,
        GROUP_CHECK_TYPE,
        RESOURCE_CHECK_TYPE,
        DECISION_TYPE,
    ] {
        env.add_type(t(name))?;
    }
    let s = || vec![STRING_TYPE];
    env.add_member_overload(
        "path",
        "authorizer_path",
        t(AUTHORIZER_TYPE),
        s(),
        values_fn!(path),
    )?;
    env.add_member_overload(
        "group",
        "authorizer_group",
        t(AUTHORIZER_TYPE),
        s(),
        values_fn!(group),
    )?;
    env.add_member_overload(
        "serviceAccount",
        "authorizer_serviceaccount",
        t(AUTHORIZER_TYPE),
        vec![STRING_TYPE, STRING_TYPE],
        values_fn!(service_account),
    )?;
    env.add_member_overload(
        "resource",
        "groupcheck_resource",
        t(GROUP_CHECK_TYPE),
        s(),
        values_fn!(resource),
    )?;
    env.add_member_overload(
        "subresource",
        "resourcecheck_subresource",
        t(RESOURCE_CHECK_TYPE),
        s(),
        values_fn!(subresource),
    )?;
    env.add_member_overload(
        "namespace",
        "resourcecheck_namespace",
        t(RESOURCE_CHECK_TYPE),
        s(),
        values_fn!(namespace),
    )?;
    env.add_member_overload(
        "name",
        "resourcecheck_name",
        t(RESOURCE_CHECK_TYPE),
        s(),
        values_fn!(name),
    )?;
    env.add_member_overload(
        "fieldSelector",
        "authorizer_fieldselector",
        t(RESOURCE_CHECK_TYPE),
        s(),
        values_fn!(field_selector),
    )?;
    env.add_member_overload(
        "labelSelector",
        "authorizer_labelselector",
        t(RESOURCE_CHECK_TYPE),
        s(),
        values_fn!(label_selector),
    )?;
    env.add_member_overload(
        "check",
        "pathcheck_check",
        t(PATH_CHECK_TYPE),
        s(),
        values_fn!(path_check),
    )?;
    env.add_member_overload(
        "check",
        "resourcecheck_check",
        t(RESOURCE_CHECK_TYPE),
        s(),
        values_fn!(resource_check),
    )?;
    env.add_member_overload(
        "allowed",
        "decision_allowed",
        t(DECISION_TYPE),
        vec![],
        values_fn!(allowed),
    )?;
    env.add_member_overload(
        "reason",
        "decision_reason",
        t(DECISION_TYPE),
        vec![],
        values_fn!(reason),
    )?;
    env.add_member_overload(
        "errored",
        "decision_errored",
        t(DECISION_TYPE),
        vec![],
        values_fn!(errored),
    )?;
    env.add_member_overload(
        "error",
        "decision_error",
        t(DECISION_TYPE),
        vec![],
        values_fn!(decision_error),
    )
}

fn path(args: &[Value]) -> Result<Value, ExecutionError> {
    let authorizer = opaque_arg::<Authorizer>("path", args, 0)?;
    let path = string_arg("path", args, 1)?;
    if path.trim().is_empty() {
        return Err(error("path must not be empty"));
    }
    Ok(opaque(PathCheck {
        authorizer: authorizer.clone(),
        path: path.to_owned(),
    }))
}

fn group(args: &[Value]) -> Result<Value, ExecutionError> {
    let authorizer = opaque_arg::<Authorizer>("group", args, 0)?;
    Ok(opaque(GroupCheck {
        authorizer: authorizer.clone(),
        group: string_arg("group", args, 1)?.to_owned(),
    }))
}

fn service_account(args: &[Value]) -> Result<Value, ExecutionError> {
    let authorizer = opaque_arg::<Authorizer>("serviceAccount", args, 0)?;
    let namespace = string_arg("serviceAccount", args, 1)?;
    let name = string_arg("serviceAccount", args, 2)?;
    // upstream checks the name first
    if !dns1123_subdomain(name).is_empty() {
        return Err(error("Invalid service account name"));
    }
    if !dns1123_label(namespace).is_empty() {
        return Err(error("Invalid service account namespace"));
    }
    Ok(opaque(Authorizer {
        checks: authorizer.checks.clone(),
        subject: Subject::service_account(namespace, name),
    }))
}

fn resource(args: &[Value]) -> Result<Value, ExecutionError> {
    let group = opaque_arg::<GroupCheck>("resource", args, 0)?;
    let resource = string_arg("resource", args, 1)?;
    if resource.trim().is_empty() {
        return Err(error("resource must not be empty"));
    }
    Ok(opaque(ResourceCheck {
        authorizer: group.authorizer.clone(),
        resource: Resource {
            group: group.group.clone(),
            resource: resource.to_owned(),
            ..Resource::default()
        },
    }))
}

/// A resource check with one field changed.
fn with(
    function: &str,
    args: &[Value],
    set: fn(&mut Resource, String),
) -> Result<Value, ExecutionError> {
    let mut check = opaque_arg::<ResourceCheck>(function, args, 0)?.clone();
    set(
        &mut check.resource,
        string_arg(function, args, 1)?.to_owned(),
    );
    Ok(opaque(check))
}

fn subresource(args: &[Value]) -> Result<Value, ExecutionError> {
    with("subresource", args, |r, v| r.subresource = v)
}

fn namespace(args: &[Value]) -> Result<Value, ExecutionError> {
    with("namespace", args, |r, v| r.namespace = v)
}

fn name(args: &[Value]) -> Result<Value, ExecutionError> {
    with("name", args, |r, v| r.name = v)
}

fn field_selector(args: &[Value]) -> Result<Value, ExecutionError> {
    with("fieldSelector", args, |r, v| r.field_selector = v)
}

fn label_selector(args: &[Value]) -> Result<Value, ExecutionError> {
    with("labelSelector", args, |r, v| r.label_selector = v)
}

/// Asks `request`, charging upstream's cost for a check (the call's nominal 1 is charged with the expression).
fn ask(authorizer: &Authorizer, check: Check) -> Result<Value, ExecutionError> {
    crate::cost::charge(CHECK_COST - 1)?;
    let decision = authorizer.checks.ask(Request {
        subject: authorizer.subject.clone(),
        check,
    })?;
    Ok(opaque(decision))
}

fn path_check(args: &[Value]) -> Result<Value, ExecutionError> {
    let check = opaque_arg::<PathCheck>("check", args, 0)?;
    let verb = string_arg("check", args, 1)?;
    ask(
        &check.authorizer,
        Check::Path {
            path: check.path.clone(),
            verb: verb.to_owned(),
        },
    )
}

fn resource_check(args: &[Value]) -> Result<Value, ExecutionError> {
    let check = opaque_arg::<ResourceCheck>("check", args, 0)?;
    let verb = string_arg("check", args, 1)?;
    ask(
        &check.authorizer,
        Check::Resource {
            resource: check.resource.clone(),
            verb: verb.to_owned(),
        },
    )
}

fn allowed(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        opaque_arg::<Decision>("allowed", args, 0)?.allowed,
    ))
}

fn reason(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(
        opaque_arg::<Decision>("reason", args, 0)?.reason.clone(),
    ))
}

fn errored(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        opaque_arg::<Decision>("errored", args, 0)?.error.is_some(),
    ))
}

fn decision_error(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(
        opaque_arg::<Decision>("error", args, 0)?
            .error
            .clone()
            .unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Activation, EvalError, Program};

    fn alice() -> Subject {
        Subject {
            name: "alice".into(),
            uid: "u-1".into(),
            groups: vec!["devs".into(), "system:authenticated".into()],
            extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
        }
    }

    fn pizzas() -> Resource {
        Resource {
            group: "restaurant.programming-kubernetes.info".into(),
            resource: "pizzas".into(),
            namespace: "default".into(),
            name: "margherita".into(),
            ..Resource::default()
        }
    }

    /// Evaluates `source` as a caller does: asks the pending checks of `decide` (the authorizer double) and
    /// evaluates again until nothing is pending. Returns the result, the cost and every request asked.
    fn run(
        source: &str,
        decide: impl Fn(&Request) -> Decision,
    ) -> (Result<Value, EvalError>, u64, Vec<Request>) {
        let program = Program::compile(source).unwrap();
        let checks = Checks::new();
        let activation = Activation::new()
            .bind(AUTHORIZER, authorizer(&checks, alice()))
            .bind(
                REQUEST_RESOURCE,
                request_resource(&checks, alice(), pizzas()),
            );
        let mut asked = Vec::new();
        for _ in 0..16 {
            let evaluation = program.evaluate_with_limit(&activation, crate::PER_CALL_LIMIT);
            let pending = checks.take_pending();
            if pending.is_empty() {
                return (evaluation.result, evaluation.cost, asked);
            }
            for request in pending {
                checks.answer(request.clone(), decide(&request));
                asked.push(request);
            }
        }
        panic!("{source}: never settled");
    }

    fn allow(_: &Request) -> Decision {
        Decision {
            allowed: true,
            reason: "RBAC: allowed by RoleBinding".into(),
            error: None,
        }
    }

    fn message(result: Result<Value, EvalError>) -> String {
        match result {
            Err(e) => e.to_string(),
            Ok(v) => panic!("expected an error, got {v:?}"),
        }
    }

    #[test]
    fn builder_chain_asks_the_resource_it_names() {
        let (result, _, asked) = run(
            "authorizer.group('apps').resource('deployments').subresource('scale').namespace('ns')\
             .name('web').fieldSelector('spec.x=y').labelSelector('app=web').check('update').allowed()",
            allow,
        );
        assert_eq!(result, Ok(Value::Bool(true)));
        assert_eq!(
            asked,
            vec![Request {
                subject: alice(),
                check: Check::Resource {
                    resource: Resource {
                        group: "apps".into(),
                        resource: "deployments".into(),
                        subresource: "scale".into(),
                        namespace: "ns".into(),
                        name: "web".into(),
                        field_selector: "spec.x=y".into(),
                        label_selector: "app=web".into(),
                    },
                    verb: "update".into(),
                },
            }]
        );
        // unset parts stay empty: the core group, cluster scope, all names
        let (_, _, asked) = run(
            "authorizer.group('').resource('nodes').check('list')",
            allow,
        );
        assert_eq!(
            asked[0].check,
            Check::Resource {
                resource: Resource {
                    resource: "nodes".into(),
                    ..Resource::default()
                },
                verb: "list".into(),
            }
        );
        let (_, _, asked) = run("authorizer.path('/healthz').check('get')", allow);
        assert_eq!(
            asked[0].check,
            Check::Path {
                path: "/healthz".into(),
                verb: "get".into()
            }
        );
    }

    #[test]
    fn decisions() {
        let deny = |_: &Request| Decision {
            allowed: false,
            reason: "no RBAC policy matched".into(),
            error: None,
        };
        let failed = |_: &Request| Decision {
            allowed: false,
            reason: String::new(),
            error: Some("subject access review failed: connection refused".into()),
        };
        let d = "authorizer.group('').resource('pods').check('create')";
        let eval = |suffix: &str, decide: &dyn Fn(&Request) -> Decision| {
            run(&format!("{d}.{suffix}"), decide).0.unwrap()
        };
        let s = |v: &str| Value::String(Arc::new(v.to_string()));
        assert_eq!(eval("allowed()", &allow), Value::Bool(true));
        assert_eq!(eval("reason()", &allow), s("RBAC: allowed by RoleBinding"));
        assert_eq!(eval("errored()", &allow), Value::Bool(false));
        assert_eq!(eval("error()", &allow), s(""));
        assert_eq!(eval("allowed()", &deny), Value::Bool(false));
        assert_eq!(eval("reason()", &deny), s("no RBAC policy matched"));
        assert_eq!(eval("errored()", &deny), Value::Bool(false));
        assert_eq!(eval("allowed()", &failed), Value::Bool(false));
        assert_eq!(eval("errored()", &failed), Value::Bool(true));
        assert_eq!(
            eval("error()", &failed),
            s("subject access review failed: connection refused")
        );
        assert_eq!(eval("reason()", &failed), s(""));
    }

    #[test]
    fn service_account_and_request_resource() {
        let (result, _, asked) = run(
            "authorizer.serviceAccount('pizza-system', 'pizza-apiserver').group('').resource('configmaps')\
             .namespace('kube-system').check('get').allowed()",
            allow,
        );
        assert_eq!(result, Ok(Value::Bool(true)));
        assert_eq!(
            asked[0].subject,
            Subject {
                name: "system:serviceaccount:pizza-system:pizza-apiserver".into(),
                uid: String::new(),
                groups: vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:pizza-system".into()
                ],
                extra: BTreeMap::new(),
            }
        );
        let (result, _, asked) = run(
            "authorizer.requestResource.check('delete').allowed()",
            allow,
        );
        assert_eq!(result, Ok(Value::Bool(true)));
        assert_eq!(
            asked,
            vec![Request {
                subject: alice(),
                check: Check::Resource {
                    resource: pizzas(),
                    verb: "delete".into()
                },
            }]
        );
        // the request resource can be narrowed like any resource check
        let (_, _, asked) = run(
            "authorizer.requestResource.subresource('status').check('update')",
            allow,
        );
        assert!(
            matches!(&asked[0].check, Check::Resource { resource, .. } if resource.subresource == "status")
        );
    }

    #[test]
    fn upstream_errors() {
        for (source, want) in [
            ("authorizer.path('').check('get')", "path must not be empty"),
            (
                "authorizer.path('  ').check('get')",
                "path must not be empty",
            ),
            (
                "authorizer.group('apps').resource('').check('get')",
                "resource must not be empty",
            ),
            (
                "authorizer.group('apps').resource(' ').check('get')",
                "resource must not be empty",
            ),
            (
                "authorizer.serviceAccount('default', 'invalid@*name')",
                "Invalid service account name",
            ),
            (
                "authorizer.serviceAccount('not@a#valid!namespace', 'validname')",
                "Invalid service account namespace",
            ),
            (
                "authorizer.serviceAccount('Bad', 'Bad')",
                "Invalid service account name",
            ),
            (
                "authorizer.serviceAccount('a.b', 'validname')",
                "Invalid service account namespace",
            ),
        ] {
            let (result, _, asked) = run(source, allow);
            assert_eq!(message(result), want, "{source}");
            assert!(asked.is_empty(), "{source}");
        }
        // a subdomain is a valid service account name
        let (result, _, _) = run(
            "authorizer.serviceAccount('ns', 'a.b') == authorizer",
            allow,
        );
        assert_eq!(result, Ok(Value::Bool(false)));
        // without the variable
        let program = Program::compile("authorizer.path('/x').check('get')").unwrap();
        assert_eq!(
            program
                .evaluate(&Activation::new())
                .unwrap_err()
                .to_string(),
            "undeclared reference to 'authorizer' (in container '')"
        );
    }

    /// A decision kept in a variable (a policy's `variables`) answers like one made in place.
    #[test]
    fn decisions_held_in_variables() {
        let checks = Checks::new();
        let asked = authorizer(&checks, alice());
        let program = Program::compile("authorizer.path('/a').check('get')").unwrap();
        let activation = Activation::new().bind(AUTHORIZER, asked);
        let _ = program.evaluate(&activation);
        for request in checks.take_pending() {
            checks.answer(request.clone(), allow(&request));
        }
        let decision = program.evaluate(&activation).unwrap();
        let variables = Activation::new().bind_map("variables", [("d".to_string(), decision)]);
        let program =
            Program::compile("variables.d.allowed() && variables.d.reason().startsWith('RBAC')")
                .unwrap();
        assert_eq!(program.evaluate(&variables), Ok(Value::Bool(true)));
    }

    #[test]
    fn each_distinct_check_is_asked_once() {
        // each call is charged (three are over the limit), but the same check is asked once
        let (result, _, asked) = run(
            "authorizer.path('/a').check('get').allowed() && authorizer.path('/a').check('get').allowed()",
            allow,
        );
        assert_eq!(result, Ok(Value::Bool(true)));
        assert_eq!(asked.len(), 1);
        // a short circuit asks nothing
        let (result, _, asked) = run(
            "false && authorizer.path('/a').check('get').allowed()",
            allow,
        );
        assert_eq!(result, Ok(Value::Bool(false)));
        assert!(asked.is_empty());
        // a check that depends on another's answer is asked after it
        let (result, _, asked) = run(
            "authorizer.path(authorizer.path('/a').check('get').reason()).check('get').allowed()",
            |r| Decision {
                allowed: matches!(&r.check, Check::Path { path, .. } if path == "/b"),
                reason: "/b".into(),
                error: None,
            },
        );
        assert_eq!(result, Ok(Value::Bool(true)));
        assert_eq!(asked.len(), 2);
    }

    #[test]
    fn a_check_costs_what_upstream_charges() {
        let (result, cost, _) = run("authorizer.path('/a').check('get').allowed()", allow);
        assert_eq!(result, Ok(Value::Bool(true)));
        // 350000 for the check, 1 for each identifier and call around it
        assert!((CHECK_COST..CHECK_COST + 10).contains(&cost), "cost {cost}");
        // two checks fit the per-expression limit of 1,000,000, three do not
        let two = "authorizer.path('/a').check('get').allowed() && authorizer.path('/b').check('get').allowed()";
        assert_eq!(run(two, allow).0, Ok(Value::Bool(true)));
        let three = format!("{two} && authorizer.path('/c').check('get').allowed()");
        let (result, _, asked) = run(&three, allow);
        assert_eq!(result, Err(EvalError::CostLimitExceeded));
        assert_eq!(asked.len(), 2, "the third check is never asked");
        // the estimate counts the check too
        let estimate = Program::compile("authorizer.path('/a').check('get').allowed()")
            .unwrap()
            .estimate_cost(&[]);
        assert!(
            (CHECK_COST..CHECK_COST + 10).contains(&estimate.max),
            "{estimate:?}"
        );
    }
}
