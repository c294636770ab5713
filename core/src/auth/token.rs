//! Static bearer tokens (upstream `--token-auth-file`): a server that writes its own kubeconfig gives its admin a
//! token it recognises.

use std::collections::HashMap;

use async_trait::async_trait;
use http::request::Parts;

use super::{AuthenticationError, Authenticator, User, bearer_token};

/// Recognises `Authorization: Bearer <token>` for a fixed set of tokens. Other tokens are an error (401), no
/// token is "not mine" (the next authenticator decides).
#[derive(Clone, Debug, Default)]
pub struct BearerTokens {
    tokens: HashMap<String, User>,
}

impl BearerTokens {
    /// No token known: every token is "not mine".
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a token and the user it stands for.
    pub fn with(mut self, token: impl Into<String>, user: User) -> Self {
        self.tokens.insert(token.into(), user);
        self
    }
}

#[async_trait]
impl Authenticator for BearerTokens {
    async fn authenticate(&self, request: &Parts) -> Result<Option<User>, AuthenticationError> {
        let Some(token) = bearer_token(request) else {
            return Ok(None);
        };
        match self.tokens.get(token) {
            Some(user) => Ok(Some(user.clone())),
            None => Err(AuthenticationError("invalid bearer token".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::authenticator::tests::parts;

    #[tokio::test]
    async fn known_unknown_and_missing_tokens() {
        let admin = User {
            name: "admin".into(),
            ..User::default()
        };
        let tokens = BearerTokens::new().with("s3cret", admin.clone());
        assert_eq!(
            tokens
                .authenticate(&parts(Some("Bearer s3cret")))
                .await
                .unwrap(),
            Some(admin)
        );
        assert!(
            tokens
                .authenticate(&parts(Some("Bearer nope")))
                .await
                .is_err()
        );
        assert_eq!(tokens.authenticate(&parts(None)).await.unwrap(), None);
        assert_eq!(
            tokens
                .authenticate(&parts(Some("Basic eA==")))
                .await
                .unwrap(),
            None
        );
    }
}
