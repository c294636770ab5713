//! Kubernetes' quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go) over our own parser of
//! `resource.Quantity`'s text form: `quantity`, `isQuantity`, `sign`, `isGreaterThan`, `isLessThan`,
//! `compareTo`, `add`, `sub`, `asInteger`, `asApproximateFloat`, `isInteger`.

use super::{error, opaque, opaque_arg, string_arg, values_fn};
use cel::common::types::{INT_TYPE, STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive, Zero};
use std::cmp::Ordering;

/// The CEL type name of quantities, upstream's.
pub(crate) const TYPE_NAME: &str = "kubernetes.Quantity";

/// Upstream's text for a quantity that does not have the shape of one.
const FORMAT_WRONG: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const SUFFIX_WRONG: &str = "unable to parse quantity's suffix";
const NUMERIC_WRONG: &str = "unable to parse numeric part of quantity";

/// Quantities are held exactly, in nano-units (the finest precision Kubernetes keeps: it rounds finer values up).
const SCALE: u32 = 9;
/// The largest decimal exponent accepted, so that a text like `1e999999999` cannot make a huge number. Upstream's
/// arbitrary-precision decimal has no such bound; Kubernetes' own quantities are far inside it.
const MAX_EXPONENT: i64 = 1000;

/// A `resource.Quantity`'s value.
#[derive(Debug, Clone, Eq)]
pub(crate) struct Quantity {
    nanos: BigInt,
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Opaque for Quantity {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

impl Quantity {
    /// Parses a quantity as `resource.ParseQuantity` does, with its error texts.
    pub(crate) fn parse(text: &str) -> Result<Quantity, &'static str> {
        let (negative, rest) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            Some(_) => (false, text),
            None => return Err(FORMAT_WRONG),
        };
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, suffix) = rest.split_at(number_len);
        if number.is_empty() || !suffix_shape_ok(suffix) {
            return Err(FORMAT_WRONG);
        }
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if frac.contains('.') || (whole.is_empty() && frac.is_empty()) {
            return Err(NUMERIC_WRONG);
        }
        let (base, exponent) = parse_suffix(suffix).ok_or(SUFFIX_WRONG)?;
        let digits: BigInt = format!("0{whole}{frac}")
            .parse()
            .map_err(|_| NUMERIC_WRONG)?;
        // value = digits × 10^-len(frac) × base^exponent, in nano-units: × 10^9
        let mut numerator = digits;
        let mut denominator = BigInt::from(1);
        let mut decimal_exponent = i64::from(SCALE) - frac.len() as i64;
        match base {
            10 => decimal_exponent += exponent,
            _ => numerator *= BigInt::from(2).pow(exponent as u32),
        }
        if decimal_exponent.abs() > MAX_EXPONENT + 64 {
            return Err(SUFFIX_WRONG);
        }
        if decimal_exponent >= 0 {
            numerator *= BigInt::from(10).pow(decimal_exponent as u32);
        } else {
            denominator = BigInt::from(10).pow(decimal_exponent.unsigned_abs() as u32);
        }
        // rounded up (away from zero) to a whole nano-unit, as Kubernetes does
        let mut nanos = &numerator / &denominator;
        if !(&numerator % &denominator).is_zero() {
            nanos += 1;
        }
        if negative {
            nanos = -nanos;
        }
        Ok(Quantity { nanos })
    }

    fn from_int(i: i64) -> Quantity {
        Quantity {
            nanos: BigInt::from(i) * BigInt::from(10).pow(SCALE),
        }
    }

    /// The value as an `int`, if it is a whole number that fits.
    fn as_i64(&self) -> Option<i64> {
        let unit = BigInt::from(10).pow(SCALE);
        if !(&self.nanos % &unit).is_zero() {
            return None;
        }
        (&self.nanos / unit).to_i64()
    }

    fn as_f64(&self) -> f64 {
        self.nanos.to_f64().unwrap_or(f64::NAN) / 1e9
    }
}

/// Whether a suffix matches upstream's `[eEinumkKMGTP]*[-+]?[0-9]*`.
fn suffix_shape_ok(suffix: &str) -> bool {
    let letters = suffix
        .find(|c: char| !"eEinumkKMGTP".contains(c))
        .unwrap_or(suffix.len());
    let rest = &suffix[letters..];
    let rest = rest.strip_prefix(['-', '+']).unwrap_or(rest);
    rest.bytes().all(|b| b.is_ascii_digit())
}

