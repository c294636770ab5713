//! Audit (upstream's `WithAudit`, right after authentication): asks the policy at which level the request is
//! recorded, writes `RequestReceived` at once, `ResponseStarted` when a long-running response begins,
//! `ResponseComplete` once the response body has been sent (or the client went away), and `Panic` when the
//! handler panicked. Request and response bodies are copied as they stream past, never buffered ahead of the
//! handler, so the handler's own limits still apply.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use bytes::Bytes;
use futures::FutureExt;
use http::HeaderMap;
use http::header::{CONTENT_TYPE, USER_AGENT};
use http_body::{Frame, SizeHint};
use serde_json::Value;

use super::AuditId;
use super::authorization::attributes;
use super::header_str;
use super::panic::panic_message;
use super::timeout::is_long_running;
use crate::audit::{
    AuditContext, Auditor, Event, Level, ObjectReference, ResponseStatus, Stage, UserInfo,
    strip_managed_fields,
};
use crate::auth::{Attributes, User};
use crate::meta::{MicroTime, Status};
use crate::request::{MAX_REQUEST_BODY_BYTES, RequestInfo};
use crate::server::ConnectionInfo;
use crate::server::status::internal_error;

/// The most of a response body copied into an event; a larger one is left out.
const MAX_AUDITED_RESPONSE_BYTES: usize = 3 * 1024 * 1024;

/// Records the request's stages as the policy asks.
pub async fn audit(State(auditor): State<Arc<Auditor>>, request: Request, next: Next) -> Response {
    let (Some(info), Some(user)) = (
        request.extensions().get::<RequestInfo>(),
        request.extensions().get::<User>(),
    ) else {
        return next.run(request).await;
    };
    let attributes = attributes(user, info);
    let config = auditor.evaluate(&attributes);
    if config.level == Level::None {
        return next.run(request).await;
    }
    let long_running = is_long_running(info);
    // The request body is copied for the request object (level Request and up) and for the name of the
    // object a create or update is about.
    let level = config.level;
    let wants_request_body =
        level >= Level::Request || matches!(attributes.verb.as_str(), "create" | "update");
    let is_delete = matches!(attributes.verb.as_str(), "delete" | "deletecollection");
    let event = new_event(&request, attributes);
    let context = AuditContext::new(auditor, config, event);
    if context.emit(Stage::RequestReceived).is_err() {
        return internal_error("failed to store audit event");
    }

    let request_body: Arc<Mutex<Option<Vec<u8>>>> = Arc::default();
    let request_type = content_type(request.headers());
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(context.clone());
    let body = if wants_request_body {
        let slot = request_body.clone();
        Observed::wrap(body, Some(MAX_REQUEST_BODY_BYTES), move |bytes| {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = bytes;
        })
    } else {
        body
    };
    let request = Request::from_parts(parts, body);

    let response = match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => {
            let message = panic_message(&*panic).unwrap_or_default();
            context.update(|event| {
                event.response_status = Some(ResponseStatus {
                    status: "Failure".into(),
                    message: format!("APIServer panic'd: {message}"),
                    reason: "InternalError".into(),
                    ..ResponseStatus::code(500)
                });
            });
            let _ = context.emit(Stage::Panic);
            std::panic::resume_unwind(panic);
        }
    };

    let code = response.status().as_u16();
    context.update(|event| event.response_status = Some(ResponseStatus::code(code)));
    if long_running {
        let _ = context.emit(Stage::ResponseStarted);
    }
    // A Status body (errors, and deletes that answer with one) is copied at every level; other bodies only
    // for RequestResponse, never for watches.
    let capture = !long_running && (level == Level::RequestResponse || code >= 300 || is_delete);
    let response_type = content_type(response.headers());
    let (parts, body) = response.into_parts();
    let finish = move |response_body: Option<Vec<u8>>| {
        let request_body = request_body
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let omit_managed_fields = context.omits_managed_fields();
        context.update(|event| {
            if let Some(body) = request_body {
                if level >= Level::Request {
                    if let Some(object) = to_json(&body, &request_type) {
                        complete_object_ref(event, &ObjectHead::of_value(&object));
                        event.request_object = Some(trimmed(object, omit_managed_fields));
                    }
                } else if let Some(head) = ObjectHead::parse(&body, &request_type) {
                    complete_object_ref(event, &head);
                }
            }
            if let Some(body) = response_body {
                if let Some(status) = as_status(&body, &response_type) {
                    event.response_status = Some(ResponseStatus::from_status(&status, code));
                }
                if level == Level::RequestResponse {
                    event.response_object =
                        to_json(&body, &response_type).map(|v| trimmed(v, omit_managed_fields));
                }
            }
        });
        let _ = context.emit(Stage::ResponseComplete);
    };
    let limit = capture.then_some(MAX_AUDITED_RESPONSE_BYTES);
    Response::from_parts(parts, Observed::wrap(body, limit, finish))
}

