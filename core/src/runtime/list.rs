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
    /// `resourceVersion`, `continue` and `remainingItemCount` of the list.
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

/// Writes a `<Kind>List` in pieces: the head (envelope, `kind`, `apiVersion`, `metadata`), then items encoded one
/// by one, then the tail; together the bytes [`List`] encodes whole (YAML lists are only made whole), so that a
/// list can be sent while its items are still being encoded and never exists whole.
#[derive(Debug)]
pub struct ListWriter {
    format: MediaType,
    written: usize,
}

impl ListWriter {
    /// Writes the head into `buf`. Protobuf's envelope states the message's length first, so it needs every item
    /// (`items`) up front; CBOR's definite-length `items` array needs their number; JSON needs neither.
    pub fn start(
        api_version: &str,
        kind: &str,
        metadata: &ListMeta,
        format: MediaType,
        items: Option<&[bytes::Bytes]>,
        buf: &mut Vec<u8>,
    ) -> Result<ListWriter, CodecError> {
        match format {
            MediaType::Json => {
                buf.extend_from_slice(b"{\"kind\":");
                write_json(buf, kind)?;
                buf.extend_from_slice(b",\"apiVersion\":");
                write_json(buf, api_version)?;
                buf.extend_from_slice(b",\"metadata\":");
                write_json(buf, metadata)?;
                buf.extend_from_slice(b",\"items\":[");
            }
            MediaType::Protobuf => {
                let items = items.ok_or_else(|| {
                    CodecError::Encode("a protobuf list needs its items' lengths first".into())
                })?;
                let raw_len = message::encoded_len(1, metadata)
                    + items
                        .iter()
                        .map(|i| 1 + prost::encoding::encoded_len_varint(i.len() as u64) + i.len())
                        .sum::<usize>();
                codec::write_envelope_header(buf, api_version, kind, raw_len);
                message::encode(1, metadata, buf);
            }
            MediaType::Cbor => {
                let items = items.ok_or_else(|| {
                    CodecError::Encode("a CBOR list needs its number of items first".into())
                })?;
                // The bytes `encode_cbor` writes for the whole list: the tag, a map of the four
                // fields (`List` always writes `metadata` and `items`), then the items array.
                buf.extend_from_slice(&codec::CBOR_SELF_DESCRIBED);
                codec::write_map_header(buf, 4);
                codec::write_text(buf, "kind");
                codec::write_text(buf, kind);
                codec::write_text(buf, "apiVersion");
                codec::write_text(buf, api_version);
                codec::write_text(buf, "metadata");
                codec::write_cbor(buf, metadata)?;
                codec::write_text(buf, "items");
                codec::write_array_header(buf, items.len());
            }
            MediaType::Yaml => {
                return Err(CodecError::Encode(
                    "a YAML list is not made of encoded items".into(),
                ));
            }
        }
        Ok(ListWriter { format, written: 0 })
    }

    /// Appends one encoded item.
    pub fn item(&mut self, buf: &mut Vec<u8>, item: &[u8]) {
        match self.format {
            MediaType::Protobuf => {
                buf.push(0x12);
                prost::encoding::encode_varint(item.len() as u64, buf);
            }
            // CBOR items follow each other with nothing between.
            MediaType::Cbor => {}
            _ if self.written > 0 => buf.push(b','),
            _ => {}
        }
        buf.extend_from_slice(item);
        self.written += 1;
    }

    /// Appends the tail.
    pub fn finish(self, buf: &mut Vec<u8>) {
        match self.format {
            MediaType::Protobuf => buf.extend_from_slice(&codec::ENVELOPE_TRAILER),
            // The array and map had definite lengths: nothing closes them.
            MediaType::Cbor => {}
            _ => buf.extend_from_slice(b"]}"),
        }
    }
}

fn write_json<T: Serialize + ?Sized>(buf: &mut Vec<u8>, value: &T) -> Result<(), CodecError> {
    serde_json::to_writer(buf, value).map_err(|e| CodecError::Encode(e.to_string()))
}
