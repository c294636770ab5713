//! A server without a core cluster: an admin bearer token kept in the data directory, and a kubeconfig that
//! reaches the server with it, so that kubectl works without prompting for a user.

use std::path::Path;

use base64::Engine;

use crate::server::{Server, ServingOptions};

/// The admin's bearer token: made on first start and kept in `DIR/admin-token` (mode 0600), so a kubeconfig
/// stays valid across restarts.
pub(super) fn admin_token(data_dir: &Path) -> std::io::Result<String> {
    let path = data_dir.join("admin-token");
    match std::fs::read_to_string(&path) {
        Ok(token) if !token.trim().is_empty() => return Ok(token.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    write_private(&path, token.as_bytes())?;
    Ok(token)
}

/// Writes a file only its owner may read (mode 0600, also when it existed with wider permissions).
fn write_private(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(contents)
}

/// Writes a kubeconfig named `name` that reaches the server at `url`: the CA of its serving certificate, and the
/// admin's bearer token when there is one. Mode 0600: it holds the credential.
pub(super) fn write_kubeconfig(
    path: &Path,
    name: &str,
    url: &str,
    token: Option<&str>,
    server: &Server,
    serving: &ServingOptions,
) -> std::io::Result<()> {
    let authority = match (server.ca_pem(), &serving.tls_cert_file) {
        (Some(pem), _) => format!(
            "certificate-authority-data: {}",
            base64::engine::general_purpose::STANDARD.encode(pem)
        ),
        (None, Some(cert)) => format!("certificate-authority: {}", cert.display()),
        (None, None) => "insecure-skip-tls-verify: true".to_string(),
    };
    let user = match token {
        Some(token) => format!("\n    token: {token}"),
        None => " {}".to_string(),
    };
    let kubeconfig = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: {name}
  cluster:
    server: {url}
    {authority}
contexts:
- name: {name}
  context:
    cluster: {name}
    user: {name}
    namespace: default
current-context: {name}
users:
- name: {name}
  user:{user}
"
    );
    write_private(path, kubeconfig.as_bytes())
}
