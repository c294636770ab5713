//! Named plugin registration, enabling and disabling them from flags, and the initializer that hands plugins
//! what they need (typed listers over the watch cache).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

use super::chain::{Chain, Plugin};
use crate::registry::{ApiError, ListRequest, Store};
use crate::runtime::Resource;

/// Which plugins to turn on or off (the values of `--enable-admission-plugins` / `--disable-admission-plugins` in
/// [`ServingOptions`](crate::server::ServingOptions)). Order does not matter: plugins run in the registered order.
#[derive(Clone, Debug, Default)]
pub struct AdmissionOptions {
    /// Plugins to enable in addition to the default-enabled ones.
    pub enable: Vec<String>,
    /// Plugins to disable, even if enabled by default.
    pub disable: Vec<String>,
    /// `--admission-control-config-file`: each plugin's own configuration.
    pub config_file: Option<std::path::PathBuf>,
}

/// A bad admission configuration (an unknown plugin, a plugin both enabled and disabled, a failed factory).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PluginError(pub String);

type Factory = Box<dyn Fn(&Initializer) -> Result<Arc<dyn Plugin>, PluginError> + Send + Sync>;

struct Registration {
    name: String,
    enabled_by_default: bool,
    factory: Factory,
}

/// The plugins a server knows, in the order they run (upstream's `AllOrderedPlugins`).
#[derive(Default)]
pub struct Plugins {
    registered: Vec<Registration>,
}

impl Plugins {
    /// No plugin registered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a plugin after the ones already registered; `factory` builds it from the initializer.
    pub fn register<F>(mut self, name: &str, enabled_by_default: bool, factory: F) -> Self
    where
        F: Fn(&Initializer) -> Result<Arc<dyn Plugin>, PluginError> + Send + Sync + 'static,
    {
        self.registered.retain(|r| r.name != name);
        self.registered.push(Registration {
            name: name.to_string(),
            enabled_by_default,
            factory: Box::new(factory),
        });
        self
    }

    /// The names of all registered plugins, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.registered.iter().map(|r| r.name.as_str())
    }

    /// Builds the chain the options enable, with upstream's checks on the flag values.
    pub fn build(
        &self,
        options: &AdmissionOptions,
        initializer: &Initializer,
    ) -> Result<Chain, PluginError> {
        let known = |name: &str| self.registered.iter().any(|r| r.name == name);
        for (flag, names) in [
            ("enable-admission-plugins", &options.enable),
            ("disable-admission-plugins", &options.disable),
        ] {
            if let Some(unknown) = names.iter().find(|n| !known(n)) {
                return Err(PluginError(format!("{flag} plugin {unknown:?} is unknown")));
            }
        }
        if let Some(both) = options.enable.iter().find(|n| options.disable.contains(n)) {
            return Err(PluginError(format!(
                "{both:?} is in enable-admission-plugins and disable-admission-plugins"
            )));
        }
        let mut initializer = initializer.clone();
        if let Some(file) = &options.config_file {
            initializer.configurations = Arc::new(super::config::read(file)?);
        }
        let initializer = &initializer;
        let mut chain = Vec::new();
        for registration in &self.registered {
            let enabled = (registration.enabled_by_default
                || options.enable.contains(&registration.name))
                && !options.disable.contains(&registration.name);
            if enabled {
                chain.push((
                    registration.name.clone(),
                    (registration.factory)(initializer)?,
                ));
            }
        }
        Ok(Chain::new(chain))
    }
}

/// What plugins may ask for when they are built (upstream's plugin initializers, without the reflection).
#[derive(Clone, Default)]
pub struct Initializer {
    /// Typed listers over this server's own watch caches.
    pub listers: Listers,
    /// The core cluster's client and informers, when the server runs behind one.
    pub core_cluster: Option<crate::cluster::CoreCluster>,
    /// The server's metrics, for plugins with metrics of their own (webhook calls).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Each plugin's configuration from `--admission-control-config-file`, by plugin name.
    pub configurations: Arc<HashMap<String, serde_json::Value>>,
    /// The server's authorizer, for the `authorizer` variable of CEL expressions (upstream's `WantsAuthorizer`).
    #[cfg(feature = "cluster")]
    pub authorizer: Option<Arc<dyn super::authorization::AdmissionAuthorizer>>,
}

impl Initializer {
    /// The configuration `plugin` was given in `--admission-control-config-file`, if any.
    pub fn configuration(&self, plugin: &str) -> Option<&serde_json::Value> {
        self.configurations.get(plugin)
    }
}

/// Typed listers by hub type.
#[derive(Clone, Default)]
pub struct Listers {
    by_type: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Listers {
    /// Makes objects of `T` readable by plugins through `store` (which should sit on a watch cache, so that
    /// reads cost no backend round trip).
    pub fn insert<T: Resource>(&mut self, store: Store<T>) {
        self.by_type
            .insert(TypeId::of::<T>(), Arc::new(Lister { store }));
    }

    /// The lister of `T`; an error names the missing type (upstream's "missing policy lister").
    pub fn get<T: Resource>(&self) -> Result<Lister<T>, PluginError> {
        self.by_type
            .get(&TypeId::of::<T>())
            .and_then(|any| any.downcast_ref::<Lister<T>>())
            .cloned()
            .ok_or_else(|| PluginError(format!("missing lister for {}", T::KIND)))
    }
}

/// Reads objects of one resource from the server's own watch cache (never through a loopback client).
pub struct Lister<T: Resource> {
    store: Store<T>,
}

impl<T: Resource> Clone for Lister<T> {
    fn clone(&self) -> Self {
        Lister {
            store: self.store.clone(),
        }
    }
}

impl<T: Resource> Lister<T> {
    /// Whether the cache behind the lister has loaded (upstream `HasSynced`).
    pub async fn has_synced(&self) -> bool {
        self.store.storage().readiness().await.is_ok()
    }

