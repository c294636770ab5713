//! Auditing as upstream does it: a policy (`--audit-policy-file`) picks a level per request, and
//! `audit.k8s.io/v1` `Event`s for its stages go to a log file (`--audit-log-path`) and/or a webhook
//! (`--audit-webhook-config-file`). The server's audit filter ([`crate::server::filters::audit`]) builds the
//! events; [`AuditContext`] is how the filters after it (impersonation, authorization) add to them.
//!
//! Without a policy file nothing is audited, as upstream.

mod backend;
mod event;
mod policy;

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

#[cfg(feature = "cluster")]
pub use backend::WebhookSink;
pub use backend::{BatchConfig, Batched, LogSink, Rotation, Sink};
pub use event::{Event, ObjectReference, ResponseStatus, UserInfo, strip_managed_fields};
pub use policy::{GroupResources, Level, Policy, PolicyRule, RequestAuditConfig, Stage};

use crate::auth::{Attributes, User};
use crate::meta::{MicroTime, parse_duration};

/// Annotation keys authorization sets on every audited request.
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The authorizer's reason.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// The request's audit ID (its `Audit-ID`, or a new UUID), in the request extensions; the server's outermost
/// filter sets it, and handlers, logs and traces read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditId(pub String);

/// upstream's `AuditOptions`: the policy, the log backend and the webhook backend.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct AuditOptions {
    /// Path to the file that defines the audit policy configuration (audit.k8s.io/v1 Policy). Without it,
    /// nothing is audited.
    #[arg(long = "audit-policy-file")]
    pub policy_file: Option<PathBuf>,

    /// If set, all requests coming to the apiserver will be logged to this file. '-' means standard out.
    #[arg(long = "audit-log-path")]
    pub log_path: Option<PathBuf>,
    /// The maximum number of days to retain old audit log files based on the timestamp encoded in their
    /// filename. 0 keeps them whatever their age.
    #[arg(long = "audit-log-maxage", default_value_t = 366)]
    pub log_max_age: u64,
    /// The maximum number of old audit log files to retain. Setting a value of 0 will mean there's no
    /// restriction on the number of files.
    #[arg(long = "audit-log-maxbackup", default_value_t = 100)]
    pub log_max_backup: usize,
    /// The maximum size in megabytes of the audit log file before it gets rotated. 0 disables rotation.
    #[arg(long = "audit-log-maxsize", default_value_t = 100)]
    pub log_max_size: u64,
    /// Format of saved audits. Only "json" (one Event per line) is supported.
    #[arg(long = "audit-log-format", default_value = "json", value_parser = ["json"])]
    pub log_format: String,
    /// API group and version used for serializing audit events written to log.
    #[arg(long = "audit-log-version", default_value = "audit.k8s.io/v1", value_parser = ["audit.k8s.io/v1"])]
    pub log_version: String,
    /// Strategy for sending audit events. Blocking indicates sending events should block server responses.
    /// Batch causes the backend to buffer and write events asynchronously. blocking-strict is blocking, and a
    /// failure to write the RequestReceived event fails the request.
    #[arg(long = "audit-log-mode", default_value = "blocking", value_parser = ["blocking", "blocking-strict", "batch"])]
    pub log_mode: String,
    /// The size of the buffer to store events before batching and writing. Only used in batch mode.
    #[arg(long = "audit-log-batch-buffer-size", default_value_t = 10000)]
    pub log_batch_buffer_size: usize,
    /// The maximum size of a batch. Only used in batch mode.
    #[arg(long = "audit-log-batch-max-size", default_value_t = 1)]
    pub log_batch_max_size: usize,
    /// The amount of time to wait before force writing the batch that hadn't reached the max size. Only used
    /// in batch mode.
    #[arg(long = "audit-log-batch-max-wait", default_value = "0s", value_parser = parse_duration)]
    pub log_batch_max_wait: Duration,

    /// Path to a kubeconfig formatted file that defines the audit webhook configuration.
    #[arg(long = "audit-webhook-config-file")]
    pub webhook_config_file: Option<PathBuf>,
    /// Strategy for sending audit events to the webhook. Only "batch" (buffered, asynchronous) is supported.
    #[arg(long = "audit-webhook-mode", default_value = "batch", value_parser = ["batch"])]
    pub webhook_mode: String,
    /// The size of the buffer to store events before batching and writing.
    #[arg(long = "audit-webhook-batch-buffer-size", default_value_t = 10000)]
    pub webhook_batch_buffer_size: usize,
    /// The maximum size of a batch.
    #[arg(long = "audit-webhook-batch-max-size", default_value_t = 400)]
    pub webhook_batch_max_size: usize,
    /// The amount of time to wait before force writing the batch that hadn't reached the max size.
    #[arg(long = "audit-webhook-batch-max-wait", default_value = "30s", value_parser = parse_duration)]
    pub webhook_batch_max_wait: Duration,
    /// The amount of time to wait before retrying the first failed request.
    #[arg(long = "audit-webhook-initial-backoff", default_value = "10s", value_parser = parse_duration)]
    pub webhook_initial_backoff: Duration,
    /// API group and version used for serializing audit events written to webhook.
    #[arg(long = "audit-webhook-version", default_value = "audit.k8s.io/v1", value_parser = ["audit.k8s.io/v1"])]
    pub webhook_version: String,
}

