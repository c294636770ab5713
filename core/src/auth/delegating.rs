//! Delegated authentication and authorization, as upstream's `DelegatingAuthenticationOptions` and
//! `DelegatingAuthorizationOptions` set them up: the flags, the lookup of the client CA and request-header
//! settings from `kube-system/extension-apiserver-authentication` (kept current by a watch, as CA files are by
//! polling), and the authenticators and authorizer they make. The parts that reach the core cluster (the
//! ConfigMap, TokenReview, SubjectAccessReview) are the `cluster` cargo feature: without it, a kubeconfig flag
//! is refused at start, and client certificates and front-proxy headers from CA files still work.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
#[cfg(feature = "cluster")]
use k8s_openapi::api::core::v1::ConfigMap;
#[cfg(feature = "cluster")]
use kube::api::Api;
#[cfg(feature = "cluster")]
use kube::runtime::watcher;

use super::UnionAuthenticator;
#[cfg(feature = "cluster")]
use super::access_review::SubjectAccessReviewAuthorizer;
use super::request_header::{
    DEFAULT_EXTRA_HEADER_PREFIXES, DEFAULT_GROUP_HEADERS, DEFAULT_USERNAME_HEADERS,
    RequestHeaderConfig, RequestHeaders,
};
#[cfg(feature = "cluster")]
use super::token_review::TokenReviewAuthenticator;
use super::x509::{CaBundle, ClientCertificates, Dynamic};
use crate::cluster::{self, ClusterError};
use crate::meta::parse_duration;

/// The namespace and name of the ConfigMap kube-apiserver publishes its authentication settings in.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// See [`AUTHENTICATION_CONFIGMAP_NAMESPACE`].
pub const AUTHENTICATION_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// Upstream's default `--authorization-always-allow-paths` for a delegating server.
pub const DELEGATED_ALWAYS_ALLOW_PATHS: &[&str] = &["/healthz", "/readyz", "/livez"];

/// How often files given by flags (CA files here, serving certificates in [`crate::server`]) are read again for
/// changes.
pub(crate) const FILE_POLL_INTERVAL: Duration = Duration::from_secs(10);

/// Authentication flags, named as upstream names them.
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct AuthenticationOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// tokenreviews.authentication.k8s.io. Without it, the in-cluster service account is used when running in a
    /// pod.
    #[arg(long = "authentication-kubeconfig")]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// Skip looking up the client CA and request-header settings in the cluster's
    /// kube-system/extension-apiserver-authentication ConfigMap.
    #[arg(long = "authentication-skip-lookup")]
    pub skip_lookup: bool,

    /// If true, failures to look up missing authentication configuration from the cluster are not considered
    /// fatal.
    #[arg(long = "authentication-tolerate-lookup-failure")]
    pub tolerate_lookup_failure: bool,

    /// The duration to cache responses from the webhook token authenticator.
    #[arg(long = "authentication-token-webhook-cache-ttl", default_value = "10s", value_parser = parse_duration)]
    pub token_cache_ttl: Duration,

    /// If set, any request presenting a client certificate signed by one of the authorities in the
    /// client-ca-file is authenticated with an identity corresponding to the CommonName of the client
    /// certificate.
    #[arg(long = "client-ca-file")]
    pub client_ca_file: Option<PathBuf>,

    /// Root certificate bundle to use to verify client certificates on incoming requests before trusting
    /// usernames in headers specified by --requestheader-username-headers.
    #[arg(long = "requestheader-client-ca-file")]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// List of client certificate common names to allow to provide usernames in headers specified by
    /// --requestheader-username-headers. If empty, any client certificate validated by the authorities in
    /// --requestheader-client-ca-file is allowed.
    #[arg(long = "requestheader-allowed-names", value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,

    /// List of request headers to inspect for usernames. X-Remote-User is common.
    #[arg(long = "requestheader-username-headers", value_delimiter = ',', default_values_t = DEFAULT_USERNAME_HEADERS.iter().map(|s| s.to_string()))]
    pub requestheader_username_headers: Vec<String>,

    /// List of request headers to inspect for UIDs. X-Remote-Uid is suggested.
    #[arg(long = "requestheader-uid-headers", value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,

    /// List of request headers to inspect for groups. X-Remote-Group is suggested.
    #[arg(long = "requestheader-group-headers", value_delimiter = ',', default_values_t = DEFAULT_GROUP_HEADERS.iter().map(|s| s.to_string()))]
    pub requestheader_group_headers: Vec<String>,

    /// List of request header prefixes to inspect. X-Remote-Extra- is suggested.
    #[arg(long = "requestheader-extra-headers-prefix", value_delimiter = ',', default_values_t = DEFAULT_EXTRA_HEADER_PREFIXES.iter().map(|s| s.to_string()))]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// Enables anonymous requests to the secure port of the API server. Requests that are not rejected by another
    /// authentication method are treated as anonymous requests (user system:anonymous, group
    /// system:unauthenticated).
    #[arg(long = "anonymous-auth", default_value_t = true, action = clap::ArgAction::Set)]
    pub anonymous_auth: bool,
}

