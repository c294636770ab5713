//! Media types and content negotiation (upstream `endpoints/handlers/negotiation`).
//!
//! The server offers a list of [`MediaType`]s in preference order (normally [`MediaType::ALL`]:
//! JSON, YAML, protobuf, CBOR). [`negotiate_output`] picks one from an `Accept` header the way upstream
//! does: clauses sorted by `q` (then by specificity), each clause tried against the offered types in
//! order, and parameters (`as`/`g`/`v`, `stream`, `pretty`, ...) checked by the endpoint's
//! [`EndpointRestrictions`]. [`negotiate_input`] maps a request `Content-Type` to a decoder.

use super::CodecError;

/// `application/json`
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// `application/yaml`
pub const CONTENT_TYPE_YAML: &str = "application/yaml";
/// `application/vnd.kubernetes.protobuf`
pub const CONTENT_TYPE_PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// `application/cbor` (RFC 8949; upstream KEP-4222)
pub const CONTENT_TYPE_CBOR: &str = "application/cbor";
/// `application/cbor-seq` (RFC 8742): the `Content-Type` of a CBOR watch, a sequence of events.
pub const CONTENT_TYPE_CBOR_SEQ: &str = "application/cbor-seq";

/// One of the serializations the framework speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MediaType {
    /// `application/json`; watch events are newline-delimited JSON objects.
    Json,
    /// `application/yaml`; has no watch (stream) form, as upstream.
    Yaml,
    /// `application/vnd.kubernetes.protobuf`: the `k8s\0` envelope; watches are length-prefixed.
    Protobuf,
    /// `application/cbor`: self-described CBOR items; watches are `application/cbor-seq`.
    Cbor,
}

impl MediaType {
    /// Everything we serve, in upstream's preference order (the first is the default; CBOR comes
    /// last, as upstream's codec factory appends it when `CBORServingAndStorage` is on).
    pub const ALL: [MediaType; 4] = [
        MediaType::Json,
        MediaType::Yaml,
        MediaType::Protobuf,
        MediaType::Cbor,
    ];

    /// The `Content-Type` of a single object in this serialization.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Json => CONTENT_TYPE_JSON,
            Self::Yaml => CONTENT_TYPE_YAML,
            Self::Protobuf => CONTENT_TYPE_PROTOBUF,
            Self::Cbor => CONTENT_TYPE_CBOR,
        }
    }

    /// The media type of a watch stream (`...;stream=watch`; for CBOR `application/cbor-seq`, as
    /// upstream lists it).
    pub fn stream_content_type(self) -> &'static str {
        match self {
            Self::Cbor => CONTENT_TYPE_CBOR_SEQ,
            Self::Json => "application/json;stream=watch",
            Self::Yaml => CONTENT_TYPE_YAML,
            Self::Protobuf => "application/vnd.kubernetes.protobuf;stream=watch",
        }
    }

    /// The `Content-Type` of a watch response. Upstream sends plain `application/json` for JSON
    /// watches, `application/cbor-seq` for CBOR ones, and adds `;stream=watch` for the others.
    pub fn watch_response_content_type(self) -> &'static str {
        match self {
            Self::Json => CONTENT_TYPE_JSON,
            other => other.stream_content_type(),
        }
    }

    /// Whether this serialization can carry a watch stream (YAML cannot).
    pub fn has_stream(self) -> bool {
        !matches!(self, Self::Yaml)
    }

    /// Whether the encoding is text (used for websocket framing and pretty printing).
    pub fn is_text(self) -> bool {
        !matches!(self, Self::Protobuf | Self::Cbor)
    }

    /// The `type/subtype` pair, lower case.
    pub fn type_subtype(self) -> (&'static str, &'static str) {
        match self {
            Self::Json => ("application", "json"),
            Self::Yaml => ("application", "yaml"),
            Self::Protobuf => ("application", "vnd.kubernetes.protobuf"),
            Self::Cbor => ("application", "cbor"),
        }
    }

    /// Maps a bare `type/subtype` (no parameters, any case) to a serialization.
    pub fn from_essence(essence: &str) -> Option<Self> {
        MediaType::ALL
            .into_iter()
            .find(|m| m.content_type().eq_ignore_ascii_case(essence))
    }
}

impl std::fmt::Display for MediaType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.content_type())
    }
}

