//! Authorization: may this user do this verb on this resource (or path)?

use async_trait::async_trait;

use super::{SYSTEM_PRIVILEGED_GROUP, User};
use apiserver_gotext::quote as go_quote;

/// Paths every user may read without asking the authorizer. Upstream's delegating authorization allows the
/// health paths; the discovery, version and OpenAPI paths are what upstream's RBAC grants
/// `system:unauthenticated` through `system:discovery` and `system:public-info-viewer`, which a server that
/// delegates to a cluster without those bindings would otherwise refuse.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: &[&str] = &[
    "/healthz",
    "/healthz/*",
    "/livez",
    "/livez/*",
    "/readyz",
    "/readyz/*",
    "/version",
    "/version/",
    "/openapi/*",
    "/api",
    "/api/",
    "/apis",
    "/apis/",
];

/// What is being asked, upstream's `authorizer.Attributes`: the user plus the parsed request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Who asks.
    pub user: User,
    /// The Kubernetes verb (resource requests) or lower-case HTTP method (non-resource requests).
    pub verb: String,
    /// Whether this is about an API resource; otherwise `path` is what is authorized.
    pub is_resource_request: bool,
    /// The namespace, empty for cluster scope.
    pub namespace: String,
    /// The API group, empty for the core group.
    pub api_group: String,
    /// The API version.
    pub api_version: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource.
    pub subresource: String,
    /// The object name, if the request names one.
    pub name: String,
    /// The URL path (for non-resource requests).
    pub path: String,
    /// What a field selector narrows the question to (upstream's `GetFieldSelector`); empty for nothing.
    pub field_selector: Vec<SelectorRequirement>,
    /// What a label selector narrows the question to (upstream's `GetLabelSelector`); empty for nothing.
    pub label_selector: Vec<SelectorRequirement>,
}

/// One selector requirement as a SubjectAccessReview carries it: a key, `In`, `NotIn`, `Exists` or
/// `DoesNotExist`, and values.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SelectorRequirement {
    /// The field path or label key.
    pub key: String,
    /// The operator.
    pub operator: String,
    /// The values (none for `Exists` and `DoesNotExist`).
    pub values: Vec<String>,
}

impl Attributes {
    /// Upstream's forbidden text (`responsewriters.forbiddenMessage`), e.g.
    /// `User "x" cannot get resource "pizzas" in API group "g" in the namespace "ns"`.
    pub fn forbidden_message(&self) -> String {
        let user = &self.user.name;
        if !self.is_resource_request {
            return format!(
                "User {} cannot {} path {}",
                go_quote(user),
                self.verb,
                go_quote(&self.path)
            );
        }
        let mut resource = self.resource.clone();
        if !self.subresource.is_empty() {
            resource = format!("{resource}/{}", self.subresource);
        }
        if self.namespace.is_empty() {
            format!(
                "User {} cannot {} resource {} in API group {} at the cluster scope",
                go_quote(user),
                self.verb,
                go_quote(&resource),
                go_quote(&self.api_group)
            )
        } else {
            format!(
                "User {} cannot {} resource {} in API group {} in the namespace {}",
                go_quote(user),
                self.verb,
                go_quote(&resource),
                go_quote(&self.api_group),
                go_quote(&self.namespace)
            )
        }
    }
}

/// An authorizer's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed: stop asking.
    Allow,
    /// Denied: stop asking, reply 403.
    Deny,
    /// This authorizer has no opinion: ask the next; if none allows, reply 403.
    NoOpinion,
}

/// The authorizer could not decide (e.g. the SubjectAccessReview call failed). Unless another authorizer
/// allows, the request gets a 500.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuthorizationError(pub String);

/// Decides whether a request may proceed. The `String` is a reason, appended to the 403 message when set.
#[async_trait]
pub trait Authorizer: Send + Sync + 'static {
    /// Decides on one request.
    async fn authorize(
        &self,
        attributes: &Attributes,
    ) -> Result<(Decision, String), AuthorizationError>;
}

/// Allows everything. The authorizer of this stage of the project, and of tests.
#[derive(Clone, Debug, Default)]
pub struct AlwaysAllow;

#[async_trait]
impl Authorizer for AlwaysAllow {
    async fn authorize(&self, _: &Attributes) -> Result<(Decision, String), AuthorizationError> {
        Ok((Decision::Allow, String::new()))
    }
}

/// Denies everything that is not allowed earlier in the chain (always-allow paths, `system:masters`).
#[derive(Clone, Debug, Default)]
pub struct AlwaysDeny;

#[async_trait]
impl Authorizer for AlwaysDeny {
    async fn authorize(&self, _: &Attributes) -> Result<(Decision, String), AuthorizationError> {
        Ok((Decision::Deny, String::new()))
    }
}

/// Allows non-resource requests to the given paths: exact, or a prefix when the entry ends in `*`
/// (upstream's `path.NewAuthorizer`; a leading `/` is optional).
#[derive(Clone, Debug)]
pub struct PathAuthorizer {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl PathAuthorizer {
    /// Builds the authorizer; `*` anywhere but at the end is an error.
    pub fn new<S: AsRef<str>>(paths: &[S]) -> Result<Self, AuthorizationError> {
        let mut exact = Vec::new();
        let mut prefixes = Vec::new();
        for p in paths {
            let p = p.as_ref().strip_prefix('/').unwrap_or(p.as_ref());
            if p.is_empty() {
                exact.push(String::new());
                continue;
            }
            if p[..p.len() - 1].contains('*') {
                return Err(AuthorizationError(format!(
                    "only trailing * allowed in {}",
                    go_quote(p)
                )));
            }
            match p.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_string()),
                None => exact.push(p.to_string()),
            }
        }
        Ok(PathAuthorizer { exact, prefixes })
    }

    fn allows(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').unwrap_or(path);
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p))
    }
}

