//! The authenticated identity of a request, as upstream's `user.Info`.

use std::collections::BTreeMap;

/// The user name of requests that no authenticator claimed.
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of every anonymous request.
pub const ALL_UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group of every authenticated (non-anonymous) request.
pub const ALL_AUTHENTICATED_GROUP: &str = "system:authenticated";
/// Members may do anything (upstream's `AlwaysAllowGroups` default).
pub const SYSTEM_PRIVILEGED_GROUP: &str = "system:masters";

/// Who made a request. Put in the request's extensions by the authentication filter; handlers take it as an
/// extractor (`async fn h(user: User)`), admission and audit read it from there too.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct User {
    /// The name that identifies the user among all active users (`system:anonymous`, `alice`, ...).
    pub name: String,
    /// A unique value that identifies this user across time, if the authenticator knows one.
    pub uid: String,
    /// Groups the user belongs to.
    pub groups: Vec<String>,
    /// Any additional information the authenticator provided (scopes, front-proxy `X-Remote-Extra-*`).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// The anonymous user: `system:anonymous` in group `system:unauthenticated`.
    pub fn anonymous() -> Self {
        User {
            name: ANONYMOUS_USER.to_string(),
            groups: vec![ALL_UNAUTHENTICATED_GROUP.to_string()],
            ..User::default()
        }
    }

    /// Whether the user is in `group`.
    pub fn in_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }
}