impl Default for AuthenticationOptions {
    fn default() -> Self {
        let strings = |s: &[&str]| s.iter().map(|s| s.to_string()).collect();
        AuthenticationOptions {
            authentication_kubeconfig: None,
            skip_lookup: false,
            tolerate_lookup_failure: false,
            token_cache_ttl: Duration::from_secs(10),
            client_ca_file: None,
            requestheader_client_ca_file: None,
            requestheader_allowed_names: Vec::new(),
            requestheader_username_headers: strings(DEFAULT_USERNAME_HEADERS),
            requestheader_uid_headers: Vec::new(),
            requestheader_group_headers: strings(DEFAULT_GROUP_HEADERS),
            requestheader_extra_headers_prefix: strings(DEFAULT_EXTRA_HEADER_PREFIXES),
            anonymous_auth: true,
        }
    }
}

/// Authorization flags, named as upstream names them (cache defaults from the seed documents).
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct AuthorizationOptions {
    /// kubeconfig file pointing at the 'core' kubernetes server with enough rights to create
    /// subjectaccessreviews.authorization.k8s.io. Without it, the in-cluster service account is used when
    /// running in a pod.
    #[arg(long = "authorization-kubeconfig")]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// The duration to cache 'authorized' responses from the webhook authorizer.
    #[arg(long = "authorization-webhook-cache-authorized-ttl", default_value = "5m", value_parser = parse_duration)]
    pub allowed_ttl: Duration,

    /// The duration to cache 'unauthorized' responses from the webhook authorizer.
    #[arg(long = "authorization-webhook-cache-unauthorized-ttl", default_value = "30s", value_parser = parse_duration)]
    pub denied_ttl: Duration,

    /// A list of HTTP paths to skip during authorization, i.e. these are authorized without contacting the 'core'
    /// kubernetes server. A trailing `*` matches a prefix. Default: /healthz,/readyz,/livez when delegating; the
    /// health, version, discovery and OpenAPI paths when standalone.
    #[arg(long = "authorization-always-allow-paths", value_delimiter = ',')]
    pub always_allow_paths: Option<Vec<String>>,
}

impl Default for AuthorizationOptions {
    fn default() -> Self {
        AuthorizationOptions {
            authorization_kubeconfig: None,
            allowed_ttl: Duration::from_secs(300),
            denied_ttl: Duration::from_secs(30),
            always_allow_paths: None,
        }
    }
}

impl AuthenticationOptions {
    /// Whether anything here names a source of identities besides the server's own (a core cluster, a CA).
    pub fn is_delegating(&self) -> bool {
        self.authentication_kubeconfig.is_some()
            || self.client_ca_file.is_some()
            || self.requestheader_client_ca_file.is_some()
            || cluster::in_cluster()
    }

