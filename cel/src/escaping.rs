//! Property names as CEL field names, escaped as upstream's `Escape`/`Unescape` (k8s.io/apiserver/pkg/cel).

/// Words CEL reserves: a property named so is written `__word__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The CEL identifier for a property name: `__` → `__underscores__`, `.` → `__dot__`, `-` → `__dash__`, `/` →
/// `__slash__`, a reserved word `w` → `__w__`. `None` for names that cannot be escaped (empty, a leading digit, other
/// characters).
pub fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '_' if chars.peek() == Some(&'_') => {
                chars.next();
                out.push_str("__underscores__");
            }
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
    }
    Some(out)
}

/// The property name of an escaped CEL identifier; `None` if it holds an escape sequence [`escape`] never writes.
pub fn unescape(escaped: &str) -> Option<String> {
    let mut out = String::with_capacity(escaped.len());
    let mut rest = escaped;
    while let Some(start) = rest.find("__") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        // An escape sequence is `__` + non-underscores + `__`.
        let end = after
            .find('_')
            .filter(|&e| e > 0 && after[e..].starts_with("__"));
        match end {
            Some(end) => {
                let word = &after[..end];
                match word {
                    "underscores" => out.push_str("__"),
                    "dot" => out.push('.'),
                    "dash" => out.push('-'),
                    "slash" => out.push('/'),
                    w if RESERVED.contains(&w) => out.push_str(w),
                    _ => return None,
                }
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("__");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_as_upstream() {
        let cases = [
            ("simple", Some("simple")),
            ("a_b", Some("a_b")),
            ("a__b", Some("a__underscores__b")),
            ("foo-bar", Some("foo__dash__bar")),
            ("a.b/c", Some("a__dot__b__slash__c")),
            ("namespace", Some("__namespace__")),
            ("if", Some("__if__")),
            ("1abc", None),
            ("", None),
            ("a b", None),
            ("a@b", None),
        ];
        for (name, want) in cases {
            assert_eq!(escape(name).as_deref(), want, "{name}");
            if let Some(escaped) = want {
                assert_eq!(unescape(escaped).as_deref(), Some(name), "{escaped}");
            }
        }
        assert_eq!(unescape("__bogus__"), None);
    }
}
