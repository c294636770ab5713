//! What every verb handler gets: the parsed request, who made it, where warnings go, and the body reader.

use std::sync::Arc;

use axum::body::Body;
use bytes::Bytes;
use bytes::BytesMut;
use http::HeaderMap;
use http_body_util::BodyExt;

use super::output::Output;
use super::params::Params;
use crate::audit::AuditContext;
use crate::auth::User;
use crate::codec::{CodecError, FieldValidation, MediaType, negotiate_input};
use crate::metrics::Metrics;
use crate::registry::ApiError;
use crate::request::MAX_REQUEST_BODY_BYTES;
use crate::request::RequestInfo;
use crate::server::{ShutdownSignal, Warnings};

/// How much of an oversized body is read and dropped before answering 413.
const DRAIN_LIMIT: usize = 4 * 1024 * 1024;

/// One request to a resource endpoint, parsed once.
pub(crate) struct Context {
    pub info: RequestInfo,
    pub headers: HeaderMap,
    pub params: Params,
    pub user: User,
    pub warnings: Warnings,
    /// Ends watch streams when the server drains.
    pub shutdown: Option<ShutdownSignal>,
    /// Where watches count their events.
    pub metrics: Option<Arc<Metrics>>,
    /// The request's audit event, for admission plugins' annotations.
    pub audit: Option<AuditContext>,
}

impl Context {
    /// The namespace of the request, `None` for cluster scope or all namespaces.
    pub fn namespace(&self) -> Option<&str> {
        Some(self.info.namespace.as_str()).filter(|ns| !ns.is_empty())
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }

    pub fn version(&self) -> &str {
        &self.info.api_version
    }

    pub fn header(&self, name: http::header::HeaderName) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The decoder for the body's `Content-Type` (415 with upstream's text when unsupported).
    pub fn input_media_type(&self) -> Result<MediaType, ApiError> {
        negotiate_input(
            self.header(http::header::CONTENT_TYPE),
            &MediaType::ALL,
            false,
        )
        .map_err(codec_error)
    }

    /// Reads the body, refusing more than [`MAX_REQUEST_BODY_BYTES`] with 413 (upstream's `limitedReadBody`). The
    /// excess of a body not much larger is read and dropped first, so that the client, still sending, gets the
    /// 413 rather than a broken connection.
    pub async fn read_body(&self, body: Body) -> Result<Bytes, ApiError> {
        let too_large =
            || ApiError::request_entity_too_large(&format!("limit is {MAX_REQUEST_BODY_BYTES}"));
        let declared = self
            .header(http::header::CONTENT_LENGTH)
            .and_then(|v| v.parse::<usize>().ok());
        if declared.is_some_and(|len| len > MAX_REQUEST_BODY_BYTES + DRAIN_LIMIT) {
            return Err(too_large());
        }
        let mut body = body;
        let mut buf = BytesMut::new();
        let mut seen = 0usize;
        while let Some(frame) = body.frame().await {
            let frame = frame
                .map_err(|e| ApiError::bad_request(format!("error reading request body: {e}")))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            seen += data.len();
            if seen > MAX_REQUEST_BODY_BYTES + DRAIN_LIMIT {
                break;
            }
            if seen <= MAX_REQUEST_BODY_BYTES {
                buf.extend_from_slice(&data);
            }
        }
        if seen > MAX_REQUEST_BODY_BYTES {
            return Err(too_large());
        }
        Ok(buf.freeze())
    }

    /// Passes decode warnings (`unknown field "spec.x"`) and strategy warnings on as `Warning` headers.
    pub fn warn_all(&self, warnings: &[String]) {
        for warning in warnings {
            self.warnings.add(warning);
        }
    }
}

/// What every create, update and patch reads from the query before anything else.
pub(crate) struct WriteOptions {
    pub output: Output,
    pub dry_run: bool,
    pub validation: FieldValidation,
}

impl WriteOptions {
    /// The negotiated answer, `dryRun` and `fieldValidation` (and a checked `fieldManager`); option errors name `options_kind`
    /// (`CreateOptions`, ...).
    pub fn parse(context: &Context, options_kind: &str) -> Result<Self, ApiError> {
        // Checked first, as upstream; the handlers read it again for the field manager.
        context.params.field_manager(options_kind)?;
        Ok(WriteOptions {
            output: Output::negotiate(context, false)?,
            dry_run: context.params.dry_run(options_kind)?,
            validation: context.params.field_validation(options_kind)?,
        })
    }
}

/// A codec error as the API error with the same code, reason and text.
pub(crate) fn codec_error(err: CodecError) -> ApiError {
    ApiError::new(err.code(), err.reason(), err.to_string())
}
