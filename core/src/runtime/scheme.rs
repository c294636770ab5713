//! The scheme: which versions of which kinds a server serves, and how request bodies become hub objects and hub
//! objects become responses in any served version and media type.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::codec::{self, ApiVersionKind, CodecError, FieldValidation, MediaType};
use crate::meta::ListMeta;

use super::{
    ConversionError, GroupKind, GroupResource, GroupVersion, GroupVersionKind, List, PrinterColumn,
    Resource, Scope, Versioned,
};
use crate::validation::ErrorList;
use apiserver_gotext::quote as go_quote;

/// A request body decoded into the hub, with the warnings field validation produced.
#[derive(Debug)]
pub struct Decoded<H> {
    /// The object, converted to the hub and defaulted by its version.
    pub object: H,
    /// The group/version/kind the body declared (or the endpoint's, when it declared none).
    pub gvk: GroupVersionKind,
    /// `unknown field "spec.foo"` style messages when field validation is `Warn`.
    pub warnings: Vec<String>,
}

/// Why a body could not become a hub object; every variant but [`DecodeError::Invalid`] is a 400 BadRequest with
/// this text.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The version's defaults or its conversion to the hub refused fields of the object: a 422 `Invalid` naming
    /// each field and its value, as upstream's validation errors.
    #[error("{kind} {} is invalid: {}", go_quote(name), errors.aggregate())]
    Invalid {
        /// The object's kind, in the group the body was sent to.
        kind: GroupKind,
        /// The object's `metadata.name`.
        name: String,
        /// The field errors, with paths from the object's root.
        errors: ErrorList,
    },
    /// The bytes are not valid for the media type or the target type.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// Upstream: `the API version in the data (%s) does not match the expected API version (%v)`.
    #[error(
        "the API version in the data ({data}) does not match the expected API version ({expected})"
    )]
    VersionMismatch {
        /// The `apiVersion` the body declared.
        data: String,
        /// The `apiVersion` of the endpoint the body was sent to.
        expected: String,
    },
    /// Upstream: `%s in version %q cannot be handled as a %s: %v`.
    #[error("{kind} in version \"{version}\" cannot be handled as a {expected}: {reason}")]
    KindMismatch {
        /// The kind the body declared.
        kind: String,
        /// The version the body declared.
        version: String,
        /// The kind the endpoint serves.
        expected: String,
        /// Why the body could not be read as `expected`.
        reason: String,
    },
    /// The version is not one this kind is served in.
    #[error("no version \"{version}\" has been registered for {kind}")]
    UnknownVersion {
        /// The kind of the object.
        kind: String,
        /// The version asked for.
        version: String,
    },
}

/// Why a hub object could not be written in a version and format.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    /// The object could not be serialized in the media type.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The version is not one this kind is served in.
    #[error("no version \"{version}\" has been registered for {kind}")]
    UnknownVersion {
        /// The kind of the object.
        kind: String,
        /// The version asked for.
        version: String,
    },
}

/// One served version behind a type-erased face, so that a [`ResourceCodec`] can hold all versions of a hub.
trait VersionCodec<H>: Send + Sync {
    fn version(&self) -> &'static str;
    fn decode_json(
        &self,
        json: &[u8],
        validation: FieldValidation,
    ) -> Result<(H, Vec<String>), DecodeError>;
    fn decode_protobuf(&self, raw: &[u8]) -> Result<H, DecodeError>;
    /// The object in this version of `group` (the hub's, or another group the kind is also served in).
    fn encode(&self, object: &H, group: &str, format: MediaType) -> Result<Vec<u8>, CodecError>;
    /// An object as it is written among a list's items (JSON or protobuf).
    fn encode_item(&self, object: &H, format: MediaType) -> Result<Vec<u8>, CodecError>;
    fn encode_list(
        &self,
        meta: &ListMeta,
        items: &[H],
        group: &str,
        format: MediaType,
    ) -> Result<Vec<u8>, CodecError>;
    fn openapi_schema(&self, group: &str) -> serde_json::Value;
    /// The version's own schema (with its patch metadata), made once.
    fn patch_schema(&self) -> &serde_json::Value;
    /// Whether the schema declares CEL validation rules.
    fn has_rules(&self) -> bool;
    fn protobuf_tags(&self) -> Vec<(String, u32)>;
    /// The printer columns of this version's tables: its own, or the hub's.
    fn printer_columns(&self) -> &'static [PrinterColumn];
}

struct VersionOf<V: Versioned> {
    schema: std::sync::OnceLock<serde_json::Value>,
    has_rules: std::sync::OnceLock<bool>,
    /// For a [`Versioned::LOSSLESS`] version, the preferred version and the annotation its JSON is kept in.
    keeper: Option<Keeper<V::Hub>>,
    version: PhantomData<fn() -> V>,
}

/// What a lossless version cannot express is kept in an annotation, `<plural>.<group>/<preferred version>`, holding
/// the object's fields (all but `metadata`) as the preferred version writes them. Writing a hub object that the
/// version would lose adds the annotation; reading it back restores the object from it unless a client of this
/// version changed what this version does say (then the annotation is stale and dropped). The hub, and so every
/// other version, never sees it.
struct Keeper<H> {
    codec: Arc<dyn VersionCodec<H>>,
    annotation: String,
}

