//! Query parameters and the option structs upstream decodes from them, with upstream's validation texts.

use crate::codec::FieldValidation;
use crate::meta::DRY_RUN_ALL;
use crate::registry::ApiError;
use crate::registry::validate_field_manager;
use crate::runtime::GroupKind;
use crate::storage::{FieldSelector, LabelSelector, ResourceVersionMatch};
use crate::validation::{ErrorList, FieldError, Path};

/// The decoded query string (repeated keys keep their first value, as Go's `url.Values.Get`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    pub fn parse(query: Option<&str>) -> Self {
        Params(
            form_urlencoded::parse(query.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// Every parameter, in order.
    pub fn pairs(&self) -> Vec<(String, String)> {
        self.0.clone()
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn all(&self, key: &str) -> impl Iterator<Item = &str> {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean as Go's `strconv.ParseBool` reads it; absent or empty is `None`.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(Some(true)),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(Some(false)),
            Some(other) => Err(ApiError::bad_request(format!(
                "strconv.ParseBool: parsing {}: invalid syntax",
                apiserver_gotext::quote(other)
            ))),
        }
    }

    /// A signed integer; absent or empty is `None`.
    pub fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(None),
            Some(value) => value.parse::<i64>().map(Some).map_err(|_| {
                ApiError::bad_request(format!(
                    "strconv.ParseInt: parsing {}: invalid syntax",
                    apiserver_gotext::quote(value)
                ))
            }),
        }
    }

    /// `pretty=true` asks for indented output.
    pub fn pretty(&self) -> bool {
        matches!(self.bool("pretty"), Ok(Some(true)))
    }

    /// `dryRun`: only `All` is accepted (upstream `ValidateDryRun`), as a 422 on the verb's options kind.
    pub fn dry_run(&self, options_kind: &str) -> Result<bool, ApiError> {
        let values: Vec<&str> = self.all("dryRun").collect();
        let mut errors = ErrorList::new();
        for value in &values {
            if *value != DRY_RUN_ALL {
                errors.push(FieldError::not_supported(
                    Path::new("dryRun"),
                    *value,
                    &[DRY_RUN_ALL],
                ));
            }
        }
        if !errors.is_empty() {
            return Err(options_invalid(options_kind, &errors));
        }
        Ok(!values.is_empty())
    }

    /// `fieldManager`: at most 128 printable characters (upstream `ValidateFieldManager`); empty when not given.
    pub fn field_manager(&self, options_kind: &str) -> Result<&str, ApiError> {
        let manager = self.get("fieldManager").unwrap_or("");
        let errors = validate_field_manager(manager, &Path::new("fieldManager"));
        if !errors.is_empty() {
            return Err(options_invalid(options_kind, &errors));
        }
        Ok(manager)
    }

    /// `fieldValidation`: `Strict`, `Warn` (the default) or `Ignore`.
    pub fn field_validation(&self, options_kind: &str) -> Result<FieldValidation, ApiError> {
        match self.get("fieldValidation").unwrap_or("") {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Strict" => Ok(FieldValidation::Strict),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => {
                let error = FieldError::not_supported(
                    Path::new("fieldValidation"),
                    other,
                    &["Ignore", "Warn", "Strict"],
                );
                Err(options_invalid(options_kind, &vec![error].into()))
            }
        }
    }

    /// `resourceVersion` of a get: `None` when absent or empty (read the latest).
    pub fn resource_version(&self) -> Result<Option<u64>, ApiError> {
        parse_resource_version(self.get("resourceVersion").unwrap_or(""))
    }
}

/// A 422 about the options of a request, e.g. `CreateOptions.meta.k8s.io "" is invalid: dryRun: ...`.
pub(crate) fn options_invalid(kind: &str, errors: &ErrorList) -> ApiError {
    let kind = GroupKind {
        group: "meta.k8s.io".to_string(),
        kind: kind.to_string(),
    };
    ApiError::invalid(&kind, "", errors)
}

/// A resourceVersion as storage reads it.
pub(crate) fn parse_resource_version(value: &str) -> Result<Option<u64>, ApiError> {
    if value.is_empty() {
        return Ok(None);
    }
    value.parse::<u64>().map(Some).map_err(|_| {
        let quoted = apiserver_gotext::quote(value);
        ApiError::bad_request(format!(
            "resourceVersion: Invalid value: {quoted}: strconv.ParseUint: parsing {quoted}: invalid syntax"
        ))
    })
}

/// `ListOptions` of a list or watch, parsed and validated as upstream's `ValidateListOptions`.
#[derive(Clone, Debug, Default)]
pub(crate) struct ListParams {
    pub label_selector: LabelSelector,
    pub field_selector: FieldSelector,
    pub limit: u64,
    pub continue_token: Option<String>,
    pub resource_version: Option<u64>,
    pub resource_version_match: Option<ResourceVersionMatch>,
    pub timeout_seconds: Option<i64>,
    pub allow_watch_bookmarks: bool,
    pub send_initial_events: Option<bool>,
}

