//! OpenTelemetry traces as upstream's `--tracing-config-file` gives them: an `apiserver.config.k8s.io/v1`
//! `TracingConfiguration` names the OTLP/gRPC collector (`endpoint`, default `localhost:4317`) and
//! `samplingRatePerMillion` (unset or 0: only requests whose trusted parent is sampled are traced). Spans are
//! `tracing` spans under the target [`SPAN_TARGET`], bridged by tracing-opentelemetry, so they cost a callsite
//! check when tracing is off. The exporter is the `otel` cargo feature: a server built without it refuses
//! `--tracing-config-file` at start.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
#[cfg(feature = "otel")]
use std::time::SystemTime;

#[cfg(feature = "otel")]
use opentelemetry::propagation::{Extractor, TextMapPropagator};
#[cfg(feature = "otel")]
use opentelemetry::trace::{TraceContextExt, Tracer, TracerProvider as _};
#[cfg(feature = "otel")]
use opentelemetry::{Context, KeyValue};
#[cfg(feature = "otel")]
use opentelemetry_otlp::WithExportConfig;
#[cfg(feature = "otel")]
use opentelemetry_sdk::propagation::TraceContextPropagator;
#[cfg(feature = "otel")]
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use serde::Deserialize;
use tracing::Subscriber;
use tracing_subscriber::Layer;
#[cfg(feature = "otel")]
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

/// The target of every span meant for the trace exporter.
pub const SPAN_TARGET: &str = "apiserver::trace";
/// upstream's service name for every apiserver (`service.name`).
#[cfg(feature = "otel")]
const SERVICE_NAME: &str = "apiserver";
/// The OTLP gRPC default.
#[cfg(any(feature = "otel", test))]
const DEFAULT_ENDPOINT: &str = "localhost:4317";
/// The instrumentation scope of request spans (upstream's component-base tracer).
#[cfg(feature = "otel")]
const SCOPE: &str = "k8s.io/component-base/tracing";
/// Groups whose `traceparent` is followed (upstream since 1.33); other clients' parents become links.
#[cfg(feature = "otel")]
const TRUSTED_GROUPS: &[&str] = &["system:masters", "system:monitoring"];

/// upstream's tracing flag.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct TracingOptions {
    /// File with apiserver tracing configuration.
    #[arg(long = "tracing-config-file")]
    pub config_file: Option<PathBuf>,
}

/// The tracing configuration could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TracingError(pub String);

/// `TracingConfiguration` (component-base `tracing/api/v1`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TracingConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    /// The collector, `host:port` (gRPC, no TLS).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Requests traced per million that have no sampled parent.
    #[serde(default)]
    pub sampling_rate_per_million: Option<i32>,
}

const API_VERSIONS: &[&str] = &[
    "apiserver.config.k8s.io/v1",
    "apiserver.config.k8s.io/v1beta1",
    "apiserver.config.k8s.io/v1alpha1",
];

impl TracingConfiguration {
    /// Reads and validates a configuration file (YAML or JSON).
    pub fn load(path: &Path) -> Result<Self, TracingError> {
        if !path.exists() {
            return Err(TracingError(format!(
                "tracing-config-file {} does not exist",
                path.display()
            )));
        }
        let data = std::fs::read(path).map_err(|e| {
            TracingError(format!(
                "failed to read tracing config: unable to read tracing configuration from {:?}: {e}",
                path.display().to_string()
            ))
        })?;
        Self::parse(&data)
    }

