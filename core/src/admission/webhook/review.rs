//! `AdmissionReview` (admission.k8s.io v1, and v1beta1 for webhooks that only take it): the request sent to a
//! webhook and the checks on its answer, with upstream's texts (`request/admissionreview.go`).

use serde::Deserialize;
use serde_json::{Value, json};

use crate::admission::{Attributes, Operation};
use crate::meta::reason;
use crate::registry::{ApiError, Cause, Details};

/// The review versions this server can send, in upstream's order of preference.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// The first review version the webhook accepts that this server speaks.
pub(super) fn review_version(accepted: &[String]) -> Result<&'static str, String> {
    accepted
        .iter()
        .find_map(|v| REVIEW_VERSIONS.iter().find(|ours| **ours == v.as_str()))
        .copied()
        .ok_or_else(|| {
            "webhook does not accept known AdmissionReview versions (v1, v1beta1)".to_string()
        })
}

/// What a request is sent as: the resource and kind in the version the webhook matched, and the objects in it.
pub(crate) struct Invocation<'a> {
    pub attributes: &'a Attributes,
    pub version: &'a str,
    pub object: Option<&'a Value>,
    pub old_object: Option<&'a Value>,
}

/// The operation's options as upstream sends them (`CreateOptions`, `UpdateOptions`, `DeleteOptions`).
fn options(attributes: &Attributes) -> Value {
    let kind = match attributes.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
        Operation::Delete => "DeleteOptions",
    };
    let mut options = json!({"kind": kind, "apiVersion": "meta.k8s.io/v1"});
    if attributes.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if !attributes.field_manager.is_empty() && attributes.operation != Operation::Delete {
        options["fieldManager"] = json!(attributes.field_manager);
    }
    options
}

/// The `AdmissionReview` body for `uid` in `review_version`.
pub(crate) fn request(invocation: &Invocation, uid: &str, review_version: &str) -> Value {
    let a = invocation.attributes;
    let group = &a.resource.group;
    let resource = &a.resource.resource;
    let kind = &a.kind.kind;
    let user = &a.user;
    let mut user_info = json!({"username": user.name});
    if !user.uid.is_empty() {
        user_info["uid"] = json!(user.uid);
    }
    if !user.groups.is_empty() {
        user_info["groups"] = json!(user.groups);
    }
    if !user.extra.is_empty() {
        user_info["extra"] = json!(user.extra);
    }
    let mut request = json!({
        "uid": uid,
        "kind": {"group": group, "version": invocation.version, "kind": kind},
        "resource": {"group": group, "version": invocation.version, "resource": resource},
        "requestKind": {"group": group, "version": a.version, "kind": kind},
        "requestResource": {"group": group, "version": a.version, "resource": resource},
        "operation": a.operation.as_str(),
        "userInfo": user_info,
        "object": invocation.object,
        "oldObject": invocation.old_object,
        "dryRun": a.dry_run,
        "options": options(a),
    });
    if !a.subresource.is_empty() {
        request["subResource"] = json!(a.subresource);
        request["requestSubResource"] = json!(a.subresource);
    }
    if !a.name.is_empty() {
        request["name"] = json!(a.name);
    }
    if !a.namespace.is_empty() {
        request["namespace"] = json!(a.namespace);
    }
    json!({
        "kind": "AdmissionReview",
        "apiVersion": format!("admission.k8s.io/{review_version}"),
        "request": request,
    })
}