impl<V: Versioned> VersionOf<V> {
    /// The hub object in this version, with the keeper's annotation when the version alone would lose something;
    /// an object this version cannot express is an encoding error naming the object and its fields.
    fn wire(&self, hub: &V::Hub) -> Result<V, CodecError> {
        let cannot = |e: ConversionError| {
            CodecError::Encode(format!(
                "{} {} cannot be converted to {}: {e}",
                <V::Hub as Resource>::KIND,
                go_quote(&hub.metadata().name),
                V::VERSION
            ))
        };
        let wire = V::from_hub(hub).map_err(cannot)?;
        let Some(keeper) = &self.keeper else {
            return Ok(wire);
        };
        if wire.to_hub().is_ok_and(|back| back == *hub) {
            return Ok(wire);
        }
        let kept = keeper
            .codec
            .encode(hub, <V::Hub as Resource>::GROUP, MediaType::Json)
            .ok()
            .and_then(|json| serde_json::from_slice::<serde_json::Value>(&json).ok());
        let Some(serde_json::Value::Object(mut fields)) = kept else {
            return Ok(wire);
        };
        for envelope in ["apiVersion", "kind", "metadata"] {
            fields.remove(envelope);
        }
        let mut annotated = hub.clone();
        annotated.metadata_mut().annotations.insert(
            keeper.annotation.clone(),
            serde_json::Value::Object(fields).to_string(),
        );
        V::from_hub(&annotated).map_err(cannot)
    }

    /// A decoded object of this version (its defaults applied) in the hub, restored from the keeper's annotation
    /// when it is current.
    fn hub(&self, mut wire: V) -> Result<V::Hub, DecodeError> {
        let invalid = |wire: &V, e: ConversionError| DecodeError::Invalid {
            kind: GroupKind {
                group: <V::Hub as Resource>::GROUP.to_string(),
                kind: <V::Hub as Resource>::KIND.to_string(),
            },
            name: wire.object_name().to_string(),
            errors: e.into_errors(),
        };
        wire.set_defaults().map_err(|e| invalid(&wire, e))?;
        let mut hub = wire.to_hub().map_err(|e| invalid(&wire, e))?;
        let Some(keeper) = &self.keeper else {
            return Ok(hub);
        };
        let Some(kept) = hub.metadata_mut().annotations.remove(&keeper.annotation) else {
            return Ok(hub);
        };
        let Ok(serde_json::Value::Object(mut fields)) = serde_json::from_str(&kept) else {
            return Ok(hub);
        };
        fields.insert("metadata".into(), serde_json::json!({}));
        let restored = serde_json::to_vec(&fields).ok().and_then(|json| {
            keeper
                .codec
                .decode_json(&json, FieldValidation::Ignore)
                .ok()
        });
        let Some((mut restored, _)) = restored else {
            return Ok(hub);
        };
        *restored.metadata_mut() = hub.metadata().clone();
        match (V::from_hub(&restored), V::from_hub(&hub)) {
            (Ok(a), Ok(b)) if a == b => Ok(restored),
            _ => Ok(hub),
        }
    }
}

impl<V: Versioned> VersionCodec<V::Hub> for VersionOf<V> {
    fn version(&self) -> &'static str {
        V::VERSION
    }

    fn patch_schema(&self) -> &serde_json::Value {
        self.schema.get_or_init(V::openapi_schema)
    }

    fn printer_columns(&self) -> &'static [PrinterColumn] {
        V::PRINTER_COLUMNS.unwrap_or(<V::Hub as Resource>::PRINTER_COLUMNS)
    }

    fn has_rules(&self) -> bool {
        *self
            .has_rules
            .get_or_init(|| super::rules::has_rules(self.patch_schema()))
    }

    fn protobuf_tags(&self) -> Vec<(String, u32)> {
        V::protobuf_tags()
    }

    fn decode_json(
        &self,
        json: &[u8],
        validation: FieldValidation,
    ) -> Result<(V::Hub, Vec<String>), DecodeError> {
        let decoded = codec::decode_json::<V>(json, validation)?;
        Ok((self.hub(decoded.object)?, decoded.warnings))
    }

    fn decode_protobuf(&self, raw: &[u8]) -> Result<V::Hub, DecodeError> {
        let wire = V::decode(raw).map_err(|e| CodecError::Protobuf(e.to_string()))?;
        self.hub(wire)
    }

    fn encode(
        &self,
        object: &V::Hub,
        group: &str,
        format: MediaType,
    ) -> Result<Vec<u8>, CodecError> {
        let wire = self.wire(object)?;
        let api_version = GroupVersion::new(group, V::VERSION).api_version();
        encode_as(&api_version, <V::Hub as Resource>::KIND, &wire, format)
    }

    fn encode_item(&self, object: &V::Hub, format: MediaType) -> Result<Vec<u8>, CodecError> {
        let wire = self.wire(object)?;
        match format {
            MediaType::Json => {
                serde_json::to_vec(&wire).map_err(|e| CodecError::Encode(e.to_string()))
            }
            MediaType::Protobuf => Ok(wire.encode_to_vec()),
            // An item nested in a list: no self-described tag of its own.
            MediaType::Cbor => {
                let mut buf = Vec::new();
                codec::write_cbor(&mut buf, &wire)?;
                Ok(buf)
            }
            MediaType::Yaml => Err(CodecError::Encode(
                "a YAML list is not made of encoded items".into(),
            )),
        }
    }

    fn encode_list(
        &self,
        meta: &ListMeta,
        items: &[V::Hub],
        group: &str,
        format: MediaType,
    ) -> Result<Vec<u8>, CodecError> {
        let list = List {
            metadata: meta.clone(),
            items: items
                .iter()
                .map(|item| self.wire(item))
                .collect::<Result<Vec<V>, _>>()?,
        };
        let kind = format!("{}List", <V::Hub as Resource>::KIND);
        let api_version = GroupVersion::new(group, V::VERSION).api_version();
        encode_as(&api_version, &kind, &list, format)
    }

    /// The version's schema with what Kubernetes adds to every kind: `apiVersion` and `kind`, and the
    /// `x-kubernetes-group-version-kind` by which kubectl finds the schema of a manifest.
    fn openapi_schema(&self, group: &str) -> serde_json::Value {
        let mut schema = V::openapi_schema();
        if let serde_json::Value::Object(map) = &mut schema {
            let properties = map
                .entry("properties")
                .or_insert_with(|| serde_json::json!({}));
            if let serde_json::Value::Object(properties) = properties {
                properties.insert(
                    "apiVersion".into(),
                    serde_json::json!({ "type": "string", "description": "APIVersion defines the versioned schema of this representation of an object." }),
                );
                properties.insert(
                    "kind".into(),
                    serde_json::json!({ "type": "string", "description": "Kind is a string value representing the REST resource this object represents." }),
                );
            }
            map.insert(
                "x-kubernetes-group-version-kind".into(),
                serde_json::json!([{ "group": group, "version": V::VERSION, "kind": <V::Hub as Resource>::KIND }]),
            );
        }
        schema
    }
}

