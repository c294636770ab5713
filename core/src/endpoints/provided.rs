//! Resources whose objects the server's own code provides instead of storage, as metrics-server serves
//! `PodMetrics` from memory or a server serves another system's data: `get` and `list` only, with discovery,
//! OpenAPI, tables, label and field selectors, authorization and audit as for stored resources. Declared with
//! [`Api::provided`](super::Api::provided).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use axum::body::Body;
use axum::response::Response;
use http::StatusCode;

use super::api::{ResourceEndpoint, Verb};
use super::context::Context;
use super::get::render_object;
use super::list::{list_request, render_list};
use super::output::{Output, finish};
use super::params::ListParams;
use crate::meta::ListMeta;
use crate::registry::{ApiError, ObjectList};
use crate::runtime::{KindDescription, Resource, ResourceCodec};

/// Where the objects of a provided resource come from.
#[async_trait]
pub trait Provider<T: Resource>: Send + Sync + 'static {
    /// The object `name` (in `namespace` for a namespaced kind), `None` when there is none (404).
    async fn get(&self, namespace: Option<&str>, name: &str) -> Result<Option<T>, ApiError>;

    /// The objects of one namespace, or of all (`None`). Selectors are applied afterwards.
    async fn list(&self, namespace: Option<&str>) -> Result<Vec<T>, ApiError>;
}

pub(crate) struct ProvidedEndpoint<T: Resource> {
    pub codec: ResourceCodec<T>,
    pub provider: Arc<dyn Provider<T>>,
}

#[async_trait]
impl<T: Resource> ResourceEndpoint for ProvidedEndpoint<T> {
    fn description(&self) -> KindDescription {
        KindDescription {
            read_only: true,
            ..self.codec.describe()
        }
    }

    fn namespaced(&self) -> bool {
        T::namespaced()
    }

    fn serves(&self, version: &str) -> bool {
        self.codec.serves(version)
    }

    async fn serve(&self, context: Context, verb: Verb, _body: Body) -> Response {
        let result = async {
            let output = Output::negotiate(&context, false)?;
            match verb {
                Verb::Get => {
                    let object = self
                        .provider
                        .get(context.namespace(), context.name())
                        .await?
                        .ok_or_else(|| ApiError::not_found(&T::group_resource(), context.name()))?;
                    render_object(&self.codec, &context, output, StatusCode::OK, &object)
                }
                Verb::List => {
                    let request = list_request::<T>(ListParams::parse(&context.params)?, &context)?;
                    let items = self
                        .provider
                        .list(context.namespace())
                        .await?
                        .into_iter()
                        .filter(|object| {
                            request.label_selector.matches(&object.metadata().labels)
                                && request.field_selector.matches(&fields(object))
                        })
                        .collect();
                    let list = ObjectList {
                        metadata: ListMeta::default(),
                        items,
                    };
                    render_list(&self.codec, &context, output, StatusCode::OK, &list)
                }
                _ => Err(ApiError::new(
                    405,
                    "MethodNotAllowed",
                    "the server does not allow this method on the requested resource",
                )),
            }
        }
        .await;
        finish(&context, result)
    }
}

/// The fields a field selector may name: `metadata.name`, `metadata.namespace` and the kind's selectable fields.
fn fields<T: Resource>(object: &T) -> BTreeMap<String, String> {
    let meta = object.metadata();
    let mut fields = BTreeMap::from([
        ("metadata.name".to_string(), meta.name.clone()),
        ("metadata.namespace".to_string(), meta.namespace.clone()),
    ]);
    for path in T::SELECTABLE_FIELDS {
        if let Some(value) = object.selectable_field(path) {
            fields.insert(path.to_string(), value);
        }
    }
    fields
}
