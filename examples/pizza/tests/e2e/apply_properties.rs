//! Properties of the write path's merges on random pizzas (v1beta1, the toppings a map list by name):
//! a strategic merge patch computed from an old to a new pizza turns the old into the new one, and server-side
//! apply is idempotent (the same configuration again changes nothing, neither the object nor its managed fields)
//! and owns exactly what it applied.

use apiserver::endpoints::strategic_merge::{self, PatchSchema};
use apiserver::fieldmanager::{FieldManager, ResetFields, Versions};
use pizza_apiserver::restaurant::Pizza;
use proptest::prelude::*;
use serde_json::{Value, json};

const API_VERSION: &str = "restaurant.programming-kubernetes.info/v1beta1";

/// Toppings with unique names, each with a quantity (a pizza has at least one: it is defaulted otherwise).
fn toppings() -> impl Strategy<Value = Vec<(String, i64)>> {
    prop::collection::btree_map("[a-e]", 1i64..5, 1..5)
        .prop_map(|m| m.into_iter().collect::<Vec<_>>())
        .prop_shuffle()
}

fn labels() -> impl Strategy<Value = std::collections::BTreeMap<String, String>> {
    prop::collection::btree_map("[a-c]", "[x-z]", 0..3)
}

fn pizza(toppings: &[(String, i64)], labels: &std::collections::BTreeMap<String, String>) -> Value {
    let toppings: Vec<Value> = toppings
        .iter()
        .map(|(name, quantity)| json!({"name": name, "quantity": quantity}))
        .collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "Pizza",
        "metadata": {"name": "p", "namespace": "default", "labels": labels},
        "spec": {"toppings": toppings},
    })
}

/// kubectl's two-way strategic merge patch for the parts that change here: labels as a map, toppings merged by
/// name with `$setElementOrder` and deletions.
fn two_way_patch(old: &Value, new: &Value) -> Value {
    let mut labels = serde_json::Map::new();
    let (old_labels, new_labels) = (&old["metadata"]["labels"], &new["metadata"]["labels"]);
    for (key, value) in new_labels.as_object().unwrap() {
        if old_labels.get(key) != Some(value) {
            labels.insert(key.clone(), value.clone());
        }
    }
    for key in old_labels.as_object().unwrap().keys() {
        if new_labels.get(key).is_none() {
            labels.insert(key.clone(), Value::Null);
        }
    }
    let (old_items, new_items) = (
        old["spec"]["toppings"].as_array().unwrap(),
        new["spec"]["toppings"].as_array().unwrap(),
    );
    let mut items: Vec<Value> = new_items
        .iter()
        .filter(|item| !old_items.contains(item))
        .cloned()
        .collect();
    for item in old_items {
        if !new_items.iter().any(|n| n["name"] == item["name"]) {
            items.push(json!({"name": item["name"], "$patch": "delete"}));
        }
    }
    // kubectl sends a list only when it changed.
    let mut spec = serde_json::Map::new();
    if old_items != new_items {
        let order: Vec<Value> = new_items
            .iter()
            .map(|i| json!({"name": i["name"]}))
            .collect();
        spec.insert("$setElementOrder/toppings".into(), Value::Array(order));
        spec.insert("toppings".into(), Value::Array(items));
    }
    json!({"metadata": {"labels": labels}, "spec": spec})
}

struct Pizzas(apiserver::runtime::ResourceCodec<pizza_apiserver::restaurant::Pizza>);

impl Versions for Pizzas {
    fn schema(&self, api_version: &str) -> Option<&Value> {
        self.0.patch_schema(api_version.rsplit('/').next()?)
    }
    fn convert(&self, value: &Value, _from: &str, _to: &str) -> Result<Value, String> {
        Ok(value.clone())
    }
}

proptest! {
    #[test]
    fn strategic_merge_patch_turns_old_into_new(
        (old_toppings, old_labels, new_toppings, new_labels) in (toppings(), labels(), toppings(), labels())
    ) {
        let codec = Pizza::codec();
        let schema = codec.patch_schema("v1beta1").unwrap();
        let (old, new) = (pizza(&old_toppings, &old_labels), pizza(&new_toppings, &new_labels));
        let patched = strategic_merge::apply(old.clone(), two_way_patch(&old, &new), PatchSchema::new(schema)).unwrap();
        prop_assert_eq!(patched, new);
    }

    #[test]
    fn apply_is_idempotent_and_owns_what_it_applied(
        (live_toppings, config_toppings, config_labels) in (toppings(), toppings(), labels())
    ) {
        let versions = Pizzas(Pizza::codec());
        let reset = ResetFields::for_endpoint(true, false);
        let manager = FieldManager {
            versions: &versions,
            api_version: API_VERSION,
            kind: "Pizza",
            subresource: "",
            reset: &reset,
        };
        // A live pizza another manager wrote, then a first apply (forced: it may set the same toppings).
        let live = pizza(&live_toppings, &Default::default());
        let created = manager.update(None, &live, &[], "creator");
        let config = pizza(&config_toppings, &config_labels);
        let first = manager.apply(Some((&live, &created)), &config, "applier", true).unwrap();
        let after_first = first.object.clone().unwrap_or_else(|| live.clone());
        // Every applied topping and label is in the result with the applied value.
        for (name, quantity) in &config_toppings {
            let found = after_first["spec"]["toppings"].as_array().unwrap().iter()
                .any(|t| t["name"] == name.as_str() && t["quantity"] == *quantity);
            prop_assert!(found, "{} missing in {}", name, after_first);
        }
        for (key, value) in &config_labels {
            prop_assert_eq!(&after_first["metadata"]["labels"][key], &json!(value));
        }
        // The same configuration again: nothing changes.
        let second = manager.apply(Some((&after_first, &first.managed_fields)), &config, "applier", false).unwrap();
        prop_assert!(second.object.is_none(), "a repeated apply changed {}", after_first);
        let fields = |entries: &[apiserver::meta::ManagedFieldsEntry]| -> Vec<(String, String, Vec<u8>)> {
            entries.iter().map(|e| (e.manager.clone(), e.operation.clone(), e.fields_v1.clone().unwrap().raw)).collect()
        };
        prop_assert_eq!(fields(&second.managed_fields), fields(&first.managed_fields));
    }
}
