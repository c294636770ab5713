//! Kubernetes' IP library (k8s.io/apiserver/pkg/cel/library/ip.go): `ip`, `isIP`, `ip.isCanonical`, `family`,
//! `isUnspecified`, `isLoopback`, `isLinkLocalMulticast`, `isLinkLocalUnicast`, `isGlobalUnicast`, `string(ip)`.
//! Addresses are parsed as Go's `netip.ParseAddr` parses them, with its error texts.

use super::{error, opaque, opaque_arg, string, string_arg, values_fn};
use cel::common::types::{STRING_TYPE, Type};
use cel::objects::Opaque;
use cel::{DeclarationError, Env, ExecutionError, Value};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub(crate) const TYPE_NAME: &str = "net.IP";

/// An IP address, without zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ip(pub(crate) IpAddr);

impl Opaque for Ip {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// An address as Go's `netip.ParseAddr` reads it, with the zone it may carry.
pub(crate) struct ParsedAddr {
    pub(crate) addr: IpAddr,
    pub(crate) zone: Option<String>,
}

/// Go's `netip.ParseAddr`, including its error texts (`ParseAddr("..."): IPv4 address too long`).
pub(crate) fn parse_addr(s: &str) -> Result<ParsedAddr, String> {
    for b in s.bytes() {
        match b {
            b'.' => {
                let mut fields = [0u8; 4];
                parse_ipv4_fields(s, s, &mut fields)?;
                return Ok(ParsedAddr {
                    addr: IpAddr::V4(Ipv4Addr::from(fields)),
                    zone: None,
                });
            }
            b':' => return parse_ipv6(s),
            b'%' => return Err(addr_error(s, "missing IPv6 address", None)),
            _ => {}
        }
    }
    Err(addr_error(s, "unable to parse IP", None))
}

fn addr_error(input: &str, msg: &str, at: Option<&str>) -> String {
    match at {
        Some(at) => format!("ParseAddr({input:?}): {msg} (at {at:?})"),
        None => format!("ParseAddr({input:?}): {msg}"),
    }
}

fn parse_ipv4_fields(input: &str, s: &str, fields: &mut [u8]) -> Result<(), String> {
    let bytes = s.as_bytes();
    let (mut val, mut pos, mut digits) = (0u32, 0usize, 0usize);
    for (i, &c) in bytes.iter().enumerate() {
        if c.is_ascii_digit() {
            if digits == 1 && val == 0 {
                return Err(addr_error(
                    input,
                    "IPv4 field has octet with leading zero",
                    None,
                ));
            }
            val = val * 10 + u32::from(c - b'0');
            digits += 1;
            if val > 255 {
                return Err(addr_error(input, "IPv4 field has value >255", None));
            }
        } else if c == b'.' {
            if i == 0 || i == bytes.len() - 1 || bytes[i - 1] == b'.' {
                return Err(addr_error(
                    input,
                    "IPv4 field must have at least one digit",
                    Some(&s[i..]),
                ));
            }
            if pos == 3 {
                return Err(addr_error(input, "IPv4 address too long", None));
            }
            fields[pos] = val as u8;
            pos += 1;
            val = 0;
            digits = 0;
        } else {
            return Err(addr_error(input, "unexpected character", Some(&s[i..])));
        }
    }
    if pos < 3 {
        return Err(addr_error(input, "IPv4 address too short", None));
    }
    fields[3] = val as u8;
    Ok(())
}

fn parse_ipv6(input: &str) -> Result<ParsedAddr, String> {
    let (mut s, zone) = match input.split_once('%') {
        Some((_, "")) => return Err(addr_error(input, "zone must be a non-empty string", None)),
        Some((a, z)) => (a, Some(z.to_owned())),
        None => (input, None),
    };
    let address_end = s.len();
    let mut ip = [0u8; 16];
    let mut ellipsis: Option<usize> = None;
    if s.starts_with("::") {
        ellipsis = Some(0);
        s = &s[2..];
        if s.is_empty() {
            return Ok(ParsedAddr {
                addr: IpAddr::V6(Ipv6Addr::UNSPECIFIED),
                zone,
            });
        }
    }
    let mut i = 0usize;
    while i < 16 {
        let bytes = s.as_bytes();
        let mut off = 0usize;
        let mut acc = 0u32;
        while off < bytes.len() {
            let c = bytes[off];
            let digit = match c {
                b'0'..=b'9' => c - b'0',
                b'a'..=b'f' => c - b'a' + 10,
                b'A'..=b'F' => c - b'A' + 10,
                _ => break,
            };
            acc = (acc << 4) + u32::from(digit);
            if off > 3 {
                return Err(addr_error(
                    input,
                    "each group must have 4 or less digits",
                    Some(s),
                ));
            }
            if acc > u32::from(u16::MAX) {
                return Err(addr_error(input, "IPv6 field has value >=2^16", Some(s)));
            }
            off += 1;
        }
        if off == 0 {
            return Err(addr_error(
                input,
                "each colon-separated field must have at least one digit",
                Some(s),
            ));
        }
        if off < bytes.len() && bytes[off] == b'.' {
            if ellipsis.is_none() && i != 12 {
                return Err(addr_error(
                    input,
                    "embedded IPv4 address must replace the final 2 fields of the address",
                    Some(s),
                ));
            }
            if i + 4 > 16 {
                return Err(addr_error(
                    input,
                    "too many hex fields to fit an embedded IPv4 at the end of the address",
                    Some(s),
                ));
            }
            let start = address_end - s.len();
            parse_ipv4_fields(input, &input[start..address_end], &mut ip[i..i + 4])?;
            s = "";
            i += 4;
            break;
        }
        ip[i] = (acc >> 8) as u8;
        ip[i + 1] = acc as u8;
        i += 2;
        s = &s[off..];
        if s.is_empty() {
            break;
        }
        if !s.starts_with(':') {
            return Err(addr_error(
                input,
                "unexpected character, want colon",
                Some(s),
            ));
        } else if s.len() == 1 {
            return Err(addr_error(
                input,
                "colon must be followed by more characters",
                Some(s),
            ));
        }
        s = &s[1..];
        if s.starts_with(':') {
            if ellipsis.is_some() {
                return Err(addr_error(input, "multiple :: in address", Some(s)));
            }
            ellipsis = Some(i);
            s = &s[1..];
            if s.is_empty() {
                break;
            }
        }
    }
    if !s.is_empty() {
        return Err(addr_error(input, "trailing garbage after address", Some(s)));
    }
    if i < 16 {
        let Some(e) = ellipsis else {
            return Err(addr_error(input, "address string too short", None));
        };
        let n = 16 - i;
        for j in (e..i).rev() {
            ip[j + n] = ip[j];
        }
        ip[e..e + n].fill(0);
    } else if ellipsis.is_some() {
        return Err(addr_error(
            input,
            "the :: must expand to at least one field of zeros",
            Some(s),
        ));
    }
    Ok(ParsedAddr {
        addr: IpAddr::V6(Ipv6Addr::from(ip)),
        zone,
    })
}

/// An address as upstream's `ip()` accepts it: no zone, no IPv4-mapped IPv6.
pub(crate) fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    let parsed = parse_addr(raw).map_err(|e| {
        format!("IP Address {raw:?} parse error during conversion from string: {e}")
    })?;
    if parsed.zone.is_some() {
        return Err(format!("IP address {raw:?} with zone value is not allowed"));
    }
    if is_4in6(&parsed.addr) {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(parsed.addr)
}

pub(crate) fn is_4in6(addr: &IpAddr) -> bool {
    matches!(addr, IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some())
}

/// The address as Go writes it (RFC 5952 for IPv6).
pub(crate) fn to_string(addr: &IpAddr) -> String {
    addr.to_string()
}

pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    let t = || Type::new_opaque_type(TYPE_NAME);
    env.add_type(t())?;
    env.add_overload("ip", "string_to_ip", vec![STRING_TYPE], values_fn!(to_ip))?;
    env.add_overload("isIP", "is_ip", vec![STRING_TYPE], values_fn!(is_ip))?;
    env.add_overload(
        "ip.isCanonical",
        "ip_is_canonical",
        vec![STRING_TYPE],
        values_fn!(is_canonical),
    )?;
    env.add_overload(
        "string",
        "ip_to_string",
        vec![t()],
        values_fn!(ip_to_string),
    )?;
    env.add_member_overload("family", "ip_family", t(), vec![], values_fn!(family))?;
    env.add_member_overload(
        "isUnspecified",
        "ip_is_unspecified",
        t(),
        vec![],
        values_fn!(is_unspecified),
    )?;
    env.add_member_overload(
        "isLoopback",
        "ip_is_loopback",
        t(),
        vec![],
        values_fn!(is_loopback),
    )?;
    env.add_member_overload(
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        t(),
        vec![],
        values_fn!(is_link_local_multicast),
    )?;
    env.add_member_overload(
        "isLinkLocalUnicast",
        "ip_is_link_local_unicast",
        t(),
        vec![],
        values_fn!(is_link_local_unicast),
    )?;
    env.add_member_overload(
        "isGlobalUnicast",
        "ip_is_global_unicast",
        t(),
        vec![],
        values_fn!(is_global_unicast),
    )?;
    Ok(())
}

