//! `metav1.Condition`, the standard shape of an object's `status.conditions`, with apimachinery's helpers
//! (`k8s.io/apimachinery/pkg/api/meta/conditions.go`) and validation (`ValidateConditions`).
//!
//! Use it as a field `conditions: Vec<Condition>` of both the hub and the served versions: it converts as itself,
//! and a list of conditions publishes upstream's list metadata (a map keyed by `type`, merged by `type` in strategic
//! merge patches) without attributes on the field.
//!
//! ```
//! use apiserver::meta::{Condition, ConditionStatus, is_status_condition_true, set_status_condition};
//!
//! let mut conditions = Vec::new();
//! let changed = set_status_condition(
//!     &mut conditions,
//!     Condition::new("Ready", ConditionStatus::True, "Reconciled", "all parts are in place"),
//! );
//! assert!(changed);
//! assert!(is_status_condition_true(&conditions, "Ready"));
//! assert!(conditions[0].last_transition_time.is_some());
//! ```

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::Time;
use super::json::{is_zero_i64, null_as_default};
use crate::validation::{ErrorList, FieldError, Path};

/// The value of a condition's `status` (upstream `metav1.ConditionStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Whether the condition holds cannot be decided.
    Unknown,
}

impl ConditionStatus {
    /// The wire text: `True`, `False` or `Unknown`.
    pub const fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<ConditionStatus> for String {
    fn from(status: ConditionStatus) -> String {
        status.as_str().to_string()
    }
}

impl PartialEq<ConditionStatus> for String {
    fn eq(&self, other: &ConditionStatus) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<ConditionStatus> for str {
    fn eq(&self, other: &ConditionStatus) -> bool {
        self == other.as_str()
    }
}

/// One aspect of an object's current state (upstream `metav1.Condition`): JSON names and protobuf field numbers are
/// upstream's (`k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`), so clients decode it as theirs.
///
/// `status` is a string, as on the wire, so that an object with another value decodes and is refused by
/// [`validate_conditions`] with upstream's 422 rather than failing to parse; compare it with a [`ConditionStatus`]
/// (`condition.status == ConditionStatus::True`).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, prost::Message)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// The type of condition in CamelCase or in foo.example.com/CamelCase (a qualified name), e.g. `Ready`.
    #[serde(rename = "type", default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "1")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "2")]
    pub status: String,
    /// The `metadata.generation` this condition was set from; 0 (omitted) when not tracked.
    #[serde(
        default,
        skip_serializing_if = "is_zero_i64",
        deserialize_with = "null_as_default"
    )]
    #[prost(int64, required, tag = "3")]
    pub observed_generation: i64,
    /// When the status last changed; [`set_status_condition`] keeps it while the status stays. `None` is Go's zero
    /// time, written as `null` as upstream writes it.
    #[serde(default)]
    #[prost(message, optional, tag = "4")]
    pub last_transition_time: Option<Time>,
    /// A programmatic identifier in CamelCase for the last transition, e.g. `Reconciled`.
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "5")]
    pub reason: String,
    /// A human-readable message about the transition; may be empty.
    #[serde(default, deserialize_with = "null_as_default")]
    #[prost(string, required, tag = "6")]
    pub message: String,
}

impl Condition {
    /// A condition without a transition time (which [`set_status_condition`] sets) or observed generation.
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Condition {
            type_: type_.into(),
            status: status.into(),
            observed_generation: 0,
            last_transition_time: None,
            reason: reason.into(),
            message: message.into(),
        }
    }

    /// The same condition, observed at `generation` (the object's `metadata.generation`).
    pub fn observed_at(mut self, generation: i64) -> Self {
        self.observed_generation = generation;
        self
    }
}

