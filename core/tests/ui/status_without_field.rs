use apiserver::meta::ObjectMeta;

#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(group = "example.com", kind = "Widget", status)]
pub struct Widget {
    pub metadata: ObjectMeta,
    pub size: i64,
}

fn main() {}
