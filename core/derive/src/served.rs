//! `#[served(...)]`: one attribute that makes a struct a served version (or a nested part of one), implying the
//! derives a wire type needs and the per-field serde and prost attributes Kubernetes' conventions decide.

use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{Fields, GenericArgument, ItemStruct, LitInt, PathArguments, Type};

/// What a field asked for in `#[served(...)]`.
#[derive(Default)]
struct FieldServed {
    omitempty: bool,
    tag: Option<u32>,
}

pub(crate) fn served(args: TokenStream2, mut item: ItemStruct) -> syn::Result<TokenStream2> {
    let Fields::Named(fields) = &mut item.fields else {
        return Err(syn::Error::new_spanned(
            &item.ident,
            "#[served] needs a struct with named fields",
        ));
    };
    for (index, field) in fields.named.iter_mut().enumerate() {
        let mut served = FieldServed::default();
        let mut kept = Vec::with_capacity(field.attrs.len());
        for attr in field.attrs.drain(..) {
            if !attr.path().is_ident("served") {
                kept.push(attr);
                continue;
            }
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("omitempty") {
                    served.omitempty = true;
                } else if meta.path.is_ident("tag") {
                    served.tag = Some(meta.value()?.parse::<LitInt>()?.base10_parse()?);
                } else {
                    return Err(
                        meta.error("unknown served field attribute; expected omitempty or tag = N")
                    );
                }
                Ok(())
            })?;
        }
        field.attrs = kept;
        let ty = &field.ty;
        if !field.attrs.iter().any(|a| a.path().is_ident("prost")) {
            let kind = prost_kind(ty);
            let tag = served
                .tag
                .unwrap_or(u32::try_from(index + 1).unwrap_or(u32::MAX))
                .to_string();
            let attr: TokenStream2 = format!("#[prost({kind}, tag = \"{tag}\")]")
                .parse()
                .map_err(|e| syn::Error::new_spanned(ty, format!("{e}")))?;
            field.attrs.push(syn::parse_quote!(#attr));
        } else if served.tag.is_some() {
            return Err(syn::Error::new_spanned(
                ty,
                "give the tag in #[prost(...)] when the field has one",
            ));
        }
        if !field.attrs.iter().any(|a| a.path().is_ident("serde")) {
            // Go's decoder leaves a missing or null field at its zero value; an Option reads null as None already.
            let null = (!is_option(ty))
                .then(|| quote!(deserialize_with = "::apiserver::meta::null_as_default",));
            let omit = served
                .omitempty
                .then(|| quote!(skip_serializing_if = "::apiserver::meta::is_default",));
            field
                .attrs
                .push(syn::parse_quote!(#[serde(default, #null #omit)]));
        } else if served.omitempty {
            return Err(syn::Error::new_spanned(
                ty,
                "omitempty is for fields without their own #[serde(...)]; write skip_serializing_if there",
            ));
        }
    }
    let renames = crate::serde_string(&item.attrs, "rename_all").is_none();
    let rename_all = renames.then(|| quote!(rename_all = "camelCase",));
    Ok(quote! {
        #[derive(
            ::core::clone::Clone,
            ::core::cmp::PartialEq,
            ::apiserver::serde::Serialize,
            ::apiserver::serde::Deserialize,
            ::apiserver::prost::Message,
            ::apiserver::schemars::JsonSchema,
            ::apiserver::Versioned,
        )]
        #[serde(crate = "::apiserver::serde", #rename_all)]
        #[schemars(crate = "::apiserver::schemars")]
        #[prost(prost_path = "::apiserver::prost")]
        #[versioned(#args)]
        #item
    })
}

/// The last path segment of a type and its generic arguments.
fn segment(ty: &Type) -> Option<(String, Vec<&Type>)> {
    let Type::Path(path) = ty else { return None };
    let last = path.path.segments.last()?;
    let args = match &last.arguments {
        PathArguments::AngleBracketed(args) => args
            .args
            .iter()
            .filter_map(|a| match a {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some((last.ident.to_string(), args))
}

fn is_option(ty: &Type) -> bool {
    segment(ty).is_some_and(|(name, _)| name == "Option")
}

/// prost's name of a scalar type, `None` for messages.
fn scalar(ty: &Type) -> Option<&'static str> {
    let (name, args) = segment(ty)?;
    Some(match name.as_str() {
        "String" => "string",
        "bool" => "bool",
        "i32" => "int32",
        "i64" => "int64",
        "u32" => "uint32",
        "u64" => "uint64",
        "f32" => "float",
        "f64" => "double",
        "Vec"
            if args
                .first()
                .and_then(|a| segment(a))
                .is_some_and(|(n, _)| n == "u8") =>
        {
            "bytes = \"vec\""
        }
        _ => return None,
    })
}

/// The `#[prost(...)]` kind of a field's type (without the tag): scalars, optional and repeated ones, maps, and
/// messages (any other type).
fn prost_kind(ty: &Type) -> String {
    if let Some(scalar) = scalar(ty) {
        return scalar.to_string();
    }
    let Some((name, args)) = segment(ty) else {
        return "message, required".to_string();
    };
    match (name.as_str(), args.as_slice()) {
        ("Option", [inner]) => match scalar(inner) {
            Some(s) => format!("{s}, optional"),
            None => "message, optional".to_string(),
        },
        ("Vec", [inner]) => match scalar(inner) {
            Some(s) => format!("{s}, repeated"),
            None => "message, repeated".to_string(),
        },
        ("BTreeMap" | "HashMap", [key, value]) => {
            let attr = if name == "BTreeMap" {
                "btree_map"
            } else {
                "map"
            };
            let key = scalar(key).unwrap_or("string");
            let value = scalar(value).unwrap_or("message");
            format!("{attr} = \"{key}, {value}\"")
        }
        _ => "message, required".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prost_kinds_follow_the_type() {
        let kind = |t: &str| prost_kind(&syn::parse_str::<Type>(t).unwrap());
        assert_eq!(kind("String"), "string");
        assert_eq!(kind("f64"), "double");
        assert_eq!(kind("Option<i32>"), "int32, optional");
        assert_eq!(kind("Vec<String>"), "string, repeated");
        assert_eq!(kind("Vec<u8>"), "bytes = \"vec\"");
        assert_eq!(kind("Vec<Topping>"), "message, repeated");
        assert_eq!(kind("Option<Spec>"), "message, optional");
        assert_eq!(kind("ObjectMeta"), "message, required");
        assert_eq!(
            kind("std::collections::BTreeMap<String, String>"),
            "btree_map = \"string, string\""
        );
        assert_eq!(
            kind("BTreeMap<String, Quantity>"),
            "btree_map = \"string, message\""
        );
    }
}