/// The event as it stands when the request arrives; it takes the user and the object's coordinates from
/// `attributes` (the policy's input, not needed after).
pub(super) fn new_event(request: &Request, attributes: Attributes) -> Event {
    let now = MicroTime::now();
    let Attributes {
        user,
        verb,
        is_resource_request,
        namespace,
        api_group,
        api_version,
        resource,
        subresource,
        name,
        ..
    } = attributes;
    let object_ref = is_resource_request.then(|| ObjectReference {
        resource,
        namespace,
        name,
        api_group,
        api_version,
        subresource,
        ..ObjectReference::default()
    });
    Event {
        kind: "Event",
        api_version: "audit.k8s.io/v1",
        level: Level::None,
        audit_id: request
            .extensions()
            .get::<AuditId>()
            .map(|a| a.0.clone())
            .unwrap_or_default(),
        stage: Stage::RequestReceived,
        request_uri: request
            .uri()
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_default(),
        verb,
        user: UserInfo::from(user),
        impersonated_user: None,
        source_ips: source_ips(request),
        user_agent: header_str(request.headers(), USER_AGENT).to_string(),
        object_ref,
        response_status: None,
        request_object: None,
        response_object: None,
        request_received_timestamp: now,
        stage_timestamp: now,
        annotations: Default::default(),
    }
}

/// upstream's `SourceIPs`: `X-Forwarded-For`, then `X-Real-Ip`, then the peer, without repeats.
pub fn source_ips(request: &Request) -> Vec<String> {
    let mut ips: Vec<String> = Vec::new();
    let header = |name: &str| header_str(request.headers(), name);
    for ip in header("x-forwarded-for").split(',') {
        let ip = ip.trim();
        if ip.parse::<std::net::IpAddr>().is_ok() {
            ips.push(ip.to_string());
        }
    }
    let real = header("x-real-ip");
    let real = real.trim();
    if real.parse::<std::net::IpAddr>().is_ok() && !ips.iter().any(|i| i == real) {
        ips.push(real.to_string());
    }
    if let Some(peer) = request.extensions().get::<ConnectionInfo>() {
        let peer = peer.remote_addr.ip().to_string();
        if !ips.contains(&peer) {
            ips.push(peer);
        }
    }
    ips
}

fn content_type(headers: &HeaderMap) -> String {
    header_str(headers, CONTENT_TYPE).to_ascii_lowercase()
}

/// A JSON, YAML or CBOR body as JSON; `None` for protobuf and anything that does not parse.
fn to_json(body: &[u8], content_type: &str) -> Option<Value> {
    if body.is_empty() || content_type.contains("protobuf") {
        return None;
    }
    if content_type.contains("cbor") {
        return serde_json::from_slice(&crate::codec::cbor_to_json(body).ok()?).ok();
    }
    if content_type.contains("yaml") {
        let (json, _) = crate::codec::yaml_to_json(body).ok()?;
        return serde_json::from_slice(&json).ok();
    }
    serde_json::from_slice(body).ok()
}

