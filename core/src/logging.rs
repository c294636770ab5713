//! Logs as Kubernetes components write them (k8s.io/component-base/logs): `--logging-format=text` is klog's
//! header and structured form (`I1124 10:00:00.123456   4242 serve.rs:87] "msg" key="value"`), `--logging-format=json`
//! is one JSON object per line (`{"ts":<epoch ms>,"caller":"file:line","msg":"...","v":0,...}`, errors with no `v`),
//! and `-v` is the verbosity: `debug` events are klog's V(3) (the HTTP access log is one), `trace` V(6).
//! `RUST_LOG`, when set, overrides `-v` with `tracing`'s own filter syntax.

use std::fmt::Write as _;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{EnvFilter, Layer};

/// The verbosity of `debug` events (the access log is logged at this level upstream).
pub const DEBUG_VERBOSITY: u8 = 3;
/// The verbosity of `trace` events.
pub const TRACE_VERBOSITY: u8 = 6;
/// Targets everything below `-v` this low is shown for, whatever the crate (dependencies are quiet until then).
const ALL_TARGETS_VERBOSITY: u8 = 8;

/// upstream's logging flags.
#[derive(Clone, Debug, clap::Args)]
pub struct LoggingOptions {
    /// Sets the log format. Permitted formats: "json", "text".
    #[arg(long = "logging-format", default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// number for the log level verbosity
    #[arg(short = 'v', long = "v", default_value_t = 0)]
    pub verbosity: u8,
}

impl Default for LoggingOptions {
    fn default() -> Self {
        LoggingOptions {
            format: "text".to_string(),
            verbosity: 0,
        }
    }
}

impl LoggingOptions {
    /// The filter `-v` stands for: info and above from everything; debug (V(3)) and trace (V(6)) from the
    /// targets named (this crate's and the binary's), and from every crate at V(8).
    pub fn filter(&self, targets: &[&str]) -> EnvFilter {
        EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new(self.directives(targets)))
    }

    /// `-v` as `tracing` filter directives.
    fn directives(&self, targets: &[&str]) -> String {
        let ours = match self.verbosity {
            v if v >= TRACE_VERBOSITY => "trace",
            v if v >= DEBUG_VERBOSITY => "debug",
            _ => "info",
        };
        let mut directives = if self.verbosity >= ALL_TARGETS_VERBOSITY {
            "trace".to_string()
        } else {
            "info".to_string()
        };
        for target in std::iter::once("apiserver").chain(targets.iter().copied()) {
            let _ = write!(directives, ",{target}={ours}");
        }
        directives
    }

    /// The layer that writes logs to stderr in the chosen format, filtered by `-v`.
    pub fn layer<S>(&self, targets: &[&str]) -> Box<dyn Layer<S> + Send + Sync>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        let format = if self.format == "json" {
            Format::Json
        } else {
            Format::Text
        };
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .event_format(format)
            .with_filter(self.filter(targets))
            .boxed()
    }
}

/// How a log line is written.
#[derive(Clone, Copy, Debug)]
pub enum Format {
    /// klog's text form.
    Text,
    /// component-base's JSON form.
    Json,
}

