//! `ResourceQuota` (upstream's plugin of that name, `plugin/pkg/admission/resourcequota`): object counts of this
//! server's resources in the core cluster's `ResourceQuota` objects, checked and charged on create.
//!
//! kube-apiserver runs quota admission only for the resources it serves itself, so without this plugin a quota of
//! `count/pizzas.restaurant.programming-kubernetes.info: 2` is counted (kube-controller-manager's quota controller
//! fills `status.used` through a metadata informer) but never enforced. As upstream: a create is refused with
//! `exceeded quota: ...` when it would take a quota's usage past its `status.hard`; otherwise the quota's
//! `status.used` is charged at once (a write conditional on the quota's resourceVersion, retried on conflict), so
//! that two creates cannot both take the last unit; the quota controller later recounts and releases what deletes
//! freed. A quota whose `status.hard` names the resource but whose `status.used` does not yet is refused with
//! `status unknown for quota`, as upstream. Only `count/<resource>.<group>` is evaluated: this server's objects have
//! no compute resources, and quotas with scopes match none of them (scopes are about pods).

use super::RESOURCE_QUOTA;
use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::{ResourceQuota, ResourceQuotaStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::Store;

use super::{AnyObject, Attributes, Initializer, Operation, Plugin, PluginError};
use crate::cluster::CoreCluster;
use crate::registry::ApiError;

/// How often a charge is retried when another writer changed the quota in between (upstream retries its whole
/// evaluation a few times too).
const CHARGE_ATTEMPTS: usize = 5;

/// See the module documentation.
pub struct ResourceQuotaAdmission {
    cluster: CoreCluster,
    quotas: Store<ResourceQuota>,
}

impl ResourceQuotaAdmission {
    /// Builds the plugin with an informer of the core cluster's quotas; without a core cluster there are none.
    pub fn build(initializer: &Initializer) -> Result<Arc<dyn Plugin>, PluginError> {
        let cluster = initializer.core_cluster.clone().ok_or_else(|| {
            PluginError(format!(
                "{RESOURCE_QUOTA}: needs the core cluster (--kubeconfig, or running in a pod)"
            ))
        })?;
        let quotas = cluster.informer::<ResourceQuota>("resourcequota");
        Ok(Arc::new(ResourceQuotaAdmission { cluster, quotas }))
    }

    /// The namespace's quotas that limit `resource`, from the informer once it has loaded (a live list before).
    async fn limiting(
        &self,
        namespace: &str,
        resource: &str,
    ) -> Result<Vec<ResourceQuota>, ApiError> {
        let synced = futures::FutureExt::now_or_never(self.quotas.wait_until_ready()).is_some();
        let mut quotas: Vec<ResourceQuota> = if synced {
            self.quotas
                .state()
                .iter()
                .filter(|q| q.metadata.namespace.as_deref() == Some(namespace))
                .map(|q| (**q).clone())
                .collect()
        } else {
            Api::<ResourceQuota>::namespaced(self.cluster.client(), namespace)
                .list(&Default::default())
                .await
                .map_err(ApiError::internal)?
                .items
        };
        quotas.retain(|q| limits(q, resource));
        quotas.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(quotas)
    }

    /// Checks `quota` and charges one object to it, reading it again after a conflict.
    async fn charge(
        &self,
        a: &Attributes,
        mut quota: ResourceQuota,
        resource: &str,
    ) -> Result<(), ApiError> {
        let namespace = a.namespace.clone();
        let api = Api::<ResourceQuota>::namespaced(self.cluster.client(), &namespace);
        for _ in 0..CHARGE_ATTEMPTS {
            if !limits(&quota, resource) {
                return Ok(());
            }
            let name = quota.metadata.name.clone().unwrap_or_default();
            let status = quota.status.clone().unwrap_or_default();
            let hard = count(&status.hard, resource).unwrap_or(i64::MAX);
            let Some(used) = count(&status.used, resource) else {
                return Err(a.forbidden(format!(
                    "status unknown for quota: {name}, resources: {resource}"
                )));
            };
            if used + 1 > hard {
                return Err(a.forbidden(format!(
                    "exceeded quota: {name}, requested: {resource}=1, used: {resource}={used}, limited: {resource}={hard}"
                )));
            }
            if a.dry_run {
                return Ok(());
            }
            let mut charged = quota.clone();
            let mut used_map = status.used.clone().unwrap_or_default();
            used_map.insert(resource.to_string(), Quantity((used + 1).to_string()));
            charged.status = Some(ResourceQuotaStatus {
                used: Some(used_map),
                ..status
            });
            match api
                .replace_status(&name, &PostParams::default(), &charged)
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    quota = api.get(&name).await.map_err(ApiError::internal)?;
                }
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
                Err(e) => return Err(ApiError::internal(e)),
            }
        }
        Err(a.forbidden(format!(
            "failed to update quota status: too many concurrent updates to {resource}"
        )))
    }
}

