//! Authentication: turning a request into a [`User`].

use async_trait::async_trait;
use http::request::Parts;

use super::User;

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
        let mut errors = Vec::new();
        for authenticator in &self.authenticators {
            match authenticator.authenticate(request).await {
                Ok(Some(user)) => return Ok(Some(user)),
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
}
