//! Serving flags, named as upstream's `SecureServingOptions`, `ServerRunOptions` and `AdmissionOptions` name them,
//! so operators' command lines and manifests carry over.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustls::CipherSuite;

use super::SniCertKey;
use super::tls::{TlsVersion, parse_cipher_suite, parse_tls_version};
pub use crate::meta::parse_duration;

/// Where generated certificates go when neither `--cert-dir` nor the embedding binary says otherwise
/// (upstream's default).
pub const DEFAULT_CERT_DIR: &str = "apiserver.local.config/certificates";

/// The serving flags. A binary flattens them into its own parser:
///
/// ```
/// use clap::Parser;
///
/// #[derive(Parser)]
/// struct Cli {
///     #[command(flatten)]
///     serving: apiserver::server::ServingOptions,
///     /// A flag of the binary's own.
///     #[arg(long)]
///     data_dir: Option<std::path::PathBuf>,
/// }
///
/// let cli = Cli::parse_from(["pizza", "--secure-port=0", "--enable-admission-plugins=A,B"]);
/// assert_eq!(cli.serving.secure_port, 0);
/// assert_eq!(cli.serving.enable_admission_plugins, ["A", "B"]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
// Its doc comment (an example) is not the help of the binaries that flatten it.
#[command(about = None, long_about = None)]
pub struct ServingOptions {
    /// The port on which to serve HTTPS with authentication and authorization. 0 picks a free port (the bound
    /// address is reported when serving starts).
    #[arg(long = "secure-port", default_value_t = 8443)]
    pub secure_port: u16,

    /// The IP address on which to listen for the --secure-port port.
    #[arg(long = "bind-address", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    pub bind_address: IpAddr,

    /// The directory where the TLS certs are located. If --tls-cert-file and --tls-private-key-file are
    /// provided, this flag will be ignored. Defaults to `<data-dir>/certs` when the binary has a data directory,
    /// else `apiserver.local.config/certificates`.
    #[arg(long = "cert-dir")]
    pub cert_dir: Option<PathBuf>,

    /// File containing the default x509 Certificate for HTTPS (CA cert, if any, concatenated after server
    /// cert). If not provided, a self-signed CA and serving certificate for localhost are generated into
    /// --cert-dir, and reused on restart. The certificate and key files are read again every 10 seconds and new
    /// connections get what they hold (a pair that does not load or match is logged and the previous one kept).
    #[arg(long = "tls-cert-file", requires = "tls_private_key_file")]
    pub tls_cert_file: Option<PathBuf>,

    /// File containing the default x509 private key matching --tls-cert-file.
    #[arg(long = "tls-private-key-file", requires = "tls_cert_file")]
    pub tls_private_key_file: Option<PathBuf>,

    /// A pair of x509 certificate and private key file paths, optionally suffixed with a list of domain patterns
    /// which are fully qualified domain names, possibly with prefixed wildcard segments. If no domain patterns
    /// are provided, the names of the certificate are extracted. Non-wildcard matches trump over wildcard
    /// matches, explicit domain patterns trump over extracted names. For multiple key/certificate pairs, use the
    /// --tls-sni-cert-key multiple times. Examples: "example.crt,example.key" or
    /// "foo.crt,foo.key:*.foo.com,foo.com". Chosen by the name a client sends (SNI) only, so IP patterns never
    /// match. Read again every 10 seconds, as --tls-cert-file.
    #[arg(long = "tls-sni-cert-key")]
    pub tls_sni_cert_key: Vec<SniCertKey>,

    /// Minimum TLS version supported. Possible values: VersionTLS12, VersionTLS13 (default VersionTLS12).
    /// VersionTLS10 and VersionTLS11 are refused: this server speaks TLS 1.2 and 1.3 only.
    #[arg(long = "tls-min-version", value_parser = parse_tls_version)]
    pub tls_min_version: Option<TlsVersion>,

    /// Comma-separated list of cipher suites for the server, in Go's names. If omitted, all those below are
    /// used. Possible values: TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256,
    /// TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    /// TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    /// TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256. Suites Go has and this
    /// server does not (CBC, RC4, 3DES, RSA key exchange) are refused. As with Go, a list without TLS 1.3
    /// suites leaves TLS 1.3's three on; a list naming some restricts TLS 1.3 to them. The server, not the
    /// order listed, decides preference.
    #[arg(long = "tls-cipher-suites", value_delimiter = ',', value_parser = parse_cipher_suite)]
    pub tls_cipher_suites: Vec<CipherSuite>,

    /// Admission plugins that should be enabled in addition to default enabled ones (comma-delimited).
    #[arg(long = "enable-admission-plugins", value_delimiter = ',')]
    pub enable_admission_plugins: Vec<String>,

