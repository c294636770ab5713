//! Reinvocation of the mutating chain (upstream's `reinvoker` and `ReinvocationContext`): when a webhook or a
//! mutating policy changed the object, the whole mutating chain runs once more, so that in-tree plugins see what
//! the webhooks did; in that second pass a webhook or policy with `reinvocationPolicy: IfNeeded` runs again when
//! the object changed after it last ran, and the others do not.

#[cfg(feature = "cluster")]
use std::collections::{BTreeSet, HashMap};
#[cfg(feature = "cluster")]
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

#[cfg(feature = "cluster")]
use serde_json::Value;

#[cfg(feature = "cluster")]
use super::{AnyObject, WireCodec};
#[cfg(feature = "cluster")]
use crate::registry::ApiError;

/// The state of one request's mutating chain across its passes; shared by the clones of its
/// [`Attributes`](super::Attributes).
#[derive(Debug, Default)]
pub struct Reinvocation {
    is_reinvoke: AtomicBool,
    should_reinvoke: AtomicBool,
    /// The webhooks' and policies' state (the `cluster` feature's plugins).
    #[cfg(feature = "cluster")]
    plugins: Mutex<HashMap<&'static str, Reinvocable>>,
}

/// What one plugin (the webhooks, the policies) remembers between passes, by the key of each webhook or binding.
#[cfg(feature = "cluster")]
#[derive(Debug, Default)]
pub(crate) struct Reinvocable {
    /// The object (as JSON in the first served version) when the plugin last finished.
    last_output: Option<Value>,
    /// `IfNeeded` webhooks or policies that ran since the object last changed.
    previously_invoked: BTreeSet<String>,
    /// Those to run again in the second pass.
    reinvoke: BTreeSet<String>,
}

#[cfg(feature = "cluster")]
impl Reinvocable {
    /// The object changed: every `IfNeeded` one that ran before must run again.
    pub fn require_reinvoking_previously_invoked(&mut self) {
        let invoked = std::mem::take(&mut self.previously_invoked);
        self.reinvoke.extend(invoked);
    }

    pub fn invoked(&mut self, key: &str) {
        self.previously_invoked.insert(key.to_string());
    }

    pub fn should_reinvoke(&self, key: &str) -> bool {
        self.reinvoke.contains(key)
    }

    /// Whether `object` differs from what the plugin left (in-tree plugins changed it in the second pass).
    pub fn changed_since_last_output(&self, object: &Value) -> bool {
        self.last_output.as_ref().is_some_and(|last| last != object)
    }

    pub fn set_last_output(&mut self, object: Value) {
        self.last_output = Some(object);
    }
}

impl Reinvocation {
    /// Whether this is the second pass.
    pub fn is_reinvoke(&self) -> bool {
        self.is_reinvoke.load(Ordering::Acquire)
    }

    /// A webhook or policy changed the object: the chain runs once more.
    pub fn set_should_reinvoke(&self) {
        self.should_reinvoke.store(true, Ordering::Release);
    }

    /// Starts the second pass when one was asked for and none ran yet; `true` when it starts.
    pub(crate) fn start_reinvoke(&self) -> bool {
        self.should_reinvoke.load(Ordering::Acquire)
            && !self.is_reinvoke.swap(true, Ordering::AcqRel)
    }

    /// At the start of `plugin`'s pass: in the second pass, when the object changed since the plugin last finished
    /// (in-tree plugins changed it), every `IfNeeded` one it ran before runs again.
    #[cfg(feature = "cluster")]
    pub(crate) fn begin(
        &self,
        plugin: &'static str,
        wire: &dyn WireCodec,
        object: &AnyObject,
    ) -> Result<(), ApiError> {
        if !self.is_reinvoke() {
            return Ok(());
        }
        let now = compared_form(wire, object)?;
        self.with(plugin, |r| {
            if r.changed_since_last_output(&now) {
                r.require_reinvoking_previously_invoked();
            }
        });
        Ok(())
    }

    /// At the end of `plugin`'s pass: the object as the plugin left it.
    #[cfg(feature = "cluster")]
    pub(crate) fn end(
        &self,
        plugin: &'static str,
        wire: &dyn WireCodec,
        object: &AnyObject,
    ) -> Result<(), ApiError> {
        let last = compared_form(wire, object)?;
        self.with(plugin, |r| r.set_last_output(last));
        Ok(())
    }

    /// The state `plugin` keeps between passes.
    #[cfg(feature = "cluster")]
    pub(crate) fn with<R>(&self, plugin: &'static str, f: impl FnOnce(&mut Reinvocable) -> R) -> R {
        let mut plugins = self.plugins.lock().unwrap_or_else(|p| p.into_inner());
        f(plugins.entry(plugin).or_default())
    }
}

/// The object as compared between passes: in the first served version.
#[cfg(feature = "cluster")]
fn compared_form(wire: &dyn WireCodec, object: &AnyObject) -> Result<Value, ApiError> {
    match wire.versions().first() {
        Some(version) => wire.encode(object, version),
        None => Ok(Value::Null),
    }
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;

    #[test]
    fn a_change_reinvokes_what_ran_before_it_once() {
        let reinvocation = Reinvocation::default();
        assert!(!reinvocation.start_reinvoke(), "nothing changed");
        reinvocation.with("w", |r| {
            r.invoked("a");
            r.require_reinvoking_previously_invoked();
            r.invoked("b");
        });
        reinvocation.set_should_reinvoke();
        assert!(reinvocation.start_reinvoke());
        assert!(reinvocation.is_reinvoke());
        assert!(!reinvocation.start_reinvoke(), "one second pass only");
        reinvocation.with("w", |r| {
            assert!(r.should_reinvoke("a"));
            assert!(!r.should_reinvoke("b"), "b ran after the change");
            r.set_last_output(serde_json::json!({"x": 1}));
            assert!(r.changed_since_last_output(&serde_json::json!({"x": 2})));
            assert!(!r.changed_since_last_output(&serde_json::json!({"x": 1})));
        });
    }
}
