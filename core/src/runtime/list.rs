//! The list wrapper every served type shares.

use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, message, skip_field};
use serde::{Deserialize, Deserializer, Serialize};

use crate::codec::{self, CodecError, MediaType};
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

/// A `<Kind>List` made of items already encoded one by one (JSON objects or protobuf messages, as
/// [`List`] writes each of its items): byte for byte what encoding the whole [`List`] gives, without decoding or
/// encoding an item again. YAML lists are made whole.
pub fn encode_encoded_items(
    api_version: &str,
    kind: &str,
    metadata: &ListMeta,
    items: &[bytes::Bytes],
    format: MediaType,
) -> Result<Vec<u8>, CodecError> {
    let items_len: usize = items.iter().map(|i| i.len() + 10).sum();
    match format {
        MediaType::Json => {
            let mut buf = Vec::with_capacity(items_len + 256);
            buf.extend_from_slice(b"{\"kind\":");
            write_json(&mut buf, kind)?;
            buf.extend_from_slice(b",\"apiVersion\":");
            write_json(&mut buf, api_version)?;
            buf.extend_from_slice(b",\"metadata\":");
            write_json(&mut buf, metadata)?;
            buf.extend_from_slice(b",\"items\":[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    buf.push(b',');
                }
                buf.extend_from_slice(item);
            }
            buf.extend_from_slice(b"]}");
            Ok(buf)
        }
        MediaType::Protobuf => {
            let raw_len = message::encoded_len(1, metadata)
                + items
                    .iter()
                    .map(|i| 1 + prost::encoding::encoded_len_varint(i.len() as u64) + i.len())
                    .sum::<usize>();
            let mut buf = Vec::with_capacity(raw_len + 64);
            codec::write_envelope_header(&mut buf, api_version, kind, raw_len);
            message::encode(1, metadata, &mut buf);
            for item in items {
                buf.push(0x12);
                prost::encoding::encode_varint(item.len() as u64, &mut buf);
                buf.extend_from_slice(item);
            }
            buf.extend_from_slice(&codec::ENVELOPE_TRAILER);
            Ok(buf)
        }
        MediaType::Yaml => Err(CodecError::Encode(
            "a YAML list is not made of encoded items".into(),
        )),
    }
}

fn write_json<T: Serialize + ?Sized>(buf: &mut Vec<u8>, value: &T) -> Result<(), CodecError> {
    serde_json::to_writer(buf, value).map_err(|e| CodecError::Encode(e.to_string()))
}
