//! `time.ParseDuration` and `time.Duration.String`.

use std::fmt;

/// Why a text is not a Go duration; displays as Go's error (`time: invalid duration "1x"`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurationError(String);

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DurationError {}

/// The time package's own quoting in its errors: like `strconv.Quote` for ASCII, but every byte of a non-ASCII or
/// control rune as `\xHH`.
fn time_quote(s: &str) -> String {
    let mut out = String::from('"');
    for c in s.chars() {
        if !c.is_ascii() || c < ' ' {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("\\x{b:02x}"));
            }
        } else {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        }
    }
    out.push('"');
    out
}

const OVERFLOW: u64 = 1 << 63;

/// Parses a duration as Go's `time.ParseDuration`, into nanoseconds: an optional sign, then one or more decimal
/// numbers (a fraction allowed), each followed by a unit of `ns`, `us` (or `µs`), `ms`, `s`, `m`, `h`: `300ms`,
/// `-1.5h`, `2h45m`, `1m30s`; `0` alone needs no unit. Values beyond ±292 years are refused as Go refuses them.
pub fn parse_duration(text: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError(format!("time: invalid duration {}", time_quote(text)));
    let mut s = text;
    let mut negative = false;
    if let Some(rest) = s.strip_prefix('-') {
        negative = true;
        s = rest;
    } else if let Some(rest) = s.strip_prefix('+') {
        s = rest;
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !s.starts_with(|c: char| c == '.' || c.is_ascii_digit()) {
            return Err(invalid());
        }
        let before = s.len();
        let (mut value, rest) = leading_int(s).ok_or_else(invalid)?;
        s = rest;
        let whole_digits = before != s.len();
        let (mut fraction, mut scale, mut fraction_digits) = (0, 1.0, false);
        if let Some(rest) = s.strip_prefix('.') {
            let before = rest.len();
            (fraction, scale, s) = leading_fraction(rest);
            fraction_digits = before != s.len();
        }
        if !whole_digits && !fraction_digits {
            return Err(invalid());
        }
        let unit_len = s
            .find(|c: char| c == '.' || c.is_ascii_digit())
            .unwrap_or(s.len());
        if unit_len == 0 {
            return Err(DurationError(format!(
                "time: missing unit in duration {}",
                time_quote(text)
            )));
        }
        let (unit, rest) = s.split_at(unit_len);
        s = rest;
        let nanos_per_unit: u64 = match unit {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => {
                return Err(DurationError(format!(
                    "time: unknown unit {} in duration {}",
                    time_quote(unit),
                    time_quote(text)
                )));
            }
        };
        if value > OVERFLOW / nanos_per_unit {
            return Err(invalid());
        }
        value *= nanos_per_unit;
        if fraction > 0 {
            // As Go: float64 keeps a fraction of an hour exact to the nanosecond.
            value += (fraction as f64 * (nanos_per_unit as f64 / scale)) as u64;
            if value > OVERFLOW {
                return Err(invalid());
            }
        }
        total += value;
        if total > OVERFLOW {
            return Err(invalid());
        }
    }
    if negative {
        return Ok((total as i64).wrapping_neg());
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// The leading `[0-9]*` of `s`, or `None` when it overflows 2^63.
fn leading_int(s: &str) -> Option<(u64, &str)> {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut x: u64 = 0;
    for b in s[..end].bytes() {
        if x > OVERFLOW / 10 {
            return None;
        }
        x = x * 10 + u64::from(b - b'0');
        if x > OVERFLOW {
            return None;
        }
    }
    Some((x, &s[end..]))
}

/// The leading `[0-9]*` of a fraction as (digits, 10^kept digits, rest); precision beyond 2^63 is dropped, not an
/// error.
fn leading_fraction(s: &str) -> (u64, f64, &str) {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (mut x, mut scale, mut overflow) = (0u64, 1.0, false);
    for b in s[..end].bytes() {
        if overflow {
            continue;
        }
        if x > (OVERFLOW - 1) / 10 {
            overflow = true;
            continue;
        }
        let y = x * 10 + u64::from(b - b'0');
        if y > OVERFLOW {
            overflow = true;
            continue;
        }
        x = y;
        scale *= 10.0;
    }
    (x, scale, &s[end..])
}

/// Writes nanoseconds as Go's `time.Duration.String`: `1h2m3.5s`, `1.5ms`, `300µs`, `-2ns`, `0s`.
pub fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000 {
        return format!("{sign}{n}ns");
    }
    if n < 1_000_000 {
        return format!("{sign}{}µs", fraction(n, 1_000));
    }
    if n < 1_000_000_000 {
        return format!("{sign}{}ms", fraction(n, 1_000_000));
    }
    let hours = n / 3_600_000_000_000;
    let minutes = (n / 60_000_000_000) % 60;
    let seconds = fraction(n % 60_000_000_000, 1_000_000_000);
    let mut out = String::from(sign);
    if hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{seconds}s"));
    out
}

/// `n / unit` with its fraction, trailing zeros dropped.
fn fraction(n: u64, unit: u64) -> String {
    let whole = n / unit;
    let frac = n % unit;
    if frac == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: i64 = 1;
    const US: i64 = 1_000;
    const MS: i64 = 1_000_000;
    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    /// The cases of Go's `parseDurationTests` (src/time/time_test.go).
    #[test]
    fn parses_as_go() {
        for (text, want) in [
            // simple
            ("0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            // sign
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0", 0),
            ("+0", 0),
            // decimal
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600 * MS),
            ("5.s", 5 * S),
            (".5s", 500 * MS),
            ("1.0s", S),
            ("1.00s", S),
            ("1.004s", S + 4 * MS),
            ("1.0040s", S + 4 * MS),
            ("100.00100s", 100 * S + MS),
            // different units
            ("10ns", 10 * NS),
            ("11us", 11 * US),
            ("12µs", 12 * US),
            ("12μs", 12 * US),
            ("13ms", 13 * MS),
            ("14s", 14 * S),
            ("15m", 15 * M),
            ("16h", 16 * H),
            // composite durations
            ("3h30m", 3 * H + 30 * M),
            ("10.5s4m", 4 * M + 10 * S + 500 * MS),
            ("-2m3.4s", -(2 * M + 3 * S + 400 * MS)),
            (
                "1h2m3s4ms5us6ns",
                H + 2 * M + 3 * S + 4 * MS + 5 * US + 6 * NS,
            ),
            ("39h9m14.425s", 39 * H + 9 * M + 14 * S + 425 * MS),
            // large value
            ("52763797000ns", 52763797000 * NS),
            // more than 9 digits after decimal point
            ("0.3333333333333333333h", 20 * M),
            // 9007199254740993 = 1<<53+1 cannot be stored precisely in a float64
            ("9007199254740993ns", (1 << 53) + 1),
            // largest duration that can be represented by int64 in nanoseconds
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("9223372036s854ms775us807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("-9223372036854775.808us", i64::MIN),
            ("-9223372036s854ms775us808ns", i64::MIN),
            // largest negative value
            ("-9223372036854775808ns", i64::MIN),
            // largest negative round trip value
            ("-2562047h47m16.854775808s", i64::MIN),
            // huge string; issue 15011.
            ("0.100000000000000000000h", 6 * M),
            // This value tests the first overflow check in leadingFraction.
            ("0.830103483285477580700h", 49 * M + 48 * S + 372539827 * NS),
            // the brief's examples
            ("1m30s", 90 * S),
            ("1.5h", 90 * M),
            ("300ms", 300 * MS),
            ("2h45m", 2 * H + 45 * M),
            ("-1.5h", -90 * M),
        ] {
            assert_eq!(parse_duration(text), Ok(want), "{text}");
        }
    }

    /// The cases of Go's `parseDurationErrorTests`, with Go's messages.
    #[test]
    fn refuses_as_go() {
        for (text, want) in [
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("-", r#"time: invalid duration "-""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("é", r#"time: invalid duration "\xc3\xa9""#),
            ("\u{ffff}", r#"time: invalid duration "\xef\xbf\xbf""#),
            (
                "9223372036854775810ns",
                r#"time: invalid duration "9223372036854775810ns""#,
            ),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "-9223372036854775809ns",
                r#"time: invalid duration "-9223372036854775809ns""#,
            ),
            (
                "9223372036854776us",
                r#"time: invalid duration "9223372036854776us""#,
            ),
            ("3000000h", r#"time: invalid duration "3000000h""#),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            (
                "9223372036854ms775us808ns",
                r#"time: invalid duration "9223372036854ms775us808ns""#,
            ),
            ("1x", r#"time: unknown unit "x" in duration "1x""#),
            ("1\"s", r#"time: unknown unit "\"s" in duration "1\"s""#),
            (
                "1µ",
                r#"time: unknown unit "\xc2\xb5" in duration "1\xc2\xb5""#,
            ),
            ("1..5s", r#"time: missing unit in duration "1..5s""#),
        ] {
            assert_eq!(
                parse_duration(text).map_err(|e| e.to_string()),
                Err(want.to_string()),
                "{text:?}"
            );
        }
    }

    /// The cases of Go's `durationTests` (Duration.String), and that every one parses back.
    #[test]
    fn formats_as_go() {
        for (want, nanos) in [
            ("0s", 0),
            ("1ns", NS),
            ("1.1µs", 1100 * NS),
            ("2.2ms", 2200 * US),
            ("3.3s", 3300 * MS),
            ("4m5s", 4 * M + 5 * S),
            ("4m5.001s", 4 * M + 5001 * MS),
            ("5h6m7.001s", 5 * H + 6 * M + 7001 * MS),
            ("8m0.000000001s", 8 * M + NS),
            ("2562047h47m16.854775807s", i64::MAX),
            ("-2562047h47m16.854775808s", i64::MIN),
        ] {
            assert_eq!(format_duration(nanos), want);
            assert_eq!(parse_duration(want), Ok(nanos), "{want}");
        }
    }
}
