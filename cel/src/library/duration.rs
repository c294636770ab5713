//! Go's duration texts (`time.ParseDuration`, `Duration.String`), which Kubernetes uses for `format: duration`.

use chrono::Duration;

/// Parses a Go duration (`1h30m`, `-1.5s`, `300ms`, `0`), with strfmt's `d` (day) and `w` (week) units too.
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    let (negative, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let number = &rest[..digits];
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let nanos_per: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "d" => 86_400_000_000_000,
            "w" => 604_800_000_000_000,
            _ => return None,
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && frac.is_empty()) || frac.contains('.') {
            return None;
        }
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut value = whole.checked_mul(nanos_per)?;
        let mut scale = nanos_per;
        for d in frac.bytes().take(30) {
            scale /= 10;
            value += i128::from(d - b'0') * scale;
        }
        total = total.checked_add(value)?;
        if total > i128::from(i64::MAX) {
            return None;
        }
    }
    let nanos = i64::try_from(if negative { -total } else { total }).ok()?;
    Some(Duration::nanoseconds(nanos))
}

/// Writes a duration as Go does: `1h2m3.5s`, `1.5ms`, `0s`.
pub(crate) fn format_duration(d: &Duration) -> String {
    let Some(nanos) = d.num_nanoseconds() else {
        return format!("{}s", d.num_seconds());
    };
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

    #[test]
    fn go_durations() {
        for (text, nanos, back) in [
            ("0", 0, "0s"),
            ("1h2m3s", 3_723_000_000_000, "1h2m3s"),
            ("1.5s", 1_500_000_000, "1.5s"),
            ("-300ms", -300_000_000, "-300ms"),
            ("90m", 5_400_000_000_000, "1h30m0s"),
            ("1us", 1_000, "1µs"),
            ("2d", 172_800_000_000_000, "48h0m0s"),
        ] {
            let d = parse_duration(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(d.num_nanoseconds(), Some(nanos), "{text}");
            assert_eq!(format_duration(&d), back, "{text}");
        }
        for bad in ["", "1", "h", "1x", "1..5s", "-", "99999999999999999h"] {
            assert!(parse_duration(bad).is_none(), "{bad}");
        }
    }
}
