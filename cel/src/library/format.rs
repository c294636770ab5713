//! Kubernetes' format library (k8s.io/apiserver/pkg/cel/library/format.go): `format.<name>()` and
//! `format.named(name)` give a named format, `<format>.validate(string)` returns `optional.none()` for a valid string
//! or `optional.of([errors])`, with apimachinery's validation messages.

use super::urls::Url;
use super::{opaque, opaque_arg, optional, string_arg, string_list, values_fn};
use cel::common::types::{STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use regex::Regex;
use std::sync::LazyLock;

pub(crate) const TYPE_NAME: &str = "kubernetes.NamedFormat";

/// A named format: which validation `validate` runs. Formats are equal by name.
#[derive(Debug, Clone, Copy, Eq)]
pub(crate) struct Format {
    name: &'static str,
    check: fn(&str) -> Vec<String>,
}

impl PartialEq for Format {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Opaque for Format {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

fn anchored(fmt: &str) -> Regex {
    // The patterns are constants of this file; a typo would fail every format test.
    Regex::new(&format!("^{fmt}$")).unwrap_or_else(|e| panic!("format pattern {fmt}: {e}"))
}

static DNS1123_LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_LABEL_FMT));
static DNS1123_SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_SUBDOMAIN_FMT));
static DNS1035_LABEL: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1035_LABEL_FMT));
static QUALIFIED_NAME: LazyLock<Regex> = LazyLock::new(|| anchored(QUALIFIED_NAME_FMT));
static LABEL_VALUE: LazyLock<Regex> = LazyLock::new(|| anchored(LABEL_VALUE_FMT));
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    anchored("(?i:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})")
});

/// apimachinery's `RegexError`.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}'")).collect();
    format!(
        "{msg} (e.g. {}, regex used for validation is '{fmt}')",
        examples.join(",  or ")
    )
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

pub(crate) fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !DNS1123_LABEL.is_match(s) {
        errs.push(regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and \
             end with an alphanumeric character",
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

pub(crate) fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !DNS1123_SUBDOMAIN.is_match(s) {
        errs.push(regex_error(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must \
             start and end with an alphanumeric character",
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !DNS1035_LABEL.is_match(s) {
        errs.push(regex_error(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic \
             character, and end with an alphanumeric character",
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errs
}

/// apimachinery's `maskTrailingDash`, for the `...Prefix` formats (generateName prefixes may end in `-`).
fn mask_trailing_dash(s: &str) -> String {
    if s.len() > 1 && s.ends_with('-') {
        let cut = s.len() - 2;
        if s.is_char_boundary(cut) {
            return format!("{}a", &s[..cut]);
        }
    }
    s.to_owned()
}

fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_owned());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !QUALIFIED_NAME.is_match(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !LABEL_VALUE.is_match(s) {
        errs.push(regex_error(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must \
             start and end with an alphanumeric character",
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

fn uri(s: &str) -> Vec<String> {
    Url::parse_request_uri(s).err().into_iter().collect()
}

fn uuid(s: &str) -> Vec<String> {
    if UUID.is_match(s) {
        vec![]
    } else {
        vec!["does not match the UUID format".into()]
    }
}

fn byte(s: &str) -> Vec<String> {
    use base64::Engine as _;
    match base64::engine::general_purpose::STANDARD.decode(s) {
        Ok(_) => vec![],
        Err(_) => vec!["invalid base64".into()],
    }
}

fn date(s: &str) -> Vec<String> {
    match chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        Ok(_) if s.len() == 10 => vec![],
        _ => vec!["invalid date".into()],
    }
}

fn datetime(s: &str) -> Vec<String> {
    match crate::convert::parse_date_time(s) {
        Some(_) => vec![],
        None => vec!["invalid datetime".into()],
    }
}

/// The named formats, by the name `format.<name>()` and `format.named(name)` use.
const FORMATS: &[Format] = &[
    Format {
        name: "dns1123Label",
        check: dns1123_label,
    },
    Format {
        name: "dns1123Subdomain",
        check: dns1123_subdomain,
    },
    Format {
        name: "dns1035Label",
        check: dns1035_label,
    },
    Format {
        name: "qualifiedName",
        check: qualified_name,
    },
    Format {
        name: "dns1123LabelPrefix",
        check: |s| dns1123_label(&mask_trailing_dash(s)),
    },
    Format {
        name: "dns1123SubdomainPrefix",
        check: |s| dns1123_subdomain(&mask_trailing_dash(s)),
    },
    Format {
        name: "dns1035LabelPrefix",
        check: |s| dns1035_label(&mask_trailing_dash(s)),
    },
    Format {
        name: "labelValue",
        check: label_value,
    },
    Format {
        name: "uri",
        check: uri,
    },
    Format {
        name: "uuid",
        check: uuid,
    },
    Format {
        name: "byte",
        check: byte,
    },
    Format {
        name: "date",
        check: date,
    },
    Format {
        name: "datetime",
        check: datetime,
    },
];

/// `format.<name>()` for each named format: one plain `fn` each, as overloads cannot capture.
macro_rules! format_constructors {
    ($env:expr, $($name:literal),* $(,)?) => {
        $(
            {
                fn make(_: &[Value]) -> Result<Value, ExecutionError> {
                    Ok(named($name).map(opaque).unwrap_or(Value::Null))
                }
                $env.add_overload(concat!("format.", $name), concat!("format_", $name), vec![], values_fn!(make))?;
            }
        )*
    };
}

fn named(name: &str) -> Option<Format> {
    FORMATS.iter().find(|f| f.name == name).copied()
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let t = || Type::new_opaque_type(TYPE_NAME);
    env.add_type(t())?;
    format_constructors!(
        env,
        "dns1123Label",
        "dns1123Subdomain",
        "dns1035Label",
        "qualifiedName",
        "dns1123LabelPrefix",
        "dns1123SubdomainPrefix",
        "dns1035LabelPrefix",
        "labelValue",
        "uri",
        "uuid",
        "byte",
        "date",
        "datetime",
    );
    env.add_overload(
        "format.named",
        "format-named",
        vec![STRING_TYPE],
        values_fn!(format_named),
    )?;
    env.add_member_overload(
        "validate",
        "format-validate",
        t(),
        vec![STRING_TYPE],
        values_fn!(validate),
    )?;
    Ok(())
}

fn format_named(args: &[Value]) -> Result<Value, ExecutionError> {
    let name = string_arg("format.named", args, 0)?;
    Ok(optional(named(name).map(opaque)))
}

fn validate(args: &[Value]) -> Result<Value, ExecutionError> {
    let format = opaque_arg::<Format>("validate", args, 0)?;
    let s = string_arg("validate", args, 1)?;
    crate::cost::charge_traversal(s.len())?;
    let errors = (format.check)(s);
    Ok(optional((!errors.is_empty()).then(|| string_list(errors))))
}
