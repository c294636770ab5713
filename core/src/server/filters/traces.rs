//! The request span (upstream's `WithTracing`, right after authentication so that who the client is decides
//! whether its `traceparent` is followed): named as upstream names it (`GET /apis/g/v/namespaces/{:namespace}/
//! pizzas/{:name}`, or the method for non-resource paths), with OpenTelemetry's HTTP server attributes and the
//! audit ID. A parent sent by kube-apiserver's front proxy, or by `system:masters` or `system:monitoring`, is
//! followed; anyone else's becomes a link.
//! Authentication, which ran before the span existed, is recorded as its first child.

//! Without the `otel` feature nothing is exported and the filter passes requests through.

use std::time::SystemTime;

/// When authentication started and ended, for its span, and whether a front proxy vouched for the user.
#[derive(Clone, Copy, Debug)]
pub struct AuthenticationTime {
    /// Before the authenticator was asked.
    pub start: SystemTime,
    /// When it answered.
    pub end: SystemTime,
    /// The user came through an authenticating front proxy (kube-apiserver), whose trace this request is part of.
    pub via_front_proxy: bool,
}

/// No exporter in this build: nothing to trace.
#[cfg(not(feature = "otel"))]
pub async fn trace(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    next.run(request).await
}

#[cfg(feature = "otel")]
pub use exported::trace;

/// The request span and what names it, when the `otel` feature exports spans.
#[cfg(feature = "otel")]
mod exported {
    use axum::extract::Request;
    use axum::middleware::Next;
    use axum::response::Response;

    use super::AuthenticationTime;
    use crate::auth::User;
    use crate::request::RequestInfo;
    use crate::server::ConnectionInfo;
    use crate::server::filters::{AuditId, header_str};
    use crate::telemetry::{
        SPAN_TARGET, is_sampled, may_sample, record_past_span, remote_parent, trusts_parent_of,
    };
    use http::header::USER_AGENT;
    use tracing::Instrument;
    use tracing_opentelemetry::OpenTelemetrySpanExt;

    /// Runs the rest of the chain inside the request span, when spans are exported.
    pub async fn trace(request: Request, next: Next) -> Response {
        if !tracing::span_enabled!(target: SPAN_TARGET, tracing::Level::TRACE) {
            return next.run(request).await;
        }
        let parent = remote_parent(request.headers());
        let trusted = request
            .extensions()
            .get::<AuthenticationTime>()
            .is_some_and(|a| a.via_front_proxy)
            || request
                .extensions()
                .get::<User>()
                .is_some_and(|u| trusts_parent_of(&u.groups));
        // Most requests are not sampled: then no span is built at all.
        if !may_sample(trusted && parent.as_ref().is_some_and(is_sampled)) {
            return next.run(request).await;
        }
        let span = request_span(&request);
        if let Some(parent) = parent {
            if trusted {
                let _ = span.set_parent(parent);
            } else {
                use opentelemetry::trace::TraceContextExt;
                span.add_link(parent.span().span_context().clone());
            }
        }
        if let Some(time) = request.extensions().get::<AuthenticationTime>() {
            record_past_span(&span.context(), "authentication", time.start, time.end);
        }
        let response = next.run(request).instrument(span.clone()).await;
        let code = response.status().as_u16();
        span.record("http.response.status_code", i64::from(code));
        if code >= 500 {
            span.record("otel.status_code", "ERROR");
        }
        response
    }

    /// The span with what is known before the response.
    fn request_span(request: &Request) -> tracing::Span {
        let name = span_name(request);
        let header = |name: &str| header_str(request.headers(), name);
        let connection = request.extensions().get::<ConnectionInfo>();
        let peer = connection.map(|c| c.remote_addr);
        let local = connection.map(|c| c.local_addr);
        let client = header("x-forwarded-for")
            .split(',')
            .next()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .or_else(|| peer.map(|p| p.ip().to_string()))
            .unwrap_or_default();
        tracing::trace_span!(
            target: SPAN_TARGET,
            "KubernetesAPI",
            otel.name = %name,
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            "http.request.method" = %request.method(),
            "url.scheme" = "https",
            "url.path" = request.uri().path(),
            "http.target" = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or_default(),
            "server.address" = local.map(|a| a.ip().to_string()).unwrap_or_default(),
            "server.port" = local.map(|a| i64::from(a.port())).unwrap_or_default(),
            "network.peer.address" = peer.map(|a| a.ip().to_string()).unwrap_or_default(),
            "network.peer.port" = peer.map(|a| i64::from(a.port())).unwrap_or_default(),
            "network.protocol.version" = protocol_version(request.version()),
            "user_agent.original" = header(USER_AGENT.as_str()),
            "client.address" = client,
            "audit-id" = request.extensions().get::<AuditId>().map(|a| a.0.as_str()).unwrap_or_default(),
            "http.response.status_code" = tracing::field::Empty,
        )
    }

