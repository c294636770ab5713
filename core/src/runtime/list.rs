//! The list wrapper every served type shares.

use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, message, skip_field};
use serde::{Deserialize, Deserializer, Serialize};

use crate::meta::ListMeta;

/// A list of objects of one version (`PizzaList`): list metadata and items, in JSON and protobuf
/// (`metadata` = 1, `items` = 2, as every upstream `*List` message).
///
/// One generic type instead of a list struct per kind: the kind is `<Kind>List`, added by the codec.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(bound(serialize = "T: Serialize", deserialize = "T: Deserialize<'de>"))]
pub struct List<T> {
    #[serde(default)]
    pub metadata: ListMeta,
    /// Always emitted (`"items": []` when empty); `null` reads as empty.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub items: Vec<T>,
}

fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

impl<T> prost::Message for List<T>
where
    T: prost::Message + Default,
{
    fn encode_raw(&self, buf: &mut impl BufMut) {
        message::encode(1, &self.metadata, buf);
        for item in &self.items {
            message::encode(2, item, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), prost::DecodeError> {
        match tag {
            1 => message::merge(wire_type, &mut self.metadata, buf, ctx),
            2 => message::merge_repeated(wire_type, &mut self.items, buf, ctx),
            _ => skip_field(wire_type, tag, buf, ctx),
        }
    }

    fn encoded_len(&self) -> usize {
        message::encoded_len(1, &self.metadata) + message::encoded_len_repeated(2, &self.items)
    }

    fn clear(&mut self) {
        self.metadata = ListMeta::default();
        self.items.clear();
    }
}