fn encode_as<T>(
    api_version: &str,
    kind: &str,
    value: &T,
    format: MediaType,
) -> Result<Vec<u8>, CodecError>
where
    T: serde::Serialize + prost::Message,
{
    match format {
        MediaType::Json => codec::encode_json(api_version, kind, value),
        MediaType::Yaml => codec::encode_yaml(api_version, kind, value),
        MediaType::Protobuf => codec::encode_protobuf(api_version, kind, value),
        MediaType::Cbor => codec::encode_cbor(api_version, kind, value),
    }
}

/// A hub type with its served versions: turns bodies of any served version into the hub and the hub into any served
/// version and media type. Registries, handlers and the watch cache share one per resource.
pub struct ResourceCodec<H: Resource> {
    versions: Vec<Arc<dyn VersionCodec<H>>>,
    storage_version: Option<&'static str>,
    /// The API group objects are read and written in on the wire: the hub's, unless
    /// [`ResourceCodec::in_group`] says otherwise. Storage always holds the hub's group.
    group: &'static str,
}

impl<H: Resource> Default for ResourceCodec<H> {
    fn default() -> Self {
        Self {
            versions: Vec::new(),
            storage_version: None,
            group: H::GROUP,
        }
    }
}

impl<H: Resource> Clone for ResourceCodec<H> {
    fn clone(&self) -> Self {
        Self {
            versions: self.versions.clone(),
            storage_version: self.storage_version,
            group: self.group,
        }
    }
}

impl<H: Resource> std::fmt::Debug for ResourceCodec<H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceCodec")
            .field("group", &self.group)
            .field("kind", &H::KIND)
            .field("versions", &self.versions().collect::<Vec<_>>())
            .field("storage_version", &self.storage_version_name())
            .finish()
    }
}

impl<H: Resource> ResourceCodec<H> {
    /// A codec that serves no version yet; add them with [`ResourceCodec::version`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Serves `V`; versions are listed in the order they are added. A [`Versioned::LOSSLESS`] version keeps what
    /// it cannot express in the first version added (the preferred one).
    pub fn version<V: Versioned<Hub = H>>(mut self) -> Self {
        self.versions.retain(|v| v.version() != V::VERSION);
        let keeper = self
            .versions
            .first()
            .filter(|_| V::LOSSLESS)
            .map(|preferred| Keeper {
                annotation: format!("{}.{}/{}", H::PLURAL, H::GROUP, preferred.version()),
                codec: preferred.clone(),
            });
        self.versions.push(Arc::new(VersionOf::<V> {
            schema: std::sync::OnceLock::new(),
            has_rules: std::sync::OnceLock::new(),
            keeper,
            version: PhantomData,
        }));
        self
    }

    /// The same kind in API group `group` as well as its own (upstream serves `events` in the core group and in
    /// `events.k8s.io` this way): objects read and written through this codec carry `group`'s `apiVersion`,
    /// bodies must declare it, discovery and OpenAPI describe the kind under it; what is stored is unchanged, so
    /// one store serves both groups ([`Store::in_group`](crate::registry::Store::in_group)).
    pub fn in_group(mut self, group: &'static str) -> Self {
        self.group = group;
        self
    }

