//! Verifying a server's certificate against a `caBundle` as Go's `crypto/x509` does (`Certificate.Verify`, as
//! kube-apiserver calls webhooks), so that a server kube-apiserver can call, this server can call too, and a
//! refusal says why in kube-apiserver's words.
//!
//! The difference that matters: Go trusts a certificate that is itself in the bundle as a chain of one, also when
//! it is a CA (`openssl req -x509` makes `CA:TRUE` certificates), where webpki refuses any CA as the end entity
//! (`CaUsedAsEndEntity`). Every chain whose end is not a CA is webpki's to judge.

use std::net::IpAddr;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, OtherError, RootCertStore, SignatureScheme};
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;

/// A `caBundle` that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("invalid caBundle: {0}")]
pub struct InvalidCaBundle(String);

/// Why a server's certificate was refused, in Go's words (`x509.UnknownAuthorityError`, `x509.HostnameError`,
/// `x509.CertificateInvalidError`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum X509Error {
    /// No chain leads to a certificate of the bundle.
    #[error("x509: certificate signed by unknown authority")]
    UnknownAuthority,
    /// The certificate does not name the server; `valid` lists the names of the kind asked for (DNS or IP).
    #[error("x509: certificate is valid for {valid}, not {host}")]
    NotValidFor {
        /// The certificate's names, comma-separated.
        valid: String,
        /// The name asked for.
        host: String,
    },
    /// An IP address was asked for and the certificate names none.
    #[error("x509: cannot validate certificate for {0} because it doesn't contain any IP SANs")]
    NoIpSans(String),
    /// The name is only in the subject's common name, which Go no longer reads.
    #[error("x509: certificate relies on legacy Common Name field, use SANs instead")]
    LegacyCommonName,
    /// The certificate names nothing.
    #[error("x509: certificate is not valid for any names, but wanted to match {0}")]
    NoNames(String),
    /// Outside the validity period (`current time ... is after ...`).
    #[error("x509: certificate has expired or is not yet valid: {0}")]
    Expired(String),
    /// The extended key usage does not allow serving TLS.
    #[error("x509: certificate specifies an incompatible key usage")]
    IncompatibleUsage,
    /// Not a parsable certificate.
    #[error("x509: malformed certificate: {0}")]
    Malformed(String),
}

impl From<X509Error> for rustls::Error {
    fn from(error: X509Error) -> Self {
        rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(error))))
    }
}

/// Checks servers' certificates against a `caBundle` as Go does (see the module's documentation); handshake
/// signatures with the `ring` provider's algorithms.
#[derive(Debug)]
pub struct CaBundleVerifier {
    roots: Vec<CertificateDer<'static>>,
    webpki: Arc<WebPkiServerVerifier>,
    provider: Arc<CryptoProvider>,
}

impl CaBundleVerifier {
    /// A verifier trusting the PEM certificates of `pem` (a `caBundle`).
    pub fn from_pem(pem: &[u8]) -> Result<Self, InvalidCaBundle> {
        let roots = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| InvalidCaBundle(e.to_string()))?;
        Self::new(roots)
    }

    /// A verifier trusting `roots`.
    pub fn new(roots: Vec<CertificateDer<'static>>) -> Result<Self, InvalidCaBundle> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut store = RootCertStore::empty();
        for root in &roots {
            store
                .add(root.clone())
                .map_err(|e| InvalidCaBundle(e.to_string()))?;
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider.clone())
            .build()
            .map_err(|e| InvalidCaBundle(e.to_string()))?;
        Ok(CaBundleVerifier {
            roots,
            webpki,
            provider,
        })
    }

    /// Whether a currently valid certificate of the bundle issued `cert` (by name and signature).
    fn signed_by_root(&self, cert: &X509Certificate<'_>, now: UnixTime) -> bool {
        self.roots.iter().any(|root| {
            x509_parser::parse_x509_certificate(root).is_ok_and(|(_, root)| {
                root.subject().as_raw() == cert.issuer().as_raw()
                    && check_validity(&root, now).is_ok()
                    && cert.verify_signature(Some(root.public_key())).is_ok()
            })
        })
    }
}