/// One clause of an `Accept` header: `type/subtype;q=0.5;k=v`.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptClause {
    /// Media type, lower case; `*` for a wildcard.
    pub type_: String,
    /// Media subtype, lower case; `*` for a wildcard.
    pub subtype: String,
    /// Quality, 0.0 to 1.0: 1.0 when absent, 0 when unparsable (as upstream).
    pub q: f32,
    /// Parameters other than `q`, in header order (keys as written).
    pub params: Vec<(String, String)>,
}

impl AcceptClause {
    /// The value of parameter `key`, if present.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses an `Accept` header into clauses sorted best first, as upstream's `goautoneg.ParseAccept`:
/// malformed clauses (no `/`, more than one `/`) are skipped, a bare `*` means `*/*`, parameters
/// without `=` are dropped, and the sort is by `q` descending, then concrete before wildcard.
///
/// One deliberate difference: clauses with `q=0` are dropped (RFC 9110 §12.4.2: "not acceptable");
/// upstream keeps them at the end of the list.
pub fn parse_accept(header: &str) -> Vec<AcceptClause> {
    let mut clauses = Vec::new();
    for part in header.split(',') {
        let part = part.trim_matches(|c: char| c == ' ' || c == '\t');
        let mut pieces = part.split(';');
        let essence = pieces.next().unwrap_or("");
        let mut ts = essence.split('/');
        let type_ = ts.next().unwrap_or("").trim().to_ascii_lowercase();
        let subtype = match (ts.next(), ts.next()) {
            (None, _) if type_ == "*" => "*".to_string(),
            (Some(s), None) => s.trim().to_ascii_lowercase(),
            _ => continue,
        };
        if type_.is_empty() || subtype.is_empty() {
            continue;
        }
        let mut clause = AcceptClause {
            type_,
            subtype,
            q: 1.0,
            params: Vec::new(),
        };
        for param in pieces {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            if v.contains('=') {
                continue;
            }
            let k = k.trim();
            let v = v.trim().trim_matches('"');
            if k.eq_ignore_ascii_case("q") {
                // Upstream ignores the parse error and keeps 0.
                clause.q = v.parse::<f32>().unwrap_or(0.0).clamp(0.0, 1.0);
            } else {
                clause.params.push((k.to_string(), v.to_string()));
            }
        }
        if clause.q > 0.0 {
            clauses.push(clause);
        }
    }
    // Stable: equal clauses keep header order.
    clauses.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then_with(|| (a.type_ == "*").cmp(&(b.type_ == "*")))
            .then_with(|| (a.subtype == "*").cmp(&(b.subtype == "*")))
    });
    clauses
}

/// The object kind a client asks the server to transform its answer into, from the `as`, `g` and
/// `v` parameters (e.g. `as=Table;g=meta.k8s.io;v=v1`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConvertTarget {
    /// The `g` parameter (`meta.k8s.io` for the transforms upstream knows).
    pub group: String,
    /// The `v` parameter (`v1` or `v1beta1`).
    pub version: String,
    /// The `as` parameter: `Table`, `PartialObjectMetadata`, `PartialObjectMetadataList`.
    pub kind: String,
}

impl ConvertTarget {
    /// True when the target is in `meta.k8s.io` `v1` or `v1beta1`, the only group upstream
    /// transforms into.
    pub fn is_meta_k8s_io(&self) -> bool {
        self.group == "meta.k8s.io" && (self.version == "v1" || self.version == "v1beta1")
    }
}

/// The outcome of output negotiation: what to encode with and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Negotiated {
    /// The serialization to encode the response with.
    pub media_type: MediaType,
    /// `pretty=1` was given (the endpoint also honours `?pretty=true` and browser user agents).
    pub pretty: bool,
    /// The `stream` parameter (`watch`), if any.
    pub stream: Option<String>,
    /// The transformation asked for with `as`/`g`/`v`, if any.
    pub convert: Option<ConvertTarget>,
    /// The `sv` parameter (server version for generic output), if any.
    pub server_version: Option<String>,
    /// `export=1` was given.
    pub export: bool,
    /// The `profile` parameter (discovery), if any.
    pub profile: Option<String>,
    /// Parameter names we did not recognise (e.g. `charset`), as upstream records them.
    pub unrecognized: Vec<String>,
}

