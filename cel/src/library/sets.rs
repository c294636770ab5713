//! cel-go's sets extension (`ext.Sets()`), which Kubernetes enables: `sets.contains`, `sets.equivalent`,
//! `sets.intersects` over lists, with CEL's equality (so `1`, `1u` and `1.0` are one element).

use super::{list_arg, values_fn};
use crate::cost::charge;
use cel::common::types::LIST_TYPE;
use cel::{DeclarationError, Env, ExecutionError, Value};

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(
        "sets.contains",
        "list_sets_contains_list",
        vec![LIST_TYPE, LIST_TYPE],
        values_fn!(contains),
    )?;
    env.add_overload(
        "sets.equivalent",
        "list_sets_equivalent_list",
        vec![LIST_TYPE, LIST_TYPE],
        values_fn!(equivalent),
    )?;
    env.add_overload(
        "sets.intersects",
        "list_sets_intersects_list",
        vec![LIST_TYPE, LIST_TYPE],
        values_fn!(intersects),
    )?;
    Ok(())
}

fn lists<'a>(
    function: &str,
    args: &'a [Value],
) -> Result<(&'a [Value], &'a [Value]), ExecutionError> {
    let a = list_arg(function, args, 0)?;
    let b = list_arg(function, args, 1)?;
    charge((a.len() as u64).saturating_mul(b.len() as u64))?;
    Ok((a, b))
}

/// Whether every element of `sub` is in `list`.
fn all_in(list: &[Value], sub: &[Value]) -> bool {
    sub.iter().all(|x| list.contains(x))
}

fn contains(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = lists("sets.contains", args)?;
    Ok(Value::Bool(all_in(a, b)))
}

fn equivalent(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = lists("sets.equivalent", args)?;
    Ok(Value::Bool(all_in(a, b) && all_in(b, a)))
}

fn intersects(args: &[Value]) -> Result<Value, ExecutionError> {
    let (a, b) = lists("sets.intersects", args)?;
    Ok(Value::Bool(a.iter().any(|x| b.contains(x))))
}