impl ServerCertVerifier for CaBundleVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let (_, leaf) = x509_parser::parse_x509_certificate(end_entity)
            .map_err(|e| X509Error::Malformed(e.to_string()))?;
        // Go's order: the leaf's validity period, its name, then the chain.
        check_validity(&leaf, now)?;
        check_name(&leaf, server_name)?;
        if self.roots.iter().any(|root| root == end_entity) {
            // A certificate of the bundle: a chain of one.
            check_usage(&leaf)?;
            return Ok(ServerCertVerified::assertion());
        }
        if leaf.is_ca() {
            // webpki refuses any CA as the end entity; Go takes it like any other certificate. Only a chain of
            // two is built here (a CA signed by a certificate of the bundle), not one through intermediates.
            if !self.signed_by_root(&leaf, now) {
                return Err(X509Error::UnknownAuthority.into());
            }
            check_usage(&leaf)?;
            return Ok(ServerCertVerified::assertion());
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|e| match e {
                // Go: no candidate issuer, or none whose signature verifies.
                rustls::Error::InvalidCertificate(
                    CertificateError::UnknownIssuer | CertificateError::BadSignature,
                ) => X509Error::UnknownAuthority.into(),
                rustls::Error::InvalidCertificate(
                    CertificateError::InvalidPurpose
                    | CertificateError::InvalidPurposeContext { .. },
                ) => X509Error::IncompatibleUsage.into(),
                other => other,
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS failure somewhere in `error`'s causes, as Go's `crypto/tls` words it (`tls: failed to verify
/// certificate: x509: ...`), for messages that would otherwise end in hyper's `client error (Connect)`.
pub fn handshake_failure(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(match tls {
                rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(other))) => {
                    match other.downcast_ref::<X509Error>() {
                        Some(x509) => format!("tls: failed to verify certificate: {x509}"),
                        None => format!("tls: failed to verify certificate: {other}"),
                    }
                }
                rustls::Error::InvalidCertificate(_) => {
                    format!("tls: failed to verify certificate: {tls}")
                }
                _ => format!("tls: {tls}"),
            });
        }
        // `io::Error` hides the error it wraps from `source()`.
        next = match error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => error.source(),
        };
    }
    None
}

fn check_validity(cert: &X509Certificate<'_>, now: UnixTime) -> Result<(), X509Error> {
    let now = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let validity = cert.validity();
    let (relation, bound) = if now < validity.not_before.timestamp() {
        ("before", validity.not_before.timestamp())
    } else if now > validity.not_after.timestamp() {
        ("after", validity.not_after.timestamp())
    } else {
        return Ok(());
    };
    let rfc3339 = |seconds| {
        chrono::DateTime::from_timestamp(seconds, 0)
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
            .unwrap_or_default()
    };
    Err(X509Error::Expired(format!(
        "current time {} is {relation} {}",
        rfc3339(now),
        rfc3339(bound)
    )))
}

/// Go's `VerifyHostname`: DNS names against DNS SANs (a leading `*` label matches one label), IP addresses
/// against IP SANs; the common name is never read.
fn check_name(cert: &X509Certificate<'_>, server_name: &ServerName<'_>) -> Result<(), X509Error> {
    let san = cert.subject_alternative_name().ok().flatten();
    let names = san
        .as_ref()
        .map(|ext| ext.value.general_names.as_slice())
        .unwrap_or_default();
    let (host, valid) = match server_name {
        ServerName::IpAddress(ip) => {
            let ip = IpAddr::from(*ip).to_canonical();
            let ips: Vec<IpAddr> = names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::IPAddress(bytes) => ip_from_bytes(bytes),
                    _ => None,
                })
                .collect();
            if ips.contains(&ip) {
                return Ok(());
            }
            if ips.is_empty() {
                return Err(X509Error::NoIpSans(ip.to_string()));
            }
            let valid = ips.iter().map(IpAddr::to_string).collect::<Vec<_>>();
            (ip.to_string(), valid.join(", "))
        }
        _ => {
            let host = server_name.to_str();
            let dns: Vec<&str> = names
                .iter()
                .filter_map(|name| match name {
                    GeneralName::DNSName(dns) => Some(*dns),
                    _ => None,
                })
                .collect();
            if dns.iter().any(|pattern| matches_hostname(pattern, &host)) {
                return Ok(());
            }
            let common_name = cert
                .subject()
                .iter_common_name()
                .next()
                .and_then(|cn| cn.as_str().ok());
            if san.is_none() && common_name.is_some_and(|cn| matches_hostname(cn, &host)) {
                return Err(X509Error::LegacyCommonName);
            }
            (host.to_string(), dns.join(", "))
        }
    };
    if valid.is_empty() {
        return Err(X509Error::NoNames(host));
    }
    Err(X509Error::NotValidFor { valid, host })
}