    /// The API group this codec reads and writes: the hub's unless [`ResourceCodec::in_group`] changed it.
    pub fn group(&self) -> &'static str {
        self.group
    }

    /// `<plural>.<group>` in this codec's group, as errors name the resource.
    pub fn group_resource(&self) -> GroupResource {
        GroupResource {
            group: self.group.to_string(),
            resource: H::PLURAL.to_string(),
        }
    }

    /// `version` of this codec's group.
    pub fn group_version(&self, version: &str) -> GroupVersion {
        GroupVersion::new(self.group, version)
    }

    /// Stores objects as `V` (default: the first version added), checked by the compiler to be a version of
    /// this hub; `V` is served too if it was not added yet (after the versions added so far).
    ///
    /// ```ignore
    /// ResourceCodec::new().version::<v1beta1::Pizza>().version::<v1alpha1::Pizza>().storage_version::<v1alpha1::Pizza>()
    /// ```
    pub fn storage_version<V: Versioned<Hub = H>>(mut self) -> Self {
        if !self.serves(V::VERSION) {
            self = self.version::<V>();
        }
        self.storage_version = Some(V::VERSION);
        self
    }

    /// The protobuf tag of every field of every served version, by JSON path
    /// ([`check_protobuf_tags`](super::check_protobuf_tags)).
    pub fn protobuf_tags(&self) -> Vec<(&'static str, Vec<(String, u32)>)> {
        self.versions
            .iter()
            .map(|v| (v.version(), v.protobuf_tags()))
            .collect()
    }

    /// The served versions, in the order added.
    pub fn versions(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.versions.iter().map(|v| v.version())
    }

    /// Whether `version` is one of the served versions.
    pub fn serves(&self, version: &str) -> bool {
        self.versions.iter().any(|v| v.version() == version)
    }

    /// The same codec storing in `version` instead (a `--storage-version` override); `None` when `version` is not
    /// served.
    pub fn with_storage_version(&self, version: &str) -> Option<Self> {
        let served = self.find(version)?.version();
        Some(Self {
            storage_version: Some(served),
            ..self.clone()
        })
    }

    /// The version objects are stored in.
    pub fn storage_version_name(&self) -> Option<&'static str> {
        self.storage_version
            .or_else(|| self.versions.first().map(|v| v.version()))
    }

    fn storage_version_codec(&self) -> Option<&Arc<dyn VersionCodec<H>>> {
        let name = self.storage_version_name()?;
        self.find(name)
    }

    fn find(&self, version: &str) -> Option<&Arc<dyn VersionCodec<H>>> {
        self.versions.iter().find(|v| v.version() == version)
    }

    fn unknown_version(version: &str) -> DecodeError {
        DecodeError::UnknownVersion {
            kind: H::KIND.to_string(),
            version: version.to_string(),
        }
    }

    /// Decodes a request body sent to the endpoint of `endpoint_version`: the body's own `apiVersion`/`kind` must be
    /// that endpoint's (or absent), its version's defaults are applied, then it is converted to the hub.
    pub fn decode(
        &self,
        body: &[u8],
        format: MediaType,
        endpoint_version: &str,
        validation: FieldValidation,
    ) -> Result<Decoded<H>, DecodeError> {
        let version = self
            .find(endpoint_version)
            .ok_or_else(|| Self::unknown_version(endpoint_version))?;
        self.decode_in(body, format, version.as_ref(), endpoint_version, validation)
            .map_err(|e| match e {
                // Named in the group the body was sent to.
                DecodeError::Invalid {
                    mut kind,
                    name,
                    errors,
                } => {
                    kind.group = self.group.to_string();
                    DecodeError::Invalid { kind, name, errors }
                }
                other => other,
            })
    }

    fn decode_in(
        &self,
        body: &[u8],
        format: MediaType,
        version: &dyn VersionCodec<H>,
        endpoint_version: &str,
        validation: FieldValidation,
    ) -> Result<Decoded<H>, DecodeError> {
        match format {
            MediaType::Protobuf => {
                let (type_meta, raw) = codec::decode_protobuf(body)?;
                let gvk = self.check_type(&type_meta, endpoint_version)?;
                let object = version.decode_protobuf(&raw)?;
                Ok(Decoded {
                    object,
                    gvk,
                    warnings: Vec::new(),
                })
            }
            MediaType::Json | MediaType::Yaml | MediaType::Cbor => {
                let (json, mut warnings) = match format {
                    MediaType::Yaml => {
                        let (json, duplicates) = codec::yaml_to_json(body)?;
                        (std::borrow::Cow::Owned(json), duplicates)
                    }
                    // Checked and transcoded as upstream's decoder reads it; duplicate keys are
                    // already refused, so field validation is the JSON one.
                    MediaType::Cbor => (
                        std::borrow::Cow::Owned(codec::cbor_to_json(body)?),
                        Vec::new(),
                    ),
                    _ => (std::borrow::Cow::Borrowed(body), Vec::new()),
                };
                if validation == FieldValidation::Strict && !warnings.is_empty() {
                    return Err(CodecError::StrictDecoding(warnings).into());
                }
                if validation == FieldValidation::Ignore {
                    warnings.clear();
                }
                // The declared type is checked first, so that a body of another kind says so rather than
                // failing on its unknown fields.
                let type_meta = codec::peek_json_type_meta(&json)?;
                let gvk = self.check_type(&type_meta, endpoint_version)?;
                let (object, decode_warnings) = version.decode_json(&json, validation)?;
                warnings.extend(decode_warnings);
                Ok(Decoded {
                    object,
                    gvk,
                    warnings,
                })
            }
        }
    }

    /// Checks a body's declared type against the endpoint's, filling in what the body left out.
    fn check_type(
        &self,
        type_meta: &ApiVersionKind,
        endpoint_version: &str,
    ) -> Result<GroupVersionKind, DecodeError> {
        let (api_version, kind) = (type_meta.api_version.as_str(), type_meta.kind.as_str());
        let expected = self.group_version(endpoint_version);
        let gv = if api_version.is_empty() {
            expected.clone()
        } else {
            GroupVersion::parse_api_version(api_version).ok_or_else(|| {
                DecodeError::VersionMismatch {
                    data: api_version.to_string(),
                    expected: expected.to_string(),
                }
            })?
        };
        let kind = if kind.is_empty() { H::KIND } else { kind };
        if kind != H::KIND {
            return Err(DecodeError::KindMismatch {
                kind: kind.to_string(),
                version: gv.version.clone(),
                expected: H::KIND.to_string(),
                reason: format!(
                    "no kind \"{kind}\" is registered for version \"{gv}\" in this resource"
                ),
            });
        }
        if gv != expected {
            return Err(DecodeError::VersionMismatch {
                data: gv.to_string(),
                expected: expected.to_string(),
            });
        }
        Ok(gv.with_kind(kind))
    }

    /// Encodes a hub object as `version` in `format`.
    pub fn encode(
        &self,
        object: &H,
        version: &str,
        format: MediaType,
    ) -> Result<Vec<u8>, EncodeError> {
        Ok(self.encoding(version)?.encode(object, self.group, format)?)
    }

    /// A hub object as `version` shows it in JSON, as a value to work on (patches, field management, scale).
    pub fn encode_value(
        &self,
        object: &H,
        version: &str,
    ) -> Result<serde_json::Value, EncodeError> {
        let encoded = self.encode(object, version, MediaType::Json)?;
        serde_json::from_slice(&encoded)
            .map_err(|e| EncodeError::Codec(CodecError::Encode(e.to_string())))
    }

    /// A JSON value of `version` (its `apiVersion` and `kind` set here) into the hub, with defaults and without
    /// field validation: for values the server made itself.
    pub fn decode_value(&self, value: &serde_json::Value, version: &str) -> Result<H, DecodeError> {
        let mut value = value.clone();
        if let serde_json::Value::Object(map) = &mut value {
            map.insert(
                "apiVersion".into(),
                self.group_version(version).api_version().into(),
            );
            map.insert("kind".into(), H::KIND.into());
        }
        let bytes = serde_json::to_vec(&value).map_err(|e| CodecError::Encode(e.to_string()))?;
        Ok(self
            .decode(&bytes, MediaType::Json, version, FieldValidation::Ignore)?
            .object)
    }

    /// Encodes hub objects as a `<Kind>List` of `version` in `format`.
    pub fn encode_list(
        &self,
        meta: &ListMeta,
        items: &[H],
        version: &str,
        format: MediaType,
    ) -> Result<Vec<u8>, EncodeError> {
        Ok(self
            .encoding(version)?
            .encode_list(meta, items, self.group, format)?)
    }

    /// A hub object as `version` writes it among a list's items, in JSON or protobuf: the pieces
    /// [`ResourceCodec::encode_list_of_items`] puts together.
    pub fn encode_list_item(
        &self,
        object: &H,
        version: &str,
        format: MediaType,
    ) -> Result<Vec<u8>, EncodeError> {
        Ok(self.encoding(version)?.encode_item(object, format)?)
    }

    /// A `<Kind>List` of `version` from items encoded by [`ResourceCodec::encode_list_item`]: the same bytes as
    /// [`ResourceCodec::encode_list`] of the objects.
    pub fn encode_list_of_items(
        &self,
        meta: &ListMeta,
        items: &[bytes::Bytes],
        version: &str,
        format: MediaType,
    ) -> Result<Vec<u8>, EncodeError> {
        let items_len: usize = items.iter().map(|i| i.len() + 10).sum();
        let mut buf = Vec::with_capacity(items_len + 256);
        let mut writer = self.start_list(meta, version, format, Some(items), &mut buf)?;
        for item in items {
            writer.item(&mut buf, item);
        }
        writer.finish(&mut buf);
        Ok(buf)
    }

    /// Starts a `<Kind>List` of `version` in `buf`, to be continued with items encoded by
    /// [`ResourceCodec::encode_list_item`] as they come ([`ListWriter`](super::ListWriter)); protobuf needs `items`.
    pub fn start_list(
        &self,
        meta: &ListMeta,
        version: &str,
        format: MediaType,
        items: Option<&[bytes::Bytes]>,
        buf: &mut Vec<u8>,
    ) -> Result<super::ListWriter, EncodeError> {
        self.encoding(version)?;
        let kind = format!("{}List", H::KIND);
        let api_version = self.group_version(version).api_version();
        Ok(super::ListWriter::start(
            &api_version,
            &kind,
            meta,
            format,
            items,
            buf,
        )?)
    }

    /// The codec of a version objects are encoded in.
    fn encoding(&self, version: &str) -> Result<&Arc<dyn VersionCodec<H>>, EncodeError> {
        self.find(version)
            .ok_or_else(|| EncodeError::UnknownVersion {
                kind: H::KIND.to_string(),
                version: version.to_string(),
            })
    }

    /// Encodes an object the way it is kept in storage: the storage version, in `format`.
    pub fn encode_stored(&self, object: &H, format: MediaType) -> Result<Vec<u8>, EncodeError> {
        let codec = self
            .storage_version_codec()
            .ok_or_else(|| EncodeError::UnknownVersion {
                kind: H::KIND.to_string(),
                version: String::new(),
            })?;
        Ok(codec.encode(object, H::GROUP, format)?)
    }

    /// Decodes stored bytes of any served version, JSON or protobuf (told apart by the `k8s\0` prefix), leniently,
    /// applying that version's defaults: what was written by an older server version still reads. A stored object
    /// its version's conversion refuses is [`DecodeError::Invalid`], which the store answers as an internal error
    /// naming the object and its fields.
    pub fn decode_stored(&self, bytes: &[u8]) -> Result<H, DecodeError> {
        if codec::is_protobuf(bytes) {
            let (type_meta, raw) = codec::decode_protobuf(bytes)?;
            let version = self.stored_version(&type_meta)?;
            return version.decode_protobuf(&raw);
        }
        let type_meta = codec::peek_json_type_meta(bytes)?;
        let version = self.stored_version(&type_meta)?;
        Ok(version.decode_json(bytes, FieldValidation::Ignore)?.0)
    }

    fn stored_version(
        &self,
        type_meta: &ApiVersionKind,
    ) -> Result<&Arc<dyn VersionCodec<H>>, DecodeError> {
        let kind = type_meta.kind.as_str();
        let gv = GroupVersion::parse_api_version(&type_meta.api_version).unwrap_or_default();
        if kind != H::KIND || gv.group != H::GROUP {
            return Err(DecodeError::KindMismatch {
                kind: kind.to_string(),
                version: gv.version.clone(),
                expected: H::KIND.to_string(),
                reason: "stored object is of another kind".to_string(),
            });
        }
        self.find(&gv.version)
            .ok_or_else(|| Self::unknown_version(&gv.version))
    }

    /// The OpenAPI v3 schema of `version`'s root type.
    pub fn openapi_schema(&self, version: &str) -> Option<serde_json::Value> {
        self.find(version).map(|v| v.openapi_schema(self.group))
    }

    /// The schema a strategic merge patch of `version` is applied with: the version's OpenAPI v3 schema, whose
    /// `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` say which lists merge.
    pub fn patch_schema(&self, version: &str) -> Option<&serde_json::Value> {
        self.find(version).map(|v| v.patch_schema())
    }

    /// Compiles the CEL validation rules of every served version and checks their estimated costs, as
    /// kube-apiserver checks a CRD's rules when it is created: the refusals, each naming its version and rule.
    pub fn check_rules(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        for version in &self.versions {
            if !version.has_rules() {
                continue;
            }
            if let Err(found) = super::rules::check_rules_statically(version.patch_schema()) {
                let name = version.version();
                errors.extend(found.into_iter().map(|e| format!("{name}: {e}")));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The printer columns of `version`'s tables (its own, or the hub's); the hub's for a version not served.
    pub fn printer_columns(&self, version: &str) -> &'static [PrinterColumn] {
        self.find(version)
            .map_or(H::PRINTER_COLUMNS, |v| v.printer_columns())
    }

    /// Checks every served version's printer columns against that version's schema, as kube-apiserver checks a
    /// CRD's `additionalPrinterColumns` (a type it knows, a simple JSON path) and further: the path must lead
    /// through fields the schema declares, so a misspelt or absent field is refused at start instead of showing an
    /// empty column. Each error names the version by its index, as upstream's CRD validation does.
    pub fn check_printer_columns(&self) -> Result<(), Vec<String>> {
        let mut errors = Vec::new();
        for (index, version) in self.versions.iter().enumerate() {
            super::columns::check(
                version.printer_columns(),
                version.patch_schema(),
                &format!("spec.versions[{index}]"),
                version.version(),
                &mut errors,
            );
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// The errors of the CEL validation rules (`x-kubernetes-validations`) every served version declares, each
    /// checked on the object as that version writes it; `old` on an update (transition rules, ratcheting).
    pub fn rule_errors(&self, object: &H, old: Option<&H>) -> crate::validation::ErrorList {
        let mut errors = crate::validation::ErrorList::new();
        for version in &self.versions {
            let schema = version.patch_schema();
            if !version.has_rules() {
                continue;
            }
            let encode = |o: &H| {
                version
                    .encode(o, self.group, MediaType::Json)
                    .ok()
                    .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
            };
            let Some(new) = encode(object) else {
                continue;
            };
            let previous = old.and_then(encode);
            super::rules::check(schema, &new, previous.as_ref(), &mut errors);
        }
        errors
    }

    /// What discovery and OpenAPI need to know about this kind, without its type.
    pub fn describe(&self) -> KindDescription {
        KindDescription {
            group: self.group,
            kind: H::KIND,
            plural: H::PLURAL,
            singular: H::SINGULAR,
            namespaced: H::SCOPE == Scope::Namespaced,
            short_names: H::SHORT_NAMES,
            categories: H::CATEGORIES,
            subresources: H::SUBRESOURCES,
            custom_subresources: Vec::new(),
            read_only: false,
            watch: true,
            versions: self.versions().collect(),
            storage_version_hash: self
                .storage_version_name()
                .map(|version| storage_version_hash(H::GROUP, version, H::KIND))
                .unwrap_or_default(),
            schemas: self
                .versions
                .iter()
                .map(|v| (v.version(), v.openapi_schema(self.group)))
                .collect(),
        }
    }
}

/// Upstream's `discovery.StorageVersionHash`: the first 8 bytes of the SHA-256 of `group/version/kind` of the
/// storage version, in base64. It changes when the storage version does, which tells a storage-version migrator
/// that objects may need rewriting.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(
        &ring::digest::SHA256,
        format!("{group}/{version}/{kind}").as_bytes(),
    );
    base64::engine::general_purpose::STANDARD.encode(&digest.as_ref()[..8])
}

