//! Metrics: the request metrics of upstream's `k8s.io/apiserver/pkg/endpoints/metrics` under their names, types,
//! labels and buckets, and the process metrics, served at `/metrics` in the Prometheus text format (the
//! `prometheus` crate: its registry, encoder and Linux process collector). One registry per server, so that servers
//! in one process (tests) count apart. The REST handlers record each request that reaches a served resource, as
//! upstream's instrumented routes do; the path is authorized like any non-resource path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

mod health;
mod openmetrics;
mod storage;

pub use health::HealthMetrics;
pub use storage::CacheMetrics;

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use prometheus::{
    Encoder, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry, TextEncoder,
};

/// Upstream's `apiserver_request_duration_seconds` buckets (the SLO's).
const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];
/// Upstream's `apiserver_request_sli_duration_seconds` buckets.
const SLI_BUCKETS: &[f64] = &[
    0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0,
    30.0, 45.0, 60.0,
];
/// The OpenMetrics media type, and the content type of an OpenMetrics exposition.
const OPENMETRICS_TYPE: &str = "application/openmetrics-text";
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upstream's buckets of delegated authentication and authorization requests.
const DELEGATED_BUCKETS: &[f64] = &[0.25, 0.5, 0.7, 1.0, 1.5, 3.0, 5.0, 10.0];

/// Upstream's admission latency buckets.
/// Upstream's buckets for admission policy checks.
const POLICY_BUCKETS: &[f64] = &[0.0000005, 0.001, 0.01, 0.1, 1.0];

const ADMISSION_BUCKETS: &[f64] = &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5];
/// The labels of a request, as upstream's `MonitorRequest` sets them.
pub const REQUEST_LABELS: &[&str] = &[
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
];

/// The verbs upstream reports; anything else is `other`.
const VALID_VERBS: &[&str] = &[
    "APPLY",
    "CONNECT",
    "CREATE",
    "DELETE",
    "DELETECOLLECTION",
    "GET",
    "LIST",
    "PATCH",
    "POST",
    "PROXY",
    "PUT",
    "UPDATE",
    "WATCH",
    "WATCHLIST",
];
const COMPONENT: &str = "apiserver";

/// One request's labels, as upstream's `MonitorRequest` gets them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct RequestLabels {
    /// `GET`, `LIST`, `WATCH`, `POST`, `PUT`, `PATCH`, `APPLY`, `DELETE`, `DELETECOLLECTION` (else `other`).
    pub verb: String,
    /// The `dryRun` values, sorted, without repeats, joined by `,`.
    pub dry_run: String,
    /// The API group of the resource; empty for the core group and non-resource requests.
    pub group: String,
    /// The API version of the request's path, e.g. `v1`.
    pub version: String,
    /// The resource, a plural, e.g. `pizzas`; empty for non-resource requests.
    pub resource: String,
    /// The subresource, e.g. `status`; empty for the main resource.
    pub subresource: String,
    /// `resource` (one object, or a create), `namespace`, `cluster`.
    pub scope: String,
}

impl RequestLabels {
    /// The labels of a resource request from its Kubernetes verb (`get`, `list`, `create`, ...), whether it is an
    /// apply patch, and its `dryRun` values.
    pub fn new(
        kube_verb: &str,
        apply: bool,
        dry_run: &[&str],
        [group, version, resource, subresource]: [&str; 4],
        namespace: &str,
        name: &str,
    ) -> RequestLabels {
        let verb = match kube_verb {
            "get" => "GET".to_string(),
            "list" => "LIST".to_string(),
            "watch" => "WATCH".to_string(),
            "create" => "POST".to_string(),
            "update" => "PUT".to_string(),
            "patch" if apply => "APPLY".to_string(),
            "patch" => "PATCH".to_string(),
            "delete" => "DELETE".to_string(),
            "deletecollection" => "DELETECOLLECTION".to_string(),
            other => {
                let upper = other.to_ascii_uppercase();
                if VALID_VERBS.contains(&upper.as_str()) {
                    upper
                } else {
                    "other".to_string()
                }
            }
        };
        let scope = if !name.is_empty() || kube_verb == "create" {
            "resource"
        } else if !namespace.is_empty() {
            "namespace"
        } else {
            "cluster"
        };
        let mut dry: Vec<&str> = dry_run.to_vec();
        dry.sort_unstable();
        dry.dedup();
        RequestLabels {
            verb,
            dry_run: dry.join(","),
            group: group.to_string(),
            version: version.to_string(),
            resource: resource.to_string(),
            subresource: subresource.to_string(),
            scope: scope.to_string(),
        }
    }

    fn values(&self) -> [&str; 8] {
        [
            &self.verb,
            &self.dry_run,
            &self.group,
            &self.version,
            &self.resource,
            &self.subresource,
            &self.scope,
            COMPONENT,
        ]
    }

