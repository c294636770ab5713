//! The storage layer's families, by `{group, resource}` as kube-apiserver 1.36 exposes them: the watch cache's
//! (upstream `storage/cacher/metrics`: `apiserver_watch_cache_*`, `apiserver_cache_list_*`,
//! `apiserver_init_events_total`, `apiserver_terminated_watchers_total` and `watch_cache_capacity`, which upstream
//! registers without the `apiserver_` prefix) and the LIST counters of the backends (`apiserver_storage_list_*`).

use std::time::Duration;

use prometheus::core::Collector;
use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge, IntGaugeVec};

use super::{counter, gauge, histogram};

/// Upstream's `apiserver_watch_cache_read_wait_seconds` buckets.
const READ_WAIT_BUCKETS: &[f64] = &[
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0,
];
const GROUP_RESOURCE: &[&str] = &["group", "resource"];

pub(super) struct StorageFamilies {
    cache_lists: IntCounterVec,
    cache_list_fetched: IntCounterVec,
    cache_list_returned: IntCounterVec,
    init_events: IntCounterVec,
    events_received: IntCounterVec,
    events_dispatched: IntCounterVec,
    terminated_watchers: IntCounterVec,
    resource_version: IntGaugeVec,
    capacity: IntGaugeVec,
    initializations: IntCounterVec,
    read_wait: prometheus::HistogramVec,
    consistent_reads: IntCounterVec,
    storage_lists: IntCounterVec,
    storage_list_fetched: IntCounterVec,
    storage_list_evaluated: IntCounterVec,
    storage_list_returned: IntCounterVec,
}

impl StorageFamilies {
    pub(super) fn new() -> Self {
        StorageFamilies {
            cache_lists: counter(
                "apiserver_cache_list_total",
                "Number of LIST requests served from watch cache",
                &["group", "resource", "index"],
            ),
            cache_list_fetched: counter(
                "apiserver_cache_list_fetched_objects_total",
                "Number of objects read from watch cache in the course of serving a LIST request",
                &["group", "resource", "index"],
            ),
            cache_list_returned: counter(
                "apiserver_cache_list_returned_objects_total",
                "Number of objects returned for a LIST request from watch cache",
                GROUP_RESOURCE,
            ),
            init_events: counter(
                "apiserver_init_events_total",
                "Counter of init events processed in watch cache broken by resource type.",
                GROUP_RESOURCE,
            ),
            events_received: counter(
                "apiserver_watch_cache_events_received_total",
                "Counter of events received in watch cache broken by resource type.",
                GROUP_RESOURCE,
            ),
            events_dispatched: counter(
                "apiserver_watch_cache_events_dispatched_total",
                "Counter of events dispatched in watch cache broken by resource type.",
                GROUP_RESOURCE,
            ),
            terminated_watchers: counter(
                "apiserver_terminated_watchers_total",
                "Counter of watchers closed due to unresponsiveness broken by resource type.",
                GROUP_RESOURCE,
            ),
            resource_version: gauge(
                "apiserver_watch_cache_resource_version",
                "Current resource version of watch cache broken by resource type. This is truncated to the 15 least significant digits.",
                GROUP_RESOURCE,
            ),
            capacity: gauge(
                "watch_cache_capacity",
                "Total capacity of watch cache broken by resource type.",
                GROUP_RESOURCE,
            ),
            initializations: counter(
                "apiserver_watch_cache_initializations_total",
                "Counter of watch cache initializations broken by resource type.",
                GROUP_RESOURCE,
            ),
            read_wait: histogram(
                "apiserver_watch_cache_read_wait_seconds",
                "Histogram of time spent waiting for a watch cache to become fresh.",
                READ_WAIT_BUCKETS,
                GROUP_RESOURCE,
            ),
            consistent_reads: counter(
                "apiserver_watch_cache_consistent_read_total",
                "Counter for consistent reads from cache.",
                &["group", "resource", "success", "fallback"],
            ),
            storage_lists: counter(
                "apiserver_storage_list_total",
                "Number of LIST requests served from storage",
                GROUP_RESOURCE,
            ),
            storage_list_fetched: counter(
                "apiserver_storage_list_fetched_objects_total",
                "Number of objects read from storage in the course of serving a LIST request",
                GROUP_RESOURCE,
            ),
            storage_list_evaluated: counter(
                "apiserver_storage_list_evaluated_objects_total",
                "Number of objects tested in the course of serving a LIST request from storage",
                GROUP_RESOURCE,
            ),
            storage_list_returned: counter(
                "apiserver_storage_list_returned_objects_total",
                "Number of objects returned for a LIST request from storage",
                GROUP_RESOURCE,
            ),
        }
    }

