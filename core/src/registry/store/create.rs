//! The create flow (upstream `Store.Create` and `rest.BeforeCreate`): system fields, the strategy, generated names
//! (retried when taken) and dry runs. An update that creates (`allowCreateOnUpdate`, server-side apply) prepares
//! the object here too.

use crate::runtime::Resource;
use crate::storage::{self, StorageError};

use super::{Store, WriteOptions, Written};
use crate::registry::ApiError;
use crate::registry::object_meta::{
    MAX_NAME_GENERATION_ATTEMPTS, fill_system_fields, generate_name, validate_object_meta,
    wipe_system_fields,
};

impl<T: Resource> Store<T> {
    /// Upstream `rest.BeforeCreate`: namespace, strategy preparation, generated name, validation, canonical form.
    pub(super) fn before_create(
        &self,
        object: &mut T,
        namespace: Option<&str>,
    ) -> Result<Vec<String>, ApiError> {
        Self::reconcile_namespace(object, namespace)?;
        let meta = object.metadata_mut();
        meta.deletion_timestamp = None;
        meta.deletion_grace_period_seconds = None;
        meta.generation = 1;
        if T::has_status_subresource() {
            // Status is the status subresource's to write (upstream's CRD strategy clears it on create).
            object.copy_status_from(&T::default());
        }
        self.strategy.prepare_for_create(object);
        let meta = object.metadata_mut();
        if meta.name.is_empty() && !meta.generate_name.is_empty() {
            meta.name = generate_name(&meta.generate_name);
        }
        let mut errors = validate_object_meta(object.metadata(), T::namespaced());
        errors.extend(self.strategy.validate(object));
        errors.extend(self.codec.rule_errors(object, None));
        if !errors.is_empty() {
            return Err(ApiError::invalid(
                &self.kind(),
                &object.metadata().name,
                &errors,
            ));
        }
        let warnings = self.strategy.warnings_on_create(object);
        self.strategy.canonicalize(object);
        Ok(warnings)
    }

    /// Creates an object (upstream `Store.Create`); with `options.dry_run` everything runs but the write.
    pub async fn create(
        &self,
        namespace: Option<&str>,
        mut object: T,
        options: WriteOptions<'_, T>,
    ) -> Result<Written<T>, ApiError> {
        let WriteOptions {
            admission, dry_run, ..
        } = options;
        wipe_system_fields(object.metadata_mut());
        object.metadata_mut().resource_version.clear();
        fill_system_fields(object.metadata_mut());
        let generated =
            object.metadata().name.is_empty() && !object.metadata().generate_name.is_empty();
        let attempts = if generated {
            MAX_NAME_GENERATION_ATTEMPTS
        } else {
            1
        };
        let mut last_error = None;
        for _ in 0..attempts {
            let mut candidate = object.clone();
            let warnings = self.before_create(&mut candidate, namespace)?;
            admission.validate_create(&candidate).await?;
            let name = candidate.metadata().name.clone();
            let key = self.key(namespace, &name)?;
            let result = if dry_run {
                self.dry_run_create(&key, &candidate).await
            } else {
                match self.storage.create(&key, self.encode(&candidate)?).await {
                    Ok(stored) => self.decode(&stored),
                    Err(e) => Err(self.create_error(e, &key, &name).await),
                }
            };
            match result {
                Ok(created) => {
                    return Ok(Written {
                        object: created,
                        created: true,
                        warnings,
                    });
                }
                Err(e) if generated && e.is_already_exists() => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| ApiError::internal("name generation failed")))
    }

    async fn dry_run_create(&self, key: &str, object: &T) -> Result<T, ApiError> {
        let name = &object.metadata().name;
        match self.storage.get(key, &storage::GetOptions::default()).await {
            Ok(_) => Err(ApiError::already_exists(&self.resource(), name)),
            Err(e) if e.is_not_found() => Ok(object.clone()),
            Err(e) => Err(ApiError::from_storage(e, &self.resource(), name)),
        }
    }

    /// AlreadyExists says "object is being deleted: " when the existing object has a deletionTimestamp.
    async fn create_error(&self, err: StorageError, key: &str, name: &str) -> ApiError {
        let mut api = ApiError::from_storage(err, &self.resource(), name);
        if api.is_already_exists()
            && let Ok(existing) = self.storage.get(key, &storage::GetOptions::default()).await
            && let Ok(existing) = self.decode(&existing)
            && existing.metadata().deletion_timestamp.is_some()
        {
            api.message = format!("object is being deleted: {}", api.message);
        }
        api
    }
}
