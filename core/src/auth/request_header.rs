//! The front-proxy (request-header) authenticator: kube-apiserver's aggregator authenticates the user itself and
//! passes who it is in `X-Remote-User`, `X-Remote-Group` and `X-Remote-Extra-*`, on a connection authenticated by
//! its client certificate `front-proxy-client` from the request-header CA. Those headers are believed only then
//! (upstream `headerrequest` behind `x509request.NewDynamicCAVerifier`).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use http::request::Parts;
use http::{HeaderMap, HeaderValue};

use super::x509::{CaBundle, Dynamic, peer_certificates, subject};
use super::{AuthenticationError, Authenticator, User};

/// Upstream's default header names for the delegating authenticator.
pub const DEFAULT_USERNAME_HEADERS: &[&str] = &["X-Remote-User"];
/// Upstream's default group header names.
pub const DEFAULT_GROUP_HEADERS: &[&str] = &["X-Remote-Group"];
/// Upstream's default prefixes of extra headers.
pub const DEFAULT_EXTRA_HEADER_PREFIXES: &[&str] = &["X-Remote-Extra-"];

/// What makes a request-header identity believable, and where it is read from.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestHeaderConfig {
    /// The CA that must have signed the proxy's client certificate.
    pub ca: CaBundle,
    /// CNs the proxy's certificate may have; empty allows any certificate from the CA.
    pub allowed_names: Vec<String>,
    /// Headers holding the user name; the first one with a value wins.
    pub username_headers: Vec<String>,
    /// Headers holding the user's UID; the first one with a value wins.
    pub uid_headers: Vec<String>,
    /// Headers holding groups: every value of every one of them.
    pub group_headers: Vec<String>,
    /// Prefixes of headers holding extra attributes: `<prefix><percent-encoded key>: value`.
    pub extra_header_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// Settings with upstream's default header names.
    pub fn with_defaults(ca: CaBundle, allowed_names: Vec<String>) -> Self {
        let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
        RequestHeaderConfig {
            ca,
            allowed_names,
            username_headers: strings(DEFAULT_USERNAME_HEADERS),
            uid_headers: Vec::new(),
            group_headers: strings(DEFAULT_GROUP_HEADERS),
            extra_header_prefixes: strings(DEFAULT_EXTRA_HEADER_PREFIXES),
        }
    }

    /// Removes every header these settings read, so nothing after authentication (handlers, admission,
    /// webhooks) can mistake them for an identity.
    pub fn clear_headers(&self, headers: &mut HeaderMap) {
        for name in self
            .username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
        {
            headers.remove(name.as_str());
        }
        clear_prefixed(headers, &self.extra_header_prefixes);
    }
}

/// Removes every header whose name starts with one of `prefixes` (case-insensitively).
pub(crate) fn clear_prefixed(headers: &mut HeaderMap, prefixes: &[String]) {
    if prefixes.is_empty() {
        return;
    }
    let doomed: Vec<_> = headers
        .keys()
        .filter(|name| {
            prefixes
                .iter()
                .any(|p| starts_with_ignore_case(name.as_str(), p))
        })
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(name);
    }
}