    /// Parses and validates a configuration.
    pub fn parse(data: &[u8]) -> Result<Self, TracingError> {
        if data.iter().all(u8::is_ascii_whitespace) {
            return Err(TracingError(
                "failed to read tracing config: tracing config file was empty".into(),
            ));
        }
        let decode = |e: String| {
            TracingError(format!(
                "failed to read tracing config: unable to decode tracing configuration data: {e}"
            ))
        };
        let (json, _) = crate::codec::yaml_to_json(data).map_err(|e| decode(e.to_string()))?;
        let config: TracingConfiguration =
            serde_json::from_slice(&json).map_err(|e| decode(e.to_string()))?;
        if config.kind != "TracingConfiguration"
            || !API_VERSIONS.contains(&config.api_version.as_str())
        {
            return Err(decode(format!(
                "no kind {:?} is registered for version {:?}",
                config.kind, config.api_version
            )));
        }
        let invalid = |field: &str, value: &str, detail: &str| {
            TracingError(format!(
                "failed to validate tracing configuration: {field}: Invalid value: {value}: {detail}"
            ))
        };
        if let Some(rate) = config.sampling_rate_per_million {
            if rate < 0 {
                return Err(invalid(
                    "samplingRatePerMillion",
                    &rate.to_string(),
                    "sampling rate must be positive",
                ));
            }
            if rate > 1_000_000 {
                return Err(invalid(
                    "samplingRatePerMillion",
                    &rate.to_string(),
                    "sampling rate per million must be less than or equal to one million",
                ));
            }
        }
        if let Some(endpoint) = &config.endpoint {
            let scheme = endpoint.split_once("://").map(|(s, _)| s).unwrap_or("dns");
            if !["dns", "unix", "unix-abstract", "http"].contains(&scheme) {
                return Err(invalid(
                    "endpoint",
                    &format!("{endpoint:?}"),
                    &format!(
                        "unsupported scheme: {scheme}.  Options are none, dns, unix, or unix-abstract.  See https://github.com/grpc/grpc/blob/master/doc/naming.md"
                    ),
                ));
            }
        }
        Ok(config)
    }

    /// The collector's URL for the gRPC client.
    #[cfg(any(feature = "otel", test))]
    fn endpoint_url(&self) -> String {
        let endpoint = self.endpoint.as_deref().unwrap_or(DEFAULT_ENDPOINT);
        let host = endpoint
            .strip_prefix("dns:///")
            .or_else(|| endpoint.strip_prefix("dns://"))
            .or_else(|| endpoint.strip_prefix("http://"))
            .unwrap_or(endpoint);
        format!("http://{host}")
    }
}

/// Requests per million traced without a sampled parent (set once the exporter starts): at 0, a request
/// without one is not traced, and its spans are never built.
static ROOT_SAMPLING_RATE: AtomicU32 = AtomicU32::new(0);

/// Whether a request may be traced: its trusted parent is sampled, or requests without one may be.
pub fn may_sample(sampled_parent: bool) -> bool {
    sampled_parent || ROOT_SAMPLING_RATE.load(Ordering::Relaxed) > 0
}

/// Whether spans of a request's steps are built: spans are exported and the code runs inside a request span
/// (so a request that is not sampled, and work outside requests, cost a callsite check and a thread-local read).
pub fn in_traced_request() -> bool {
    tracing::span_enabled!(target: SPAN_TARGET, tracing::Level::TRACE)
        && !tracing::Span::current().is_none()
}

/// The running trace exporter.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: SdkTracerProvider,
    /// None runs in a build without the exporter.
    #[cfg(not(feature = "otel"))]
    never: std::convert::Infallible,
}

#[cfg(not(feature = "otel"))]
impl TracingOptions {
    /// This build has no exporter (cargo feature `otel`): a configuration file is refused, not ignored.
    pub fn start(&self) -> Result<Option<Telemetry>, TracingError> {
        match &self.config_file {
            None => Ok(None),
            Some(path) => Err(TracingError(format!(
                "--tracing-config-file {}: this server was built without tracing export (cargo feature `otel`)",
                path.display()
            ))),
        }
    }
}

#[cfg(not(feature = "otel"))]
impl Telemetry {
    /// The layer that turns spans of [`SPAN_TARGET`] into exported spans.
    pub fn layer<S>(&self) -> Box<dyn Layer<S> + Send + Sync>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        match self.never {}
    }

    /// Sends what is buffered and stops the exporter.
    pub async fn shutdown(self) {
        match self.never {}
    }
}

#[cfg(feature = "otel")]
impl TracingOptions {
    /// Starts exporting spans when a configuration file is given (inside a Tokio runtime: the gRPC client needs
    /// one). The provider also becomes the process's global one, for spans made with explicit times.
    pub fn start(&self) -> Result<Option<Telemetry>, TracingError> {
        let Some(path) = &self.config_file else {
            return Ok(None);
        };
        let config = TracingConfiguration::load(path)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(config.endpoint_url())
            .build()
            .map_err(|e| TracingError(format!("tracing exporter: {e}")))?;
        let rate = config.sampling_rate_per_million.unwrap_or(0);
        ROOT_SAMPLING_RATE.store(u32::try_from(rate).unwrap_or(0), Ordering::Relaxed);
        let root = if rate > 0 {
            Sampler::TraceIdRatioBased(f64::from(rate) / 1_000_000.0)
        } else {
            Sampler::AlwaysOff
        };
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name(SERVICE_NAME)
            .with_attribute(KeyValue::new("service.instance.id", instance_id()))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_sampler(Sampler::ParentBased(Box::new(root)))
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        Ok(Some(Telemetry { provider }))
    }
}