    fn values_without_dry_run(&self) -> [&str; 7] {
        let [
            verb,
            _,
            group,
            version,
            resource,
            subresource,
            scope,
            component,
        ] = self.values();
        [
            verb,
            group,
            version,
            resource,
            subresource,
            scope,
            component,
        ]
    }

    fn read_only(&self) -> bool {
        matches!(self.verb.as_str(), "GET" | "LIST" | "WATCH")
    }
}

/// Counts a request in `apiserver_current_inflight_requests` while it lives.
pub struct InFlight(Option<prometheus::IntGauge>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(gauge) = &self.0 {
            gauge.dec();
        }
    }
}

/// The Tokio runtime's own figures (its stable metrics), set when `/metrics` is read.
struct RuntimeGauges {
    workers: IntGauge,
    alive_tasks: IntGauge,
    global_queue_depth: IntGauge,
    busy_seconds: prometheus::GaugeVec,
}

impl RuntimeGauges {
    fn collectors(&self) -> [Box<dyn prometheus::core::Collector>; 4] {
        [
            Box::new(self.workers.clone()),
            Box::new(self.alive_tasks.clone()),
            Box::new(self.global_queue_depth.clone()),
            Box::new(self.busy_seconds.clone()),
        ]
    }

    /// Reads the runtime the caller runs on (nothing outside one).
    fn update(&self) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let runtime = handle.metrics();
        let gauge = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.workers.set(gauge(runtime.num_workers()));
        self.alive_tasks.set(gauge(runtime.num_alive_tasks()));
        self.global_queue_depth
            .set(gauge(runtime.global_queue_depth()));
        for worker in 0..runtime.num_workers() {
            self.busy_seconds
                .with_label_values(&[&worker.to_string()])
                .set(runtime.worker_total_busy_duration(worker).as_secs_f64());
        }
    }
}

/// Which review a delegated request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delegated {
    /// A TokenReview.
    Authentication,
    /// A SubjectAccessReview.
    Authorization,
}

/// The series of one open watch; the watcher count drops with it.
pub struct WatchSeries {
    watchers: IntGauge,
    events: IntCounter,
    sizes: Histogram,
}

impl WatchSeries {
    /// An event of `bytes` was sent.
    pub fn sent(&self, bytes: usize) {
        self.events.inc();
        self.sizes.observe(bytes as f64);
    }
}

impl Drop for WatchSeries {
    fn drop(&mut self) {
        self.watchers.dec();
    }
}