    /// The object, or `None` if it does not exist; any resourceVersion the cache holds will do.
    pub async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Option<T>, ApiError> {
        match self.store.get(namespace, name, Some(0)).await {
            Ok(object) => Ok(Some(object)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every object (in one namespace, or all with `None`), as upstream's `Lister.List(labels.Everything())`;
    /// any resourceVersion the cache holds will do.
    pub async fn list(&self, namespace: Option<&str>) -> Result<Vec<T>, ApiError> {
        let request = ListRequest {
            resource_version: Some(0),
            ..ListRequest::default()
        };
        Ok(self.store.list(namespace, &request).await?.items)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;

    use super::*;
    use crate::admission::{AnyObject, Attributes, Operation};
    use crate::auth::User;
    use crate::runtime::{GroupResource, GroupVersionKind};

    /// Records the calls it gets, and appends its name to a `String` object when mutating.
    struct Recorder {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
    }

    #[async_trait]
    impl Plugin for Recorder {
        fn handles(&self, operation: Operation) -> bool {
            operation != Operation::Delete
        }

        async fn admit(
            &self,
            _: &Attributes,
            object: &mut AnyObject,
            _: Option<&AnyObject>,
        ) -> Result<(), ApiError> {
            if let Some(s) = object.downcast_mut::<String>() {
                s.push_str(self.name);
            }
            self.log
                .lock()
                .unwrap()
                .push(format!("admit {}", self.name));
            Ok(())
        }

        async fn validate(
            &self,
            attributes: &Attributes,
            object: Option<&AnyObject>,
            _: Option<&AnyObject>,
        ) -> Result<(), ApiError> {
            self.log
                .lock()
                .unwrap()
                .push(format!("validate {}", self.name));
            match object.and_then(|o| o.downcast_ref::<String>()) {
                Some(s) if s.contains("forbidden") => Err(attributes.forbidden("no")),
                _ => Ok(()),
            }
        }
    }

    fn plugins(log: &Arc<Mutex<Vec<String>>>) -> Plugins {
        let (a, b) = (log.clone(), log.clone());
        Plugins::new()
            .register("A", true, move |_| {
                Ok(Arc::new(Recorder {
                    name: "A",
                    log: a.clone(),
                }))
            })
            .register("B", false, move |_| {
                Ok(Arc::new(Recorder {
                    name: "B",
                    log: b.clone(),
                }))
            })
    }

    fn attributes(operation: Operation) -> Attributes {
        Attributes {
            operation,
            kind: GroupVersionKind::default(),
            resource: GroupResource {
                group: "example.com".into(),
                resource: "widgets".into(),
            },
            version: "v1".into(),
            subresource: String::new(),
            namespace: String::new(),
            name: "w".into(),
            dry_run: false,
            user: User::anonymous(),
            audit: None,
            warnings: None,
            wire: None,
            field_manager: String::new(),
            reinvocation: Default::default(),
        }
    }

    fn options(enable: &[&str], disable: &[&str]) -> AdmissionOptions {
        AdmissionOptions {
            enable: enable.iter().map(|s| s.to_string()).collect(),
            disable: disable.iter().map(|s| s.to_string()).collect(),
            config_file: None,
        }
    }

    #[tokio::test]
    async fn mutating_in_order_then_validating() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let chain = plugins(&log)
            .build(&options(&["B"], &[]), &Initializer::default())
            .unwrap();
        assert_eq!(chain.names().collect::<Vec<_>>(), ["A", "B"]);
        let attrs = attributes(Operation::Create);
        let mut object = String::from("x");
        chain.admit(&attrs, &mut object, None).await.unwrap();
        chain.validate(&attrs, Some(&object), None).await.unwrap();
        assert_eq!(object, "xAB");
        assert_eq!(
            *log.lock().unwrap(),
            ["admit A", "admit B", "validate A", "validate B"]
        );

        let forbidden = String::from("forbidden");
        let err = chain
            .validate(&attrs, Some(&forbidden), None)
            .await
            .unwrap_err();
        assert_eq!(err.code, 403);
        assert_eq!(err.message, "widgets.example.com \"w\" is forbidden: no");

        log.lock().unwrap().clear();
        chain
            .validate(&attributes(Operation::Delete), None, None)
            .await
            .unwrap();
        assert!(
            log.lock().unwrap().is_empty(),
            "plugins not handling DELETE are skipped"
        );
    }

    #[test]
    fn enable_and_disable() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let init = Initializer::default();
        let names = |o| {
            plugins(&log)
                .build(&o, &init)
                .map(|c| c.names().map(String::from).collect::<Vec<_>>())
        };
        assert_eq!(names(options(&[], &[])).unwrap(), ["A"]);
        assert_eq!(names(options(&[], &["A"])).unwrap(), Vec::<String>::new());
        assert_eq!(
            names(options(&["C"], &[])).unwrap_err().to_string(),
            "enable-admission-plugins plugin \"C\" is unknown"
        );
        assert_eq!(
            names(options(&["B"], &["B"])).unwrap_err().to_string(),
            "\"B\" is in enable-admission-plugins and disable-admission-plugins"
        );
    }
}
