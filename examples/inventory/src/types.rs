//! Warehouses and the items they keep, served as `v1` (whose types are the hub: what they mean) and `v1beta1`.

pub use v1::{Item, ItemSpec, ItemStatus, Warehouse, WarehouseSpec};

/// The preferred version and the hub: a quantity is an integer.
pub mod v1 {
    use apiserver::meta::{Condition, ObjectMeta};

    /// A warehouse (cluster-scoped).
    #[allow(clippy::duplicated_attributes)]
    #[apiserver::served(hub = "Self", version = "v1")]
    #[derive(apiserver::Hub)]
    #[resource(
        group = "inventory.example.com",
        kind = "Warehouse",
        shortname = "wh",
        printcolumn(name = "Location", type_ = "string", json_path = ".spec.location"),
        printcolumn(name = "Capacity", type_ = "integer", json_path = ".spec.capacity"),
        versions(Self)
    )]
    pub struct Warehouse {
        pub metadata: ObjectMeta,
        pub spec: WarehouseSpec,
    }

    #[apiserver::served(hub = "Self")]
    pub struct WarehouseSpec {
        pub location: String,
        /// How many units the warehouse holds.
        #[versioned(validation(rule = "self > 0", message = "capacity must be positive"))]
        pub capacity: i64,
    }

    /// An item of stock, kept in a warehouse.
    #[allow(clippy::duplicated_attributes)]
    #[apiserver::served(hub = "Self", version = "v1")]
    #[derive(apiserver::Hub)]
    #[resource(
        group = "inventory.example.com",
        kind = "Item",
        namespaced,
        status,
        printcolumn(name = "SKU", type_ = "string", json_path = ".spec.sku"),
        printcolumn(name = "Quantity", type_ = "integer", json_path = ".spec.quantity"),
        printcolumn(name = "Warehouse", type_ = "string", json_path = ".spec.warehouse"),
        // v1 preferred, v1beta1 served too and the storage version.
        versions(Self, super::v1beta1::Item),
        storage_version(super::v1beta1::Item)
    )]
    pub struct Item {
        pub metadata: ObjectMeta,
        pub spec: ItemSpec,
        pub status: ItemStatus,
    }

    #[apiserver::served(hub = "Self")]
    pub struct ItemSpec {
        /// Stock keeping unit: upper-case letters, digits and dashes.
        #[versioned(validation(rule = "self.matches('^[A-Z0-9-]+$')", message = "must match ^[A-Z0-9-]+$"))]
        pub sku: String,
        /// How many units; at least 0.
        #[versioned(validation(rule = "self >= 0", message = "must be greater than or equal to 0"))]
        pub quantity: i64,
        /// The name of a Warehouse; cannot change once set.
        #[versioned(validation(rule = "self != ''", message = "the name of a Warehouse is required"))]
        #[versioned(validation(rule = "self == oldSelf", message = "warehouse is immutable"))]
        pub warehouse: String,
    }

    #[apiserver::served(hub = "Self")]
    pub struct ItemStatus {
        /// Units reserved in the warehouse.
        #[served(omitempty)]
        pub reserved: i64,
        #[served(omitempty)]
        pub conditions: Vec<Condition>,
    }
}

/// The storage version: a quantity is text such as "12 units".
pub mod v1beta1 {
    use apiserver::meta::ObjectMeta;
    use apiserver::runtime::ConversionError;

    #[allow(clippy::duplicated_attributes)]
    #[apiserver::served(
        hub = "super::Item",
        version = "v1beta1",
        printcolumn(name = "SKU", type_ = "string", json_path = ".spec.sku"),
        printcolumn(name = "Quantity", type_ = "string", json_path = ".spec.quantity"),
        printcolumn(name = "Warehouse", type_ = "string", json_path = ".spec.warehouse")
    )]
    pub struct Item {
        pub metadata: ObjectMeta,
        pub spec: ItemSpec,
        pub status: super::ItemStatus,
    }

    #[apiserver::served(hub = "super::ItemSpec")]
    pub struct ItemSpec {
        pub sku: String,
        /// How many units, as "12 units".
        #[versioned(to_hub = "parse_units", from_hub = "format_units")]
        pub quantity: String,
        pub warehouse: String,
    }

    /// "12 units", "1 unit" or "12" → 12; anything else is refused, naming the field and the text.
    fn parse_units(text: &str) -> Result<i64, ConversionError> {
        let number = text.trim().trim_end_matches("units").trim_end_matches("unit").trim();
        number.parse().map_err(|_| ConversionError::invalid(text, "must be a number of units, e.g. \"12 units\""))
    }

    fn format_units(quantity: &i64) -> String {
        match quantity {
            1 => "1 unit".to_string(),
            q => format!("{q} units"),
        }
    }
}
