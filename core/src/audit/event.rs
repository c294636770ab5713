//! The `audit.k8s.io/v1` `Event`, field for field as upstream writes it (JSON field order, `omitempty`,
//! microsecond timestamps).
//!
//! An event is written twice or more per audited request, so besides its `Serialize` (the definition of its
//! JSON) it has [`Event::write_json`], which writes the same bytes straight into a buffer: the fixed field names
//! as literals, the timestamps from a per-thread cache of the current second's text.

use std::cell::Cell;
use std::collections::BTreeMap;

use chrono::{Datelike, Timelike};
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
    /// The user's name, e.g. `system:admin`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// A unique identifier of the user, stable across name changes; may be empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The groups the user belongs to, e.g. `system:authenticated`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Further attributes from the authenticator, e.g. scopes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl From<User> for UserInfo {
    fn from(user: User) -> Self {
        UserInfo {
            username: user.name,
            uid: user.uid,
            groups: user.groups,
            extra: user.extra,
        }
    }
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
    /// The resource, a plural, e.g. `pizzas`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// The namespace; empty for cluster-scoped objects.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// The object's name, from the path or else the body; empty when neither names one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The object's `metadata.uid`, when known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The API group; empty for the core group.
    #[serde(rename = "apiGroup", skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// The version in the request path, e.g. `v1`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The object's `metadata.resourceVersion`, when known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// The subresource, e.g. `status`; empty for the main resource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The bounded part of a `Status` (upstream copies these fields only), or just the code.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ResponseStatus {
    /// The `Status`'s list metadata; always empty, as upstream writes it.
    pub metadata: BTreeMap<String, Value>,
    /// `Success` or `Failure`; empty when only the code is known.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// The `Status`'s human-readable message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The `Status`'s machine-readable reason, e.g. `NotFound`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The `Status`'s details (name, kind, causes), as JSON.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// The HTTP status code.
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

