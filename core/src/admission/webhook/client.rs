//! Calling a webhook (upstream's `webhookutil.ClientManager`): one kept-alive client per webhook endpoint and
//! CA bundle; a `service` reference is resolved through the core cluster as the aggregator resolves services
//! (an `ExternalName` service's host, else the cluster IP, else the service's DNS name), and its certificate
//! must name `<service>.<namespace>.svc`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use http_body_util::BodyExt;
use k8s_openapi::api::admissionregistration::v1::WebhookClientConfig;
use k8s_openapi::api::core::v1::Service;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::cluster::CoreCluster;
use crate::tls_verify::{CaBundleVerifier, handshake_failure};

/// The largest answer read from a webhook.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Where a webhook is reached.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Target {
    /// `https://host:port`, as connected to.
    base: String,
    /// The path (and query) requests go to.
    path: String,
    /// The name the certificate must have, when it is not the host connected to.
    server_name: Option<String>,
    /// The URL as upstream's messages show it.
    shown: String,
    /// The name credentials are looked up by: the URL's `host[:port]`, or `<service>.<namespace>.svc:<port>`.
    credentials: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    config: String,
    ca_bundle: Vec<u8>,
}

/// Why a call failed (upstream wraps it as `failed calling webhook "<name>": failed to call webhook: ...`).
#[derive(Debug)]
pub(super) struct CallError(pub String);

/// The webhook clients, by endpoint and CA bundle.
pub(super) struct Clients {
    cluster: CoreCluster,
    clients: Mutex<HashMap<Key, (Target, kube::Client)>>,
    /// The kubeconfig of `--admission-control-config-file`'s `kubeConfigFile`, whose users are the credentials
    /// for calling webhooks.
    auth: Option<kube::config::Kubeconfig>,
}

impl Clients {
    pub fn new(cluster: CoreCluster, auth: Option<kube::config::Kubeconfig>) -> Self {
        Clients {
            cluster,
            clients: Mutex::new(HashMap::new()),
            auth,
        }
    }

    /// POSTs `body` to the webhook and returns its answer's body; the call may take `timeout` in all.
    pub async fn post(
        &self,
        config: &WebhookClientConfig,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let key = Key {
            config: format!("{:?}|{:?}", config.url, config.service),
            ca_bundle: config
                .ca_bundle
                .as_ref()
                .map(|b| b.0.clone())
                .unwrap_or_default(),
        };
        let cached = self.clients.lock().ok().and_then(|c| c.get(&key).cloned());
        let (target, client) = match cached {
            Some(found) => found,
            None => {
                let target = self.resolve(config).await?;
                let auth = self
                    .auth
                    .as_ref()
                    .and_then(|k| crate::admission::config::auth_for(k, &target.credentials));
                let client = client(&target, &key.ca_bundle, auth)?;
                if let Ok(mut clients) = self.clients.lock() {
                    clients.insert(key.clone(), (target.clone(), client.clone()));
                }
                (target, client)
            }
        };
        // Upstream tells the webhook its deadline, rounded up to whole seconds.
        let seconds = timeout.as_secs() + u64::from(timeout.subsec_nanos() > 0);
        let separator = if target.path.contains('?') { '&' } else { '?' };
        let path = format!("{}{separator}timeout={seconds}s", target.path);
        let shown = format!("Post \"{}{separator}timeout={seconds}s\"", target.shown);
        let request = http::Request::post(path.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(kube::client::Body::from(body))
            .map_err(|e| CallError(format!("{shown}: {e}")))?;
        let call = async {
            let response = client.send(request).await.map_err(|e| {
                // A broken connection may mean a moved service: resolve again next time.
                if let Ok(mut clients) = self.clients.lock() {
                    clients.remove(&key);
                }
                let reason = handshake_failure(&e).unwrap_or_else(|| e.to_string());
                format!("{shown}: {reason}")
            })?;
            let status = response.status();
            let mut body = response.into_body();
            let mut bytes = Vec::new();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| format!("{shown}: {e}"))?;
                if let Some(data) = frame.data_ref() {
                    if bytes.len() + data.len() > MAX_RESPONSE_BYTES {
                        return Err(format!(
                            "{shown}: the response is larger than {MAX_RESPONSE_BYTES} bytes"
                        ));
                    }
                    bytes.extend_from_slice(data);
                }
            }
            if !status.is_success() {
                return Err(format!(
                    "the server responded with the status code {} but did not return more information",
                    status.as_u16()
                ));
            }
            Ok(bytes)
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(result) => result.map_err(CallError),
            Err(_) => Err(CallError(format!("{shown}: context deadline exceeded"))),
        }
    }

    /// Where the webhook is: its URL, or its service resolved through the core cluster.
    async fn resolve(&self, config: &WebhookClientConfig) -> Result<Target, CallError> {
        if let Some(url) = &config.url {
            let uri: http::Uri = url
                .parse()
                .map_err(|e| CallError(format!("invalid webhook URL {url:?}: {e}")))?;
            if uri.scheme_str() != Some("https") {
                return Err(CallError(format!("webhook URL {url:?} is not https")));
            }
            let authority = uri
                .authority()
                .ok_or_else(|| CallError(format!("webhook URL {url:?} has no host")))?;
            return Ok(Target {
                base: format!("https://{authority}"),
                path: uri
                    .path_and_query()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_else(|| "/".into()),
                server_name: None,
                shown: url.clone(),
                credentials: authority.to_string(),
            });
        }
        let Some(service) = &config.service else {
            return Err(CallError(
                "neither service nor URL set in webhook client config".into(),
            ));
        };
        let port = service.port.unwrap_or(443);
        let server_name = format!("{}.{}.svc", service.name, service.namespace);
        let path = service.path.clone().unwrap_or_else(|| "/".into());
        let api = kube::Api::<Service>::namespaced(self.cluster.client(), &service.namespace);
        let found = api
            .get_opt(&service.name)
            .await
            .map_err(|e| CallError(format!("unable to resolve service {server_name}: {e}")))?
            .ok_or_else(|| CallError(format!("service \"{}\" not found", service.name)))?;
        let spec = found.spec.unwrap_or_default();
        let host = match (spec.type_.as_deref(), spec.external_name, spec.cluster_ip) {
            (Some("ExternalName"), Some(external), _) => external,
            (_, _, Some(ip)) if !ip.is_empty() && ip != "None" => {
                if ip.contains(':') {
                    format!("[{ip}]")
                } else {
                    ip
                }
            }
            _ => server_name.clone(),
        };
        Ok(Target {
            base: format!("https://{host}:{port}"),
            path: path.clone(),
            server_name: Some(server_name.clone()),
            shown: format!("https://{server_name}:{port}{path}"),
            credentials: format!("{server_name}:{port}"),
        })
    }
}