/// Sets `new` in `conditions` (upstream `meta.SetStatusCondition`): added when no condition has its type, with
/// `lastTransitionTime` now unless `new` gives one; otherwise the existing condition takes `new`'s status, reason,
/// message and observed generation, and its `lastTransitionTime` changes only when the status does (to `new`'s
/// time if set, else now). Returns whether anything changed.
pub fn set_status_condition(conditions: &mut Vec<Condition>, new: Condition) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == new.type_) else {
        let mut new = new;
        if new.last_transition_time.is_none() {
            new.last_transition_time = Some(Time::now());
        }
        conditions.push(new);
        return true;
    };
    let mut changed = false;
    if existing.status != new.status {
        existing.status = new.status;
        existing.last_transition_time = Some(new.last_transition_time.unwrap_or_else(Time::now));
        changed = true;
    }
    if existing.reason != new.reason {
        existing.reason = new.reason;
        changed = true;
    }
    if existing.message != new.message {
        existing.message = new.message;
        changed = true;
    }
    if existing.observed_generation != new.observed_generation {
        existing.observed_generation = new.observed_generation;
        changed = true;
    }
    changed
}

/// Removes every condition of `type_` (upstream `meta.RemoveStatusCondition`); returns whether one was there.
pub fn remove_status_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The first condition of `type_` (upstream `meta.FindStatusCondition`).
pub fn find_status_condition<'a>(
    conditions: &'a [Condition],
    type_: &str,
) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The first condition of `type_`, to change in place.
pub fn find_status_condition_mut<'a>(
    conditions: &'a mut [Condition],
    type_: &str,
) -> Option<&'a mut Condition> {
    conditions.iter_mut().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present and `True` (upstream `meta.IsStatusConditionTrue`).
pub fn is_status_condition_true(conditions: &[Condition], type_: &str) -> bool {
    is_status_condition_present_and_equal(conditions, type_, ConditionStatus::True)
}

/// Whether the condition of `type_` is present and `False` (upstream `meta.IsStatusConditionFalse`).
pub fn is_status_condition_false(conditions: &[Condition], type_: &str) -> bool {
    is_status_condition_present_and_equal(conditions, type_, ConditionStatus::False)
}

/// Whether the first condition of `type_` is present with `status` (upstream
/// `meta.IsStatusConditionPresentAndEqual`).
pub fn is_status_condition_present_and_equal(
    conditions: &[Condition],
    type_: &str,
    status: ConditionStatus,
) -> bool {
    find_status_condition(conditions, type_).is_some_and(|c| c.status == status)
}

/// Upstream's longest `reason` (`maxReasonLen`).
const MAX_REASON_LEN: usize = 1024;
/// Upstream's longest `message` (`maxMessageLen`).
const MAX_MESSAGE_LEN: usize = 32 * 1024;
const REASON_FMT: &str = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?";
const REASON_ERR: &str = "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_'";
const STATUSES: [&str; 3] = ["False", "True", "Unknown"];

/// Upstream `ValidateConditions` (`k8s.io/apimachinery/pkg/apis/meta/v1/validation`): types unique and qualified
/// names, status `True`/`False`/`Unknown`, observed generation not negative, a transition time, a reason in
/// CamelCase of at most 1024 bytes, a message of at most 32768 bytes; with upstream's error texts. Call it from a
/// strategy's validation with the field's path (`status.conditions`).
pub fn validate_conditions(conditions: &[Condition], path: &Path) -> ErrorList {
    let mut errors = ErrorList::default();
    let mut seen = std::collections::HashSet::new();
    for (i, condition) in conditions.iter().enumerate() {
        if !seen.insert(condition.type_.as_str()) {
            errors.push(FieldError::duplicate(
                path.index(i).child("type"),
                condition.type_.as_str(),
            ));
        }
        errors.extend(validate_condition(condition, &path.index(i)));
    }
    errors
}

