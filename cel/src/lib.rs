//! Kubernetes' Common Expression Language (CEL), one implementation for everything in the framework that evaluates
//! expressions: validation rules on types (`x-kubernetes-validations`, with `self` and `oldSelf`),
//! ValidatingAdmissionPolicy and MutatingAdmissionPolicy.
//!
//! It is the [`cel`] crate (a maintained CEL interpreter) with what Kubernetes adds: its libraries (lists, sets,
//! regex, URLs, quantities, IPs and CIDRs, semver, named formats, the extended strings), binding of JSON objects
//! with or without their OpenAPI schema, conversion of results back to JSON, and cost limits; and the authorization
//! library of admission expressions ([`authz`]).
//!
//! ```
//! use apiserver_cel::{Activation, Program};
//! use serde_json::json;
//!
//! let program = Program::compile("self.replicas <= self.maxReplicas && self.name.matches('^[a-z]+$')").unwrap();
//! let activation = Activation::new().bind_json("self", &json!({"replicas": 2, "maxReplicas": 5, "name": "web"}));
//! assert_eq!(program.evaluate(&activation).unwrap(), apiserver_cel::Value::Bool(true));
//! ```

mod check;
mod convert;
mod cost;
pub mod escaping;
mod estimate;
mod library;
mod mutation;
mod program;

pub use cel::Value;
pub use check::CelType;
pub use convert::{
    json_to_value, json_to_value_with_schema, value_to_json, value_to_json_with_schema,
};
pub use cost::{COST_LIMIT_EXCEEDED, PER_CALL_LIMIT, RUNTIME_COST_BUDGET};
pub use estimate::{CostEstimate, VariableSchema, max_cardinality};
pub use library::authz;
pub use program::{Activation, CompileError, EvalError, Evaluation, Program};
