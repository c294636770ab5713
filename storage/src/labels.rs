//! Label selectors with upstream's full syntax and error texts (apimachinery `pkg/labels/selector.go`).
//!
//! ```text
//! <selector>    ::= <requirement> | <requirement> "," <selector>
//! <requirement> ::= [!] KEY [ ("in" | "notin") "(" VALUES ")" | ("=" | "==" | "!=" | ">" | "<") VALUE ]
//! ```
//! The REST layer parses `labelSelector` with [`LabelSelector::parse`]; storage evaluates it on attributes the
//! layer above extracts (see [`super::Predicate`]).

use apiserver_gotext::quote as go_quote;
use std::collections::BTreeMap;
use std::fmt;

/// A selector failed to parse; the text is upstream's, and the REST layer returns it as a 400 BadRequest.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SelectorError(pub String);

/// How a requirement relates a label to its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `key=value`
    Equals,
    /// `key==value`
    DoubleEquals,
    /// `key!=value` (also true when the label is absent)
    NotEquals,
    /// `key in (a,b)`
    In,
    /// `key notin (a,b)` (also true when the label is absent)
    NotIn,
    /// `key`
    Exists,
    /// `!key`
    DoesNotExist,
    /// `key>1` (integers)
    GreaterThan,
    /// `key<1` (integers)
    LessThan,
}

impl Operator {
    /// Upstream's `selection.Operator` string.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
        }
    }
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

/// One condition on one label.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a checked requirement (upstream `NewRequirement`): a qualified-name key, label values, and the value
    /// count each operator needs. Values are kept sorted and unique.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, SelectorError> {
        let mut errs: Vec<String> = Vec::new();
        if let Some(e) = validate_label_key(key, "key") {
            errs.push(e);
        }
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => errs.push(format!(
                "values: Invalid value: {}: for 'in', 'notin' operators, values set can't be empty",
                go_string_slice(&values)
            )),
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if values.len() != 1 => errs.push(
                format!(
                    "values: Invalid value: {}: exact-match compatibility requires one single value",
                    go_string_slice(&values)
                ),
            ),
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => errs.push(format!(
                "values: Invalid value: {}: values set must be empty for exists and does not exist",
                go_string_slice(&values)
            )),
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(format!(
                        "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                        go_string_slice(&values)
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(format!(
                            "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                            go_quote(v)
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in values.iter().enumerate() {
            let msgs = label_value_errors(v);
            if !msgs.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {}: {}",
                    go_quote(v),
                    msgs.join("; ")
                ));
            }
        }
        if !errs.is_empty() {
            return Err(SelectorError(aggregate(errs)));
        }
        let mut values = values;
        values.sort();
        values.dedup();
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether a label set satisfies the requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let got = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                got.is_some_and(|v| self.has(v))
            }
            Operator::NotIn | Operator::NotEquals => got.is_none_or(|v| !self.has(v)),
            Operator::Exists => got.is_some(),
            Operator::DoesNotExist => got.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(got), [want]) = (got, self.values.as_slice()) else {
                    return false;
                };
                match (got.parse::<i64>(), want.parse::<i64>()) {
                    (Ok(g), Ok(w)) => {
                        if self.operator == Operator::GreaterThan {
                            g > w
                        } else {
                            g < w
                        }
                    }
                    _ => false,
                }
            }
        }
    }

    fn has(&self, v: &str) -> bool {
        self.values.iter().any(|x| x == v)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        let set = matches!(self.operator, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        f.write_str(&self.values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A conjunction of label requirements; empty selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches every label set.
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// Parses upstream's label selector syntax (`labels.Parse`); requirements are sorted by key.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            items: lex_all(selector),
            pos: 0,
        };
        let mut requirements = parser.parse().map_err(SelectorError)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// A selector that requires every label of `set` to equal its value (upstream `SelectorFromSet`).
    pub fn from_set(set: &BTreeMap<String, String>) -> Self {
        let requirements = set
            .iter()
            .map(|(k, v)| Requirement {
                key: k.clone(),
                operator: Operator::Equals,
                values: vec![v.clone()],
            })
            .collect();
        LabelSelector { requirements }
    }

    /// Adds a requirement, keeping the order by key.
    pub fn with_requirement(mut self, requirement: Requirement) -> Self {
        self.requirements.push(requirement);
        self.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        self
    }

    /// True when the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether a label set satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The single value `label` must have, if the selector pins it (lets a store use an index).
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == label)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [v]) => Some(v),
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
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

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LabelSelector::parse(s)
    }
}

