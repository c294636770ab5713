//! The reference server's example manifests decode, default and convert to the expected objects; validation
//! gives the reference's messages.

use apiserver::codec::{FieldValidation, MediaType};
use apiserver::runtime::Versioned;
use pizza_apiserver::restaurant::{Pizza, PizzaTopping, Topping};
use pizza_apiserver::validation::validate_pizza;
use pizza_apiserver::{v1alpha1, v1beta1};

fn toppings(pairs: &[(&str, i32)]) -> Vec<PizzaTopping> {
    pairs
        .iter()
        .map(|(name, quantity)| PizzaTopping {
            name: name.to_string(),
            quantity: *quantity,
        })
        .collect()
}

fn decode_pizza(yaml: &str, version: &str) -> Pizza {
    Pizza::codec()
        .decode(
            yaml.as_bytes(),
            MediaType::Yaml,
            version,
            FieldValidation::Strict,
        )
        .unwrap()
        .object
}

#[test]
fn example_toppings() {
    for (name, cost) in [("mozzarella", 1.0), ("salami", 0.2), ("tomato", 0.1)] {
        let yaml = format!(
            "apiVersion: restaurant.programming-kubernetes.info/v1alpha1\nkind: Topping\nmetadata:\n  name: {name}\nspec:\n  cost: {cost:?}\n"
        );
        let topping = Topping::codec()
            .decode(
                yaml.as_bytes(),
                MediaType::Yaml,
                "v1alpha1",
                FieldValidation::Strict,
            )
            .unwrap();
        assert_eq!(topping.object.metadata.name, name);
        assert_eq!(topping.object.spec.cost, cost);
        let json = Topping::codec()
            .encode(&topping.object, "v1alpha1", MediaType::Json)
            .unwrap();
        let json = String::from_utf8(json).unwrap();
        assert!(
            json.contains(&format!("\"spec\":{{\"cost\":{cost:?}}}")),
            "{json}"
        );
    }
}

#[test]
fn margherita() {
    let pizza = decode_pizza(
        "apiVersion: restaurant.programming-kubernetes.info/v1alpha1\nkind: Pizza\nmetadata:\n  name: margherita\nspec:\n  toppings:\n  - mozzarella\n  - tomato\n",
        "v1alpha1",
    );
    assert_eq!(
        pizza.spec.toppings,
        toppings(&[("mozzarella", 1), ("tomato", 1)])
    );
    let beta = String::from_utf8(
        Pizza::codec()
            .encode(&pizza, "v1beta1", MediaType::Json)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        beta,
        r#"{"kind":"Pizza","apiVersion":"restaurant.programming-kubernetes.info/v1beta1","metadata":{"name":"margherita"},"spec":{"toppings":[{"name":"mozzarella","quantity":1},{"name":"tomato","quantity":1}]},"status":{}}"#
    );
}

#[test]
fn empty_pizza_is_defaulted_in_both_versions() {
    let alpha = decode_pizza(
        "apiVersion: restaurant.programming-kubernetes.info/v1alpha1\nkind: Pizza\nmetadata:\n  name: salami\nspec:\n",
        "v1alpha1",
    );
    let beta = decode_pizza(
        "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Pizza\nmetadata:\n  name: salami\nspec: {}\n",
        "v1beta1",
    );
    let expected = toppings(&[("salami", 1), ("mozzarella", 1), ("tomato", 1)]);
    assert_eq!(alpha.spec.toppings, expected);
    assert_eq!(beta.spec.toppings, expected);
}

#[test]
fn duplicate_names_fold_into_quantity_and_unfold_again() {
    let pizza = decode_pizza(
        "apiVersion: restaurant.programming-kubernetes.info/v1alpha1\nkind: Pizza\nmetadata:\n  name: double\nspec:\n  toppings: [salami, tomato, salami]\n",
        "v1alpha1",
    );
    assert_eq!(
        pizza.spec.toppings,
        toppings(&[("salami", 2), ("tomato", 1)])
    );
    assert_eq!(
        v1alpha1::Pizza::from_hub(&pizza).unwrap().spec.toppings,
        ["salami", "salami", "tomato"]
    );
}

