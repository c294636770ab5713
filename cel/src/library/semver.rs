//! Kubernetes' semver library (k8s.io/apiserver/pkg/cel/library/semverlib.go), on our own parser with the
//! semantics and error texts of the Go library upstream uses (blang/semver): `semver`, `isSemver` (both with the
//! optional `normalize` flag), `major`, `minor`, `patch`, `compareTo`, `isGreaterThan`, `isLessThan`.

use super::{error, no_such_overload, opaque, opaque_arg, string_arg, values_fn};
use cel::common::types::{BOOL_TYPE, STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::cmp::Ordering;

pub(crate) const TYPE_NAME: &str = "kubernetes.Semver";

#[derive(Debug, Clone, PartialEq, Eq)]
enum PreRelease {
    Numeric(u64),
    Alpha(String),
}

/// A semantic version. Build metadata is validated and dropped: neither equality nor comparison reads it.
#[derive(Debug, Clone, Eq)]
pub(crate) struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<PreRelease>,
}

impl PartialEq for Semver {
    fn eq(&self, other: &Self) -> bool {
        self.compare(other) == Ordering::Equal
    }
}

impl Opaque for Semver {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

fn only(s: &str, allowed: impl Fn(u8) -> bool) -> bool {
    s.bytes().all(allowed)
}

fn alphanumeric(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

fn has_leading_zero(s: &str) -> bool {
    s.len() > 1 && s.starts_with('0')
}

fn number(part: &str, name: &str) -> Result<u64, String> {
    if !only(part, |b| b.is_ascii_digit()) {
        return Err(format!(
            "Invalid character(s) found in {name} number {part:?}"
        ));
    }
    if has_leading_zero(part) {
        let capital = name[..1].to_uppercase() + &name[1..];
        return Err(format!(
            "{capital} number must not contain leading zeroes {part:?}"
        ));
    }
    part.parse()
        .map_err(|e: std::num::ParseIntError| format!("strconv.ParseUint: parsing {part:?}: {e}"))
}

impl Semver {
    /// Parses strictly, as `semver.Parse`.
    pub(crate) fn parse(s: &str) -> Result<Semver, String> {
        if s.is_empty() {
            return Err("Version string empty".into());
        }
        let parts: Vec<&str> = s.splitn(3, '.').collect();
        if parts.len() != 3 {
            return Err("No Major.Minor.Patch elements found".into());
        }
        let major = number(parts[0], "major")?;
        let minor = number(parts[1], "minor")?;
        let mut patch = parts[2];
        let mut build = Vec::new();
        if let Some((p, b)) = patch.split_once('+') {
            build = b.split('.').map(str::to_owned).collect();
            patch = p;
        }
        let mut pre_parts: Vec<&str> = Vec::new();
        if let Some((p, pre)) = patch.split_once('-') {
            pre_parts = pre.split('.').collect();
            patch = p;
        }
        let patch = number(patch, "patch")?;
        let mut pre = Vec::new();
        for p in pre_parts {
            if p.is_empty() {
                return Err("Prerelease is empty".into());
            }
            if only(p, |b| b.is_ascii_digit()) {
                if has_leading_zero(p) {
                    return Err(format!(
                        "Numeric PreRelease version must not contain leading zeroes {p:?}"
                    ));
                }
                pre.push(PreRelease::Numeric(p.parse().map_err(|e| format!("{e}"))?));
            } else if only(p, alphanumeric) {
                pre.push(PreRelease::Alpha(p.to_owned()));
            } else {
                return Err(format!("Invalid character(s) found in prerelease {p:?}"));
            }
        }
        for b in &build {
            if b.is_empty() {
                return Err("Build meta data is empty".into());
            }
            if !only(b, alphanumeric) {
                return Err(format!(
                    "Invalid character(s) found in build meta data {b:?}"
                ));
            }
        }
        Ok(Semver {
            major,
            minor,
            patch,
            pre,
        })
    }

    /// Parses leniently, as upstream's `normalizeAndParse`: a leading `v`, leading zeros and missing minor or patch
    /// numbers are accepted.
    pub(crate) fn parse_normalized(s: &str) -> Result<Semver, String> {
        let s = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = s
            .splitn(3, '.')
            .map(|p| {
                if p.len() > 1 {
                    let trimmed = p.trim_start_matches('0');
                    if trimmed.is_empty() || !trimmed.as_bytes()[0].is_ascii_digit() {
                        format!("0{trimmed}")
                    } else {
                        trimmed.to_owned()
                    }
                } else {
                    p.to_owned()
                }
            })
            .collect();
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err("short version cannot contain PreRelease/Build meta data".into());
            }
            while parts.len() < 3 {
                parts.push("0".into());
            }
        }
        Semver::parse(&parts.join("."))
    }

