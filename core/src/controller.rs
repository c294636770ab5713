//! In-process controllers: typed watches over stores feed a work queue of object keys, and a reconcile loop works
//! through it with retries (client-go's informer and rate-limited work queue, without the network in between).
//!
//! A key is queued once however often its object changes before it is reconciled; a failed reconcile is retried
//! after a backoff that doubles from 5 ms up to 30 s; each watch lists first, then watches from the list's
//! revision, and starts over after an error. The loop ends when its shutdown signal fires (the server shuts down, or
//! this replica loses the leader election lease, see [`crate::leader`]); dropping it ends the watches too.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::mpsc;

use crate::registry::{ApiError, ListRequest, Store, WatchItem};
use crate::runtime::Resource;
use crate::server::ShutdownSignal;

const FIRST_RETRY: Duration = Duration::from_millis(5);
const MAX_RETRY: Duration = Duration::from_secs(30);
/// How long a broken watch waits before it lists again.
const RELIST_DELAY: Duration = Duration::from_secs(1);

/// Whether the controller `name` runs, given a `--controllers` list as kube-controller-manager reads it: `*` for all
/// that are on by default, `foo` for one, `-foo` to leave one out; the first mention of a name wins. A name
/// outside `known` is an error.
pub fn is_enabled(selection: &[String], name: &str, known: &[&str]) -> Result<bool, String> {
    for entry in selection {
        let named = entry.strip_prefix('-').unwrap_or(entry);
        if named != "*" && !known.contains(&named) {
            return Err(format!("{named:?} is not in the list of known controllers"));
        }
    }
    let mut star = false;
    for entry in selection {
        if entry == name {
            return Ok(true);
        }
        if entry.strip_prefix('-') == Some(name) {
            return Ok(false);
        }
        star |= entry == "*";
    }
    Ok(star)
}

/// An object to reconcile, by namespace (`None` for cluster-scoped objects) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    /// The object's namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The object's name.
    pub name: String,
}

impl ObjectKey {
    /// The key of an object.
    pub fn of<T: Resource>(object: &T) -> ObjectKey {
        let meta = object.metadata();
        ObjectKey {
            namespace: Some(meta.namespace.clone()).filter(|ns| !ns.is_empty()),
            name: meta.name.clone(),
        }
    }
}

/// Brings one object to its desired state; an error retries it later.
pub trait Reconciler: Send + Sync + 'static {
    /// Reconciles the object `key` names (which may no longer exist); an error queues it again after a growing delay.
    fn reconcile(&self, key: &ObjectKey) -> impl Future<Output = Result<(), ApiError>> + Send;
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type Watch = Box<dyn FnOnce(Queue, ShutdownSignal) -> BoxFuture<()> + Send>;

/// The keys waiting to be reconciled, each at most once.
#[derive(Clone)]
struct Queue {
    sender: mpsc::UnboundedSender<ObjectKey>,
    waiting: Arc<Mutex<HashSet<ObjectKey>>>,
}

impl Queue {
    fn add(&self, key: ObjectKey) {
        let fresh = self
            .waiting
            .lock()
            .map(|mut w| w.insert(key.clone()))
            .unwrap_or(true);
        if fresh {
            let _ = self.sender.send(key);
        }
    }

    /// Takes a key out of the waiting set as its reconcile starts: changes from now on queue it again.
    fn started(&self, key: &ObjectKey) {
        if let Ok(mut waiting) = self.waiting.lock() {
            waiting.remove(key);
        }
    }
}

/// A controller: what it watches, and (given to [`Controller::run`]) how it reconciles.
pub struct Controller {
    name: String,
    watches: Vec<Watch>,
}

impl Controller {
    /// A controller that watches nothing yet; `name` names it in logs and `--controllers`.
    pub fn new(name: impl Into<String>) -> Controller {
        Controller {
            name: name.into(),
            watches: Vec::new(),
        }
    }

    /// Reconciles each object of `store` when it is added, changed or deleted.
    pub fn owns<T: Resource>(self, store: Store<T>) -> Controller {
        self.watches(
            store,
            |object: T| async move { vec![ObjectKey::of(&object)] },
        )
    }

    /// Reconciles the objects `related` names for each object of `store` that is added, changed or deleted (e.g.
    /// every pizza with a topping whose cost changed).
    pub fn watches<T, F, Fut>(mut self, store: Store<T>, related: F) -> Controller
    where
        T: Resource,
        F: Fn(T) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<ObjectKey>> + Send + 'static,
    {
        let name = self.name.clone();
        self.watches.push(Box::new(move |queue, shutdown| {
            Box::pin(watch_store(name, store, related, queue, shutdown))
        }));
        self
    }

