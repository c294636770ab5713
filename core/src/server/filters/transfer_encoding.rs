//! Transfer codings other than `chunked` are refused with 501, as Go's `net/http` server (under every upstream API
//! server) refuses them before any handler runs. hyper accepts `Transfer-Encoding: gzip, chunked` and hands on
//! the still-gzipped body; one strict rule is also the safest against request smuggling.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, Version, header};

use crate::meta::Status;
use crate::server::status::status_response;

/// Answers 501 for a request whose `Transfer-Encoding` is anything but one `chunked` field.
pub async fn refuse_unsupported_transfer_encoding(request: Request, next: Next) -> Response {
    match unsupported(&request) {
        None => next.run(request).await,
        Some(message) => {
            // No reason: upstream's `StatusReason` has none for 501.
            let mut response = status_response(&Status::failure(501, "", message));
            // The body cannot be read, so the connection cannot carry another request.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            response
        }
    }
}

/// Go's `parseTransferEncoding`: ignored before HTTP/1.1, otherwise exactly one field, `chunked`.
fn unsupported(request: &Request) -> Option<String> {
    let fields: Vec<&HeaderValue> = request
        .headers()
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .collect();
    if fields.is_empty() || request.version() < Version::HTTP_11 {
        return None;
    }
    let text = |v: &HeaderValue| String::from_utf8_lossy(v.as_bytes()).into_owned();
    if fields.len() != 1 {
        let quoted: Vec<String> = fields.iter().map(|v| format!("{:?}", text(v))).collect();
        return Some(format!(
            "too many transfer encodings: [{}]",
            quoted.join(" ")
        ));
    }
    let value = text(fields[0]);
    (!value.eq_ignore_ascii_case("chunked"))
        .then(|| format!("unsupported transfer encoding: {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::middleware::from_fn;
    use axum::routing::post;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn send(encodings: &[&str]) -> (u16, serde_json::Value) {
        let app = Router::new()
            .route("/", post(|| async { "{}" }))
            .layer(from_fn(refuse_unsupported_transfer_encoding));
        let mut request = Request::post("/");
        for e in encodings {
            request = request.header(header::TRANSFER_ENCODING, *e);
        }
        let response = app
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        let code = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (code, serde_json::from_slice(&body).unwrap_or_default())
    }

    /// Probe finding D8: `gzip, chunked` was accepted.
    #[tokio::test]
    async fn only_chunked_is_accepted() {
        assert_eq!(send(&[]).await.0, 200);
        assert_eq!(send(&["chunked"]).await.0, 200);
        assert_eq!(send(&["Chunked"]).await.0, 200);
        let (code, status) = send(&["gzip, chunked"]).await;
        assert_eq!(code, 501);
        assert_eq!(status["kind"], "Status");
        assert_eq!(
            status["message"],
            "unsupported transfer encoding: \"gzip, chunked\""
        );
        let (code, status) = send(&["chunked", "chunked"]).await;
        assert_eq!(code, 501);
        assert_eq!(
            status["message"],
            "too many transfer encodings: [\"chunked\" \"chunked\"]"
        );
    }
}
