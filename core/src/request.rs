//! What a request is about, parsed once from its method, path and query: the Kubernetes verb, API group and
//! version, namespace, resource, subresource and name. Authorization, audit, metrics and the handlers all read
//! this instead of re-parsing the URL, so they cannot disagree about what was asked for.
//!
//! The rules are upstream's `RequestInfoFactory` (k8s.io/apiserver `pkg/endpoints/request/requestinfo.go`).

use http::{Method, Uri};
use percent_encoding::percent_decode_str;

/// Upstream's `MaxRequestBodyBytes` default: larger bodies get 413.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Verbs taken from the path (`/api/v1/watch/...`, `/api/v1/proxy/...`) instead of the HTTP method.
const SPECIAL_VERBS: &[&str] = &["proxy", "watch"];
/// Path verbs after which the third part is not a subresource.
const SPECIAL_VERBS_NO_SUBRESOURCES: &[&str] = &["proxy"];
/// Subresources of a namespace: they tell `/namespaces/{ns}/status` apart from a namespaced resource.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];
/// Verbs whose requests honour `fieldSelector` and `labelSelector`.
const VERBS_WITH_SELECTORS: &[&str] = &["list", "watch", "deletecollection"];

/// The parsed description of one request, stored in the request's extensions by the request-info filter.
///
/// For a non-resource request (`/healthz`, `/apis`, `/version`) only `path` and `verb` (the lower-case HTTP
/// method) are set. For a resource request `verb` is one of `get list watch create update patch delete
/// deletecollection proxy` (or empty for an HTTP method that maps to none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// Whether the request is for an API resource or subresource (under an API prefix, deep enough).
    pub is_resource_request: bool,
    /// The URL path, percent-decoded.
    pub path: String,
    /// The Kubernetes verb for resource requests; the lower-case HTTP method otherwise.
    pub verb: String,
    /// `api` or `apis`.
    pub api_prefix: String,
    /// The API group; empty for the core group (`/api`).
    pub api_group: String,
    /// The API version, e.g. `v1alpha1`.
    pub api_version: String,
    /// The namespace; empty for cluster-scoped requests and for lists across all namespaces.
    pub namespace: String,
    /// The resource (plural name, not the kind), e.g. `pizzas`.
    pub resource: String,
    /// The subresource, e.g. `status`.
    pub subresource: String,
    /// The object name, when the path (or a `metadata.name=` field selector on a list/watch) names one.
    pub name: String,
    /// The path parts from the resource on: `[resource, name, subresource, ...]`.
    pub parts: Vec<String>,
    /// The raw `fieldSelector` of a list, watch or deletecollection (not of the legacy `/watch/` paths).
    pub field_selector: String,
    /// The raw `labelSelector` of a list, watch or deletecollection (not of the legacy `/watch/` paths).
    pub label_selector: String,
}

/// The URL could not be turned into request info (a special verb with nothing after it).
#[derive(Debug, thiserror::Error)]
#[error("unable to determine kind and namespace from url, {url}")]
pub struct RequestInfoError {
    /// The URL as received.
    pub url: String,
    /// What could be parsed before the failure.
    pub partial: Box<RequestInfo>,
}

/// Parses requests into [`RequestInfo`]: which path prefixes hold APIs, and which of them have no group part.
#[derive(Clone, Debug)]
pub struct RequestInfoFactory {
    /// Prefixes under which API resources live, without slashes (`api`, `apis`).
    pub api_prefixes: Vec<String>,
    /// Prefixes whose next part is the version, not a group (`api`).
    pub groupless_api_prefixes: Vec<String>,
}

impl Default for RequestInfoFactory {
    fn default() -> Self {
        Self {
            api_prefixes: vec!["api".into(), "apis".into()],
            groupless_api_prefixes: vec!["api".into()],
        }
    }
}

