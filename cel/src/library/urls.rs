//! Kubernetes' URL library (k8s.io/apiserver/pkg/cel/library/urls.go): `url`, `isURL`, `getScheme`, `getHost`,
//! `getHostname`, `getPort`, `getEscapedPath`, `getQuery`. URLs are parsed as Go's `net/url` parses them
//! (`ParseRequestURI` to accept, then `Parse`), with its error texts.

use super::{error, opaque, opaque_arg, string, string_arg, string_list, values_fn};
use cel::common::types::{STRING_TYPE, Type};
use cel::objects::{Key, Map, Opaque};
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::collections::HashMap;
use std::sync::Arc;

pub(crate) const TYPE_NAME: &str = "kubernetes.URL";

/// A parsed URL, its parts as Go's `url.URL` holds them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    scheme: String,
    opaque: String,
    /// `user:pass@`, kept only so that two URLs compare as their texts do.
    user: Option<String>,
    host: String,
    path: String,
    raw_path: String,
    raw_query: String,
    fragment: Option<String>,
}

impl Opaque for Url {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// Go's `url.Error` text: `parse "<url>": <err>`.
fn url_error(url: &str, err: &str) -> String {
    format!("parse {url:?}: {err}")
}

/// Go's `getScheme`: the scheme and the rest, or an error for a leading colon.
fn split_scheme(raw: &str) -> Result<(&str, &str), &'static str> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' => return Ok(("", raw)),
            b':' if i == 0 => return Err("missing protocol scheme"),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

fn unhex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Path,
    Host,
    Query,
}

/// Go's `unescape`: `%XX` decoded (and `+` as space in queries); a malformed escape is an error.
fn unescape(s: &str, mode: Mode) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let (hi, lo) = match (
                    b.get(i + 1).copied().and_then(unhex),
                    b.get(i + 2).copied().and_then(unhex),
                ) {
                    (Some(h), Some(l)) => (h, l),
                    _ => {
                        let end = (i + 3).min(b.len());
                        let bad = String::from_utf8_lossy(&b[i..end]).into_owned();
                        return Err(format!("invalid URL escape {bad:?}"));
                    }
                };
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if mode == Mode::Query => {
                out.push(b' ');
                i += 1;
            }
            c => {
                if mode == Mode::Host && c < 0x80 && !host_char_ok(c) {
                    return Err(format!("invalid character {:?} in host name", c as char));
                }
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn host_char_ok(c: u8) -> bool {
    c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
                | b'-'
                | b'.'
                | b'_'
                | b'~'
        )
}

/// Go's `validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty() || (port.starts_with(':') && port[1..].bytes().all(|b| b.is_ascii_digit()))
}

