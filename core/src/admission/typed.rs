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

    /// Refuses the object (with `attributes.forbidden(...)`, usually) or lets it pass. `old` is the stored object
    /// an update replaces (upstream's `Attributes.GetOldObject()`), `None` on create: a rule may look only at what
    /// changed. Subresource writes (status, scale) are not checked.
    async fn check(
        &self,
        attributes: &Attributes,
        object: &T,
        old: Option<&T>,
    ) -> Result<(), ApiError>;
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
        old: Option<&AnyObject>,
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
        let old = old.and_then(|o| o.downcast_ref::<T>());
        self.rule.check(attributes, object, old).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::User;
    use crate::meta::ObjectMeta;
    use crate::runtime::{PrinterColumn, Scope};

    /// A hub written by hand, as `#[derive(Hub)]` would.
    #[derive(Clone, Debug, Default, PartialEq)]
    struct Shelf {
        metadata: ObjectMeta,
        location: String,
    }

    impl Resource for Shelf {
        const GROUP: &'static str = "example.com";
        const KIND: &'static str = "Shelf";
        const PLURAL: &'static str = "shelves";
        const SINGULAR: &'static str = "shelf";
        const SCOPE: Scope = Scope::Cluster;
        const SHORT_NAMES: &'static [&'static str] = &[];
        const CATEGORIES: &'static [&'static str] = &[];
        const PRINTER_COLUMNS: &'static [PrinterColumn] = &[];
        const SUBRESOURCES: &'static [&'static str] = &[];
        const SELECTABLE_FIELDS: &'static [&'static str] = &[];
        fn metadata(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn metadata_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    /// Shelves may not move: an update that changes the location is refused; anything else passes.
    struct Fixed;

    #[async_trait]
    impl KindCheck<Shelf> for Fixed {
        async fn check(
            &self,
            attributes: &Attributes,
            shelf: &Shelf,
            old: Option<&Shelf>,
        ) -> Result<(), ApiError> {
            match old {
                Some(old) if old.location != shelf.location => Err(attributes
                    .forbidden(format!("moved from {} to {}", old.location, shelf.location))),
                _ => Ok(()),
            }
        }
    }

    fn shelf(location: &str) -> Shelf {
        Shelf {
            location: location.into(),
            ..Shelf::default()
        }
    }

    #[tokio::test]
    async fn updates_are_checked_against_the_old_object() {
        let plugin = check(Fixed);
        let attributes = |operation| {
            Attributes::new::<Shelf>(operation, "v1", "", "a", false, User::anonymous())
        };
        let (here, there) = (shelf("here"), shelf("there"));
        let update = attributes(Operation::Update);
        let moved = plugin
            .validate(
                &update,
                Some(&there as &AnyObject),
                Some(&here as &AnyObject),
            )
            .await
            .unwrap_err();
        assert_eq!(moved.code, 403);
        assert!(
            moved.message.ends_with("moved from here to there"),
            "{}",
            moved.message
        );
        let relabelled = Shelf {
            metadata: ObjectMeta {
                labels: [("x".to_string(), "y".to_string())].into(),
                ..ObjectMeta::default()
            },
            ..here.clone()
        };
        plugin
            .validate(
                &update,
                Some(&relabelled as &AnyObject),
                Some(&here as &AnyObject),
            )
            .await
            .unwrap();
        // A create has no old object.
        plugin
            .validate(
                &attributes(Operation::Create),
                Some(&there as &AnyObject),
                None,
            )
            .await
            .unwrap();
    }
}
