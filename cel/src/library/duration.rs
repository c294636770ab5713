//! Duration texts of `format: duration` values: go-openapi's `strfmt.ParseDuration`, which Kubernetes uses for
//! that format, is Go's `time.ParseDuration` ([`apiserver_gotext::parse_duration`]) with a lenient fallback that
//! also knows days and weeks (`2d`, `1 week`).

use std::sync::LazyLock;

use chrono::Duration;
use regex::Regex;

/// strfmt's `durationMatcher`, with Go's ASCII-only `\d` and `\s`.
static STRFMT_MATCHER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([0-9]+)[\t\n\x0c\r ]*([A-Za-zµ]+)").expect("strfmt duration pattern")
});

/// strfmt's units: each row's first name gives the multiplier; the last name also matches as a prefix (`hours`).
const STRFMT_UNITS: [(&[&str], i64); 8] = [
    (&["ns", "nano"], 1),
    (&["us", "µs", "micro"], 1_000),
    (&["ms", "milli"], 1_000_000),
    (&["s", "sec"], 1_000_000_000),
    (&["m", "min"], 60_000_000_000),
    (&["h", "hr", "hour"], 3_600_000_000_000),
    (&["d", "day"], 86_400_000_000_000),
    (&["w", "wk", "week"], 604_800_000_000_000),
];

/// Parses a `format: duration` value as `strfmt.ParseDuration`: a Go duration (`1h30m`, `-1.5s`, `300ms`, `0`),
/// else every `<integer><unit>` found in the text, summed (`2d`, `1 week 3 days`).
pub(crate) fn parse_duration(s: &str) -> Option<Duration> {
    if let Ok(nanos) = apiserver_gotext::parse_duration(s) {
        return Some(Duration::nanoseconds(nanos));
    }
    let mut total: i64 = 0;
    let mut found = false;
    for m in STRFMT_MATCHER.captures_iter(s) {
        let factor: i64 = m[1].parse().ok()?;
        let unit = m[2].to_lowercase();
        for (names, multiplier) in STRFMT_UNITS {
            let last = names.len() - 1;
            for (i, name) in names.iter().enumerate() {
                if (i == last && unit.starts_with(name)) || unit == *name {
                    found = true;
                    // Go's time.Duration arithmetic wraps.
                    total = total.wrapping_add(factor.wrapping_mul(multiplier));
                }
            }
        }
    }
    found.then(|| Duration::nanoseconds(total))
}

/// Writes a duration as Go's `time.Duration.String` does: `1h2m3.5s`, `1.5ms`, `0s`.
pub(crate) fn format_duration(d: &Duration) -> String {
    match d.num_nanoseconds() {
        Some(nanos) => apiserver_gotext::format_duration(nanos),
        None => format!("{}s", d.num_seconds()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strfmt_durations() {
        for (text, nanos, back) in [
            ("0", 0, "0s"),
            ("1h2m3s", 3_723_000_000_000, "1h2m3s"),
            ("1.5s", 1_500_000_000, "1.5s"),
            ("-300ms", -300_000_000, "-300ms"),
            ("90m", 5_400_000_000_000, "1h30m0s"),
            ("1us", 1_000, "1µs"),
            ("2d", 172_800_000_000_000, "48h0m0s"),
            ("1 week 2 days", 777_600_000_000_000, "216h0m0s"),
            ("3 hours", 10_800_000_000_000, "3h0m0s"),
        ] {
            let d = parse_duration(text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(d.num_nanoseconds(), Some(nanos), "{text}");
            assert_eq!(format_duration(&d), back, "{text}");
        }
        for bad in ["", "1", "h", "1x", "-", "99999999999999999999h"] {
            assert!(parse_duration(bad).is_none(), "{bad}");
        }
    }
}