/// A kind as discovery and OpenAPI see it: names, scope and the versions it is served in.
#[derive(Clone, Debug)]
pub struct KindDescription {
    /// The API group the kind is served in.
    pub group: &'static str,
    /// The kind, e.g. `Pizza`.
    pub kind: &'static str,
    /// The resource name in URLs, e.g. `pizzas`.
    pub plural: &'static str,
    /// The lowercase singular name, e.g. `pizza`.
    pub singular: &'static str,
    /// Whether objects live in a namespace (`true`) or in the cluster scope.
    pub namespaced: bool,
    /// Abbreviations kubectl accepts, e.g. `pz`.
    pub short_names: &'static [&'static str],
    /// Groups of resources kubectl lists together, e.g. `all`.
    pub categories: &'static [&'static str],
    /// The stored subresources, e.g. `status`.
    pub subresources: &'static [&'static str],
    /// Subresources answered by the server's own code (`Api::subresource`).
    pub custom_subresources: Vec<SubresourceDescription>,
    /// Served by the server's own code with `get` and `list` (`Api::provided`), not by storage.
    pub read_only: bool,
    /// Answers `watch` (stored kinds do; provided ones when their code can).
    pub watch: bool,
    /// The served versions, the preferred one first.
    pub versions: Vec<&'static str>,
    /// Discovery's `storageVersionHash` ([`storage_version_hash`]); empty for kinds not kept in storage.
    pub storage_version_hash: String,
    /// The OpenAPI v3 schema of each served version's root type.
    pub schemas: BTreeMap<&'static str, serde_json::Value>,
}