/// The server's metric families.
pub struct Metrics {
    registry: Registry,
    /// `apiserver_request_total`: REQUEST_LABELS and `code`.
    pub requests: IntCounterVec,
    /// `apiserver_request_duration_seconds`: REQUEST_LABELS.
    pub durations: HistogramVec,
    /// `apiserver_request_sli_duration_seconds`: REQUEST_LABELS, watches left out as upstream.
    pub sli_durations: HistogramVec,
    /// `apiserver_response_sizes`: REQUEST_LABELS without `dry_run`.
    pub response_sizes: HistogramVec,
    /// `apiserver_current_inflight_requests{request_kind}`: `readOnly` or `mutating`, watches left out.
    pub inflight: IntGaugeVec,
    /// `apiserver_longrunning_requests`: REQUEST_LABELS without `dry_run`; open watches.
    pub longrunning: IntGaugeVec,
    /// `etcd_request_duration_seconds{operation,type}`: calls to an etcd backend.
    pub etcd_durations: HistogramVec,
    /// `etcd_request_errors_total{operation,type}`.
    pub etcd_errors: IntCounterVec,
    /// `apiserver_storage_request_duration_seconds{backend,operation,type}`: calls to the other backends.
    pub storage_durations: HistogramVec,
    /// `apiserver_storage_request_errors_total{backend,operation,type}`.
    pub storage_errors: IntCounterVec,
    /// `authentication_attempts{result}`: `success`, `failure`, `error`.
    pub authentication_attempts: IntCounterVec,
    /// `authentication_duration_seconds{result}`.
    pub authentication_durations: HistogramVec,
    /// `authorization_attempts_total{result}`: `allowed`, `denied`, `no-opinion`, `error`.
    pub authorization_attempts: IntCounterVec,
    /// `authorization_duration_seconds{result}`.
    pub authorization_durations: HistogramVec,
    /// `apiserver_request_terminations_total`: REQUEST_LABELS without `dry_run`, and `code`: requests the server
    /// cut short (timeouts, too many requests).
    pub terminations: IntCounterVec,
    /// `apiserver_admission_controller_admission_duration_seconds{name,operation,rejected,type}`.
    pub admission_controller_durations: HistogramVec,
    /// `apiserver_admission_step_admission_duration_seconds{operation,rejected,type}`.
    pub admission_step_durations: HistogramVec,
    /// `apiserver_admission_webhook_admission_duration_seconds{name,operation,rejected,type}`: each webhook call.
    pub webhook_durations: HistogramVec,
    /// `apiserver_admission_webhook_request_total{code,name,operation,rejected,type}`.
    pub webhook_requests: IntCounterVec,
    /// `apiserver_admission_webhook_rejection_count{error_type,name,operation,rejection_code,type}`.
    pub webhook_rejections: IntCounterVec,
    /// `apiserver_admission_webhook_fail_open_count{name,type}`: failed calls ignored by `failurePolicy: Ignore`.
    pub webhook_fail_open: IntCounterVec,
    /// `apiserver_validating_admission_policy_check_total{enforcement_action,error_type,policy,policy_binding}`.
    pub validating_policy_checks: IntCounterVec,
    /// `apiserver_validating_admission_policy_check_duration_seconds`, the same labels.
    pub validating_policy_durations: HistogramVec,
    /// `apiserver_mutating_admission_policy_check_total{error_type,policy,policy_binding}`.
    pub mutating_policy_checks: IntCounterVec,
    /// `apiserver_mutating_admission_policy_check_duration_seconds`, the same labels.
    pub mutating_policy_durations: HistogramVec,
    /// `apiserver_registered_watchers{group,version,kind}`: open watches.
    pub watchers: IntGaugeVec,
    /// `apiserver_watch_events_total{group,version,kind}`: events sent to watchers.
    pub watch_events: IntCounterVec,
    /// `apiserver_watch_events_sizes{group,version,kind}`: their sizes in bytes.
    pub watch_event_sizes: HistogramVec,
    /// `apiserver_storage_objects{resource}` (`<resource>.<group>`): objects stored, counted every minute.
    pub storage_objects: IntGaugeVec,
    /// `apiserver_resource_objects{group,resource}`: the same count under its newer name.
    pub resource_objects: IntGaugeVec,
    /// `apiserver_resource_size_estimate_bytes{group,resource}`: estimated bytes stored.
    pub resource_sizes: IntGaugeVec,
    /// `apiserver_tls_handshake_errors_total`.
    pub tls_handshake_errors: IntCounter,
    /// `apiserver_delegated_authn_request_total{code}`: TokenReviews sent to the core cluster.
    pub delegated_authn_requests: IntCounterVec,
    /// `apiserver_delegated_authn_request_duration_seconds{code}`.
    pub delegated_authn_durations: HistogramVec,
    /// `apiserver_delegated_authz_request_total{code}`: SubjectAccessReviews sent to the core cluster.
    pub delegated_authz_requests: IntCounterVec,
    /// `apiserver_delegated_authz_request_duration_seconds{code}`.
    pub delegated_authz_durations: HistogramVec,
    /// `authentication_token_cache_request_total{status}`: `hit` or `miss`.
    pub token_cache_requests: IntCounterVec,
    /// `leader_election_master_status{name}` (client-go's): 1 while this replica holds the lease `name` and runs
    /// the controllers, 0 otherwise.
    pub leader_election_master_status: IntGaugeVec,
    /// The Tokio runtime, read at each scrape: `tokio_runtime_workers`, `tokio_runtime_alive_tasks`,
    /// `tokio_runtime_global_queue_depth`, `tokio_runtime_worker_busy_seconds{worker}` (cumulative).
    runtime: RuntimeGauges,
    /// The watch caches' and the backends' LIST families.
    storage: storage::StorageFamilies,
    /// The health checks' results, served apart at `/metrics/slis`.
    health: HealthMetrics,
    /// The series of each label set seen, resolved once: a request then costs one lookup, not four.
    series: RwLock<HashMap<RequestLabels, Arc<Series>>>,
    /// The two series of `inflight`: read-only and mutating.
    inflight_kinds: [IntGauge; 2],
}

/// The series of one label set.
struct Series {
    durations: Histogram,
    sli_durations: Option<Histogram>,
    response_sizes: Histogram,
    /// `apiserver_request_total` by status code.
    requests: Mutex<Vec<(u16, IntCounter)>>,
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("a valid gauge")
}

fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("a valid counter")
}

/// One attempt counted and timed under its result.
fn attempt(attempts: &IntCounterVec, durations: &HistogramVec, result: &str, elapsed: Duration) {
    attempts.with_label_values(&[result]).inc();
    durations
        .with_label_values(&[result])
        .observe(elapsed.as_secs_f64());
}

fn histogram(name: &str, help: &str, buckets: &[f64], labels: &[&str]) -> HistogramVec {
    HistogramVec::new(
        HistogramOpts::new(name, help).buckets(buckets.to_vec()),
        labels,
    )
    .expect("a valid histogram")
}

