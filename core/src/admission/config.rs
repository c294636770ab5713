//! `--admission-control-config-file` (upstream's `AdmissionConfiguration`, apiserver.config.k8s.io/v1): each
//! plugin's own configuration, given inline (`configuration`) or in a file of its own (`path`, relative to the
//! configuration file's directory). A plugin reads it from its [`Initializer`](super::Initializer) when it is built.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::PluginError;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionConfiguration {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    plugins: Vec<PluginConfiguration>,
}

#[derive(Deserialize)]
struct PluginConfiguration {
    name: String,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    configuration: Option<Value>,
}

/// Reads the file: each named plugin's configuration, as JSON.
pub(crate) fn read(file: &Path) -> Result<HashMap<String, Value>, PluginError> {
    let error = |why: String| {
        PluginError(format!(
            "unable to read admission control configuration from {:?} [{why}]",
            file.display().to_string()
        ))
    };
    let text = std::fs::read_to_string(file).map_err(|e| error(e.to_string()))?;
    let config: AdmissionConfiguration =
        serde_saphyr::from_str(&text).map_err(|e| error(e.to_string()))?;
    let known_version = matches!(
        config.api_version.as_str(),
        "apiserver.config.k8s.io/v1"
            | "apiserver.config.k8s.io/v1alpha1"
            | "apiserver.k8s.io/v1alpha1"
    );
    if !known_version || config.kind != "AdmissionConfiguration" {
        return Err(error(format!(
            "no kind \"{}\" is registered for version \"{}\"",
            config.kind, config.api_version
        )));
    }
    let dir = file.parent().unwrap_or(Path::new("."));
    let mut plugins = HashMap::new();
    for plugin in config.plugins {
        let value = match (plugin.configuration, plugin.path) {
            (Some(value), _) => value,
            (None, Some(path)) => {
                let path = dir.join(path);
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| error(format!("{}: {e}", path.display())))?;
                serde_saphyr::from_str(&text)
                    .map_err(|e| error(format!("{}: {e}", path.display())))?
            }
            (None, None) => continue,
        };
        plugins.insert(plugin.name, value);
    }
    Ok(plugins)
}

#[cfg(feature = "cluster")]
/// A webhook plugin's configuration (`WebhookAdmissionConfiguration`): the kubeconfig whose users give the
/// credentials for calling webhooks.
pub(crate) fn webhook_kubeconfig(
    configuration: Option<&Value>,
) -> Result<Option<kube::config::Kubeconfig>, PluginError> {
    let Some(configuration) = configuration else {
        return Ok(None);
    };
    let kind = configuration["kind"].as_str().unwrap_or_default();
    if kind != "WebhookAdmissionConfiguration" && kind != "WebhookAdmission" {
        return Err(PluginError(format!(
            "unexpected webhook admission configuration kind {kind:?}"
        )));
    }
    let Some(file) = configuration["kubeConfigFile"]
        .as_str()
        .filter(|f| !f.is_empty())
    else {
        return Ok(None);
    };
    if !Path::new(file).is_absolute() {
        return Err(PluginError(format!(
            "kubeConfigFile {file:?} must be an absolute file path"
        )));
    }
    kube::config::Kubeconfig::read_from(file)
        .map(Some)
        .map_err(|e| PluginError(format!("unable to read kubeConfigFile {file:?}: {e}")))
}

#[cfg(feature = "cluster")]
/// The credentials for calling `target` (`host[:port]` of a URL, or `<service>.<namespace>.svc:<port>`), as
/// upstream's `defaultAuthenticationInfoResolver` finds them among the kubeconfig's users: the exact name, then
/// `*.`-prefixed suffixes, then both again without a `:443` port, then `*`, then the current context's user.
pub(crate) fn auth_for(
    kubeconfig: &kube::config::Kubeconfig,
    target: &str,
) -> Option<kube::config::AuthInfo> {
    let user = |name: &str| {
        kubeconfig
            .auth_infos
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.auth_info.clone())
    };
    let exact_or_wildcard = |target: &str| {
        user(target).or_else(|| {
            let steps: Vec<&str> = target.split('.').collect();
            (1..steps.len()).find_map(|i| user(&format!("*.{}", steps[i..].join("."))))
        })
    };
    exact_or_wildcard(target)
        .or_else(|| {
            let host = target.strip_suffix(":443")?;
            exact_or_wildcard(host)
        })
        .or_else(|| user("*"))
        .or_else(|| {
            let context = kubeconfig.current_context.as_deref()?;
            let user_name = kubeconfig
                .contexts
                .iter()
                .find(|c| c.name == context)?
                .context
                .as_ref()?
                .user
                .clone()?;
            user(&user_name)
        })
}

#[cfg(all(test, feature = "cluster"))]
mod tests {
    use super::*;

    fn kubeconfig(yaml: &str) -> kube::config::Kubeconfig {
        kube::config::Kubeconfig::from_yaml(yaml).unwrap()
    }

    fn token(auth: Option<kube::config::AuthInfo>) -> Option<String> {
        auth?.username
    }

    #[test]
    fn credentials_are_found_as_upstream_finds_them() {
        let config = kubeconfig(
            r#"
apiVersion: v1
kind: Config
users:
- name: hook.example.com:8443
  user: {username: exact}
- name: "*.webhooks.svc:443"
  user: {username: service-wildcard}
- name: "*.example.org"
  user: {username: domain-wildcard}
- name: "*"
  user: {username: default}
"#,
        );
        assert_eq!(
            token(auth_for(&config, "hook.example.com:8443")),
            Some("exact".into())
        );
        assert_eq!(
            token(auth_for(&config, "pizza.webhooks.svc:443")),
            Some("service-wildcard".into())
        );
        assert_eq!(
            token(auth_for(&config, "a.b.example.org")),
            Some("domain-wildcard".into())
        );
        // `:443` is also tried without the port.
        assert_eq!(
            token(auth_for(&config, "a.example.org:443")),
            Some("domain-wildcard".into())
        );
        assert_eq!(
            token(auth_for(&config, "127.0.0.1:9443")),
            Some("default".into())
        );
        let none = kubeconfig("apiVersion: v1\nkind: Config\n");
        assert!(auth_for(&none, "127.0.0.1:9443").is_none());
    }

    #[test]
    fn the_file_names_each_plugins_configuration() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("webhook.yaml"),
            "apiVersion: apiserver.config.k8s.io/v1\nkind: WebhookAdmissionConfiguration\nkubeConfigFile: /x\n",
        )
        .unwrap();
        let file = dir.path().join("admission.yaml");
        std::fs::write(
            &file,
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: ValidatingAdmissionWebhook\n  path: webhook.yaml\n- name: MutatingAdmissionWebhook\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: relative.yaml\n",
        )
        .unwrap();
        let plugins = read(&file).unwrap();
        assert_eq!(
            plugins["ValidatingAdmissionWebhook"]["kubeConfigFile"],
            "/x"
        );
        let err = webhook_kubeconfig(plugins.get("MutatingAdmissionWebhook")).unwrap_err();
        assert_eq!(
            err.0,
            "kubeConfigFile \"relative.yaml\" must be an absolute file path"
        );
        std::fs::write(&file, "apiVersion: v1\nkind: Pod\n").unwrap();
        assert!(
            read(&file)
                .unwrap_err()
                .0
                .contains("no kind \"Pod\" is registered")
        );
    }
}
