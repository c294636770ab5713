//! Serving certificates that follow their files, as upstream's `dynamiccertificates` package: the default
//! certificate (`--tls-cert-file`/`--tls-private-key-file`, or the one generated in `--cert-dir`) and the SNI
//! certificates (`--tls-sni-cert-key`) are read again every [`FILE_POLL_INTERVAL`] (the interval of the client CA
//! files; upstream checks every minute and on inotify events), so a Secret that cert-manager rotates is served
//! without a restart. New handshakes get the new certificate; open connections keep theirs. A pair that does not
//! load, or whose key does not belong to its certificate, is logged and the previous pair keeps serving.
//!
//! A handshake gets the SNI certificate for its server name, an exact name before a wildcard one (Go's
//! `tls.Config.NameToCertificate` lookup), else the default certificate.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::tls::{self, ServingCertificate, TlsError};
use crate::auth::Dynamic;
use crate::auth::delegating::FILE_POLL_INTERVAL;
use crate::storage::labels::dns1123_subdomain_errors;

/// One `--tls-sni-cert-key`: a certificate and key file, and the server names it is for (when empty, the names
/// in the certificate: its CN when that is a DNS name, and its DNS SANs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SniCertKey {
    /// The PEM certificate (chain) file.
    pub cert_file: PathBuf,
    /// The PEM private key file.
    pub key_file: PathBuf,
    /// Explicit server names or wildcard patterns (`*.example.com`).
    pub names: Vec<String>,
}

impl FromStr for SniCertKey {
    type Err = String;

    /// Upstream's `NamedCertKey` syntax: `cert,key` or `cert,key:name,name`.
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let (cert_key, names) = match value.split_once(':') {
            Some((cert_key, names)) => {
                let names = names.trim();
                if names.is_empty() {
                    return Err("empty names list is not allowed".into());
                }
                (
                    cert_key,
                    names.split(',').map(|n| n.trim().to_string()).collect(),
                )
            }
            None => (value, Vec::new()),
        };
        match cert_key.trim().split(',').collect::<Vec<_>>()[..] {
            [cert, key] => Ok(SniCertKey {
                cert_file: PathBuf::from(cert.trim()),
                key_file: PathBuf::from(key.trim()),
                names,
            }),
            _ => Err("expected comma separated certificate and key file paths".into()),
        }
    }
}

/// The certificates a handshake may get, as they are now.
struct NameTable {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

impl NameTable {
    /// As upstream's `BuildNamedCertificates`: earlier flags win over later ones, and explicit names over
    /// names taken from certificates.
    fn new(default: Arc<CertifiedKey>, sni: &[CertKeyFiles]) -> Self {
        let mut by_name = HashMap::new();
        let mut explicit = HashMap::new();
        for pair in sni.iter().rev() {
            if pair.names.is_empty() {
                for name in certificate_names(&pair.current) {
                    by_name.insert(name.to_ascii_lowercase(), pair.current.clone());
                }
            } else {
                for name in &pair.names {
                    explicit.insert(name.to_ascii_lowercase(), pair.current.clone());
                }
            }
        }
        by_name.extend(explicit);
        NameTable { default, by_name }
    }

    /// The exact name, else the name with its first label replaced by `*`, else the default.
    fn certificate_for(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = server_name.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        let wildcard = match name.split_once('.') {
            Some((_, parent)) => format!("*.{parent}"),
            None => "*".to_string(),
        };
        self.by_name
            .get(&name)
            .or_else(|| self.by_name.get(&wildcard))
            .unwrap_or(&self.default)
            .clone()
    }
}

/// Upstream's `getCertificateNames`: the CN unless it is an IP address or not a DNS name, then the DNS SANs. IP
/// SANs are left out: SNI never carries an address.
fn certificate_names(key: &CertifiedKey) -> Vec<String> {
    let Some(Ok((_, cert))) = key
        .cert
        .first()
        .map(|der| x509_parser::parse_x509_certificate(der))
    else {
        return Vec::new();
    };
    let mut names = Vec::new();
    if let Some(cn) = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
    {
        let is_ip = cn.parse::<std::net::IpAddr>().is_ok();
        let is_dns = cn == "*" || dns1123_subdomain_errors(cn.trim_start_matches("*.")).is_empty();
        if !is_ip && is_dns {
            names.push(cn.to_string());
        }
    }
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        for name in &san.value.general_names {
            if let x509_parser::extensions::GeneralName::DNSName(dns) = name {
                names.push(dns.to_string());
            }
        }
    }
    names
}