// ---- lexer ----

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Token {
    Error,
    End,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn literal_token(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::DoesNotExist,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "in" => Token::In,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "notin" => Token::NotIn,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special(b: u8) -> bool {
    matches!(b, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a str,
    pos: usize,
}

impl Lexer<'_> {
    /// The next byte, or 0 at the end (a NUL byte also ends the input, as upstream).
    fn read(&mut self) -> u8 {
        match self.s.as_bytes().get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => {
                // Past the end counts as a read so that unread stays symmetric.
                self.pos += 1;
                0
            }
        }
    }

    fn unread(&mut self) {
        self.pos -= 1;
    }

    fn slice(&self, start: usize, end: usize) -> String {
        let end = end.min(self.s.len());
        self.s
            .get(start..end)
            .map(str::to_string)
            .unwrap_or_else(|| {
                String::from_utf8_lossy(&self.s.as_bytes()[start.min(end)..end]).into_owned()
            })
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::End, String::new());
        }
        self.unread();
        if is_special(ch) {
            self.scan_special()
        } else {
            self.scan_identifier()
        }
    }

    fn scan_identifier(&mut self) -> (Token, String) {
        let start = self.pos;
        let end;
        loop {
            let ch = self.read();
            if ch == 0 {
                // As upstream: a NUL byte ends the identifier and is consumed (what follows is lexed next);
                // the end of the input is not.
                end = self.pos - 1;
                if self.pos > self.s.len() {
                    self.unread();
                }
                break;
            }
            if is_special(ch) || is_whitespace(ch) {
                self.unread();
                end = self.pos;
                break;
            }
        }
        let s = self.slice(start, end);
        match literal_token(&s) {
            Some(t) => (t, s),
            None => (Token::Identifier, s),
        }
    }

    fn scan_special(&mut self) -> (Token, String) {
        let start = self.pos;
        let mut last: Option<(Token, String)> = None;
        loop {
            let ch = self.read();
            if ch == 0 {
                // A NUL byte is consumed, as upstream (see `scan_identifier`).
                if self.pos > self.s.len() {
                    self.unread();
                }
                break;
            }
            if !is_special(ch) {
                self.unread();
                break;
            }
            let buf = self.slice(start, self.pos);
            if let Some(t) = literal_token(&buf) {
                last = Some((t, buf));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        match last {
            Some(item) => item,
            None => {
                let buf = self.slice(start, self.pos);
                (
                    Token::Error,
                    format!("error expected: keyword found '{buf}'"),
                )
            }
        }
    }
}

fn lex_all(s: &str) -> Vec<(Token, String)> {
    let mut lexer = Lexer { s, pos: 0 };
    let mut items = Vec::new();
    loop {
        let (t, lit) = lexer.lex();
        items.push((t, lit));
        if t == Token::End {
            return items;
        }
    }
}

// ---- parser ----

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<(Token, String)>,
    pos: usize,
}