/// A webhook's `AdmissionReview` answer.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    response: Option<Response>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    status: Option<WireStatus>,
    /// Base64 in JSON, as Go encodes `[]byte`.
    #[serde(default)]
    patch: Option<String>,
    patch_type: Option<String>,
    #[serde(default)]
    audit_annotations: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// The `metav1.Status` of a refusal.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireStatus {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
    #[serde(default)]
    reason: String,
    details: Option<WireDetails>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireDetails {
    #[serde(default)]
    name: String,
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    causes: Vec<WireCause>,
    #[serde(default)]
    retry_after_seconds: i32,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct WireCause {
    #[serde(default)]
    reason: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    field: String,
}

/// A checked answer.
pub(super) struct Verdict {
    /// The refusal, when not allowed (upstream's `ToStatusErr`).
    pub refusal: Option<ApiError>,
    /// A JSON patch (mutating webhooks only).
    pub patch: Option<Vec<u8>>,
    pub audit_annotations: std::collections::BTreeMap<String, String>,
    pub warnings: Vec<String>,
}

/// Checks a webhook's answer to the request `uid` (upstream's `VerifyAdmissionResponse`); the error is the
/// reason the answer is invalid.
pub(super) fn verify(
    body: &[u8],
    uid: &str,
    review_version: &str,
    mutating: bool,
    webhook: &str,
) -> Result<Verdict, String> {
    let review: Review = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let response = review
        .response
        .ok_or_else(|| "webhook response was absent".to_string())?;
    let mut patch = None;
    if review_version == "v1" {
        if response.uid != uid {
            return Err(format!(
                "expected response.uid={uid:?}, got {:?}",
                response.uid
            ));
        }
        if review.api_version != "admission.k8s.io/v1" || review.kind != "AdmissionReview" {
            let got = match review.api_version.split_once('/') {
                Some((group, version)) => format!("{group}/{version}, Kind={}", review.kind),
                None => format!("/{}, Kind={}", review.api_version, review.kind),
            };
            return Err(format!(
                "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {got}"
            ));
        }
        let has_patch = response.patch.as_deref().is_some_and(|p| !p.is_empty());
        if mutating {
            match (&response.patch_type, has_patch) {
                (None, true) => {
                    return Err("webhook returned response.patch but not response.patchType".into());
                }
                (Some(_), false) => {
                    return Err("webhook returned response.patchType but not response.patch".into());
                }
                (Some(t), true) if t.is_empty() => {
                    return Err(format!(
                        "webhook returned invalid response.patchType of {t:?}"
                    ));
                }
                (Some(t), true) if t != "JSONPatch" => {
                    return Err(format!("unsupported patch type {t:?}"));
                }
                _ => {}
            }
        } else if has_patch {
            return Err("validating webhook may not return response.patch".into());
        } else if response.patch_type.is_some() {
            return Err("validating webhook may not return response.patchType".into());
        }
    }
    if mutating && let Some(encoded) = response.patch.as_deref().filter(|p| !p.is_empty()) {
        use base64::Engine;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|e| format!("illegal base64 data in response.patch: {e}"))?;
        patch = Some(decoded);
    }
    let refusal =
        (!response.allowed).then(|| refusal(webhook, response.status.unwrap_or_default()));
    Ok(Verdict {
        refusal,
        patch,
        audit_annotations: response.audit_annotations,
        warnings: response.warnings,
    })
}

/// The reasons a webhook's Status may carry that this server knows by name; another becomes no reason.
fn known_reason(reason: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        reason::UNAUTHORIZED,
        reason::FORBIDDEN,
        reason::NOT_FOUND,
        reason::ALREADY_EXISTS,
        reason::CONFLICT,
        reason::GONE,
        reason::INVALID,
        reason::SERVER_TIMEOUT,
        reason::STORE_READ_ERROR,
        reason::TIMEOUT,
        reason::TOO_MANY_REQUESTS,
        reason::BAD_REQUEST,
        reason::METHOD_NOT_ALLOWED,
        reason::NOT_ACCEPTABLE,
        reason::REQUEST_ENTITY_TOO_LARGE,
        reason::UNSUPPORTED_MEDIA_TYPE,
        reason::INTERNAL_ERROR,
        reason::EXPIRED,
        reason::SERVICE_UNAVAILABLE,
    ];
    KNOWN.iter().find(|k| **k == reason).copied().unwrap_or("")
}

