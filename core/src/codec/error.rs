//! The one error type of the codec layer.
//!
//! Every variant maps to an HTTP status and a `metav1.Status` reason (see [`CodecError::code`] and
//! [`CodecError::reason`]); `Display` is the upstream message text, so the endpoint layer can put it
//! into `Status.message` as is.

use super::media::MediaType;

/// What can go wrong while negotiating, decoding or encoding an object.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// No media type in `Accept` can be served: 406 NotAcceptable. `supported` lists what can be.
    #[error("only the following media types are accepted: {}", .supported.join(", "))]
    NotAcceptable {
        /// The media types the endpoint serves, in preference order.
        supported: Vec<String>,
    },

    /// A transformation (`as=Table`, ...) was asked for a media type that cannot carry it: 406.
    #[error(
        "only the following media types are accepted when converting to {target}: {}",
        .supported.join(", ")
    )]
    NotAcceptableConversion {
        /// The requested target kind, e.g. `Table`.
        target: String,
        /// The media types that can carry it.
        supported: Vec<String>,
    },

    /// The request body's `Content-Type` is not one we decode: 415 UnsupportedMediaType.
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {}",
        .supported.join(", ")
    )]
    UnsupportedMediaType {
        /// The media types the endpoint decodes.
        supported: Vec<String>,
    },

    /// Unknown or duplicate fields under `fieldValidation=Strict` (400). Each entry is one
    /// violation, e.g. `unknown field "spec.foo"`; they are joined with `, ` as upstream does.
    #[error("strict decoding error: {}", .0.join(", "))]
    StrictDecoding(Vec<String>),

    /// The body is not well-formed JSON (upstream fails while reading apiVersion/kind): 400.
    #[error("couldn't get version/kind; json parse error: {0}")]
    JsonSyntax(String),

    /// The body is not a well-formed, valid CBOR item (or holds what upstream's CBOR decoder
    /// refuses: duplicate map keys, NaN, bignums, ...): 400. Worded as upstream, which fails while
    /// reading apiVersion/kind.
    #[error("unable to determine group/version/kind: cbor: {0}")]
    Cbor(String),

    /// The body is not well-formed YAML: 400.
    #[error("error converting YAML to JSON: yaml: {0}")]
    YamlSyntax(String),

    /// Well-formed input that does not fit the target type (wrong value type, bad enum, ...): 400.
    #[error("{0}")]
    Decode(String),

    /// `kind` is absent. Holds the input as upstream prints it.
    #[error("Object 'Kind' is missing in '{0}'")]
    MissingKind(String),

    /// `apiVersion` is absent. Holds the input as upstream prints it.
    #[error("Object 'apiVersion' is missing in '{0}'")]
    MissingVersion(String),

    /// `apiVersion` has more than one `/`.
    #[error("unexpected GroupVersion string: {0}")]
    InvalidGroupVersion(String),

    /// Protobuf input without the `k8s\0` magic prefix.
    #[error(
        "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
    )]
    NotProtobuf,

    /// Zero bytes where an object was expected.
    #[error("empty data")]
    EmptyData,

    /// Protobuf input that is only the magic prefix.
    #[error("empty body")]
    EmptyBody,

    /// Malformed protobuf (truncated, wrong wire type, ...): 400.
    #[error("{0}")]
    Protobuf(String),

    /// A stream frame larger than the reader's limit.
    #[error("object to decode was longer than maximum allowed size")]
    ObjectTooLarge,

    /// A stream ended in the middle of a frame.
    #[error("unexpected EOF")]
    UnexpectedEof,

    /// Encoding failed (the object cannot be represented): 500.
    #[error("{0}")]
    Encode(String),

    /// Reading or writing a stream failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl CodecError {
    /// The HTTP status code the endpoint layer should answer with.
    pub fn code(&self) -> u16 {
        match self {
            Self::NotAcceptable { .. } | Self::NotAcceptableConversion { .. } => 406,
            Self::UnsupportedMediaType { .. } => 415,
            Self::Encode(_) | Self::Io(_) => 500,
            _ => 400,
        }
    }

    /// The `metav1.Status` reason matching [`Self::code`].
    pub fn reason(&self) -> &'static str {
        match self.code() {
            406 => "NotAcceptable",
            415 => "UnsupportedMediaType",
            500 => "InternalError",
            _ => "BadRequest",
        }
    }

    /// True for strict-decoding violations, which `fieldValidation=Warn` turns into warnings.
    pub fn is_strict_decoding(&self) -> bool {
        matches!(self, Self::StrictDecoding(_))
    }

    pub(crate) fn not_acceptable(offered: &[MediaType], stream: bool) -> Self {
        Self::NotAcceptable {
            supported: supported_list(offered, stream),
        }
    }

    pub(crate) fn unsupported(offered: &[MediaType], stream: bool) -> Self {
        Self::UnsupportedMediaType {
            supported: supported_list(offered, stream),
        }
    }
}

/// Upstream lists stream media types only for serializations that have a stream form.
fn supported_list(offered: &[MediaType], stream: bool) -> Vec<String> {
    offered
        .iter()
        .filter(|m| !stream || m.has_stream())
        .map(|m| {
            if stream {
                m.stream_content_type().to_string()
            } else {
                m.content_type().to_string()
            }
        })
        .collect()
}
