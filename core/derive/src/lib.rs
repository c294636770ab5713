//! Derive macros for hub and versioned API types; re-exported by `apiserver`.
//!
//! `#[derive(Hub)]` gives a hub (internal) type its resource identity; `#[derive(Versioned)]` makes a wire struct a
//! served version of a hub (or a nested part of one), with field-by-field conversion in both directions.

mod served;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, LitInt, LitStr, Path};

/// The resource identity of a hub type: implements `apiserver::runtime::Resource`.
///
/// The struct must have a `metadata: apiserver::meta::ObjectMeta` field. Attributes, in `#[resource(...)]`:
///
/// - `group = "..."` (required): the API group.
/// - `kind = "..."` (required): the kind, e.g. `Pizza`.
/// - `plural = "..."`: the URL name; default the lower-case kind with an English plural (`pizzas`, `classes`).
/// - `singular = "..."`: default the lower-case kind.
/// - `namespaced`: objects live in namespaces; without it the resource is cluster-scoped.
/// - `shortname = "..."`, `category = "..."`, `subresource = "status"`: repeatable.
/// - `printcolumn(name = "...", type_ = "...", json_path = "...", format = "...", description = "...",
///   priority = N)`: an extra `kubectl get` column (repeatable).
/// - `status`: a `status` subresource (the type needs a `status` field).
/// - `scale(spec_replicas = ".spec.replicas", status_replicas = ".status.replicas", label_selector =
///   ".status.selector")`: a `scale` subresource serving `autoscaling/v1` `Scale` (for `kubectl scale` and
///   autoscalers), reading and writing replicas at these JSON paths of the served versions, as a CRD declares it.
/// - `versions(v1beta1::Pizza, v1alpha1::Pizza)`, `storage_version(v1alpha1::Pizza)`: the served versions,
///   preferred first, and the one objects are stored as (none for a resource the server's code provides): the
///   derive then writes `Pizza::codec()`, the `ResourceCodec` to hand to `App::store`. A version of another hub
///   is a compile error. `Self` names a served version that is its own hub.
/// - `selectable_field = "spec.cost"`: a field path usable in field selectors (repeatable); its value is read from
///   the hub by turning each camelCase segment into the snake_case Rust field and formatting it with `Display`.
///
/// ```ignore
/// #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
/// #[resource(group = "restaurant.programming-kubernetes.info", kind = "Pizza", namespaced)]
/// pub struct Pizza { pub metadata: ObjectMeta, pub spec: PizzaSpec, pub status: PizzaStatus }
/// ```
#[proc_macro_derive(Hub, attributes(resource))]
pub fn derive_hub(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    hub(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// A served version of a hub type, or a nested struct of one: field-by-field conversion to and from the hub.
///
/// Struct attributes, in `#[versioned(...)]`:
///
/// - `hub = "path::Type"` (required): the hub struct this one converts to and from; `hub = "Self"` for a served
///   version that is its own hub (a kind served in one version, or whose hub has that version's shape): the root
///   struct then also derives [`Hub`] with its `#[resource(...)]`, conversion is a clone, and other versions
///   convert to it as to any hub.
/// - `version = "v1beta1"`: marks the root object of a version and implements `apiserver::runtime::Versioned`
///   (the struct must also derive serde, `prost::Message` and `schemars::JsonSchema`).
/// - `default = "path::fn"`: `fn(&mut Self)`, this version's defaults, run on decoded input before conversion; or
///   `fn(&mut Self) -> Result<(), E>` (`E` into `apiserver::runtime::ConversionError`, paths from the root) to
///   refuse a value: the request is answered 422 `Invalid` naming the fields.
/// - `lossless`: what this version cannot express of the hub is kept in an annotation
///   (`<plural>.<group>/<preferred version>`) instead of being lost, as upstream's conversions of such versions
///   do; for a version that drops or narrows hub fields, above all a storage version.
/// - `to_hub = "path::fn", from_hub = "path::fn"`: converts the whole struct with these functions
///   (`fn(&Self) -> Hub` and back, or `fn(&Self) -> Result<Hub, E>` to refuse a value with field errors whose
///   paths are relative to this struct; upstream's hand-written `Convert_*` functions) instead of field by field,
///   for a version whose fields do not map one to one onto the hub's. Field attributes then only carry patch
///   metadata.
/// - `printcolumn(name = "...", type_ = "...", json_path = "...", ...)` (repeatable, as on the hub): this
///   version's printer columns, in place of the hub's, as a CRD declares `additionalPrinterColumns` per version.
///   Each path is checked against this version's schema when the server starts.
///
/// Field attributes:
///
/// - `to_hub = "path::fn", from_hub = "path::fn"`: named conversions for a field whose type differs from the
///   hub's (`fn(&ThisFieldType) -> HubFieldType` and back). Either may fail instead: return
///   `Result<HubFieldType, apiserver::runtime::ConversionError>` (built with `ConversionError::invalid(value,
///   "why")`); the framework puts the field's JSON path in front (`spec.quantity: Invalid value: "a dozen": why`)
///   and a request body refused so is answered 422 `Invalid`, nothing written. Without them the types must
///   convert field by field; a mismatch is a compile error at the field.
/// - `rename = "hub_field"`: the hub's field has another name.
/// - `skip`: a field only this version has; it takes `Default` when converting from the hub.
/// - `patch_strategy = "merge"` (or `"replace"`, `"retainKeys"`, `"merge,retainKeys"`), with
///   `patch_merge_key = "name"` for a list of objects: how a strategic merge patch treats this field. Published in
///   the OpenAPI schema as `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key` (where kubectl reads
///   them) and used by the server to apply such patches. A list without it is replaced whole by a strategic merge
///   patch; a list of objects that merges needs a merge key, a list that may hold duplicates should not merge.
/// - `list_type = "map"` with `list_map_keys = "name"` (comma-separated for several keys), `list_type = "set"` or
///   `list_type = "atomic"`: how server-side apply merges the list and tracks who owns its items, published as
///   `x-kubernetes-list-type` / `x-kubernetes-list-map-keys`. Without it a list with a merge patch strategy is a
///   map list by its merge key (a set without one), any other list atomic, as upstream.
/// - `map_type = "atomic"`: a map or struct that server-side apply replaces and owns whole
///   (`x-kubernetes-map-type`).
/// - `validation(rule = "...", message = "...", message_expression = "...", reason = "FieldValueInvalid",
///   field_path = ".x", optional_old_self)`: a CEL validation rule on the field (also allowed on the struct, for
///   rules over the whole object), as a CRD's `x-kubernetes-validations`: `self` is the field's value, `oldSelf`
///   the stored one (a rule naming `oldSelf` is a transition rule, checked on updates only). Published in the
///   OpenAPI schema and checked on every create and update, whatever version the client wrote, with ratcheting:
///   a value unchanged by an update is not checked again. Repeat the attribute for several rules.
///
/// The derive also implements `apiserver::runtime::PatchMetadata` (the patch metadata of this struct and of the
/// derived structs inside it); field names on the wire follow serde's `rename` and `rename_all`.
#[proc_macro_derive(Versioned, attributes(versioned))]
pub fn derive_versioned(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    versioned(input)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

/// One attribute for a served version (or a nested struct of one), in place of the seven derives and the
/// per-field serde and prost attributes a wire type needs:
///
/// - derives `Clone`, `PartialEq`, serde's `Serialize` and `Deserialize`, `prost::Message`, `schemars::JsonSchema`
///   and [`Versioned`] through `apiserver`'s re-exports (the user's crate needs none of them);
/// - its arguments are [`Versioned`]'s (`hub = "..."`, `version = "..."`, `default = "..."`, `to_hub = "..."`,
///   `from_hub = "..."`), and field attributes `#[versioned(...)]` keep their meaning;
/// - JSON names are camelCase unless the struct says `#[serde(rename_all = "...")]`; a field without its own
///   `#[serde(...)]` reads a missing or `null` value as its zero value, as Go's decoder does, and is always
///   written unless marked `#[served(omitempty)]` (then its zero value is left out, as Go's `omitempty`);
/// - a field without its own `#[prost(...)]` gets the protobuf type its Rust type implies (`String` → `string`,
///   `i32` → `int32`, `f64` → `double`, `Option<T>` → optional, `Vec<T>` → repeated, `BTreeMap<K, V>` → map, any
///   other type a message) and the tag of its position (1, 2, ...), or `#[served(tag = N)]`. Stored protobuf names
///   fields by tag, so a tag must not change once objects are stored: `apiserver::protobuf_tags_test!` compares
///   every version's tags with a table checked in beside the tests (as go-to-protobuf keeps `generated.proto`)
///   and fails, naming the field and the `#[served(tag = N)]` that keeps it, when a field is moved, inserted or
///   removed before others.
///
/// ```ignore
/// #[apiserver::served(hub = "library::Book", version = "v1", default = "default_book")]
/// pub struct Book {
///     pub metadata: ObjectMeta,
///     pub spec: BookSpec,
/// }
///
/// #[apiserver::served(hub = "library::BookSpec")]
/// pub struct BookSpec {
///     pub title: String,
///     #[served(omitempty)]
///     pub pages: i32,
/// }
/// ```
#[proc_macro_attribute]
pub fn served(args: TokenStream, item: TokenStream) -> TokenStream {
    let item = syn::parse_macro_input!(item as syn::ItemStruct);
    served::served(args.into(), item)
        .unwrap_or_else(syn::Error::into_compile_error)
        .into()
}

fn named_fields(input: &DeriveInput) -> syn::Result<&syn::FieldsNamed> {
    match &input.data {
        Data::Struct(data) => match &data.fields {
            Fields::Named(fields) => Ok(fields),
            _ => Err(syn::Error::new(
                input.ident.span(),
                "expected a struct with named fields",
            )),
        },
        _ => Err(syn::Error::new(
            input.ident.span(),
            "expected a struct with named fields",
        )),
    }
}

struct PrintColumn {
    name: String,
    type_: String,
    format: String,
    description: String,
    json_path: String,
    priority: i32,
}

/// Parses `printcolumn(name = "...", type_ = "...", json_path = "...", ...)`.
fn print_column(meta: &syn::meta::ParseNestedMeta) -> syn::Result<PrintColumn> {
    let mut column = PrintColumn {
        name: String::new(),
        type_: String::new(),
        format: String::new(),
        description: String::new(),
        json_path: String::new(),
        priority: 0,
    };
    let string = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<String> {
        Ok(meta.value()?.parse::<LitStr>()?.value())
    };
    meta.parse_nested_meta(|inner| {
        if inner.path.is_ident("name") {
            column.name = string(&inner)?;
        } else if inner.path.is_ident("type_") || inner.path.is_ident("type") {
            column.type_ = string(&inner)?;
        } else if inner.path.is_ident("format") {
            column.format = string(&inner)?;
        } else if inner.path.is_ident("description") {
            column.description = string(&inner)?;
        } else if inner.path.is_ident("json_path") {
            column.json_path = string(&inner)?;
        } else if inner.path.is_ident("priority") {
            column.priority = inner.value()?.parse::<LitInt>()?.base10_parse()?;
        } else {
            return Err(inner.error(
                "unknown printcolumn attribute; expected name, type_, json_path, format, description or priority",
            ));
        }
        Ok(())
    })?;
    if column.name.is_empty() || column.type_.is_empty() || column.json_path.is_empty() {
        return Err(meta.error("printcolumn needs name, type_ and json_path"));
    }
    Ok(column)
}

/// A `PrinterColumn` value.
fn column_tokens(column: &PrintColumn) -> TokenStream2 {
    let PrintColumn {
        name,
        type_,
        format,
        description,
        json_path,
        priority,
    } = column;
    quote! {
        ::apiserver::runtime::PrinterColumn {
            name: #name, type_: #type_, format: #format, description: #description,
            json_path: #json_path, priority: #priority,
        }
    }
}

fn hub(input: DeriveInput) -> syn::Result<TokenStream2> {
    let fields = named_fields(&input)?;
    if !fields
        .named
        .iter()
        .any(|f| f.ident.as_ref().is_some_and(|i| i == "metadata"))
    {
        return Err(syn::Error::new(
            input.ident.span(),
            "a hub type needs a `metadata: ObjectMeta` field",
        ));
    }
    let mut group = None;
    let mut kind = None;
    let mut plural = None;
    let mut singular = None;
    let mut namespaced = false;
    let mut short_names = Vec::new();
    let mut categories = Vec::new();
    let mut subresources = Vec::new();
    let mut selectable = Vec::new();
    let mut columns = Vec::new();
    let mut scale: Option<(String, String, String)> = None;
    let mut versions: Vec<Path> = Vec::new();
    let mut storage_version: Option<Path> = None;
    for attr in input.attrs.iter().filter(|a| a.path().is_ident("resource")) {
        attr.parse_nested_meta(|meta| {
            let string = |meta: &syn::meta::ParseNestedMeta| -> syn::Result<String> {
                Ok(meta.value()?.parse::<LitStr>()?.value())
            };
            if meta.path.is_ident("group") {
                group = Some(string(&meta)?);
            } else if meta.path.is_ident("kind") {
                kind = Some(string(&meta)?);
            } else if meta.path.is_ident("plural") {
                plural = Some(string(&meta)?);
            } else if meta.path.is_ident("singular") {
                singular = Some(string(&meta)?);
            } else if meta.path.is_ident("namespaced") {
                namespaced = true;
            } else if meta.path.is_ident("shortname") {
                short_names.push(string(&meta)?);
            } else if meta.path.is_ident("category") {
                categories.push(string(&meta)?);
            } else if meta.path.is_ident("subresource") {
                let lit = meta.value()?.parse::<LitStr>()?;
                match lit.value().as_str() {
                    "status" => subresources.push("status".to_string()),
                    "scale" => {
                        return Err(syn::Error::new(
                            lit.span(),
                            "a scale subresource needs its paths: write `scale(spec_replicas = \".spec.replicas\", \
                             status_replicas = \".status.replicas\")`",
                        ));
                    }
                    other => {
                        return Err(syn::Error::new(
                            lit.span(),
                            format!(
                                "unknown subresource \"{other}\"; the derive knows \"status\" and `scale(...)`; \
                                 serve other subresources with `App::subresource`"
                            ),
                        ));
                    }
                }
            } else if meta.path.is_ident("status") {
                subresources.push("status".to_string());
            } else if meta.path.is_ident("scale") {
                let (mut spec, mut status, mut selector) = (String::new(), String::new(), String::new());
                meta.parse_nested_meta(|inner| {
                    if inner.path.is_ident("spec_replicas") {
                        spec = string(&inner)?;
                    } else if inner.path.is_ident("status_replicas") {
                        status = string(&inner)?;
                    } else if inner.path.is_ident("label_selector") {
                        selector = string(&inner)?;
                    } else {
                        return Err(inner.error(
                            "unknown scale attribute; expected spec_replicas, status_replicas or label_selector",
                        ));
                    }
                    Ok(())
                })?;
                for path in [&spec, &status, &selector] {
                    if !path.is_empty() && !path.starts_with('.') {
                        return Err(meta.error("scale paths are JSON paths like \".spec.replicas\""));
                    }
                }
                if spec.is_empty() || status.is_empty() {
                    return Err(meta.error("scale needs spec_replicas and status_replicas"));
                }
                subresources.push("scale".to_string());
                scale = Some((spec, status, selector));
            } else if meta.path.is_ident("selectable_field") {
                let lit = meta.value()?.parse::<LitStr>()?;
                selectable.push((lit.value(), lit.span()));
            } else if meta.path.is_ident("printcolumn") {
                let column = print_column(&meta)?;
                columns.push(column);
            } else if meta.path.is_ident("versions") {
                meta.parse_nested_meta(|version| {
                    versions.push(version.path.clone());
                    Ok(())
                })?;
            } else if meta.path.is_ident("storage_version") {
                meta.parse_nested_meta(|version| {
                    storage_version = Some(version.path.clone());
                    Ok(())
                })?;
            } else {
                return Err(meta.error(
                    "unknown resource attribute; expected group, kind, plural, singular, namespaced, shortname, \
                     category, subresource, status, scale, selectable_field, printcolumn, versions or \
                     storage_version",
                ));
            }
            Ok(())
        })?;
    }
    let missing = |what: &str| {
        syn::Error::new(
            input.ident.span(),
            format!("missing #[resource({what} = \"...\")]"),
        )
    };
    let group = group.ok_or_else(|| missing("group"))?;
    let kind = kind.ok_or_else(|| missing("kind"))?;
    let lower = kind.to_lowercase();
    let plural = plural.unwrap_or_else(|| pluralize(&lower));
    let singular = singular.unwrap_or(lower);
    let scope = if namespaced {
        quote!(Namespaced)
    } else {
        quote!(Cluster)
    };
    let columns = columns.iter().map(column_tokens);
    let selectable_arms = selectable
        .iter()
        .map(|(path, span)| {
            let segments = path.split('.').map(|s| syn::Ident::new(&snake_case(s), *span));
            quote_spanned! {*span=> #path => Some(::std::string::ToString::to_string(&self.#(#segments).*)), }
        })
        .collect::<Vec<_>>();
    let selectable_paths = selectable.iter().map(|(p, _)| p);
    let mut seen = std::collections::HashSet::new();
    subresources.retain(|s| seen.insert(s.clone()));
    let copy_status = if subresources.iter().any(|s| s == "status") {
        if !fields
            .named
            .iter()
            .any(|f| f.ident.as_ref().is_some_and(|i| i == "status"))
        {
            return Err(syn::Error::new(
                input.ident.span(),
                "a `status` subresource needs a `status` field",
            ));
        }
        quote! {
            fn copy_status_from(&mut self, other: &Self) {
                self.status = ::std::clone::Clone::clone(&other.status);
            }
        }
    } else {
        quote!()
    };
    let scale_paths = match &scale {
        Some((spec, status, selector)) => quote! {
            fn scale_paths() -> ::std::option::Option<::apiserver::runtime::ScalePaths> {
                ::std::option::Option::Some(::apiserver::runtime::ScalePaths {
                    spec_replicas: #spec, status_replicas: #status, label_selector: #selector,
                })
            }
        },
        None => quote!(),
    };
    let name = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    if storage_version.is_some() && versions.is_empty() {
        return Err(syn::Error::new(
            input.ident.span(),
            "storage_version(...) needs versions(...): the served versions, preferred first",
        ));
    }
    let codec = (!versions.is_empty()).then(|| {
        let storage = storage_version
            .as_ref()
            .map(|v| quote!(.storage_version::<#v>()));
        quote! {
            impl #impl_generics #name #ty_generics #where_clause {
                /// The served versions of this kind, preferred first, and its storage version (from
                /// `#[resource(versions(...), storage_version(...))]`).
                pub fn codec() -> ::apiserver::runtime::ResourceCodec<Self> {
                    ::apiserver::runtime::ResourceCodec::new()
                        #(.version::<#versions>())*
                        #storage
                }
            }
        }
    });
    Ok(quote! {
        #codec

        impl #impl_generics ::apiserver::runtime::Resource for #name #ty_generics #where_clause {
            const GROUP: &'static str = #group;
            const KIND: &'static str = #kind;
            const PLURAL: &'static str = #plural;
            const SINGULAR: &'static str = #singular;
            const SCOPE: ::apiserver::runtime::Scope = ::apiserver::runtime::Scope::#scope;
            const SHORT_NAMES: &'static [&'static str] = &[#(#short_names),*];
            const CATEGORIES: &'static [&'static str] = &[#(#categories),*];
            const PRINTER_COLUMNS: &'static [::apiserver::runtime::PrinterColumn] = &[#(#columns),*];
            const SUBRESOURCES: &'static [&'static str] = &[#(#subresources),*];
            const SELECTABLE_FIELDS: &'static [&'static str] = &[#(#selectable_paths),*];

            fn metadata(&self) -> &::apiserver::meta::ObjectMeta {
                &self.metadata
            }

            fn metadata_mut(&mut self) -> &mut ::apiserver::meta::ObjectMeta {
                &mut self.metadata
            }

            #copy_status

            #scale_paths

            fn selectable_field(&self, path: &str) -> ::std::option::Option<::std::string::String> {
                match path {
                    #(#selectable_arms)*
                    _ => None,
                }
            }
        }
    })
}

/// The English plural Kubernetes tools use for lower-case kinds.
fn pluralize(singular: &str) -> String {
    if singular.ends_with('s')
        || singular.ends_with('x')
        || singular.ends_with('z')
        || singular.ends_with("ch")
        || singular.ends_with("sh")
    {
        format!("{singular}es")
    } else if let Some(stem) = singular.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{singular}s")
    }
}

/// `creationTimestamp` → `creation_timestamp`.
fn snake_case(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 4);
    for c in camel.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A string given to serde as `#[serde(<key> = "...")]` on an item, if any.
fn serde_string(attrs: &[syn::Attribute], key: &str) -> Option<String> {
    let mut found = None;
    for attr in attrs.iter().filter(|a| a.path().is_ident("serde")) {
        // Other serde options are skipped whatever their shape; a parse failure only means "not found".
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident(key) && meta.input.peek(syn::Token![=]) {
                found = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.input.peek(syn::Token![=]) {
                meta.value()?.parse::<syn::Expr>()?;
            } else if meta.input.peek(syn::token::Paren) {
                meta.parse_nested_meta(|inner| {
                    if inner.input.peek(syn::Token![=]) {
                        inner.value()?.parse::<syn::Expr>()?;
                    }
                    Ok(())
                })?;
            }
            Ok(())
        });
    }
    found
}

/// The name of a field on the wire: serde's `rename`, else the struct's `rename_all` applied to the Rust name.
fn wire_name(
    field: &syn::Field,
    ident: &syn::Ident,
    rename_all: Option<&str>,
) -> syn::Result<String> {
    if let Some(name) = serde_string(&field.attrs, "rename") {
        return Ok(name);
    }
    let name = ident.to_string();
    let name = name.strip_prefix("r#").unwrap_or(&name).to_string();
    let words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
    let capitalized = |w: &str| {
        let mut c = w.chars();
        c.next()
            .map(|f| f.to_uppercase().chain(c).collect::<String>())
            .unwrap_or_default()
    };
    Ok(match rename_all {
        None | Some("snake_case") => name,
        Some("camelCase") => words
            .iter()
            .enumerate()
            .map(|(i, w)| {
                if i == 0 {
                    w.to_string()
                } else {
                    capitalized(w)
                }
            })
            .collect(),
        Some("PascalCase") => words.iter().map(|w| capitalized(w)).collect(),
        Some("lowercase") => name.to_lowercase(),
        Some("UPPERCASE") => name.to_uppercase(),
        Some("kebab-case") => words.join("-"),
        Some("SCREAMING_SNAKE_CASE") => name.to_uppercase(),
        Some("SCREAMING-KEBAB-CASE") => words.join("-").to_uppercase(),
        Some(other) => {
            return Err(syn::Error::new(
                ident.span(),
                format!("serde rename_all = \"{other}\" is not understood by Versioned"),
            ));
        }
    })
}

/// The tag of a field's `#[prost(..., tag = "N")]`, if it has one.
fn prost_tag(field: &syn::Field) -> syn::Result<Option<u32>> {
    let mut tag = None;
    for attr in field.attrs.iter().filter(|a| a.path().is_ident("prost")) {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("tag") {
                let value: syn::Lit = meta.value()?.parse()?;
                tag = Some(match value {
                    syn::Lit::Str(s) => s
                        .value()
                        .parse::<u32>()
                        .map_err(|e| syn::Error::new(s.span(), e))?,
                    syn::Lit::Int(i) => i.base10_parse()?,
                    other => return Err(syn::Error::new(other.span(), "expected a tag number")),
                });
            } else if meta.input.peek(syn::Token![=]) {
                meta.value()?.parse::<syn::Expr>()?;
            }
            Ok(())
        })?;
    }
    Ok(tag)
}

