//! Impersonation (`Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-<key>`): the
//! authenticated user asks to act as someone else. Each part of the requested identity is authorized as the verb
//! `impersonate` on `users`, `serviceaccounts`, `groups`, `uids` or `userextras/<key>` (upstream's
//! `WithImpersonation`); when every part is allowed the request goes on as the impersonated user.

use std::collections::BTreeMap;

use http::HeaderMap;

use super::request_header::{clear_prefixed, extra_from_headers, header_text};
use super::{ALL_AUTHENTICATED_GROUP, ALL_UNAUTHENTICATED_GROUP, ANONYMOUS_USER, Attributes, User};

/// The user to act as.
pub const IMPERSONATE_USER: &str = "Impersonate-User";
/// A group to act as (repeated).
pub const IMPERSONATE_GROUP: &str = "Impersonate-Group";
/// The UID to act as.
pub const IMPERSONATE_UID: &str = "Impersonate-Uid";
/// The prefix of extra attributes to act with.
pub const IMPERSONATE_EXTRA_PREFIX: &str = "Impersonate-Extra-";

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// What the headers ask for: the identity to act as, and each permission that must be checked first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Impersonation {
    /// The user the request continues as.
    pub user: User,
    /// One authorization question per requested part, asked as the real user.
    pub checks: Vec<Attributes>,
}

/// Reads the impersonation headers. `Ok(None)`: none present. `Err`: a malformed combination (400).
pub fn requested(headers: &HeaderMap, requestor: &User) -> Result<Option<Impersonation>, String> {
    let value = |name: &str| headers.get(name).map(header_text);
    let username = value(IMPERSONATE_USER).filter(|u| !u.is_empty());
    let groups: Vec<String> = headers
        .get_all(IMPERSONATE_GROUP)
        .iter()
        .map(header_text)
        .collect();
    let uid = value(IMPERSONATE_UID).filter(|u| !u.is_empty());
    let extra = extra_from_headers(headers, &[IMPERSONATE_EXTRA_PREFIX.to_string()]);

    let Some(username) = username else {
        if !groups.is_empty() || !extra.is_empty() || uid.is_some() {
            let mut asked = Vec::new();
            asked.extend(groups.iter().map(|g| format!("{IMPERSONATE_GROUP}={g}")));
            asked.extend(
                extra
                    .keys()
                    .map(|k| format!("{IMPERSONATE_EXTRA_PREFIX}{k}")),
            );
            asked.extend(uid.iter().map(|u| format!("{IMPERSONATE_UID}={u}")));
            return Err(format!(
                "requested [{}] without impersonating a user",
                asked.join(" ")
            ));
        }
        return Ok(None);
    };

    let check =
        |resource: &str, subresource: &str, group: &str, namespace: &str, name: &str| Attributes {
            user: requestor.clone(),
            verb: "impersonate".into(),
            is_resource_request: true,
            namespace: namespace.into(),
            api_group: group.into(),
            api_version: "v1".into(),
            resource: resource.into(),
            subresource: subresource.into(),
            name: name.into(),
            ..Attributes::default()
        };
    let mut checks = Vec::new();
    let mut impersonated_groups = groups.clone();
    match username
        .strip_prefix(SERVICE_ACCOUNT_PREFIX)
        .and_then(|rest| rest.split_once(':'))
    {
        Some((namespace, name)) => {
            checks.push(check("serviceaccounts", "", "", namespace, name));
            if groups.is_empty() {
                impersonated_groups = vec![
                    "system:serviceaccounts".to_string(),
                    format!("system:serviceaccounts:{namespace}"),
                ];
            }
        }
        None => checks.push(check("users", "", "", "", &username)),
    }
    for group in &groups {
        checks.push(check("groups", "", "", "", group));
    }
    for (key, values) in &extra {
        for v in values {
            checks.push(check("userextras", key, "authentication.k8s.io", "", v));
        }
    }
    if let Some(uid) = &uid {
        checks.push(check("uids", "", "authentication.k8s.io", "", uid));
    }

    if username != ANONYMOUS_USER {
        if !impersonated_groups
            .iter()
            .any(|g| g == ALL_AUTHENTICATED_GROUP || g == ALL_UNAUTHENTICATED_GROUP)
        {
            impersonated_groups.push(ALL_AUTHENTICATED_GROUP.to_string());
        }
    } else if !impersonated_groups
        .iter()
        .any(|g| g == ALL_UNAUTHENTICATED_GROUP)
    {
        impersonated_groups.push(ALL_UNAUTHENTICATED_GROUP.to_string());
    }
    Ok(Some(Impersonation {
        user: User {
            name: username,
            uid: uid.unwrap_or_default(),
            groups: impersonated_groups,
            extra: extra.into_iter().collect::<BTreeMap<_, _>>(),
        },
        checks,
    }))
}

/// Removes every impersonation header once it has been acted on.
pub fn clear_headers(headers: &mut HeaderMap) {
    headers.remove(IMPERSONATE_USER);
    headers.remove(IMPERSONATE_GROUP);
    headers.remove(IMPERSONATE_UID);
    clear_prefixed(headers, &[IMPERSONATE_EXTRA_PREFIX.to_string()]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn admin() -> User {
        User {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..User::default()
        }
    }

    #[test]
    fn users_groups_and_extras() {
        assert_eq!(requested(&headers(&[]), &admin()).unwrap(), None);
        let i = requested(
            &headers(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Group", "devs"),
                ("Impersonate-Extra-Scopes", "view"),
            ]),
            &admin(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(i.user.name, "bob");
        assert_eq!(i.user.groups, ["devs", "system:authenticated"]);
        assert_eq!(i.user.extra["scopes"], ["view"]);
        let asked: Vec<_> = i
            .checks
            .iter()
            .map(|c| (c.resource.as_str(), c.subresource.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(
            asked,
            [
                ("users", "", "bob"),
                ("groups", "", "devs"),
                ("userextras", "scopes", "view")
            ]
        );
        assert_eq!(
            i.checks[0].forbidden_message(),
            r#"User "admin" cannot impersonate resource "users" in API group "" at the cluster scope"#
        );
    }

    #[test]
    fn service_accounts_get_their_groups() {
        let i = requested(
            &headers(&[("Impersonate-User", "system:serviceaccount:ns:robot")]),
            &admin(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            i.user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        assert_eq!(i.checks[0].resource, "serviceaccounts");
        assert_eq!(i.checks[0].namespace, "ns");
        assert_eq!(i.checks[0].name, "robot");
    }

    /// `kubectl --as=josé` sends the name as raw UTF-8: it was ignored (the request went on as the requestor).
    #[test]
    fn non_ascii_values_are_taken_as_sent() {
        let mut h = HeaderMap::new();
        h.append(
            IMPERSONATE_USER,
            http::HeaderValue::from_bytes("josé".as_bytes()).unwrap(),
        );
        h.append(
            IMPERSONATE_GROUP,
            http::HeaderValue::from_bytes("équipe".as_bytes()).unwrap(),
        );
        let i = requested(&h, &admin()).unwrap().unwrap();
        assert_eq!(i.user.name, "josé");
        assert_eq!(i.user.groups, ["équipe", "system:authenticated"]);
        assert_eq!(i.checks[0].name, "josé");
    }

    #[test]
    fn groups_without_a_user_are_malformed() {
        let err = requested(&headers(&[("Impersonate-Group", "devs")]), &admin()).unwrap_err();
        assert_eq!(
            err,
            "requested [Impersonate-Group=devs] without impersonating a user"
        );
    }
}
