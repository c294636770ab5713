//! Who is asking (authentication) and may they (authorization).
//!
//! Both are traits so that the authenticators of an aggregated server (x509 client certificates, front-proxy
//! request headers, delegated TokenReview) and its authorizers (delegated SubjectAccessReview with a cache) plug in
//! without touching the filter chain. For now every request is the anonymous user and [`AlwaysAllow`] decides,
//! behind the always-allow paths and the `system:masters` group as upstream sets them up.

mod authenticator;
mod authorizer;
mod token;
mod user;

pub use authenticator::{Anonymous, AuthenticationError, Authenticator, UnionAuthenticator};
pub(crate) use authorizer::go_quote;
pub use authorizer::{
    AlwaysAllow, AlwaysDeny, Attributes, AuthorizationError, Authorizer,
    DEFAULT_ALWAYS_ALLOW_PATHS, Decision, PathAuthorizer, PrivilegedGroups, UnionAuthorizer,
};
pub use token::BearerTokens;
pub use user::{
    ALL_AUTHENTICATED_GROUP, ALL_UNAUTHENTICATED_GROUP, ANONYMOUS_USER, SYSTEM_PRIVILEGED_GROUP,
    User,
};
