//! `/version`: upstream's `version.Info`, which `kubectl version` and the aggregator read.

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};
use serde::{Deserialize, Serialize};

/// The `version.Info` JSON. The embedding server sets its own (pizza reports `major: "1", minor: "0"`);
/// [`VersionInfo::default`] describes this crate's build.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    /// Major version.
    pub major: String,
    /// Minor version.
    pub minor: String,
    /// `v<semver>`.
    pub git_version: String,
    /// The commit built, when the build knew it (`APISERVER_GIT_COMMIT` at compile time).
    pub git_commit: String,
    /// `clean` or `dirty`, when known (`APISERVER_GIT_TREE_STATE` at compile time).
    pub git_tree_state: String,
    /// RFC 3339 build time, when known (`APISERVER_BUILD_DATE` at compile time); upstream's placeholder otherwise.
    pub build_date: String,
    /// Upstream's Go version field; here the Rust toolchain (`APISERVER_RUSTC_VERSION` at compile time, else
    /// the crate's minimum supported Rust version).
    pub go_version: String,
    /// `rustc`.
    pub compiler: String,
    /// `<os>/<arch>` in Go's names (`linux/amd64`, `linux/arm64`).
    pub platform: String,
}

impl Default for VersionInfo {
    fn default() -> Self {
        VersionInfo::for_crate(
            env!("CARGO_PKG_VERSION_MAJOR"),
            env!("CARGO_PKG_VERSION_MINOR"),
            env!("CARGO_PKG_VERSION"),
        )
    }
}

impl VersionInfo {
    /// Version info for a binary: pass its `env!("CARGO_PKG_VERSION_MAJOR")`, `..._MINOR` and
    /// `CARGO_PKG_VERSION`; the build fields come from this crate's build.
    pub fn for_crate(major: &str, minor: &str, version: &str) -> Self {
        VersionInfo {
            major: major.to_string(),
            minor: minor.to_string(),
            git_version: format!("v{version}"),
            git_commit: option_env!("APISERVER_GIT_COMMIT")
                .unwrap_or("")
                .to_string(),
            git_tree_state: option_env!("APISERVER_GIT_TREE_STATE")
                .unwrap_or("")
                .to_string(),
            build_date: option_env!("APISERVER_BUILD_DATE")
                .unwrap_or("1970-01-01T00:00:00Z")
                .to_string(),
            go_version: option_env!("APISERVER_RUSTC_VERSION")
                .map(str::to_string)
                .unwrap_or_else(|| format!("rust{}", env!("CARGO_PKG_RUST_VERSION"))),
            compiler: "rustc".to_string(),
            platform: format!("{}/{}", std::env::consts::OS, go_arch()),
        }
    }

    /// The `/version` response: indented JSON, as upstream writes it.
    pub fn response(&self) -> Response {
        let body = serde_json::to_string_pretty(self).unwrap_or_default();
        let mut response = (http::StatusCode::OK, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

impl IntoResponse for VersionInfo {
    fn into_response(self) -> Response {
        self.response()
    }
}

/// Go's `GOARCH` name for this target.
fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "x86" => "386",
        "aarch64" => "arm64",
        other => other,
    }
}