/// How discovery lists a custom subresource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubresourceDescription {
    /// The subresource's name in URLs, e.g. `scale`.
    pub name: &'static str,
    /// The verbs discovery lists for it, e.g. `get`, `update`.
    pub verbs: &'static [&'static str],
    /// `(group, version, kind)` of the answer, if it is an object.
    pub response_kind: Option<(&'static str, &'static str, &'static str)>,
}

#[cfg(test)]
mod tests {
    /// Values kube-apiserver shows in discovery (`kubectl get --raw /api/v1`, `/apis/apps/v1`).
    #[test]
    fn storage_version_hashes_are_upstreams() {
        assert_eq!(super::storage_version_hash("", "v1", "Pod"), "xPOwRZ+Yhw8=");
        assert_eq!(
            super::storage_version_hash("apps", "v1", "Deployment"),
            "8aSe+NMegvE="
        );
    }

    use super::*;
    use crate::meta::ObjectMeta;
    use crate::runtime::{PrinterColumn, Scope};
    use serde::{Deserialize, Serialize};

    /// A hub written by hand, as `#[derive(Hub)]` would.
    #[derive(Clone, Debug, Default, PartialEq)]
    struct Widget {
        metadata: ObjectMeta,
        size: i64,
    }

    impl Resource for Widget {
        const GROUP: &'static str = "example.com";
        const KIND: &'static str = "Widget";
        const PLURAL: &'static str = "widgets";
        const SINGULAR: &'static str = "widget";
        const SCOPE: Scope = Scope::Namespaced;
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