    fn protocol_version(version: http::Version) -> &'static str {
        match version {
            http::Version::HTTP_10 => "1.0",
            http::Version::HTTP_2 => "2",
            http::Version::HTTP_3 => "3",
            _ => "1.1",
        }
    }

    /// upstream's `getSpanNameFromRequestInfo`.
    fn span_name(request: &Request) -> String {
        let method = request.method().as_str();
        let Some(info) = request
            .extensions()
            .get::<RequestInfo>()
            .filter(|i| i.is_resource_request)
        else {
            return method.to_string();
        };
        let mut name = format!("{method} /{}", info.api_prefix);
        if !info.api_group.is_empty() {
            name.push('/');
            name.push_str(&info.api_group);
        }
        name.push('/');
        name.push_str(&info.api_version);
        if !info.namespace.is_empty() {
            name.push_str("/namespaces/{:namespace}");
        }
        name.push('/');
        name.push_str(&info.resource);
        if !info.name.is_empty() {
            name.push_str("/{:name}");
        }
        if !info.subresource.is_empty() {
            name.push('/');
            name.push_str(&info.subresource);
        }
        name
    }

    #[cfg(test)]
    mod tests {
        use std::sync::Arc;

        use axum::Router;
        use axum::body::Body;
        use axum::routing::get;
        use http::request::Parts;
        use opentelemetry::trace::TracerProvider as _;
        use opentelemetry_sdk::trace::{InMemorySpanExporter, Sampler, SdkTracerProvider};
        use tower::ServiceExt;
        use tracing_subscriber::Layer;
        use tracing_subscriber::layer::SubscriberExt;

        use super::*;
        use crate::auth::{AlwaysAllow, AuthenticationError, Authenticator};
        use crate::request::RequestInfoFactory;
        use crate::server::FilterChain;
        use crate::server::filters::InFlightLimits;

        /// Authenticates everyone as alice, as a front proxy would or not.
        struct Alice {
            proxy: bool,
        }

        #[async_trait::async_trait]
        impl Authenticator for Alice {
            async fn authenticate(&self, _: &Parts) -> Result<Option<User>, AuthenticationError> {
                Ok(Some(User {
                    name: "alice".into(),
                    groups: vec!["system:authenticated".into()],
                    ..User::default()
                }))
            }

            fn is_front_proxy(&self) -> bool {
                self.proxy
            }
        }

        async fn request(proxy: bool, parent_span: &str) {
            let app = FilterChain {
                request_info: Arc::new(RequestInfoFactory::default()),
                authenticator: Arc::new(Alice { proxy }),
                authorizer: Arc::new(AlwaysAllow),
                request_timeout: std::time::Duration::ZERO,
                limits: InFlightLimits::new(0, 0),
                metrics: Arc::default(),
                auditor: None,
            }
            .apply(Router::new().route("/apis/g/v1/things", get(|| async { "[]" })));
            let request = Request::get("/apis/g/v1/things")
                .header(
                    "traceparent",
                    format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{parent_span}-01"),
                )
                .body(Body::empty())
                .unwrap();
            assert_eq!(app.oneshot(request).await.unwrap().status(), 200);
        }

        #[tokio::test(flavor = "current_thread")]
        async fn a_front_proxys_parent_is_followed_and_a_users_is_not() {
            let exporter = InMemorySpanExporter::default();
            let provider = SdkTracerProvider::builder()
                .with_simple_exporter(exporter.clone())
                .with_sampler(Sampler::ParentBased(Box::new(Sampler::AlwaysOff)))
                .build();
            let subscriber = tracing_subscriber::registry().with(
                tracing_opentelemetry::layer()
                    .with_tracer(provider.tracer("test"))
                    .with_filter(
                        tracing_subscriber::filter::Targets::new()
                            .with_target(SPAN_TARGET, tracing::Level::TRACE),
                    ),
            );
            let _default = tracing::subscriber::set_default(subscriber);

            request(true, "00f067aa0ba902b7").await;
            request(false, "1111111111111111").await;

            let spans = exporter.get_finished_spans().unwrap();
            let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
            assert_eq!(
                names,
                ["GET /apis/g/v1/things"],
                "only the proxied request is traced"
            );
            assert_eq!(spans[0].parent_span_id.to_string(), "00f067aa0ba902b7");
            assert_eq!(
                spans[0].span_context.trace_id().to_string(),
                "4bf92f3577b34da6a3ce929d0e0e4736"
            );
        }
    }
}
