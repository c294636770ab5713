//! Progress of a run on stderr, so that a person watching a long run knows where it is: a bar for the phase that
//! is running (on a terminal), and one line per finished phase with its throughput and p99 (always; the table
//! comes at the end, on stdout).

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use crate::report::PhaseResult;

/// The progress of one row of the report (a backend under one authentication).
pub struct Progress {
    row: String,
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    /// Progress of the row named `row`.
    pub fn new(row: &str) -> Self {
        Progress {
            row: row.to_string(),
            bar: Mutex::new(None),
        }
    }

    /// A phase of `len` steps (requests, or events written) begins; its bar replaces the last one.
    pub fn start(&self, phase: &str, len: usize) {
        let bar = ProgressBar::new(len as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix} {msg:<28} [{bar:30}] {pos}/{len} {per_sec:>12} {elapsed:>4}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_prefix(format!("[{}]", self.row));
        bar.set_message(phase.to_string());
        bar.enable_steady_tick(Duration::from_millis(200));
        if let Some(old) = self
            .bar
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(bar)
        {
            old.finish_and_clear();
        }
    }

    /// One step of the running phase is done.
    pub fn step(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            bar.inc(1);
        }
    }

    /// A phase has ended: its bar goes, its summary line stays.
    pub fn finish(&self, result: &PhaseResult) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|e| e.into_inner()).take() {
            bar.finish_and_clear();
        }
        let errors: usize = result.errors.values().sum();
        eprintln!(
            "[{}] {}: {} in {:.1} s, {:.0}/s, p50 {:.2} ms, p99 {:.2} ms{}",
            self.row,
            result.name,
            result.requests,
            result.seconds,
            result.per_second,
            result.p50_ms,
            result.p99_ms,
            if errors > 0 {
                format!(", {errors} errors")
            } else {
                String::new()
            }
        );
    }
}