impl RequestInfoFactory {
    /// Parses one request. On error the partial info is in the error, as upstream returns both.
    pub fn parse(&self, method: &Method, uri: &Uri) -> Result<RequestInfo, RequestInfoError> {
        let path = percent_decode_str(uri.path())
            .decode_utf8_lossy()
            .into_owned();
        let mut info = RequestInfo {
            is_resource_request: false,
            path: path.clone(),
            verb: method.as_str().to_lowercase(),
            ..RequestInfo::default()
        };

        let all_parts = split_path(&path);
        let mut parts: &[&str] = &all_parts;
        if parts.len() < 3 || !self.api_prefixes.iter().any(|p| p == parts[0]) {
            return Ok(info);
        }
        info.api_prefix = parts[0].to_string();
        parts = &parts[1..];

        if !self.groupless_api_prefixes.contains(&info.api_prefix) {
            // The prefix is consumed already, so this asks "were there four parts?".
            if parts.len() < 3 {
                return Ok(info);
            }
            info.api_group = parts[0].to_string();
            parts = &parts[1..];
        }

        info.is_resource_request = true;
        info.api_version = parts[0].to_string();
        parts = &parts[1..];

        let query = Query::parse(uri.query());

        let mut verb_via_path_prefix = false;
        if SPECIAL_VERBS.contains(&parts[0]) {
            if parts.len() < 2 {
                return Err(RequestInfoError {
                    // Go prints a server request's URL as path and query.
                    url: uri
                        .path_and_query()
                        .map_or_else(|| uri.path().to_string(), |pq| pq.to_string()),
                    partial: Box::new(info),
                });
            }
            info.verb = parts[0].to_string();
            parts = &parts[1..];
            verb_via_path_prefix = true;
        } else {
            info.verb = match *method {
                Method::POST => "create",
                Method::GET | Method::HEAD => "get",
                Method::PUT => "update",
                Method::PATCH => "patch",
                Method::DELETE => "delete",
                _ => "",
            }
            .to_string();
        }

        // `/namespaces/{namespace}/{resource}/...`: make the parts relative to the resource, unless what follows
        // the namespace name is a subresource of the namespace itself.
        if parts[0] == "namespaces" && parts.len() > 1 {
            info.namespace = parts[1].to_string();
            if parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2]) {
                parts = &parts[2..];
            }
        }

        info.parts = parts.iter().map(|s| s.to_string()).collect();

        // resource/name/subresource/anything/else
        if info.parts.len() >= 3 && !SPECIAL_VERBS_NO_SUBRESOURCES.contains(&info.verb.as_str()) {
            info.subresource = info.parts[2].clone();
        }
        if info.parts.len() >= 2 {
            info.name = info.parts[1].clone();
        }
        if !info.parts.is_empty() {
            info.resource = info.parts[0].clone();
        }

        // A get without a name is a list or a watch.
        if info.name.is_empty() && info.verb == "get" {
            let watch = query.first("watch").is_some_and(query_bool);
            info.verb = if watch { "watch" } else { "list" }.to_string();
            // A list or watch for exactly one name (`fieldSelector=metadata.name=x`) is authorized as that name.
            // Upstream decodes all list options first; a selector that does not parse leaves the name unset.
            if let Some(selector) = query.first("fieldSelector")
                && let Ok(Some(name)) = field_selector_exact_name(selector)
                && is_path_segment_name(&name)
            {
                info.name = name;
            }
        }

        // A delete without a name is a deletecollection.
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".to_string();
        }

        if !verb_via_path_prefix && VERBS_WITH_SELECTORS.contains(&info.verb.as_str()) {
            if let Some(s) = query.first("fieldSelector") {
                info.field_selector = s.to_string();
            }
            if let Some(s) = query.first("labelSelector") {
                info.label_selector = s.to_string();
            }
        }

        Ok(info)
    }
}

fn split_path(path: &str) -> Vec<&str> {
    let trimmed = path.trim_matches('/');
    if trimmed.is_empty() {
        Vec::new()
    } else {
        trimmed.split('/').collect()
    }
}

