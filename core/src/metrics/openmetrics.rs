//! The OpenMetrics 1.0 text form of the registry (the `prometheus` crate writes only the older text format):
//! counters' samples end in `_total` under a family name without it, and the exposition ends with `# EOF`.

#![allow(deprecated)] // the `prometheus` crate's own encoder reads values the same way

use std::fmt::Write as _;

use prometheus::proto::{Metric, MetricFamily, MetricType};

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(value: f64) -> String {
    if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else if value.is_nan() {
        "NaN".to_string()
    } else {
        value.to_string()
    }
}

fn sample(out: &mut String, name: &str, metric: &Metric, extra: Option<(&str, &str)>, value: f64) {
    let mut labels: Vec<String> = metric
        .get_label()
        .iter()
        .map(|l| format!("{}=\"{}\"", l.name(), escape(l.value())))
        .collect();
    if let Some((k, v)) = extra {
        labels.push(format!("{k}=\"{v}\""));
    }
    if labels.is_empty() {
        let _ = writeln!(out, "{name} {}", number(value));
    } else {
        let _ = writeln!(out, "{name}{{{}}} {}", labels.join(","), number(value));
    }
}

/// The exposition of `families`.
pub fn encode(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    for family in families {
        let kind = family.get_field_type();
        let name = match kind {
            MetricType::COUNTER => family
                .name()
                .strip_suffix("_total")
                .unwrap_or(family.name()),
            _ => family.name(),
        };
        let type_name = match kind {
            MetricType::COUNTER => "counter",
            MetricType::GAUGE => "gauge",
            MetricType::HISTOGRAM => "histogram",
            MetricType::SUMMARY => "summary",
            MetricType::UNTYPED => "unknown",
        };
        let _ = writeln!(out, "# TYPE {name} {type_name}");
        if !family.help().is_empty() {
            let _ = writeln!(out, "# HELP {name} {}", escape(family.help()));
        }
        for metric in family.get_metric() {
            match kind {
                MetricType::COUNTER => sample(
                    &mut out,
                    &format!("{name}_total"),
                    metric,
                    None,
                    metric.get_counter().get_value(),
                ),
                MetricType::GAUGE | MetricType::UNTYPED => {
                    sample(&mut out, name, metric, None, metric.get_gauge().get_value())
                }
                MetricType::HISTOGRAM => {
                    let histogram = metric.get_histogram();
                    let mut infinite = false;
                    for bucket in histogram.get_bucket() {
                        infinite |= bucket.upper_bound().is_infinite();
                        let le = number(bucket.upper_bound());
                        sample(
                            &mut out,
                            &format!("{name}_bucket"),
                            metric,
                            Some(("le", &le)),
                            bucket.cumulative_count() as f64,
                        );
                    }
                    if !infinite {
                        sample(
                            &mut out,
                            &format!("{name}_bucket"),
                            metric,
                            Some(("le", "+Inf")),
                            histogram.get_sample_count() as f64,
                        );
                    }
                    sample(
                        &mut out,
                        &format!("{name}_count"),
                        metric,
                        None,
                        histogram.get_sample_count() as f64,
                    );
                    sample(
                        &mut out,
                        &format!("{name}_sum"),
                        metric,
                        None,
                        histogram.get_sample_sum(),
                    );
                }
                MetricType::SUMMARY => {
                    let summary = metric.get_summary();
                    for quantile in summary.get_quantile() {
                        let q = number(quantile.quantile());
                        sample(
                            &mut out,
                            name,
                            metric,
                            Some(("quantile", &q)),
                            quantile.value(),
                        );
                    }
                    sample(
                        &mut out,
                        &format!("{name}_count"),
                        metric,
                        None,
                        summary.sample_count() as f64,
                    );
                    sample(
                        &mut out,
                        &format!("{name}_sum"),
                        metric,
                        None,
                        summary.sample_sum(),
                    );
                }
            }
        }
    }
    out.push_str("# EOF\n");
    out
}
