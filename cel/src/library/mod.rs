//! Kubernetes' CEL libraries (k8s.io/apiserver/pkg/cel/library and the cel-go extensions Kubernetes enables), on
//! top of what the `cel` crate ships (its standard library and its `strings`, `lists` and `math` extensions).
//!
//! Functions are written against the owned [`Value`] enum: [`values_fn!`] turns a `fn(&[Value]) -> Result<Value>`
//! into the `cel` crate's overload signature, so each library reads as plain Rust.

pub mod authz;
pub(crate) mod cidr;
mod duration;
pub(crate) mod format;
pub(crate) mod ip;
pub(crate) mod lists;
pub(crate) mod quantity;
pub(crate) mod regex;
pub(crate) mod semver;
pub(crate) mod sets;
pub(crate) mod urls;

use cel::common::value::{CowVal, Val};
use cel::objects::{Opaque, OptionalValue};
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::sync::Arc;

pub(crate) use duration::{format_duration, parse_duration};

/// The signature every library function here is written in.
pub(crate) type ValuesFn = fn(&[Value]) -> Result<Value, ExecutionError>;

/// Calls `f` with the overload's arguments as owned [`Value`]s and hands its result back as a `cel` value.
pub(crate) fn call_with_values<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    f: ValuesFn,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let values = args
        .iter()
        .map(|arg| Value::try_from(arg.as_ref()))
        .collect::<Result<Vec<_>, _>>()?;
    let result: Box<dyn Val> = f(&values)?.try_into()?;
    Ok(CowVal::Owned(result))
}

/// Adapts a [`ValuesFn`] to the `cel` crate's overload signature (a plain `fn`, so one is generated per function).
macro_rules! values_fn {
    ($f:path) => {{
        fn overload<'b, 'v>(
            args: Vec<cel::common::value::CowVal<'b, 'v>>,
        ) -> Result<cel::common::value::CowVal<'b, 'v>, cel::ExecutionError> {
            $crate::library::call_with_values(args, $f)
        }
        overload
    }};
}
pub(crate) use values_fn;

/// Registers every library on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::lists)?;
    lists::register(env)?;
    sets::register(env)?;
    regex::register(env)?;
    urls::register(env)?;
    quantity::register(env)?;
    ip::register(env)?;
    cidr::register(env)?;
    semver::register(env)?;
    format::register(env)?;
    authz::register(env)?;
    env.add_overload(
        "jsonpatch.escapeKey",
        "string_jsonpatch_escape_key",
        vec![cel::common::types::STRING_TYPE],
        values_fn!(escape_key),
    )?;
    Ok(())
}

/// An error with upstream's text and nothing around it (the `cel` crate would prefix the function's name).
pub(crate) fn error(message: impl Into<String>) -> ExecutionError {
    ExecutionError::function_error("", message.into())
}

/// The "no such overload" error for arguments a function cannot take.
pub(crate) fn no_such_overload(function: &str, args: &[Value]) -> ExecutionError {
    ExecutionError::no_such_overload(function, args.iter().map(type_name).collect())
}

/// The CEL type name of a value, as in error messages.
pub(crate) fn type_name(value: &Value) -> String {
    match value {
        Value::List(_) => "list".into(),
        Value::Map(_) => "map".into(),
        Value::Function(_, _) => "function".into(),
        Value::Int(_) => "int".into(),
        Value::UInt(_) => "uint".into(),
        Value::Float(_) => "double".into(),
        Value::String(_) => "string".into(),
        Value::Bytes(_) => "bytes".into(),
        Value::Bool(_) => "bool".into(),
        Value::Duration(_) => "google.protobuf.Duration".into(),
        Value::Timestamp(_) => "google.protobuf.Timestamp".into(),
        Value::Opaque(o) => o.runtime_type_name().to_owned(),
        Value::Struct(s) => s.name().to_owned(),
        Value::Null => "null_type".into(),
    }
}

/// The string argument at `index`.
pub(crate) fn string_arg<'a>(
    function: &str,
    args: &'a [Value],
    index: usize,
) -> Result<&'a str, ExecutionError> {
    match args.get(index) {
        Some(Value::String(s)) => Ok(s.as_str()),
        _ => Err(no_such_overload(function, args)),
    }
}

/// The opaque argument of type `T` at `index`.
pub(crate) fn opaque_arg<'a, T: Opaque>(
    function: &str,
    args: &'a [Value],
    index: usize,
) -> Result<&'a T, ExecutionError> {
    match args.get(index) {
        Some(Value::Opaque(o)) => o
            .downcast_ref::<T>()
            .ok_or_else(|| no_such_overload(function, args)),
        _ => Err(no_such_overload(function, args)),
    }
}

/// The list argument at `index`.
pub(crate) fn list_arg<'a>(
    function: &str,
    args: &'a [Value],
    index: usize,
) -> Result<&'a [Value], ExecutionError> {
    match args.get(index) {
        Some(Value::List(l)) => Ok(l.as_slice()),
        _ => Err(no_such_overload(function, args)),
    }
}

/// Wraps an application value as a CEL value.
pub(crate) fn opaque<T: Opaque>(value: T) -> Value {
    Value::Opaque(Arc::new(value))
}

/// `optional.none()` or `optional.of(value)`.
pub(crate) fn optional(value: Option<Value>) -> Value {
    Value::Opaque(Arc::new(match value {
        Some(v) => OptionalValue::of(v),
        None => OptionalValue::none(),
    }))
}

/// A list of strings.
pub(crate) fn string_list<I: IntoIterator<Item = String>>(items: I) -> Value {
    Value::List(Arc::new(
        items
            .into_iter()
            .map(|s| Value::String(Arc::new(s)))
            .collect(),
    ))
}

/// A string value.
pub(crate) fn string(s: impl Into<String>) -> Value {
    Value::String(Arc::new(s.into()))
}

/// `jsonpatch.escapeKey(k)`, for MutatingAdmissionPolicy's JSON patches.
fn escape_key(args: &[Value]) -> Result<Value, ExecutionError> {
    let key = string_arg("jsonpatch.escapeKey", args, 0)?;
    Ok(string(crate::mutation::escape_key(key)))
}