    /// Its v1, written by hand, as `#[derive(Versioned)]` would; the default size is 1.
    #[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message)]
    struct WidgetV1 {
        #[prost(message, required, tag = "1")]
        #[serde(default)]
        metadata: ObjectMeta,
        #[prost(int64, optional, tag = "2")]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<i64>,
    }

    impl Versioned for WidgetV1 {
        type Hub = Widget;
        const VERSION: &'static str = "v1";
        fn set_defaults(&mut self) -> Result<(), ConversionError> {
            self.size.get_or_insert(1);
            Ok(())
        }
        /// A negative size is refused, as a conversion that can fail does.
        fn to_hub(&self) -> Result<Widget, ConversionError> {
            let size = self.size.unwrap_or_default();
            if size < 0 {
                let error = ConversionError::invalid(&size, "must not be negative");
                return Err(error.within("size"));
            }
            Ok(Widget {
                metadata: self.metadata.clone(),
                size,
            })
        }
        fn from_hub(hub: &Widget) -> Result<Self, ConversionError> {
            Ok(WidgetV1 {
                metadata: hub.metadata.clone(),
                size: Some(hub.size),
            })
        }
        fn object_name(&self) -> &str {
            &self.metadata.name
        }
    }

    fn codec() -> ResourceCodec<Widget> {
        ResourceCodec::new().version::<WidgetV1>()
    }

