//! The plugin trait, the attributes a plugin sees, and the ordered chain the handlers run.

use std::any::Any;
use std::sync::Arc;
use std::time::Instant;

#[cfg(feature = "cluster")]
use apiserver_cel::authz;
use async_trait::async_trait;
use tracing::Instrument;

use super::reinvocation::Reinvocation;
use crate::audit::AuditContext;
use crate::auth::User;
use crate::metrics::Metrics;
use crate::registry::{AdmissionCheck, ApiError};
use crate::runtime::{GroupResource, GroupVersionKind, Resource};
use crate::telemetry::SPAN_TARGET;
use crate::warning::Warnings;

use super::wire::WireCodec;

/// A hub object as plugins see it: downcast it to the types the plugin handles.
pub type AnyObject = dyn Any + Send + Sync;

/// The operation a request performs, as admission names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A create (`POST`, or an update that creates).
    Create,
    /// An update: `PUT` or `PATCH`, of the object or a subresource.
    Update,
    /// A delete of one object (a collection delete is one per object).
    Delete,
}

impl Operation {
    /// Upstream's name (`CREATE`, `UPDATE`, `DELETE`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What a plugin knows about the request besides the object (upstream `admission.Attributes`).
#[derive(Clone, Debug)]
pub struct Attributes {
    /// What the request does.
    pub operation: Operation,
    /// The kind in the version the request was made in.
    pub kind: GroupVersionKind,
    /// The resource (plural) and its group.
    pub resource: GroupResource,
    /// The version of the request's endpoint.
    pub version: String,
    /// The subresource, e.g. `status`; empty for the main resource.
    pub subresource: String,
    /// Empty for cluster-scoped resources.
    pub namespace: String,
    /// Empty on a create with `generateName`.
    pub name: String,
    /// `dryRun=All`: plugins with side effects must not make them.
    pub dry_run: bool,
    /// The authenticated user the request is made by.
    pub user: User,
    /// The request's audit event, when it is audited (see [`Attributes::annotate`]).
    pub audit: Option<AuditContext>,
    /// The request's `Warning` headers (see [`Attributes::warn`]).
    pub warnings: Option<Warnings>,
    /// The resource's codec, for plugins that see objects as JSON in a served version (webhooks, policies).
    pub wire: Option<Arc<dyn WireCodec>>,
    /// The request's `fieldManager` (empty when not given).
    pub field_manager: String,
    /// The passes of the mutating chain (see [`Reinvocation`]).
    pub reinvocation: Arc<Reinvocation>,
}

impl Attributes {
    /// The attributes of a request on resource `T`.
    pub fn new<T: Resource>(
        operation: Operation,
        version: &str,
        namespace: &str,
        name: &str,
        dry_run: bool,
        user: User,
    ) -> Self {
        Attributes {
            operation,
            kind: T::group_version(version).with_kind(T::KIND),
            resource: T::group_resource(),
            version: version.to_string(),
            subresource: String::new(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            dry_run,
            user,
            audit: None,
            warnings: None,
            wire: None,
            field_manager: String::new(),
            reinvocation: Arc::default(),
        }
    }

    /// Adds a warning for the client (a `Warning` header of the response), as upstream's `warning.AddWarning`.
    pub fn warn(&self, text: &str) {
        if let Some(warnings) = &self.warnings {
            warnings.add(text);
        }
    }

    /// Adds an annotation to the request's audit event, as upstream plugins do with `AddAnnotation`: the key
    /// must be qualified (`<plugin>.admission.<domain>/<name>`); a key already set keeps its first value.
    pub fn annotate(&self, key: &str, value: &str) -> Result<(), String> {
        match key.split_once('/') {
            Some((prefix, name)) if !prefix.is_empty() && !name.is_empty() => {}
            _ => {
                return Err(format!(
                    "annotation key {key:?} is not of the form <prefix>/<name>"
                ));
            }
        }
        if let Some(audit) = &self.audit {
            audit.annotate(key, value);
        }
        Ok(())
    }

    /// Who makes the request and on what, as the CEL `authorizer` and `authorizer.requestResource` ask.
    #[cfg(feature = "cluster")]
    pub(crate) fn authorization_target(&self) -> (authz::Subject, authz::Resource) {
        let user = &self.user;
        let subject = authz::Subject {
            name: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        };
        let resource = authz::Resource {
            group: self.resource.group.clone(),
            resource: self.resource.resource.clone(),
            subresource: self.subresource.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            ..authz::Resource::default()
        };
        (subject, resource)
    }

    /// A refusal of this request (upstream `admission.NewForbidden`): 403 with
    /// `<resource>.<group> "<name>" is forbidden: <why>`.
    pub fn forbidden(&self, why: impl std::fmt::Display) -> ApiError {
        ApiError::forbidden(&self.resource, &self.name, &why.to_string())
    }
}

/// An admission plugin. Mutating plugins implement [`Plugin::admit`], validating ones [`Plugin::validate`]; a
/// plugin may do both. Objects are hub types: downcast to the ones the plugin handles and ignore the rest.
#[async_trait]
pub trait Plugin: Send + Sync + 'static {
    /// Whether the plugin wants to see requests of this operation (upstream `Handles`).
    fn handles(&self, _operation: Operation) -> bool {
        true
    }

