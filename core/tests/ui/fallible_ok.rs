//! Conversions and defaults that can fail: field functions returning `Result`, whole-struct ones, a fallible
//! default, beside infallible ones; the framework puts the JSON path in front of each error.

use apiserver::meta::ObjectMeta;
use apiserver::runtime::{ConversionError, Versioned};
use apiserver::validation::{FieldError, Path};

mod hub {
    use apiserver::meta::ObjectMeta;

    #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
    #[resource(group = "example.com", kind = "Order", namespaced)]
    pub struct Order {
        pub metadata: ObjectMeta,
        pub spec: OrderSpec,
    }

    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct OrderSpec {
        pub lines: Vec<Line>,
        pub note: String,
    }

    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Line {
        pub item_quantity: i64,
        pub price: Price,
    }

    #[derive(Clone, Debug, Default, PartialEq)]
    pub struct Price {
        pub cents: i64,
    }
}

#[apiserver::served(hub = "hub::Order", version = "v1", default = "no_empty_note")]
pub struct Order {
    pub metadata: ObjectMeta,
    pub spec: OrderSpec,
}

#[apiserver::served(hub = "hub::OrderSpec")]
pub struct OrderSpec {
    pub lines: Vec<Line>,
    /// Infallible field functions still compile unchanged.
    #[versioned(to_hub = "upper", from_hub = "lower")]
    pub note: String,
}

#[apiserver::served(hub = "hub::Line")]
pub struct Line {
    #[versioned(to_hub = "parse_quantity", from_hub = "quantity_text")]
    pub item_quantity: String,
    pub price: Price,
}

/// Converted whole; its errors' paths are relative to it.
#[apiserver::served(hub = "hub::Price", to_hub = "price_to_hub", from_hub = "price_from_hub")]
pub struct Price {
    pub euros: f64,
}

fn parse_quantity(quantity: &str) -> Result<i64, ConversionError> {
    quantity
        .parse()
        .map_err(|_| ConversionError::invalid(quantity, "must be a number"))
}

fn quantity_text(quantity: &i64) -> String {
    quantity.to_string()
}

fn upper(note: &str) -> String {
    note.to_uppercase()
}

fn lower(note: &str) -> String {
    note.to_lowercase()
}

fn price_to_hub(price: &Price) -> Result<hub::Price, FieldError> {
    if price.euros < 0.0 {
        return Err(FieldError::invalid(Path::new("euros"), &price.euros, "must not be negative"));
    }
    Ok(hub::Price { cents: (price.euros * 100.0).round() as i64 })
}

fn price_from_hub(price: &hub::Price) -> Price {
    Price { euros: price.cents as f64 / 100.0 }
}

fn no_empty_note(order: &mut Order) -> Result<(), FieldError> {
    if order.spec.note.is_empty() {
        return Err(FieldError::required(Path::new("spec").child("note"), ""));
    }
    Ok(())
}

fn order(quantity: &str, euros: f64, note: &str) -> Order {
    Order {
        metadata: ObjectMeta::default(),
        spec: OrderSpec {
            lines: vec![
                Line { item_quantity: "1".into(), price: Price { euros: 1.0 } },
                Line { item_quantity: quantity.into(), price: Price { euros } },
            ],
            note: note.into(),
        },
    }
}

fn main() {
    let good = order("2", 2.5, "fast");
    let hub = good.to_hub().unwrap();
    assert_eq!(hub.spec.lines[1].item_quantity, 2);
    assert_eq!(hub.spec.lines[1].price.cents, 250);
    assert_eq!(hub.spec.note, "FAST");
    assert_eq!(Order::from_hub(&hub).unwrap(), good);

    let err = order("two", 2.5, "x").to_hub().unwrap_err();
    assert_eq!(err.to_string(), "spec.lines[1].itemQuantity: Invalid value: \"two\": must be a number");
    let err = order("2", -1.0, "x").to_hub().unwrap_err();
    assert_eq!(err.to_string(), "spec.lines[1].price.euros: Invalid value: -1: must not be negative");

    let mut empty = order("2", 1.0, "");
    assert_eq!(empty.set_defaults().unwrap_err().to_string(), "spec.note: Required value");
}