#[derive(Default)]
struct FieldOptions {
    to_hub: Option<Path>,
    from_hub: Option<Path>,
    rename: Option<syn::Ident>,
    skip: bool,
    patch_strategy: Option<LitStr>,
    patch_merge_key: Option<LitStr>,
    list_type: Option<LitStr>,
    list_map_keys: Option<LitStr>,
    map_type: Option<LitStr>,
    validations: Vec<TokenStream2>,
}

/// Parses `validation(rule = "...", ...)` into a call adding the rule to the schema named `target`.
fn validation_rule(
    meta: &syn::meta::ParseNestedMeta,
    target: TokenStream2,
) -> syn::Result<TokenStream2> {
    let mut rule: Option<LitStr> = None;
    let mut message: Option<LitStr> = None;
    let mut message_expression: Option<LitStr> = None;
    let mut reason: Option<LitStr> = None;
    let mut field_path: Option<LitStr> = None;
    let mut optional_old_self = false;
    meta.parse_nested_meta(|m| {
        if m.path.is_ident("rule") {
            rule = Some(m.value()?.parse()?);
        } else if m.path.is_ident("message") {
            message = Some(m.value()?.parse()?);
        } else if m.path.is_ident("message_expression") {
            message_expression = Some(m.value()?.parse()?);
        } else if m.path.is_ident("reason") {
            let lit: LitStr = m.value()?.parse()?;
            if !matches!(
                lit.value().as_str(),
                "FieldValueInvalid" | "FieldValueRequired" | "FieldValueForbidden" | "FieldValueDuplicate"
            ) {
                return Err(syn::Error::new(
                    lit.span(),
                    "reason is one of \"FieldValueInvalid\", \"FieldValueRequired\", \"FieldValueForbidden\", \"FieldValueDuplicate\"",
                ));
            }
            reason = Some(lit);
        } else if m.path.is_ident("field_path") {
            field_path = Some(m.value()?.parse()?);
        } else if m.path.is_ident("optional_old_self") {
            optional_old_self = true;
        } else {
            return Err(m.error(
                "unknown validation key; expected rule, message, message_expression, reason, field_path or optional_old_self",
            ));
        }
        Ok(())
    })?;
    let rule = rule.ok_or_else(|| meta.error("validation needs rule = \"<CEL expression>\""))?;
    let option = |lit: &Option<LitStr>| match lit {
        Some(l) => quote!(::std::option::Option::Some(#l)),
        None => quote!(::std::option::Option::None),
    };
    let (message, message_expression, reason, field_path) = (
        option(&message),
        option(&message_expression),
        option(&reason),
        option(&field_path),
    );
    Ok(quote! {
        ::apiserver::runtime::add_validation_rule(#target, ::apiserver::runtime::ValidationRule {
            rule: #rule,
            message: #message,
            message_expression: #message_expression,
            reason: #reason,
            field_path: #field_path,
            optional_old_self: #optional_old_self,
        });
    })
}

fn field_options(field: &syn::Field) -> syn::Result<FieldOptions> {
    let mut options = FieldOptions::default();
    for attr in field
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("versioned"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("to_hub") {
                options.to_hub = Some(meta.value()?.parse::<LitStr>()?.parse()?);
            } else if meta.path.is_ident("from_hub") {
                options.from_hub = Some(meta.value()?.parse::<LitStr>()?.parse()?);
            } else if meta.path.is_ident("rename") {
                let lit = meta.value()?.parse::<LitStr>()?;
                options.rename = Some(syn::Ident::new(&lit.value(), lit.span()));
            } else if meta.path.is_ident("skip") {
                options.skip = true;
            } else if meta.path.is_ident("patch_strategy") {
                let lit = meta.value()?.parse::<LitStr>()?;
                if !matches!(
                    lit.value().as_str(),
                    "merge" | "replace" | "retainKeys" | "merge,retainKeys" | "retainKeys,merge"
                ) {
                    return Err(syn::Error::new(
                        lit.span(),
                        "patch_strategy is one of \"merge\", \"replace\", \"retainKeys\", \"merge,retainKeys\"",
                    ));
                }
                options.patch_strategy = Some(lit);
            } else if meta.path.is_ident("patch_merge_key") {
                options.patch_merge_key = Some(meta.value()?.parse::<LitStr>()?);
            } else if meta.path.is_ident("list_type") {
                let lit = meta.value()?.parse::<LitStr>()?;
                if !matches!(lit.value().as_str(), "atomic" | "set" | "map") {
                    return Err(syn::Error::new(
                        lit.span(),
                        "list_type is one of \"atomic\", \"set\", \"map\"",
                    ));
                }
                options.list_type = Some(lit);
            } else if meta.path.is_ident("list_map_keys") {
                options.list_map_keys = Some(meta.value()?.parse::<LitStr>()?);
            } else if meta.path.is_ident("validation") {
                options.validations.push(validation_rule(&meta, quote!(field))?);
            } else if meta.path.is_ident("map_type") {
                let lit = meta.value()?.parse::<LitStr>()?;
                if !matches!(lit.value().as_str(), "atomic" | "granular") {
                    return Err(syn::Error::new(
                        lit.span(),
                        "map_type is one of \"atomic\", \"granular\"",
                    ));
                }
                options.map_type = Some(lit);
            } else {
                return Err(meta.error(
                    "unknown versioned field attribute; expected to_hub, from_hub, rename, skip, patch_strategy, \
                     patch_merge_key, list_type, list_map_keys, map_type or validation",
                ));
            }
            Ok(())
        })?;
    }
    if let Some(key) = &options.patch_merge_key
        && !options
            .patch_strategy
            .as_ref()
            .is_some_and(|s| s.value().split(',').any(|s| s == "merge"))
    {
        return Err(syn::Error::new(
            key.span(),
            "patch_merge_key needs patch_strategy = \"merge\"",
        ));
    }
    let is_map_list = options
        .list_type
        .as_ref()
        .is_some_and(|t| t.value() == "map");
    match (&options.list_map_keys, is_map_list) {
        (Some(keys), false) => {
            return Err(syn::Error::new(
                keys.span(),
                "list_map_keys needs list_type = \"map\"",
            ));
        }
        (None, true) => {
            return Err(syn::Error::new(
                field.span(),
                "list_type = \"map\" needs list_map_keys = \"key1,key2\"",
            ));
        }
        _ => {}
    }
    if options.to_hub.is_some() != options.from_hub.is_some() {
        return Err(syn::Error::new(
            field.span(),
            "give both `to_hub` and `from_hub`, or neither",
        ));
    }
    Ok(options)
}

