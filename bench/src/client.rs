//! An HTTPS client for a server reached through a kubeconfig: its URL, the CA it trusts and a bearer token.

use std::path::Path;

use base64::Engine;
use serde_json::Value;

/// What a kubeconfig says about reaching its current cluster.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub url: String,
    pub ca_pem: Option<Vec<u8>>,
    pub token: Option<String>,
}

impl Endpoint {
    /// Reads the first cluster and user of a kubeconfig (what the pizza server writes).
    pub fn from_kubeconfig(path: &Path) -> Result<Endpoint, String> {
        let text = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let (json, _) = apiserver::codec::yaml_to_json(&text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let config: Value = serde_json::from_slice(&json).map_err(|e| e.to_string())?;
        let cluster = &config["clusters"][0]["cluster"];
        let url = cluster["server"]
            .as_str()
            .ok_or_else(|| format!("{}: no cluster server", path.display()))?
            .trim_end_matches('/')
            .to_string();
        let ca_pem = match (
            cluster["certificate-authority-data"].as_str(),
            cluster["certificate-authority"].as_str(),
        ) {
            (Some(data), _) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(data)
                    .map_err(|e| format!("certificate-authority-data: {e}"))?,
            ),
            (None, Some(file)) => Some(std::fs::read(file).map_err(|e| format!("{file}: {e}"))?),
            _ => None,
        };
        let token = config["users"][0]["user"]["token"]
            .as_str()
            .map(str::to_string);
        Ok(Endpoint { url, ca_pem, token })
    }

    /// A client with keep-alive, HTTP/2 (negotiated by ALPN) or HTTP/1.1 only.
    pub fn client(&self, http1: bool) -> Result<reqwest::Client, String> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .pool_max_idle_per_host(1024)
            .tcp_nodelay(true)
            // Reads HTTP/2 frames of up to 1 MiB, as Go's clients (kubectl, client-go, kube-apiserver's aggregator)
            // have offered since Go 1.24 (x/net/http2's MaxReadFrameSize default); hyper's default is the
            // protocol's minimum, 16 KiB, which makes a server send a large LIST as many more frames and writes.
            .http2_max_frame_size(1 << 20);
        if let Some(pem) = &self.ca_pem {
            for cert in reqwest::Certificate::from_pem_bundle(pem).map_err(|e| e.to_string())? {
                builder = builder.add_root_certificate(cert);
            }
        } else {
            builder = builder.danger_accept_invalid_certs(true);
        }
        if http1 {
            builder = builder.http1_only();
        }
        if let Some(token) = &self.token {
            let mut headers = reqwest::header::HeaderMap::new();
            let value = reqwest::header::HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|e| e.to_string())?;
            headers.insert(reqwest::header::AUTHORIZATION, value);
            builder = builder.default_headers(headers);
        }
        builder.build().map_err(|e| e.to_string())
    }
}
