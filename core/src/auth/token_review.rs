//! Bearer tokens checked by the core cluster: a `TokenReview` (authentication.k8s.io/v1) per token, remembered
//! for `--authentication-token-webhook-cache-ttl` (upstream's delegating token authenticator and its cache).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use http::request::Parts;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

use super::cache::ExpiringCache;
use super::{AuthenticationError, Authenticator, User, bearer_token};
use crate::metrics::{Delegated, Metrics};

/// How many tokens are remembered at most (upstream's token cache holds a few thousand).
const CACHE_CAPACITY: usize = 4096;

/// The answer remembered for a token: who it is, or that it is not valid. Failed reviews are not remembered.
type Answer = Option<User>;

/// Authenticates `Authorization: Bearer` tokens by asking the core cluster.
pub struct TokenReviewAuthenticator {
    reviews: Api<TokenReview>,
    audiences: Vec<String>,
    ttl: Duration,
    cache: ExpiringCache<[u8; 32], Answer>,
    metrics: Option<Arc<Metrics>>,
}

impl TokenReviewAuthenticator {
    /// Reviews tokens through `client`, remembering answers for `ttl`; `audiences` are the API audiences the
    /// token must be meant for (empty: the cluster's default).
    pub fn new(client: kube::Client, ttl: Duration, audiences: Vec<String>) -> Self {
        TokenReviewAuthenticator {
            reviews: Api::all(client),
            audiences,
            ttl,
            cache: ExpiringCache::new(CACHE_CAPACITY),
            metrics: None,
        }
    }

    /// Counts reviews in `apiserver_delegated_authn_request_*` and cache lookups in
    /// `authentication_token_cache_request_total`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    async fn review(&self, token: &str) -> Result<Answer, AuthenticationError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: (!self.audiences.is_empty()).then(|| self.audiences.clone()),
            },
            ..TokenReview::default()
        };
        let params = PostParams::default();
        let reviewed = with_retries(|| {
            counted(
                self.metrics.as_deref(),
                Delegated::Authentication,
                self.reviews.create(&params, &review),
            )
        })
        .await
        .map_err(|e| AuthenticationError(format!("token review failed: {e}")))?;
        let status = reviewed.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return match status.error.filter(|e| !e.is_empty()) {
                // The cluster could not decide: an error, not remembered.
                Some(error) if status.authenticated.is_none() => Err(AuthenticationError(error)),
                _ => Ok(None),
            };
        }
        let info = status.user.unwrap_or_default();
        Ok(Some(User {
            name: info.username.unwrap_or_default(),
            uid: info.uid.unwrap_or_default(),
            groups: info.groups.unwrap_or_default(),
            extra: info.extra.unwrap_or_default(),
        }))
    }
}

#[async_trait]
impl Authenticator for TokenReviewAuthenticator {
    async fn authenticate(&self, request: &Parts) -> Result<Option<User>, AuthenticationError> {
        let Some(token) = bearer_token(request) else {
            return Ok(None);
        };
        let key = token_key(token);
        let cached = self.cache.get(&key);
        if let Some(metrics) = &self.metrics {
            metrics.token_cache_lookup(cached.is_some());
        }
        let answer = match cached {
            Some(answer) => answer,
            None => {
                let answer = self.review(token).await?;
                self.cache.insert(key, answer.clone(), self.ttl);
                answer
            }
        };
        match answer {
            Some(user) => Ok(Some(user)),
            None => Err(AuthenticationError("invalid bearer token".into())),
        }
    }
}

/// Tokens are remembered by their SHA-256, never as they are.
fn token_key(token: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut key = [0u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

/// Runs one review call, counting it in `metrics` by its HTTP code (`<error>` when there was none).
pub(crate) async fn counted<T>(
    metrics: Option<&Metrics>,
    kind: Delegated,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, kube::Error> {
    let started = Instant::now();
    let result = call.await;
    if let Some(metrics) = metrics {
        let code = match &result {
            Ok(_) => "201".to_string(),
            Err(kube::Error::Api(status)) => status.code.to_string(),
            Err(_) => "<error>".to_string(),
        };
        metrics.delegated_request(kind, &code, started.elapsed());
    }
    result
}

/// Calls `call` up to three times while the failure is one that may pass (the connection, a 5xx, a 429), as
/// upstream's webhooks retry with a short backoff; a 4xx answer (e.g. no permission to create reviews) is final.
pub(crate) async fn with_retries<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let mut delay = Duration::from_millis(200);
    let mut attempt = 1;
    loop {
        match call().await {
            Ok(value) => return Ok(value),
            Err(kube::Error::Api(status)) if status.code < 500 && status.code != 429 => {
                return Err(kube::Error::Api(status));
            }
            Err(e) if attempt >= 3 => return Err(e),
            Err(e) => {
                tracing::debug!(attempt, "core cluster call failed, retrying: {e}");
                tokio::time::sleep(delay).await;
                delay *= 2;
                attempt += 1;
            }
        }
    }
}
