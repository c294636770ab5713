//! The serving certificate: given by flags, or generated once (a self-signed CA plus a serving certificate for
//! `localhost`, `127.0.0.1` and `::1`) and reused on every restart so that kubeconfigs and `APIService`
//! `caBundle`s written earlier keep working; and the TLS settings (`--tls-min-version`, `--tls-cipher-suites`).
//! Which certificate a handshake gets, and reading its files again, is in `dynamic_certificates`.
//!
//! rustls with the `ring` provider throughout; ALPN offers `h2` and `http/1.1`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ResolvesServerCert;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::sign::CertifiedKey;
use rustls::{CipherSuite, DigitallySignedStruct, ServerConfig, SignatureScheme};

use super::ServingOptions;
use crate::tls_verify::CaBundleVerifier;

/// The serving certificate file name in the certificate directory (chain: serving certificate, then CA).
pub const CERT_FILE: &str = "apiserver.crt";
/// The serving key file name in the certificate directory.
pub const KEY_FILE: &str = "apiserver.key";
/// The CA certificate file name in the certificate directory, for clients to trust.
pub const CA_FILE: &str = "ca.crt";

/// The names a generated serving certificate is valid for.
pub const GENERATED_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1"];

/// How long generated certificates are valid (upstream: one year).
const GENERATED_VALIDITY: time::Duration = time::Duration::days(365);

/// Loading, generating or using a certificate failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// Reading or writing a certificate file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file did not hold what it should (no certificate, no key, bad PEM).
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Certificate generation failed.
    #[error("generating a self-signed certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the certificate and key.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// A cipher suite the `ring` provider does not implement was asked for.
    #[error("Unsupported cipher suite: {0}")]
    UnsupportedCipherSuite(String),
}

/// The certificate and key the server presents, and (when generated) the CA that clients should trust.
#[derive(Debug)]
pub struct ServingCertificate {
    /// The chain, serving certificate first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The private key of the serving certificate.
    pub key: PrivateKeyDer<'static>,
    /// The PEM of the CA that signed a generated certificate, for kubeconfigs and `APIService.caBundle`.
    /// `None` when the certificate came from `--tls-cert-file`.
    pub ca_pem: Option<String>,
    /// Where the certificate was read from or written to; the server reads it again when it changes.
    pub cert_file: PathBuf,
    /// Where the key was read from or written to; read again with `cert_file`.
    pub key_file: PathBuf,
    /// Whether this run generated the files (false when they were given or reused).
    pub generated: bool,
}

impl ServingCertificate {
    /// Loads `--tls-cert-file`/`--tls-private-key-file`, or reuses or generates certificates in the certificate
    /// directory (`--cert-dir`, else `default_cert_dir`, else upstream's default).
    pub fn from_options(
        options: &ServingOptions,
        default_cert_dir: Option<&Path>,
    ) -> Result<Self, TlsError> {
        match (&options.tls_cert_file, &options.tls_private_key_file) {
            (Some(cert), Some(key)) => Self::load(cert, key, None),
            _ => Self::load_or_generate(&options.effective_cert_dir(default_cert_dir)),
        }
    }

    /// Reads a PEM chain and key (and optionally a CA PEM file).
    pub fn load(
        cert_file: &Path,
        key_file: &Path,
        ca_file: Option<&Path>,
    ) -> Result<Self, TlsError> {
        let chain = parse_certs(read_string(cert_file)?.as_bytes(), cert_file)?;
        let key = parse_key(read_string(key_file)?.as_bytes(), key_file)?;
        let ca_pem = match ca_file {
            Some(path) => Some(read_string(path)?),
            None => None,
        };
        Ok(ServingCertificate {
            chain,
            key,
            ca_pem,
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            generated: false,
        })
    }

