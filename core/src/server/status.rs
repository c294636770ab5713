//! Error responses of the filters and fallbacks: a [`Status`] written as JSON, in one place.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};

use crate::meta::{Status, StatusDetails, reason};

/// Writes a `Status` as the JSON response, with its `code` as the HTTP status (500 if the code is not a valid
/// HTTP status). Content negotiation (YAML, protobuf) comes with the codecs; filters answer in JSON, as
/// upstream's do before a group version is known.
pub fn status_response(status: &Status) -> Response {
    let code = u16::try_from(status.code)
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    // Serializing a Status cannot fail: it holds only strings, numbers and lists of them.
    let json = serde_json::to_vec(status).unwrap_or_default();
    let mut response = (code, json).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// 500 `InternalError`.
pub fn internal_error(message: &str) -> Response {
    status_response(&Status::failure(500, reason::INTERNAL_ERROR, message))
}

/// 404 for a path nothing serves (upstream's `NotFound` handler, with empty details).
pub fn not_found() -> Response {
    let mut status = Status::failure(
        404,
        reason::NOT_FOUND,
        "the server could not find the requested resource",
    );
    status.details = Some(StatusDetails::default());
    status_response(&status)
}

/// 405 for a served path with a method it does not serve.
pub fn method_not_allowed() -> Response {
    let mut status = Status::failure(
        405,
        reason::METHOD_NOT_ALLOWED,
        "the server does not allow this method on the requested resource",
    );
    status.details = Some(StatusDetails::default());
    status_response(&status)
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