fn parse_host(host: &str) -> Result<String, String> {
    if let Some(rest) = host.strip_prefix('[') {
        let Some(close) = rest.find(']') else {
            return Err("missing ']' in host".into());
        };
        let port = &rest[close + 1..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    } else if let Some(i) = host.rfind(':') {
        let port = &host[i..];
        if !valid_optional_port(port) {
            return Err(format!("invalid port {port:?} after host"));
        }
    }
    unescape(host, Mode::Host)
}

impl Url {
    /// Go's `url.parse(raw, viaRequest)`, fragment already split off.
    fn parse_inner(raw: &str, via_request: bool) -> Result<Url, String> {
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err("net/url: invalid control character in URL".into());
        }
        if raw.is_empty() && via_request {
            return Err("empty url".into());
        }
        let mut url = Url {
            scheme: String::new(),
            opaque: String::new(),
            user: None,
            host: String::new(),
            path: String::new(),
            raw_path: String::new(),
            raw_query: String::new(),
            fragment: None,
        };
        if raw == "*" {
            url.path = "*".into();
            return Ok(url);
        }
        let (scheme, mut rest) = split_scheme(raw).map_err(str::to_owned)?;
        url.scheme = scheme.to_ascii_lowercase();
        if let Some((r, q)) = rest.split_once('?') {
            url.raw_query = q.to_owned();
            rest = r;
        }
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                url.opaque = rest.to_owned();
                return Ok(url);
            }
            if via_request {
                return Err("invalid URI for request".into());
            }
            let segment = rest.split('/').next().unwrap_or("");
            if segment.contains(':') {
                return Err("first path segment in URL cannot contain colon".into());
            }
        }
        if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
            && rest.starts_with("//")
        {
            let after = &rest[2..];
            let end = after.find('/').unwrap_or(after.len());
            let authority = &after[..end];
            rest = &after[end..];
            let host = match authority.rfind('@') {
                Some(at) => {
                    url.user = Some(authority[..at].to_owned());
                    &authority[at + 1..]
                }
                None => authority,
            };
            url.host = parse_host(host)?;
        }
        url.path = unescape(rest, Mode::Path)?;
        url.raw_path = rest.to_owned();
        Ok(url)
    }

    /// What upstream's `url()` does: `ParseRequestURI` to validate, then `Parse`.
    pub(crate) fn parse(raw: &str) -> Result<Url, String> {
        Url::parse_request_uri(raw)?;
        let (without_fragment, fragment) = match raw.split_once('#') {
            Some((u, f)) => (u, Some(f.to_owned())),
            None => (raw, None),
        };
        let mut url = Url::parse_inner(without_fragment, false).map_err(|e| url_error(raw, &e))?;
        url.fragment = fragment;
        Ok(url)
    }

    /// Go's `url.ParseRequestURI`, with its texts.
    pub(crate) fn parse_request_uri(raw: &str) -> Result<(), String> {
        Url::parse_inner(raw, true)
            .map(|_| ())
            .map_err(|e| url_error(raw, &e))
    }

    fn hostname(&self) -> &str {
        let host = &self.host;
        if let Some(rest) = host.strip_prefix('[') {
            return rest.find(']').map_or(rest, |i| &rest[..i]);
        }
        host.rfind(':').map_or(host.as_str(), |i| &host[..i])
    }

    fn port(&self) -> &str {
        let host = &self.host;
        let after = match host.strip_prefix('[') {
            Some(rest) => rest.find(']').map_or("", |i| &rest[i + 1..]),
            None => host.as_str(),
        };
        match after.rfind(':') {
            Some(i) if valid_optional_port(&after[i..]) => &after[i + 1..],
            _ => "",
        }
    }

    /// Go's `EscapedPath`: the path as written if that is a valid encoding of it, else re-escaped.
    fn escaped_path(&self) -> String {
        let valid = self
            .raw_path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.~!$&'()*+,;=:@[]%/".contains(&b));
        if valid && unescape(&self.raw_path, Mode::Path).ok().as_deref() == Some(self.path.as_str())
        {
            return self.raw_path.clone();
        }
        let mut out = String::new();
        for b in self.path.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~$&+,/:;=@".contains(&b) {
                out.push(b as char);
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// Go's `Query()`: `&`-separated pairs, unescaped; pairs with a `;` or a bad escape are dropped.
    fn query(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if let (Ok(k), Ok(v)) = (unescape(k, Mode::Query), unescape(v, Mode::Query)) {
                out.push((k, v));
            }
        }
        out
    }
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let t = || Type::new_opaque_type(TYPE_NAME);
    env.add_type(t())?;
    env.add_overload(
        "url",
        "string_to_url",
        vec![STRING_TYPE],
        values_fn!(to_url),
    )?;
    env.add_overload(
        "isURL",
        "is_url_string",
        vec![STRING_TYPE],
        values_fn!(is_url),
    )?;
    env.add_member_overload(
        "getScheme",
        "url_get_scheme",
        t(),
        vec![],
        values_fn!(get_scheme),
    )?;
    env.add_member_overload("getHost", "url_get_host", t(), vec![], values_fn!(get_host))?;
    env.add_member_overload(
        "getHostname",
        "url_get_hostname",
        t(),
        vec![],
        values_fn!(get_hostname),
    )?;
    env.add_member_overload("getPort", "url_get_port", t(), vec![], values_fn!(get_port))?;
    env.add_member_overload(
        "getEscapedPath",
        "url_get_escaped_path",
        t(),
        vec![],
        values_fn!(get_escaped_path),
    )?;
    env.add_member_overload(
        "getQuery",
        "url_get_query",
        t(),
        vec![],
        values_fn!(get_query),
    )?;
    Ok(())
}

fn to_url(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("url", args, 0)?;
    Url::parse(s).map(opaque).map_err(|e| {
        error(format!(
            "URL parse error during conversion from string: {e}"
        ))
    })
}

fn is_url(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        Url::parse(string_arg("isURL", args, 0)?).is_ok(),
    ))
}

fn this<'a>(f: &str, args: &'a [Value]) -> Result<&'a Url, ExecutionError> {
    opaque_arg::<Url>(f, args, 0)
}

fn get_scheme(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(this("getScheme", args)?.scheme.clone()))
}

fn get_host(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(this("getHost", args)?.host.clone()))
}

fn get_hostname(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(this("getHostname", args)?.hostname()))
}

fn get_port(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(this("getPort", args)?.port()))
}

fn get_escaped_path(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(this("getEscapedPath", args)?.escaped_path()))
}

fn get_query(args: &[Value]) -> Result<Value, ExecutionError> {
    let mut grouped: HashMap<String, Vec<String>> = HashMap::new();
    for (k, v) in this("getQuery", args)?.query() {
        grouped.entry(k).or_default().push(v);
    }
    let map = grouped
        .into_iter()
        .map(|(k, vs)| (Key::String(Arc::new(k)), string_list(vs)))
        .collect();
    Ok(Value::Map(Map { map: Arc::new(map) }))
}
