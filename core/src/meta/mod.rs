//! Wire types of `meta.k8s.io/v1` and of discovery: what every object, list and API response is
//! made of.
//!
//! Each type serializes to exactly the JSON Kubernetes emits (upstream's json tags and `omitempty`
//! rules; `null` reads as empty) and implements [`prost::Message`] with the field numbers of
//! upstream's `generated.proto` (`k8s.io/apimachinery/pkg/apis/meta/v1`, `k8s.io/api/apidiscovery/v2`).
//! Go's non-pointer scalars are proto2 fields it always writes; we write them too, so our bytes
//! are the ones a Go server sends. Types upstream serves as whole responses (`Status`,
//! `APIResourceList`, `Table`, ...) write their `kind` and `apiVersion` in JSON; in protobuf the
//! envelope carries them.

mod condition;
mod discovery;
mod discovery_v2;
mod json;
mod label_selector;
mod object_meta;
mod options;
mod partial;
mod status;
mod table;
mod time;
mod watch;

pub use condition::{
    Condition, ConditionStatus, find_status_condition, find_status_condition_mut,
    is_status_condition_false, is_status_condition_present_and_equal, is_status_condition_true,
    remove_status_condition, set_status_condition, validate_condition, validate_conditions,
};
pub use discovery::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
    ServerAddressByClientCIDR, Verbs,
};
pub use discovery_v2::{
    APIGroupDiscovery, APIGroupDiscoveryList, APIResourceDiscovery, APISubresourceDiscovery,
    APIVersionDiscovery, DISCOVERY_FRESHNESS_CURRENT, DISCOVERY_FRESHNESS_STALE, GroupVersionKind,
    SCOPE_CLUSTER, SCOPE_NAMESPACE,
};
pub use json::{is_default, null_as_default};
pub use label_selector::{LabelSelector, LabelSelectorRequirement};
pub use object_meta::{
    FieldsV1, ListMeta, ManagedFieldsEntry, ObjectMeta, OwnerReference, ShardInfo, TypeMeta,
};
pub use options::{
    CreateOptions, DRY_RUN_ALL, DeleteOptions, GetOptions, ListOptions, PatchOptions,
    Preconditions, UpdateOptions,
};
pub use partial::{PartialObjectMetadata, PartialObjectMetadataList};
pub use status::{Status, StatusCause, StatusDetails, cause_type, reason};
pub use table::{Table, TableColumnDefinition, TableOptions, TableRow, TableRowCondition};
pub use time::{MicroTime, Time, parse_duration};
pub use watch::{RawExtension, WatchEvent, event_type};
