//! Authentication: turning a request into a [`User`].

use async_trait::async_trait;
use http::HeaderMap;
use http::request::Parts;

use super::{ALL_AUTHENTICATED_GROUP, ALL_UNAUTHENTICATED_GROUP, ANONYMOUS_USER, User};

/// An authenticator failed in a way that must reject the request with 401 (a bad token, a certificate that does
/// not verify), as opposed to not recognising the request at all (`Ok(None)`).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct AuthenticationError(pub String);

/// Finds out who made a request. Implementations look at headers, the TLS peer certificates (in the request's
/// extensions as [`crate::server::ConnectionInfo`]) or ask the core API server.
///
/// `Ok(Some(user))`: authenticated. `Ok(None)`: this authenticator does not apply, try the next.
/// `Err`: the credentials were presented but are not valid.
#[async_trait]
pub trait Authenticator: Send + Sync + 'static {
    /// Authenticates one request from its head (the body is never needed).
    async fn authenticate(&self, request: &Parts) -> Result<Option<User>, AuthenticationError>;

    /// Whether the users this authenticator finds are vouched for by an authenticating front proxy
    /// (kube-apiserver's aggregator), which also decided whether the request is traced.
    fn is_front_proxy(&self) -> bool {
        false
    }

    /// [`Authenticator::authenticate`], saying whether a front proxy vouched for the user.
    async fn authenticate_with_source(
        &self,
        request: &Parts,
    ) -> Result<Option<Authenticated>, AuthenticationError> {
        Ok(self.authenticate(request).await?.map(|user| Authenticated {
            user,
            via_front_proxy: self.is_front_proxy(),
        }))
    }

    /// Removes the headers this authenticator reads identities from (front-proxy headers), so that nothing
    /// after authentication can take them for one. Called on every request that goes on.
    fn clear_headers(&self, _headers: &mut HeaderMap) {}
}

/// An authenticated user and who vouched for it.
#[derive(Clone, Debug)]
pub struct Authenticated {
    /// The user.
    pub user: User,
    /// Whether an authenticating front proxy (request headers on a verified proxy connection) named the user.
    pub via_front_proxy: bool,
}

/// Authenticates every request as [`User::anonymous`]. Upstream puts it last in the union when anonymous access
/// is enabled.
#[derive(Clone, Debug, Default)]
pub struct Anonymous;

#[async_trait]
impl Authenticator for Anonymous {
    async fn authenticate(&self, _request: &Parts) -> Result<Option<User>, AuthenticationError> {
        Ok(Some(User::anonymous()))
    }
}

/// Tries authenticators in order; the first that recognises the request wins. Errors are remembered and
/// returned only if no later authenticator succeeds, as upstream's `union` authenticator does.
#[derive(Default)]
pub struct UnionAuthenticator {
    authenticators: Vec<Box<dyn Authenticator>>,
}

impl UnionAuthenticator {
    /// An empty union (authenticates nobody).
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends an authenticator.
    pub fn with(mut self, authenticator: impl Authenticator) -> Self {
        self.authenticators.push(Box::new(authenticator));
        self
    }

    /// Appends a boxed authenticator.
    pub fn with_boxed(mut self, authenticator: Box<dyn Authenticator>) -> Self {
        self.authenticators.push(authenticator);
        self
    }
}

#[async_trait]
impl Authenticator for UnionAuthenticator {
    async fn authenticate(&self, request: &Parts) -> Result<Option<User>, AuthenticationError> {
        Ok(self
            .authenticate_with_source(request)
            .await?
            .map(|a| a.user))
    }

    async fn authenticate_with_source(
        &self,
        request: &Parts,
    ) -> Result<Option<Authenticated>, AuthenticationError> {
        let mut errors = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate_with_source(request).await {
                Ok(Some(found)) => return Ok(Some(found)),
                Ok(None) => {}
                Err(e) => errors.push(e.0),
            }
        }
        if errors.is_empty() {
            Ok(None)
        } else {
            Err(AuthenticationError(errors.join(", ")))
        }
    }

    fn clear_headers(&self, headers: &mut HeaderMap) {
        for authenticator in &self.authenticators {
            authenticator.clear_headers(headers);
        }
    }
}

