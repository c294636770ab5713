//! The `BanFlunder` admission plugin: a flunder may not take a name that any fischer disallows.

use std::sync::Arc;

use apiserver::admission::{
    AnyObject, Attributes, Initializer, Lister, Operation, Plugin, PluginError,
};
use apiserver::async_trait;
use apiserver::registry::ApiError;

use crate::wardle::{Fischer, Flunder};

/// The plugin's name in `--enable-admission-plugins` / `--disable-admission-plugins`.
pub const BAN_FLUNDER: &str = "BanFlunder";

/// Upstream's refusal.
const BANNED: &str = "this name may not be used, please change the resource name";

/// Refuses to create flunders whose name a fischer lists in `disallowedFlunders`, reading fischers from the
/// server's own watch cache as upstream reads them from its informer.
pub struct BanFlunder {
    fischers: Lister<Fischer>,
}

impl BanFlunder {
    /// Builds the plugin from the initializer's fischer lister.
    pub fn build(initializer: &Initializer) -> Result<Arc<dyn Plugin>, PluginError> {
        let fischers = initializer.listers.get::<Fischer>()?;
        Ok(Arc::new(BanFlunder { fischers }))
    }
}

#[async_trait]
impl Plugin for BanFlunder {
    fn handles(&self, operation: Operation) -> bool {
        operation == Operation::Create
    }

    /// A mutating step, as upstream's `Admit`, though it changes nothing.
    async fn admit(&self, attributes: &Attributes, object: &mut AnyObject) -> Result<(), ApiError> {
        let Some(flunder) = object.downcast_ref::<Flunder>() else {
            return Ok(());
        };
        if !self.fischers.has_synced().await {
            return Err(attributes.forbidden("not yet ready to handle request"));
        }
        for fischer in self.fischers.list(None).await? {
            if fischer.disallowed_flunders.contains(&flunder.metadata.name) {
                return Err(attributes.forbidden(BANNED));
            }
        }
        Ok(())
    }
}
