//! Client certificates: a CA bundle that verifies them, and the authenticator that turns a verified certificate
//! into a user (upstream `x509.NewDynamic` with `CommonNameUserConversion`: CN = user, O = groups).
//!
//! The TLS layer asks every client for a certificate but does not judge it (see
//! [`crate::server::tls`]): the bundles here change at run time (a rotated CA file, a new
//! `extension-apiserver-authentication` ConfigMap), so chains are verified per request against whichever bundle
//! is current, as upstream's dynamic CA providers do.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use http::request::Parts;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;

use super::{AuthenticationError, Authenticator, User};

/// A set of CA certificates that client certificates are verified against.
#[derive(Clone)]
pub struct CaBundle {
    pem: String,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle")
            .field("pem_bytes", &self.pem.len())
            .finish()
    }
}

impl PartialEq for CaBundle {
    fn eq(&self, other: &Self) -> bool {
        self.pem == other.pem
    }
}

impl CaBundle {
    /// Parses a PEM bundle of one or more CA certificates.
    pub fn from_pem(pem: &str) -> Result<Self, String> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("bad PEM: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("bad CA certificate: {e}"))?;
        }
        if roots.is_empty() {
            return Err("no CA certificate found".into());
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(CaBundle {
            pem: pem.to_string(),
            verifier,
        })
    }

