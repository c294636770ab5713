//! Kubernetes' list library (k8s.io/apiserver/pkg/cel/library/lists.go): `isSorted`, `sum`, `min`, `max`,
//! `indexOf`, `lastIndexOf`. The `cel` crate's lists extension adds cel-go's `slice`, `flatten`, `distinct`,
//! `reverse`, `sort`, `sortBy` and `lists.range`.

use super::{error, list_arg, no_such_overload, values_fn};
use crate::cost::charge;
use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::cmp::Ordering;

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload(
        "isSorted",
        "list_is_sorted",
        LIST_TYPE,
        vec![],
        values_fn!(is_sorted),
    )?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], values_fn!(sum))?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], values_fn!(min))?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], values_fn!(max))?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        values_fn!(index_of),
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        values_fn!(last_index_of),
    )?;
    Ok(())
}

/// Orders two elements as CEL's `<` does; elements that cannot be ordered are a "no such overload".
fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    let comparable = |v: &Value| {
        matches!(
            v,
            Value::Int(_)
                | Value::UInt(_)
                | Value::Float(_)
                | Value::String(_)
                | Value::Bool(_)
                | Value::Duration(_)
                | Value::Timestamp(_)
                | Value::Bytes(_)
        )
    };
    if !comparable(a) || !comparable(b) {
        return Err(no_such_overload(function, &[a.clone(), b.clone()]));
    }
    if let (Value::Bytes(x), Value::Bytes(y)) = (a, b) {
        return Ok(x.cmp(y));
    }
    a.partial_cmp(b)
        .ok_or_else(|| no_such_overload(function, &[a.clone(), b.clone()]))
}

fn is_sorted(args: &[Value]) -> Result<Value, ExecutionError> {
    let list = list_arg("isSorted", args, 0)?;
    charge(list.len() as u64)?;
    for pair in list.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn sum(args: &[Value]) -> Result<Value, ExecutionError> {
    let list = list_arg("sum", args, 0)?;
    charge(list.len() as u64)?;
    let Some(first) = list.first() else {
        // An empty list sums to int zero: without a type checker its element type is unknown.
        return Ok(Value::Int(0));
    };
    let mut acc = first.clone();
    for v in &list[1..] {
        acc = match (&acc, v) {
            (Value::Int(a), Value::Int(b)) => {
                Value::Int(a.checked_add(*b).ok_or_else(|| error("integer overflow"))?)
            }
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| error("unsigned integer overflow"))?,
            ),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            (Value::Duration(a), Value::Duration(b)) => {
                Value::Duration(a.checked_add(b).ok_or_else(|| error("duration overflow"))?)
            }
            _ => return Err(no_such_overload("sum", args)),
        };
    }
    match acc {
        Value::Int(_) | Value::UInt(_) | Value::Float(_) | Value::Duration(_) => Ok(acc),
        _ => Err(no_such_overload("sum", args)),
    }
}

fn extreme(name: &str, args: &[Value], prefer: Ordering) -> Result<Value, ExecutionError> {
    let list = list_arg(name, args, 0)?;
    charge(list.len() as u64)?;
    let mut best: Option<&Value> = None;
    for v in list {
        best = Some(match best {
            None => {
                // a lone element must still be comparable
                compare(name, v, v)?;
                v
            }
            Some(b) if compare(name, b, v)? == prefer => v,
            Some(b) => b,
        });
    }
    best.cloned()
        .ok_or_else(|| error(format!("{name} called on empty list")))
}

fn min(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme("min", args, Ordering::Greater)
}

fn max(args: &[Value]) -> Result<Value, ExecutionError> {
    extreme("max", args, Ordering::Less)
}

fn index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    let list = list_arg("indexOf", args, 0)?;
    charge(list.len() as u64)?;
    let item = args
        .get(1)
        .ok_or_else(|| no_such_overload("indexOf", args))?;
    Ok(Value::Int(
        list.iter().position(|v| v == item).map_or(-1, |i| i as i64),
    ))
}

fn last_index_of(args: &[Value]) -> Result<Value, ExecutionError> {
    let list = list_arg("lastIndexOf", args, 0)?;
    charge(list.len() as u64)?;
    let item = args
        .get(1)
        .ok_or_else(|| no_such_overload("lastIndexOf", args))?;
    Ok(Value::Int(
        list.iter()
            .rposition(|v| v == item)
            .map_or(-1, |i| i as i64),
    ))
}
