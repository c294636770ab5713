//! `EncryptionConfiguration` (apiserver.config.k8s.io/v1), the file `--encryption-provider-config` names: per list
//! of resources, providers in order; the first encrypts, all decrypt. Checked as upstream's
//! `ValidateEncryptionConfiguration` does, with its texts.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Deserialize;

use super::cipher::{Cipher, PrefixedCipher};

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Vec<ResourceConfig>,
}

#[derive(Debug, Deserialize)]
struct ResourceConfig {
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    providers: Vec<ProviderConfig>,
}

#[derive(Debug, Default, Deserialize)]
struct ProviderConfig {
    aesgcm: Option<Keys>,
    aescbc: Option<Keys>,
    secretbox: Option<Keys>,
    identity: Option<serde_json::Value>,
    kms: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct Keys {
    #[serde(default)]
    keys: Vec<Key>,
}

#[derive(Debug, Deserialize)]
struct Key {
    #[serde(default)]
    name: String,
    #[serde(default)]
    secret: String,
}

/// The value transformers of one list of resources: values are written with the first, read with the one whose
/// prefix they carry (upstream `prefixTransformers`).
#[derive(Debug)]
pub struct Transformers {
    pub(super) ciphers: Vec<PrefixedCipher>,
}

/// A parsed and checked `EncryptionConfiguration`.
#[derive(Debug)]
pub struct EncryptionConfig {
    /// (resource patterns, transformers), in the file's order: the first that names a resource wins.
    rules: Vec<(Vec<String>, Arc<Transformers>)>,
}

impl EncryptionConfig {
    /// Reads and checks the file at `path`; the error reads as upstream's.
    pub fn load(path: &std::path::Path) -> Result<Self, String> {
        let data = std::fs::read(path).map_err(|e| {
            format!(
                "error while parsing encryption provider configuration file {:?}: error reading \
                 encryption provider configuration file {:?}: {e}",
                path.display(),
                path.display()
            )
        })?;
        Self::parse(&data).map_err(|e| {
            format!(
                "error while parsing encryption provider configuration file {:?}: {e}",
                path.display()
            )
        })
    }

    /// Parses and checks a configuration (YAML or JSON).
    pub fn parse(data: &[u8]) -> Result<Self, String> {
        let (json, _) = crate::codec::yaml_to_json(data)
            .map_err(|e| format!("error while parsing file: {e}"))?;
        let file: File =
            serde_json::from_slice(&json).map_err(|e| format!("error while parsing file: {e}"))?;
        if file.kind != "EncryptionConfiguration"
            || file.api_version != "apiserver.config.k8s.io/v1"
        {
            return Err(format!(
                "error while parsing file: no kind \"{}\" is registered for version \"{}\" in scheme",
                file.kind, file.api_version
            ));
        }
        let mut errors = Vec::new();
        if file.resources.is_empty() {
            errors
                .push("resources: Required value: at least one resources is required".to_string());
        }
        let mut rules = Vec::new();
        for (i, conf) in file.resources.iter().enumerate() {
            if conf.resources.is_empty() {
                errors.push(format!(
                    "resources[{i}].resources: Required value: at least one resources[{i}].resources is required"
                ));
            }
            if conf.providers.is_empty() {
                errors.push(format!(
                    "resources[{i}].providers: Required value: at least one resources[{i}].providers is required"
                ));
            }
            let mut ciphers = Vec::new();
            for (j, provider) in conf.providers.iter().enumerate() {
                let path = format!("resources[{i}].providers[{j}]");
                match provider_ciphers(provider, &path) {
                    Ok(c) => ciphers.extend(c),
                    Err(e) => errors.extend(e),
                }
            }
            rules.push((conf.resources.clone(), Arc::new(Transformers { ciphers })));
        }
        if !errors.is_empty() {
            return Err(format!("error while parsing file: {}", aggregate(&errors)));
        }
        Ok(EncryptionConfig { rules })
    }

