//! The `BanFlunder` admission plugin: a flunder may not take a name that any fischer disallows.

use apiserver::admission::{Attributes, KindCheck, Lister, Operation};
use apiserver::async_trait;
use apiserver::registry::ApiError;

use crate::wardle::{Fischer, Flunder};

/// The plugin's name in `--enable-admission-plugins` / `--disable-admission-plugins`.
pub const BAN_FLUNDER: &str = "BanFlunder";

/// Refuses to create flunders whose name a fischer lists in `disallowedFlunders`, reading fischers from the
/// server's own watch cache (the initializer's lister) as upstream reads them from its informer.
pub struct BanFlunder(pub Lister<Fischer>);

#[async_trait]
impl KindCheck<Flunder> for BanFlunder {
    fn operations(&self) -> &'static [Operation] {
        &[Operation::Create]
    }

    async fn ready(&self) -> bool {
        self.0.has_synced().await
    }

    async fn check(
        &self,
        attributes: &Attributes,
        flunder: &Flunder,
        _: Option<&Flunder>,
    ) -> Result<(), ApiError> {
        let banned = |f: &Fischer| f.disallowed_flunders.contains(&flunder.metadata.name);
        if self.0.list(None).await?.iter().any(banned) {
            return Err(
                attributes.forbidden("this name may not be used, please change the resource name")
            );
        }
        Ok(())
    }
}
