//! The HTTP side of API resources (upstream `endpoints/handlers`): one file per verb, and what they share.
//!
//! [`Api`] collects the resources a server serves and routes `/apis/<group>/<version>/...` to them; each verb
//! decodes what the client sent, runs mutating admission, calls the registry's [`Store`](crate::registry::Store)
//! (which runs the strategy and validating admission) and encodes the answer in the version and media type the
//! client negotiated. Errors are `Status` objects in that media type.

mod api;
mod context;
mod create;
mod delete;
mod encoded;
mod get;
mod list;
mod managed_fields;
mod output;
mod params;
mod patch;
mod provided;
mod scale;
pub mod strategic_merge;
mod subresource;
mod table;
mod update;
mod watch;

pub use crate::request::MAX_REQUEST_BODY_BYTES;
pub use api::Api;
pub use encoded::DEFAULT_ENCODED_OBJECT_BYTES;
pub use provided::{Provider, View};
pub use subresource::{Answer, Subresource, SubresourceRequest};