/// Upstream's `ToStatusErr`: the webhook's Status with a code of at least 400 and its message prefixed.
fn refusal(webhook: &str, status: WireStatus) -> ApiError {
    let denied = format!("admission webhook {webhook:?} denied the request");
    let message = if !status.message.is_empty() {
        format!("{denied}: {}", status.message)
    } else if !status.reason.is_empty() {
        format!("{denied}: {}", status.reason)
    } else {
        format!("{denied} without explanation")
    };
    let code = u16::try_from(status.code)
        .ok()
        .filter(|c| (400..=599).contains(c))
        .unwrap_or(400);
    let mut error = ApiError::new(code, known_reason(&status.reason), message);
    if let Some(d) = status.details {
        error.details = Some(Box::new(Details {
            name: d.name,
            group: d.group,
            kind: d.kind,
            uid: d.uid,
            causes: d
                .causes
                .into_iter()
                .map(|c| Cause {
                    reason: c.reason,
                    message: c.message,
                    field: c.field,
                })
                .collect(),
            retry_after_seconds: d.retry_after_seconds,
        }));
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(response: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "response": response,
        }))
        .unwrap()
    }

    #[test]
    fn refusals_as_upstream() {
        let v = verify(
            &answer(json!({"uid": "u", "allowed": false, "status": {"code": 403, "message": "no pineapple"}})),
            "u",
            "v1",
            false,
            "deny.example.com",
        )
        .unwrap();
        let refusal = v.refusal.unwrap();
        assert_eq!(refusal.code, 403);
        assert_eq!(
            refusal.message,
            "admission webhook \"deny.example.com\" denied the request: no pineapple"
        );
        // A code below 400 becomes 400; no message and no reason: "without explanation".
        let v = verify(
            &answer(json!({"uid": "u", "allowed": false, "status": {"code": 200}})),
            "u",
            "v1",
            false,
            "w",
        )
        .unwrap();
        let refusal = v.refusal.unwrap();
        assert_eq!(refusal.code, 400);
        assert_eq!(
            refusal.message,
            "admission webhook \"w\" denied the request without explanation"
        );
    }

    #[test]
    fn invalid_answers() {
        let err = |body: Vec<u8>, mutating| verify(&body, "u", "v1", mutating, "w").err().unwrap();
        assert_eq!(
            err(answer(json!({"uid": "x", "allowed": true})), false),
            "expected response.uid=\"u\", got \"x\""
        );
        assert_eq!(
            err(
                br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
                false
            ),
            "webhook response was absent"
        );
        assert_eq!(
            err(
                answer(json!({"uid": "u", "allowed": true, "patch": "W10="})),
                false
            ),
            "validating webhook may not return response.patch"
        );
        assert_eq!(
            err(
                answer(json!({"uid": "u", "allowed": true, "patch": "W10="})),
                true
            ),
            "webhook returned response.patch but not response.patchType"
        );
        assert_eq!(
            err(
                answer(json!({"uid": "u", "allowed": true, "patchType": "JSONPatch"})),
                true
            ),
            "webhook returned response.patchType but not response.patch"
        );
        let ok = verify(
            &answer(json!({"uid": "u", "allowed": true, "patch": "W10=", "patchType": "JSONPatch", "warnings": ["careful"]})),
            "u",
            "v1",
            true,
            "w",
        )
        .unwrap();
        assert_eq!(ok.patch.as_deref(), Some(&b"[]"[..]));
        assert_eq!(ok.warnings, ["careful"]);
    }

    #[test]
    fn versions() {
        assert_eq!(
            review_version(&["v1beta1".into(), "v1".into()]).unwrap(),
            "v1beta1"
        );
        assert_eq!(review_version(&["v2".into(), "v1".into()]).unwrap(), "v1");
        assert!(review_version(&["v2".into()]).is_err());
    }
}
