//! Go's text forms that Kubernetes' messages, flags and schemas are written in, implemented once for every crate
//! of the workspace: [`quote`] (`strconv.Quote`, which is also what `%q` and `%#v` print for a string) and
//! [`parse_duration`] / [`format_duration`] (`time.ParseDuration` and `time.Duration.String`, the grammar of every
//! duration flag and of `metav1.Duration`).
//!
//! It is a crate of its own, without dependencies on the rest of the workspace, because both the CEL crate
//! (`format: duration` values) and the framework (flags, messages) need it, and the CEL crate sits below the
//! framework.

mod duration;
mod quote;

pub use duration::{DurationError, format_duration, parse_duration};
pub use quote::{is_print, quote};
