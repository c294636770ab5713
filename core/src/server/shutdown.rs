//! The shutdown signal that long-running handlers (watches) and post-start hooks select on.
//!
//! Shutdown has two steps, as upstream's: first it is *initiated* (a signal or the caller asked; `/readyz`
//! starts failing while requests are still served for `--shutdown-delay-duration`), then the server *drains*:
//! it stops accepting connections, streams are asked to end, and in-flight requests get a bounded time to finish.

use std::future::Future;

use futures::Stream;
use tokio_util::sync::CancellationToken;

/// A cheap, cloneable handle on the server's shutdown. Handlers get it as an extractor
/// (`async fn watch(shutdown: ShutdownSignal)`) and end their streams when [`ShutdownSignal::draining`]
/// completes, for example with [`ShutdownSignal::end_with_drain`].
#[derive(Clone, Debug, Default)]
pub struct ShutdownSignal {
    initiated: CancellationToken,
    draining: CancellationToken,
}

impl ShutdownSignal {
    /// A signal that nothing has triggered yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the server to shut down (the same as SIGTERM).
    pub fn initiate(&self) {
        self.initiated.cancel();
    }

    /// Whether shutdown has been asked for.
    pub fn is_initiated(&self) -> bool {
        self.initiated.is_cancelled()
    }

    /// Completes when shutdown has been asked for.
    pub fn initiated(&self) -> impl Future<Output = ()> + Send + use<> {
        self.initiated.clone().cancelled_owned()
    }

    /// Whether the server is draining: no new connections, streams should end now.
    pub fn is_draining(&self) -> bool {
        self.draining.is_cancelled()
    }

    /// Completes when the server starts draining. Long-running handlers select on this and end their
    /// responses cleanly (a watch simply ends its stream; clients re-list or re-watch elsewhere).
    pub fn draining(&self) -> impl Future<Output = ()> + Send + use<> {
        self.draining.clone().cancelled_owned()
    }

    /// Wraps a response stream so that it ends when the server starts draining.
    pub fn end_with_drain<S: Stream>(&self, stream: S) -> impl Stream<Item = S::Item> + use<S> {
        use futures::StreamExt;
        stream.take_until(self.draining())
    }

    /// Moves to the draining step (also initiates). Called by the server after the shutdown delay.
    pub(crate) fn start_draining(&self) {
        self.initiated.cancel();
        self.draining.cancel();
    }
}