/// Query parameters in order, decoded as Go's `url.ParseQuery` does.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    fn first(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A query boolean as upstream converts one: anything but `false` or `0` (any case) is true.
fn query_bool(value: &str) -> bool {
    !matches!(value.to_ascii_lowercase().as_str(), "false" | "0")
}

/// Upstream's `IsPathSegmentName`: a name usable as one path segment.
fn is_path_segment_name(name: &str) -> bool {
    name != "." && name != ".." && !name.contains('/') && !name.contains('%')
}

/// The value a field selector requires `metadata.name` to equal, if it does (`metadata.name=x` or `==x`,
/// possibly among other terms). An unparsable selector is an error, as in upstream's `fields.ParseSelector`.
fn field_selector_exact_name(selector: &str) -> Result<Option<String>, String> {
    let mut terms = split_unescaped_commas(selector);
    terms.sort();
    let mut found = None;
    for term in terms.iter().filter(|t| !t.is_empty()) {
        let Some((lhs, op, rhs)) = split_term(term) else {
            return Err(format!(
                "invalid selector: '{selector}'; can't understand '{term}'"
            ));
        };
        let value = unescape_field_value(rhs)?;
        if found.is_none() && op != "!=" && lhs == "metadata.name" {
            found = Some(value);
        }
    }
    Ok(found)
}

fn split_unescaped_commas(s: &str) -> Vec<String> {
    let mut terms = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            current.push(c);
            escaped = true;
        } else if c == ',' {
            terms.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    terms.push(current);
    terms
}

fn split_term(term: &str) -> Option<(&str, &str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for op in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], op, value));
            }
        }
    }
    None
}