/// What a certificate file and a key file held, or why they could not be read.
type Contents = Result<(Vec<u8>, Vec<u8>), String>;

/// A certificate and key file pair, what was last read from them, and the pair in use.
struct CertKeyFiles {
    cert_file: PathBuf,
    key_file: PathBuf,
    names: Vec<String>,
    /// The files' contents at the last look (or why they could not be read), so that a change is loaded, and a
    /// broken pair logged, once.
    seen: Option<Contents>,
    current: Arc<CertifiedKey>,
}

impl CertKeyFiles {
    fn load(cert_file: &Path, key_file: &Path, names: Vec<String>) -> Result<Self, TlsError> {
        let current = ServingCertificate::load(cert_file, key_file, None)?.certified_key()?;
        Ok(CertKeyFiles {
            cert_file: cert_file.to_path_buf(),
            key_file: key_file.to_path_buf(),
            names,
            seen: None,
            current: Arc::new(current),
        })
    }

    /// Reads the files; returns whether a new pair is now in use.
    fn reload(&mut self) -> bool {
        let read =
            |path: &Path| std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()));
        let contents: Contents =
            read(&self.cert_file).and_then(|cert| Ok((cert, read(&self.key_file)?)));
        if self.seen.as_ref() == Some(&contents) {
            return false;
        }
        let loaded = match &contents {
            Ok((cert, key)) => tls::parse_certs(cert, &self.cert_file)
                .and_then(|chain| Ok((chain, tls::parse_key(key, &self.key_file)?)))
                .and_then(|(chain, key)| tls::certified_key(chain, key, &self.cert_file))
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.clone()),
        };
        self.seen = Some(contents);
        match loaded {
            Ok(key) if key.cert == self.current.cert => false,
            Ok(key) => {
                tracing::info!(
                    cert_file = %self.cert_file.display(),
                    key_file = %self.key_file.display(),
                    "loaded a new serving certificate"
                );
                self.current = Arc::new(key);
                true
            }
            Err(e) => {
                tracing::warn!(
                    cert_file = %self.cert_file.display(),
                    key_file = %self.key_file.display(),
                    "keeping the previous serving certificate: {e}"
                );
                false
            }
        }
    }
}

/// The serving certificates and their files: [`resolver`](Self::resolver) chooses one per handshake,
/// [`keep_current`](Self::keep_current) follows the files.
pub(super) struct DynamicServingCertificates {
    default: CertKeyFiles,
    sni: Vec<CertKeyFiles>,
    table: Arc<Dynamic<NameTable>>,
}

impl DynamicServingCertificates {
    /// Starts from `default` (already loaded) and loads the SNI pairs: one that does not load fails the start, as
    /// upstream.
    pub(super) fn load(default: &ServingCertificate, sni: &[SniCertKey]) -> Result<Self, TlsError> {
        let default = CertKeyFiles {
            cert_file: default.cert_file.clone(),
            key_file: default.key_file.clone(),
            names: Vec::new(),
            seen: None,
            current: Arc::new(default.certified_key()?),
        };
        let sni = sni
            .iter()
            .map(|s| CertKeyFiles::load(&s.cert_file, &s.key_file, s.names.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let table = Arc::new(Dynamic::new(NameTable::new(default.current.clone(), &sni)));
        Ok(DynamicServingCertificates {
            default,
            sni,
            table,
        })
    }

    /// What rustls asks for a certificate.
    pub(super) fn resolver(&self) -> Arc<dyn ResolvesServerCert> {
        Arc::new(CertificateResolver(self.table.clone()))
    }

    /// Reads the files every [`FILE_POLL_INTERVAL`] until `stop` completes.
    pub(super) async fn keep_current(mut self, stop: impl Future<Output = ()>) {
        let mut poll = tokio::time::interval(FILE_POLL_INTERVAL);
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => return,
                _ = poll.tick() => {}
            }
            let mut changed = self.default.reload();
            for pair in &mut self.sni {
                changed |= pair.reload();
            }
            if changed {
                self.table
                    .set(NameTable::new(self.default.current.clone(), &self.sni));
            }
        }
    }
}