#[async_trait]
impl Authorizer for PathAuthorizer {
    async fn authorize(&self, a: &Attributes) -> Result<(Decision, String), AuthorizationError> {
        if !a.is_resource_request && self.allows(&a.path) {
            Ok((Decision::Allow, String::new()))
        } else {
            Ok((Decision::NoOpinion, String::new()))
        }
    }
}

/// Allows members of the given groups to do anything (upstream's `AlwaysAllowGroups`, `system:masters`).
#[derive(Clone, Debug)]
pub struct PrivilegedGroups(pub Vec<String>);

impl Default for PrivilegedGroups {
    fn default() -> Self {
        PrivilegedGroups(vec![SYSTEM_PRIVILEGED_GROUP.to_string()])
    }
}

#[async_trait]
impl Authorizer for PrivilegedGroups {
    async fn authorize(&self, a: &Attributes) -> Result<(Decision, String), AuthorizationError> {
        if self.0.iter().any(|g| a.user.in_group(g)) {
            Ok((Decision::Allow, String::new()))
        } else {
            Ok((Decision::NoOpinion, String::new()))
        }
    }
}

/// Asks authorizers in order: the first `Allow` or `Deny` decides. Errors are kept and returned only when no
/// authorizer decided, as upstream's `union` authorizer does.
#[derive(Default)]
pub struct UnionAuthorizer {
    authorizers: Vec<Box<dyn Authorizer>>,
}

impl UnionAuthorizer {
    /// An empty union (no opinion on anything).
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an authorizer.
    pub fn with(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizers.push(Box::new(authorizer));
        self
    }

    /// Appends a boxed authorizer.
    pub fn with_boxed(mut self, authorizer: Box<dyn Authorizer>) -> Self {
        self.authorizers.push(authorizer);
        self
    }
}

#[async_trait]
impl Authorizer for UnionAuthorizer {
    async fn authorize(&self, a: &Attributes) -> Result<(Decision, String), AuthorizationError> {
        let mut reasons = Vec::new();
        let mut errors = Vec::new();
        for authorizer in &self.authorizers {
            match authorizer.authorize(a).await {
                Ok((Decision::NoOpinion, reason)) => {
                    if !reason.is_empty() {
                        reasons.push(reason);
                    }
                }
                Ok(decided) => return Ok(decided),
                Err(e) => errors.push(e.0),
            }
        }
        if errors.is_empty() {
            Ok((Decision::NoOpinion, reasons.join("\n")))
        } else {
            Err(AuthorizationError(errors.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `get` of a non-resource path.
    fn path(path: &str, user: User) -> Attributes {
        Attributes {
            user,
            verb: "get".into(),
            path: path.into(),
            ..Attributes::default()
        }
    }

    /// A request about object `x` of a resource in group `g` (`namespace` empty for cluster scope).
    fn resource(
        verb: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        user: User,
    ) -> Attributes {
        Attributes {
            user,
            verb: verb.into(),
            is_resource_request: true,
            namespace: namespace.into(),
            api_group: "g".into(),
            api_version: "v1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: "x".into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn forbidden_messages() {
        let alice = User {
            name: "alice".into(),
            ..User::default()
        };
        assert_eq!(
            resource("get", "pizzas", "", "ns", alice.clone()).forbidden_message(),
            r#"User "alice" cannot get resource "pizzas" in API group "g" in the namespace "ns""#
        );
        assert_eq!(
            resource("update", "toppings", "status", "", alice.clone()).forbidden_message(),
            r#"User "alice" cannot update resource "toppings/status" in API group "g" at the cluster scope"#
        );
        assert_eq!(
            path("/metrics", alice).forbidden_message(),
            r#"User "alice" cannot get path "/metrics""#
        );
    }

    #[tokio::test]
    async fn path_authorizer() {
        let p = PathAuthorizer::new(DEFAULT_ALWAYS_ALLOW_PATHS).unwrap();
        for (path, allowed) in [
            ("/healthz", true),
            ("/healthz/ping", true),
            ("/readyz/poststarthook/x", true),
            ("/livez", true),
            ("/version", true),
            ("/openapi/v2", true),
            ("/openapi/v3/apis/g/v1", true),
            ("/apis", true),
            ("/api", true),
            ("/apis/g", false),
            ("/metrics", false),
            ("/healthzfoo", false),
            ("/", false),
        ] {
            let (d, _) = p
                .authorize(&self::path(path, User::anonymous()))
                .await
                .unwrap();
            assert_eq!(d == Decision::Allow, allowed, "{path}");
        }
        // Resource requests are never path-allowed.
        let (d, _) = p
            .authorize(&resource("list", "pizzas", "", "", User::anonymous()))
            .await
            .unwrap();
        assert_eq!(d, Decision::NoOpinion);
        assert!(PathAuthorizer::new(&["/a*b"]).is_err());
    }

    #[tokio::test]
    async fn union_and_groups() {
        let chain = UnionAuthorizer::new()
            .with(PrivilegedGroups::default())
            .with(AlwaysDeny);
        let admin = User {
            name: "admin".into(),
            groups: vec![SYSTEM_PRIVILEGED_GROUP.into()],
            ..User::default()
        };
        let a = resource("deletecollection", "pizzas", "", "", admin);
        assert_eq!(chain.authorize(&a).await.unwrap().0, Decision::Allow);
        let a = resource("deletecollection", "pizzas", "", "", User::anonymous());
        assert_eq!(chain.authorize(&a).await.unwrap().0, Decision::Deny);
    }
}