impl Event {
    /// Appends the event's JSON to `out`: the same bytes as `serde_json::to_writer(out, self)`, without going
    /// through serde for the fields every event has.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#"{"kind":"#);
        write_str(out, self.kind);
        out.extend_from_slice(br#","apiVersion":"#);
        write_str(out, self.api_version);
        out.extend_from_slice(br#","level":""#);
        out.extend_from_slice(level_name(self.level).as_bytes());
        out.extend_from_slice(br#"","auditID":"#);
        write_str(out, &self.audit_id);
        out.extend_from_slice(br#","stage":""#);
        out.extend_from_slice(stage_name(self.stage).as_bytes());
        out.extend_from_slice(br#"","requestURI":"#);
        write_str(out, &self.request_uri);
        out.extend_from_slice(br#","verb":"#);
        write_str(out, &self.verb);
        out.extend_from_slice(br#","user":"#);
        self.user.write_json(out);
        if let Some(user) = &self.impersonated_user {
            out.extend_from_slice(br#","impersonatedUser":"#);
            user.write_json(out);
        }
        if !self.source_ips.is_empty() {
            out.extend_from_slice(br#","sourceIPs":"#);
            write_strs(out, &self.source_ips);
        }
        if !self.user_agent.is_empty() {
            out.extend_from_slice(br#","userAgent":"#);
            write_str(out, &self.user_agent);
        }
        if let Some(object_ref) = &self.object_ref {
            out.extend_from_slice(br#","objectRef":"#);
            object_ref.write_json(out);
        }
        if let Some(status) = &self.response_status {
            out.extend_from_slice(br#","responseStatus":"#);
            status.write_json(out);
        }
        if let Some(object) = &self.request_object {
            out.extend_from_slice(br#","requestObject":"#);
            write_value(out, object);
        }
        if let Some(object) = &self.response_object {
            out.extend_from_slice(br#","responseObject":"#);
            write_value(out, object);
        }
        out.extend_from_slice(br#","requestReceivedTimestamp":"#);
        write_micro_time(out, &self.request_received_timestamp);
        out.extend_from_slice(br#","stageTimestamp":"#);
        write_micro_time(out, &self.stage_timestamp);
        if !self.annotations.is_empty() {
            out.extend_from_slice(br#","annotations":{"#);
            for (i, (key, value)) in self.annotations.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_str(out, value);
            }
            out.push(b'}');
        }
        out.push(b'}');
    }
}

impl UserInfo {
    fn write_json(&self, out: &mut Vec<u8>) {
        let mut object = JsonObject::open(out);
        if !self.username.is_empty() {
            write_str(object.field("username"), &self.username);
        }
        if !self.uid.is_empty() {
            write_str(object.field("uid"), &self.uid);
        }
        if !self.groups.is_empty() {
            write_strs(object.field("groups"), &self.groups);
        }
        if !self.extra.is_empty() {
            let out = object.field("extra");
            out.push(b'{');
            for (i, (key, values)) in self.extra.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_strs(out, values);
            }
            out.push(b'}');
        }
        object.close();
    }
}

impl ObjectReference {
    fn write_json(&self, out: &mut Vec<u8>) {
        let mut object = JsonObject::open(out);
        for (name, value) in [
            ("resource", &self.resource),
            ("namespace", &self.namespace),
            ("name", &self.name),
            ("uid", &self.uid),
            ("apiGroup", &self.api_group),
            ("apiVersion", &self.api_version),
            ("resourceVersion", &self.resource_version),
            ("subresource", &self.subresource),
        ] {
            if !value.is_empty() {
                write_str(object.field(name), value);
            }
        }
        object.close();
    }
}

impl ResponseStatus {
    fn write_json(&self, out: &mut Vec<u8>) {
        if self.metadata.is_empty() {
            out.extend_from_slice(br#"{"metadata":{}"#);
        } else {
            out.extend_from_slice(br#"{"metadata":"#);
            write_value(out, &self.metadata);
        }
        for (name, value) in [
            ("status", &self.status),
            ("message", &self.message),
            ("reason", &self.reason),
        ] {
            if !value.is_empty() {
                out.extend_from_slice(b",\"");
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"\":");
                write_str(out, value);
            }
        }
        if let Some(details) = &self.details {
            out.extend_from_slice(br#","details":"#);
            write_value(out, details);
        }
        out.extend_from_slice(br#","code":"#);
        write_i32(out, self.code);
        out.push(b'}');
    }
}

/// Writes an object's fields with the commas between them.
struct JsonObject<'a> {
    out: &'a mut Vec<u8>,
    empty: bool,
}

impl<'a> JsonObject<'a> {
    fn open(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        JsonObject { out, empty: true }
    }

    /// Starts a field (`name` needs no escaping); its value is written to what this returns.
    fn field(&mut self, name: &str) -> &mut Vec<u8> {
        if !self.empty {
            self.out.push(b',');
        }
        self.empty = false;
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    fn close(self) {
        self.out.push(b'}');
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::None => "None",
        Level::Metadata => "Metadata",
        Level::Request => "Request",
        Level::RequestResponse => "RequestResponse",
    }
}

fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::RequestReceived => "RequestReceived",
        Stage::ResponseStarted => "ResponseStarted",
        Stage::ResponseComplete => "ResponseComplete",
        Stage::Panic => "Panic",
    }
}

fn write_value<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    // Writing to a Vec fails only for what JSON cannot hold (a map with non-string keys), which these
    // values (JSON already) never are; `Serialize` would fail the whole event there, this writes `null`.
    let len = out.len();
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.truncate(len);
        out.extend_from_slice(b"null");
    }
}

fn write_strs(out: &mut Vec<u8>, values: &[String]) {
    out.push(b'[');
    for (i, value) in values.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, value);
    }
    out.push(b']');
}

/// A JSON string as serde_json writes it: `"` and `\` escaped, control characters as `\n`-style escapes or
/// `\u00XX`, everything else (non-ASCII included) as it is.
fn write_str(out: &mut Vec<u8>, value: &str) {
    let bytes = value.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut start = 0;
    for (i, &byte) in bytes.iter().enumerate() {
        if byte >= 0x20 && byte != b'"' && byte != b'\\' {
            continue;
        }
        out.extend_from_slice(&bytes[start..i]);
        start = i + 1;
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            _ => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(byte >> 4)]);
                out.push(HEX[usize::from(byte & 0xf)]);
            }
        }
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

fn write_i32(out: &mut Vec<u8>, value: i32) {
    if value < 0 {
        out.push(b'-');
    }
    let mut n = value.unsigned_abs();
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

thread_local! {
    /// The last second written and its text (`2006-01-02T15:04:05`): events written in the same second share
    /// it, so only the microseconds are formatted.
    static SECOND: Cell<(i64, [u8; 19])> = const { Cell::new((i64::MIN, [0; 19])) };
}

/// `"2006-01-02T15:04:05.000000Z"`, as [`MicroTime`]'s `Serialize` writes it.
fn write_micro_time(out: &mut Vec<u8>, time: &MicroTime) {
    /// 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
    const FOUR_DIGIT_YEARS: std::ops::RangeInclusive<i64> = -62_167_219_200..=253_402_300_799;
    let t = time.0;
    let seconds = t.timestamp();
    let nanos = t.timestamp_subsec_nanos();
    // Four-digit years and no leap second: other times take chrono's longer forms.
    if nanos >= 1_000_000_000 || !FOUR_DIGIT_YEARS.contains(&seconds) {
        write_str(out, &time.to_rfc3339());
        return;
    }
    let (cached, mut text) = SECOND.get();
    if cached != seconds {
        let two = |text: &mut [u8], n: u32| {
            text[0] = b'0' + (n / 10) as u8;
            text[1] = b'0' + (n % 10) as u8;
        };
        let year = t.year() as u32;
        two(&mut text[0..2], year / 100);
        two(&mut text[2..4], year % 100);
        text[4] = b'-';
        two(&mut text[5..7], t.month());
        text[7] = b'-';
        two(&mut text[8..10], t.day());
        text[10] = b'T';
        two(&mut text[11..13], t.hour());
        text[13] = b':';
        two(&mut text[14..16], t.minute());
        text[16] = b':';
        two(&mut text[17..19], t.second());
        SECOND.set((seconds, text));
    }
    let mut micros = nanos / 1_000;
    let mut fraction = *b".000000Z\"";
    for digit in fraction[1..7].iter_mut().rev() {
        *digit = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    out.push(b'"');
    out.extend_from_slice(&text);
    out.extend_from_slice(&fraction);
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
        assert_eq!(written(&event), serde_json::to_string(&event).unwrap());
    }

    fn written(event: &Event) -> String {
        let mut out = Vec::new();
        event.write_json(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn time(text: &str) -> MicroTime {
        serde_json::from_value(Value::String(text.into())).unwrap()
    }

    /// `write_json` is `Serialize` written by hand: every field, omitted or not, and every awkward string.
    #[test]
    fn write_json_writes_what_serialize_writes() {
        let awkward: String = (0u8..0x80)
            .map(char::from)
            .chain("é€😀\u{2028}<>&".chars())
            .collect();
        let mut event = Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: Level::RequestResponse,
            audit_id: "5f0c-\"quoted\"".into(),
            stage: Stage::Panic,
            request_uri: format!("/apis/g/v1/things?labelSelector={awkward}"),
            verb: "create".into(),
            user: UserInfo {
                username: awkward.clone(),
                uid: "u-1".into(),
                groups: vec!["a".into(), "b\nc".into()],
                extra: BTreeMap::from([
                    ("scopes".into(), vec!["x".into(), awkward.clone()]),
                    ("empty".into(), vec![]),
                ]),
            },
            impersonated_user: Some(UserInfo::default()),
            source_ips: vec!["10.0.0.1".into(), "::1".into()],
            user_agent: "kubectl/v1.36 \"quoted\"".into(),
            object_ref: Some(ObjectReference {
                resource: "things".into(),
                namespace: "ns".into(),
                name: awkward.clone(),
                uid: "uid".into(),
                api_group: "g".into(),
                api_version: "v1".into(),
                resource_version: "42".into(),
                subresource: "status".into(),
            }),
            response_status: Some(ResponseStatus {
                metadata: BTreeMap::from([("continue".into(), Value::from("x"))]),
                status: "Failure".into(),
                message: awkward.clone(),
                reason: "Conflict".into(),
                details: Some(
                    serde_json::json!({"name": "x", "causes": [{"field": "a"}], "retryAfterSeconds": 1.5}),
                ),
                code: -409,
            }),
            request_object: Some(
                serde_json::json!({"kind": "Thing", "spec": {"n": [1, 2.25, null, true]}, "s": awkward}),
            ),
            response_object: Some(Value::Null),
            request_received_timestamp: time("2026-11-24T10:00:00.000001Z"),
            stage_timestamp: time("2026-11-24T23:59:59.999999Z"),
            annotations: BTreeMap::from([
                ("authorization.k8s.io/decision".into(), "allow".into()),
                ("authorization.k8s.io/reason".into(), awkward.clone()),
            ]),
        };
        assert_eq!(written(&event), serde_json::to_string(&event).unwrap());

        // Every optional field left out, and times a second apart, far apart, and outside four-digit years.
        event.impersonated_user = None;
        event.source_ips.clear();
        event.user_agent.clear();
        event.object_ref = Some(ObjectReference::default());
        event.response_status = Some(ResponseStatus::code(200));
        event.request_object = None;
        event.response_object = None;
        event.annotations.clear();
        event.user = UserInfo::default();
        for (received, stage) in [
            ("2026-11-24T10:00:01.000000Z", "2026-11-24T10:00:01.123456Z"),
            ("1970-01-01T00:00:00.000000Z", "1969-12-31T23:59:59.999999Z"),
            ("0000-01-01T00:00:00.000000Z", "9999-12-31T23:59:59.999999Z"),
            ("2000-02-29T12:34:56.789000Z", "2026-11-24T10:00:01.123456Z"),
        ] {
            event.request_received_timestamp = time(received);
            event.stage_timestamp = time(stage);
            assert_eq!(written(&event), serde_json::to_string(&event).unwrap());
        }
        event.object_ref = None;
        event.response_status = None;
        event.request_received_timestamp = MicroTime(chrono::DateTime::<chrono::Utc>::MIN_UTC);
        event.stage_timestamp = MicroTime(chrono::DateTime::<chrono::Utc>::MAX_UTC);
        assert_eq!(written(&event), serde_json::to_string(&event).unwrap());
        for level in [Level::None, Level::Metadata, Level::Request] {
            for stage in [
                Stage::RequestReceived,
                Stage::ResponseStarted,
                Stage::ResponseComplete,
            ] {
                event.level = level;
                event.stage = stage;
                assert_eq!(written(&event), serde_json::to_string(&event).unwrap());
            }
        }
    }
}
