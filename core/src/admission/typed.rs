//! A validating plugin about one kind, without the downcasting and readiness checks every such plugin repeats:
//! implement [`KindCheck`] for the hub type and register [`check`] of it.

use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

use super::chain::{AnyObject, Attributes, Operation, Plugin};
use crate::registry::ApiError;
use crate::runtime::Resource;

/// A rule about objects of `T` on their way into storage.
#[async_trait]
pub trait KindCheck<T: Resource>: Send + Sync + 'static {
    /// The operations it sees (default: create and update).
    fn operations(&self) -> &'static [Operation] {
        &[Operation::Create, Operation::Update]
    }

    /// Whether the plugin may decide yet (e.g. its listers have loaded); until then requests are refused with
    /// upstream's "not yet ready to handle request".
    async fn ready(&self) -> bool {
        true
    }

    /// Refuses the object (with `attributes.forbidden(...)`, usually) or lets it pass. Subresource writes (status,
    /// scale) are not checked.
    async fn check(&self, attributes: &Attributes, object: &T) -> Result<(), ApiError>;
}

/// The plugin that runs `rule` on objects of `T` in the validating phase.
pub fn check<T: Resource>(rule: impl KindCheck<T>) -> Arc<dyn Plugin> {
    Arc::new(Checked {
        rule,
        kind: PhantomData::<fn() -> T>,
    })
}

struct Checked<T, R> {
    rule: R,
    kind: PhantomData<fn() -> T>,
}

#[async_trait]
impl<T: Resource, R: KindCheck<T>> Plugin for Checked<T, R> {
    fn handles(&self, operation: Operation) -> bool {
        self.rule.operations().contains(&operation)
    }

    async fn validate(
        &self,
        attributes: &Attributes,
        object: Option<&AnyObject>,
        _old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        let Some(object) = object.and_then(|o| o.downcast_ref::<T>()) else {
            return Ok(());
        };
        if !attributes.subresource.is_empty() {
            return Ok(());
        }
        if !self.rule.ready().await {
            return Err(attributes.forbidden("not yet ready to handle request"));
        }
        self.rule.check(attributes, object).await
    }
}
