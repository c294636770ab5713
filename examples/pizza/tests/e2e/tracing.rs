//! OpenTelemetry traces from the pizza-apiserver binary to a real OTLP/gRPC receiver (opentelemetry-proto's
//! `TraceService` on tonic, in this test): with `samplingRatePerMillion: 0`, a request whose `traceparent` says
//! "sampled" (from an admin, whose parent is trusted) is traced under that parent with the expected span tree;
//! a request without one is not traced.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Span>>>,
    services: Arc<Mutex<Vec<String>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        for resource_spans in request.into_inner().resource_spans {
            if let Some(resource) = &resource_spans.resource
                && let Some(name) = string_attribute(&resource.attributes, "service.name")
            {
                self.services.lock().unwrap().push(name);
            }
            for scope in resource_spans.scope_spans {
                self.spans.lock().unwrap().extend(scope.spans);
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

fn string_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
        .map(|v| match v {
            AnyValue::StringValue(s) => s.clone(),
            AnyValue::IntValue(i) => i.to_string(),
            other => format!("{other:?}"),
        })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    kube::Client::try_from(config).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sampled_parent_is_followed_with_the_expected_span_tree() {
    let receiver = Receiver::default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let collector = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(receiver.clone());
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap()
    });

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tracing.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpoint: {collector}\nsamplingRatePerMillion: 0\n"
        ),
    )
    .unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_pizza-apiserver"))
        .args([
            "--secure-port=0",
            "--storage-backend=memory",
            "--controllers=-pizza-cost,-oven",
        ])
        .arg(format!("--data-dir={}", dir.path().join("data").display()))
        .arg(format!("--tracing-config-file={}", config.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the server binary starts");
    let mut first = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("pizza-apiserver serving on "), "{first}");
    let client = client(&dir.path().join("data").join("kubeconfig")).await;
    // The watch caches load first.
    for _ in 0..100 {
        let request = http::Request::get("/readyz")
            .body(kube::client::Body::from(Vec::new()))
            .unwrap();
        if client.send(request).await.is_ok_and(|r| r.status() == 200) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let send = |traceparent: Option<String>, name: &'static str| {
        let client = client.clone();
        async move {
            let mut request = http::Request::post(
                "/apis/restaurant.programming-kubernetes.info/v1alpha1/toppings",
            )
            .header("content-type", "application/json");
            if let Some(traceparent) = traceparent {
                request = request.header("traceparent", traceparent);
            }
            let body = format!(
                r#"{{"apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","kind":"Topping","metadata":{{"name":"{name}"}},"spec":{{"cost":1}}}}"#
            );
            let response = client
                .send(
                    request
                        .body(kube::client::Body::from(body.into_bytes()))
                        .unwrap(),
                )
                .await
                .unwrap();
            assert_eq!(response.status(), 201);
            response.headers()["audit-id"].to_str().unwrap().to_string()
        }
    };
    let traced = send(Some(format!("00-{TRACE_ID}-{PARENT_ID}-01")), "traced").await;
    let untraced = send(None, "untraced").await;

    let killed = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(server.wait().unwrap().success());

    let spans = receiver.spans.lock().unwrap().clone();
    assert!(!spans.is_empty(), "the receiver got spans");
    assert!(
        receiver
            .services
            .lock()
            .unwrap()
            .iter()
            .all(|s| s == "apiserver")
    );
    for span in &spans {
        assert_eq!(
            hex(&span.trace_id),
            TRACE_ID,
            "only the sampled request is traced: {span:?}"
        );
        assert_ne!(
            string_attribute(&span.attributes, "audit-id").as_deref(),
            Some(untraced.as_str())
        );
    }
    let by_id: HashMap<String, &Span> = spans.iter().map(|s| (hex(&s.span_id), s)).collect();
    let named = |name: &str| {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "a {name:?} span among {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let server_span = named("POST /apis/restaurant.programming-kubernetes.info/v1alpha1/toppings");
    assert_eq!(server_span.kind, SpanKind::Server as i32);
    assert_eq!(hex(&server_span.parent_span_id), PARENT_ID);
    assert_eq!(
        string_attribute(&server_span.attributes, "audit-id").as_deref(),
        Some(traced.as_str())
    );
    assert_eq!(
        string_attribute(&server_span.attributes, "http.response.status_code").as_deref(),
        Some("201")
    );
    assert_eq!(
        string_attribute(&server_span.attributes, "http.request.method").as_deref(),
        Some("POST")
    );
    let server_id = hex(&server_span.span_id);
    let authentication = named("authentication");
    assert_eq!(hex(&authentication.parent_span_id), server_id);
    let create = named("Create");
    assert_eq!(hex(&create.parent_span_id), server_id);
    assert_eq!(
        string_attribute(&create.attributes, "resource").as_deref(),
        Some("toppings")
    );
    assert_eq!(
        string_attribute(&create.attributes, "verb").as_deref(),
        Some("CREATE")
    );
    for step in ["Admit PizzaToppings", "Validate PizzaToppings"] {
        let admission = named(step);
        assert_eq!(hex(&admission.parent_span_id), hex(&create.span_id));
        assert_eq!(
            string_attribute(&admission.attributes, "operation").as_deref(),
            Some("CREATE")
        );
    }
    // Decoding, the write to storage (named by backend, as upstream's `Create etcd3`) and encoding the answer.
    for step in ["Decode", "Create memory", "SerializeObject"] {
        assert_eq!(
            hex(&named(step).parent_span_id),
            hex(&create.span_id),
            "{step}"
        );
    }
    assert_eq!(
        string_attribute(&named("Create memory").attributes, "resource").as_deref(),
        Some("toppings")
    );
    // Every other span hangs below the request span.
    for span in &spans {
        if span.span_id == server_span.span_id {
            continue;
        }
        let mut parent = hex(&span.parent_span_id);
        let mut depth = 0;
        while parent != server_id {
            parent = hex(&by_id
                .get(&parent)
                .unwrap_or_else(|| panic!("{} has a parent we got", span.name))
                .parent_span_id);
            depth += 1;
            assert!(depth < 10);
        }
    }
}