impl Metrics {
    /// The metric families, all at zero, in a registry of their own (one per server).
    pub fn new() -> Metrics {
        let without_dry_run: Vec<&str> = REQUEST_LABELS
            .iter()
            .copied()
            .filter(|l| *l != "dry_run")
            .collect();
        let mut with_code = REQUEST_LABELS.to_vec();
        with_code.push("code");
        let inflight = IntGaugeVec::new(
                Opts::new(
                    "apiserver_current_inflight_requests",
                    "Maximal number of currently used inflight request limit of this apiserver per request kind in last second.",
                ),
                &["request_kind"],
            )
            .expect("a valid gauge");
        let inflight_kinds =
            ["readOnly", "mutating"].map(|kind| inflight.with_label_values(&[kind]));
        let metrics = Metrics {
            registry: Registry::new(),
            requests: IntCounterVec::new(
                Opts::new(
                    "apiserver_request_total",
                    "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
                ),
                &with_code,
            )
            .expect("a valid counter"),
            durations: histogram(
                "apiserver_request_duration_seconds",
                "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
                DURATION_BUCKETS,
                REQUEST_LABELS,
            ),
            sli_durations: histogram(
                "apiserver_request_sli_duration_seconds",
                "Response latency distribution (not counting webhook duration and priority & fairness queue wait times) in seconds for each verb, group, version, resource, subresource, scope and component.",
                SLI_BUCKETS,
                REQUEST_LABELS,
            ),
            response_sizes: histogram(
                "apiserver_response_sizes",
                "Response size distribution in bytes for each group, version, verb, resource, subresource, scope and component.",
                &prometheus::exponential_buckets(1000.0, 10.0, 8).expect("valid buckets"),
                &without_dry_run,
            ),
            inflight: inflight.clone(),
            longrunning: IntGaugeVec::new(
                Opts::new(
                    "apiserver_longrunning_requests",
                    "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
                ),
                &without_dry_run,
            )
            .expect("a valid gauge"),
            etcd_durations: histogram(
                "etcd_request_duration_seconds",
                "Etcd request latency in seconds for each operation and object type.",
                DURATION_BUCKETS,
                &["operation", "type"],
            ),
            etcd_errors: counter(
                "etcd_request_errors_total",
                "Etcd failed request counts for each operation and object type.",
                &["operation", "type"],
            ),
            storage_durations: histogram(
                "apiserver_storage_request_duration_seconds",
                "Storage backend request latency in seconds for each backend, operation and object type.",
                DURATION_BUCKETS,
                &["backend", "operation", "type"],
            ),
            storage_errors: counter(
                "apiserver_storage_request_errors_total",
                "Storage backend failed request counts for each backend, operation and object type.",
                &["backend", "operation", "type"],
            ),
            authentication_attempts: counter(
                "authentication_attempts",
                "Counter of authenticated attempts.",
                &["result"],
            ),
            authentication_durations: histogram(
                "authentication_duration_seconds",
                "Authentication duration in seconds broken out by result.",
                &prometheus::exponential_buckets(0.001, 2.0, 15).expect("valid buckets"),
                &["result"],
            ),
            authorization_attempts: counter(
                "authorization_attempts_total",
                "Counter of authorization attempts broken down by result. It can be either 'allowed', 'denied', 'no-opinion' or 'error'.",
                &["result"],
            ),
            authorization_durations: histogram(
                "authorization_duration_seconds",
                "Authorization duration in seconds broken out by result.",
                &prometheus::exponential_buckets(0.001, 2.0, 15).expect("valid buckets"),
                &["result"],
            ),
            terminations: counter(
                "apiserver_request_terminations_total",
                "Number of requests which apiserver terminated in self-defense.",
                &[without_dry_run.as_slice(), &["code"]].concat(),
            ),
            admission_controller_durations: histogram(
                "apiserver_admission_controller_admission_duration_seconds",
                "Admission controller latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
                ADMISSION_BUCKETS,
                &["name", "operation", "rejected", "type"],
            ),
            webhook_durations: histogram(
                "apiserver_admission_webhook_admission_duration_seconds",
                "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
                &[0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10.0, 25.0],
                &["name", "operation", "rejected", "type"],
            ),
            webhook_requests: counter(
                "apiserver_admission_webhook_request_total",
                "Admission webhook request total, identified by name and broken out for each admission type (validating or mutating) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code. Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
                &["code", "name", "operation", "rejected", "type"],
            ),
            webhook_rejections: counter(
                "apiserver_admission_webhook_rejection_count",
                "Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400). Codes greater than 600 are truncated to 600, to keep the metrics cardinality bounded.",
                &["error_type", "name", "operation", "rejection_code", "type"],
            ),
            webhook_fail_open: counter(
                "apiserver_admission_webhook_fail_open_count",
                "Admission webhook fail open count, identified by name and broken out for each admission type (validating or admit).",
                &["name", "type"],
            ),
            validating_policy_checks: counter(
                "apiserver_validating_admission_policy_check_total",
                "Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.",
                &["policy", "policy_binding", "error_type", "enforcement_action"],
            ),
            validating_policy_durations: histogram(
                "apiserver_validating_admission_policy_check_duration_seconds",
                "Validation admission latency for individual validation expressions in seconds, labeled by policy and further including binding and enforcement action taken.",
                POLICY_BUCKETS,
                &["policy", "policy_binding", "error_type", "enforcement_action"],
            ),
            mutating_policy_checks: counter(
                "apiserver_mutating_admission_policy_check_total",
                "Mutation admission policy check total, labeled by policy and further identified by binding.",
                &["policy", "policy_binding", "error_type"],
            ),
            mutating_policy_durations: histogram(
                "apiserver_mutating_admission_policy_check_duration_seconds",
                "Mutation admission latency for individual mutation expressions in seconds, labeled by policy and binding.",
                POLICY_BUCKETS,
                &["policy", "policy_binding", "error_type"],
            ),
            admission_step_durations: histogram(
                "apiserver_admission_step_admission_duration_seconds",
                "Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).",
                ADMISSION_BUCKETS,
                &["operation", "rejected", "type"],
            ),
            watchers: gauge(
                "apiserver_registered_watchers",
                "Number of currently registered watchers for a given resources",
                &["group", "version", "kind"],
            ),
            watch_events: counter(
                "apiserver_watch_events_total",
                "Number of events sent in watch clients",
                &["group", "version", "kind"],
            ),
            watch_event_sizes: histogram(
                "apiserver_watch_events_sizes",
                "Watch event size distribution in bytes",
                &prometheus::exponential_buckets(1024.0, 2.0, 8).expect("valid buckets"),
                &["group", "version", "kind"],
            ),
            storage_objects: gauge(
                "apiserver_storage_objects",
                "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
                &["resource"],
            ),
            resource_objects: gauge(
                "apiserver_resource_objects",
                "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
                &["group", "resource"],
            ),
            resource_sizes: gauge(
                "apiserver_resource_size_estimate_bytes",
                "Estimated size of stored objects in database. Estimate is based on sum of last observed sizes of serialized objects. In case of a fetching error, the value will be -1.",
                &["group", "resource"],
            ),
            tls_handshake_errors: IntCounter::new(
                "apiserver_tls_handshake_errors_total",
                "Number of requests dropped with 'TLS handshake error from' error",
            )
            .expect("a valid counter"),
            delegated_authn_requests: counter(
                "apiserver_delegated_authn_request_total",
                "Number of HTTP requests partitioned by status code.",
                &["code"],
            ),
            delegated_authn_durations: histogram(
                "apiserver_delegated_authn_request_duration_seconds",
                "Request latency in seconds. Broken down by status code.",
                DELEGATED_BUCKETS,
                &["code"],
            ),
            delegated_authz_requests: counter(
                "apiserver_delegated_authz_request_total",
                "Number of HTTP requests partitioned by status code.",
                &["code"],
            ),
            delegated_authz_durations: histogram(
                "apiserver_delegated_authz_request_duration_seconds",
                "Request latency in seconds. Broken down by status code.",
                DELEGATED_BUCKETS,
                &["code"],
            ),
            token_cache_requests: counter(
                "authentication_token_cache_request_total",
                "Total number of token cache requests, by hit or miss.",
                &["status"],
            ),
            leader_election_master_status: gauge(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates \
                 master. 'name' is the string used to identify the lease. Please make sure to group by name.",
                &["name"],
            ),
            runtime: RuntimeGauges {
                workers: IntGauge::new(
                    "tokio_runtime_workers",
                    "Number of worker threads of the Tokio runtime that serves requests.",
                )
                .expect("a valid gauge"),
                alive_tasks: IntGauge::new(
                    "tokio_runtime_alive_tasks",
                    "Number of tasks alive in the Tokio runtime (requests, watches, connections, controllers).",
                )
                .expect("a valid gauge"),
                global_queue_depth: IntGauge::new(
                    "tokio_runtime_global_queue_depth",
                    "Number of tasks waiting in the Tokio runtime's global queue.",
                )
                .expect("a valid gauge"),
                busy_seconds: prometheus::GaugeVec::new(
                    Opts::new(
                        "tokio_runtime_worker_busy_seconds",
                        "Time each Tokio worker thread has spent busy since the runtime started.",
                    ),
                    &["worker"],
                )
                .expect("a valid gauge"),
            },
            storage: storage::StorageFamilies::new(),
            health: HealthMetrics::new(),
            series: RwLock::default(),
            inflight_kinds,
        };
        for collector in metrics.storage.collectors() {
            metrics
                .registry
                .register(collector)
                .expect("unique metric names");
        }
        for collector in metrics.runtime.collectors() {
            metrics
                .registry
                .register(collector)
                .expect("unique metric names");
        }
        let collectors: [Box<dyn prometheus::core::Collector>; 38] = [
            Box::new(metrics.leader_election_master_status.clone()),
            Box::new(metrics.delegated_authn_requests.clone()),
            Box::new(metrics.delegated_authn_durations.clone()),
            Box::new(metrics.delegated_authz_requests.clone()),
            Box::new(metrics.delegated_authz_durations.clone()),
            Box::new(metrics.token_cache_requests.clone()),
            Box::new(metrics.watchers.clone()),
            Box::new(metrics.watch_events.clone()),
            Box::new(metrics.watch_event_sizes.clone()),
            Box::new(metrics.storage_objects.clone()),
            Box::new(metrics.resource_objects.clone()),
            Box::new(metrics.resource_sizes.clone()),
            Box::new(metrics.tls_handshake_errors.clone()),
            Box::new(metrics.requests.clone()),
            Box::new(metrics.durations.clone()),
            Box::new(metrics.sli_durations.clone()),
            Box::new(metrics.response_sizes.clone()),
            Box::new(metrics.inflight.clone()),
            Box::new(metrics.longrunning.clone()),
            Box::new(metrics.etcd_durations.clone()),
            Box::new(metrics.etcd_errors.clone()),
            Box::new(metrics.storage_durations.clone()),
            Box::new(metrics.storage_errors.clone()),
            Box::new(metrics.authentication_attempts.clone()),
            Box::new(metrics.authentication_durations.clone()),
            Box::new(metrics.authorization_attempts.clone()),
            Box::new(metrics.authorization_durations.clone()),
            Box::new(metrics.terminations.clone()),
            Box::new(metrics.admission_controller_durations.clone()),
            Box::new(metrics.admission_step_durations.clone()),
            Box::new(metrics.webhook_durations.clone()),
            Box::new(metrics.webhook_requests.clone()),
            Box::new(metrics.webhook_rejections.clone()),
            Box::new(metrics.webhook_fail_open.clone()),
            Box::new(metrics.validating_policy_checks.clone()),
            Box::new(metrics.validating_policy_durations.clone()),
            Box::new(metrics.mutating_policy_checks.clone()),
            Box::new(metrics.mutating_policy_durations.clone()),
        ];
        for collector in collectors {
            metrics
                .registry
                .register(collector)
                .expect("unique metric names");
        }
        // process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, ... from /proc.
        #[cfg(target_os = "linux")]
        let _ = metrics.registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ));
        metrics
    }

    /// A request starts: the in-flight gauge of its kind (watches are long-running and not counted, as upstream's
    /// max-in-flight filter leaves them out).
    pub fn started(&self, labels: &RequestLabels) -> InFlight {
        if labels.verb == "WATCH" {
            return InFlight(None);
        }
        let gauge = self.inflight_kinds[usize::from(!labels.read_only())].clone();
        gauge.inc();
        InFlight(Some(gauge))
    }

    /// A request is answered: its count, latency and (when known) response size.
    pub fn answered(
        &self,
        labels: &RequestLabels,
        code: u16,
        elapsed: Duration,
        size: Option<u64>,
    ) {
        let series = self.series(labels);
        let counter = {
            let mut by_code = series.requests.lock().unwrap_or_else(|e| e.into_inner());
            match by_code.iter().find(|(c, _)| *c == code) {
                Some((_, counter)) => counter.clone(),
                None => {
                    let code_text = code.to_string();
                    let mut values = labels.values().to_vec();
                    values.push(&code_text);
                    let counter = self.requests.with_label_values(&values);
                    by_code.push((code, counter.clone()));
                    counter
                }
            }
        };
        counter.inc();
        let seconds = elapsed.as_secs_f64();
        series.durations.observe(seconds);
        if let Some(sli) = &series.sli_durations {
            sli.observe(seconds);
        }
        if let Some(size) = size {
            series.response_sizes.observe(size as f64);
        }
    }

    /// The series of a label set, made on first use.
    fn series(&self, labels: &RequestLabels) -> Arc<Series> {
        if let Some(series) = self.series.read().ok().and_then(|m| m.get(labels).cloned()) {
            return series;
        }
        let values = labels.values();
        let series = Arc::new(Series {
            durations: self.durations.with_label_values(&values),
            sli_durations: (labels.verb != "WATCH")
                .then(|| self.sli_durations.with_label_values(&values)),
            response_sizes: self
                .response_sizes
                .with_label_values(&labels.values_without_dry_run()),
            requests: Mutex::default(),
        });
        let mut all = self.series.write().unwrap_or_else(|e| e.into_inner());
        all.entry(labels.clone()).or_insert(series).clone()
    }

    /// A storage call: its latency, and whether it failed (a missing key is an answer, not a failure).
    pub fn storage_call(
        &self,
        backend: &str,
        operation: &str,
        resource: &str,
        elapsed: Duration,
        failed: bool,
    ) {
        let seconds = elapsed.as_secs_f64();
        if backend == "etcd3" {
            let labels = [operation, resource];
            self.etcd_durations
                .with_label_values(&labels)
                .observe(seconds);
            if failed {
                self.etcd_errors.with_label_values(&labels).inc();
            }
        } else {
            let labels = [backend, operation, resource];
            self.storage_durations
                .with_label_values(&labels)
                .observe(seconds);
            if failed {
                self.storage_errors.with_label_values(&labels).inc();
            }
        }
    }

    /// A review sent to the core cluster, by its HTTP code (`<error>` when there was none).
    pub fn delegated_request(&self, kind: Delegated, code: &str, elapsed: Duration) {
        let (requests, durations) = match kind {
            Delegated::Authentication => (
                &self.delegated_authn_requests,
                &self.delegated_authn_durations,
            ),
            Delegated::Authorization => (
                &self.delegated_authz_requests,
                &self.delegated_authz_durations,
            ),
        };
        requests.with_label_values(&[code]).inc();
        durations
            .with_label_values(&[code])
            .observe(elapsed.as_secs_f64());
    }

    /// A token cache lookup.
    pub fn token_cache_lookup(&self, hit: bool) {
        let status = if hit { "hit" } else { "miss" };
        self.token_cache_requests.with_label_values(&[status]).inc();
    }

    /// An authentication: `success`, `failure` (no or bad credentials) or `error`.
    pub fn authenticated(&self, result: &str, elapsed: Duration) {
        attempt(
            &self.authentication_attempts,
            &self.authentication_durations,
            result,
            elapsed,
        );
    }

    /// An authorization: `allowed`, `denied`, `no-opinion` or `error`.
    pub fn authorized(&self, result: &str, elapsed: Duration) {
        attempt(
            &self.authorization_attempts,
            &self.authorization_durations,
            result,
            elapsed,
        );
    }

    /// A request the server cut short, by its labels.
    pub fn terminated(&self, labels: &RequestLabels, code: u16) {
        let code = code.to_string();
        let mut values = labels.values_without_dry_run().to_vec();
        values.push(&code);
        self.terminations.with_label_values(&values).inc();
    }

    /// One admission webhook call (`kind`: `admit` or `validating`, as upstream labels them): its duration and
    /// HTTP code (0 when the server failed before calling), whether it rejected the request, and why
    /// (`error_type`: `no_error` for the webhook's refusal, `calling_webhook_error`, `apiserver_internal_error`).
    #[allow(clippy::too_many_arguments)]
    pub fn admission_webhook(
        &self,
        name: &str,
        kind: &str,
        operation: &str,
        code: u16,
        rejected: bool,
        error_type: Option<&str>,
        elapsed: Duration,
    ) {
        let code = code.min(600).to_string();
        let rejected_label = if rejected { "true" } else { "false" };
        self.webhook_durations
            .with_label_values(&[name, operation, rejected_label, kind])
            .observe(elapsed.as_secs_f64());
        self.webhook_requests
            .with_label_values(&[&code, name, operation, rejected_label, kind])
            .inc();
        if rejected && let Some(error_type) = error_type {
            let rejection_code = if error_type == "no_error" {
                code.as_str()
            } else {
                "0"
            };
            self.webhook_rejections
                .with_label_values(&[error_type, name, operation, rejection_code, kind])
                .inc();
        }
    }

    /// One ValidatingAdmissionPolicy decision that was not a plain pass (upstream records no other):
    /// `action` `deny`, `warn`, `audit`, or `allow` for an error ignored under `failurePolicy: Ignore`.
    pub fn validating_policy_check(
        &self,
        policy: &str,
        binding: &str,
        error_type: &str,
        action: &str,
        elapsed: Duration,
    ) {
        let labels = [policy, binding, error_type, action];
        self.validating_policy_checks
            .with_label_values(&labels)
            .inc();
        self.validating_policy_durations
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// One MutatingAdmissionPolicy binding evaluated (`error_type` `no_error` when its mutations applied).
    pub fn mutating_policy_check(
        &self,
        policy: &str,
        binding: &str,
        error_type: &str,
        elapsed: Duration,
    ) {
        let labels = [policy, binding, error_type];
        self.mutating_policy_checks.with_label_values(&labels).inc();
        self.mutating_policy_durations
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// A failed webhook call ignored under `failurePolicy: Ignore`.
    pub fn admission_webhook_fail_open(&self, name: &str, kind: &str) {
        self.webhook_fail_open
            .with_label_values(&[name, kind])
            .inc();
    }

    /// One admission plugin's step (`admit` or `validate`) and the whole step, as upstream times them.
    pub fn admission_step(
        &self,
        plugin: Option<&str>,
        step: &str,
        operation: &str,
        rejected: bool,
        elapsed: Duration,
    ) {
        let rejected = if rejected { "true" } else { "false" };
        let seconds = elapsed.as_secs_f64();
        match plugin {
            Some(name) => self
                .admission_controller_durations
                .with_label_values(&[name, operation, rejected, step])
                .observe(seconds),
            None => self
                .admission_step_durations
                .with_label_values(&[operation, rejected, step])
                .observe(seconds),
        }
    }

    /// A watch of `group/version` `kind` is open until the returned guard drops; count each event sent with
    /// [`WatchSeries::sent`].
    pub fn watch_opened(&self, group: &str, version: &str, kind: &str) -> WatchSeries {
        let labels = [group, version, kind];
        let watchers = self.watchers.with_label_values(&labels);
        watchers.inc();
        WatchSeries {
            watchers,
            events: self.watch_events.with_label_values(&labels),
            sizes: self.watch_event_sizes.with_label_values(&labels),
        }
    }

    /// The object count and estimated size of one resource (`None`: the count failed, reported as -1).
    pub fn object_count(&self, group: &str, resource: &str, stats: Option<(u64, u64)>) {
        let (count, bytes) = match stats {
            Some((count, average)) => (
                i64::try_from(count).unwrap_or(i64::MAX),
                i64::try_from(count.saturating_mul(average)).unwrap_or(i64::MAX),
            ),
            None => (-1, -1),
        };
        let qualified = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        self.storage_objects
            .with_label_values(&[&qualified])
            .set(count);
        self.resource_objects
            .with_label_values(&[group, resource])
            .set(count);
        self.resource_sizes
            .with_label_values(&[group, resource])
            .set(bytes);
    }

    /// A watch stream opened: counted in `apiserver_longrunning_requests` until the returned guard drops.
    pub fn long_running(&self, labels: &RequestLabels) -> InFlight {
        let gauge = self
            .longrunning
            .with_label_values(&labels.values_without_dry_run());
        gauge.inc();
        InFlight(Some(gauge))
    }

    /// A LIST answered by a backend for `group/resource` (not by a watch cache): `evaluated` objects read and
    /// tested against the selectors, `returned` sent.
    pub fn storage_list(&self, group: &str, resource: &str, evaluated: u64, returned: u64) {
        self.storage
            .storage_list(group, resource, evaluated, returned);
    }

    /// The series of the watch cache of `group/resource`.
    pub fn watch_cache(&self, group: &str, resource: &str) -> CacheMetrics {
        self.storage.cache(group, resource)
    }

    /// The families of `/metrics/slis`, which the health endpoints record into.
    pub fn health(&self) -> &HealthMetrics {
        &self.health
    }

    /// The exposition of `/metrics`.
    pub fn response(&self, accept: Option<&str>) -> Response {
        self.runtime.update();
        exposition(&self.registry, accept)
    }
}

/// A registry's exposition: OpenMetrics when the client's `Accept` asks for it (as Prometheus does), else
/// `text/plain; version=0.0.4`.
fn exposition(registry: &Registry, accept: Option<&str>) -> Response {
    if accept.is_some_and(|a| a.contains(OPENMETRICS_TYPE)) {
        let mut response =
            (StatusCode::OK, openmetrics::encode(&registry.gather())).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
        );
        return response;
    }
    let mut body = Vec::new();
    let encoder = TextEncoder::new();
    if let Err(e) = encoder.encode(&registry.gather(), &mut body) {
        return (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response();
    }
    let mut response = (StatusCode::OK, body).into_response();
    if let Ok(value) = HeaderValue::from_str(encoder.format_type()) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The `/metrics` and `/metrics/slis` routes of a server.
pub fn router(metrics: Arc<Metrics>) -> axum::Router {
    fn accept(headers: &http::HeaderMap) -> Option<&str> {
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok())
    }
    let slis = metrics.clone();
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move |headers: http::HeaderMap| {
                std::future::ready(metrics.response(accept(&headers)))
            }),
        )
        .route(
            "/metrics/slis",
            axum::routing::get(move |headers: http::HeaderMap| {
                std::future::ready(slis.health().response(accept(&headers)))
            }),
        )
}