fn to_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("ip", args, 0)?;
    parse_ip(s).map(|a| opaque(Ip(a))).map_err(error)
}

fn is_ip(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(parse_ip(string_arg("isIP", args, 0)?).is_ok()))
}

fn is_canonical(args: &[Value]) -> Result<Value, ExecutionError> {
    let s = string_arg("ip.isCanonical", args, 0)?;
    let addr = parse_ip(s).map_err(error)?;
    Ok(Value::Bool(to_string(&addr) == s))
}

fn ip_to_string(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(string(to_string(&opaque_arg::<Ip>("string", args, 0)?.0)))
}

fn addr(f: &str, args: &[Value]) -> Result<IpAddr, ExecutionError> {
    Ok(opaque_arg::<Ip>(f, args, 0)?.0)
}

fn family(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Int(if addr("family", args)?.is_ipv4() {
        4
    } else {
        6
    }))
}

fn is_unspecified(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(addr("isUnspecified", args)?.is_unspecified()))
}

fn is_loopback(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(addr("isLoopback", args)?.is_loopback()))
}

fn link_local_multicast(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            o[0] == 224 && o[1] == 0 && o[2] == 0
        }
        IpAddr::V6(v6) => {
            let o = v6.octets();
            o[0] == 0xff && o[1] & 0x0f == 0x02
        }
    }
}

fn link_local_unicast(a: &IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => v6.segments()[0] & 0xffc0 == 0xfe80,
    }
}

fn is_link_local_multicast(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(link_local_multicast(&addr(
        "isLinkLocalMulticast",
        args,
    )?)))
}

fn is_link_local_unicast(args: &[Value]) -> Result<Value, ExecutionError> {
    Ok(Value::Bool(link_local_unicast(&addr(
        "isLinkLocalUnicast",
        args,
    )?)))
}

/// Go's `IsGlobalUnicast`: anything but unspecified, loopback, multicast, link-local and the IPv4 broadcast address
/// (private ranges included).
fn is_global_unicast(args: &[Value]) -> Result<Value, ExecutionError> {
    let a = addr("isGlobalUnicast", args)?;
    let broadcast = matches!(a, IpAddr::V4(v4) if v4.is_broadcast());
    Ok(Value::Bool(
        !broadcast
            && !a.is_unspecified()
            && !a.is_loopback()
            && !a.is_multicast()
            && !link_local_unicast(&a),
    ))
}