/// A client for `target` trusting `ca_bundle` (PEM; the system's roots when empty), with `auth`'s credentials.
/// kube-rs's stack (base URI, credentials, impersonation headers) over its TLS configuration, with the bundle
/// checked as kube-apiserver checks it ([`CaBundleVerifier`]).
fn client(
    target: &Target,
    ca_bundle: &[u8],
    auth: Option<kube::config::AuthInfo>,
) -> Result<kube::Client, CallError> {
    use kube::client::ConfigExt;

    let base: http::Uri = target
        .base
        .parse()
        .map_err(|e| CallError(format!("invalid webhook address {}: {e}", target.base)))?;
    let mut config = kube::Config::new(base);
    if let Some(auth) = auth {
        config.auth_info = auth;
    }
    let mut verifier = None;
    if !ca_bundle.is_empty() {
        let roots = CertificateDer::pem_slice_iter(ca_bundle)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| CallError(format!("invalid caBundle: {e}")))?;
        config.root_cert = Some(roots.iter().map(|c| c.to_vec()).collect());
        verifier = Some(CaBundleVerifier::new(roots).map_err(|e| CallError(e.to_string()))?);
    }
    let failed = |e: kube::Error| CallError(e.to_string());
    let mut tls = config.rustls_client_config().map_err(failed)?;
    if let Some(verifier) = verifier {
        tls.dangerous()
            .set_certificate_verifier(std::sync::Arc::new(verifier));
    }
    let mut https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_only();
    if let Some(name) = &target.server_name {
        let name = ServerName::try_from(name.clone())
            .map_err(|e| CallError(format!("invalid server name {name}: {e}")))?;
        https = https.with_server_name_resolver(hyper_rustls::FixedServerNameResolver::new(name));
    }
    let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(Duration::from_secs(10)));
    let connector = https.enable_http1().wrap_connector(http);
    let hyper_client =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(connector);
    let service = tower::ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(config.auth_layer().map_err(failed)?)
        .layer(config.extra_headers_layer().map_err(failed)?)
        .map_err(tower::BoxError::from)
        .service(hyper_client);
    Ok(kube::client::ClientBuilder::new(service, config.default_namespace).build())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::ByteString;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    use serde_json::{Value, json};

    use super::*;
    use crate::envtest::HttpsServer;

    /// What `openssl req -x509 -newkey ... -addext subjectAltName=IP:127.0.0.1` makes: a self-signed `CA:TRUE`
    /// certificate (PEM) and its key.
    fn self_signed_ca() -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        (params.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    /// kube-apiserver calls such a webhook when the certificate is its `caBundle`; so do we, and a wrong bundle
    /// fails with upstream's reason.
    #[tokio::test]
    async fn calls_a_webhook_serving_a_self_signed_ca_certificate() {
        let (cert, key) = self_signed_ca();
        let calls = Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let router = axum::Router::new().route(
            "/validate",
            axum::routing::post(move |axum::Json(review): axum::Json<Value>| async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::Json(json!({
                    "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": review["request"]["uid"], "allowed": true},
                }))
            }),
        );
        let server = HttpsServer::start_with_certificate(router, &cert, &key, cert.clone())
            .await
            .unwrap();
        // No core cluster is needed for a webhook given by URL.
        let cluster =
            CoreCluster::start(&kube::Config::new("http://127.0.0.1:1".parse().unwrap())).unwrap();
        let clients = Clients::new(cluster, None);
        let url = format!("https://127.0.0.1:{}/validate", server.port);
        let config = |ca_bundle: &str| WebhookClientConfig {
            url: Some(url.clone()),
            ca_bundle: Some(ByteString(ca_bundle.as_bytes().to_vec())),
            service: None,
        };
        let review = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "4711"},
        });
        let body = serde_json::to_vec(&review).unwrap();

        let answer = clients
            .post(&config(&cert), body.clone(), Duration::from_secs(10))
            .await
            .unwrap();
        let answer: Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(answer["response"], json!({"uid": "4711", "allowed": true}));
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let (other, _) = self_signed_ca();
        let error = clients
            .post(&config(&other), body, Duration::from_secs(10))
            .await
            .unwrap_err();
        assert_eq!(
            error.0,
            format!(
                "Post \"{url}?timeout=10s\": tls: failed to verify certificate: x509: certificate signed by unknown authority"
            )
        );
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }
}