    #[test]
    fn decodes_defaults_and_round_trips_every_format() {
        let body = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}"#;
        let decoded = codec()
            .decode(body, MediaType::Json, "v1", FieldValidation::Strict)
            .unwrap();
        assert_eq!(decoded.object.size, 1);
        assert_eq!(decoded.gvk.to_string(), "example.com/v1, Kind=Widget");
        for format in MediaType::ALL {
            let bytes = codec().encode(&decoded.object, "v1", format).unwrap();
            let back = codec()
                .decode(&bytes, format, "v1", FieldValidation::Strict)
                .unwrap();
            assert_eq!(back.object, decoded.object, "{format:?}");
        }
        let stored = codec()
            .encode_stored(&decoded.object, MediaType::Json)
            .unwrap();
        assert_eq!(codec().decode_stored(&stored).unwrap(), decoded.object);
    }

    /// A conversion's field errors are a 422's: the path from the root, the value sent, the group the body was
    /// sent to; a stored object that no longer converts is an error naming it.
    #[test]
    fn a_refused_conversion_names_the_field_and_the_value() {
        let body = br#"{"apiVersion":"archive.example.com/v1","kind":"Widget","metadata":{"name":"w"},"size":-2}"#;
        let archive = codec().in_group("archive.example.com");
        let err = archive
            .decode(body, MediaType::Json, "v1", FieldValidation::Strict)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Widget.archive.example.com \"w\" is invalid: size: Invalid value: -2: must not be negative"
        );
        let DecodeError::Invalid { errors, .. } = err else {
            panic!("not Invalid: {err}");
        };
        assert_eq!(errors.iter().next().unwrap().field, "size");
        let stored =
            br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"size":-2}"#;
        assert_eq!(
            codec().decode_stored(stored).unwrap_err().to_string(),
            "Widget.example.com \"w\" is invalid: size: Invalid value: -2: must not be negative"
        );
    }

    #[test]
    fn wrong_version_or_kind_is_refused_with_upstream_text() {
        let other_version =
            br#"{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"name":"w"}}"#;
        let err = codec()
            .decode(
                other_version,
                MediaType::Json,
                "v1",
                FieldValidation::Strict,
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the API version in the data (example.com/v2) does not match the expected API version (example.com/v1)"
        );
        let other_kind =
            br#"{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"w"}}"#;
        let err = codec()
            .decode(other_kind, MediaType::Json, "v1", FieldValidation::Strict)
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Gadget in version \"v1\" cannot be handled as a Widget"),
            "{err}"
        );
        let unknown = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"color":"red"}"#;
        let err = codec()
            .decode(unknown, MediaType::Json, "v1", FieldValidation::Strict)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "strict decoding error: unknown field \"color\""
        );
        let warned = codec()
            .decode(unknown, MediaType::Json, "v1", FieldValidation::Warn)
            .unwrap();
        assert_eq!(warned.warnings, vec!["unknown field \"color\"".to_string()]);
    }

    /// A codec in a second group speaks that group on the wire and stores in the hub's, so one storage serves both.
    #[test]
    fn a_second_group_is_on_the_wire_not_in_storage() {
        let archive = codec().in_group("archive.example.com");
        let body =
            br#"{"apiVersion":"archive.example.com/v1","kind":"Widget","metadata":{"name":"w"}}"#;
        let decoded = archive
            .decode(body, MediaType::Json, "v1", FieldValidation::Strict)
            .unwrap();
        assert_eq!(
            decoded.gvk.to_string(),
            "archive.example.com/v1, Kind=Widget"
        );
        let value = archive.encode_value(&decoded.object, "v1").unwrap();
        assert_eq!(value["apiVersion"], "archive.example.com/v1");
        let list = archive
            .encode_list(
                &ListMeta::default(),
                std::slice::from_ref(&decoded.object),
                "v1",
                MediaType::Json,
            )
            .unwrap();
        let list: serde_json::Value = serde_json::from_slice(&list).unwrap();
        assert_eq!(list["apiVersion"], "archive.example.com/v1");
        let protobuf = archive
            .encode(&decoded.object, "v1", MediaType::Protobuf)
            .unwrap();
        assert_eq!(
            codec::decode_protobuf(&protobuf).unwrap().0.api_version,
            "archive.example.com/v1"
        );

        // Stored once, in the hub's group, and read back by either codec.
        let stored = archive
            .encode_stored(&decoded.object, MediaType::Json)
            .unwrap();
        assert_eq!(
            codec::peek_json_type_meta(&stored).unwrap().api_version,
            "example.com/v1"
        );
        assert_eq!(codec().decode_stored(&stored).unwrap(), decoded.object);
        assert_eq!(archive.decode_stored(&stored).unwrap(), decoded.object);

        // The hub's group is refused where the second one is expected, and the other way round.
        let err = archive
            .decode(
                br#"{"apiVersion":"example.com/v1","kind":"Widget"}"#,
                MediaType::Json,
                "v1",
                FieldValidation::Strict,
            )
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the API version in the data (example.com/v1) does not match the expected API version (archive.example.com/v1)"
        );
        assert!(
            codec()
                .decode(body, MediaType::Json, "v1", FieldValidation::Strict)
                .is_err()
        );

        let description = archive.describe();
        assert_eq!(description.group, "archive.example.com");
        assert_eq!(
            description.schemas["v1"]["x-kubernetes-group-version-kind"][0]["group"],
            "archive.example.com"
        );
        assert_eq!(
            archive.group_resource().to_string(),
            "widgets.archive.example.com"
        );
    }
}