/// The top of upstream's delegating authenticator: the authenticators' union, whose users get
/// `system:authenticated`, and then, if enabled, anonymous for requests nobody claimed. A credential that was
/// presented and failed (a bad token, a certificate that does not verify) is 401, never anonymous (upstream's
/// `NewFailOnError` around the anonymous authenticator).
pub struct AuthenticatedOrAnonymous {
    inner: Box<dyn Authenticator>,
    anonymous: bool,
}

impl AuthenticatedOrAnonymous {
    /// `inner` (usually a [`UnionAuthenticator`]), with anonymous requests allowed or not.
    pub fn new(inner: Box<dyn Authenticator>, anonymous: bool) -> Self {
        AuthenticatedOrAnonymous { inner, anonymous }
    }
}

#[async_trait]
impl Authenticator for AuthenticatedOrAnonymous {
    async fn authenticate(&self, request: &Parts) -> Result<Option<User>, AuthenticationError> {
        Ok(self
            .authenticate_with_source(request)
            .await?
            .map(|a| a.user))
    }

    async fn authenticate_with_source(
        &self,
        request: &Parts,
    ) -> Result<Option<Authenticated>, AuthenticationError> {
        match self.inner.authenticate_with_source(request).await? {
            Some(mut found) => {
                let user = &mut found.user;
                let marked = user.name == ANONYMOUS_USER
                    || user
                        .groups
                        .iter()
                        .any(|g| g == ALL_AUTHENTICATED_GROUP || g == ALL_UNAUTHENTICATED_GROUP);
                if !marked {
                    user.groups.push(ALL_AUTHENTICATED_GROUP.to_string());
                }
                Ok(Some(found))
            }
            None if self.anonymous => Ok(Some(Authenticated {
                user: User::anonymous(),
                via_front_proxy: false,
            })),
            None => Ok(None),
        }
    }

    fn clear_headers(&self, headers: &mut HeaderMap) {
        self.inner.clear_headers(headers);
    }
}

/// The token of an `Authorization: Bearer <token>` header, as upstream's bearer-token authenticator reads it:
/// the scheme in any case, one space, a non-empty token. Anything else (no header, `Basic ...`, an empty token)
/// is no bearer token at all, so the request is left to the other authenticators.
pub fn bearer_token(request: &Parts) -> Option<&str> {
    let value = request
        .headers
        .get(http::header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    struct Fixed(Result<Option<User>, &'static str>);

    #[async_trait]
    impl Authenticator for Fixed {
        async fn authenticate(&self, _: &Parts) -> Result<Option<User>, AuthenticationError> {
            self.0.clone().map_err(|e| AuthenticationError(e.into()))
        }
    }

    /// A request head with this `Authorization` header, if any.
    pub(crate) fn parts(authorization: Option<&str>) -> Parts {
        let mut request = http::Request::builder().uri("/apis");
        if let Some(a) = authorization {
            request = request.header("authorization", a);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[tokio::test]
    async fn failed_credentials_are_never_anonymous() {
        let failing =
            AuthenticatedOrAnonymous::new(Box::new(Fixed(Err("invalid bearer token"))), true);
        assert!(failing.authenticate(&parts(None)).await.is_err());
        let nobody = AuthenticatedOrAnonymous::new(Box::new(Fixed(Ok(None))), true);
        assert_eq!(
            nobody.authenticate(&parts(None)).await.unwrap(),
            Some(User::anonymous())
        );
        let closed = AuthenticatedOrAnonymous::new(Box::new(Fixed(Ok(None))), false);
        assert_eq!(closed.authenticate(&parts(None)).await.unwrap(), None);
        let alice = User {
            name: "alice".into(),
            groups: vec!["devs".into()],
            ..User::default()
        };
        let known = AuthenticatedOrAnonymous::new(Box::new(Fixed(Ok(Some(alice)))), true);
        assert_eq!(
            known
                .authenticate(&parts(None))
                .await
                .unwrap()
                .unwrap()
                .groups,
            ["devs", "system:authenticated"]
        );
    }

    #[test]
    fn bearer_tokens_as_upstream_reads_them() {
        for (header, token) in [
            (Some("Bearer abc"), Some("abc")),
            (Some("bearer abc"), Some("abc")),
            (Some("BEARER abc extra"), Some("abc")),
            (Some("Bearer "), None),
            (Some("Bearer  abc"), None),
            (Some("Basic YTpi"), None),
            (Some("Bearer"), None),
            (None, None),
        ] {
            assert_eq!(bearer_token(&parts(header)), token, "{header:?}");
        }
    }
}