/// The quota name of an object count (`count/pizzas.restaurant.programming-kubernetes.info`; `count/<resource>` in
/// the core group).
pub fn object_count_name(resource: &str, group: &str) -> String {
    if group.is_empty() {
        format!("count/{resource}")
    } else {
        format!("count/{resource}.{group}")
    }
}

/// Whether `quota` enforces `resource`: its observed `status.hard` names it (upstream evaluates `status.hard`, which
/// the quota controller copies from `spec.hard`), and it has no scopes (they select pods).
fn limits(quota: &ResourceQuota, resource: &str) -> bool {
    let spec = quota.spec.as_ref();
    let scoped = spec.is_some_and(|s| {
        s.scopes.as_ref().is_some_and(|v| !v.is_empty()) || s.scope_selector.is_some()
    });
    let hard = quota.status.as_ref().and_then(|s| s.hard.as_ref());
    !scoped && hard.is_some_and(|h| h.contains_key(resource))
}

/// A count in a quota's list of quantities; `None` when the resource is not listed. A count that is not a whole
/// number (a quantity such as `1k`) is read as upstream's `Quantity.Value` would be, rounded up.
fn count(list: &Option<BTreeMap<String, Quantity>>, resource: &str) -> Option<i64> {
    let quantity = list.as_ref()?.get(resource)?;
    Some(parse_count(&quantity.0))
}

/// A quantity as a whole number: plain integers and the decimal and binary suffixes (`k`, `M`, `Ki`, ...).
fn parse_count(quantity: &str) -> i64 {
    let quantity = quantity.trim();
    let split = quantity
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(quantity.len());
    let (number, suffix) = quantity.split_at(split);
    let multiplier: f64 = match suffix {
        "" => 1.0,
        "m" => 0.001,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return 0,
    };
    number
        .parse::<f64>()
        .map(|n| (n * multiplier).ceil() as i64)
        .unwrap_or(0)
}

#[async_trait]
impl Plugin for ResourceQuotaAdmission {
    fn handles(&self, operation: Operation) -> bool {
        // Object counts change only on create; deletes are released by the quota controller's recount.
        operation == Operation::Create
    }

    async fn validate(
        &self,
        a: &Attributes,
        _object: Option<&AnyObject>,
        _old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        if a.namespace.is_empty() || !a.subresource.is_empty() {
            return Ok(());
        }
        let resource = object_count_name(&a.resource.resource, &a.resource.group);
        for quota in self.limiting(&a.namespace, &resource).await? {
            self.charge(a, quota, &resource).await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceQuotaSpec;

    fn quota(hard: Option<&str>, used: Option<&str>, scoped: bool) -> ResourceQuota {
        let list = |v: Option<&str>| {
            v.map(|v| BTreeMap::from([("count/pizzas.g".to_string(), Quantity(v.to_string()))]))
        };
        ResourceQuota {
            spec: Some(ResourceQuotaSpec {
                scopes: scoped.then(|| vec!["BestEffort".to_string()]),
                ..Default::default()
            }),
            status: Some(ResourceQuotaStatus {
                hard: list(hard),
                used: list(used),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn which_quotas_limit_a_resource() {
        assert!(limits(
            &quota(Some("2"), Some("0"), false),
            "count/pizzas.g"
        ));
        assert!(limits(&quota(Some("2"), None, false), "count/pizzas.g"));
        assert!(!limits(
            &quota(Some("2"), Some("0"), true),
            "count/pizzas.g"
        ));
        assert!(!limits(&quota(None, None, false), "count/pizzas.g"));
        assert!(!limits(
            &quota(Some("2"), Some("0"), false),
            "count/toppings.g"
        ));
    }

    #[test]
    fn counts_read_as_quantities() {
        assert_eq!(parse_count("2"), 2);
        assert_eq!(parse_count("1k"), 1000);
        assert_eq!(parse_count("1Ki"), 1024);
        assert_eq!(parse_count("1500m"), 2);
        assert_eq!(object_count_name("pizzas", "g"), "count/pizzas.g");
        assert_eq!(object_count_name("configmaps", ""), "count/configmaps");
    }
}