    fn compare(&self, other: &Semver) -> Ordering {
        let core =
            (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            (false, false) => {}
        }
        for (a, b) in self.pre.iter().zip(other.pre.iter()) {
            let o = match (a, b) {
                (PreRelease::Numeric(x), PreRelease::Numeric(y)) => x.cmp(y),
                (PreRelease::Numeric(_), PreRelease::Alpha(_)) => Ordering::Less,
                (PreRelease::Alpha(_), PreRelease::Numeric(_)) => Ordering::Greater,
                (PreRelease::Alpha(x), PreRelease::Alpha(y)) => x.cmp(y),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let v = || Type::new_opaque_type(TYPE_NAME);
    env.add_type(v())?;
    env.add_overload(
        "semver",
        "string_to_semver",
        vec![STRING_TYPE],
        values_fn!(to_semver),
    )?;
    env.add_overload(
        "semver",
        "string_bool_to_semver",
        vec![STRING_TYPE, BOOL_TYPE],
        values_fn!(to_semver),
    )?;
    env.add_overload(
        "isSemver",
        "is_semver_string",
        vec![STRING_TYPE],
        values_fn!(is_semver),
    )?;
    env.add_overload(
        "isSemver",
        "is_semver_string_bool",
        vec![STRING_TYPE, BOOL_TYPE],
        values_fn!(is_semver),
    )?;
    env.add_member_overload(
        "isGreaterThan",
        "semver_is_greater_than",
        v(),
        vec![v()],
        values_fn!(greater),
    )?;
    env.add_member_overload(
        "isLessThan",
        "semver_is_less_than",
        v(),
        vec![v()],
        values_fn!(less),
    )?;
    env.add_member_overload(
        "compareTo",
        "semver_compare_to",
        v(),
        vec![v()],
        values_fn!(compare_to),
    )?;
    env.add_member_overload("major", "semver_major", v(), vec![], values_fn!(major))?;
    env.add_member_overload("minor", "semver_minor", v(), vec![], values_fn!(minor))?;
    env.add_member_overload("patch", "semver_patch", v(), vec![], values_fn!(patch))?;
    Ok(())
}

fn parse_args(f: &str, args: &[Value]) -> Result<Result<Semver, String>, ExecutionError> {
    let s = string_arg(f, args, 0)?;
    let normalize = match args.get(1) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(no_such_overload(f, args)),
    };
    Ok(if normalize {
        Semver::parse_normalized(s)
    } else {
        Semver::parse(s)
    })
}

fn to_semver(args: &[Value]) -> Result<Value, ExecutionError> {
    parse_args("semver", args)?.map(opaque).map_err(error)
}

fn is_semver(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_args("isSemver", args)?.is_ok()))
}

fn pair<'a>(f: &str, args: &'a [Value]) -> Result<Ordering, ExecutionError> {
    let a: &'a Semver = opaque_arg(f, args, 0)?;
    let b: &'a Semver = opaque_arg(f, args, 1)?;
    Ok(a.compare(b))
}

fn greater(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        pair("isGreaterThan", args)? == Ordering::Greater,
    ))
}

fn less(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(pair("isLessThan", args)? == Ordering::Less))
}

fn compare_to(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(pair("compareTo", args)? as i64))
}

fn part(f: &str, args: &[Value], get: fn(&Semver) -> u64) -> Result<Value, ExecutionError> {
    Ok(Value::Int(get(opaque_arg::<Semver>(f, args, 0)?) as i64))
}

fn major(args: &[Value]) -> Result<Value, ExecutionError> {
    part("major", args, |v| v.major)
}

fn minor(args: &[Value]) -> Result<Value, ExecutionError> {
    part("minor", args, |v| v.minor)
}

fn patch(args: &[Value]) -> Result<Value, ExecutionError> {
    part("patch", args, |v| v.patch)
}