fn unescape_field_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(e @ ('\\' | ',' | '=')) => out.push(e),
            Some(_) => {
                return Err(format!(
                    "invalid field selector: invalid escape sequence in {s}"
                ));
            }
            None => {
                return Err(format!(
                    "invalid field selector: unterminated escape in {s}"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: &str, url: &str) -> RequestInfo {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let uri: Uri = url.parse().unwrap();
        RequestInfoFactory::default().parse(&method, &uri).unwrap()
    }

    /// method, url, verb, prefix, group, version, namespace, resource, subresource, name, parts
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a str,
        &'a [&'a str],
    );

    /// Upstream's `TestGetAPIRequestInfo` success cases.
    #[test]
    fn resource_requests() {
        #[rustfmt::skip]
        let cases: &[Case] = &[
            // method, url, verb, prefix, group, version, namespace, resource, subresource, name, parts
            ("GET", "/api/v1/namespaces", "list", "api", "", "v1", "", "namespaces", "", "", &["namespaces"]),
            ("GET", "/api/v1/namespaces/other", "get", "api", "", "v1", "other", "namespaces", "", "other", &["namespaces", "other"]),
            ("GET", "/api/v1/namespaces/other/pods", "list", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("HEAD", "/api/v1/namespaces/other/pods/foo", "get", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("GET", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("HEAD", "/api/v1/pods", "list", "api", "", "v1", "", "pods", "", "", &["pods"]),
            // special verbs
            ("GET", "/api/v1/proxy/namespaces/other/pods/foo", "proxy", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("GET", "/api/v1/proxy/namespaces/other/pods/foo/subpath/not/a/subresource", "proxy", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo", "subpath", "not", "a", "subresource"]),
            ("GET", "/api/v1/watch/pods", "watch", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/pods?watch=true", "watch", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/pods?watch=false", "list", "api", "", "v1", "", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/watch/namespaces/other/pods", "watch", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/namespaces/other/pods?watch=1", "watch", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/namespaces/other/pods?watch=0", "list", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("GET", "/api/v1/namespaces/other/pods?watch=FALSE", "list", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            // subresources
            ("GET", "/api/v1/namespaces/other/pods/foo/status", "get", "api", "", "v1", "other", "pods", "status", "foo", &["pods", "foo", "status"]),
            ("GET", "/api/v1/namespaces/other/pods/foo/proxy/subpath", "get", "api", "", "v1", "other", "pods", "proxy", "foo", &["pods", "foo", "proxy", "subpath"]),
            ("PUT", "/api/v1/namespaces/other/finalize", "update", "api", "", "v1", "other", "namespaces", "finalize", "other", &["namespaces", "other", "finalize"]),
            ("PUT", "/api/v1/namespaces/other/status", "update", "api", "", "v1", "other", "namespaces", "status", "other", &["namespaces", "other", "status"]),
            // verbs
            ("PATCH", "/api/v1/namespaces/other/pods/foo", "patch", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("DELETE", "/api/v1/namespaces/other/pods/foo", "delete", "api", "", "v1", "other", "pods", "", "foo", &["pods", "foo"]),
            ("POST", "/api/v1/namespaces/other/pods", "create", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("OPTIONS", "/api/v1/namespaces/other/pods", "", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            // deletecollection
            ("DELETE", "/api/v1/nodes", "deletecollection", "api", "", "v1", "", "nodes", "", "", &["nodes"]),
            ("DELETE", "/api/v1/namespaces", "deletecollection", "api", "", "v1", "", "namespaces", "", "", &["namespaces"]),
            ("DELETE", "/api/v1/namespaces/other/pods", "deletecollection", "api", "", "v1", "other", "pods", "", "", &["pods"]),
            ("DELETE", "/apis/extensions/v1/namespaces/other/pods", "deletecollection", "apis", "extensions", "v1", "other", "pods", "", "", &["pods"]),
            // groups and versions
            ("POST", "/apis/extensions/v1/namespaces/other/pods", "create", "apis", "extensions", "v1", "other", "pods", "", "", &["pods"]),
            ("POST", "/apis/extensions/v1beta3/namespaces/other/pods", "create", "apis", "extensions", "v1beta3", "other", "pods", "", "", &["pods"]),
            ("GET", "/apis/restaurant.programming-kubernetes.info/v1alpha1/namespaces/ns/pizzas/margherita/status", "get", "apis", "restaurant.programming-kubernetes.info", "v1alpha1", "ns", "pizzas", "status", "margherita", &["pizzas", "margherita", "status"]),
            ("GET", "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings", "list", "apis", "restaurant.programming-kubernetes.info", "v1alpha1", "", "toppings", "", "", &["toppings"]),
        ];
        for &(method, url, verb, prefix, group, version, ns, resource, sub, name, parts) in cases {
            let info = parse(method, url);
            let ctx = format!("{method} {url}");
            assert!(info.is_resource_request, "{ctx}");
            assert_eq!(info.verb, verb, "{ctx}");
            assert_eq!(info.api_prefix, prefix, "{ctx}");
            assert_eq!(info.api_group, group, "{ctx}");
            assert_eq!(info.api_version, version, "{ctx}");
            assert_eq!(info.namespace, ns, "{ctx}");
            assert_eq!(info.resource, resource, "{ctx}");
            assert_eq!(info.subresource, sub, "{ctx}");
            assert_eq!(info.name, name, "{ctx}");
            assert_eq!(info.parts, parts, "{ctx}");
        }
    }

    /// Upstream's error cases and `TestGetNonAPIRequestInfo`.
    #[test]
    fn resource_or_not() {
        let cases = [
            ("/api/version/resource", true),
            ("/apis/group/version/resource/name/subresource", true),
            ("/api/version/resource/name/subresource", true),
            ("/apis/batch/v1/job", true),
            ("/apis/batch/v1/job/foo", true),
            ("/apis/batch/v1/job/foo/scale", true),
            ("/not-api/version/resource", false),
            ("/badprefix/version/resource", false),
            ("/apis/version/resource", false),
            ("/apis/extensions/v1beta1", false),
            ("/apis/extensions/v1beta1/", false),
            ("/apis/group/version/", false),
            ("/api/version", false),
            ("/api/version/", false),
            ("/api", false),
            ("/apis", false),
            ("/healthz", false),
            ("/", false),
        ];
        for (url, expected) in cases {
            let info = parse("GET", url);
            assert_eq!(info.is_resource_request, expected, "{url}");
            if !expected {
                assert_eq!(info.verb, "get", "{url}");
                assert_eq!(info.path, url, "{url}");
            }
        }
        assert_eq!(parse("POST", "/healthz").verb, "post");
    }

    #[test]
    fn special_verb_without_resource_is_an_error() {
        let uri: Uri = "/api/v1/watch".parse().unwrap();
        let err = RequestInfoFactory::default()
            .parse(&Method::GET, &uri)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unable to determine kind and namespace from url, /api/v1/watch"
        );
        assert!(err.partial.is_resource_request);
    }

    /// Upstream's `TestSelectorParsing`.
    #[test]
    fn selectors() {
        #[rustfmt::skip]
        let cases = [
            // method, url, name, verb, fieldSelector, labelSelector
            ("GET", "/apis/group/version/resource", "", "list", "", ""),
            ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1", "name1", "list", "metadata.name=name1", ""),
            ("GET", "/apis/group/version/resource?watch=true&fieldSelector=metadata.name=name1", "name1", "watch", "metadata.name=name1", ""),
            ("GET", "/apis/group/version/resource?fieldSelector=foo=bar&labelSelector=baz=qux", "", "list", "foo=bar", "baz=qux"),
            ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo", "", "list", "metadata.name=name1,foo", ""),
            ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=true", "", "watch", "metadata.name=name1,foo", ""),
            ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=name1,foo&watch=false", "", "list", "metadata.name=name1,foo", ""),
            ("DELETE", "/apis/group/version/resource?fieldSelector=foo=bar&labelSelector=baz=qux", "", "deletecollection", "foo=bar", "baz=qux"),
            ("GET", "/apis/group/version/resource?fieldSelector=metadata.name=foo&fieldSelector=metadata.name=bar&labelSelector=foo=bar&labelSelector=foo=baz", "foo", "list", "metadata.name=foo", "foo=bar"),
            ("GET", "/apis/group/version/resource/name?fieldSelector=foo=bar&labelSelector=foo=bar", "name", "get", "", ""),
            ("GET", "/apis/group/version/watch/resource?fieldSelector=metadata.name=foo&labelSelector=foo=bar", "", "watch", "", ""),
            ("GET", "/apis/group/version/watch/resource/name?fieldSelector=metadata.name=foo&labelSelector=foo=bar", "name", "watch", "", ""),
            // ours: `==`, escapes, names that cannot be a path segment, `!=`
            ("GET", "/apis/g/v/r?fieldSelector=status.phase%3DUp,metadata.name%3D%3Da%5C%2Cb", "a,b", "list", "status.phase=Up,metadata.name==a\\,b", ""),
            ("GET", "/apis/g/v/r?fieldSelector=metadata.name=..", "", "list", "metadata.name=..", ""),
            ("GET", "/apis/g/v/r?fieldSelector=metadata.name!=x", "", "list", "metadata.name!=x", ""),
        ];
        for (method, url, name, verb, fs, ls) in cases {
            let info = parse(method, url);
            assert_eq!(info.name, name, "{url}");
            assert_eq!(info.verb, verb, "{url}");
            assert_eq!(info.field_selector, fs, "{url}");
            assert_eq!(info.label_selector, ls, "{url}");
        }
    }

    #[test]
    fn path_is_percent_decoded() {
        let info = parse("GET", "/apis/g/v/namespaces/a%20b/pizzas");
        assert_eq!(info.namespace, "a b");
        assert_eq!(info.path, "/apis/g/v/namespaces/a b/pizzas");
    }
}