    /// Reconciles, for each object of `store` that is added, changed or deleted, the objects of `owned` it
    /// `matches` (e.g. every pizza naming a topping whose cost changed): `owned` is read as the watch cache holds
    /// it (resourceVersion 0, as a Go controller reads its informer's lister), an object written since being
    /// reconciled through its own event.
    pub fn watches_for<T, O, F>(self, store: Store<T>, owned: Store<O>, matches: F) -> Controller
    where
        T: Resource,
        O: Resource,
        F: Fn(&O, &T) -> bool + Send + Sync + 'static,
    {
        let matches = Arc::new(matches);
        self.watches(store, move |changed: T| {
            let (owned, matches) = (owned.clone(), matches.clone());
            async move {
                let cached = ListRequest {
                    resource_version: Some(0),
                    ..ListRequest::default()
                };
                match owned.list(None, &cached).await {
                    Ok(list) => list
                        .items
                        .iter()
                        .filter(|object| matches(object, &changed))
                        .map(ObjectKey::of)
                        .collect(),
                    Err(error) => {
                        tracing::warn!(%error, "listing the objects a change concerns failed");
                        Vec::new()
                    }
                }
            }
        })
    }

    /// Runs the watches and the reconcile loop until `shutdown`.
    pub async fn run(self, reconciler: impl Reconciler, shutdown: ShutdownSignal) {
        let (sender, mut receiver) = mpsc::unbounded_channel();
        let queue = Queue {
            sender,
            waiting: Arc::default(),
        };
        let _watches = AbortOnDrop(
            self.watches
                .into_iter()
                .map(|watch| tokio::spawn(watch(queue.clone(), shutdown.clone())))
                .collect(),
        );
        let mut failures: HashMap<ObjectKey, u32> = HashMap::new();
        let stopped = shutdown.initiated();
        tokio::pin!(stopped);
        loop {
            let key = tokio::select! {
                _ = &mut stopped => break,
                key = receiver.recv() => match key {
                    Some(key) => key,
                    None => break,
                },
            };
            queue.started(&key);
            match reconciler.reconcile(&key).await {
                Ok(()) => {
                    failures.remove(&key);
                }
                Err(error) => {
                    let count = failures.entry(key.clone()).or_default();
                    let delay = FIRST_RETRY
                        .saturating_mul(1 << (*count).min(16))
                        .min(MAX_RETRY);
                    *count += 1;
                    tracing::info!(controller = %self.name, ?key, %error, ?delay, "reconcile failed; retrying");
                    let queue = queue.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(delay).await;
                        queue.add(key);
                    });
                }
            }
        }
    }
}

/// Ends the watch tasks when the reconcile loop ends or is dropped (a controller stopped mid-reconcile when its
/// replica loses leadership), so that a controller started again does not watch twice.
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Lists `store` and watches it from the list's revision, queueing the related keys of every object seen; lists
/// again after a failure.
async fn watch_store<T, F, Fut>(
    name: String,
    store: Store<T>,
    related: F,
    queue: Queue,
    shutdown: ShutdownSignal,
) where
    T: Resource,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<ObjectKey>> + Send + 'static,
{
    while !shutdown.is_initiated() {
        if let Err(error) = list_and_watch(&store, &related, &queue).await {
            tracing::info!(controller = %name, resource = %T::group_resource(), %error, "watch ended; listing again");
        }
        tokio::time::sleep(RELIST_DELAY).await;
    }
}

async fn list_and_watch<T, F, Fut>(
    store: &Store<T>,
    related: &F,
    queue: &Queue,
) -> Result<(), ApiError>
where
    T: Resource,
    F: Fn(T) -> Fut,
    Fut: Future<Output = Vec<ObjectKey>>,
{
    let list = store.list(None, &ListRequest::default()).await?;
    let revision = list.metadata.resource_version.parse::<u64>().ok();
    for object in list.items {
        related(object)
            .await
            .into_iter()
            .for_each(|key| queue.add(key));
    }
    let request = ListRequest {
        resource_version: revision,
        ..ListRequest::default()
    };
    let mut events = store.watch(None, &request).await?;
    while let Some(item) = events.next().await {
        match item {
            WatchItem::Object(_, object) => {
                related(object)
                    .await
                    .into_iter()
                    .for_each(|key| queue.add(key));
            }
            WatchItem::Bookmark { .. } => {}
            WatchItem::Error(error) => return Err(error),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::is_enabled;

    #[test]
    fn controllers_flag_as_kube_controller_manager_reads_it() {
        let list = |s: &str| s.split(',').map(String::from).collect::<Vec<_>>();
        let known = ["a", "b"];
        assert_eq!(is_enabled(&list("*"), "a", &known), Ok(true));
        assert_eq!(is_enabled(&list("*,-a"), "a", &known), Ok(false));
        assert_eq!(is_enabled(&list("-a"), "b", &known), Ok(false));
        assert_eq!(is_enabled(&list("b"), "b", &known), Ok(true));
        assert!(
            is_enabled(&list("*,-c"), "a", &known)
                .unwrap_err()
                .contains("\"c\"")
        );
    }
}
