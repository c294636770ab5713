//! `metav1.Time` and `metav1.MicroTime`: RFC 3339 in JSON, `{seconds, nanos}` in protobuf.

use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use prost::bytes::{Buf, BufMut};
use prost::encoding::{DecodeContext, WireType, int32, int64, skip_field};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! timestamp {
    ($(#[$doc:meta])* $name:ident, $precision:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub DateTime<Utc>);

        impl $name {
            /// The current time at this type's precision.
            pub fn now() -> Self {
                Self::truncate(Utc::now())
            }

            /// Drops what the wire format cannot carry, so that values compare equal after a round trip.
            pub fn truncate(t: DateTime<Utc>) -> Self {
                let nanos = t.timestamp_subsec_nanos();
                let kept = match $precision {
                    SecondsFormat::Secs => 0,
                    SecondsFormat::Micros => nanos / 1_000 * 1_000,
                    _ => nanos,
                };
                Self(Utc.timestamp_opt(t.timestamp(), kept).single().unwrap_or(t))
            }

            /// The RFC 3339 text Kubernetes writes.
            pub fn to_rfc3339(&self) -> String {
                self.0.to_rfc3339_opts($precision, true)
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self(DateTime::<Utc>::UNIX_EPOCH)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}({})", stringify!($name), self.to_rfc3339())
            }
        }

        impl From<DateTime<Utc>> for $name {
            fn from(t: DateTime<Utc>) -> Self {
                Self::truncate(t)
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.to_rfc3339())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                DateTime::parse_from_rfc3339(&text)
                    .map(|t| Self::truncate(t.with_timezone(&Utc)))
                    .map_err(|e| serde::de::Error::custom(format!("parsing time {text:?}: {e}")))
            }
        }

        /// As upstream: `{seconds, nanos}`, both always written (the zero time is never encoded,
        /// being `None` in an `Option<Time>`).
        impl prost::Message for $name {
            fn encode_raw(&self, buf: &mut impl BufMut) {
                let t = Self::truncate(self.0).0;
                int64::encode(1, &t.timestamp(), buf);
                int32::encode(2, &(t.timestamp_subsec_nanos() as i32), buf);
            }

            fn merge_field(
                &mut self,
                tag: u32,
                wire_type: WireType,
                buf: &mut impl Buf,
                ctx: DecodeContext,
            ) -> Result<(), prost::DecodeError> {
                let mut seconds = self.0.timestamp();
                let mut nanos = self.0.timestamp_subsec_nanos() as i32;
                match tag {
                    1 => int64::merge(wire_type, &mut seconds, buf, ctx)?,
                    2 => int32::merge(wire_type, &mut nanos, buf, ctx)?,
                    _ => return skip_field(wire_type, tag, buf, ctx),
                }
                // Go normalises nanos outside [0, 1e9) into the seconds (time.Unix).
                let total = i128::from(seconds) * 1_000_000_000 + i128::from(nanos);
                let t = i64::try_from(total.div_euclid(1_000_000_000))
                    .ok()
                    .and_then(|s| Utc.timestamp_opt(s, total.rem_euclid(1_000_000_000) as u32).single());
                // prost offers no other way to build a decode error for a value out of range.
                #[allow(deprecated)]
                let out_of_range = || prost::DecodeError::new("timestamp out of range");
                self.0 = Self::truncate(t.ok_or_else(out_of_range)?).0;
                Ok(())
            }

            fn encoded_len(&self) -> usize {
                let t = Self::truncate(self.0).0;
                int64::encoded_len(1, &t.timestamp())
                    + int32::encoded_len(2, &(t.timestamp_subsec_nanos() as i32))
            }

            fn clear(&mut self) {
                *self = Self::default();
            }
        }
    };
}

timestamp!(
    /// A timestamp with second precision (`2006-01-02T15:04:05Z`), as `metav1.Time`.
    Time,
    SecondsFormat::Secs
);

timestamp!(
    /// A timestamp with microsecond precision (`2006-01-02T15:04:05.000000Z`), as `metav1.MicroTime`.
    MicroTime,
    SecondsFormat::Micros
);

/// Go's `time.ParseDuration` as a non-negative [`Duration`](std::time::Duration), for duration flags and
/// `metav1.Duration` text; it is the storage crate's, so that backends' flags parse the same way.
pub use apiserver_storage::backend::parse_duration;

#[cfg(test)]
mod tests {
    use super::*;

    use prost::Message;

    #[test]
    fn formats() {
        let t = Utc.with_ymd_and_hms(2026, 11, 22, 10, 5, 9).unwrap()
            + chrono::Duration::nanoseconds(123_456_789);
        assert_eq!(
            serde_json::to_string(&Time::from(t)).unwrap(),
            "\"2026-11-22T10:05:09Z\""
        );
        assert_eq!(
            serde_json::to_string(&MicroTime::from(t)).unwrap(),
            "\"2026-11-22T10:05:09.123456Z\""
        );
        let back: Time = serde_json::from_str("\"2026-11-22T10:05:09Z\"").unwrap();
        assert_eq!(back, Time::from(t));
        assert!(serde_json::from_str::<Time>("\"yesterday\"").is_err());
    }

    #[test]
    fn protobuf_round_trip() {
        let t = MicroTime::from(Utc.timestamp_opt(1_700_000_000, 5_000).unwrap());
        let bytes = t.encode_to_vec();
        assert_eq!(MicroTime::decode(bytes.as_slice()).unwrap(), t);
        // Negative nanos are normalised into the seconds, as Go's time.Unix does.
        let t = MicroTime::decode(&[0x08, 0x02, 0x10, 0xff, 0xff, 0xff, 0xff, 0x0f][..]).unwrap();
        assert_eq!(t.to_rfc3339(), "1970-01-01T00:00:01.999999Z");
        // Seconds chrono cannot represent are an error, not a panic.
        let huge = [0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        assert!(Time::decode(&huge[..]).is_err());
    }
}
