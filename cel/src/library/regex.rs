//! Kubernetes' regex library (k8s.io/apiserver/pkg/cel/library/regex.go): `find`, `findAll`. Patterns are RE2, as
//! the `regex` crate's syntax is; matching is linear in the input.

use super::{error, no_such_overload, string, string_arg, string_list, values_fn};
use crate::cost::charge_traversal;
use cel::common::types::{INT_TYPE, STRING_TYPE};
use cel::{DeclarationError, Env, ExecutionError, Value};

/// The largest compiled pattern accepted, as a guard against patterns that expand enormously (`(a{1000}){1000}`).
const MAX_COMPILED_PATTERN: usize = 1 << 20;

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "find",
        "string_find_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        values_fn!(find),
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string",
        STRING_TYPE,
        vec![STRING_TYPE],
        values_fn!(find_all),
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_string_int",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        values_fn!(find_all),
    )?;
    Ok(())
}

/// Compiles `pattern`, with upstream's text for a bad one.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, ExecutionError> {
    regex::RegexBuilder::new(pattern)
        .size_limit(MAX_COMPILED_PATTERN)
        .build()
        .map_err(|e| error(format!("Illegal regex: {e}")))
}

fn find(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("find", args, 0)?;
    let pattern = string_arg("find", args, 1)?;
    charge_traversal(s.len().saturating_mul(pattern.len().div_ceil(4).max(1)))?;
    let re = compile(pattern)?;
    Ok(string(re.find(s).map_or("", |m| m.as_str())))
}

fn find_all(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("findAll", args, 0)?;
    let pattern = string_arg("findAll", args, 1)?;
    let limit = match args.get(2) {
        None => None,
        Some(Value::Int(n)) if *n < 0 => None,
        Some(Value::Int(n)) => Some(*n as usize),
        Some(_) => return Err(no_such_overload("findAll", args)),
    };
    charge_traversal(s.len().saturating_mul(pattern.len().div_ceil(4).max(1)))?;
    let re = compile(pattern)?;
    let matches = re.find_iter(s).map(|m| m.as_str().to_owned());
    Ok(match limit {
        Some(n) => string_list(matches.take(n)),
        None => string_list(matches),
    })
}