fn versioned(input: DeriveInput) -> syn::Result<TokenStream2> {
    let fields = named_fields(&input)?;
    let mut hub: Option<Path> = None;
    let mut version: Option<String> = None;
    let mut default: Option<Path> = None;
    let mut lossless = false;
    let mut whole_to_hub: Option<Path> = None;
    let mut whole_from_hub: Option<Path> = None;
    let mut struct_rules = Vec::new();
    let mut columns = Vec::new();
    for attr in input
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("versioned"))
    {
        attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("hub") {
                hub = Some(meta.value()?.parse::<LitStr>()?.parse()?);
            } else if meta.path.is_ident("version") {
                version = Some(meta.value()?.parse::<LitStr>()?.value());
            } else if meta.path.is_ident("default") {
                default = Some(meta.value()?.parse::<LitStr>()?.parse()?);
            } else if meta.path.is_ident("lossless") {
                lossless = true;
            } else if meta.path.is_ident("to_hub") {
                whole_to_hub = Some(meta.value()?.parse::<LitStr>()?.parse()?);
            } else if meta.path.is_ident("from_hub") {
                whole_from_hub = Some(meta.value()?.parse::<LitStr>()?.parse()?);
            } else if meta.path.is_ident("validation") {
                struct_rules.push(validation_rule(&meta, quote!(schema))?);
            } else if meta.path.is_ident("printcolumn") {
                columns.push(print_column(&meta)?);
            } else {
                return Err(meta.error(
                    "unknown versioned attribute; expected hub, version, default, lossless, to_hub, from_hub, \
                     validation or printcolumn",
                ));
            }
            Ok(())
        })?;
    }
    let hub = hub.ok_or_else(|| {
        syn::Error::new(
            input.ident.span(),
            "missing #[versioned(hub = \"path::Type\")]",
        )
    })?;
    if whole_to_hub.is_some() != whole_from_hub.is_some() {
        return Err(syn::Error::new(
            input.ident.span(),
            "give both `to_hub` and `from_hub`, or neither",
        ));
    }
    let name = &input.ident;
    // `hub = "Self"`: a served version that is its own hub (a kind with one version, or the version the hub was
    // written as): the conversion is a clone, and the struct also derives `Hub` (or is a nested part of one).
    let own_hub = hub.is_ident("Self");
    if own_hub && (whole_to_hub.is_some() || default.is_some() || lossless) {
        return Err(syn::Error::new(
            input.ident.span(),
            "a struct that is its own hub (`hub = \"Self\"`) takes no `to_hub`/`from_hub`, `default` or `lossless`",
        ));
    }
    let hub: Path = if own_hub {
        syn::parse_quote!(#name)
    } else {
        hub
    };
    let rename_all = serde_string(&input.attrs, "rename_all");
    let mut to_hub = Vec::new();
    let mut from_hub = Vec::new();
    let mut patch_fields = Vec::new();
    let mut tag_fields = Vec::new();
    for field in &fields.named {
        let Some(ident) = field.ident.as_ref() else {
            continue;
        };
        let options = field_options(field)?;
        let wire = wire_name(field, ident, rename_all.as_deref())?;
        let ty = &field.ty;
        let explicit = options.patch_strategy.as_ref().map(|strategy| {
            let key = match &options.patch_merge_key {
                Some(k) => quote!(::std::option::Option::Some(#k)),
                None => quote!(::std::option::Option::None),
            };
            quote!(::apiserver::runtime::set_patch_metadata(field, #strategy, #key);)
        });
        let list_type = options.list_type.as_ref().map(|list_type| {
            let keys: Vec<String> = options
                .list_map_keys
                .as_ref()
                .map(|k| k.value().split(',').map(|k| k.trim().to_string()).collect())
                .unwrap_or_default();
            quote!(::apiserver::runtime::set_list_type(field, #list_type, &[#(#keys),*]);)
        });
        let map_type = options
            .map_type
            .as_ref()
            .map(|map_type| quote!(::apiserver::runtime::set_map_type(field, #map_type);));
        if let Some(tag) = prost_tag(field)? {
            tag_fields.push(quote_spanned! {ty.span()=>
                let path = ::apiserver::runtime::tag_path(prefix, #wire);
                (&&::apiserver::runtime::TagProbe::<#ty>::new()).nested_tags(&path, out);
                out.push((path, #tag));
            });
        }
        let validations = &options.validations;
        patch_fields.push(quote_spanned! {ty.span()=>
            if let ::std::option::Option::Some(field) = ::apiserver::runtime::schema_property(schema, #wire) {
                #explicit
                #list_type
                #map_type
                #(#validations)*
                (&&::apiserver::runtime::PatchProbe::<#ty>::new()).annotate_field(field);
            }
        });
        if own_hub
            && (options.skip
                || options.rename.is_some()
                || options.to_hub.is_some()
                || options.from_hub.is_some())
        {
            return Err(syn::Error::new(
                field.span(),
                "a struct that is its own hub (`hub = \"Self\"`) takes no field conversions",
            ));
        }
        if whole_to_hub.is_some() {
            if options.skip
                || options.rename.is_some()
                || options.to_hub.is_some()
                || options.from_hub.is_some()
            {
                return Err(syn::Error::new(
                    field.span(),
                    "a struct converted whole by `to_hub`/`from_hub` takes no field conversions",
                ));
            }
            continue;
        }
        if options.skip {
            from_hub.push(quote! { #ident: ::std::default::Default::default() });
            continue;
        }
        let hub_ident = options.rename.clone().unwrap_or_else(|| ident.clone());
        let span = field.ty.span();
        // A refused field is named by its JSON path: this field's wire name before the errors' own paths.
        let within = quote!(.map_err(|e| e.within(#wire))?);
        match (&options.to_hub, &options.from_hub) {
            (Some(to), Some(from)) => {
                to_hub.push(quote_spanned! {span=>
                    #hub_ident: ::apiserver::runtime::conversion_result(#to(&self.#ident)) #within
                });
                from_hub.push(quote_spanned! {span=>
                    #ident: ::apiserver::runtime::conversion_result(#from(&self.#hub_ident)) #within
                });
            }
            _ => {
                to_hub.push(quote_spanned! {span=>
                    #hub_ident: ::apiserver::runtime::convert_field(&self.#ident) #within
                });
                from_hub.push(quote_spanned! {span=>
                    #ident: ::apiserver::runtime::convert_field(&self.#hub_ident) #within
                });
            }
        }
    }
    let (to_hub, from_hub) = match (&whole_to_hub, &whole_from_hub) {
        (Some(to), Some(from)) => (
            quote!(::apiserver::runtime::conversion_result(#to(self))),
            quote!(::apiserver::runtime::conversion_result(#from(self))),
        ),
        _ => (
            quote!(::std::result::Result::Ok(#hub { #(#to_hub),* })),
            quote!(::std::result::Result::Ok(#name { #(#from_hub),* })),
        ),
    };
    let convert = if own_hub {
        quote! {
            impl ::apiserver::runtime::Convert<#name> for #name {
                fn convert(&self) -> ::std::result::Result<#name, ::apiserver::runtime::ConversionError> {
                    ::std::result::Result::Ok(::std::clone::Clone::clone(self))
                }
            }
        }
    } else {
        quote! {
            impl ::apiserver::runtime::Convert<#hub> for #name {
                fn convert(&self) -> ::std::result::Result<#hub, ::apiserver::runtime::ConversionError> {
                    #to_hub
                }
            }

            impl ::apiserver::runtime::Convert<#name> for #hub {
                fn convert(&self) -> ::std::result::Result<#name, ::apiserver::runtime::ConversionError> {
                    #from_hub
                }
            }
        }
    };
    let conversions = quote! {
        #convert

        impl ::apiserver::runtime::ProtobufTags for #name {
            #[allow(clippy::needless_borrow)]
            fn protobuf_tags(
                prefix: &str,
                out: &mut ::std::vec::Vec<(::std::string::String, u32)>,
            ) {
                #[allow(unused_imports)]
                use ::apiserver::runtime::{NestedTags as _, NoNestedTags as _};
                #(#tag_fields)*
            }
        }

        impl ::apiserver::runtime::PatchMetadata for #name {
            #[allow(unused_variables, clippy::needless_borrow)]
            fn annotate_schema(schema: &mut ::apiserver::serde_json::Value) {
                #[allow(unused_imports)]
                use ::apiserver::runtime::{AnnotateWithPatchMetadata as _, AnnotateWithoutPatchMetadata as _};
                #(#struct_rules)*
                #(#patch_fields)*
            }
        }
    };
    let Some(version) = version else {
        if default.is_some() || lossless || !columns.is_empty() {
            return Err(syn::Error::new(
                Span::call_site(),
                "`default`, `lossless` and `printcolumn` need `version` (they apply to root objects)",
            ));
        }
        return Ok(conversions);
    };
    let printer_columns = (!columns.is_empty()).then(|| {
        let columns = columns.iter().map(column_tokens);
        quote! {
            const PRINTER_COLUMNS: ::std::option::Option<&'static [::apiserver::runtime::PrinterColumn]> =
                ::std::option::Option::Some(&[#(#columns),*]);
        }
    });
    let set_defaults = default.map(|f| {
        quote! {
            fn set_defaults(&mut self) -> ::std::result::Result<(), ::apiserver::runtime::ConversionError> {
                ::apiserver::runtime::conversion_result::<(), _>(#f(self))
            }
        }
    });
    let object_name = fields
        .named
        .iter()
        .any(|f| f.ident.as_ref().is_some_and(|i| i == "metadata"))
        .then(|| {
            quote! {
                fn object_name(&self) -> &str {
                    &self.metadata.name
                }
            }
        });
    Ok(quote! {
        #conversions

        impl ::apiserver::runtime::Versioned for #name {
            type Hub = #hub;
            const VERSION: &'static str = #version;
            const LOSSLESS: bool = #lossless;
            #printer_columns

            #set_defaults

            #object_name

            fn to_hub(&self) -> ::std::result::Result<#hub, ::apiserver::runtime::ConversionError> {
                ::apiserver::runtime::Convert::convert(self)
            }

            fn from_hub(hub: &#hub) -> ::std::result::Result<Self, ::apiserver::runtime::ConversionError> {
                ::apiserver::runtime::Convert::convert(hub)
            }

            fn protobuf_tags() -> ::std::vec::Vec<(::std::string::String, u32)> {
                let mut out = ::std::vec::Vec::new();
                <Self as ::apiserver::runtime::ProtobufTags>::protobuf_tags("", &mut out);
                out
            }

            fn openapi_schema() -> ::apiserver::serde_json::Value {
                let mut schema = ::apiserver::runtime::openapi_schema::<Self>();
                <Self as ::apiserver::runtime::PatchMetadata>::annotate_schema(&mut schema);
                schema
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals() {
        assert_eq!(pluralize("pizza"), "pizzas");
        assert_eq!(pluralize("topping"), "toppings");
        assert_eq!(pluralize("class"), "classes");
        assert_eq!(pluralize("policy"), "policies");
        assert_eq!(pluralize("gateway"), "gateways");
    }

    #[test]
    fn snake() {
        assert_eq!(snake_case("creationTimestamp"), "creation_timestamp");
        assert_eq!(snake_case("cost"), "cost");
    }
}