#[test]
fn v1beta1_quantity_zero_or_unset_becomes_one() {
    let pizza = decode_pizza(
        "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Pizza\nmetadata:\n  name: q\nspec:\n  toppings:\n  - name: salami\n    quantity: 0\n  - name: tomato\n  - name: mozzarella\n    quantity: 3\n",
        "v1beta1",
    );
    assert_eq!(
        pizza.spec.toppings,
        toppings(&[("salami", 1), ("tomato", 1), ("mozzarella", 3)])
    );
    let mut wire = v1beta1::Pizza::from_hub(&pizza).unwrap();
    wire.spec.toppings[0].quantity = Some(-2);
    wire.set_defaults().unwrap();
    assert_eq!(
        wire.spec.toppings[0].quantity,
        Some(-2),
        "negative quantities are left for validation"
    );
}

#[test]
fn unknown_fields_are_strict_errors_or_warnings() {
    let yaml = "apiVersion: restaurant.programming-kubernetes.info/v1beta1\nkind: Pizza\nmetadata:\n  name: x\nspec:\n  toppings:\n  - name: a\n    size: 3\n";
    let err = Pizza::codec()
        .decode(
            yaml.as_bytes(),
            MediaType::Yaml,
            "v1beta1",
            FieldValidation::Strict,
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "strict decoding error: unknown field \"spec.toppings[0].size\""
    );
    let warned = Pizza::codec()
        .decode(
            yaml.as_bytes(),
            MediaType::Yaml,
            "v1beta1",
            FieldValidation::Warn,
        )
        .unwrap();
    assert_eq!(warned.warnings, ["unknown field \"spec.toppings[0].size\""]);
    // `Spec` is not `spec`: JSON is case-sensitive.
    let json = br#"{"apiVersion":"restaurant.programming-kubernetes.info/v1alpha1","kind":"Topping","metadata":{"name":"t"},"Spec":{"cost":1}}"#;
    let err = Topping::codec()
        .decode(json, MediaType::Json, "v1alpha1", FieldValidation::Strict)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "strict decoding error: unknown field \"Spec\""
    );
}

#[test]
fn validation_messages_are_the_references() {
    let pizza = |pairs: &[(&str, i32)]| Pizza {
        spec: pizza_apiserver::restaurant::PizzaSpec {
            toppings: toppings(pairs),
        },
        ..Pizza::default()
    };
    assert_eq!(
        validate_pizza(&pizza(&[("a", 0)])).aggregate(),
        "spec.toppings[0].quantity: Invalid value: 0: cannot be negative or zero"
    );
    let errors = validate_pizza(&pizza(&[("", 0)]));
    assert_eq!(errors.len(), 2);
    assert_eq!(
        errors.aggregate(),
        "[spec.toppings[0].quantity: Invalid value: 0: cannot be negative or zero, spec.toppings[0].name: Invalid value: \"\": cannot be empty]"
    );
    assert_eq!(
        validate_pizza(&pizza(&[("a", 1), ("b", 1), ("a", 2)])).aggregate(),
        "spec.toppings[2].name: Invalid value: \"a\": must be unique"
    );
    assert!(validate_pizza(&pizza(&[("a", 1), ("b", 1000)])).is_empty());
    assert_eq!(
        validate_pizza(&pizza(&[("a", 1001)])).aggregate(),
        "spec.toppings[0].quantity: Invalid value: 1001: must be less than or equal to 1000"
    );
}

#[test]
fn openapi_schemas_carry_doc_comments() {
    let schema = v1beta1::Pizza::openapi_schema();
    let quantity =
        &schema["properties"]["spec"]["properties"]["toppings"]["items"]["properties"]["quantity"];
    assert_eq!(quantity["type"], "integer", "{schema:#}");
    assert_eq!(quantity["format"], "int32");
    assert!(
        quantity["description"]
            .as_str()
            .unwrap()
            .starts_with("How often the topping")
    );
    assert_eq!(schema["properties"]["metadata"]["type"], "object");
    assert!(schema.get("$schema").is_none());
    let full = Pizza::codec().openapi_schema("v1beta1").unwrap();
    assert_eq!(
        full["x-kubernetes-group-version-kind"][0]["version"],
        "v1beta1"
    );
    assert_eq!(full["properties"]["apiVersion"]["type"], "string");
}