impl Negotiated {
    fn plain(media_type: MediaType) -> Self {
        Negotiated {
            media_type,
            pretty: false,
            stream: None,
            convert: None,
            server_version: None,
            export: false,
            profile: None,
            unrecognized: Vec::new(),
        }
    }
}

/// What an endpoint can serve beyond plain objects; consulted for every candidate clause, as
/// upstream's `EndpointRestrictions`. A clause the endpoint refuses is skipped, not fatal.
pub trait EndpointRestrictions {
    /// Whether `media_type` may be served with the requested transformation (`None`: no
    /// transformation requested).
    fn allows_media_type_transform(
        &self,
        media_type: MediaType,
        target: Option<&ConvertTarget>,
    ) -> bool;

    /// Whether the `sv` (server version) parameter value is valid.
    fn allows_server_version(&self, _version: &str) -> bool {
        false
    }

    /// Whether the `stream` parameter value is valid (only `watch` upstream).
    fn allows_stream_schema(&self, schema: &str) -> bool {
        schema == "watch"
    }
}

/// Upstream's `DefaultEndpointRestrictions`: no transformations, `stream=watch` only.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultRestrictions;

impl EndpointRestrictions for DefaultRestrictions {
    fn allows_media_type_transform(&self, _: MediaType, target: Option<&ConvertTarget>) -> bool {
        target.is_none()
    }
}

/// The restrictions of a resource endpoint (upstream `RequestScope.AllowsMediaTypeTransform`):
/// `Table` only as JSON, YAML or CBOR and only when the resource has a table convertor (upstream:
/// JSON or YAML only; a CBOR `Table` is ours, see `docs/divergences.md`);
/// `PartialObjectMetadata` and `PartialObjectMetadataList` in any media type; both only in
/// `meta.k8s.io/v1` or `v1beta1`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ResourceRestrictions {
    /// The resource can be rendered as a `Table`.
    pub table: bool,
}

impl EndpointRestrictions for ResourceRestrictions {
    fn allows_media_type_transform(
        &self,
        media_type: MediaType,
        target: Option<&ConvertTarget>,
    ) -> bool {
        let Some(target) = target else {
            return true;
        };
        if !target.is_meta_k8s_io() {
            return false;
        }
        match target.kind.as_str() {
            "Table" => {
                self.table
                    && matches!(
                        media_type,
                        MediaType::Json | MediaType::Yaml | MediaType::Cbor
                    )
            }
            "PartialObjectMetadata" | "PartialObjectMetadataList" => true,
            _ => false,
        }
    }
}

/// Picks the response serialization for an `Accept` header (`None` or empty: the first offered,
/// i.e. JSON). Errors with 406 and upstream's text listing `offered`.
pub fn negotiate_output(
    accept: Option<&str>,
    offered: &[MediaType],
    restrictions: &dyn EndpointRestrictions,
) -> Result<Negotiated, CodecError> {
    negotiate(accept, offered, restrictions, false)
        .ok_or_else(|| CodecError::not_acceptable(offered, false))
}

/// Picks the serialization of a watch stream. As upstream, it negotiates like
/// [`negotiate_output`] and then refuses serializations without a stream form (YAML); the 406
/// lists the `;stream=watch` media types.
///
/// `application/cbor-seq` in `Accept` also selects CBOR here (the media type a CBOR watch answers
/// with); upstream matches only `application/cbor` and refuses `cbor-seq` with a 406.
pub fn negotiate_output_stream(
    accept: Option<&str>,
    offered: &[MediaType],
    restrictions: &dyn EndpointRestrictions,
) -> Result<Negotiated, CodecError> {
    match negotiate(accept, offered, restrictions, true) {
        Some(n) if n.media_type.has_stream() => Ok(n),
        _ => Err(CodecError::not_acceptable(offered, true)),
    }
}

fn negotiate(
    accept: Option<&str>,
    offered: &[MediaType],
    restrictions: &dyn EndpointRestrictions,
    stream: bool,
) -> Option<Negotiated> {
    let header = accept.unwrap_or("");
    if header.is_empty() {
        return offered.first().map(|m| Negotiated::plain(*m));
    }
    for clause in parse_accept(header) {
        for &media_type in offered {
            let (t, s) = media_type.type_subtype();
            let cbor_seq = stream
                && media_type == MediaType::Cbor
                && clause.type_ == "application"
                && clause.subtype == "cbor-seq";
            let matches = (clause.type_ == t && (clause.subtype == s || clause.subtype == "*"))
                || (clause.type_ == "*" && clause.subtype == "*")
                || cbor_seq;
            if !matches {
                continue;
            }
            if let Some(n) = accept_options(&clause, media_type, restrictions) {
                return Some(n);
            }
        }
    }
    None
}

