//! The command line every server shares (upstream's `RecommendedOptions`): serving, authentication, authorization,
//! the core cluster, audit, logs, traces, storage, controllers and their leader election. A binary flattens [`RecommendedOptions`] beside
//! the options of the storage backends it was built with.

use std::path::PathBuf;

use crate::audit::AuditOptions;
use crate::auth::{AuthenticationOptions, AuthorizationOptions};
use crate::cluster::CoreApiOptions;
use crate::codec::MediaType;
use crate::endpoints::DEFAULT_ENCODED_OBJECT_BYTES;
use crate::leader::LeaderElectionOptions;
use crate::logging::LoggingOptions;
use crate::server::ServingOptions;
use crate::telemetry::TracingOptions;

// The doc comments of flattened structs would become the binary's `about`: these structs carry `about = None`.

/// A server binary's whole command line when it has no flags of its own: the framework's, and those of the storage
/// backends `B` it brings (e.g. `apiserver_storage_rocks::RocksOptions`; by default none, memory is always
/// there). [`main!`](crate::main) names and describes it after the binary's package. A binary with flags of its
/// own writes its own `clap::Parser` struct flattening [`RecommendedOptions`] instead.
#[derive(Clone, Debug, clap::Parser)]
#[command(version, about = None, long_about = None)]
pub struct Options<B: clap::Args = NoFlags> {
    /// The framework's flags.
    #[command(flatten)]
    pub server: RecommendedOptions,

    /// The storage backends' flags.
    #[command(flatten)]
    pub backend: B,
}

/// No flags: the backends of a server built with the memory backend only.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
#[command(about = None, long_about = None)]
pub struct NoFlags {}

/// Everything a server's command line needs besides its backends' flags.
#[derive(Clone, Debug, clap::Args)]
#[command(about = None, long_about = None)]
pub struct RecommendedOptions {
    /// Address, port and serving certificate.
    #[command(flatten)]
    pub serving: ServingOptions,

    /// How clients are authenticated.
    #[command(flatten)]
    pub authentication: AuthenticationOptions,

    /// How requests are authorized.
    #[command(flatten)]
    pub authorization: AuthorizationOptions,

    /// How the core cluster is reached (`--kubeconfig`).
    #[command(flatten)]
    pub core_api: CoreApiOptions,

    /// The audit policy and its log and webhook backends.
    #[command(flatten)]
    pub audit: AuditOptions,

    /// Log format and verbosity.
    #[command(flatten)]
    pub logging: LoggingOptions,

    /// Where traces go (`--tracing-config-file`).
    #[command(flatten)]
    pub tracing: TracingOptions,

    /// Which backend holds the objects, where, and how they are encoded.
    #[command(flatten)]
    pub storage: StorageOptions,

    /// The in-process controllers to run, as kube-controller-manager's flag: `*` for all (the default), `*,-name`
    /// for all but one; a list without `*` runs only the controllers it names.
    #[arg(long = "controllers", value_delimiter = ',', default_value = "*")]
    pub controllers: Vec<String>,

    /// Whether replicas elect one of them to run the controllers (`--leader-elect` and its `--leader-elect-*`
    /// flags, as kube-controller-manager's).
    #[command(flatten)]
    pub leader_election: LeaderElectionOptions,
}

/// Which backend holds the objects, where, and how they are encoded.
#[derive(Clone, Debug, clap::Args)]
#[command(about = None, long_about = None)]
pub struct StorageOptions {
    /// Where the server keeps its state: certificates, the kubeconfig it writes, and embedded databases.
    /// Defaults to `<server name>.local.data`.
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,

    /// The storage engine: one of the backends this binary was built with (the server's startup error lists them
    /// when the name is unknown). Defaults to the binary's first backend.
    #[arg(long = "storage-backend")]
    pub backend: Option<String>,

    /// The prefix to prepend to all resource paths in storage (the server's own default when unset).
    #[arg(long = "etcd-prefix")]
    pub prefix: Option<String>,

    /// The media type to use to store objects in storage.
    #[arg(
        long = "storage-media-type",
        value_enum,
        default_value = "application/json"
    )]
    pub media_type: StorageMediaType,

    /// The version a resource is stored in, overriding the server's choice: `RESOURCE.GROUP=VERSION` (e.g.
    /// `pizzas.restaurant.programming-kubernetes.info=v1beta1`), repeatable or comma-separated. Objects are read in
    /// any served version and written in this one; the storage-version migrator (or any no-op apply) rewrites old
    /// ones. A resource or version the server does not serve is a startup error.
    #[arg(long = "storage-version", value_delimiter = ',')]
    pub storage_versions: Vec<String>,

    /// The file with the configuration for encryption providers for storage (upstream's
    /// `EncryptionConfiguration`, apiserver.config.k8s.io/v1): which resources are encrypted at rest, with which
    /// providers (identity, aescbc, aesgcm, secretbox) and keys. A file upstream refuses is a startup error.
    #[arg(long = "encryption-provider-config")]
    pub encryption_provider_config: Option<PathBuf>,

    /// Bytes of objects kept encoded as lists serve them (per stored revision, version and media type), so that a
    /// LIST encodes each object once; 0 encodes every item on every request.
    #[arg(long = "encoded-object-cache-bytes", default_value_t = DEFAULT_ENCODED_OBJECT_BYTES)]
    pub encoded_object_cache_bytes: usize,
}

