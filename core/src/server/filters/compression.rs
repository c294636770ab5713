//! Gzip for large API responses, as upstream's `APIResponseCompression` (on by default): when the client sends
//! `Accept-Encoding: gzip` (Go clients, kubectl included, do by default) and the response body is larger than
//! 128 KiB, it goes out gzip-compressed at level 1 with `Content-Encoding: gzip` and `Vary: Accept-Encoding`.
//! Smaller bodies go out as they are: compressing them costs more than it saves.
//!
//! Upstream compresses in `SerializeObject`, what REST handlers and discovery write; watches and other
//! long-running requests stream and are never compressed. This filter does the same for `/api` and `/apis`. A body
//! is read until it is known to pass the threshold (or ends), so a streamed list is compressed as it streams.

use std::io::Write;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use flate2::Compression;
use flate2::write::GzEncoder;
use futures::{Stream, StreamExt};
use http::{HeaderValue, header};
use http_body_util::BodyExt;

use super::timeout::is_long_running;
use crate::request::RequestInfo;

/// Upstream's `defaultGzipThresholdBytes`: bodies larger than this are compressed.
pub const GZIP_THRESHOLD_BYTES: usize = 128 * 1024;

/// Upstream's `defaultGzipContentEncodingLevel`: speed over size, as the response is on the request's path.
const GZIP_LEVEL: u32 = 1;

/// Compresses the response when the client accepts gzip and the body passes the threshold.
pub async fn compress(request: Request, next: Next) -> Response {
    let eligible = accepts_gzip(request.headers())
        && request
            .extensions()
            .get::<RequestInfo>()
            .is_some_and(|info| is_api_path(&info.path) && !is_long_running(info));
    let response = next.run(request).await;
    if !eligible || response.headers().contains_key(header::CONTENT_ENCODING) {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut head = Vec::new();
    while head.len() <= GZIP_THRESHOLD_BYTES {
        match body.frame().await {
            None => return Response::from_parts(parts, Body::from(head)),
            Some(Err(err)) => {
                // The body failed before it was known to be large: end the response the same way.
                let failed = futures::stream::iter([Ok(Bytes::from(head)), Err(err)]);
                return Response::from_parts(parts, Body::from_stream(failed));
            }
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    head.extend_from_slice(&data);
                }
            }
        }
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    let rest = body.into_data_stream();
    let chunks = futures::stream::iter([Ok(Bytes::from(head))]).chain(rest);
    Response::from_parts(parts, Body::from_stream(gzip(chunks)))
}

/// Upstream's `negotiateContentEncoding`: `gzip` as one of the comma-separated tokens (q-values are not read).
fn accepts_gzip(headers: &http::HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim() == "gzip")
}

/// The API's own paths (resources and discovery), as opposed to health checks, metrics and OpenAPI.
fn is_api_path(path: &str) -> bool {
    ["/api", "/apis"]
        .iter()
        .any(|prefix| path == *prefix || path.starts_with(&format!("{prefix}/")))
}

/// Gzips a stream of chunks, each compressed piece sent as soon as the encoder yields it.
fn gzip<E>(
    chunks: impl Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static
where
    E: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    let encoder = GzEncoder::new(Vec::new(), Compression::new(GZIP_LEVEL));
    futures::stream::unfold(Some((chunks, encoder)), |state| async move {
        let (mut chunks, mut encoder) = state?;
        loop {
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    if let Err(err) = encoder.write_all(&chunk) {
                        return Some((Err(err), None));
                    }
                    let out = std::mem::take(encoder.get_mut());
                    if !out.is_empty() {
                        return Some((Ok(Bytes::from(out)), Some((chunks, encoder))));
                    }
                }
                Some(Err(err)) => return Some((Err(std::io::Error::other(err)), None)),
                None => {
                    return Some((encoder.finish().map(Bytes::from), None));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn gzip_tokens() {
        let accepts = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert(header::ACCEPT_ENCODING, value.parse().unwrap());
            accepts_gzip(&headers)
        };
        assert!(accepts("gzip"));
        assert!(accepts("deflate, gzip"));
        assert!(!accepts("gzipx"));
        assert!(!accepts("identity"));
        assert!(!accepts_gzip(&http::HeaderMap::new()));
    }

    #[test]
    fn api_paths() {
        assert!(is_api_path("/apis"));
        assert!(is_api_path("/apis/g/v/things"));
        assert!(is_api_path("/api/v1"));
        assert!(!is_api_path("/apiserver"));
        assert!(!is_api_path("/metrics"));
        assert!(!is_api_path("/openapi/v2"));
    }

    #[tokio::test]
    async fn a_stream_gzips_to_the_same_bytes() {
        let pieces: Vec<Result<Bytes, std::io::Error>> = (0..50)
            .map(|i| Ok(Bytes::from(format!("{{\"item\":{i}}}").repeat(1000))))
            .collect();
        let plain: Vec<u8> = pieces
            .iter()
            .flat_map(|p| p.as_ref().unwrap().to_vec())
            .collect();
        let compressed: Vec<u8> = gzip(futures::stream::iter(pieces))
            .map(|c| c.unwrap().to_vec())
            .concat()
            .await;
        assert!(compressed.len() < plain.len() / 10);
        let mut decoded = Vec::new();
        flate2::read::GzDecoder::new(&compressed[..])
            .read_to_end(&mut decoded)
            .unwrap();
        assert_eq!(decoded, plain);
    }
}
