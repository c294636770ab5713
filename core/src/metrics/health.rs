//! The component SLIs of `/metrics/slis` (upstream `component-base/metrics/prometheus/slis`): the result of each
//! health check each time `/healthz`, `/livez` or `/readyz` runs it, in a registry of their own as upstream keeps them.

use axum::response::Response;
use prometheus::{IntCounterVec, IntGaugeVec, Registry};

use super::{counter, gauge};

/// `kubernetes_healthcheck{name,type}` (1 healthy, 0 not) and `kubernetes_healthchecks_total{name,status,type}`.
#[derive(Clone)]
pub struct HealthMetrics {
    registry: Registry,
    last: IntGaugeVec,
    results: IntCounterVec,
}

impl std::fmt::Debug for HealthMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthMetrics").finish_non_exhaustive()
    }
}

impl HealthMetrics {
    pub(super) fn new() -> Self {
        let last = gauge(
            "kubernetes_healthcheck",
            "This metric records the result of a single healthcheck.",
            &["name", "type"],
        );
        let results = counter(
            "kubernetes_healthchecks_total",
            "This metric records the results of all healthcheck.",
            &["name", "status", "type"],
        );
        let registry = Registry::new();
        for collector in [
            Box::new(last.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(results.clone()),
        ] {
            registry.register(collector).expect("unique metric names");
        }
        HealthMetrics {
            registry,
            last,
            results,
        }
    }

    /// Check `name` of `endpoint` (`healthz`, `livez`, `readyz`) ran.
    pub fn checked(&self, endpoint: &str, name: &str, healthy: bool) {
        let (value, status) = if healthy {
            (1, "success")
        } else {
            (0, "error")
        };
        self.last.with_label_values(&[name, endpoint]).set(value);
        self.results
            .with_label_values(&[name, status, endpoint])
            .inc();
    }

    pub(super) fn response(&self, accept: Option<&str>) -> Response {
        super::exposition(&self.registry, accept)
    }
}