/// The audit configuration could not be used.
#[derive(Debug, thiserror::Error)]
#[error("audit: {0}")]
pub struct AuditError(pub String);

impl AuditOptions {
    /// The auditor these flags describe, or `None` when there is no policy or no backend.
    pub async fn auditor(&self) -> Result<Option<Arc<Auditor>>, AuditError> {
        let Some(policy_file) = &self.policy_file else {
            if self.log_path.is_some() || self.webhook_config_file.is_some() {
                tracing::warn!(
                    "an audit backend is configured without --audit-policy-file: nothing is audited"
                );
            }
            return Ok(None);
        };
        let policy = Policy::load(policy_file).map_err(AuditError)?;
        let mut backends = Vec::new();
        if let Some(path) = &self.log_path {
            let sink = LogSink::open(
                path,
                Rotation {
                    max_size_mb: self.log_max_size,
                    max_age_days: self.log_max_age,
                    max_backups: self.log_max_backup,
                },
            )
            .map_err(AuditError)?;
            backends.push(match self.log_mode.as_str() {
                "batch" => Backend::Batch(Batched::start(
                    Arc::new(sink),
                    BatchConfig {
                        buffer_size: self.log_batch_buffer_size,
                        max_size: self.log_batch_max_size,
                        max_wait: self.log_batch_max_wait,
                    },
                )),
                mode => Backend::Blocking {
                    log: sink,
                    strict: mode == "blocking-strict",
                },
            });
        }
        // The webhook posts through kube-rs's client, from a kubeconfig: the `cluster` feature.
        #[cfg(not(feature = "cluster"))]
        if let Some(path) = &self.webhook_config_file {
            return Err(AuditError(format!(
                "--audit-webhook-config-file {}: this server was built without the audit webhook (cargo feature \
                 `cluster`)",
                path.display()
            )));
        }
        #[cfg(feature = "cluster")]
        if let Some(path) = &self.webhook_config_file {
            let sink = WebhookSink::new(path, self.webhook_initial_backoff)
                .await
                .map_err(AuditError)?;
            backends.push(Backend::Batch(Batched::start(
                Arc::new(sink),
                BatchConfig {
                    buffer_size: self.webhook_batch_buffer_size,
                    max_size: self.webhook_batch_max_size,
                    max_wait: self.webhook_batch_max_wait,
                },
            )));
        }
        if backends.is_empty() {
            tracing::warn!(
                "--audit-policy-file is set but no audit backend is: nothing is audited"
            );
            return Ok(None);
        }
        Ok(Some(Arc::new(Auditor { policy, backends })))
    }
}

enum Backend {
    /// Written in the request's path.
    Blocking { log: LogSink, strict: bool },
    /// Queued for a task that writes batches.
    Batch(Batched),
}

/// The policy and the backends: what the audit filter uses.
pub struct Auditor {
    policy: Policy,
    backends: Vec<Backend>,
}

impl Auditor {
    /// An auditor with a policy and backends made elsewhere (the options build the usual ones).
    pub fn new(policy: Policy, sinks: Vec<Arc<dyn Sink>>, batch: BatchConfig) -> Auditor {
        Auditor {
            policy,
            backends: sinks
                .into_iter()
                .map(|sink| Backend::Batch(Batched::start(sink, batch)))
                .collect(),
        }
    }