/// The base and exponent a suffix stands for: `Ki` → 2^10, `M` → 10^6, `e3` → 10^3.
fn parse_suffix(suffix: &str) -> Option<(u32, i64)> {
    let known = match suffix {
        "" => Some((10, 0)),
        "n" => Some((10, -9)),
        "u" => Some((10, -6)),
        "m" => Some((10, -3)),
        "k" => Some((10, 3)),
        "M" => Some((10, 6)),
        "G" => Some((10, 9)),
        "T" => Some((10, 12)),
        "P" => Some((10, 15)),
        "E" => Some((10, 18)),
        "Ki" => Some((2, 10)),
        "Mi" => Some((2, 20)),
        "Gi" => Some((2, 30)),
        "Ti" => Some((2, 40)),
        "Pi" => Some((2, 50)),
        "Ei" => Some((2, 60)),
        _ => None,
    };
    if known.is_some() {
        return known;
    }
    let exp = suffix.strip_prefix(['e', 'E'])?;
    let digits = exp.strip_prefix(['-', '+']).unwrap_or(exp);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let e: i64 = exp.parse().ok()?;
    (e.abs() <= MAX_EXPONENT).then_some((10, e))
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let q = || Type::new_opaque_type(TYPE_NAME);
    env.add_type(q())?;
    env.add_overload(
        "quantity",
        "string_to_quantity",
        vec![STRING_TYPE],
        values_fn!(to_quantity),
    )?;
    env.add_overload(
        "isQuantity",
        "is_quantity_string",
        vec![STRING_TYPE],
        values_fn!(is_quantity),
    )?;
    env.add_member_overload("sign", "quantity_sign", q(), vec![], values_fn!(sign))?;
    env.add_member_overload(
        "isGreaterThan",
        "quantity_is_greater_than",
        q(),
        vec![q()],
        values_fn!(greater),
    )?;
    env.add_member_overload(
        "isLessThan",
        "quantity_is_less_than",
        q(),
        vec![q()],
        values_fn!(less),
    )?;
    env.add_member_overload(
        "compareTo",
        "quantity_compare_to",
        q(),
        vec![q()],
        values_fn!(compare_to),
    )?;
    env.add_member_overload(
        "asApproximateFloat",
        "quantity_get_float",
        q(),
        vec![],
        values_fn!(as_float),
    )?;
    env.add_member_overload(
        "asInteger",
        "quantity_get_int",
        q(),
        vec![],
        values_fn!(as_integer),
    )?;
    env.add_member_overload(
        "isInteger",
        "quantity_is_integer",
        q(),
        vec![],
        values_fn!(is_integer),
    )?;
    env.add_member_overload("add", "quantity_add", q(), vec![q()], values_fn!(add))?;
    env.add_member_overload(
        "add",
        "quantity_add_int",
        q(),
        vec![INT_TYPE],
        values_fn!(add),
    )?;
    env.add_member_overload("sub", "quantity_sub", q(), vec![q()], values_fn!(sub))?;
    env.add_member_overload(
        "sub",
        "quantity_sub_int",
        q(),
        vec![INT_TYPE],
        values_fn!(sub),
    )?;
    Ok(())
}

fn to_quantity(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("quantity", args, 0)?;
    Quantity::parse(s).map(opaque).map_err(error)
}

fn is_quantity(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("isQuantity", args, 0)?;
    Ok(Value::Bool(Quantity::parse(s).is_ok()))
}

fn this<'a>(f: &str, args: &'a [Value]) -> Result<&'a Quantity, ExecutionError> {
    opaque_arg::<Quantity>(f, args, 0)
}

/// The second operand: a quantity, or an `int` taken as a quantity.
fn other(f: &str, args: &[Value]) -> Result<Quantity, ExecutionError> {
    match args.get(1) {
        Some(Value::Int(i)) => Ok(Quantity::from_int(*i)),
        _ => opaque_arg::<Quantity>(f, args, 1).cloned(),
    }
}

fn ordering(f: &str, args: &[Value]) -> Result<Ordering, ExecutionError> {
    Ok(this(f, args)?.nanos.cmp(&other(f, args)?.nanos))
}

fn sign(args: &[Value]) -> Result<Value, ExecutionError> {
    let q = this("sign", args)?;
    Ok(Value::Int(if q.nanos.is_zero() {
        0
    } else if q.nanos.is_negative() {
        -1
    } else {
        1
    }))
}

fn greater(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        ordering("isGreaterThan", args)? == Ordering::Greater,
    ))
}

fn less(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(ordering("isLessThan", args)? == Ordering::Less))
}

fn compare_to(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(ordering("compareTo", args)? as i64))
}

fn as_float(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Float(this("asApproximateFloat", args)?.as_f64()))
}

fn as_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    this("asInteger", args)?
        .as_i64()
        .map(Value::Int)
        .ok_or_else(|| error("cannot convert value to integer"))
}

fn is_integer(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(this("isInteger", args)?.as_i64().is_some()))
}

fn add(args: &[Value]) -> Result<Value, ExecutionError> {
    let sum = &this("add", args)?.nanos + other("add", args)?.nanos;
    Ok(opaque(Quantity { nanos: sum }))
}

fn sub(args: &[Value]) -> Result<Value, ExecutionError> {
    let difference = &this("sub", args)?.nanos - other("sub", args)?.nanos;
    Ok(opaque(Quantity { nanos: difference }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_as_resource_quantity() {
        let nanos = |s: &str| Quantity::parse(s).map(|q| q.nanos.to_string());
        assert_eq!(nanos("1"), Ok("1000000000".into()));
        assert_eq!(nanos("12Mi"), Ok((12u64 << 20).to_string() + "000000000"));
        assert_eq!(nanos("0.2G"), nanos("200M"));
        assert_eq!(nanos("1500m"), Ok("1500000000".into()));
        assert_eq!(nanos("1e3"), nanos("1k"));
        assert_eq!(nanos("-1.5"), Ok("-1500000000".into()));
        assert_eq!(nanos("0.1n"), Ok("1".into()), "rounded up to a nano");
        assert_eq!(nanos(".5"), Ok("500000000".into()));
        assert_eq!(nanos("10Mo"), Err(FORMAT_WRONG));
        assert_eq!(nanos("10Mm"), Err(SUFFIX_WRONG));
        assert_eq!(nanos(""), Err(FORMAT_WRONG));
        assert_eq!(nanos("1.2.3"), Err(NUMERIC_WRONG));
        assert_eq!(nanos("1e99999999999999999999"), Err(SUFFIX_WRONG));
        assert_eq!(nanos("1e1001"), Err(SUFFIX_WRONG));
    }
}