impl Parser {
    fn item(&self, ctx: Context) -> (Token, String) {
        // The lexer always ends with End, and parsing stops there, so the index is in range; be safe anyway.
        let (t, lit) = self
            .items
            .get(self.pos)
            .cloned()
            .unwrap_or((Token::End, String::new()));
        let t = if ctx == Context::Values && matches!(t, Token::In | Token::NotIn) {
            Token::Identifier
        } else {
            t
        };
        (t, lit)
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        self.item(ctx)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let r = self.item(ctx);
        if self.pos < self.items.len() - 1 {
            self.pos += 1;
        }
        r
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (t, lit) = self.lookahead(Context::Values);
            match t {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::End => return Ok(reqs),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::End => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{lit}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        if let Some(op @ (Operator::Exists | Operator::DoesNotExist)) = op {
            return Requirement::new(&key, op, Vec::new()).map_err(|e| e.0);
        }
        let op = self.parse_operator()?;
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values).map_err(|e| e.0)
    }

    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut op = None;
        let (mut t, mut lit) = self.consume(Context::Values);
        if t == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (t, lit) = self.consume(Context::Values);
        }
        if t != Token::Identifier {
            return Err(format!("found '{lit}', expected: identifier"));
        }
        if let Some(e) = validate_label_key(&lit, "<nil>") {
            return Err(e);
        }
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::End || next == Token::Comma) && op != Some(Operator::DoesNotExist) {
            op = Some(Operator::Exists);
        }
        Ok((lit, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (t, lit) = self.consume(Context::KeyAndOperator);
        Ok(match t {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => return Err(format!("found '{lit}', expected: {BINARY_OPERATORS}")),
        })
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (t, lit) = self.consume(Context::Values);
        if t != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (t, lit) = self.lookahead(Context::Values);
        match t {
            Token::Identifier | Token::Comma => {
                let s = self.parse_identifiers_list()?;
                let (t, _) = self.consume(Context::Values);
                if t != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(s)
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut s: Vec<String> = Vec::new();
        let insert = |s: &mut Vec<String>, v: String| {
            if !s.contains(&v) {
                s.push(v);
            }
        };
        loop {
            let (t, lit) = self.consume(Context::Values);
            match t {
                Token::Identifier => {
                    insert(&mut s, lit);
                    let (t2, l2) = self.lookahead(Context::Values);
                    match t2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if s.is_empty() {
                        insert(&mut s, String::new());
                    }
                    let (t2, _) = self.lookahead(Context::Values);
                    if t2 == Token::ClosedPar {
                        insert(&mut s, String::new());
                        return Ok(s);
                    }
                    if t2 == Token::Comma {
                        self.consume(Context::Values);
                        insert(&mut s, String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (t, _) = self.lookahead(Context::Values);
        if t == Token::End || t == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (t, lit) = self.consume(Context::Values);
        if t == Token::Identifier {
            return Ok(vec![lit]);
        }
        Err(format!("found '{lit}', expected: identifier"))
    }
}

// ---- validation (apimachinery pkg/util/validation) ----

const QNAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QNAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Upstream `RegexError`: a format's message with examples and the regex.
#[doc(hidden)]
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    let Some((&first, &last)) = b.first().zip(b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && !b[0].is_ascii_uppercase()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && !b[b.len() - 1].is_ascii_uppercase()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        })
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";

/// Upstream `IsDNS1123Subdomain`: the reasons `value` is not a lowercase RFC 1123 subdomain (empty when it is).
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !is_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Upstream `IsDNS1123Label`: the reasons `value` is not a lowercase RFC 1123 label (empty when it is).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !is_dns1123_subdomain(value) {
        errs.push(regex_error(
            DNS1123_LABEL_ERR,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    } else if value.contains('.') {
        errs.push("must not contain dots".to_string());
    }
    errs
}

/// Upstream `IsQualifiedName`: the reasons `value` is not a valid label key (empty when it is).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > 253 {
                    errs.push("prefix part must be no more than 253 characters".to_string());
                }
                if !is_dns1123_subdomain(prefix) {
                    errs.push(format!(
                        "prefix part {}",
                        regex_error(
                            DNS1123_SUBDOMAIN_ERR,
                            DNS1123_SUBDOMAIN_FMT,
                            &["example.com"]
                        )
                    ));
                }
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QNAME_ERR, QNAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push("name part must be no more than 63 characters".to_string());
    }
    if !is_qualified_name_part(name) {
        errs.push(format!(
            "name part {}",
            regex_error(QNAME_ERR, QNAME_FMT, &["MyName", "my.name", "123-abc"])
        ));
    }
    errs
}

/// Upstream `IsValidLabelValue`: the reasons `value` is not a valid label value (empty when it is).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            &format!("({QNAME_FMT})?"),
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn validate_label_key(key: &str, path: &str) -> Option<String> {
    let errs = qualified_name_errors(key);
    if errs.is_empty() {
        None
    } else {
        Some(format!(
            "{path}: Invalid value: {}: {}",
            go_quote(key),
            errs.join("; ")
        ))
    }
}

/// Joins several errors the way upstream's `utilerrors.Aggregate` prints them.
fn aggregate(mut errs: Vec<String>) -> String {
    let mut seen = std::collections::HashSet::new();
    errs.retain(|e| seen.insert(e.clone()));
    if errs.len() == 1 {
        errs.remove(0)
    } else {
        format!("[{}]", errs.join(", "))
    }
}

/// Go's `%#v` of a `[]string`.
fn go_string_slice(v: &[String]) -> String {
    format!(
        "[]string{{{}}}",
        v.iter().map(|s| go_quote(s)).collect::<Vec<_>>().join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_upstream_examples() {
        for (input, out) in [
            ("", ""),
            ("x=a", "x=a"),
            ("x=a,y!=b", "x=a,y!=b"),
            ("y!=b,x=a", "x=a,y!=b"),
            ("x=a,y!=b,z in (h,i,j)", "x=a,y!=b,z in (h,i,j)"),
            ("x!=a", "x!=a"),
            ("x==a", "x==a"),
            ("x>1", "x>1"),
            ("x<7", "x<7"),
            ("z in ()", "z in ()"),
            (
                "x in (foo,,baz),y,z notin ()",
                "x in (,baz,foo),y,z notin ()",
            ),
            ("x notin (b,a)", "x notin (a,b)"),
            (" x in ( a , b ) ", "x in (a,b)"),
            ("!x", "!x"),
            ("x,!y", "x,!y"),
            ("x=", "x="),
            ("x= ", "x="),
            ("x=,z= ", "x=,z="),
            ("x in (in)", "x in (in)"),
            ("w in (notin)", "w in (notin)"),
            ("example.com/app=v", "example.com/app=v"),
            ("x=a,x!=b", "x=a,x!=b"),
        ] {
            let sel = LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(sel.to_string(), out, "{input}");
        }
    }

    #[test]
    fn rejects_like_upstream() {
        for (input, msg) in [
            ("x=a,", "found '', expected: identifier after ','"),
            (
                "x>",
                "values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            ("x=a||y=b", "values[0][x]: Invalid value: \"a||y\""),
            ("x in (", "found '', expected: ',', ')' or identifier"),
            ("x in (a", "found '', expected: ',' or ')'"),
            ("x notin ( a", "found '', expected: ',' or ')'"),
            ("x y", "found 'y', expected: in, notin, =, ==, !=, gt, lt"),
            ("!x=a", "found '=', expected: ',' or 'end of string'"),
            ("x=a b", "found 'b', expected: ',' or 'end of string'"),
            (
                "=a",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            (
                "x>a",
                "values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            ("x=a b c", "found 'b', expected: ',' or 'end of string'"),
        ] {
            let err = LabelSelector::parse(input).expect_err(input).0;
            assert!(err.contains(msg), "{input}: {err}");
        }
        let err = LabelSelector::parse("a/b/c=d").unwrap_err().0;
        assert!(err.starts_with("unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must"), "{err}");
        let err = LabelSelector::parse("x=a b").unwrap_err().0;
        assert_eq!(err, "found 'b', expected: ',' or 'end of string'");
        let err = LabelSelector::parse("x=-a").unwrap_err().0;
        assert!(err.starts_with("unable to parse requirement: values[0][x]: Invalid value: \"-a\": a valid label must be"), "{err}");
        let err = LabelSelector::parse("-x").unwrap_err().0;
        assert_eq!(
            err,
            "unable to parse requirement: <nil>: Invalid value: \"-x\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
    }

    /// Probe finding D8: a NUL byte inside a selector ends a token and is consumed, as in upstream's lexer, so
    /// what follows it is a parse error rather than silently dropped.
    #[test]
    fn nul_bytes_lex_as_upstream() {
        let err = LabelSelector::parse("x=a\0b").unwrap_err().0;
        assert_eq!(err, "found 'b', expected: ',' or 'end of string'");
        let err = LabelSelector::parse("x\0y=a").unwrap_err().0;
        assert_eq!(
            err,
            "unable to parse requirement: found 'y', expected: in, notin, =, ==, !=, gt, lt"
        );
        // Upstream reads `x=\0a` as `x=a` and a trailing NUL as the end.
        assert_eq!(LabelSelector::parse("x=\0a").unwrap().to_string(), "x=a");
        assert_eq!(LabelSelector::parse("x=a\0").unwrap().to_string(), "x=a");
    }

    #[test]
    fn matches_like_upstream() {
        let l = labels(&[("x", "a"), ("n", "5")]);
        for (sel, want) in [
            ("", true),
            ("x=a", true),
            ("x=b", false),
            ("x!=b", true),
            ("y!=b", true),
            ("x in (a,b)", true),
            ("x notin (a)", false),
            ("y notin (a)", true),
            ("x", true),
            ("!x", false),
            ("!y", true),
            ("n>4", true),
            ("n<5", false),
            ("x>1", false),
            ("x=a,n>4", true),
            ("x=a,n>5", false),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&l),
                want,
                "{sel}"
            );
        }
        assert_eq!(
            LabelSelector::parse("x in (a)")
                .unwrap()
                .requires_exact_match("x"),
            Some("a")
        );
    }
}
