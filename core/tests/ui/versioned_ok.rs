use apiserver::meta::ObjectMeta;
use serde::{Deserialize, Serialize};

mod hub {
    use apiserver::meta::ObjectMeta;

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "example.com", kind = "Widget", namespaced, shortname = "wd", selectable_field = "spec.colorName")]
    pub struct Widget {
        pub metadata: ObjectMeta,
        pub spec: WidgetSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct WidgetSpec {
        pub color_name: String,
        pub size: i64,
    }
}

#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message, schemars::JsonSchema, apiserver::Versioned)]
#[versioned(hub = "hub::Widget", version = "v1")]
pub struct Widget {
    #[prost(message, required, tag = "1")]
    pub metadata: ObjectMeta,
    #[prost(message, required, tag = "2")]
    pub spec: WidgetSpec,
}

#[derive(Clone, PartialEq, Serialize, Deserialize, prost::Message, schemars::JsonSchema, apiserver::Versioned)]
#[versioned(hub = "hub::WidgetSpec")]
pub struct WidgetSpec {
    #[prost(string, tag = "1")]
    #[versioned(rename = "color_name")]
    pub color: String,
    #[prost(int64, optional, tag = "2")]
    pub size: Option<i64>,
    #[prost(bool, tag = "3")]
    #[versioned(skip)]
    pub shiny: bool,
}

fn main() {
    use apiserver::runtime::{Resource, Versioned};
    let hub = hub::Widget { spec: hub::WidgetSpec { color_name: "red".into(), size: 3 }, ..Default::default() };
    let wire = Widget::from_hub(&hub).unwrap();
    assert_eq!(wire.spec.color, "red");
    assert_eq!(wire.to_hub().unwrap(), hub);
    assert_eq!(hub.selectable_field("spec.colorName").as_deref(), Some("red"));
    assert_eq!(hub::Widget::PLURAL, "widgets");
}