    /// Admission plugins that should be disabled although they are in the default enabled plugins list
    /// (comma-delimited).
    #[arg(long = "disable-admission-plugins", value_delimiter = ',')]
    pub disable_admission_plugins: Vec<String>,

    /// File with admission control configuration.
    #[arg(long = "admission-control-config-file")]
    pub admission_control_config_file: Option<PathBuf>,

    /// Time to delay the termination. During that time the server keeps serving requests normally, but
    /// /readyz returns failure. A Go duration: `0s`, `15s`, `1m30s`, `500ms`.
    #[arg(long = "shutdown-delay-duration", default_value = "0s", value_parser = parse_duration)]
    pub shutdown_delay_duration: Duration,

    /// The minimum number of seconds a handler must keep a request open before timing it out. Honored by
    /// watches, which pick a random timeout in [this, 2 × this].
    #[arg(long = "min-request-timeout", default_value_t = 1800)]
    pub min_request_timeout: u64,

    /// An optional field indicating the duration a handler must keep a request open before timing it out. This is
    /// the default request timeout for requests but may be overridden by flags such as --min-request-timeout for
    /// specific types of requests (watches). 0 means no limit.
    #[arg(long = "request-timeout", default_value = "1m0s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// The maximum number of non-mutating requests in flight at a given time; 0 means no limit.
    #[arg(long = "max-requests-inflight", default_value_t = 400)]
    pub max_requests_inflight: u32,

    /// The maximum number of mutating requests in flight at a given time; 0 means no limit.
    #[arg(long = "max-mutating-requests-inflight", default_value_t = 200)]
    pub max_mutating_requests_inflight: u32,

    /// The maximum number of watches open at once on the server, for every user; more get 429. 0 means no
    /// limit. (Not an upstream flag: each open watch holds memory.)
    #[arg(long = "max-watches", default_value_t = DEFAULT_MAX_WATCHES)]
    pub max_watches: u32,

    /// The maximum number of watches open at once on one connection; more get 429. 0 means no limit but
    /// --http2-max-streams-per-connection. (Not an upstream flag.)
    #[arg(long = "max-watches-per-connection", default_value_t = 0)]
    pub max_watches_per_connection: u32,

    /// The maximum number of watches one user may have open at once (the user the request is served as: behind
    /// kube-apiserver the one it names in X-Remote-User, after impersonation); more get 429, so that one user
    /// cannot take every slot of --max-watches. Members of system:masters are not limited by it. Unset: a tenth
    /// of --max-watches; 0 means no limit. (Not an upstream flag.)
    #[arg(long = "max-watches-per-user")]
    pub max_watches_per_user: Option<u32>,

    /// The limit that the server gives to clients for the maximum number of streams in an HTTP/2 connection.
    /// Zero means to use golang's default (250).
    #[arg(long = "http2-max-streams-per-connection", default_value_t = DEFAULT_HTTP2_MAX_STREAMS)]
    pub http2_max_streams_per_connection: u32,
}

/// `--max-watches` by default: a watch costs ~15 KiB when idle, so 10,000 stay within ~150 MiB.
pub const DEFAULT_MAX_WATCHES: u32 = 10_000;

/// `--http2-max-streams-per-connection` by default: kube-apiserver's 1000.
pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 1000;

impl Default for ServingOptions {
    fn default() -> Self {
        ServingOptions {
            secure_port: 8443,
            bind_address: IpAddr::V4(Ipv4Addr::LOCALHOST),
            cert_dir: None,
            tls_cert_file: None,
            tls_private_key_file: None,
            tls_sni_cert_key: Vec::new(),
            tls_min_version: None,
            tls_cipher_suites: Vec::new(),
            enable_admission_plugins: Vec::new(),
            disable_admission_plugins: Vec::new(),
            admission_control_config_file: None,
            shutdown_delay_duration: Duration::ZERO,
            min_request_timeout: 1800,
            request_timeout: Duration::from_secs(60),
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            max_watches: DEFAULT_MAX_WATCHES,
            max_watches_per_connection: 0,
            max_watches_per_user: None,
            http2_max_streams_per_connection: DEFAULT_HTTP2_MAX_STREAMS,
        }
    }
}

impl ServingOptions {
    /// `--max-watches-per-user` in force: the flag, else a tenth of `--max-watches` (at least 1; 0 when that is 0).
    pub fn effective_max_watches_per_user(&self) -> u32 {
        self.max_watches_per_user
            .unwrap_or_else(|| self.max_watches.div_ceil(10))
    }