/// Applies a clause's parameters to a candidate; `None` when the endpoint refuses them.
fn accept_options(
    clause: &AcceptClause,
    media_type: MediaType,
    restrictions: &dyn EndpointRestrictions,
) -> Option<Negotiated> {
    let mut n = Negotiated::plain(media_type);
    for (k, v) in &clause.params {
        match k.as_str() {
            "as" => n.convert.get_or_insert_with(Default::default).kind = v.clone(),
            "g" => n.convert.get_or_insert_with(Default::default).group = v.clone(),
            "v" => n.convert.get_or_insert_with(Default::default).version = v.clone(),
            "stream" => {
                if !v.is_empty()
                    && (!media_type.has_stream() || !restrictions.allows_stream_schema(v))
                {
                    return None;
                }
                n.stream = Some(v.clone());
            }
            "sv" => {
                if !v.is_empty() && !restrictions.allows_server_version(v) {
                    return None;
                }
                n.server_version = Some(v.clone());
            }
            "export" => n.export = v == "1",
            "pretty" => n.pretty = v == "1",
            "profile" => n.profile = Some(v.clone()),
            _ => n.unrecognized.push(k.clone()),
        }
    }
    if !restrictions.allows_media_type_transform(media_type, n.convert.as_ref()) {
        return None;
    }
    Some(n)
}

/// Picks the decoder for a request body's `Content-Type` (`None` or empty: the first offered, JSON).
/// Parameters such as `charset` are ignored. Errors with 415 and upstream's text; `streaming`
/// selects the list of stream media types for that text.
pub fn negotiate_input(
    content_type: Option<&str>,
    offered: &[MediaType],
    streaming: bool,
) -> Result<MediaType, CodecError> {
    let header = content_type.unwrap_or("").trim();
    if header.is_empty() {
        return offered
            .first()
            .copied()
            .ok_or_else(|| CodecError::unsupported(offered, streaming));
    }
    parse_content_type(header)
        .and_then(|(essence, _)| MediaType::from_essence(&essence))
        .filter(|m| offered.contains(m))
        .ok_or_else(|| CodecError::unsupported(offered, streaming))
}

/// Parses a `Content-Type` value into its lower-case `type/subtype` and parameters, validating
/// tokens as RFC 9110 (and Go's `mime.ParseMediaType`) require. `None` when malformed.
pub fn parse_content_type(value: &str) -> Option<(String, Vec<(String, String)>)> {
    let mut pieces = value.split(';');
    let essence = pieces.next()?.trim();
    let (t, s) = essence.split_once('/')?;
    if !is_token(t) || !is_token(s) {
        return None;
    }
    let mut params = Vec::new();
    for p in pieces {
        let p = p.trim();
        if p.is_empty() {
            continue;
        }
        let (k, v) = p.split_once('=')?;
        let k = k.trim();
        if !is_token(k) {
            return None;
        }
        let v = v.trim();
        let v = match v.strip_prefix('"') {
            Some(rest) => rest.strip_suffix('"')?,
            None if is_token(v) => v,
            None => return None,
        };
        params.push((k.to_ascii_lowercase(), v.to_string()));
    }
    Some((essence.to_ascii_lowercase(), params))
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_picks_first_offered() {
        let n = negotiate_output(Some("*/*"), &MediaType::ALL, &DefaultRestrictions).unwrap();
        assert_eq!(n.media_type, MediaType::Json);
        let n =
            negotiate_output(Some("application/*"), &MediaType::ALL, &DefaultRestrictions).unwrap();
        assert_eq!(n.media_type, MediaType::Json);
    }

    #[test]
    fn content_type_tokens() {
        assert!(parse_content_type("application/json; charset=utf-8").is_some());
        assert!(parse_content_type("application/json; charset=\"utf-8\"").is_some());
        assert!(parse_content_type("application json").is_none());
        assert!(parse_content_type("application/json; charset").is_none());
        assert!(parse_content_type("/json").is_none());
    }
}