    /// Builds the authenticators: request headers, client certificates and, with a core cluster, TokenReview,
    /// in upstream's order. Looks up the cluster's authentication ConfigMap first unless told not to, and starts
    /// the background task that keeps CA files and the ConfigMap current.
    pub async fn delegate(&self) -> Result<DelegatedAuthentication, ClusterError> {
        #[cfg_attr(not(feature = "cluster"), allow(unused_variables))]
        let kube_config = cluster::config(self.authentication_kubeconfig.as_deref()).await?;
        if kube_config.is_none() {
            tracing::warn!(
                "no --authentication-kubeconfig and not in a cluster: TokenReview authentication and the lookup \
                 of extension-apiserver-authentication are off"
            );
        }
        #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
        let mut sources = Sources {
            options: self.clone(),
            configmap: None,
        };
        #[cfg(not(feature = "cluster"))]
        let changes = futures::stream::pending().boxed();
        #[cfg(feature = "cluster")]
        let lookup = !self.skip_lookup
            && kube_config.is_some()
            && (self.client_ca_file.is_none() || self.requestheader_client_ca_file.is_none());
        #[cfg(feature = "cluster")]
        let configmaps = match (&kube_config, lookup) {
            (Some(config), true) => Some(Api::<ConfigMap>::namespaced(
                cluster::watch_client(config)?,
                AUTHENTICATION_CONFIGMAP_NAMESPACE,
            )),
            _ => None,
        };
        #[cfg(feature = "cluster")]
        if let Some(api) = &configmaps {
            match api.get_opt(AUTHENTICATION_CONFIGMAP_NAME).await {
                Ok(found) => sources.configmap = found.map(|c| c.data.unwrap_or_default()),
                Err(e) if self.tolerate_lookup_failure => tracing::warn!(
                    "unable to get configmap/{AUTHENTICATION_CONFIGMAP_NAME} in \
                     {AUTHENTICATION_CONFIGMAP_NAMESPACE}; continuing without configuration: {e}"
                ),
                Err(e) => {
                    return Err(ClusterError(format!(
                        "unable to load configmap based request-header-client-ca-file: {e}; to tolerate this \
                         use --authentication-tolerate-lookup-failure, or skip the lookup with \
                         --authentication-skip-lookup"
                    )));
                }
            }
        }
        let (client_ca, request_header) = sources.resolve().map_err(ClusterError)?;
        let client_ca = Arc::new(Dynamic::new(client_ca));
        let request_header = Arc::new(Dynamic::new(request_header));
        #[cfg(feature = "cluster")]
        let token_reviews = match &kube_config {
            Some(config) => Some(TokenReviewAuthenticator::new(
                cluster::request_client(config)?,
                self.token_cache_ttl,
                Vec::new(),
            )),
            None => None,
        };
        #[cfg(feature = "cluster")]
        let changes = match configmaps {
            Some(api) => configmap_changes(api),
            None => futures::stream::pending().boxed(),
        };
        tokio::spawn(keep_current(
            sources,
            changes,
            FILE_POLL_INTERVAL,
            client_ca.clone(),
            request_header.clone(),
        ));
        Ok(DelegatedAuthentication {
            client_ca,
            request_header,
            #[cfg(feature = "cluster")]
            token_reviews,
        })
    }
}

impl AuthorizationOptions {
    /// Whether a core cluster decides (a kubeconfig, or running in a pod).
    pub fn is_delegating(&self) -> bool {
        self.authorization_kubeconfig.is_some() || cluster::in_cluster()
    }

    /// The SubjectAccessReview authorizer, or `None` without a core cluster (then only the always-allow paths
    /// and `system:masters` are allowed, as upstream).
    #[cfg(feature = "cluster")]
    pub async fn delegate(&self) -> Result<Option<SubjectAccessReviewAuthorizer>, ClusterError> {
        let Some(config) = cluster::config(self.authorization_kubeconfig.as_deref()).await? else {
            tracing::warn!(
                "no --authorization-kubeconfig and not in a cluster: SubjectAccessReview authorization is off"
            );
            return Ok(None);
        };
        Ok(Some(SubjectAccessReviewAuthorizer::new(
            cluster::request_client(&config)?,
            self.allowed_ttl,
            self.denied_ttl,
        )))
    }