    /// What the policy says about a request.
    pub fn evaluate(&self, request: &Attributes) -> RequestAuditConfig {
        self.policy.evaluate(request)
    }

    /// Hands an event to every backend. An error means a `blocking-strict` backend could not write it.
    ///
    /// The event is encoded once, into this thread's buffer: a blocking log writes it from there (one `write`
    /// call, so the line is in the file when this returns), batching backends get their own copy.
    pub fn process(&self, event: &Event) -> Result<(), String> {
        thread_local! {
            static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
        }
        /// A buffer that grew past this (a large request or response object) is not kept.
        const KEPT_CAPACITY: usize = 64 * 1024;
        LINE.with(|line| match line.try_borrow_mut() {
            Ok(mut line) => {
                line.clear();
                let result = self.deliver(event, &mut line);
                if line.capacity() > KEPT_CAPACITY {
                    *line = Vec::new();
                }
                result
            }
            // Only if writing an event led to another one on this thread.
            Err(_) => self.deliver(event, &mut Vec::new()),
        })
    }

    fn deliver(&self, event: &Event, line: &mut Vec<u8>) -> Result<(), String> {
        event.write_json(line);
        line.push(b'\n');
        let mut result = Ok(());
        for backend in &self.backends {
            match backend {
                Backend::Blocking { log, strict } => {
                    if let Err(e) = log.write_lines(line) {
                        tracing::error!(
                            "Error in audit plugin 'log' affecting 1 audit events: {e}"
                        );
                        if *strict {
                            result = Err(e);
                        }
                    }
                }
                Backend::Batch(batched) => {
                    batched.enqueue(Bytes::copy_from_slice(line));
                }
            }
        }
        result
    }

    /// Writes out what is queued; called once the server has drained its requests.
    pub async fn shutdown(&self) {
        for backend in &self.backends {
            if let Backend::Batch(batched) = backend {
                batched.shutdown().await;
            }
        }
    }
}

/// One audited request's event as it is being built, shared by the filters that add to it (in the request's
/// extensions; absent when the request is not audited).
#[derive(Clone)]
pub struct AuditContext(Arc<Mutex<RequestAudit>>);

impl std::fmt::Debug for AuditContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditContext")
            .field("level", &self.level())
            .finish_non_exhaustive()
    }
}

struct RequestAudit {
    auditor: Arc<Auditor>,
    config: RequestAuditConfig,
    event: Event,
}

impl AuditContext {
    /// Starts the event of a request the policy audits at `config.level`.
    pub fn new(auditor: Arc<Auditor>, config: RequestAuditConfig, mut event: Event) -> Self {
        event.level = config.level;
        AuditContext(Arc::new(Mutex::new(RequestAudit {
            auditor,
            config,
            event,
        })))
    }

    fn with<T>(&self, f: impl FnOnce(&mut RequestAudit) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The level of the request.
    pub fn level(&self) -> Level {
        self.with(|r| r.config.level)
    }

    /// Whether request and response bodies lose `metadata.managedFields`.
    pub fn omits_managed_fields(&self) -> bool {
        self.with(|r| r.config.omit_managed_fields)
    }

    /// Adds an annotation (a key set twice keeps its first value, as upstream).
    pub fn annotate(&self, key: &str, value: &str) {
        self.with(|r| {
            r.event
                .annotations
                .entry(key.to_string())
                .or_insert_with(|| value.to_string());
        });
    }

    /// Records whom the request impersonates.
    pub fn impersonated(&self, user: &User) {
        self.with(|r| r.event.impersonated_user = Some(UserInfo::from(user)));
    }

    /// Changes the event (e.g. to complete its object reference or set the response status).
    pub fn update(&self, f: impl FnOnce(&mut Event)) {
        self.with(|r| f(&mut r.event));
    }

    /// Writes the event for `stage` unless the policy omits it. An error means a `blocking-strict` backend
    /// could not write it.
    pub fn emit(&self, stage: Stage) -> Result<(), String> {
        self.with(|r| {
            if !r.config.writes(stage) {
                return Ok(());
            }
            r.event.stage = stage;
            r.event.stage_timestamp = MicroTime::now();
            r.auditor.process(&r.event)
        })
    }
}