/// The fields of one event, in the order they were recorded.
#[derive(Default)]
struct Fields {
    message: String,
    pairs: Vec<(&'static str, serde_json::Value)>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.pairs.push((
                field.name(),
                serde_json::Value::String(format!("{value:?}")),
            ));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_string();
        } else {
            self.pairs.push((field.name(), value.into()));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.pairs.push((field.name(), value.into()));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.pairs.push((field.name(), value.into()));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.pairs.push((field.name(), value.into()));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.pairs.push((field.name(), value.into()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.pairs.push((field.name(), value.to_string().into()));
    }
}

/// `file:line` with the file's last two path parts (zap's short caller).
fn caller(event: &Event<'_>) -> String {
    let file = event.metadata().file().unwrap_or("???");
    let mut parts = file.rsplit('/');
    let name = parts.next().unwrap_or(file);
    let short = match parts.next() {
        Some(dir) => format!("{dir}/{name}"),
        None => name.to_string(),
    };
    format!("{short}:{}", event.metadata().line().unwrap_or(0))
}

fn verbosity(level: &Level) -> u8 {
    match *level {
        Level::TRACE => TRACE_VERBOSITY,
        Level::DEBUG => DEBUG_VERBOSITY,
        _ => 0,
    }
}

impl<S, N> FormatEvent<S, N> for Format
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let level = event.metadata().level();
        let now = chrono::Utc::now();
        match self {
            Format::Json => {
                // Written by hand to keep upstream's order: ts, caller, msg, v, then the fields.
                let string = |s: &str| serde_json::Value::String(s.to_string());
                let millis = now.timestamp_micros() as f64 / 1000.0;
                write!(
                    writer,
                    "{{\"ts\":{millis},\"caller\":{},\"msg\":{}",
                    string(&caller(event)),
                    string(&fields.message)
                )?;
                if *level != Level::ERROR {
                    write!(writer, ",\"v\":{}", verbosity(level))?;
                }
                for (key, value) in fields.pairs {
                    // upstream's error key.
                    let key = if *level == Level::ERROR && key == "error" {
                        "err"
                    } else {
                        key
                    };
                    write!(writer, ",{}:{value}", string(key))?;
                }
                writeln!(writer, "}}")
            }
            Format::Text => {
                let severity = match *level {
                    Level::ERROR => 'E',
                    Level::WARN => 'W',
                    _ => 'I',
                };
                let local = now.with_timezone(&chrono::Local);
                write!(
                    writer,
                    "{severity}{} {:>7} {}] {}",
                    local.format("%m%d %H:%M:%S%.6f"),
                    std::process::id(),
                    caller_file(event),
                    serde_json::Value::String(fields.message),
                )?;
                for (key, value) in fields.pairs {
                    match value {
                        serde_json::Value::String(s) => {
                            write!(writer, " {key}={}", serde_json::Value::String(s))?
                        }
                        other => write!(writer, " {key}={other}")?,
                    }
                }
                writeln!(writer)
            }
        }
    }
}

/// klog's caller: the file's base name and line.
fn caller_file(event: &Event<'_>) -> String {
    let file = event.metadata().file().unwrap_or("???");
    let name = file.rsplit('/').next().unwrap_or(file);
    format!("{name}:{}", event.metadata().line().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn capture(format: Format, f: impl FnOnce()) -> String {
        let buffer = Buffer::default();
        let out = buffer.clone();
        let subscriber = tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .with_writer(move || out.clone())
                .event_format(format),
        );
        tracing::subscriber::with_default(subscriber, f);
        String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn json_lines_are_component_base_json() {
        let text = capture(Format::Json, || {
            tracing::info!(pod = "kube-system/kubedns", count = 2, "Pod status updated");
            tracing::debug!(resp = 200, "HTTP");
            tracing::error!(error = "invalid namespace", "failed");
        });
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0]["ts"].as_f64().unwrap() > 1.7e12, "milliseconds");
        assert!(
            lines[0]["caller"]
                .as_str()
                .unwrap()
                .starts_with("src/logging.rs:")
        );
        assert_eq!(lines[0]["msg"], "Pod status updated");
        assert_eq!(lines[0]["v"], 0);
        assert_eq!(lines[0]["pod"], "kube-system/kubedns");
        assert_eq!(lines[0]["count"], 2);
        assert_eq!(lines[1]["v"], 3);
        assert_eq!(lines[2]["err"], "invalid namespace");
        assert!(text.starts_with(r#"{"ts":"#), "{text}");
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains(r#""msg":"Pod status updated","v":0,"pod":"#),
            "{text}"
        );
        assert!(lines[2].get("v").is_none());
    }

    #[test]
    fn text_lines_have_klogs_header() {
        let text = capture(Format::Text, || {
            tracing::warn!(pod = "x", "Pod \"status\" updated");
        });
        let (header, rest) = text.split_once("] ").unwrap();
        assert!(header.starts_with('W'), "{text}");
        assert!(header.contains("logging.rs:"), "{text}");
        assert_eq!(rest.trim_end(), r#""Pod \"status\" updated" pod="x""#);
    }

    #[test]
    fn verbosity_chooses_what_is_shown() {
        let at = |verbosity| {
            LoggingOptions {
                verbosity,
                ..LoggingOptions::default()
            }
            .directives(&["pizza_apiserver"])
        };
        assert_eq!(at(0), "info,apiserver=info,pizza_apiserver=info");
        assert_eq!(at(3), "info,apiserver=debug,pizza_apiserver=debug");
        assert_eq!(at(6), "info,apiserver=trace,pizza_apiserver=trace");
        assert_eq!(at(8), "trace,apiserver=trace,pizza_apiserver=trace");
    }
}