    /// Mutates the incoming object (create and update; not called for delete); `old` is the stored object on
    /// an update.
    async fn admit(
        &self,
        _attributes: &Attributes,
        _object: &mut AnyObject,
        _old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// Validates the request: `object` is the new object (none on delete), `old` the stored one (none on create).
    async fn validate(
        &self,
        _attributes: &Attributes,
        _object: Option<&AnyObject>,
        _old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        Ok(())
    }
}

/// A span per plugin step (`Admit NamespaceLifecycle`, `Validate PizzaToppings`), when spans are exported.
fn plugin_span(name: &str, step: &'static str, operation: Operation) -> tracing::Span {
    if !crate::telemetry::in_traced_request() {
        return tracing::Span::none();
    }
    let title = if step == "admit" { "Admit" } else { "Validate" };
    tracing::trace_span!(
        target: SPAN_TARGET,
        "admission",
        otel.name = format!("{title} {name}"),
        plugin = name,
        r#type = step,
        operation = operation.as_str(),
    )
}

/// The enabled plugins in their fixed order: every mutating step runs before any validating one.
#[derive(Clone, Default)]
pub struct Chain {
    plugins: Vec<(String, Arc<dyn Plugin>)>,
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.plugins.iter().map(|(name, _)| name))
            .finish()
    }
}

impl Chain {
    /// A chain of named plugins, run in the given order.
    pub fn new(plugins: Vec<(String, Arc<dyn Plugin>)>) -> Self {
        Chain {
            plugins,
            metrics: None,
        }
    }

    /// Times each plugin and each step in `apiserver_admission_controller_admission_duration_seconds` and
    /// `apiserver_admission_step_admission_duration_seconds`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    fn observe(
        &self,
        plugin: Option<&str>,
        step: &str,
        operation: Operation,
        rejected: bool,
        started: Instant,
    ) {
        if let Some(metrics) = &self.metrics {
            metrics.admission_step(
                plugin,
                step,
                operation.as_str(),
                rejected,
                started.elapsed(),
            );
        }
    }

    /// The names of the plugins, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.plugins.iter().map(|(name, _)| name.as_str())
    }

    /// Runs every mutating step on `object` (`old`: the stored object, on an update); once more when a webhook or
    /// a mutating policy changed the object (upstream's reinvoker: in-tree plugins see their changes).
    pub async fn admit(
        &self,
        attributes: &Attributes,
        object: &mut AnyObject,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        self.admit_pass(attributes, object, old).await?;
        if attributes.reinvocation.start_reinvoke() {
            self.admit_pass(attributes, object, old).await?;
        }
        Ok(())
    }

    async fn admit_pass(
        &self,
        attributes: &Attributes,
        object: &mut AnyObject,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        let step = Instant::now();
        for (name, plugin) in &self.plugins {
            if plugin.handles(attributes.operation) {
                let started = Instant::now();
                let result = plugin
                    .admit(attributes, object, old)
                    .instrument(plugin_span(name, "admit", attributes.operation))
                    .await;
                self.observe(
                    Some(name),
                    "admit",
                    attributes.operation,
                    result.is_err(),
                    started,
                );
                if result.is_err() {
                    self.observe(None, "admit", attributes.operation, true, step);
                }
                result?;
            }
        }
        self.observe(None, "admit", attributes.operation, false, step);
        Ok(())
    }

    /// Runs every validating step.
    pub async fn validate(
        &self,
        attributes: &Attributes,
        object: Option<&AnyObject>,
        old: Option<&AnyObject>,
    ) -> Result<(), ApiError> {
        let step = Instant::now();
        for (name, plugin) in &self.plugins {
            if plugin.handles(attributes.operation) {
                let started = Instant::now();
                let result = plugin
                    .validate(attributes, object, old)
                    .instrument(plugin_span(name, "validate", attributes.operation))
                    .await;
                self.observe(
                    Some(name),
                    "validate",
                    attributes.operation,
                    result.is_err(),
                    started,
                );
                if result.is_err() {
                    self.observe(None, "validate", attributes.operation, true, step);
                }
                result?;
            }
        }
        self.observe(None, "validate", attributes.operation, false, step);
        Ok(())
    }

    /// The validating phase for one request, in the form the registry's store calls it. An update that creates
    /// the object is validated as a create, as upstream does.
    pub fn validating<'a>(&'a self, attributes: &'a Attributes) -> ValidatingCheck<'a> {
        ValidatingCheck {
            chain: self,
            attributes,
        }
    }
}

/// The validating phase of a [`Chain`] bound to one request's attributes.
pub struct ValidatingCheck<'a> {
    chain: &'a Chain,
    attributes: &'a Attributes,
}

impl ValidatingCheck<'_> {
    fn with_operation(&self, operation: Operation, name: &str) -> Attributes {
        let mut attributes = self.attributes.clone();
        attributes.operation = operation;
        if attributes.name.is_empty() {
            attributes.name = name.to_string();
        }
        attributes
    }
}

#[async_trait]
impl<T: Resource> AdmissionCheck<T> for ValidatingCheck<'_> {
    async fn validate_create(&self, object: &T) -> Result<(), ApiError> {
        let attributes = self.with_operation(Operation::Create, &object.metadata().name);
        self.chain
            .validate(&attributes, Some(object as &AnyObject), None)
            .await
    }

    async fn validate_update(&self, new: &T, old: &T) -> Result<(), ApiError> {
        let attributes = self.with_operation(Operation::Update, &new.metadata().name);
        self.chain
            .validate(
                &attributes,
                Some(new as &AnyObject),
                Some(old as &AnyObject),
            )
            .await
    }

    async fn validate_delete(&self, old: &T) -> Result<(), ApiError> {
        let attributes = self.with_operation(Operation::Delete, &old.metadata().name);
        self.chain
            .validate(&attributes, None, Some(old as &AnyObject))
            .await
    }
}