/// Upstream `ValidateCondition`: one condition.
pub fn validate_condition(condition: &Condition, path: &Path) -> ErrorList {
    let mut errors = ErrorList::default();
    for msg in crate::storage::labels::qualified_name_errors(&condition.type_) {
        errors.push(FieldError::invalid(
            path.child("type"),
            condition.type_.as_str(),
            &msg,
        ));
    }
    if !STATUSES.contains(&condition.status.as_str()) {
        errors.push(FieldError::not_supported(
            path.child("status"),
            condition.status.as_str(),
            &STATUSES,
        ));
    }
    if condition.observed_generation < 0 {
        errors.push(FieldError::invalid(
            path.child("observedGeneration"),
            &condition.observed_generation,
            "must be greater than or equal to zero",
        ));
    }
    if condition.last_transition_time.is_none() {
        errors.push(FieldError::required(
            path.child("lastTransitionTime"),
            "must be set",
        ));
    }
    if condition.reason.is_empty() {
        errors.push(FieldError::required(path.child("reason"), "must be set"));
    } else {
        if !is_condition_reason(&condition.reason) {
            errors.push(FieldError::invalid(
                path.child("reason"),
                condition.reason.as_str(),
                &crate::storage::labels::regex_error(
                    REASON_ERR,
                    REASON_FMT,
                    &[
                        "my_name",
                        "MY_NAME",
                        "MyName",
                        "ReasonA,ReasonB",
                        "ReasonA:ReasonB",
                    ],
                ),
            ));
        }
        if condition.reason.len() > MAX_REASON_LEN {
            errors.push(FieldError::too_long(path.child("reason"), MAX_REASON_LEN));
        }
    }
    if condition.message.len() > MAX_MESSAGE_LEN {
        errors.push(FieldError::too_long(path.child("message"), MAX_MESSAGE_LEN));
    }
    errors
}

/// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
fn is_condition_reason(reason: &str) -> bool {
    let b = reason.as_bytes();
    let Some((&first, &last)) = b.first().zip(b.last()) else {
        return false;
    };
    first.is_ascii_alphabetic()
        && (last.is_ascii_alphanumeric() || last == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b',' | b':'))
}