fn starts_with_ignore_case(s: &str, prefix: &str) -> bool {
    s.len() >= prefix.len() && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// A header value as Go's net/http hands it to upstream's authenticators: its bytes as they came, obs-text (bytes
/// 0x80-0xFF) included, so that a user named `josé` sent as raw UTF-8 (as kube-apiserver's proxy sends it) is
/// `josé`. A Go string may hold bytes that are not UTF-8; the first thing that reads them as text (the JSON of a
/// SubjectAccessReview, an audit event) writes U+FFFD for each, as this does.
pub(crate) fn header_text(value: &HeaderValue) -> String {
    String::from_utf8_lossy(value.as_bytes()).into_owned()
}

/// The first non-empty value of the first of `names` that has one.
fn first_value(headers: &HeaderMap, names: &[String]) -> Option<String> {
    names.iter().find_map(|name| {
        headers
            .get(name.as_str())
            .filter(|v| !v.is_empty())
            .map(header_text)
    })
}

/// Every non-empty value of every one of `names`, in order (one header per group; values are not split).
fn all_values(headers: &HeaderMap, names: &[String]) -> Vec<String> {
    names
        .iter()
        .flat_map(|name| headers.get_all(name.as_str()))
        .filter(|v| !v.is_empty())
        .map(header_text)
        .collect()
}

/// Extra attributes from `<prefix><key>` headers: keys lower-cased and percent-decoded (as Go's
/// `url.PathUnescape`: bytes that are not UTF-8 read as U+FFFD, as in [`header_text`]), values in header order.
pub(crate) fn extra_from_headers(
    headers: &HeaderMap,
    prefixes: &[String],
) -> BTreeMap<String, Vec<String>> {
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for prefix in prefixes {
        for name in headers.keys() {
            let name = name.as_str();
            if !starts_with_ignore_case(name, prefix) {
                continue;
            }
            let raw = name[prefix.len()..].to_ascii_lowercase();
            let key = percent_encoding::percent_decode_str(&raw)
                .decode_utf8_lossy()
                .into_owned();
            let values = headers.get_all(name).iter().map(header_text);
            extra.entry(key).or_default().extend(values);
        }
    }
    extra
}

/// Authenticates requests made through the front proxy. A connection without a certificate from the
/// request-header CA is not mine (the client-certificate authenticator may still claim it); one from that CA
/// whose CN is not allowed is refused.
pub struct RequestHeaders {
    config: Arc<Dynamic<Option<RequestHeaderConfig>>>,
}

impl RequestHeaders {
    /// Reads whatever `config` holds at the time of each request.
    pub fn new(config: Arc<Dynamic<Option<RequestHeaderConfig>>>) -> Self {
        RequestHeaders { config }
    }
}

#[async_trait]
impl Authenticator for RequestHeaders {
    fn is_front_proxy(&self) -> bool {
        true
    }

    async fn authenticate(&self, request: &Parts) -> Result<Option<User>, AuthenticationError> {
        let config = self.config.get();
        let Some(config) = config.as_ref() else {
            return Ok(None);
        };
        let chain = peer_certificates(request);
        if chain.is_empty() || config.ca.verify(chain).is_err() {
            return Ok(None);
        }
        let cn = subject(&chain[0]).map_err(AuthenticationError)?.common_name;
        if !config.allowed_names.is_empty() && !config.allowed_names.contains(&cn) {
            return Err(AuthenticationError(format!(
                "x509: subject with cn={cn} is not in the allowed list"
            )));
        }
        let headers = &request.headers;
        let Some(name) = first_value(headers, &config.username_headers) else {
            return Ok(None);
        };
        Ok(Some(User {
            name,
            uid: first_value(headers, &config.uid_headers).unwrap_or_default(),
            groups: all_values(headers, &config.group_headers),
            extra: extra_from_headers(headers, &config.extra_header_prefixes),
        }))
    }

    fn clear_headers(&self, headers: &mut HeaderMap) {
        if let Some(config) = self.config.get().as_ref() {
            config.clear_headers(headers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::x509::tests::{TestCa, request_with_certs};

    fn authenticator(ca: &TestCa, allowed: &[&str]) -> RequestHeaders {
        let config = RequestHeaderConfig::with_defaults(
            CaBundle::from_pem(&ca.pem).unwrap(),
            allowed.iter().map(|s| s.to_string()).collect(),
        );
        RequestHeaders::new(Arc::new(Dynamic::new(Some(config))))
    }

    fn with_headers(mut parts: Parts, headers: &[(&str, &str)]) -> Parts {
        for (k, v) in headers {
            parts.headers.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        parts
    }

    const ALICE: &[(&str, &str)] = &[
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "devs"),
        ("X-Remote-Group", "system:authenticated"),
        ("X-Remote-Extra-Scopes", "a"),
        ("X-Remote-Extra-Scopes", "b"),
        (
            "X-Remote-Extra-Authentication.kubernetes.io%2fCredential-Id",
            "x",
        ),
    ];

    #[tokio::test]
    async fn trusted_proxy_headers() {
        let proxy_ca = TestCa::new("front-proxy-ca");
        let auth = authenticator(&proxy_ca, &["front-proxy-client"]);
        let cert = proxy_ca.client_cert("front-proxy-client", None, (1, 30));
        let user = auth
            .authenticate(&with_headers(request_with_certs(vec![cert.clone()]), ALICE))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["devs", "system:authenticated"]);
        assert_eq!(user.extra["scopes"], ["a", "b"]);
        assert_eq!(
            user.extra["authentication.kubernetes.io/credential-id"],
            ["x"]
        );

        // No user header: not mine.
        assert_eq!(
            auth.authenticate(&request_with_certs(vec![cert]))
                .await
                .unwrap(),
            None
        );
    }

    /// Raw UTF-8 (obs-text to HTTP) is taken as sent, as Go's net/http does; bytes that are not UTF-8 read as
    /// U+FFFD. Before, `X-Remote-User: josé` was treated as absent and the proxy's certificate then failed as a
    /// client certificate (401).
    #[tokio::test]
    async fn values_are_bytes_as_go_reads_them() {
        let proxy_ca = TestCa::new("front-proxy-ca");
        let auth = authenticator(&proxy_ca, &["front-proxy-client"]);
        let cert = proxy_ca.client_cert("front-proxy-client", None, (1, 30));
        let mut parts = request_with_certs(vec![cert]);
        for (name, value) in [
            ("X-Remote-User", "josé".as_bytes()),
            ("X-Remote-Group", "cuisiniers-à-paris".as_bytes()),
            ("X-Remote-Group", b"bad-\xff-byte"),
            ("X-Remote-Extra-R%C3%B4le", "chef 👨‍🍳".as_bytes()),
        ] {
            parts
                .headers
                .append(name, HeaderValue::from_bytes(value).unwrap());
        }
        let user = auth.authenticate(&parts).await.unwrap().unwrap();
        assert_eq!(user.name, "josé");
        assert_eq!(user.groups, ["cuisiniers-à-paris", "bad-\u{fffd}-byte"]);
        assert_eq!(user.extra["rôle"], ["chef 👨‍🍳"]);
    }

    #[tokio::test]
    async fn untrusted_proxies() {
        let proxy_ca = TestCa::new("front-proxy-ca");
        let client_ca = TestCa::new("client-ca");
        let auth = authenticator(&proxy_ca, &["front-proxy-client"]);
        // Headers without any certificate, or with a certificate of another CA carrying the proxy's CN: not mine.
        for certs in [
            vec![],
            vec![client_ca.client_cert("front-proxy-client", None, (1, 30))],
            vec![proxy_ca.client_cert("front-proxy-client", None, (30, -1))],
        ] {
            assert_eq!(
                auth.authenticate(&with_headers(request_with_certs(certs), ALICE))
                    .await
                    .unwrap(),
                None
            );
        }
        // The right CA, a CN that is not allowed: refused.
        let err = auth
            .authenticate(&with_headers(
                request_with_certs(vec![proxy_ca.client_cert("mallory", None, (1, 30))]),
                ALICE,
            ))
            .await
            .unwrap_err();
        assert_eq!(
            err.0,
            "x509: subject with cn=mallory is not in the allowed list"
        );
        // An empty allowed list accepts any CN from the CA.
        let any = authenticator(&proxy_ca, &[]);
        let user = any
            .authenticate(&with_headers(
                request_with_certs(vec![proxy_ca.client_cert("mallory", None, (1, 30))]),
                ALICE,
            ))
            .await
            .unwrap();
        assert_eq!(user.unwrap().name, "alice");
    }

    #[test]
    fn clears_every_identity_header() {
        let ca = TestCa::new("front-proxy-ca");
        let auth = authenticator(&ca, &[]);
        let mut parts = with_headers(request_with_certs(vec![]), ALICE);
        parts.headers.insert("x-other", "kept".parse().unwrap());
        auth.clear_headers(&mut parts.headers);
        assert_eq!(parts.headers.len(), 1, "{:?}", parts.headers);
        assert!(parts.headers.contains_key("x-other"));
    }
}
