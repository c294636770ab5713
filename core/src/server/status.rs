//! Error responses as `metav1.Status` JSON, built in one place so that the typed `meta::Status` can replace
//! the hand-written body without touching the filters.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

/// The body of a failure `Status`, fields in upstream's order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatusBody<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: serde_json::Map<String, serde_json::Value>,
    status: &'static str,
    message: &'a str,
    reason: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<serde_json::Value>,
    code: u16,
}

/// A failure `Status` response: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",
/// "message":...,"reason":...,"details":...,"code":...}` with the matching HTTP status.
pub fn status_response(
    code: StatusCode,
    reason: &str,
    message: &str,
    details: Option<serde_json::Value>,
) -> Response {
    let body = StatusBody {
        kind: "Status",
        api_version: "v1",
        metadata: serde_json::Map::new(),
        status: "Failure",
        message,
        reason,
        details,
        code: code.as_u16(),
    };
    // Serializing this struct cannot fail: it holds only strings, numbers and JSON values.
    let json = serde_json::to_vec(&body).unwrap_or_default();
    let mut response = (code, json).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// 500 `InternalError`.
pub fn internal_error(message: &str) -> Response {
    status_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        message,
        None,
    )
}

/// 404 for a path nothing serves (upstream's `NotFound` handler).
pub fn not_found() -> Response {
    status_response(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
        Some(serde_json::json!({})),
    )
}

/// 405 for a served path with a method it does not serve.
pub fn method_not_allowed() -> Response {
    status_response(
        StatusCode::METHOD_NOT_ALLOWED,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        Some(serde_json::json!({})),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn body_shape() {
        let r = internal_error("boom");
        assert_eq!(r.status(), 500);
        assert_eq!(r.headers()["content-type"], "application/json");
        let body = r.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            std::str::from_utf8(&body).unwrap(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"boom","reason":"InternalError","code":500}"#
        );
    }
}