    /// Options for tests and embedding: loopback, a free port, certificates in `cert_dir`.
    pub fn loopback_ephemeral(cert_dir: impl Into<PathBuf>) -> Self {
        ServingOptions {
            secure_port: 0,
            cert_dir: Some(cert_dir.into()),
            ..ServingOptions::default()
        }
    }

    /// The certificate directory in force: `--cert-dir`, else the binary's default, else
    /// [`DEFAULT_CERT_DIR`].
    pub fn effective_cert_dir(&self, binary_default: Option<&Path>) -> PathBuf {
        self.cert_dir
            .clone()
            .or_else(|| binary_default.map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CERT_DIR))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        serving: ServingOptions,
    }

    #[test]
    fn defaults_match_upstream_and_default_impl() {
        let cli = Cli::parse_from(["x"]);
        assert_eq!(cli.serving, ServingOptions::default());
        assert_eq!(cli.serving.secure_port, 8443);
        assert_eq!(cli.serving.bind_address.to_string(), "127.0.0.1");
        assert_eq!(cli.serving.min_request_timeout, 1800);
        assert_eq!(
            cli.serving.effective_cert_dir(None),
            PathBuf::from(DEFAULT_CERT_DIR)
        );
        assert_eq!(
            cli.serving
                .effective_cert_dir(Some(Path::new("/data/certs"))),
            PathBuf::from("/data/certs")
        );
    }

    #[test]
    fn flags() {
        let cli = Cli::parse_from([
            "x",
            "--secure-port",
            "0",
            "--bind-address=::1",
            "--cert-dir=/tmp/c",
            "--tls-cert-file=a.crt",
            "--tls-private-key-file=a.key",
            "--enable-admission-plugins=PizzaToppings,NamespaceLifecycle",
            "--disable-admission-plugins",
            "MutatingAdmissionWebhook",
            "--shutdown-delay-duration=1m30s",
            "--min-request-timeout=60",
            "--max-requests-inflight=10",
            "--request-timeout=30s",
        ]);
        let s = cli.serving;
        assert_eq!(s.secure_port, 0);
        assert_eq!(s.bind_address.to_string(), "::1");
        assert_eq!(
            s.effective_cert_dir(Some(Path::new("/ignored"))),
            PathBuf::from("/tmp/c")
        );
        assert_eq!(s.tls_cert_file, Some(PathBuf::from("a.crt")));
        assert_eq!(
            s.enable_admission_plugins,
            ["PizzaToppings", "NamespaceLifecycle"]
        );
        assert_eq!(s.disable_admission_plugins, ["MutatingAdmissionWebhook"]);
        assert_eq!(s.shutdown_delay_duration, Duration::from_secs(90));
        assert_eq!(s.min_request_timeout, 60);
        assert_eq!(s.max_requests_inflight, 10);
        assert_eq!(s.request_timeout, Duration::from_secs(30));
        // A certificate without its key is refused.
        assert!(Cli::try_parse_from(["x", "--tls-cert-file=a.crt"]).is_err());
    }

    #[test]
    fn tls_flags() {
        let s = Cli::parse_from([
            "x",
            "--tls-sni-cert-key=a.crt,a.key",
            "--tls-sni-cert-key",
            "b.crt,b.key:*.b.example.com,b.example.com",
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        ])
        .serving;
        assert_eq!(s.tls_sni_cert_key.len(), 2);
        assert_eq!(s.tls_sni_cert_key[1].cert_file, PathBuf::from("b.crt"));
        assert_eq!(
            s.tls_sni_cert_key[1].names,
            ["*.b.example.com", "b.example.com"]
        );
        assert_eq!(s.tls_min_version, Some(TlsVersion::Tls13));
        assert_eq!(
            s.tls_cipher_suites,
            [
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
            ]
        );

        let refused = |arg: &str| match Cli::try_parse_from(["x", arg]) {
            Ok(_) => panic!("{arg} accepted"),
            Err(e) => e.to_string(),
        };
        let e = refused("--tls-min-version=VersionTLS11");
        assert!(e.contains("VersionTLS11 is not supported"), "{e}");
        let e = refused("--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_RSA_WITH_AES_128_CBC_SHA");
        assert!(
            e.contains("Unsupported cipher suite: TLS_RSA_WITH_AES_128_CBC_SHA"),
            "{e}"
        );
        let e = refused("--tls-cipher-suites=TLS_MADE_UP");
        assert!(
            e.contains("Cipher suite TLS_MADE_UP not supported or doesn't exist"),
            "{e}"
        );
        let e = refused("--tls-sni-cert-key=a.crt");
        assert!(
            e.contains("expected comma separated certificate and key file paths"),
            "{e}"
        );
    }
}
