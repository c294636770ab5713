use apiserver::meta::ObjectMeta;

#[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
#[resource(group = "example.com", kind = "Widget", subresource = "stauts")]
pub struct Widget {
    pub metadata: ObjectMeta,
    pub status: i64,
}

fn main() {}