/// How objects are encoded in storage (`--storage-media-type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum StorageMediaType {
    /// `application/json`: what Go servers write by default, readable by them.
    #[value(name = "application/json")]
    Json,
    /// `application/vnd.kubernetes.protobuf`: the `k8s\0` protobuf envelope.
    #[value(name = "application/vnd.kubernetes.protobuf")]
    Protobuf,
}

impl StorageMediaType {
    /// The codec's media type.
    pub fn media_type(self) -> MediaType {
        match self {
            StorageMediaType::Json => MediaType::Json,
            StorageMediaType::Protobuf => MediaType::Protobuf,
        }
    }
}

/// Who decides who may do what.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// No core cluster: the server's own admin token (in the kubeconfig it writes) may do anything; anonymous
    /// clients may read health, version, discovery and OpenAPI, nothing else.
    Standalone,
    /// Behind a core cluster: front-proxy headers, client certificates and TokenReview authenticate,
    /// SubjectAccessReview authorizes, namespaces come from the cluster.
    Delegated,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Standalone => {
                "standalone (the admin token in the kubeconfig may do anything; anonymous requests may read \
                 health, version, discovery and OpenAPI only)"
            }
            Mode::Delegated => {
                "delegated (authentication by front-proxy headers, client certificates and TokenReview, \
                 authorization by SubjectAccessReview, namespaces from the core cluster)"
            }
        })
    }
}

impl<B: clap::Args> Options<B> {
    /// Delegated when anything names a core cluster or a CA to trust, or the server runs in a pod.
    pub fn mode(&self) -> Mode {
        self.server.mode()
    }
}

impl RecommendedOptions {
    /// Delegated when anything names a core cluster or a CA to trust, or the server runs in a pod.
    pub fn mode(&self) -> Mode {
        if self.authentication.is_delegating()
            || self.authorization.is_delegating()
            || self.core_api.kubeconfig.is_some()
        {
            Mode::Delegated
        } else {
            Mode::Standalone
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    // A binary of its own, documented, with the recommended options flattened in.
    #[derive(Parser)]
    #[command(name = "library-apiserver")]
    /// Serves library.example.com.
    struct Cli {
        #[command(flatten)]
        server: RecommendedOptions,
    }

    #[test]
    fn flattened_options_leave_the_binary_its_own_help() {
        Cli::command().debug_assert();
        let help = Cli::command().render_help().to_string();
        assert!(help.starts_with("Serves library.example.com\n"), "{help}");
        assert!(!help.contains("```"), "{help}");
    }

    // An undocumented binary.
    #[derive(Parser)]
    #[command(name = "bare-apiserver")]
    struct Bare {
        #[command(flatten)]
        server: RecommendedOptions,
    }

    #[test]
    fn flattened_options_bring_no_text_of_their_own() {
        let help = Bare::command().render_help().to_string();
        assert!(help.starts_with("Usage: bare-apiserver"), "{help}");
    }

    /// Every flag and subcommand flag has a help text (`--help` explains the whole command line).
    #[test]
    fn every_flag_has_help() {
        fn undocumented(command: &clap::Command, out: &mut Vec<String>) {
            for arg in command.get_arguments() {
                if arg.get_help().is_none() && !matches!(arg.get_id().as_str(), "help" | "version")
                {
                    out.push(format!("{} --{}", command.get_name(), arg.get_id()));
                }
            }
            command.get_subcommands().for_each(|c| undocumented(c, out));
        }
        let mut missing = Vec::new();
        undocumented(&Options::<NoFlags>::command(), &mut missing);
        assert_eq!(missing, Vec::<String>::new());
    }

    #[test]
    fn storage_defaults() {
        let cli = Cli::parse_from(["library-apiserver"]);
        let storage = &cli.server.storage;
        assert_eq!(storage.backend, None);
        assert_eq!(storage.media_type, StorageMediaType::Json);
        assert_eq!(
            storage.encoded_object_cache_bytes,
            DEFAULT_ENCODED_OBJECT_BYTES
        );
        assert_eq!(cli.server.controllers, ["*"]);
        assert_eq!(cli.server.leader_election, LeaderElectionOptions::default());
        assert_eq!(cli.server.mode(), Mode::Standalone);
    }
}
