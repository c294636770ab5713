//! List continue tokens, byte-compatible with upstream `pkg/storage/continue.go`:
//! `base64url-nopad({"v":"meta.k8s.io/v1","rv":<int64>,"start":"<next key without the prefix>"})`.
//!
//! A client may hand a token from a Go server to ours or back; both read it the same way, and both refuse a token
//! whose start key would escape the listed prefix.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::StorageError;

const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// Encodes the token that continues a list at revision `rv` from `next_key` (the last returned key + `"\0"`),
/// storing the key relative to `key_prefix`. `rv = -1` means "continue at the latest revision".
pub fn encode_continue(next_key: &str, key_prefix: &str, rv: i64) -> Result<String, StorageError> {
    let rel = next_key.strip_prefix(key_prefix).ok_or_else(|| {
        StorageError::Internal(
            "unable to encode next field: the key and key prefix do not match".into(),
        )
    })?;
    let mut json = String::with_capacity(rel.len() + 48);
    json.push_str("{\"v\":\"");
    json.push_str(TOKEN_VERSION);
    json.push_str("\",\"rv\":");
    json.push_str(&rv.to_string());
    json.push_str(",\"start\":");
    push_go_json_string(&mut json, rel);
    json.push('}');
    Ok(URL_SAFE_NO_PAD.encode(json.as_bytes()))
}

/// Decodes a token against `key_prefix`, returning the absolute key to start from and the revision (`-1` =
/// latest). Every failure is a 400 `invalid continue token: continue key is not valid…` as upstream.
pub fn decode_continue(token: &str, key_prefix: &str) -> Result<(String, i64), StorageError> {
    let invalid =
        |detail: String| StorageError::BadRequest(format!("invalid continue token: {detail}"));
    let generic = "continue key is not valid";
    let data = URL_SAFE_NO_PAD
        .decode(token.as_bytes())
        .map_err(|e| invalid(format!("{generic}: illegal base64 data: {e}")))?;
    let value: serde_json::Value =
        serde_json::from_slice(&data).map_err(|e| invalid(format!("{generic}: {e}")))?;
    let obj = value
        .as_object()
        .ok_or_else(|| invalid(format!("{generic}: not a JSON object")))?;
    let version = obj.get("v").and_then(|v| v.as_str()).unwrap_or_default();
    if version != TOKEN_VERSION {
        return Err(invalid(format!(
            "continue key is not valid: server does not recognize this encoded version {version}"
        )));
    }
    let rv = match obj.get("rv") {
        None | Some(serde_json::Value::Null) => 0,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| invalid(format!("{generic}: rv is not an int64")))?,
    };
    if rv == 0 {
        return Err(invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into(),
        ));
    }
    let start = match obj.get("start") {
        None | Some(serde_json::Value::Null) => "",
        Some(v) => v
            .as_str()
            .ok_or_else(|| invalid(format!("{generic}: start is not a string")))?,
    };
    if start.is_empty() {
        return Err(invalid(
            "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)".into(),
        ));
    }
    // Path-traversal defence: the start key must already be clean, so that prefix + key stays under the prefix.
    let key = if start.starts_with('/') {
        start.to_string()
    } else {
        format!("/{start}")
    };
    if path_clean(&key) != key {
        return Err(invalid(format!("{generic}: {start}")));
    }
    let prefix = if key_prefix.ends_with('/') {
        key_prefix.to_string()
    } else {
        format!("{key_prefix}/")
    };
    Ok((format!("{prefix}{}", &key[1..]), rv))
}

/// Go's `path.Clean` for rooted and relative slash paths.
fn path_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    let mut leading_dotdots = 0usize;
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if out.pop().is_none() && !rooted {
                    leading_dotdots += 1;
                }
            }
            s => out.push(s),
        }
    }
    let mut parts: Vec<&str> = std::iter::repeat_n("..", leading_dotdots).collect();
    parts.extend(out);
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

/// Writes `s` as a JSON string the way Go's `encoding/json` does (HTML-safe escaping of `<`, `>`, `&`, U+2028 and
/// U+2029), so tokens are byte-identical to a Go server's.
fn push_go_json_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c if (c as u32) < 0x20 || c == '<' || c == '>' || c == '&' => {
                let b = c as u32 as u8;
                out.push_str("\\u00");
                out.push(HEX[(b >> 4) as usize] as char);
                out.push(HEX[(b & 0xf) as usize] as char);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_go() {
        let t = encode_continue("/registry/pods/ns/a\0", "/registry/pods/", 12).unwrap();
        let raw = URL_SAFE_NO_PAD.decode(t.as_bytes()).unwrap();
        assert_eq!(
            String::from_utf8(raw).unwrap(),
            r#"{"v":"meta.k8s.io/v1","rv":12,"start":"ns/a\u0000"}"#
        );
        // base64url without padding of exactly the JSON bytes above, as Go writes them.
        assert_eq!(
            t,
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTIsInN0YXJ0IjoibnMvYVx1MDAwMCJ9"
        );
        let (key, rv) = decode_continue(&t, "/registry/pods/").unwrap();
        assert_eq!((key.as_str(), rv), ("/registry/pods/ns/a\0", 12));
        let t = encode_continue("/p/x<y&\u{2028}", "/p/", -1).unwrap();
        let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(t.as_bytes()).unwrap()).unwrap();
        assert_eq!(
            raw,
            r#"{"v":"meta.k8s.io/v1","rv":-1,"start":"x\u003cy\u0026\u2028"}"#
        );
        assert_eq!(
            decode_continue(&t, "/p/").unwrap(),
            ("/p/x<y&\u{2028}".to_string(), -1)
        );
    }

    #[test]
    fn rejects_bad_tokens() {
        let enc = |s: &str| URL_SAFE_NO_PAD.encode(s.as_bytes());
        for (tok, msg) in [
            (
                "%%%".to_string(),
                "invalid continue token: continue key is not valid: illegal base64",
            ),
            (
                enc("{"),
                "invalid continue token: continue key is not valid: ",
            ),
            (
                enc(r#"{"v":"x","rv":1,"start":"a"}"#),
                "server does not recognize this encoded version x",
            ),
            (
                enc(r#"{"v":"meta.k8s.io/v1","rv":0,"start":"a"}"#),
                "incorrect encoded start resourceVersion",
            ),
            (
                enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":""}"#),
                "encoded start key empty",
            ),
            (
                enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"../x"}"#),
                "continue key is not valid: ../x",
            ),
            (
                enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"a/./x"}"#),
                "continue key is not valid: a/./x",
            ),
            (
                enc(r#"{"v":"meta.k8s.io/v1","rv":1,"start":"a//x"}"#),
                "continue key is not valid: a//x",
            ),
        ] {
            let e = decode_continue(&tok, "/p/").unwrap_err();
            assert!(e.is_bad_request());
            assert!(e.to_string().contains(msg), "{e} !~ {msg}");
        }
    }

    #[test]
    fn cleans_paths_like_go() {
        for (i, o) in [
            ("/a/../b", "/b"),
            ("/..", "/"),
            ("a/../..", ".."),
            ("", "."),
            ("/a/b/", "/a/b"),
            ("/a\0", "/a\0"),
        ] {
            assert_eq!(path_clean(i), o);
        }
    }
}