    /// The transformers of `resource` in `group` (`None`: stored as it is), matched as upstream does: the exact
    /// `resource.group` (`resource` alone for the core group), then `*.group`, then `*.*`, each rule in order.
    pub fn transformers(&self, resource: &str, group: &str) -> Option<Arc<Transformers>> {
        let exact = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let group_wildcard = format!("*.{group}");
        for wanted in [exact.as_str(), group_wildcard.as_str(), "*.*"] {
            for (resources, transformers) in &self.rules {
                if resources.iter().any(|r| r == wanted) {
                    return Some(transformers.clone());
                }
            }
        }
        None
    }
}

/// Go's `utilerrors.Aggregate` text: one error alone, or `[a, b]`.
fn aggregate(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

fn provider_ciphers(
    provider: &ProviderConfig,
    path: &str,
) -> Result<Vec<PrefixedCipher>, Vec<String>> {
    let found = [
        provider.kms.is_some(),
        provider.aesgcm.is_some(),
        provider.aescbc.is_some(),
        provider.secretbox.is_some(),
        provider.identity.is_some(),
    ]
    .into_iter()
    .filter(|f| *f)
    .count();
    if found == 0 {
        return Err(vec![format!(
            "{path}: Invalid value: \"\": provider does not contain any of the expected providers: KMS, AESGCM, \
             AESCBC, Secretbox, Identity"
        )]);
    }
    if found > 1 {
        return Err(vec![format!(
            "{path}: Invalid value: \"\": more than one provider specified in a single element, should split \
             into different list elements"
        )]);
    }
    if provider.kms.is_some() {
        return Err(vec![format!(
            "{path}.kms: Unsupported value: this server has no KMS plugin client (KMS v2 over gRPC); use \
             aescbc, aesgcm or secretbox"
        )]);
    }
    if provider.identity.is_some() {
        return Ok(vec![PrefixedCipher::identity()]);
    }
    let (name, keys, sizes): (&str, &Keys, &[usize]) = if let Some(k) = &provider.aesgcm {
        ("aesgcm", k, &[16, 24, 32])
    } else if let Some(k) = &provider.aescbc {
        ("aescbc", k, &[16, 24, 32])
    } else if let Some(k) = provider.secretbox.as_ref() {
        ("secretbox", k, &[32])
    } else {
        return Err(vec![format!("{path}: Invalid value: \"\": no provider")]);
    };
    let path = format!("{path}.{name}.keys");
    if keys.keys.is_empty() {
        return Err(vec![format!(
            "{path}: Required value: at least one keys is required"
        )]);
    }
    let mut errors = Vec::new();
    let mut ciphers = Vec::new();
    for (k, key) in keys.keys.iter().enumerate() {
        let path = format!("{path}[{k}]");
        if key.name.is_empty() {
            errors.push(format!(
                "{path}.name: Required value: name is a mandatory field for a key"
            ));
        }
        if key.secret.is_empty() {
            errors.push(format!(
                "{path}.secret: Required value: secret is a mandatory field for a key"
            ));
            continue;
        }
        let Ok(secret) = BASE64.decode(&key.secret) else {
            errors.push(format!(
                "{path}.secret: Invalid value: \"REDACTED\": secrets must be base64 encoded"
            ));
            continue;
        };
        if !sizes.contains(&secret.len()) {
            let sizes: Vec<String> = sizes.iter().map(usize::to_string).collect();
            errors.push(format!(
                "{path}.secret: Invalid value: \"REDACTED\": secret is not of the expected length, got {}, \
                 expected one of [{}]",
                secret.len(),
                sizes.join(" ")
            ));
            continue;
        }
        let cipher = match name {
            "aesgcm" => Cipher::aes_gcm(&secret),
            "aescbc" => Cipher::aes_cbc(&secret),
            _ => Cipher::secretbox(&secret),
        };
        match cipher {
            Some(cipher) => ciphers.push(PrefixedCipher::new(
                format!("k8s:enc:{name}:v1:{}:", key.name),
                cipher,
            )),
            None => errors.push(format!(
                "{path}.secret: Invalid value: \"REDACTED\": unusable key"
            )),
        }
    }
    if errors.is_empty() {
        Ok(ciphers)
    } else {
        Err(errors)
    }
}