    /// No SubjectAccessReview in a build without the `cluster` feature: a kubeconfig, or running in a pod, is
    /// refused; otherwise only the always-allow paths and `system:masters` are allowed, as upstream without a
    /// core cluster.
    #[cfg(not(feature = "cluster"))]
    pub async fn delegate(&self) -> Result<Option<std::convert::Infallible>, ClusterError> {
        cluster::config(self.authorization_kubeconfig.as_deref()).await?;
        tracing::warn!(
            "no --authorization-kubeconfig and not in a cluster: SubjectAccessReview authorization is off"
        );
        Ok(None)
    }

    /// The always-allow paths in force: the flag's, else upstream's for a delegating server.
    pub fn delegated_always_allow_paths(&self) -> Vec<String> {
        self.always_allow_paths.clone().unwrap_or_else(|| {
            DELEGATED_ALWAYS_ALLOW_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
    }
}

/// What delegated authentication was set up with; its parts change when the sources do.
pub struct DelegatedAuthentication {
    /// The client CA in force.
    pub client_ca: Arc<Dynamic<Option<CaBundle>>>,
    /// The request-header settings in force.
    pub request_header: Arc<Dynamic<Option<RequestHeaderConfig>>>,
    /// The TokenReview authenticator, with a core cluster.
    #[cfg(feature = "cluster")]
    pub token_reviews: Option<TokenReviewAuthenticator>,
}

impl DelegatedAuthentication {
    /// Counts TokenReviews and token cache lookups in `metrics`.
    #[cfg_attr(not(feature = "cluster"), allow(unused_mut, unused_variables))]
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        #[cfg(feature = "cluster")]
        {
            self.token_reviews = self.token_reviews.map(|t| t.with_metrics(metrics));
        }
        self
    }

    /// The union in upstream's order: request headers, client certificates, bearer tokens.
    pub fn authenticator(self) -> UnionAuthenticator {
        #[cfg_attr(not(feature = "cluster"), allow(unused_mut))]
        let mut union = UnionAuthenticator::new()
            .with(RequestHeaders::new(self.request_header))
            .with(ClientCertificates::new(self.client_ca));
        #[cfg(feature = "cluster")]
        if let Some(tokens) = self.token_reviews {
            union = union.with(tokens);
        }
        union
    }
}

/// Everything the authentication settings are made from: the flags (and the files they name) and the
/// cluster's ConfigMap. Flags win where both say something, as upstream.
struct Sources {
    options: AuthenticationOptions,
    /// The ConfigMap's data, while it exists.
    configmap: Option<BTreeMap<String, String>>,
}

type Resolved = (Option<CaBundle>, Option<RequestHeaderConfig>);

impl Sources {
    fn configmap_value(&self, key: &str) -> Option<&str> {
        self.configmap
            .as_ref()?
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// A JSON list of strings from the ConfigMap (`requestheader-allowed-names: '["front-proxy-client"]'`).
    fn configmap_list(&self, key: &str) -> Result<Vec<String>, String> {
        match self.configmap_value(key) {
            None => Ok(Vec::new()),
            Some(v) => serde_json::from_str(v).map_err(|e| {
                format!("configmap/{AUTHENTICATION_CONFIGMAP_NAME} key {key}: not a JSON list of strings: {e}")
            }),
        }
    }

    fn resolve(&self) -> Result<Resolved, String> {
        let o = &self.options;
        let client_ca = match &o.client_ca_file {
            Some(path) => Some(read_ca(path)?),
            None => self
                .configmap_value("client-ca-file")
                .map(CaBundle::from_pem)
                .transpose()
                .map_err(|e| format!("configmap client-ca-file: {e}"))?,
        };
        let request_header = match &o.requestheader_client_ca_file {
            Some(path) => Some(RequestHeaderConfig {
                ca: read_ca(path)?,
                allowed_names: o.requestheader_allowed_names.clone(),
                username_headers: o.requestheader_username_headers.clone(),
                uid_headers: o.requestheader_uid_headers.clone(),
                group_headers: o.requestheader_group_headers.clone(),
                extra_header_prefixes: o.requestheader_extra_headers_prefix.clone(),
            }),
            None => match self.configmap_value("requestheader-client-ca-file") {
                None => None,
                Some(pem) => Some(RequestHeaderConfig {
                    ca: CaBundle::from_pem(pem)
                        .map_err(|e| format!("configmap requestheader-client-ca-file: {e}"))?,
                    allowed_names: self.configmap_list("requestheader-allowed-names")?,
                    username_headers: self.configmap_list("requestheader-username-headers")?,
                    uid_headers: self.configmap_list("requestheader-uid-headers")?,
                    group_headers: self.configmap_list("requestheader-group-headers")?,
                    extra_header_prefixes: self
                        .configmap_list("requestheader-extra-headers-prefix")?,
                }),
            },
        };
        Ok((client_ca, request_header))
    }
}

fn read_ca(path: &Path) -> Result<CaBundle, String> {
    let pem = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    CaBundle::from_pem(&pem).map_err(|e| format!("{}: {e}", path.display()))
}

/// The ConfigMap's data each time it changes (`None`: deleted), from a watch; a failed watch is logged and
/// watched again a second later.
#[cfg(feature = "cluster")]
fn configmap_changes(api: Api<ConfigMap>) -> BoxStream<'static, Option<BTreeMap<String, String>>> {
    watcher(
        api,
        watcher::Config::default()
            .fields(&format!("metadata.name={AUTHENTICATION_CONFIGMAP_NAME}")),
    )
    .filter_map(|change| async move {
        match change {
            Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => {
                Some(Some(cm.data.unwrap_or_default()))
            }
            Ok(watcher::Event::Delete(_)) => Some(None),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!("watching configmap/{AUTHENTICATION_CONFIGMAP_NAME}: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                None
            }
        }
    })
    .boxed()
}

/// Follows the ConfigMap (`changes`) and the CA files (polled) and replaces the settings when they change. A
/// change that does not parse is logged and the previous settings stay.
async fn keep_current(
    mut sources: Sources,
    mut changes: BoxStream<'static, Option<BTreeMap<String, String>>>,
    file_poll_interval: Duration,
    client_ca: Arc<Dynamic<Option<CaBundle>>>,
    request_header: Arc<Dynamic<Option<RequestHeaderConfig>>>,
) {
    let mut poll = tokio::time::interval(file_poll_interval);
    loop {
        tokio::select! {
            change = changes.next() => match change {
                Some(data) => sources.configmap = data,
                None => return,
            },
            _ = poll.tick() => {}
        }
        match sources.resolve() {
            Ok((ca, header)) => {
                if *client_ca.get() != ca {
                    tracing::info!("client CA changed");
                    client_ca.set(ca);
                }
                if *request_header.get() != header {
                    tracing::info!("request-header authentication settings changed");
                    request_header.set(header);
                }
            }
            Err(e) => tracing::warn!("keeping the previous authentication settings: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::x509::tests::TestCa;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        authn: AuthenticationOptions,
        #[command(flatten)]
        authz: AuthorizationOptions,
    }

    #[test]
    fn defaults_match_upstream_and_the_seed() {
        let cli = Cli::parse_from(["x"]);
        assert_eq!(cli.authn, AuthenticationOptions::default());
        assert_eq!(cli.authz, AuthorizationOptions::default());
        assert_eq!(cli.authn.token_cache_ttl, Duration::from_secs(10));
        assert_eq!(cli.authz.allowed_ttl, Duration::from_secs(300));
        assert_eq!(cli.authz.denied_ttl, Duration::from_secs(30));
        assert_eq!(
            cli.authz.delegated_always_allow_paths(),
            ["/healthz", "/readyz", "/livez"]
        );
        let cli = Cli::parse_from([
            "x",
            "--anonymous-auth=false",
            "--requestheader-allowed-names=a,b",
            "--authorization-always-allow-paths=/healthz,/metrics",
            "--authorization-webhook-cache-authorized-ttl=1m",
        ]);
        assert!(!cli.authn.anonymous_auth);
        assert_eq!(cli.authn.requestheader_allowed_names, ["a", "b"]);
        assert_eq!(
            cli.authz.delegated_always_allow_paths(),
            ["/healthz", "/metrics"]
        );
        assert_eq!(cli.authz.allowed_ttl, Duration::from_secs(60));
    }

    #[test]
    fn flags_win_over_the_configmap() {
        let cluster_ca = TestCa::new("cluster");
        let proxy_ca = TestCa::new("proxy");
        let data = [
            ("client-ca-file", cluster_ca.pem.clone()),
            ("requestheader-client-ca-file", proxy_ca.pem.clone()),
            (
                "requestheader-allowed-names",
                r#"["front-proxy-client"]"#.into(),
            ),
            (
                "requestheader-username-headers",
                r#"["X-Remote-User"]"#.into(),
            ),
            (
                "requestheader-group-headers",
                r#"["X-Remote-Group"]"#.into(),
            ),
            (
                "requestheader-extra-headers-prefix",
                r#"["X-Remote-Extra-"]"#.into(),
            ),
        ];
        let configmap = data.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        let mut sources = Sources {
            options: AuthenticationOptions::default(),
            configmap: Some(configmap),
        };
        let (ca, header) = sources.resolve().unwrap();
        assert_eq!(ca.unwrap().pem(), cluster_ca.pem);
        let header = header.unwrap();
        assert_eq!(header.ca.pem(), proxy_ca.pem);
        assert_eq!(header.allowed_names, ["front-proxy-client"]);
        assert_eq!(header.extra_header_prefixes, ["X-Remote-Extra-"]);

        let dir = tempdir();
        let file = dir.join("ca.crt");
        let other = TestCa::new("other");
        std::fs::write(&file, &other.pem).unwrap();
        sources.options.client_ca_file = Some(file.clone());
        let (ca, _) = sources.resolve().unwrap();
        assert_eq!(ca.unwrap().pem(), other.pem);

        std::fs::write(&file, "junk").unwrap();
        assert!(sources.resolve().is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A rotated CA file takes effect without a restart; a broken one leaves the last good CA in force.
    #[tokio::test]
    async fn ca_files_are_followed() {
        let dir = tempdir();
        let file = dir.join("client-ca.crt");
        let (first, second) = (TestCa::new("first"), TestCa::new("second"));
        std::fs::write(&file, &first.pem).unwrap();
        let options = AuthenticationOptions {
            client_ca_file: Some(file.clone()),
            ..AuthenticationOptions::default()
        };
        let sources = Sources {
            options,
            configmap: None,
        };
        let (ca, header) = sources.resolve().unwrap();
        assert!(header.is_none());
        let client_ca = Arc::new(Dynamic::new(ca));
        let request_header = Arc::new(Dynamic::new(None));
        let task = tokio::spawn(keep_current(
            sources,
            futures::stream::pending().boxed(),
            Duration::from_millis(20),
            client_ca.clone(),
            request_header,
        ));
        let current = || {
            client_ca
                .get()
                .as_ref()
                .as_ref()
                .map(|c| c.pem().to_string())
        };
        assert_eq!(current().as_deref(), Some(first.pem.as_str()));
        std::fs::write(&file, &second.pem).unwrap();
        for _ in 0..100 {
            if current().as_deref() == Some(second.pem.as_str()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(current().as_deref(), Some(second.pem.as_str()));
        std::fs::write(&file, "not a certificate").unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(current().as_deref(), Some(second.pem.as_str()));
        task.abort();
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("apiserver-auth-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