impl ListParams {
    pub fn parse(params: &Params) -> Result<Self, ApiError> {
        let label_selector = LabelSelector::parse(params.get("labelSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let field_selector = FieldSelector::parse(params.get("fieldSelector").unwrap_or(""))
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let watch = params.bool("watch")?.unwrap_or(false);
        let limit = params.int("limit")?.unwrap_or(0).max(0) as u64;
        let continue_token = params
            .get("continue")
            .filter(|c| !c.is_empty())
            .map(str::to_string);
        let resource_version_raw = params.get("resourceVersion").unwrap_or("").to_string();
        // Upstream's list prefixes the parse error (`invalid resource version: ...`); its get and watch answered
        // the bare text with a 500 until 1.38 made them 400 too.
        let resource_version = parse_resource_version(&resource_version_raw).map_err(|err| {
            if watch {
                err
            } else {
                ApiError::bad_request(format!("invalid resource version: {}", err.message))
            }
        })?;
        let match_raw = params.get("resourceVersionMatch").unwrap_or("");
        let timeout_seconds = params.int("timeoutSeconds")?;
        let allow_watch_bookmarks = params.bool("allowWatchBookmarks")?.unwrap_or(false);
        let send_initial_events = params.bool("sendInitialEvents")?;

        let errors = if watch {
            validate_watch(match_raw, continue_token.is_some(), send_initial_events)
        } else {
            validate_list(
                match_raw,
                &resource_version_raw,
                continue_token.is_some(),
                send_initial_events,
            )
        };
        if !errors.is_empty() {
            return Err(options_invalid("ListOptions", &errors));
        }
        let resource_version_match = match match_raw {
            "Exact" => Some(ResourceVersionMatch::Exact),
            "NotOlderThan" => Some(ResourceVersionMatch::NotOlderThan),
            _ => None,
        };
        Ok(ListParams {
            label_selector,
            field_selector,
            limit,
            continue_token,
            resource_version,
            resource_version_match,
            timeout_seconds,
            allow_watch_bookmarks,
            send_initial_events,
        })
    }
}

fn validate_list(
    match_: &str,
    resource_version: &str,
    has_continue: bool,
    send_initial_events: Option<bool>,
) -> ErrorList {
    let mut errors = ErrorList::new();
    let path = Path::new("resourceVersionMatch");
    if !match_.is_empty() {
        if resource_version.is_empty() {
            errors.push(FieldError::forbidden(
                path.clone(),
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if has_continue {
            errors.push(FieldError::forbidden(
                path.clone(),
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if match_ != "Exact" && match_ != "NotOlderThan" {
            errors.push(FieldError::not_supported(
                path.clone(),
                match_,
                &["Exact", "NotOlderThan", ""],
            ));
        }
        if match_ == "Exact" && resource_version == "0" {
            errors.push(FieldError::forbidden(
                path,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
    }
    if send_initial_events.is_some() {
        errors.push(FieldError::forbidden(
            Path::new("sendInitialEvents"),
            "sendInitialEvents is forbidden for list",
        ));
    }
    errors
}

fn validate_watch(
    match_: &str,
    has_continue: bool,
    send_initial_events: Option<bool>,
) -> ErrorList {
    let mut errors = ErrorList::new();
    let path = Path::new("resourceVersionMatch");
    if send_initial_events.is_some() && match_ != "NotOlderThan" {
        errors.push(FieldError::forbidden(
            path.clone(),
            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
        ));
    }
    if !match_.is_empty() {
        if send_initial_events.is_none() {
            errors.push(FieldError::forbidden(
                path.clone(),
                "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        if match_ != "NotOlderThan" {
            errors.push(FieldError::not_supported(
                path.clone(),
                match_,
                &["NotOlderThan"],
            ));
        }
        if has_continue {
            errors.push(FieldError::forbidden(
                path,
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(query: &str) -> Result<ListParams, ApiError> {
        ListParams::parse(&Params::parse(Some(query)))
    }

    #[test]
    fn list_options_validation() {
        let err = list("resourceVersionMatch=Exact").unwrap_err();
        assert_eq!(err.code, 422);
        assert_eq!(
            err.message,
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert!(list("resourceVersion=0&resourceVersionMatch=Exact").is_err());
        assert!(list("watch=1&sendInitialEvents=true").is_err());
        let ok = list("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=1").unwrap();
        assert!(ok.allow_watch_bookmarks && ok.send_initial_events == Some(true));
        assert_eq!(list("limit=x").unwrap_err().code, 400);
        assert_eq!(list("labelSelector=a%3D%3D%3Db").unwrap_err().code, 400);
    }

    #[test]
    fn dry_run_and_field_validation() {
        let p = Params::parse(Some("dryRun=All&fieldValidation=Strict"));
        assert!(p.dry_run("CreateOptions").unwrap());
        assert_eq!(
            p.field_validation("CreateOptions").unwrap(),
            FieldValidation::Strict
        );
        let p = Params::parse(Some("fieldManager=a%01"));
        assert_eq!(
            p.field_manager("PatchOptions").unwrap_err().message,
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid value: \"a\\x01\": invalid character U+0001 (at position 1)"
        );
        let p = Params::parse(Some("dryRun=Some&fieldValidation=Loose"));
        let err = p.dry_run("CreateOptions").unwrap_err();
        assert_eq!(
            err.message,
            "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: \"Some\": supported values: \"All\""
        );
        assert_eq!(p.field_validation("PatchOptions").unwrap_err().code, 422);
    }
}