/// The schema of `metav1.Condition` as a CRD publishes it (controller-gen from upstream's `+kubebuilder` markers),
/// with upstream's descriptions, so `kubectl explain` shows them.
impl JsonSchema for Condition {
    fn schema_name() -> Cow<'static, str> {
        "io.k8s.apimachinery.pkg.apis.meta.v1.Condition".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "Condition contains details for one aspect of the current state of this API Resource.",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {
                    "type": "string",
                    "format": "date-time",
                    "description": "lastTransitionTime is the last time the condition transitioned from one status to another. This should be when the underlying condition changed.  If that is not known, then using the time when the API field changed is acceptable."
                },
                "message": {
                    "type": "string",
                    "maxLength": 32768,
                    "description": "message is a human readable message indicating details about the transition. This may be an empty string."
                },
                "observedGeneration": {
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0,
                    "description": "observedGeneration represents the .metadata.generation that the condition was set based upon. For instance, if .metadata.generation is currently 12, but the .status.conditions[x].observedGeneration is 9, the condition is out of date with respect to the current state of the instance."
                },
                "reason": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                    "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition. Producers of specific condition types may define expected values and meanings for this field, and whether the values are considered a guaranteed API. The value should be a CamelCase string. This field may not be empty."
                },
                "status": {
                    "type": "string",
                    "enum": ["True", "False", "Unknown"],
                    "description": "status of the condition, one of True, False, Unknown."
                },
                "type": {
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                    "description": "type of condition in CamelCase or in foo.example.com/CamelCase."
                }
            }
        })
    }
    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use prost::Message;

    fn at(seconds: i64) -> Option<Time> {
        Some(Time::from(Utc.timestamp_opt(seconds, 0).unwrap()))
    }

    fn ready(status: ConditionStatus) -> Condition {
        Condition::new("Ready", status, "Reconciled", "done")
    }

    #[test]
    fn set_adds_with_now_or_the_given_time() {
        let mut conditions = Vec::new();
        let before = Time::now();
        assert!(set_status_condition(
            &mut conditions,
            ready(ConditionStatus::True)
        ));
        assert!(conditions[0].last_transition_time.unwrap() >= before);
        let given = Condition {
            last_transition_time: at(1_000),
            ..Condition::new("Synced", ConditionStatus::False, "Waiting", "")
        };
        assert!(set_status_condition(&mut conditions, given.clone()));
        assert_eq!(conditions[1], given);
    }

    #[test]
    fn set_keeps_the_transition_time_while_the_status_stays() {
        let mut conditions = vec![Condition {
            last_transition_time: at(1_000),
            ..ready(ConditionStatus::True)
        }];
        // Nothing differs: unchanged, even with another time given.
        let same = Condition {
            last_transition_time: at(5_000),
            ..ready(ConditionStatus::True)
        };
        assert!(!set_status_condition(&mut conditions, same));
        assert_eq!(conditions[0].last_transition_time, at(1_000));
        // Reason, message and generation change; the time does not.
        let update = Condition::new("Ready", ConditionStatus::True, "Rechecked", "still done")
            .observed_at(3);
        assert!(set_status_condition(&mut conditions, update));
        assert_eq!(conditions[0].last_transition_time, at(1_000));
        assert_eq!(
            (
                conditions[0].reason.as_str(),
                conditions[0].message.as_str()
            ),
            ("Rechecked", "still done")
        );
        assert_eq!(conditions[0].observed_generation, 3);
        assert!(set_status_condition(
            &mut conditions,
            Condition::new("Ready", ConditionStatus::True, "Rechecked", "still done")
        ));
        assert_eq!(conditions[0].observed_generation, 0);
    }

    #[test]
    fn set_moves_the_transition_time_when_the_status_changes() {
        let mut conditions = vec![Condition {
            last_transition_time: at(1_000),
            ..ready(ConditionStatus::True)
        }];
        let before = Time::now();
        assert!(set_status_condition(
            &mut conditions,
            ready(ConditionStatus::False)
        ));
        assert_eq!(conditions[0].status, ConditionStatus::False);
        assert!(conditions[0].last_transition_time.unwrap() >= before);
        // A given time is taken as the transition's.
        let given = Condition {
            last_transition_time: at(2_000),
            ..ready(ConditionStatus::Unknown)
        };
        assert!(set_status_condition(&mut conditions, given));
        assert_eq!(conditions[0].last_transition_time, at(2_000));
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn find_remove_and_predicates() {
        let mut conditions = vec![
            ready(ConditionStatus::True),
            Condition::new("Synced", ConditionStatus::False, "Waiting", ""),
            Condition::new("Odd", ConditionStatus::Unknown, "NotYet", ""),
        ];
        assert_eq!(
            find_status_condition(&conditions, "Synced").map(|c| c.reason.as_str()),
            Some("Waiting")
        );
        assert!(find_status_condition(&conditions, "Missing").is_none());
        assert!(is_status_condition_true(&conditions, "Ready"));
        assert!(!is_status_condition_false(&conditions, "Ready"));
        assert!(is_status_condition_false(&conditions, "Synced"));
        assert!(!is_status_condition_true(&conditions, "Odd"));
        assert!(!is_status_condition_false(&conditions, "Odd"));
        assert!(is_status_condition_present_and_equal(
            &conditions,
            "Odd",
            ConditionStatus::Unknown
        ));
        assert!(!is_status_condition_true(&conditions, "Missing"));
        assert!(!is_status_condition_false(&conditions, "Missing"));
        find_status_condition_mut(&mut conditions, "Odd")
            .unwrap()
            .message = "m".into();
        assert_eq!(conditions[2].message, "m");
        assert!(remove_status_condition(&mut conditions, "Synced"));
        assert!(!remove_status_condition(&mut conditions, "Synced"));
        assert_eq!(conditions.len(), 2);
    }

    #[test]
    fn json_is_upstreams() {
        let condition = Condition {
            observed_generation: 4,
            last_transition_time: at(1_700_000_000),
            ..ready(ConditionStatus::True)
        };
        let json = serde_json::to_value(&condition).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "Ready", "status": "True", "observedGeneration": 4,
                "lastTransitionTime": "2023-11-14T22:13:20Z", "reason": "Reconciled", "message": "done"
            })
        );
        let back: Condition = serde_json::from_value(json).unwrap();
        assert_eq!(back, condition);
        // Go writes every field but observedGeneration; a zero time is null.
        let empty = serde_json::to_value(Condition::default()).unwrap();
        assert_eq!(
            empty,
            serde_json::json!({ "type": "", "status": "", "lastTransitionTime": null, "reason": "", "message": "" })
        );
        assert_eq!(
            serde_json::from_value::<Condition>(empty).unwrap(),
            Condition::default()
        );
    }

    /// The bytes are those of upstream's generated message, both ways (k8s-pb is generated from upstream's
    /// `generated.proto`).
    #[test]
    fn protobuf_is_upstreams() {
        use k8s_pb::apimachinery::pkg::apis::meta::v1 as pb;
        let condition = Condition {
            observed_generation: 7,
            last_transition_time: at(1_700_000_000),
            ..Condition::new(
                "example.com/Ready",
                ConditionStatus::False,
                "Broken",
                "it broke",
            )
        };
        let theirs = pb::Condition {
            r#type: Some("example.com/Ready".into()),
            status: Some("False".into()),
            observed_generation: Some(7),
            last_transition_time: Some(pb::Time {
                seconds: Some(1_700_000_000),
                nanos: Some(0),
            }),
            reason: Some("Broken".into()),
            message: Some("it broke".into()),
        };
        let ours = condition.encode_to_vec();
        assert_eq!(ours, theirs.encode_to_vec());
        assert_eq!(pb::Condition::decode(ours.as_slice()).unwrap(), theirs);
        assert_eq!(
            Condition::decode(theirs.encode_to_vec().as_slice()).unwrap(),
            condition
        );
    }

    #[test]
    fn validation_is_upstreams() {
        let path = Path::new("status").child("conditions");
        let valid = Condition {
            last_transition_time: at(1),
            ..ready(ConditionStatus::True)
        };
        assert!(validate_conditions(std::slice::from_ref(&valid), &path).is_empty());
        let bad = Condition {
            type_: "not a name".into(),
            status: "Maybe".into(),
            observed_generation: -1,
            last_transition_time: None,
            reason: "1bad".into(),
            message: "x".repeat(MAX_MESSAGE_LEN + 1),
        };
        let texts: Vec<String> = validate_conditions(&[valid.clone(), bad, valid], &path)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            texts,
            [
                "status.conditions[1].type: Invalid value: \"not a name\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                "status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\"",
                "status.conditions[1].observedGeneration: Invalid value: -1: must be greater than or equal to zero",
                "status.conditions[1].lastTransitionTime: Required value: must be set",
                "status.conditions[1].reason: Invalid value: \"1bad\": a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
                "status.conditions[1].message: Too long: may not be more than 32768 bytes",
                "status.conditions[2].type: Duplicate value: \"Ready\"",
            ]
        );
        let texts: Vec<String> = validate_condition(
            &Condition {
                reason: String::new(),
                ..ready(ConditionStatus::True)
            },
            &path,
        )
        .iter()
        .map(ToString::to_string)
        .collect();
        assert_eq!(
            texts,
            [
                "status.conditions.lastTransitionTime: Required value: must be set",
                "status.conditions.reason: Required value: must be set",
            ]
        );
        for good in [
            "A",
            "my_name",
            "MY_NAME",
            "ReasonA,ReasonB",
            "ReasonA:ReasonB",
            "a_",
        ] {
            assert!(is_condition_reason(good), "{good}");
        }
        for bad in ["", "_a", "a,", "a:", "a-b", "é"] {
            assert!(!is_condition_reason(bad), "{bad}");
        }
    }
}
