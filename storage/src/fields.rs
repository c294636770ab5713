//! Field selectors with upstream's syntax, escaping and error texts (apimachinery `pkg/fields/selector.go`):
//! comma-separated `field=value`, `field==value`, `field!=value` terms, where `\`, `,` and `=` in values are
//! escaped with a backslash.

use std::collections::BTreeMap;
use std::fmt;

use super::labels::SelectorError;

/// Whether a field term requires equality or inequality.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldOperator {
    /// `field=value` or `field==value`
    Equals,
    /// `field!=value`
    NotEquals,
}

/// One `field op value` term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldRequirement {
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// The operator.
    pub operator: FieldOperator,
    /// The unescaped value.
    pub value: String,
}

impl FieldRequirement {
    /// Whether a field set satisfies the term; a missing field reads as the empty string (as upstream).
    pub fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        let got = fields.get(&self.field).map(String::as_str).unwrap_or("");
        match self.operator {
            FieldOperator::Equals => got == self.value,
            FieldOperator::NotEquals => got != self.value,
        }
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match self.operator {
            FieldOperator::Equals => "=",
            FieldOperator::NotEquals => "!=",
        };
        write!(f, "{}{op}{}", self.field, escape_value(&self.value))
    }
}

/// A conjunction of field terms; empty selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// Parses upstream's field selector syntax (`fields.ParseSelector`). Terms are kept sorted by their text.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(selector);
        parts.sort();
        let mut requirements = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((lhs, op, rhs)) = split_term(part) else {
                return Err(SelectorError(format!(
                    "invalid selector: '{selector}'; can't understand '{part}'"
                )));
            };
            let value = unescape_value(rhs)?;
            requirements.push(FieldRequirement {
                field: lhs.to_string(),
                operator: op,
                value,
            });
        }
        Ok(FieldSelector { requirements })
    }

    /// A selector requiring `field == value`.
    pub fn one_term_equal(field: &str, value: &str) -> Self {
        FieldSelector {
            requirements: vec![FieldRequirement {
                field: field.to_string(),
                operator: FieldOperator::Equals,
                value: value.to_string(),
            }],
        }
    }

    /// This selector and `field == value` (upstream `fields.AndSelectors` with a one-term selector).
    pub fn and_equal(mut self, field: &str, value: &str) -> Self {
        self.requirements.push(FieldRequirement {
            field: field.to_string(),
            operator: FieldOperator::Equals,
            value: value.to_string(),
        });
        self
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The terms.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether a field set satisfies every term.
    pub fn matches(&self, fields: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(fields))
    }

    /// The value `field` must equal, if the selector pins it (e.g. `metadata.name` for a watch on one object).
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.field == field && r.operator == FieldOperator::Equals)
            .map(|r| r.value.as_str())
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for FieldSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FieldSelector::parse(s)
    }
}

/// Escapes `\`, `,` and `=` in a field selector value (upstream `fields.EscapeValue`).
pub fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Reverses [`escape_value`]; unknown escapes and unescaped `,`/`=` are errors (upstream `fields.UnescapeValue`).
pub fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                _ => {
                    return Err(SelectorError(format!(
                        "invalid field selector: invalid escape sequence: \\{c}"
                    )));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. as its number.
            ',' | '=' => {
                return Err(SelectorError(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                )));
            }
            c => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError(
            "invalid field selector: invalid escape sequence: \\".into(),
        ));
    }
    Ok(out)
}

/// Splits on commas that are not escaped.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&s[start..i]);
            start = i + 1;
        }
    }
    terms.push(&s[start..]);
    terms
}

/// Splits a term at its first operator, trying `!=`, `==`, `=` at each position in turn.
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for (op, kind) in [
            ("!=", FieldOperator::NotEquals),
            ("==", FieldOperator::Equals),
            ("=", FieldOperator::Equals),
        ] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((&term[..i], kind, value));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for (input, out) in [
            ("", ""),
            ("a=b", "a=b"),
            ("a==b", "a=b"),
            ("a!=b", "a!=b"),
            ("b=c,a=b", "a=b,b=c"),
            ("a=", "a="),
            ("a=b\\,c", "a=b\\,c"),
            ("a=b\\=c", "a=b\\=c"),
            ("a=b\\\\c", "a=b\\\\c"),
            ("metadata.name=x,spec.y!=z", "metadata.name=x,spec.y!=z"),
            (",a=b,", "a=b"),
        ] {
            assert_eq!(
                FieldSelector::parse(input).unwrap().to_string(),
                out,
                "{input}"
            );
        }
        let s = FieldSelector::parse("a=b\\,c").unwrap();
        assert_eq!(s.requirements()[0].value, "b,c");
    }

    #[test]
    fn rejects_like_upstream() {
        assert_eq!(
            FieldSelector::parse("a").unwrap_err().0,
            "invalid selector: 'a'; can't understand 'a'"
        );
        assert_eq!(
            FieldSelector::parse("a=b,c").unwrap_err().0,
            "invalid selector: 'a=b,c'; can't understand 'c'"
        );
        assert_eq!(
            FieldSelector::parse("a=b\\x").unwrap_err().0,
            "invalid field selector: invalid escape sequence: \\x"
        );
        assert_eq!(
            FieldSelector::parse("a=b\\").unwrap_err().0,
            "invalid field selector: invalid escape sequence: \\"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err().0,
            "invalid field selector: unescaped character in value: 61"
        );
    }

    #[test]
    fn matches_like_upstream() {
        let f: BTreeMap<String, String> = [("a".to_string(), "b".to_string())].into();
        assert!(FieldSelector::parse("a=b").unwrap().matches(&f));
        assert!(!FieldSelector::parse("a!=b").unwrap().matches(&f));
        assert!(FieldSelector::parse("c=").unwrap().matches(&f));
        assert!(FieldSelector::parse("c!=x").unwrap().matches(&f));
        assert_eq!(
            FieldSelector::parse("a=b")
                .unwrap()
                .requires_exact_match("a"),
            Some("b")
        );
    }
}
