use apiserver::meta::ObjectMeta;
use serde::{Deserialize, Serialize};

mod hub {
    use apiserver::meta::ObjectMeta;

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "example.com", kind = "Widget")]
    pub struct Widget {
        pub metadata: ObjectMeta,
        pub sizes: Vec<i64>,
    }
}

#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message, schemars::JsonSchema, apiserver::Versioned)]
#[versioned(hub = "hub::Widget", version = "v1")]
pub struct Widget {
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
    #[prost(string, repeated, tag = "2")]
    pub sizes: Vec<String>,
}

fn main() {}
