//! The storage version is named by type, so a version of another kind is refused by the compiler.

use apiserver::meta::ObjectMeta;
use apiserver::runtime::ResourceCodec;

mod hub {
    use apiserver::meta::ObjectMeta;

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "example.com", kind = "Widget")]
    pub struct Widget {
        pub metadata: ObjectMeta,
    }

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "example.com", kind = "Gadget")]
    pub struct Gadget {
        pub metadata: ObjectMeta,
    }
}

#[apiserver::served(hub = "hub::Widget", version = "v1")]
pub struct Widget {
    pub metadata: ObjectMeta,
}

#[apiserver::served(hub = "hub::Gadget", version = "v1")]
pub struct Gadget {
    pub metadata: ObjectMeta,
}

fn main() {
    let _ = ResourceCodec::<hub::Widget>::new().version::<Widget>().storage_version::<Gadget>();
}