    /// Reuses `apiserver.crt`, `apiserver.key` and `ca.crt` in `dir` when they are present and valid (the chain
    /// verifies against the CA for every generated name, now, and the key matches); otherwise generates new ones
    /// and writes them (key files mode 0600).
    pub fn load_or_generate(dir: &Path) -> Result<Self, TlsError> {
        let (cert_file, key_file, ca_file) =
            (dir.join(CERT_FILE), dir.join(KEY_FILE), dir.join(CA_FILE));
        if cert_file.exists() && key_file.exists() && ca_file.exists() {
            match Self::load(&cert_file, &key_file, Some(&ca_file))
                .and_then(|c| c.verify().map(|()| c))
            {
                Ok(existing) => return Ok(existing),
                Err(e) => {
                    tracing::warn!(dir = %dir.display(), "regenerating serving certificates: {e}")
                }
            }
        }
        let generated = generate()?;
        std::fs::create_dir_all(dir).map_err(|source| TlsError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        write_file(&ca_file, generated.ca_pem.as_bytes(), false)?;
        write_file(&key_file, generated.key_pem.as_bytes(), true)?;
        write_file(
            &cert_file,
            format!("{}{}", generated.cert_pem, generated.ca_pem).as_bytes(),
            false,
        )?;
        let mut cert = Self::load(&cert_file, &key_file, Some(&ca_file))?;
        cert.generated = true;
        Ok(cert)
    }

    /// Checks that the chain verifies against the CA for all generated names at this moment, and that the key
    /// belongs to the certificate.
    fn verify(&self) -> Result<(), TlsError> {
        let invalid = |message: String| TlsError::Invalid {
            path: self.cert_file.clone(),
            message,
        };
        let ca_pem = self.ca_pem.as_deref().unwrap_or_default();
        // As clients (Go's included) will check it.
        let verifier =
            CaBundleVerifier::from_pem(ca_pem.as_bytes()).map_err(|e| invalid(e.to_string()))?;
        let (leaf, intermediates) = self
            .chain
            .split_first()
            .ok_or_else(|| invalid("no certificate".into()))?;
        for name in GENERATED_NAMES {
            let server_name = ServerName::try_from(*name).map_err(|e| invalid(e.to_string()))?;
            verifier
                .verify_server_cert(leaf, intermediates, &server_name, &[], UnixTime::now())
                .map_err(|e| invalid(format!("not valid for {name}: {e}")))?;
        }
        self.certified_key().map(drop)
    }

    /// The chain and its signing key, for handshakes; fails when the key does not belong to the certificate.
    pub fn certified_key(&self) -> Result<CertifiedKey, TlsError> {
        certified_key(self.chain.clone(), self.key.clone_key(), &self.cert_file)
    }
}

/// A TLS version `--tls-min-version` may name. rustls serves TLS 1.2 and 1.3 only, so upstream's
/// `VersionTLS10` and `VersionTLS11` have no counterpart and are refused when parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    /// `VersionTLS12` (the default).
    Tls12,
    /// `VersionTLS13`: TLS 1.2 clients are refused.
    Tls13,
}

/// Parses upstream's `--tls-min-version` names.
pub fn parse_tls_version(name: &str) -> Result<TlsVersion, String> {
    match name {
        "VersionTLS12" => Ok(TlsVersion::Tls12),
        "VersionTLS13" => Ok(TlsVersion::Tls13),
        "VersionTLS10" | "VersionTLS11" => Err(format!(
            "{name} is not supported: this server (rustls) speaks TLS 1.2 and 1.3 only; use VersionTLS12 or \
             VersionTLS13"
        )),
        _ => Err(format!(
            "unknown tls version {name:?}; allowed values: VersionTLS12, VersionTLS13"
        )),
    }
}