    /// The PEM the bundle was made from.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// Verifies a chain (leaf first) for client authentication, now.
    pub fn verify(&self, chain: &[CertificateDer<'static>]) -> Result<(), String> {
        let (leaf, intermediates) = chain.split_first().ok_or("no client certificate")?;
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

/// The subject of a certificate, as far as authentication cares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    /// The CN (empty if none).
    pub common_name: String,
    /// Every O, in order.
    pub organizations: Vec<String>,
    /// The serial number in hex, for log lines.
    pub serial: String,
}

/// Reads the subject of a DER certificate.
pub fn subject(cert: &CertificateDer<'_>) -> Result<Subject, String> {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref())
        .map_err(|e| format!("unparseable certificate: {e}"))?;
    let name = parsed.subject();
    let text = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| {
        attr.as_str().map(str::to_string).unwrap_or_default()
    };
    Ok(Subject {
        common_name: name.iter_common_name().next().map(text).unwrap_or_default(),
        organizations: name.iter_organization().map(text).collect(),
        serial: parsed.raw_serial_as_string(),
    })
}

/// A value that may be replaced while the server runs (a CA bundle, request-header settings, the serving
/// certificates); readers take a cheap snapshot per request.
pub struct Dynamic<T> {
    current: RwLock<Arc<T>>,
}

impl<T> Dynamic<T> {
    /// Starts with `value`.
    pub fn new(value: T) -> Self {
        Dynamic {
            current: RwLock::new(Arc::new(value)),
        }
    }

    /// The value now.
    pub fn get(&self) -> Arc<T> {
        match self.current.read() {
            Ok(v) => v.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces the value for requests that start from now on.
    pub fn set(&self, value: T) {
        match self.current.write() {
            Ok(mut v) => *v = Arc::new(value),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(value),
        }
    }
}

impl<T: Default> Default for Dynamic<T> {
    fn default() -> Self {
        Dynamic::new(T::default())
    }
}

/// The client certificate chain of the connection a request came on, leaf first: the server puts it in every
/// request's extensions (empty when the client sent none).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerCertificates(pub Vec<CertificateDer<'static>>);

/// The peer certificates of the request's connection (empty without TLS client authentication).
pub(crate) fn peer_certificates(request: &Parts) -> &[CertificateDer<'static>] {
    request
        .extensions
        .get::<PeerCertificates>()
        .map(|c| c.0.as_slice())
        .unwrap_or_default()
}

/// Authenticates requests whose client certificate verifies against the client CA (`--client-ca-file`, or the
/// `client-ca-file` of the cluster's authentication ConfigMap): the CN is the user, each O a group.
///
/// No certificate, no CA configured, or a verified certificate with no CN: not mine. A certificate that does not
/// verify (foreign CA, expired, not for client authentication, a CA certificate as the client's, which Go's
/// verifier would take but webpki refuses): an error, so the request is refused rather than served as anonymous.
pub struct ClientCertificates {
    ca: Arc<Dynamic<Option<CaBundle>>>,
}

impl ClientCertificates {
    /// Verifies against whatever `ca` holds at the time of each request.
    pub fn new(ca: Arc<Dynamic<Option<CaBundle>>>) -> Self {
        ClientCertificates { ca }
    }
}

#[async_trait]
impl Authenticator for ClientCertificates {
    async fn authenticate(&self, request: &Parts) -> Result<Option<User>, AuthenticationError> {
        let chain = peer_certificates(request);
        if chain.is_empty() {
            return Ok(None);
        }
        let ca = self.ca.get();
        let Some(ca) = ca.as_ref() else {
            return Ok(None);
        };
        let subject = subject(&chain[0]).map_err(AuthenticationError)?;
        ca.verify(chain).map_err(|e| {
            AuthenticationError(format!(
                "verifying certificate SN={}, CN={} failed: {e}",
                subject.serial, subject.common_name
            ))
        })?;
        // A verified certificate without a CN names nobody: not mine, as upstream's `CommonNameUserConversion`
        // (the request goes on to the other authenticators, and may be anonymous).
        if subject.common_name.is_empty() {
            return Ok(None);
        }
        Ok(Some(User {
            name: subject.common_name,
            groups: subject.organizations,
            ..User::default()
        }))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, Issuer, KeyPair,
    };

    /// A CA for tests: its PEM and an issuer to sign client certificates with.
    pub(crate) struct TestCa {
        pub pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    impl TestCa {
        pub(crate) fn new(name: &str) -> Self {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name = DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let cert = params.self_signed(&key).unwrap();
            TestCa {
                pem: cert.pem(),
                issuer: Issuer::new(params, key),
            }
        }

        /// A client certificate with this CN and O, valid from `not_before` days ago for `days` days.
        pub(crate) fn client_cert(
            &self,
            cn: &str,
            org: Option<&str>,
            valid_days: (i64, i64),
        ) -> CertificateDer<'static> {
            let key = KeyPair::generate().unwrap();
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.distinguished_name = DistinguishedName::new();
            params.distinguished_name.push(DnType::CommonName, cn);
            if let Some(org) = org {
                params
                    .distinguished_name
                    .push(DnType::OrganizationName, org);
            }
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
            let now = time::OffsetDateTime::now_utc();
            params.not_before = now - time::Duration::days(valid_days.0);
            params.not_after = now + time::Duration::days(valid_days.1);
            params.signed_by(&key, &self.issuer).unwrap().der().clone()
        }
    }

    pub(crate) fn request_with_certs(certs: Vec<CertificateDer<'static>>) -> Parts {
        let mut parts = http::Request::builder()
            .uri("/apis")
            .body(())
            .unwrap()
            .into_parts()
            .0;
        parts.extensions.insert(PeerCertificates(certs));
        parts
    }

    #[tokio::test]
    async fn verified_certificates_become_users() {
        let ca = TestCa::new("client-ca");
        let other = TestCa::new("other-ca");
        let dynamic = Arc::new(Dynamic::new(Some(CaBundle::from_pem(&ca.pem).unwrap())));
        let auth = ClientCertificates::new(dynamic.clone());

        let alice = ca.client_cert("alice", Some("team-a"), (1, 30));
        let user = auth
            .authenticate(&request_with_certs(vec![alice.clone()]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["team-a"]);

        // No certificate: not mine.
        assert_eq!(
            auth.authenticate(&request_with_certs(vec![]))
                .await
                .unwrap(),
            None
        );
        // A foreign CA or an expired certificate: refused, not anonymous.
        let foreign = other.client_cert("alice", None, (1, 30));
        assert!(
            auth.authenticate(&request_with_certs(vec![foreign]))
                .await
                .is_err()
        );
        let expired = ca.client_cert("alice", None, (30, -1));
        let err = auth
            .authenticate(&request_with_certs(vec![expired]))
            .await
            .unwrap_err();
        assert!(err.0.contains("CN=alice"), "{err}");
        // A verified certificate with an empty CN: not mine, as upstream (it was refused, 401).
        let nameless = ca.client_cert("", Some("team-a"), (1, 30));
        assert_eq!(
            auth.authenticate(&request_with_certs(vec![nameless]))
                .await
                .unwrap(),
            None
        );

        // The CA changes at run time: alice's certificate no longer verifies.
        dynamic.set(Some(CaBundle::from_pem(&other.pem).unwrap()));
        assert!(
            auth.authenticate(&request_with_certs(vec![alice.clone()]))
                .await
                .is_err()
        );
        dynamic.set(None);
        assert_eq!(
            auth.authenticate(&request_with_certs(vec![alice]))
                .await
                .unwrap(),
            None
        );
    }

    #[test]
    fn bundles_refuse_junk() {
        assert!(CaBundle::from_pem("").is_err());
        assert!(
            CaBundle::from_pem("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
                .is_err()
        );
    }
}