/// The body as a `Status`, if it is one (JSON, YAML, CBOR or protobuf).
fn as_status(body: &[u8], content_type: &str) -> Option<Status> {
    if content_type.contains("protobuf") {
        let unknown = crate::codec::decode_unknown(body).ok()?;
        if unknown.type_meta?.kind.as_deref() != Some("Status") {
            return None;
        }
        return <Status as prost::Message>::decode(unknown.raw?.as_slice()).ok();
    }
    let value = to_json(body, content_type)?;
    if value.get("kind").and_then(Value::as_str) != Some("Status") {
        return None;
    }
    serde_json::from_value(value).ok()
}

fn trimmed(mut object: Value, omit_managed_fields: bool) -> Value {
    if omit_managed_fields {
        strip_managed_fields(&mut object);
    }
    object
}

/// What an object's metadata says of it, read without building the whole object.
#[derive(Default, serde::Deserialize)]
#[serde(default)]
struct ObjectHead {
    metadata: HeadMeta,
}

#[derive(Default, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct HeadMeta {
    name: String,
    namespace: String,
    uid: String,
    resource_version: String,
}

impl ObjectHead {
    /// From a JSON (or YAML, or CBOR) body; `None` for protobuf and what does not parse.
    fn parse(body: &[u8], content_type: &str) -> Option<ObjectHead> {
        if content_type.contains("yaml") || content_type.contains("cbor") {
            return to_json(body, content_type).map(|v| Self::of_value(&v));
        }
        if body.is_empty() || content_type.contains("protobuf") {
            return None;
        }
        serde_json::from_slice(body).ok()
    }

    fn of_value(object: &Value) -> ObjectHead {
        let meta = object.get("metadata");
        let field = |name: &str| {
            meta.and_then(|m| m.get(name))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        ObjectHead {
            metadata: HeadMeta {
                name: field("name"),
                namespace: field("namespace"),
                uid: field("uid"),
                resource_version: field("resourceVersion"),
            },
        }
    }
}

/// Fills what the URL did not say from the request object (a create's name, an update's uid and version).
fn complete_object_ref(event: &mut Event, head: &ObjectHead) {
    let Some(object_ref) = event.object_ref.as_mut() else {
        return;
    };
    let meta = &head.metadata;
    for (slot, value) in [
        (&mut object_ref.namespace, &meta.namespace),
        (&mut object_ref.name, &meta.name),
        (&mut object_ref.uid, &meta.uid),
        (&mut object_ref.resource_version, &meta.resource_version),
    ] {
        if slot.is_empty() {
            slot.clone_from(value);
        }
    }
}

type Finish = Box<dyn FnOnce(Option<Vec<u8>>) + Send>;

/// A body that copies what passes through it (up to a limit, if one is given) and, once, when it ends or is
/// dropped, hands the copy to `finish` (`None` when nothing was copied, the body was cut short or too large).
struct Observed {
    inner: Body,
    copy: Option<Vec<u8>>,
    limit: usize,
    finish: Option<Finish>,
}

impl Observed {
    fn wrap(
        inner: Body,
        limit: Option<usize>,
        finish: impl FnOnce(Option<Vec<u8>>) + Send + 'static,
    ) -> Body {
        Body::new(Observed {
            inner,
            copy: limit.map(|_| Vec::new()),
            limit: limit.unwrap_or(0),
            finish: Some(Box::new(finish)),
        })
    }