/// Go's names (`crypto/tls`, as upstream's `--tls-cipher-suites` takes them) of the suites rustls' `ring`
/// provider implements, with the two older ChaCha20 names upstream still accepts.
const CIPHER_SUITES: &[(&str, CipherSuite)] = &[
    (
        "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

/// The suites Go (so upstream) accepts and rustls does not implement: CBC, RC4, 3DES, RSA key exchange.
const CIPHER_SUITES_RUSTLS_LACKS: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
];

/// Parses one of upstream's `--tls-cipher-suites` names. A suite Go knows but rustls does not implement is
/// refused by name rather than dropped, so that a server never runs with fewer suites than its flags say.
pub fn parse_cipher_suite(name: &str) -> Result<CipherSuite, String> {
    if let Some((_, suite)) = CIPHER_SUITES.iter().find(|(n, _)| *n == name) {
        return Ok(*suite);
    }
    if CIPHER_SUITES_RUSTLS_LACKS.contains(&name) {
        return Err(format!(
            "Unsupported cipher suite: {name} (rustls implements only AEAD suites: TLS 1.3's, and ECDHE with \
             AES-GCM or ChaCha20-Poly1305 for TLS 1.2)"
        ));
    }
    // Upstream's text.
    Err(format!(
        "Cipher suite {name} not supported or doesn't exist"
    ))
}

/// The rustls server configuration: `certificates` chooses the certificate per handshake; the `ring` provider
/// with the server's choice of cipher suite (AES-128-GCM first, see `aes_128_first`) among
/// `--tls-cipher-suites`, from `--tls-min-version` up; ALPN `h2` then `http/1.1`; and a request for (not a
/// demand of) a client certificate.
///
/// Go applies `--tls-cipher-suites` to TLS 1.2 only and always offers all TLS 1.3 suites. Here a list without
/// TLS 1.3 suites does the same; a list that names some restricts TLS 1.3 to those, as asked.
pub fn server_config(
    options: &ServingOptions,
    certificates: Arc<dyn ResolvesServerCert>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let mut provider = rustls::crypto::ring::default_provider();
    let listed = &options.tls_cipher_suites;
    if !listed.is_empty() {
        let version = |suite: &CipherSuite| {
            provider
                .cipher_suites
                .iter()
                .find(|s| s.suite() == *suite)
                .map(|s| s.version())
        };
        if let Some(missing) = listed.iter().find(|s| version(s).is_none()) {
            return Err(TlsError::UnsupportedCipherSuite(
                missing
                    .as_str()
                    .map_or_else(|| format!("{missing:?}"), str::to_string),
            ));
        }
        let lists_tls13 = listed
            .iter()
            .any(|s| version(s) == Some(&rustls::version::TLS13));
        provider.cipher_suites.retain(|s| {
            listed.contains(&s.suite()) || (!lists_tls13 && s.version() == &rustls::version::TLS13)
        });
    }
    let versions: &[&rustls::SupportedProtocolVersion] = match options.tls_min_version {
        None | Some(TlsVersion::Tls12) => rustls::DEFAULT_VERSIONS,
        Some(TlsVersion::Tls13) => &[&rustls::version::TLS13],
    };
    let provider = Arc::new(aes_128_first(provider));
    let mut config = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)?
        .with_client_cert_verifier(Arc::new(RequestClientCertificate { provider }))
        .with_cert_resolver(certificates);
    config.ignore_client_order = true;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The provider's suites with AES-128-GCM before AES-256-GCM, each kind in its own order: what Go's server (so
/// kube-apiserver) picks for a client that offers AES-GCM first, and about a quarter less work per byte than
/// AES-256 (10 rounds, not 14), which a large LIST spends most of its encryption on. Go falls back to
/// ChaCha20-Poly1305 first for clients that name it first (no AES hardware); rustls has no such rule, so they
/// get AES-128 too.
fn aes_128_first(mut provider: rustls::crypto::CryptoProvider) -> rustls::crypto::CryptoProvider {
    use rustls::CipherSuite;
    let rank = |suite: CipherSuite| match suite {
        CipherSuite::TLS13_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        CipherSuite::TLS13_AES_256_GCM_SHA384
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => 1,
        _ => 2,
    };
    // Stable: TLS 1.3 suites stay before TLS 1.2 ones, ECDSA before RSA.
    provider.cipher_suites.sort_by_key(|suite| {
        (
            suite.version() == &rustls::version::TLS12,
            rank(suite.suite()),
        )
    });
    provider
}

/// Asks every client for a certificate and checks that the client holds its key, but leaves judging the
/// certificate to the authenticators (upstream's `tls.RequestClientCert`): which CAs are trusted changes at run
/// time (rotated files, the cluster's authentication ConfigMap), and a certificate that no CA vouches for must
/// give a 401 from authentication, not a failed handshake. No CA names are sent, so clients offer whatever
/// certificate they have.
#[derive(Debug)]
struct RequestClientCertificate {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ClientCertVerifier for RequestClientCertificate {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
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

struct Generated {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

/// A CA (`localhost-ca@<unix time>`) and a serving certificate (`localhost@<unix time>`) it signs, as upstream's
/// `GenerateSelfSignedCertKey` names them.
fn generate() -> Result<Generated, TlsError> {
    let now = time::OffsetDateTime::now_utc();
    let stamp = now.unix_timestamp();
    let not_before = now - time::Duration::hours(1);
    let not_after = now + GENERATED_VALIDITY;

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = DistinguishedName::new();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, format!("localhost-ca@{stamp}"));
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::CrlSign,
    ];
    ca_params.not_before = not_before;
    ca_params.not_after = not_after;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(
        GENERATED_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>(),
    )?;
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, format!("localhost@{stamp}"));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    params.not_before = not_before;
    params.not_after = not_after;
    let cert = params.signed_by(&key, &issuer)?;

    Ok(Generated {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn read_string(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The certificates of a PEM file's contents, which must hold at least one; `path` is for errors.
pub(super) fn parse_certs(
    pem: &[u8],
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Invalid {
            path: path.to_path_buf(),
            message: format!("bad PEM: {e}"),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Invalid {
            path: path.to_path_buf(),
            message: "no certificate found".into(),
        });
    }
    Ok(chain)
}

/// The private key of a PEM file's contents; `path` is for errors.
pub(super) fn parse_key(pem: &[u8], path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| TlsError::Invalid {
        path: path.to_path_buf(),
        message: format!("no usable private key: {e}"),
    })
}

/// A chain and its key as rustls signs with them, checked to belong together; `cert_file` is for errors.
pub(super) fn certified_key(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    cert_file: &Path,
) -> Result<CertifiedKey, TlsError> {
    let invalid = |message: String| TlsError::Invalid {
        path: cert_file.to_path_buf(),
        message,
    };
    let signing_key = rustls::crypto::ring::default_provider()
        .key_provider
        .load_private_key(key)
        .map_err(|e| invalid(e.to_string()))?;
    let certified = CertifiedKey::new(chain, signing_key);
    certified
        .keys_match()
        .map_err(|e| invalid(format!("key does not match certificate: {e}")))?;
    Ok(certified)
}

fn write_file(path: &Path, contents: &[u8], private: bool) -> Result<(), TlsError> {
    use std::io::Write;
    let io = |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    #[cfg(not(unix))]
    let _ = private;
    let mut file = options.open(path).map_err(io)?;
    file.write_all(contents).map_err(io)?;
    file.sync_all().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::RootCertStore;

    #[test]
    fn generates_then_reuses_then_regenerates_when_broken() {
        let dir = std::env::temp_dir().join(format!("apiserver-tls-{}", uuid::Uuid::new_v4()));
        let first = ServingCertificate::load_or_generate(&dir).unwrap();
        assert!(first.generated);
        assert_eq!(first.chain.len(), 2);
        first.verify().unwrap();
        let bytes = std::fs::read(dir.join(CERT_FILE)).unwrap();

        let second = ServingCertificate::load_or_generate(&dir).unwrap();
        assert!(!second.generated);
        assert_eq!(std::fs::read(dir.join(CERT_FILE)).unwrap(), bytes);
        assert_eq!(second.ca_pem, first.ca_pem);

        // A CA that did not sign the certificate: regenerate.
        let other = generate().unwrap();
        std::fs::write(dir.join(CA_FILE), other.ca_pem).unwrap();
        let third = ServingCertificate::load_or_generate(&dir).unwrap();
        assert!(third.generated);
        assert_ne!(std::fs::read(dir.join(CERT_FILE)).unwrap(), bytes);
        third.certified_key().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A suite set in code rather than parsed from the flag is checked too: never silently dropped.
    #[test]
    fn a_suite_rustls_lacks_is_refused() {
        let dir = std::env::temp_dir().join(format!("apiserver-tls-{}", uuid::Uuid::new_v4()));
        let serving = ServingCertificate::load_or_generate(&dir).unwrap();
        let resolver = Arc::new(rustls::sign::SingleCertAndKey::from(
            serving.certified_key().unwrap(),
        ));
        let options = ServingOptions {
            tls_cipher_suites: vec![
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS_RSA_WITH_AES_128_CBC_SHA,
            ],
            ..ServingOptions::default()
        };
        let e = server_config(&options, resolver).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Unsupported cipher suite: TLS_RSA_WITH_AES_128_CBC_SHA"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A client that prefers AES-256 (rustls' and OpenSSL's default order) gets AES-128, as from Go's server.
    #[test]
    fn the_server_picks_aes_128_gcm() {
        let dir = std::env::temp_dir().join(format!("apiserver-tls-{}", uuid::Uuid::new_v4()));
        let serving = ServingCertificate::load_or_generate(&dir).unwrap();
        let mut roots = RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(serving.ca_pem.as_deref().unwrap().as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        for versions in [&[&rustls::version::TLS13][..], &[&rustls::version::TLS12]] {
            let client_config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_protocol_versions(versions)
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
            let mut client = rustls::ClientConnection::new(
                Arc::new(client_config),
                ServerName::try_from("localhost").unwrap(),
            )
            .unwrap();
            let resolver = Arc::new(rustls::sign::SingleCertAndKey::from(
                serving.certified_key().unwrap(),
            ));
            let config = server_config(&ServingOptions::default(), resolver).unwrap();
            let mut server = rustls::ServerConnection::new(config).unwrap();
            // The handshake in memory: each side's output is the other's input.
            while client.is_handshaking() || server.is_handshaking() {
                let mut wire = Vec::new();
                client.write_tls(&mut wire).unwrap();
                server.read_tls(&mut wire.as_slice()).unwrap();
                server.process_new_packets().unwrap();
                let mut wire = Vec::new();
                server.write_tls(&mut wire).unwrap();
                client.read_tls(&mut wire.as_slice()).unwrap();
                client.process_new_packets().unwrap();
            }
            let suite = server.negotiated_cipher_suite().unwrap().suite();
            assert!(
                matches!(
                    suite,
                    rustls::CipherSuite::TLS13_AES_128_GCM_SHA256
                        | rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                        | rustls::CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
                ),
                "{suite:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