/// Go's `matchHostnames`: case-insensitive, a trailing dot ignored, `*` only as the whole first label.
fn matches_hostname(pattern: &str, host: &str) -> bool {
    let (pattern, host) = (
        pattern.trim_end_matches('.').to_ascii_lowercase(),
        host.trim_end_matches('.').to_ascii_lowercase(),
    );
    if pattern.is_empty() || host.is_empty() {
        return false;
    }
    let (pattern, host): (Vec<&str>, Vec<&str>) =
        (pattern.split('.').collect(), host.split('.').collect());
    pattern.len() == host.len()
        && pattern
            .iter()
            .zip(&host)
            .enumerate()
            .all(|(i, (p, h))| (i == 0 && *p == "*") || p == h)
}

fn ip_from_bytes(bytes: &[u8]) -> Option<IpAddr> {
    let ip = match bytes.len() {
        4 => IpAddr::from(<[u8; 4]>::try_from(bytes).ok()?),
        16 => IpAddr::from(<[u8; 16]>::try_from(bytes).ok()?),
        _ => return None,
    };
    Some(ip.to_canonical())
}

/// Go's extended key usage check for a chain of one: no extension, `serverAuth` or `anyExtendedKeyUsage`.
fn check_usage(cert: &X509Certificate<'_>) -> Result<(), X509Error> {
    match cert.extended_key_usage() {
        Ok(Some(eku)) if !eku.value.any && !eku.value.server_auth => {
            Err(X509Error::IncompatibleUsage)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    use rustls::pki_types::PrivatePkcs8KeyDer;

    /// A certificate for `names` and its key: self-signed when `issuer` is `None`; a CA (`CA:TRUE`) when `ca`.
    fn certificate(
        names: &[&str],
        ca: bool,
        issuer: Option<&Issuer<'_, KeyPair>>,
    ) -> (CertificateDer<'static>, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        if ca {
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        }
        let cert = match issuer {
            Some(issuer) => params.signed_by(&key, issuer).unwrap(),
            None => params.self_signed(&key).unwrap(),
        };
        (cert.der().clone(), key)
    }

    /// A CA (`CA:TRUE`, no names) that can sign.
    fn authority() -> (CertificateDer<'static>, Issuer<'static, KeyPair>) {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        (cert.der().clone(), Issuer::new(params, key))
    }

    /// A TLS handshake in memory: a server presenting `chain` to a client that trusts `bundle` and connects to
    /// `name`; the client's failure as Go words it.
    fn handshake(
        chain: Vec<CertificateDer<'static>>,
        key: &KeyPair,
        bundle: Vec<CertificateDer<'static>>,
        name: &str,
    ) -> Result<(), String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let server_config = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, PrivatePkcs8KeyDer::from(key.serialize_der()).into())
            .unwrap();
        let client_config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CaBundleVerifier::new(bundle).unwrap()))
            .with_no_client_auth();
        let mut client = rustls::ClientConnection::new(
            Arc::new(client_config),
            ServerName::try_from(name.to_string()).unwrap(),
        )
        .unwrap();
        let mut server = rustls::ServerConnection::new(Arc::new(server_config)).unwrap();
        while client.is_handshaking() || server.is_handshaking() {
            let mut wire = Vec::new();
            client.write_tls(&mut wire).unwrap();
            server.read_tls(&mut wire.as_slice()).unwrap();
            server.process_new_packets().unwrap();
            let mut wire = Vec::new();
            server.write_tls(&mut wire).unwrap();
            client.read_tls(&mut wire.as_slice()).unwrap();
            client
                .process_new_packets()
                .map_err(|e| handshake_failure(&e).unwrap())?;
        }
        Ok(())
    }

    /// What `openssl req -x509 -newkey ... -addext subjectAltName=...` makes, trusted by being the bundle.
    #[test]
    fn a_self_signed_ca_in_the_bundle_is_trusted_for_its_names() {
        let (cert, key) = certificate(&["webhook.example", "127.0.0.1"], true, None);
        for name in ["webhook.example", "WebHook.Example", "127.0.0.1"] {
            handshake(vec![cert.clone()], &key, vec![cert.clone()], name).unwrap();
        }
        // Not a CA: the same.
        let (cert, key) = certificate(&["*.example"], false, None);
        handshake(vec![cert.clone()], &key, vec![cert], "webhook.example").unwrap();
    }

    #[test]
    fn a_wrong_name_is_refused_in_gos_words() {
        let (cert, key) = certificate(&["webhook.example", "127.0.0.1"], true, None);
        let refused = |name| handshake(vec![cert.clone()], &key, vec![cert.clone()], name);
        assert_eq!(
            refused("other.example").unwrap_err(),
            "tls: failed to verify certificate: x509: certificate is valid for webhook.example, not other.example"
        );
        assert_eq!(
            refused("127.0.0.2").unwrap_err(),
            "tls: failed to verify certificate: x509: certificate is valid for 127.0.0.1, not 127.0.0.2"
        );
        let (cert, key) = certificate(&["webhook.example"], true, None);
        assert_eq!(
            handshake(vec![cert.clone()], &key, vec![cert], "127.0.0.1").unwrap_err(),
            "tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs"
        );
    }

    #[test]
    fn a_certificate_no_bundle_certificate_signed_is_from_an_unknown_authority() {
        let unknown =
            "tls: failed to verify certificate: x509: certificate signed by unknown authority";
        let (ca, issuer) = authority();
        let (other_ca, _) = authority();
        let (leaf, key) = certificate(&["webhook.example"], false, Some(&issuer));
        assert_eq!(
            handshake(
                vec![leaf, ca.clone()],
                &key,
                vec![other_ca.clone()],
                "webhook.example"
            )
            .unwrap_err(),
            unknown
        );
        let (self_signed, key) = certificate(&["webhook.example"], true, None);
        assert_eq!(
            handshake(
                vec![self_signed],
                &key,
                vec![ca, other_ca],
                "webhook.example"
            )
            .unwrap_err(),
            unknown
        );
    }

    #[test]
    fn chains_to_a_bundle_certificate_are_trusted() {
        let (ca, issuer) = authority();
        let (other_ca, _) = authority();
        let (leaf, key) = certificate(&["webhook.example", "::1"], false, Some(&issuer));
        for name in ["webhook.example", "::1"] {
            handshake(vec![leaf.clone(), ca.clone()], &key, vec![ca.clone()], name).unwrap();
        }
        // A bundle of several certificates, in either order.
        handshake(
            vec![leaf.clone()],
            &key,
            vec![other_ca.clone(), ca.clone()],
            "webhook.example",
        )
        .unwrap();
        // A CA serving TLS, signed by a certificate of the bundle: Go takes it.
        let (ca_leaf, key) = certificate(&["webhook.example"], true, Some(&issuer));
        handshake(vec![ca_leaf], &key, vec![ca, other_ca], "webhook.example").unwrap();
    }

    #[test]
    fn a_bundle_of_two_self_signed_certificates_trusts_each() {
        let (first, first_key) = certificate(&["first.example"], true, None);
        let (second, second_key) = certificate(&["second.example"], true, None);
        let bundle = vec![first.clone(), second.clone()];
        handshake(vec![first], &first_key, bundle.clone(), "first.example").unwrap();
        handshake(vec![second], &second_key, bundle, "second.example").unwrap();
    }

    #[test]
    fn an_expired_certificate_is_refused_in_gos_words() {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec!["webhook.example".to_string()]).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let cert = params.self_signed(&key).unwrap().der().clone();
        let error = handshake(vec![cert.clone()], &key, vec![cert], "webhook.example").unwrap_err();
        assert!(
            error.starts_with("tls: failed to verify certificate: x509: certificate has expired or is not yet valid: current time 20")
                && error.ends_with(" is after 2021-01-01T00:00:00Z"),
            "{error}"
        );
    }
}
