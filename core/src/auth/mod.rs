//! Who is asking (authentication) and may they (authorization).
//!
//! Both are traits so that the authenticators of an aggregated server plug in without touching the filter chain:
//! front-proxy request headers ([`RequestHeaders`]), client certificates ([`ClientCertificates`]), bearer tokens
//! checked by the core cluster ([`TokenReviewAuthenticator`]) or known to the server ([`BearerTokens`]), then
//! anonymous; and authorizers: always-allow paths, `system:masters`, then the core cluster's
//! [`SubjectAccessReviewAuthorizer`]. [`delegating`] builds them from upstream's flags.

#[cfg(feature = "cluster")]
mod access_review;
mod authenticator;
mod authorizer;
mod cache;
pub mod delegating;
pub mod impersonation;
mod request_header;
mod token;
#[cfg(feature = "cluster")]
mod token_review;
mod user;
mod x509;

#[cfg(feature = "cluster")]
pub use access_review::SubjectAccessReviewAuthorizer;
pub use authenticator::{
    Anonymous, Authenticated, AuthenticatedOrAnonymous, AuthenticationError, Authenticator,
    UnionAuthenticator, bearer_token,
};
pub use authorizer::{
    AlwaysAllow, AlwaysDeny, Attributes, AuthorizationError, Authorizer,
    DEFAULT_ALWAYS_ALLOW_PATHS, Decision, PathAuthorizer, PrivilegedGroups, SelectorRequirement,
    UnionAuthorizer,
};
pub use cache::ExpiringCache;
pub use delegating::{AuthenticationOptions, AuthorizationOptions, DelegatedAuthentication};
pub use request_header::{RequestHeaderConfig, RequestHeaders};
pub use token::BearerTokens;
#[cfg(feature = "cluster")]
pub use token_review::TokenReviewAuthenticator;
pub use user::{
    ALL_AUTHENTICATED_GROUP, ALL_UNAUTHENTICATED_GROUP, ANONYMOUS_USER, SYSTEM_PRIVILEGED_GROUP,
    User,
};
pub use x509::{CaBundle, ClientCertificates, Dynamic, PeerCertificates, Subject, subject};
