//! The `audit.k8s.io/v1` `Event`, field for field as upstream writes it (JSON field order, `omitempty`,
//! microsecond timestamps).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::policy::{Level, Stage};
use crate::auth::User;
use crate::meta::{MicroTime, Status};

/// One audit record of one stage of one request.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `Event`.
    pub kind: &'static str,
    /// `audit.k8s.io/v1`.
    pub api_version: &'static str,
    /// The level the policy chose.
    pub level: Level,
    /// The request's `Audit-ID`.
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// Which stage this record is of.
    pub stage: Stage,
    /// The request's path and query.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The Kubernetes verb, or the lower-case method for non-resource requests.
    pub verb: String,
    /// The authenticated user.
    pub user: UserInfo,
    /// Who the request acted as, when it impersonated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<UserInfo>,
    /// `X-Forwarded-For`, then `X-Real-Ip`, then the connection's peer.
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// The `User-Agent` header.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// The object, for resource requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The response's code; for a `Status` response also its status, message, reason and details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// The request body (level Request and above, JSON or YAML bodies).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    /// The response body (level RequestResponse, not for watches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    /// When the request arrived.
    pub request_received_timestamp: MicroTime,
    /// When this stage was reached.
    pub stage_timestamp: MicroTime,
    /// Notes from authorization and admission (`authorization.k8s.io/decision`, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// upstream's `authenticationv1.UserInfo`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct UserInfo {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl From<&User> for UserInfo {
    fn from(user: &User) -> Self {
        UserInfo {
            username: user.name.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
        }
    }
}

/// The object a request is about.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(rename = "apiGroup", skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The bounded part of a `Status` (upstream copies these fields only), or just the code.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ResponseStatus {
    pub metadata: BTreeMap<String, Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub code: i32,
}

impl ResponseStatus {
    /// Only the HTTP code.
    pub fn code(code: u16) -> Self {
        ResponseStatus {
            code: i32::from(code),
            ..ResponseStatus::default()
        }
    }

    /// What a `Status` body says; its code wins over the HTTP code only when it has one.
    pub fn from_status(status: &Status, http_code: u16) -> Self {
        ResponseStatus {
            metadata: BTreeMap::new(),
            status: status.status.clone(),
            message: status.message.clone(),
            reason: status.reason.clone(),
            details: status
                .details
                .as_ref()
                .and_then(|d| serde_json::to_value(d).ok()),
            code: if status.code != 0 {
                status.code
            } else {
                i32::from(http_code)
            },
        }
    }
}

/// Removes `metadata.managedFields` from an object, or from every item of a list.
pub fn strip_managed_fields(value: &mut Value) {
    fn strip(object: &mut Value) {
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
    }
    strip(value);
    if let Some(items) = value.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(strip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_written_as_upstream_writes_it() {
        let at: MicroTime = serde_json::from_str("\"2026-11-24T10:00:00.500000Z\"").unwrap();
        let event = Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: Level::Metadata,
            audit_id: "a1".into(),
            stage: Stage::ResponseComplete,
            request_uri: "/apis/g/v1/namespaces/ns/things/x".into(),
            verb: "get".into(),
            user: UserInfo {
                username: "alice".into(),
                groups: vec!["system:authenticated".into()],
                ..UserInfo::default()
            },
            impersonated_user: None,
            source_ips: vec!["127.0.0.1".into()],
            user_agent: String::new(),
            object_ref: Some(ObjectReference {
                resource: "things".into(),
                namespace: "ns".into(),
                name: "x".into(),
                api_group: "g".into(),
                api_version: "v1".into(),
                ..ObjectReference::default()
            }),
            response_status: Some(ResponseStatus::code(200)),
            request_object: None,
            response_object: None,
            request_received_timestamp: at,
            stage_timestamp: at,
            annotations: BTreeMap::new(),
        };
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/apis/g/v1/namespaces/ns/things/x","verb":"get","user":{"username":"alice","groups":["system:authenticated"]},"sourceIPs":["127.0.0.1"],"objectRef":{"resource":"things","namespace":"ns","name":"x","apiGroup":"g","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2026-11-24T10:00:00.500000Z","stageTimestamp":"2026-11-24T10:00:00.500000Z"}"#
        );
    }
}
