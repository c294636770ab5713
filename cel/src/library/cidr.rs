//! Kubernetes' CIDR library (k8s.io/apiserver/pkg/cel/library/cidr.go): `cidr`, `isCIDR`, `containsIP`,
//! `containsCIDR`, `ip`, `masked`, `prefixLength`, `string(cidr)`. Prefixes are parsed as Go's
//! `netip.ParsePrefix` parses them, with its error texts.

use super::ip::{Ip, is_4in6, parse_addr, parse_ip};
use super::{error, opaque, opaque_arg, string, string_arg, values_fn};
use cel::common::types::{STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub(crate) const TYPE_NAME: &str = "net.CIDR";

/// An address and a prefix length (the address is kept as written: `192.168.0.1/24` is not masked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Opaque for Cidr {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

const PARSE_ERROR: &str = "network address parse error during conversion from string";

/// Go's `netip.ParsePrefix`, its texts included.
fn parse_prefix(s: &str) -> Result<Cidr, String> {
    let prefix_error = |msg: &str| format!("netip.ParsePrefix({s:?}): {msg}");
    let Some(slash) = s.rfind('/') else {
        return Err(prefix_error("no '/'"));
    };
    let parsed = parse_addr(&s[..slash]).map_err(|e| prefix_error(&e))?;
    if parsed.addr.is_ipv6() && parsed.zone.is_some() {
        return Err(prefix_error("IPv6 zones cannot be present in a prefix"));
    }
    let bits_text = &s[slash + 1..];
    let bad_bits = || prefix_error(&format!("bad bits after slash: {bits_text:?}"));
    if bits_text.is_empty()
        || !bits_text.bytes().all(|b| b.is_ascii_digit())
        || (bits_text.len() > 1 && bits_text.starts_with('0'))
    {
        return Err(bad_bits());
    }
    let bits: u32 = bits_text.parse().map_err(|_| bad_bits())?;
    let max = if parsed.addr.is_ipv4() { 32 } else { 128 };
    if bits > max {
        return Err(prefix_error("prefix length out of range"));
    }
    Ok(Cidr {
        addr: parsed.addr,
        bits: bits as u8,
    })
}

/// A prefix as upstream's `cidr()` accepts it.
fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let cidr = parse_prefix(raw).map_err(|e| format!("{PARSE_ERROR}: {e}"))?;
    if is_4in6(&cidr.addr) {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(cidr)
}

impl Cidr {
    fn masked(&self) -> Cidr {
        let addr = match self.addr {
            IpAddr::V4(v4) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.bits)).unwrap_or(0);
                IpAddr::V4(Ipv4Addr::from(u32::from(v4) & mask))
            }
            IpAddr::V6(v6) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.bits))
                    .unwrap_or(0);
                IpAddr::V6(Ipv6Addr::from(u128::from(v6) & mask))
            }
        };
        Cidr {
            addr,
            bits: self.bits,
        }
    }

    /// Go's `Prefix.Contains`: same family, equal under the mask.
    fn contains(&self, ip: &IpAddr) -> bool {
        if self.addr.is_ipv4() != ip.is_ipv4() {
            return false;
        }
        Cidr {
            addr: *ip,
            bits: self.bits,
        }
        .masked()
        .addr
            == self.masked().addr
    }

    /// Go's `Prefix.Overlaps`.
    fn overlaps(&self, other: &Cidr) -> bool {
        if self.addr.is_ipv4() != other.addr.is_ipv4() {
            return false;
        }
        let bits = self.bits.min(other.bits);
        Cidr {
            addr: self.addr,
            bits,
        }
        .masked()
        .addr
            == Cidr {
                addr: other.addr,
                bits,
            }
            .masked()
            .addr
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let t = || Type::new_opaque_type(TYPE_NAME);
    let ip = || Type::new_opaque_type(super::ip::TYPE_NAME);
    env.add_type(t())?;
    env.add_overload(
        "cidr",
        "string_to_cidr",
        vec![STRING_TYPE],
        values_fn!(to_cidr),
    )?;
    env.add_overload("isCIDR", "is_cidr", vec![STRING_TYPE], values_fn!(is_cidr))?;
    env.add_overload(
        "string",
        "cidr_to_string",
        vec![t()],
        values_fn!(cidr_to_string),
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_string",
        t(),
        vec![STRING_TYPE],
        values_fn!(contains_ip),
    )?;
    env.add_member_overload(
        "containsIP",
        "cidr_contains_ip_ip",
        t(),
        vec![ip()],
        values_fn!(contains_ip),
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        t(),
        vec![STRING_TYPE],
        values_fn!(contains_cidr),
    )?;
    env.add_member_overload(
        "containsCIDR",
        "cidr_contains_cidr",
        t(),
        vec![t()],
        values_fn!(contains_cidr),
    )?;
    env.add_member_overload("ip", "cidr_ip", t(), vec![], values_fn!(cidr_ip))?;
    env.add_member_overload(
        "prefixLength",
        "cidr_prefix_length",
        t(),
        vec![],
        values_fn!(prefix_length),
    )?;
    env.add_member_overload("masked", "cidr_masked", t(), vec![], values_fn!(masked))?;
    Ok(())
}

fn to_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("cidr", args, 0)?;
    // upstream wraps the parse error once more on its way out
    parse_cidr(s)
        .map(opaque)
        .map_err(|e| error(format!("{PARSE_ERROR}: {e}")))
}

fn is_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(
        parse_cidr(string_arg("isCIDR", args, 0)?).is_ok(),
    ))
}

fn this<'a>(f: &str, args: &'a [Value]) -> Result<&'a Cidr, ExecutionError> {
    opaque_arg::<Cidr>(f, args, 0)
}

fn cidr_to_string(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(this("string", args)?.to_string()))
}

fn contains_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    let cidr = this("containsIP", args)?;
    let ip = match args.get(1) {
        Some(Value::String(s)) => parse_ip(s).map_err(error)?,
        _ => opaque_arg::<Ip>("containsIP", args, 1)?.0,
    };
    Ok(Value::Bool(cidr.contains(&ip)))
}

fn contains_cidr(args: &[Value]) -> Result<Value, ExecutionError> {
    let cidr = this("containsCIDR", args)?;
    let other = match args.get(1) {
        Some(Value::String(s)) => {
            parse_cidr(s).map_err(|e| error(format!("{PARSE_ERROR}: {e}")))?
        }
        _ => opaque_arg::<Cidr>("containsCIDR", args, 1)?.clone(),
    };
    Ok(Value::Bool(
        cidr.overlaps(&other) && cidr.bits <= other.bits,
    ))
}

fn cidr_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(opaque(Ip(this("ip", args)?.addr)))
}

fn prefix_length(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(i64::from(this("prefixLength", args)?.bits)))
}

fn masked(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(opaque(this("masked", args)?.masked()))
}