#[cfg(feature = "otel")]
impl Telemetry {
    /// The layer that turns spans of [`SPAN_TARGET`] into exported spans.
    pub fn layer<S>(&self) -> Box<dyn Layer<S> + Send + Sync>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer(SCOPE))
            .with_filter(Targets::new().with_target(SPAN_TARGET, tracing::Level::TRACE))
            .boxed()
    }

    /// Sends what is buffered and stops the exporter.
    pub async fn shutdown(self) {
        let provider = self.provider;
        let _ = tokio::task::spawn_blocking(move || provider.shutdown()).await;
    }
}

/// `apiserver-` and a hash of the host name (upstream's APIServerID shape).
#[cfg(feature = "otel")]
fn instance_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{}{}kube-apiserver", host.trim().len(), host.trim()).as_bytes(),
    );
    let hex: String = digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("apiserver-{hex}")
}

#[cfg(feature = "otel")]
struct Headers<'a>(&'a http::HeaderMap);

#[cfg(feature = "otel")]
impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// A step of the current request (`Decode`, `SerializeObject`) as a child span; disabled, at the cost of a
/// callsite check, unless spans are exported.
pub fn step_span(name: &'static str) -> tracing::Span {
    if !in_traced_request() {
        return tracing::Span::none();
    }
    tracing::trace_span!(target: SPAN_TARGET, "step", otel.name = name)
}

/// Whether a parent context says "sampled".
#[cfg(feature = "otel")]
pub fn is_sampled(parent: &Context) -> bool {
    parent.span().span_context().is_sampled()
}

/// The W3C `traceparent` a request carries, if any.
#[cfg(feature = "otel")]
pub fn remote_parent(headers: &http::HeaderMap) -> Option<Context> {
    let context = TraceContextPropagator::new().extract(&Headers(headers));
    context.span().span_context().is_valid().then_some(context)
}

/// Whether a user's `traceparent` is followed rather than linked.
#[cfg(feature = "otel")]
pub fn trusts_parent_of(groups: &[String]) -> bool {
    groups.iter().any(|g| TRUSTED_GROUPS.contains(&g.as_str()))
}

/// Records a span that already happened (e.g. authentication, which runs before the request span exists) as
/// a child of `parent`.
#[cfg(feature = "otel")]
pub fn record_past_span(parent: &Context, name: &'static str, start: SystemTime, end: SystemTime) {
    let tracer = opentelemetry::global::tracer(SCOPE);
    let span = tracer
        .span_builder(name)
        .with_start_time(start)
        .start_with_context(&tracer, parent);
    let mut span = span;
    opentelemetry::trace::Span::end_with_timestamp(&mut span, end);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_are_read_and_checked_as_upstream() {
        let ok = TracingConfiguration::parse(
            b"apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: 127.0.0.1:4317\nsamplingRatePerMillion: 100\n",
        )
        .unwrap();
        assert_eq!(ok.endpoint_url(), "http://127.0.0.1:4317");
        assert_eq!(ok.sampling_rate_per_million, Some(100));
        let default = TracingConfiguration::parse(
            b"apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n",
        )
        .unwrap();
        assert_eq!(default.endpoint_url(), "http://localhost:4317");
        for (yaml, want) in [
            ("", "tracing config file was empty"),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nsamplingRatePerMillion: -1\n",
                "samplingRatePerMillion: Invalid value: -1: sampling rate must be positive",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nsamplingRatePerMillion: 1000001\n",
                "less than or equal to one million",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpont: x\n",
                "unknown field",
            ),
            (
                "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: https://x:4317\n",
                "unsupported scheme: https",
            ),
            (
                "apiVersion: v1\nkind: TracingConfiguration\n",
                "is registered",
            ),
        ] {
            let err = TracingConfiguration::parse(yaml.as_bytes()).unwrap_err().0;
            assert!(err.contains(want), "{yaml}: {err}");
        }
    }

    #[cfg(feature = "otel")]
    #[test]
    fn parents_come_from_traceparent() {
        let mut headers = http::HeaderMap::new();
        assert!(remote_parent(&headers).is_none());
        headers.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        let parent = remote_parent(&headers).unwrap();
        let span = parent.span();
        assert_eq!(
            span.span_context().trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert!(trusts_parent_of(&["system:masters".into()]));
        assert!(!trusts_parent_of(&["system:authenticated".into()]));
    }
}