struct CertificateResolver(Arc<Dynamic<NameTable>>);

impl std::fmt::Debug for CertificateResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CertificateResolver").finish_non_exhaustive()
    }
}

impl ResolvesServerCert for CertificateResolver {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.get().certificate_for(client_hello.server_name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn certified(cn: &str, sans: &[&str]) -> Arc<CertifiedKey> {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.self_signed(&key).unwrap();
        let key_der = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        Arc::new(tls::certified_key(vec![cert.der().clone()], key_der, Path::new("test")).unwrap())
    }

    fn pair(current: Arc<CertifiedKey>, names: &[&str]) -> CertKeyFiles {
        CertKeyFiles {
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            names: names.iter().map(|s| s.to_string()).collect(),
            seen: None,
            current,
        }
    }

    #[test]
    fn parses_upstream_syntax() {
        let plain: SniCertKey = " foo.crt , foo.key ".parse().unwrap();
        assert_eq!(plain.cert_file, PathBuf::from("foo.crt"));
        assert_eq!(plain.key_file, PathBuf::from("foo.key"));
        assert!(plain.names.is_empty());
        let named: SniCertKey = "foo.crt,foo.key:*.foo.com, foo.com".parse().unwrap();
        assert_eq!(named.names, ["*.foo.com", "foo.com"]);
        assert_eq!(
            "foo.crt,foo.key:".parse::<SniCertKey>().unwrap_err(),
            "empty names list is not allowed"
        );
        for bad in ["", "a,b,c", "foo.crt"] {
            assert_eq!(
                bad.parse::<SniCertKey>().unwrap_err(),
                "expected comma separated certificate and key file paths"
            );
        }
    }

    #[test]
    fn names_come_from_the_cn_and_dns_sans() {
        let key = certified("foo.example.com", &["bar.example.com", "10.0.0.1"]);
        assert_eq!(
            certificate_names(&key),
            ["foo.example.com", "bar.example.com"]
        );
        // Upstream takes a CN only when it is a lowercase DNS name.
        assert_eq!(
            certificate_names(&certified("Foo.example.com", &[])),
            Vec::<String>::new()
        );
        assert_eq!(
            certificate_names(&certified("10.0.0.1", &["a.example.com"])),
            ["a.example.com"]
        );
        assert_eq!(
            certificate_names(&certified("not a name", &["*.example.com"])),
            ["*.example.com"]
        );
    }

    #[test]
    fn exact_before_wildcard_explicit_before_extracted_earlier_before_later() {
        let default = certified("default", &[]);
        let wildcard = certified("wildcard", &["*.example.com"]);
        let exact = certified("exact", &["a.example.com"]);
        let explicit = certified("explicit", &["other.test"]);
        let later = certified("later", &["a.example.com", "b.example.com"]);
        let table = NameTable::new(
            default.clone(),
            &[
                pair(wildcard.clone(), &[]),
                pair(exact.clone(), &[]),
                pair(explicit.clone(), &["B.example.com"]),
                pair(later.clone(), &[]),
            ],
        );
        let chosen = |name: Option<&str>| table.certificate_for(name);
        assert!(Arc::ptr_eq(&chosen(Some("a.example.com")), &exact));
        assert!(Arc::ptr_eq(&chosen(Some("A.Example.com")), &exact));
        assert!(Arc::ptr_eq(&chosen(Some("b.example.com")), &explicit));
        assert!(Arc::ptr_eq(&chosen(Some("c.example.com")), &wildcard));
        // A wildcard covers one label only.
        assert!(Arc::ptr_eq(&chosen(Some("x.c.example.com")), &default));
        assert!(Arc::ptr_eq(&chosen(Some("other.test")), &default));
        assert!(Arc::ptr_eq(&chosen(None), &default));
    }
}
