//! The etcd flags, with upstream's names (`k8s.io/apiserver/pkg/server/options/etcd.go`), and the configuration
//! they complete into.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::ConnectError;

/// The default `--etcd-compaction-interval` (upstream `DefaultCompactInterval`).
pub const DEFAULT_COMPACTION_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The prefix upstream uses when a server sets none (`--etcd-prefix` default of kube-apiserver).
pub const DEFAULT_ETCD_PREFIX: &str = "/registry";

/// The etcd flags of a server, flattened into its `clap` options (`#[command(flatten)]`).
#[derive(Clone, Debug, PartialEq, Eq, clap::Args)]
pub struct EtcdOptions {
    /// List of etcd servers to connect with (scheme://ip:port), comma separated.
    #[arg(long = "etcd-servers", value_delimiter = ',')]
    pub etcd_servers: Vec<String>,

    /// SSL Certificate Authority file used to secure etcd communication.
    #[arg(long = "etcd-cafile")]
    pub etcd_cafile: Option<PathBuf>,

    /// SSL certification file used to secure etcd communication.
    #[arg(long = "etcd-certfile")]
    pub etcd_certfile: Option<PathBuf>,

    /// SSL key file used to secure etcd communication.
    #[arg(long = "etcd-keyfile")]
    pub etcd_keyfile: Option<PathBuf>,

    /// The interval of compaction requests. If 0, the compaction request from the apiserver is disabled.
    #[arg(long = "etcd-compaction-interval", default_value = "5m0s", value_parser = apiserver_storage::backend::parse_duration)]
    pub etcd_compaction_interval: Duration,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            etcd_servers: Vec::new(),
            etcd_cafile: None,
            etcd_certfile: None,
            etcd_keyfile: None,
            etcd_compaction_interval: DEFAULT_COMPACTION_INTERVAL,
        }
    }
}

impl EtcdOptions {
    /// Completes the options into a [`EtcdConfig`]; `prefix` is the server's key prefix (`--etcd-prefix`, which the
    /// framework's storage options hold since every backend uses it, or the server's default).
    pub fn config(&self, prefix: &str) -> Result<EtcdConfig, ConnectError> {
        if self.etcd_servers.iter().all(|s| s.trim().is_empty()) {
            return Err(ConnectError::Options("--etcd-servers must be set".into()));
        }
        let tls = match (&self.etcd_cafile, &self.etcd_certfile, &self.etcd_keyfile) {
            (None, None, None) => None,
            (ca, cert, key) => {
                let identity = match (cert, key) {
                    (Some(c), Some(k)) => Some((c.clone(), k.clone())),
                    (None, None) => None,
                    _ => {
                        return Err(ConnectError::Options(
                            "--etcd-certfile and --etcd-keyfile must be given together".into(),
                        ));
                    }
                };
                Some(TlsFiles {
                    ca_file: ca.clone(),
                    identity,
                })
            }
        };
        Ok(EtcdConfig {
            endpoints: self
                .etcd_servers
                .iter()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect(),
            prefix: prefix.to_string(),
            tls,
            compaction_interval: Some(self.etcd_compaction_interval).filter(|d| !d.is_zero()),
        })
    }
}

/// TLS files for the connection to etcd.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA that signed etcd's serving certificate (the system roots are not used).
    pub ca_file: Option<PathBuf>,
    /// A client certificate and its key, for etcd's `--client-cert-auth`.
    pub identity: Option<(PathBuf, PathBuf)>,
}

/// Everything [`EtcdStorage::connect`](crate::EtcdStorage::connect) needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// Client URLs (`http://` or `https://`).
    pub endpoints: Vec<String>,
    /// The server's etcd prefix; the health key is read under it. Object keys arrive complete from the layer
    /// above (built with `ResourceKeys` from the same prefix) and are written verbatim.
    pub prefix: String,
    /// TLS settings, for `https://` endpoints.
    pub tls: Option<TlsFiles>,
    /// How often to try to compact; `None` disables this server's compactor.
    pub compaction_interval: Option<Duration>,
}

impl EtcdConfig {
    /// A plain-text configuration for `endpoints` with the given prefix and the default compaction interval.
    pub fn new(endpoints: impl IntoIterator<Item = impl Into<String>>, prefix: &str) -> Self {
        EtcdConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            prefix: prefix.to_string(),
            tls: None,
            compaction_interval: Some(DEFAULT_COMPACTION_INTERVAL),
        }
    }
}

/// `--storage-backend etcd`: the etcd at `--etcd-servers`.
#[async_trait::async_trait]
impl apiserver_storage::backend::StorageBackend for EtcdOptions {
    fn names(&self) -> &'static [&'static str] {
        &["etcd"]
    }

    async fn open(
        &self,
        _: &str,
        context: apiserver_storage::backend::OpenContext<'_>,
    ) -> Result<std::sync::Arc<dyn apiserver_storage::Storage>, String> {
        crate::EtcdStorage::from_options(self, context.prefix)
            .await
            .map(crate::EtcdStorage::into_dyn)
            .map_err(|e| e.to_string())
    }

    /// Replicas of a server share one etcd cluster.
    fn shared(&self, _: &str) -> bool {
        true
    }

    /// Upstream's spans and storage metrics call etcd `etcd3`.
    fn metrics_name(&self, _: &str) -> &'static str {
        "etcd3"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        etcd: EtcdOptions,
    }

    #[test]
    fn compaction_interval_is_a_go_duration() {
        let parse = |v: &str| {
            Cli::try_parse_from(["x", &format!("--etcd-compaction-interval={v}")])
                .map(|cli| cli.etcd.etcd_compaction_interval)
        };
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse("0").unwrap(), Duration::ZERO);
        for bad in ["", "5", "5x", "-1s", "m"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn flags_have_upstream_names_and_defaults() {
        let cli = Cli::parse_from([
            "x",
            "--etcd-servers",
            "http://127.0.0.1:1,http://127.0.0.1:2",
        ]);
        assert_eq!(cli.etcd.etcd_servers.len(), 2);
        assert_eq!(
            cli.etcd.etcd_compaction_interval,
            DEFAULT_COMPACTION_INTERVAL
        );
        let cfg = cli.etcd.config("/registry/x").unwrap();
        assert_eq!(cfg.prefix, "/registry/x");
        assert!(cfg.tls.is_none());

        let cli = Cli::parse_from([
            "x",
            "--etcd-servers=https://127.0.0.1:1",
            "--etcd-cafile=/ca",
            "--etcd-certfile=/c",
            "--etcd-keyfile=/k",
            "--etcd-compaction-interval=0",
        ]);
        let cfg = cli.etcd.config("/registry/x").unwrap();
        assert_eq!(cfg.prefix, "/registry/x");
        assert_eq!(cfg.compaction_interval, None);
        assert_eq!(
            cfg.tls.unwrap().identity,
            Some((PathBuf::from("/c"), PathBuf::from("/k")))
        );
        assert!(EtcdOptions::default().config("/r").is_err());
    }
}