    pub(super) fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.cache_lists.clone()),
            Box::new(self.cache_list_fetched.clone()),
            Box::new(self.cache_list_returned.clone()),
            Box::new(self.init_events.clone()),
            Box::new(self.events_received.clone()),
            Box::new(self.events_dispatched.clone()),
            Box::new(self.terminated_watchers.clone()),
            Box::new(self.resource_version.clone()),
            Box::new(self.capacity.clone()),
            Box::new(self.initializations.clone()),
            Box::new(self.read_wait.clone()),
            Box::new(self.consistent_reads.clone()),
            Box::new(self.storage_lists.clone()),
            Box::new(self.storage_list_fetched.clone()),
            Box::new(self.storage_list_evaluated.clone()),
            Box::new(self.storage_list_returned.clone()),
        ]
    }

    /// A LIST answered by a backend for `group/resource`: `evaluated` objects read and tested, `returned` sent.
    pub(super) fn storage_list(&self, group: &str, resource: &str, evaluated: u64, returned: u64) {
        let labels = [group, resource];
        self.storage_lists.with_label_values(&labels).inc();
        // Our backends test every object they read, so fetched and evaluated are the same count.
        self.storage_list_fetched
            .with_label_values(&labels)
            .inc_by(evaluated);
        self.storage_list_evaluated
            .with_label_values(&labels)
            .inc_by(evaluated);
        self.storage_list_returned
            .with_label_values(&labels)
            .inc_by(returned);
    }

    pub(super) fn cache(&self, group: &str, resource: &str) -> CacheMetrics {
        let labels = [group, resource];
        // Our cache has no indexes: upstream's `index` label is then empty.
        let indexed = [group, resource, ""];
        CacheMetrics {
            lists: self.cache_lists.with_label_values(&indexed),
            list_fetched: self.cache_list_fetched.with_label_values(&indexed),
            list_returned: self.cache_list_returned.with_label_values(&labels),
            init_events: self.init_events.with_label_values(&labels),
            events_received: self.events_received.with_label_values(&labels),
            events_dispatched: self.events_dispatched.with_label_values(&labels),
            terminated_watchers: self.terminated_watchers.with_label_values(&labels),
            resource_version: self.resource_version.with_label_values(&labels),
            capacity: self.capacity.with_label_values(&labels),
            initializations: self.initializations.with_label_values(&labels),
            read_wait: self.read_wait.with_label_values(&labels),
            consistent_served: self
                .consistent_reads
                .with_label_values(&[group, resource, "true", "false"]),
            consistent_fallback: self
                .consistent_reads
                .with_label_values(&[group, resource, "false", "true"]),
        }
    }
}

/// The series of one resource's watch cache, resolved once so that the cache's hot paths never look up labels.
#[derive(Clone)]
pub struct CacheMetrics {
    lists: IntCounter,
    list_fetched: IntCounter,
    list_returned: IntCounter,
    init_events: IntCounter,
    events_received: IntCounter,
    events_dispatched: IntCounter,
    terminated_watchers: IntCounter,
    resource_version: IntGauge,
    capacity: IntGauge,
    initializations: IntCounter,
    read_wait: Histogram,
    consistent_served: IntCounter,
    consistent_fallback: IntCounter,
}

impl std::fmt::Debug for CacheMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheMetrics").finish_non_exhaustive()
    }
}

/// Upstream truncates the gauge to 15 digits so that it stays exact in a float.
fn truncated(revision: u64) -> i64 {
    (revision % 1_000_000_000_000_000) as i64
}

impl CacheMetrics {
    /// The cache keeps at most `changes` changes for watches from the past.
    pub fn capacity(&self, changes: usize) {
        self.capacity
            .set(i64::try_from(changes).unwrap_or(i64::MAX));
    }

    /// One object of the initial list (or of the backend watch's initial events).
    pub fn init_events(&self, objects: usize) {
        self.init_events.inc_by(objects as u64);
    }

    /// The cache holds the whole resource at `revision`.
    pub fn initialized(&self, revision: u64) {
        self.initializations.inc();
        self.revision(revision);
    }

    /// The cache moved to `revision`.
    pub fn revision(&self, revision: u64) {
        self.resource_version.set(truncated(revision));
    }

    /// A change came from the backend and was handed to the watchers.
    pub fn event(&self) {
        self.events_received.inc();
        self.events_dispatched.inc();
    }

    /// Watchers cut off for falling too far behind.
    pub fn terminated(&self, watchers: usize) {
        self.terminated_watchers.inc_by(watchers as u64);
    }

    /// A read waited this long for the cache to be fresh enough.
    pub fn read_waited(&self, waited: Duration) {
        self.read_wait.observe(waited.as_secs_f64());
    }

    /// A consistent read was served from memory (`true`) or fell back to the backend.
    pub fn consistent_read(&self, served: bool) {
        if served {
            self.consistent_served.inc();
        } else {
            self.consistent_fallback.inc();
        }
    }

    /// A LIST served from memory: `fetched` objects read, `returned` sent.
    pub fn listed(&self, fetched: usize, returned: usize) {
        self.lists.inc();
        self.list_fetched.inc_by(fetched as u64);
        self.list_returned.inc_by(returned as u64);
    }
}