    fn finish(&mut self, complete: bool) {
        if let Some(finish) = self.finish.take() {
            finish(self.copy.take().filter(|_| complete));
        }
    }
}

impl http_body::Body for Observed {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(copy), Some(data)) = (this.copy.as_mut(), frame.data_ref()) {
                    if copy.len() + data.len() > this.limit {
                        this.copy = None;
                    } else {
                        copy.extend_from_slice(data);
                    }
                }
            }
            Poll::Ready(Some(Err(_))) => this.copy = None,
            Poll::Ready(None) => this.finish(true),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        let complete = http_body::Body::is_end_stream(&self.inner);
        self.finish(complete);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::{BatchConfig, Policy, Sink};
    use crate::auth::{AlwaysAllow, Anonymous};
    use crate::request::RequestInfoFactory;
    use crate::server::FilterChain;
    use crate::server::filters::InFlightLimits;
    use axum::Router;
    use axum::routing::get;
    use tower::ServiceExt;

    #[derive(Default)]
    struct Collected(Mutex<Vec<Value>>);

    #[async_trait::async_trait]
    impl Sink for Collected {
        fn name(&self) -> &'static str {
            "test"
        }
        async fn write(&self, events: &[Bytes]) -> Result<(), String> {
            let mut all = self.0.lock().unwrap();
            all.extend(events.iter().map(|e| serde_json::from_slice(e).unwrap()));
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_panic_is_recorded_at_the_panic_stage() {
        let policy = Policy::parse(
            b"apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
        )
        .unwrap();
        let collected = Arc::new(Collected::default());
        let auditor = Arc::new(Auditor::new(
            policy,
            vec![collected.clone()],
            BatchConfig {
                buffer_size: 100,
                max_size: 100,
                max_wait: std::time::Duration::from_secs(60),
            },
        ));
        let app = FilterChain {
            request_info: Arc::new(RequestInfoFactory::default()),
            authenticator: Arc::new(Anonymous),
            authorizer: Arc::new(AlwaysAllow),
            request_timeout: std::time::Duration::ZERO,
            limits: InFlightLimits::new(0, 0),
            metrics: Arc::default(),
            auditor: Some(auditor.clone()),
        }
        .apply(Router::new().route(
            "/apis/g/v1/things",
            get(|| async {
                if true {
                    panic!("the oven caught fire");
                }
                "unreachable"
            }),
        ));
        let request = Request::get("/apis/g/v1/things")
            .body(Body::empty())
            .unwrap();
        let response = app.oneshot(request).await.unwrap();
        assert_eq!(response.status(), 500);
        let id = response.headers()["audit-id"].to_str().unwrap().to_string();
        auditor.shutdown().await;
        let events = collected.0.lock().unwrap().clone();
        let stages: Vec<&str> = events
            .iter()
            .map(|e| e["stage"].as_str().unwrap())
            .collect();
        assert_eq!(stages, ["RequestReceived", "Panic"]);
        assert!(events.iter().all(|e| e["auditID"] == id.as_str()));
        assert_eq!(
            events[1]["responseStatus"],
            serde_json::json!({"metadata": {}, "status": "Failure",
                "message": "APIServer panic'd: the oven caught fire", "reason": "InternalError", "code": 500})
        );
        assert_eq!(events[1]["user"]["username"], "system:anonymous");
        assert_eq!(events[1]["verb"], "list");
    }

    #[test]
    fn cbor_bodies_are_read_as_json() {
        let object = serde_json::json!({"metadata": {"name": "salami", "namespace": "", "uid": "u1",
            "resourceVersion": "7"}, "spec": {"cost": 0.5}});
        let cbor = crate::codec::encode_cbor("v1alpha1", "Topping", &object).unwrap();
        for content_type in ["application/cbor", "application/apply-patch+cbor"] {
            let json = to_json(&cbor, content_type).unwrap();
            assert_eq!(json["kind"], "Topping");
            assert_eq!(json["spec"]["cost"], 0.5);
            let head = ObjectHead::parse(&cbor, content_type).unwrap();
            assert_eq!(head.metadata.name, "salami");
            assert_eq!(head.metadata.resource_version, "7");
        }
        // Not CBOR: nothing, not a panic.
        assert!(to_json(b"{}", "application/cbor").is_none());
        let status = Status::from(&crate::registry::ApiError::new(404, "NotFound", "gone"));
        let cbor = crate::codec::encode_cbor_document(&status).unwrap();
        let read = as_status(&cbor, "application/cbor").unwrap();
        assert_eq!((read.code, read.message.as_str()), (404, "gone"));
    }
}
