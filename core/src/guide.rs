//! The guide: from an empty crate to a tested server, step by step.
//!
//! This module holds no code, only this page (as clap's `_tutorial`). It builds `inventory-apiserver`, a server of
//! warehouses and the items kept in them (`inventory.example.com`), through every part a real server has:
//!
//! 1. [An empty crate](#1-an-empty-crate)
//! 2. [Hub types](#2-hub-types): what objects mean, with a status
//! 3. [Served versions](#3-served-versions): the wire shapes, a conversion, a CEL rule
//! 4. [The codec](#4-the-codec): preferred and storage versions
//! 5. [Validation](#5-validation): a strategy, field errors, CEL rules
//! 6. [Status](#6-status): the status subresource
//! 7. [Admission](#7-admission): a plugin that reads other objects
//! 8. [A controller](#8-a-controller): keeping status up to date
//! 9. [The server and its backend](#9-the-server-and-its-backend)
//! 10. [Tests](#10-tests): the round-trip property and kubectl against the server
//!
//! Every code block below compiles as a doctest (blocks that need another crate say so and why they are not
//! compiled). `examples/library` is the smallest server (one kind, two versions, a plugin), `examples/wardle` is
//! upstream's sample-apiserver and `examples/pizza` uses everything; each has a kubectl test. Running and
//! operating a server, and choosing a backend, are in the repository's `docs/`.
//!
//! # 1. An empty crate
//!
//! A server is a crate that depends on `apiserver` and on the backend crates it offers; everything else it needs
//! (serde, prost, schemars, clap, tokio, tracing, async-trait) is re-exported, so it needs no other dependency:
//!
//! ```toml
//! [package]
//! name = "inventory-apiserver"
//! version = "0.1.0"
//! edition = "2024"
//!
//! # The crates are not on crates.io yet: path (or git) dependencies on a checkout of this repository.
//! [dependencies]
//! apiserver = { path = "../apiserver/core" }
//! # SQLite only: an embedded, durable store (see 9. for the others)
//! apiserver-storage-sql = { path = "../apiserver/storage-sql", default-features = false, features = ["sqlite"] }
//!
//! [dev-dependencies]
//! apiserver = { path = "../apiserver/core", features = ["testing"] }   # round_trip_test!
//! tempfile = "3"
//!
//! # Line tables are enough for backtraces and keep debug binaries and target directories small.
//! [profile.dev]
//! debug = "line-tables-only"
//! ```
//!
//! The framework's cargo features are all on by default, so every flag of upstream's generic apiserver works:
//! `cluster` (kube-rs and k8s-openapi: delegated authentication and authorization behind kube-apiserver,
//! `--kubeconfig`, NamespaceLifecycle, ResourceQuota, admission webhooks and policies, leader election on a Lease,
//! the audit webhook; turns `cel` on), `cel` (validation rules) and `otel` (trace export). A standalone server
//! needs none of them: `apiserver = { ..., default-features = false }` compiles about 100 fewer crates (add
//! `features = ["cel"]` for types with rules). A flag of a feature the binary was built without is refused at
//! start, naming the feature. Outside this workspace, also keep dependencies' debug info out of debug builds:
//!
//! ```toml
//! [profile.dev.package."*"]
//! debug = false
//! ```
//!
//! `src/main.rs` is one line: [`main!`](crate::main) parses the command line into the options `start` takes,
//! sets up logs and traces, prints the banner and serves until SIGINT or SIGTERM (`start` is in 9.):
//!
//! ```ignore
//! // ignore: names the crate of this guide, which is not a dependency of the doctests.
//! apiserver::main!(inventory_apiserver::start);
//! ```
//!
//! # 2. Hub types
//!
//! A **hub** type says what an object means, in plain Rust, whatever version a client speaks: the server
//! converts every request into it and works on it (strategies, admission, controllers, storage goes through it).
//! `#[derive(Hub)]` gives it its identity: group, kind, scope (`namespaced`, else cluster-scoped), a `status`
//! subresource, printer columns for `kubectl get`, short names. The plural (`items`) and singular come from the
//! kind. Nested parts of the hub are plain structs.
//!
//! ```
//! use apiserver::meta::ObjectMeta;
//!
//! /// A warehouse (cluster-scoped).
//! #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! #[resource(
//!     group = "inventory.example.com",
//!     kind = "Warehouse",
//!     shortname = "wh",
//!     printcolumn(name = "Capacity", type_ = "integer", json_path = ".spec.capacity")
//! )]
//! pub struct Warehouse {
//!     pub metadata: ObjectMeta,
//!     pub spec: WarehouseSpec,
//! }
//!
//! #[derive(Clone, Debug, Default, PartialEq)]
//! pub struct WarehouseSpec {
//!     pub capacity: i64,
//! }
//!
//! /// An item of stock, kept in a warehouse; its status says how many units are reserved there.
//! #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! #[resource(
//!     group = "inventory.example.com",
//!     kind = "Item",
//!     namespaced,
//!     status,
//!     printcolumn(name = "Warehouse", type_ = "string", json_path = ".spec.warehouse"),
//!     printcolumn(name = "Reserved", type_ = "integer", json_path = ".status.reserved")
//! )]
//! pub struct Item {
//!     pub metadata: ObjectMeta,
//!     pub spec: ItemSpec,
//!     pub status: ItemStatus,
//! }
//!
//! #[derive(Clone, Debug, Default, PartialEq)]
//! pub struct ItemSpec {
//!     pub quantity: i64,
//!     /// The name of a Warehouse.
//!     pub warehouse: String,
//!     pub tags: Vec<String>,
//! }
//!
//! #[derive(Clone, Debug, Default, PartialEq)]
//! pub struct ItemStatus {
//!     pub reserved: i64,
//!     /// `Reserved`, `OverCapacity` or `NoWarehouse`.
//!     pub phase: String,
//! }
//! # fn main() {}
//! ```
//!
//! Columns declared on the hub are used by every served version that declares none; a version whose fields
//! differ declares its own (`#[apiserver::served(..., printcolumn(...))]`), as a CRD's per-version
//! `additionalPrinterColumns`. Every column's `json_path` is checked against its version's schema when the server
//! starts: a misspelt field stops the server instead of showing an empty column.
//!
//! For conditions, use [`Condition`](crate::meta::Condition) (upstream's `metav1.Condition`, with its schema,
//! descriptions and list-map merge by `type`) in the hub and every version (`conditions: Vec<Condition>`), and
//! [`set_status_condition`](crate::meta::set_status_condition) from a controller: it keeps `lastTransitionTime`
//! while the status does not change, as apimachinery's `meta.SetStatusCondition`. `examples/wardle`'s
//! `flunder-ready` controller shows the pattern.
//!
//! # 3. Served versions
//!
//! A **served version** is a wire shape clients see: one struct per version and kind, marked with
//! [`served`](crate::served), which implies serde with Kubernetes' rules (camelCase, Go's `null` and omitempty
//! rules), prost (types and tags from the declaration), the OpenAPI schema (descriptions from doc comments, for
//! `kubectl explain`) and the conversion to and from the hub, field by field. A field with the hub's name and type
//! converts itself; `rename` maps a field to a hub field of another name; a field whose type differs names its two
//! conversion functions, and without them it is a compile error at that field.
//!
//! Here `v1` is the current shape and `v1beta1` an older one that wrote the tags as one comma-separated string
//! and called the quantity `count`. CEL validation rules go on a version's fields as a CRD's
//! `x-kubernetes-validations` (see 5.).
//!
//! ```
//! # use apiserver::meta::ObjectMeta;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Warehouse")]
//! # pub struct Warehouse { pub metadata: ObjectMeta, pub spec: WarehouseSpec }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct WarehouseSpec { pub capacity: i64 }
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Item", namespaced, status)]
//! # pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemSpec { pub quantity: i64, pub warehouse: String, pub tags: Vec<String> }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemStatus { pub reserved: i64, pub phase: String }
//! pub mod v1 {
//!     use apiserver::meta::ObjectMeta;
//!
//!     #[apiserver::served(hub = "crate::Warehouse", version = "v1")]
//!     pub struct Warehouse {
//!         pub metadata: ObjectMeta,
//!         pub spec: WarehouseSpec,
//!     }
//!
//!     #[apiserver::served(hub = "crate::WarehouseSpec")]
//!     pub struct WarehouseSpec {
//!         /// How many units the warehouse holds.
//!         #[versioned(validation(rule = "self > 0", message = "capacity must be positive"))]
//!         pub capacity: i64,
//!     }
//!
//!     #[apiserver::served(hub = "crate::Item", version = "v1")]
//!     pub struct Item {
//!         pub metadata: ObjectMeta,
//!         pub spec: ItemSpec,
//!         pub status: ItemStatus,
//!     }
//!
//!     #[apiserver::served(hub = "crate::ItemSpec")]
//!     pub struct ItemSpec {
//!         /// How many units; at least 0.
//!         pub quantity: i64,
//!         /// The name of a Warehouse; it cannot change (a transition rule: checked on updates only).
//!         #[versioned(validation(rule = "self == oldSelf", message = "warehouse is immutable"))]
//!         pub warehouse: String,
//!         pub tags: Vec<String>,
//!     }
//!
//!     #[apiserver::served(hub = "crate::ItemStatus")]
//!     pub struct ItemStatus {
//!         /// Units reserved in the warehouse.
//!         #[served(omitempty)] // left out when zero, as Go's `json:",omitempty"`
//!         pub reserved: i64,
//!         #[served(omitempty)]
//!         pub phase: String,
//!     }
//! }
//!
//! pub mod v1beta1 {
//!     use apiserver::meta::ObjectMeta;
//!
//!     #[apiserver::served(hub = "crate::Item", version = "v1beta1")]
//!     pub struct Item {
//!         pub metadata: ObjectMeta,
//!         pub spec: ItemSpec,
//!         pub status: crate::v1::ItemStatus, // the same shape in both versions
//!     }
//!
//!     #[apiserver::served(hub = "crate::ItemSpec")]
//!     pub struct ItemSpec {
//!         #[versioned(rename = "quantity")]
//!         pub count: i64,
//!         pub warehouse: String,
//!         /// The tags, separated by commas.
//!         #[versioned(to_hub = "split_tags", from_hub = "join_tags")]
//!         pub tags: String,
//!     }
//!
//!     fn split_tags(tags: &str) -> Vec<String> {
//!         tags.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect()
//!     }
//!
//!     fn join_tags(tags: &[String]) -> String {
//!         tags.join(",")
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! A conversion function may refuse a value: return `Result<T, E>` where `E` converts into
//! [`ConversionError`](crate::runtime::ConversionError) (e.g. `ConversionError::invalid(value, "must be ...")`, a
//! `FieldError` or an `ErrorList`). The framework prefixes the field's JSON path, and a request body that does not
//! convert is a 422 as upstream's (`spec.copies: Invalid value: "a dozen": must be a number of copies`), through
//! every media type, patches and apply; nothing is written. `examples/library`'s v1 `copies` does this.
//!
//! A served version may also declare `default = "path::fn"` (its defaults, run on decoded input before
//! conversion), `lossless` (a version that cannot say all the hub says keeps the rest in an annotation, as
//! `examples/library`'s v1 does), patch strategies and list types for strategic merge and server-side apply
//! (`#[versioned(patch_strategy = "merge", patch_merge_key = "name", list_type = "map", list_map_keys =
//! "name")]`), and a whole-struct conversion (`to_hub`/`from_hub` on the struct). [`Versioned`](crate::Versioned)
//! documents each attribute.
//!
//! # 4. The codec
//!
//! A [`ResourceCodec`](crate::runtime::ResourceCodec) lists the versions a kind is served in. The first one added
//! is the **preferred** version (what discovery lists first and kubectl uses); `.storage_version(...)` names the
//! one objects are stored in (default: the preferred one). Storing the older `v1beta1` lets a server that
//! still has `v1beta1` objects on disk add `v1` without migrating them; `--storage-version` changes it later.
//!
//! ```
//! # use apiserver::meta::ObjectMeta;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Item", namespaced, status)]
//! # pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemSpec { pub quantity: i64 }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemStatus { pub reserved: i64 }
//! # mod v1 {
//! #     use apiserver::meta::ObjectMeta;
//! #     #[apiserver::served(hub = "crate::Item", version = "v1")]
//! #     pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
//! #     #[apiserver::served(hub = "crate::ItemSpec")]
//! #     pub struct ItemSpec { pub quantity: i64 }
//! #     #[apiserver::served(hub = "crate::ItemStatus")]
//! #     pub struct ItemStatus { pub reserved: i64 }
//! # }
//! # mod v1beta1 {
//! #     use apiserver::meta::ObjectMeta;
//! #     #[apiserver::served(hub = "crate::Item", version = "v1beta1")]
//! #     pub struct Item { pub metadata: ObjectMeta, pub spec: crate::v1::ItemSpec, pub status: crate::v1::ItemStatus }
//! # }
//! use apiserver::runtime::ResourceCodec;
//!
//! /// Items: v1 preferred, v1beta1 served too and the storage version.
//! pub fn item_codec() -> ResourceCodec<Item> {
//!     ResourceCodec::new()
//!         .version::<v1::Item>()
//!         .version::<v1beta1::Item>()
//!         .storage_version::<v1beta1::Item>()
//! }
//! # fn main() {
//! #     let codec = item_codec();
//! #     assert_eq!(codec.versions().collect::<Vec<_>>(), ["v1", "v1beta1"]);
//! # }
//! ```
//!
//! The storage version is named by its type, so the compiler checks that it is a version of this kind
//! (`--storage-version items.inventory.example.com=v1` still overrides it at start, for a storage migration).
//!
//! # 5. Validation
//!
//! A [`Strategy`](crate::registry::Strategy) holds a type's rules, as upstream's `rest.RESTCreateStrategy` and
//! friends: `prepare_for_create` / `prepare_for_update` (clear or derive fields), `validate` (creates),
//! `validate_update` (updates; by default the same as `validate`, so an update cannot make what a create would
//! refuse), `validate_status_update`, warnings, and deletion rules. Validation returns
//! [`FieldError`](crate::validation::FieldError)s with paths; the store answers them as a 422 `Invalid` whose
//! causes name each field, in upstream's words (`spec.quantity: Invalid value: -1: must be greater than or equal
//! to 0`), whatever version the client wrote.
//!
//! ```
//! # use apiserver::meta::ObjectMeta;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Item", namespaced, status)]
//! # pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemSpec { pub quantity: i64, pub warehouse: String, pub tags: Vec<String> }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemStatus { pub reserved: i64, pub phase: String }
//! use apiserver::registry::Strategy;
//! use apiserver::validation::{ErrorList, FieldError, Path};
//!
//! pub struct ItemStrategy;
//!
//! impl Strategy<Item> for ItemStrategy {
//!     fn validate(&self, item: &Item) -> ErrorList {
//!         let spec = Path::new("spec");
//!         let mut errors = ErrorList::new();
//!         if item.spec.quantity < 0 {
//!             let detail = "must be greater than or equal to 0";
//!             errors.push(FieldError::invalid(spec.child("quantity"), &item.spec.quantity, detail));
//!         }
//!         if item.spec.warehouse.is_empty() {
//!             errors.push(FieldError::required(spec.child("warehouse"), "the name of a Warehouse"));
//!         }
//!         for (i, tag) in item.spec.tags.iter().enumerate() {
//!             // v1beta1 writes the tags as one string separated by commas: a comma would split the tag.
//!             if tag.is_empty() || tag.contains(',') {
//!                 let path = spec.child("tags").index(i);
//!                 errors.push(FieldError::invalid(path, tag, "must be non-empty, without commas"));
//!             }
//!         }
//!         errors
//!     }
//! }
//!
//! /// Warehouses have no rules beyond their CEL rule (3.) and the framework's.
//! pub struct WarehouseStrategy;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Warehouse")]
//! # pub struct Warehouse { pub metadata: ObjectMeta }
//! impl Strategy<Warehouse> for WarehouseStrategy {}
//! # fn main() {
//! #     let mut item = Item::default();
//! #     item.spec.quantity = -1;
//! #     item.spec.tags = vec!["a,b".into()];
//! #     let errors: Vec<String> = ItemStrategy.validate(&item).iter().map(|e| e.to_string()).collect();
//! #     assert_eq!(errors.len(), 3, "{errors:?}");
//! #     assert!(errors[0].starts_with("spec.quantity: Invalid value: -1"), "{errors:?}");
//! #     assert!(errors[2].starts_with("spec.tags[0]: Invalid value: \"a,b\""), "{errors:?}");
//! # }
//! ```
//!
//! The CEL rules of 3. run after the strategy, on every create and update, on the object as each served version
//! writes it, with upstream's texts (`spec.capacity: Invalid value: "integer": capacity must be positive`),
//! `message_expression`, `reason`, `field_path`, cost limits and ratcheting (a value an update leaves unchanged is
//! not checked again). A rule that does not compile, or is estimated above upstream's cost limit, stops the
//! server at start with its schema path. Transition rules (`oldSelf`) run on updates only.
//!
//! # 6. Status
//!
//! `#[resource(status)]` gives a kind a `status` subresource, as a CRD's `subresources.status`: a create clears
//! `status`, writes to the main resource keep the stored status, and `/status` (GET, PUT, PATCH; `kubectl get
//! --subresource=status`, `kubectl patch --subresource=status`) writes only status, taking spec and metadata from
//! the stored object. So clients own the spec and the controller (8.) owns the status, and each can be authorized
//! apart (`items` and `items/status`). `metadata.generation` is bumped when anything but metadata and status
//! changes, so a status can say which generation it describes. `Strategy::validate_status_update` validates
//! status writes; `Store::status()` is the store of the subresource for code in the server.
//!
//! A `scale` subresource is declared the same way (`#[resource(scale(spec_replicas = ".spec.replicas",
//! status_replicas = ".status.replicas", label_selector = ".status.selector"))]`, see `examples/pizza`'s `Oven`).
//!
//! A status with conditions (`conditions: Vec<Condition>`, see 2.) makes `kubectl wait --for=condition=Ready
//! item/x` work: the controller of 8. would call `set_status_condition` with a `Ready` condition instead of
//! writing `phase`.
//!
//! # 7. Admission
//!
//! Admission plugins see every write after its decoding and before storage, as upstream's. Most validating plugins
//! are about one kind: implement [`KindCheck`](crate::admission::KindCheck) for its hub type. A plugin that reads
//! other objects gets a [`Lister`](crate::admission::Lister) over the server's own watch cache from the
//! initializer (no network round trip) and says it is `ready` once the lister has synced. Refusals are
//! upstream's 403 (`items.inventory.example.com "widget" is forbidden: ...`). Mutating plugins and plugins about
//! several kinds implement [`Plugin`](crate::admission::Plugin). The server registers each by name (9.), so
//! `--enable-admission-plugins` and `--disable-admission-plugins` turn it on and off; behind a core cluster the
//! cluster's webhooks and admission policies run too, before it.
//!
//! ```
//! # use apiserver::meta::ObjectMeta;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Warehouse")]
//! # pub struct Warehouse { pub metadata: ObjectMeta }
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Item", namespaced)]
//! # pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemSpec { pub warehouse: String }
//! use apiserver::admission::{Attributes, KindCheck, Lister, Operation};
//! use apiserver::async_trait;
//! use apiserver::registry::ApiError;
//!
//! /// The plugin's name in `--enable-admission-plugins` / `--disable-admission-plugins`.
//! pub const WAREHOUSE_EXISTS: &str = "WarehouseExists";
//!
//! /// Refuses items naming a warehouse that does not exist (the CEL rule keeps the name from changing later).
//! pub struct WarehouseExists(pub Lister<Warehouse>);
//!
//! #[async_trait]
//! impl KindCheck<Item> for WarehouseExists {
//!     fn operations(&self) -> &'static [Operation] {
//!         &[Operation::Create]
//!     }
//!
//!     async fn ready(&self) -> bool {
//!         self.0.has_synced().await
//!     }
//!
//!     // `old` is the stored item on update (upstream's `GetOldObject()`), `None` on create.
//!     async fn check(&self, attributes: &Attributes, item: &Item, _old: Option<&Item>) -> Result<(), ApiError> {
//!         match self.0.get(None, &item.spec.warehouse).await? {
//!             Some(_) => Ok(()),
//!             None => Err(attributes.forbidden(format!("warehouse {:?} does not exist", item.spec.warehouse))),
//!         }
//!     }
//! }
//! # fn main() {}
//! ```
//!
//! # 8. A controller
//!
//! In-process controllers are client-go's informers and work queue without the network in between:
//! [`Controller`](crate::controller::Controller) watches the stores it is given and queues the keys of objects
//! that changed (`owns`: the object's own key; `watches`: keys a function derives from a related object, here the
//! items of a warehouse whose capacity changed); a [`Reconciler`](crate::controller::Reconciler) brings one object
//! to the state it should have, and is retried with backoff when it fails. It reads with
//! [`Store::find`](crate::registry::Store::find) (`None`: the object is gone, nothing to do) and writes through the
//! same [`Store`](crate::registry::Store) the API serves, here its status subresource, with
//! [`modify`](crate::registry::Store::modify): read, change, write with optimistic concurrency, again on the object
//! as it is after a conflict; nothing is written when the change changes nothing, and `None` comes back when the
//! object was deleted meanwhile. (For admission or a dry run, [`Store::update`](crate::registry::Store::update)
//! takes an [`UpdatedObject`](crate::registry::UpdatedObject), which a closure
//! `|current: Option<&Item>| -> Result<Item, ApiError>` is, and [`WriteOptions`](crate::registry::WriteOptions).)
//! Controllers are registered by name (9.): `--controllers=*,-item-reservation` turns one off, and among replicas
//! only the elected leader runs them.
//!
//! ```
//! # use apiserver::meta::ObjectMeta;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Warehouse")]
//! # pub struct Warehouse { pub metadata: ObjectMeta, pub spec: WarehouseSpec }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct WarehouseSpec { pub capacity: i64 }
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Item", namespaced, status)]
//! # pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemSpec { pub quantity: i64, pub warehouse: String, pub tags: Vec<String> }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemStatus { pub reserved: i64, pub phase: String }
//! use apiserver::controller::{Controller, ObjectKey, Reconciler};
//! use apiserver::registry::{ApiError, ListRequest, Store};
//! use apiserver::server::ShutdownSignal;
//!
//! /// The controller's name in `--controllers`, in logs and in its post-start hook.
//! pub const RESERVATION_CONTROLLER: &str = "item-reservation";
//!
//! /// Runs until the server shuts down or this replica loses the leader election.
//! pub async fn run(items: Store<Item>, warehouses: Store<Warehouse>, shutdown: ShutdownSignal) {
//!     let all_items = items.clone();
//!     Controller::new(RESERVATION_CONTROLLER)
//!         .owns(items.clone())
//!         .watches(warehouses.clone(), move |warehouse: Warehouse| {
//!             let items = all_items.clone();
//!             async move { items_in(&items, &warehouse.metadata.name).await }
//!         })
//!         .run(Reservations { items, warehouses }, shutdown)
//!         .await;
//! }
//!
//! /// The keys of the items kept in a warehouse, from the watch cache (`resourceVersion: 0`).
//! async fn items_in(items: &Store<Item>, warehouse: &str) -> Vec<ObjectKey> {
//!     let cached = ListRequest { resource_version: Some(0), ..ListRequest::default() };
//!     match items.list(None, &cached).await {
//!         Ok(list) => list.items.iter().filter(|i| i.spec.warehouse == warehouse).map(ObjectKey::of).collect(),
//!         Err(error) => {
//!             apiserver::tracing::warn!(%error, "listing the items of a warehouse failed");
//!             Vec::new()
//!         }
//!     }
//! }
//!
//! struct Reservations {
//!     items: Store<Item>,
//!     warehouses: Store<Warehouse>,
//! }
//!
//! impl Reconciler for Reservations {
//!     async fn reconcile(&self, key: &ObjectKey) -> Result<(), ApiError> {
//!         let namespace = key.namespace.as_deref();
//!         let Some(item) = self.items.find(namespace, &key.name).await? else {
//!             return Ok(()); // deleted since: nothing to do
//!         };
//!         let capacity = self.warehouses.find(None, &item.spec.warehouse).await?.map(|w| w.spec.capacity);
//!         // computed on the item as it is when written (again after a conflict)
//!         self.items.status().modify(namespace, &key.name, |item| item.status = desired(item, capacity)).await?;
//!         Ok(())
//!     }
//! }
//!
//! /// The status an item should have, given its warehouse's capacity (`None`: no such warehouse).
//! fn desired(item: &Item, capacity: Option<i64>) -> ItemStatus {
//!     let (reserved, phase) = match capacity {
//!         None => (0, "NoWarehouse"),
//!         Some(c) if c < item.spec.quantity => (c, "OverCapacity"),
//!         Some(_) => (item.spec.quantity, "Reserved"),
//!     };
//!     ItemStatus { reserved, phase: phase.to_string() }
//! }
//! # fn main() {}
//! ```
//!
//! Errors are matched with predicates as apimachinery's `errors.IsNotFound`: `is_not_found`, `is_conflict`,
//! `is_already_exists`, `is_invalid`, ... on [`ApiError`](crate::registry::ApiError).
//!
//! # 9. The server and its backend
//!
//! [`App`](crate::app::App) assembles a server as upstream's `RecommendedOptions` → `Config` → `Complete` →
//! `Run`: `App::new` takes the framework's command line, `.backend(...)` adds the backends the binary offers (the
//! first is the default; memory is always there, for tests), `open` opens the one `--storage-backend` names, and
//! the [`Assembly`](crate::app::Assembly) takes the stores (served in the order added), admission plugins and
//! controllers. `bind` adds discovery, OpenAPI, authentication and authorization (standalone, or delegated to the
//! cluster when run behind kube-apiserver), health, metrics and audit, binds the port and, standalone, writes a
//! kubeconfig with an admin token: `kubectl --kubeconfig <data-dir>/kubeconfig get items` works at once.
//!
//! ```no_run
//! # use apiserver::meta::ObjectMeta;
//! # use apiserver::registry::Strategy;
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Warehouse")]
//! # pub struct Warehouse { pub metadata: ObjectMeta }
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Item", namespaced)]
//! # pub struct Item { pub metadata: ObjectMeta }
//! # mod v1 {
//! #     use apiserver::meta::ObjectMeta;
//! #     #[apiserver::served(hub = "crate::Warehouse", version = "v1")]
//! #     pub struct Warehouse { pub metadata: ObjectMeta }
//! #     #[apiserver::served(hub = "crate::Item", version = "v1")]
//! #     pub struct Item { pub metadata: ObjectMeta }
//! # }
//! # pub fn item_codec() -> ResourceCodec<Item> { ResourceCodec::new().version::<v1::Item>() }
//! # pub struct ItemStrategy;
//! # impl Strategy<Item> for ItemStrategy {}
//! # pub struct WarehouseStrategy;
//! # impl Strategy<Warehouse> for WarehouseStrategy {}
//! # pub const WAREHOUSE_EXISTS: &str = "WarehouseExists";
//! # pub struct WarehouseExists(pub apiserver::admission::Lister<Warehouse>);
//! # #[apiserver::async_trait]
//! # impl apiserver::admission::KindCheck<Item> for WarehouseExists {
//! #     async fn check(&self, _: &apiserver::admission::Attributes, _: &Item, _: Option<&Item>) -> Result<(), apiserver::registry::ApiError> { Ok(()) }
//! # }
//! # mod controller {
//! #     pub const RESERVATION_CONTROLLER: &str = "item-reservation";
//! #     pub async fn run(
//! #         _: apiserver::registry::Store<super::Item>,
//! #         _: apiserver::registry::Store<super::Warehouse>,
//! #         _: apiserver::server::ShutdownSignal,
//! #     ) {}
//! # }
//! use apiserver::app::{App, StartError, Started};
//! use apiserver::runtime::ResourceCodec;
//!
//! pub fn warehouse_codec() -> ResourceCodec<Warehouse> {
//!     ResourceCodec::new().version::<v1::Warehouse>()
//! }
//!
//! /// The command line: the framework's flags (`--help` lists them), and those of the backends (here memory only,
//! /// which has none).
//! pub type Options = apiserver::app::Options;
//!
//! /// Assembles and binds the server; `main!` runs it (tests run it themselves, see 10.).
//! pub async fn start(options: Options) -> Result<Started, StartError> {
//!     let mut app = App::new("inventory-apiserver", options.server)
//!         .version(apiserver::version_info!())
//!         .open()
//!         .await?;
//!     let warehouses = app.store(warehouse_codec(), WarehouseStrategy)?;
//!     let items = app.store(item_codec(), ItemStrategy)?;
//!     // Enabled by default; its lister reads warehouses from the watch cache.
//!     app.kind_check(WAREHOUSE_EXISTS, true, |init| Ok(WarehouseExists(init.listers.get()?)));
//!     // Run by the leader only, and again each time it is elected: the closure may be called more than once.
//!     app.controller(controller::RESERVATION_CONTROLLER, move |shutdown| {
//!         controller::run(items.clone(), warehouses.clone(), shutdown)
//!     });
//!     app.bind().await
//! }
//! # fn main() {}
//! ```
//!
//! **Choosing a backend.** A backend crate brings its flags (a `clap::Args` struct) and implements
//! [`StorageBackend`](crate::app::StorageBackend) on them; the server puts them in its `Options` and hands them to
//! `.backend(...)`:
//!
//! ```ignore
//! // ignore: apiserver-storage-sql depends on this crate, so it cannot be a dependency of its doctests.
//! use apiserver_storage_sql::SqlStorageOptions;
//!
//! /// The framework's flags and SQLite's (`--storage-url`, `--storage-sqlite-synchronous`, ...).
//! pub type Options = apiserver::app::Options<SqlStorageOptions>;
//!
//! pub async fn start(options: Options) -> Result<Started, StartError> {
//!     let mut app = App::new("inventory-apiserver", options.server)
//!         .version(apiserver::version_info!())
//!         .backend(options.backend) // SQLite in <data-dir>/state.db, the default; memory with --storage-backend memory
//!         .open()
//!         .await?;
//!     // ... as above
//! #   app.bind().await
//! }
//! ```
//!
//! - **SQLite** (`apiserver-storage-sql`, feature `sqlite`): embedded and durable (every acknowledged write is
//!   synced), no service to run, compiles in seconds; about 2,000 creates/s through the server on 2 cores. The
//!   default choice for one replica.
//! - **RocksDB** (`apiserver-storage-rocks`, `RocksOptions`): embedded, about 6× SQLite's writes, for write-heavy
//!   installations; its C++ takes about 20 minutes to compile the first time.
//! - **Postgres** (`apiserver-storage-sql`, feature `postgres`) or **etcd** (`apiserver-storage-etcd`,
//!   `EtcdOptions`): for several replicas of the server, which then elect a leader for the controllers.
//! - **memory**: always there (`--storage-backend memory`), for tests; nothing survives the process.
//!
//! A server offering several backends flattens each one's options into its own `clap::Parser` struct, beside
//! [`RecommendedOptions`](crate::app::RecommendedOptions), as `examples/pizza/src/server.rs` does. The numbers
//! behind this choice are in the repository's `docs/backends.md`; writing a backend is in
//! [`storage`](crate::storage) and the crate's top page.
//!
//! # 10. Tests
//!
//! Two tests every server should have, in its `tests/` directory. The first is one line per kind:
//! `apiserver::round_trip_test!` (feature `testing`) generates objects from the preferred version's
//! OpenAPI schema and checks that each survives hub → every served version and media type → hub. Here it proves
//! that v1beta1's comma-separated tags lose nothing, for the items validation accepts (an invalid item is never
//! stored, so it need not survive):
//!
//! ```
//! # use apiserver::meta::ObjectMeta;
//! # use apiserver::registry::Strategy;
//! # use apiserver::runtime::ResourceCodec;
//! # use apiserver::validation::{ErrorList, FieldError, Path};
//! # #[derive(Clone, Debug, Default, PartialEq, apiserver::Hub)]
//! # #[resource(group = "inventory.example.com", kind = "Item", namespaced, status)]
//! # pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemSpec { pub quantity: i64, pub warehouse: String, pub tags: Vec<String> }
//! # #[derive(Clone, Debug, Default, PartialEq)]
//! # pub struct ItemStatus { pub reserved: i64, pub phase: String }
//! # mod v1 {
//! #     use apiserver::meta::ObjectMeta;
//! #     #[apiserver::served(hub = "crate::Item", version = "v1")]
//! #     pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: ItemStatus }
//! #     #[apiserver::served(hub = "crate::ItemSpec")]
//! #     pub struct ItemSpec { pub quantity: i64, pub warehouse: String, pub tags: Vec<String> }
//! #     #[apiserver::served(hub = "crate::ItemStatus")]
//! #     pub struct ItemStatus { #[served(omitempty)] pub reserved: i64, #[served(omitempty)] pub phase: String }
//! # }
//! # mod v1beta1 {
//! #     use apiserver::meta::ObjectMeta;
//! #     #[apiserver::served(hub = "crate::Item", version = "v1beta1")]
//! #     pub struct Item { pub metadata: ObjectMeta, pub spec: ItemSpec, pub status: crate::v1::ItemStatus }
//! #     #[apiserver::served(hub = "crate::ItemSpec")]
//! #     pub struct ItemSpec {
//! #         #[versioned(rename = "quantity")] pub count: i64,
//! #         pub warehouse: String,
//! #         #[versioned(to_hub = "split_tags", from_hub = "join_tags")] pub tags: String,
//! #     }
//! #     fn split_tags(tags: &str) -> Vec<String> {
//! #         tags.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect()
//! #     }
//! #     fn join_tags(tags: &[String]) -> String { tags.join(",") }
//! # }
//! # pub fn item_codec() -> ResourceCodec<Item> {
//! #     ResourceCodec::new().version::<v1::Item>().version::<v1beta1::Item>().storage_version::<v1beta1::Item>()
//! # }
//! # pub struct ItemStrategy;
//! # impl Strategy<Item> for ItemStrategy {
//! #     fn validate(&self, item: &Item) -> ErrorList {
//! #         let mut errors = ErrorList::new();
//! #         for (i, tag) in item.spec.tags.iter().enumerate() {
//! #             if tag.is_empty() || tag.contains(',') {
//! #                 errors.push(FieldError::invalid(Path::new("spec").child("tags").index(i), tag, "no commas"));
//! #             }
//! #         }
//! #         errors
//! #     }
//! # }
//! // tests/round_trip.rs
//! apiserver::round_trip_test!(items_round_trip, item_codec(), |item: &Item| ItemStrategy
//!     .validate(item)
//!     .is_empty());
//! # fn main() {
//! #     // What the generated test runs (doctests do not run `#[test]` functions).
//! #     apiserver::runtime::round_trip::check(&item_codec(), |item: &Item| ItemStrategy.validate(item).is_empty());
//! # }
//! ```
//!
//! The second starts the server in-process on a temporary data directory, exactly as the binary would (`start`
//! from 9., with `--secure-port=0` for a free port), and drives it with kubectl through the kubeconfig it wrote:
//!
//! ```no_run
//! # use apiserver::app::{StartError, Started};
//! # pub type Options = apiserver::app::Options;
//! # async fn start(_: Options) -> Result<Started, StartError> { unimplemented!() }
//! use apiserver::testing::TestServer;
//!
//! const BERLIN: &str = r#"{"apiVersion": "inventory.example.com/v1", "kind": "Warehouse",
//!   "metadata": {"name": "berlin"}, "spec": {"capacity": 100}}"#;
//!
//! #[apiserver::tokio::test(crate = "apiserver::tokio", flavor = "multi_thread")]
//! async fn warehouses_are_validated() {
//!     // `start` of 9., on a free loopback port and a temporary data dir; more flags after the kit's own
//!     let server = TestServer::start(start, &["--storage-backend=sqlite"]).await;
//!     server.kubectl(&["create", "-f", "-"]).stdin(BERLIN).ok().await;
//!     // The CEL rule of 3.: a 422 naming the field.
//!     let empty = BERLIN.replace("berlin", "empty").replace("100", "0");
//!     let stderr = server.kubectl(&["create", "-f", "-"]).stdin(empty).fails().await;
//!     assert!(stderr.contains("spec.capacity: Invalid value: \"integer\": capacity must be positive"), "{stderr}");
//!     server.stop().await;
//! }
//! # fn main() {}
//! ```
//!
//! `apiserver::testing::TestServer` (feature `testing`) also gives the kubeconfig, a kube-rs
//! client (`client().await`) and the data directory. `examples/library/tests/kubectl.rs` and
//! `examples/wardle/tests/wardle/kubectl.rs` use it.
//!
//! Beyond these: a backend proves itself with the conformance suite
//! (`apiserver::storage_conformance!`, feature `testing`); `apiserver::envtest` (feature `testing`) starts a real
//! kube-apiserver and etcd on loopback to test the server behind the aggregator, as `examples/pizza`'s
//! `aggregated.rs` does.
