//! CEL validation rules on types (`x-kubernetes-validations`, as on a CRD's schema), declared with
//! `#[versioned(validation(rule = "..."))]` and checked on every create and update, with upstream's error texts,
//! cost limits and ratcheting (a value an update leaves unchanged is not checked again, so objects stored under
//! older rules keep updating). The CEL interpreter is the `cel` cargo feature: a server built without it that
//! serves a type with rules refuses to start, naming the feature.

#[cfg(feature = "cel")]
use std::collections::HashMap;
#[cfg(feature = "cel")]
use std::sync::{Arc, LazyLock, Mutex};

#[cfg(feature = "cel")]
use apiserver_cel::{
    Activation, CelType, EvalError, PER_CALL_LIMIT, Program, RUNTIME_COST_BUDGET, Value,
};
use serde_json::Value as Json;

use crate::validation::{ErrorList, FieldError, Path};

/// The schema key holding a node's rules.
pub const VALIDATIONS: &str = "x-kubernetes-validations";

/// One rule as the derive declares it.
#[doc(hidden)]
pub struct ValidationRule {
    pub rule: &'static str,
    pub message: Option<&'static str>,
    pub message_expression: Option<&'static str>,
    pub reason: Option<&'static str>,
    pub field_path: Option<&'static str>,
    pub optional_old_self: bool,
}

/// Adds a rule to a schema node's `x-kubernetes-validations`; used by the derive.
#[doc(hidden)]
pub fn add_validation_rule(schema: &mut Json, rule: ValidationRule) {
    let Json::Object(map) = schema else {
        return;
    };
    let mut published = serde_json::Map::new();
    published.insert("rule".into(), rule.rule.into());
    for (key, value) in [
        ("message", rule.message),
        ("messageExpression", rule.message_expression),
        ("reason", rule.reason),
        ("fieldPath", rule.field_path),
    ] {
        if let Some(value) = value {
            published.insert(key.into(), value.into());
        }
    }
    if rule.optional_old_self {
        published.insert("optionalOldSelf".into(), true.into());
    }
    if let Json::Array(rules) = map
        .entry(VALIDATIONS)
        .or_insert_with(|| Json::Array(Vec::new()))
    {
        rules.push(Json::Object(published));
    }
}

/// Whether a schema declares any rule (most types have none and cost nothing).
pub(crate) fn has_rules(schema: &Json) -> bool {
    match schema {
        Json::Object(map) => map.contains_key(VALIDATIONS) || map.values().any(has_rules),
        Json::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// Rules compiled once for the process (types are fixed at build time, so the set is bounded).
#[cfg(feature = "cel")]
static PROGRAMS: LazyLock<Mutex<HashMap<String, Arc<Program>>>> = LazyLock::new(Mutex::default);

#[cfg(feature = "cel")]
fn program(source: &str) -> Result<Arc<Program>, String> {
    if let Some(found) = PROGRAMS.lock().ok().and_then(|p| p.get(source).cloned()) {
        return Ok(found);
    }
    let compiled = Arc::new(Program::compile(source).map_err(|e| e.to_string())?);
    if let Ok(mut programs) = PROGRAMS.lock() {
        programs.insert(source.to_string(), compiled.clone());
    }
    Ok(compiled)
}

/// Upstream's `StaticEstimatedCostLimit`: the most one rule may be estimated to cost.
#[cfg(feature = "cel")]
const ESTIMATED_COST_LIMIT: u64 = 10_000_000;

/// Compiles every rule of `schema` and checks its estimated cost (with the node's schema bounding `self` and
/// `oldSelf`) against upstream's per-rule limit, as kube-apiserver does when a CRD is created: a rule that does not
/// compile, or could cost more than a request may spend on it, is refused when the server starts rather than when a
/// request runs it. A rule's estimate is multiplied by how many times it can run in one request: the product of the
/// `maxItems`/`maxProperties` of the lists and maps above it, or, under one without, the most times its data fits in a
/// request ([`apiserver_cel::max_cardinality`]), as upstream's `getExpressionCost`. Each error names the rule by its
/// schema path, as upstream's CRD validation does.
#[cfg(feature = "cel")]
pub(crate) fn check_rules_statically(schema: &Json) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    statically_at(schema, "openAPIV3Schema", Some(1), &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

#[cfg(feature = "cel")]
/// A rule as kube-apiserver prints it in `Invalid value: ...`: its Go struct in JSON, with Go's escapes of `<`, `>`
/// and `&`.
fn go_struct(rule: &Json) -> String {
    let text = |key: &str| rule.get(key).and_then(Json::as_str).unwrap_or_default();
    let shown = serde_json::json!({
        "Rule": text("rule"),
        "Message": text("message"),
        "MessageExpression": text("messageExpression"),
        "Reason": rule.get("reason").cloned().unwrap_or(Json::Null),
        "FieldPath": text("fieldPath"),
        "OptionalOldSelf": rule.get("optionalOldSelf").cloned().unwrap_or(Json::Null),
    });
    // serde_json keeps insertion order only with `preserve_order`: the fields are written in Go's order by hand
    let field = |key: &str| format!("{key:?}:{}", shown[key]);
    let fields = [
        "Rule",
        "Message",
        "MessageExpression",
        "Reason",
        "FieldPath",
        "OptionalOldSelf",
    ]
    .map(field);
    format!("{{{}}}", fields.join(","))
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// By how much `schema` multiplies the occurrences of its children (upstream's `extractMaxElements`): a list's
/// `maxItems`, a map's `maxProperties`, `None` for a list or map without; 1 for a struct.
#[cfg(feature = "cel")]
fn max_elements(schema: &Json) -> Option<u64> {
    let bound = |name: &str| {
        schema
            .get(name)
            .and_then(Json::as_i64)
            .map(|n| n.max(0) as u64)
    };
    match schema.get("type").and_then(Json::as_str) {
        Some("array") => bound("maxItems"),
        Some("object")
            if schema
                .get("additionalProperties")
                .is_some_and(|a| a != false) =>
        {
            bound("maxProperties")
        }
        _ => Some(1),
    }
}

/// `cardinality`: how many times `node`'s data can occur in a request, `None` when unbounded.
#[cfg(feature = "cel")]
fn statically_at(node: &Json, path: &str, cardinality: Option<u64>, errors: &mut Vec<String>) {
    let Json::Object(map) = node else {
        return;
    };
    if let Some(Json::Array(rules)) = map.get(VALIDATIONS) {
        for (index, rule) in rules.iter().enumerate() {
            let Some(source) = rule.get("rule").and_then(Json::as_str) else {
                continue;
            };
            let at = format!("{path}.{VALIDATIONS}[{index}]");
            let shown = go_struct(rule);
            let compiled = match program(source) {
                Ok(compiled) => compiled,
                Err(e) => {
                    errors.push(format!(
                        "{at}.rule: Invalid value: {shown}: compilation failed: {e}"
                    ));
                    continue;
                }
            };
            // `oldSelf` of a rule with `optionalOldSelf` is an optional: left open
            let optional_old_self = rule.get("optionalOldSelf") == Some(&Json::Bool(true));
            let open = Json::Object(Default::default());
            let variables = [
                apiserver_cel::VariableSchema {
                    name: "self",
                    schema: node,
                },
                apiserver_cel::VariableSchema {
                    name: "oldSelf",
                    schema: if optional_old_self { &open } else { node },
                },
            ];
            match compiled.check(&variables) {
                Err(e) => {
                    errors.push(format!(
                        "{at}.rule: Invalid value: {shown}: compilation failed: {e}"
                    ));
                    continue;
                }
                Ok(CelType::Bool | CelType::Dyn) => {}
                Ok(_) => {
                    errors.push(format!(
                        "{at}.rule: Invalid value: {shown}: cel expression must evaluate to a bool"
                    ));
                    continue;
                }
            }
            let times = cardinality.unwrap_or_else(|| apiserver_cel::max_cardinality(node));
            if let Err(e) =
                compiled.check_estimated_cost_times(&variables, times, ESTIMATED_COST_LIMIT)
            {
                errors.push(format!("{at}.rule: Forbidden: {e}"));
            }
            if let Some(expression) = rule.get("messageExpression").and_then(Json::as_str) {
                let checked = program(expression)
                    .and_then(|p| p.check(&variables).map_err(|e| e.to_string()));
                match checked {
                    Err(e) => errors.push(format!(
                        "{at}.messageExpression: Invalid value: {shown}: messageExpression compilation failed: {e}"
                    )),
                    Ok(CelType::String | CelType::Dyn) => {}
                    Ok(_) => errors.push(format!(
                        "{at}.messageExpression: Invalid value: {shown}: messageExpression must evaluate to a string"
                    )),
                }
            }
        }
    }
    let children = cardinality
        .zip(max_elements(node))
        .map(|(c, n)| c.saturating_mul(n));
    if let Some(Json::Object(properties)) = map.get("properties") {
        for (name, sub) in properties {
            statically_at(sub, &format!("{path}.properties[{name}]"), children, errors);
        }
    }
    if let Some(items) = map.get("items") {
        statically_at(items, &format!("{path}.items"), children, errors);
    }
    if let Some(values) = map.get("additionalProperties") {
        statically_at(
            values,
            &format!("{path}.additionalProperties"),
            children,
            errors,
        );
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Json::Array(alternatives)) = map.get(key) {
            for (i, sub) in alternatives.iter().enumerate() {
                // the same data, seen another way
                statically_at(sub, &format!("{path}.{key}[{i}]"), cardinality, errors);
            }
        }
    }
}

/// The runtime cost left for one request's rules.
#[cfg(feature = "cel")]
struct Budget(u64);

/// Checks every rule in `schema` over `new` (a whole object as its version writes it) and, on an update, `old`.
#[cfg(feature = "cel")]
pub(crate) fn check(schema: &Json, new: &Json, old: Option<&Json>, errors: &mut ErrorList) {
    let mut budget = Budget(RUNTIME_COST_BUDGET);
    let _ = walk(schema, new, old, &Path::default(), &mut budget, errors);
}

/// The schema and the alternatives it wraps (`allOf`/`anyOf`/`oneOf`, e.g. an optional field's), which may carry
/// rules, properties or items of their own.
#[cfg(feature = "cel")]
fn nodes(schema: &Json) -> Vec<&Json> {
    let mut nodes = vec![schema];
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(alternatives) = schema.get(key).and_then(Json::as_array) {
            for alternative in alternatives {
                nodes.extend(self::nodes(alternative));
            }
        }
    }
    nodes
}

/// The schema type as upstream names it in `Invalid value: "<type>"`.
#[cfg(feature = "cel")]
fn type_name(nodes: &[&Json]) -> &'static str {
    for node in nodes {
        let types = match node.get("type") {
            Some(Json::String(t)) => vec![t.as_str()],
            Some(Json::Array(ts)) => ts.iter().filter_map(Json::as_str).collect(),
            _ => Vec::new(),
        };
        for t in types {
            match t {
                "object" => return "object",
                "array" => return "array",
                "string" => return "string",
                "integer" => return "integer",
                "number" => return "number",
                "boolean" => return "boolean",
                _ => {}
            }
        }
        if node.get("properties").is_some() {
            return "object";
        }
    }
    "object"
}

/// `Err(())` stops all further rules (the budget ran out).
#[cfg(feature = "cel")]
fn walk(
    schema: &Json,
    new: &Json,
    old: Option<&Json>,
    path: &Path,
    budget: &mut Budget,
    errors: &mut ErrorList,
) -> Result<(), ()> {
    if new.is_null() || old == Some(new) {
        // Ratcheting: an unchanged value is not checked again, nor anything inside it.
        return Ok(());
    }
    let nodes = nodes(schema);
    let kind = type_name(&nodes);
    for node in &nodes {
        for rule in node
            .get(VALIDATIONS)
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            check_rule(rule, node, new, old, path, kind, budget, errors)?;
        }
    }
    if let Json::Object(fields) = new {
        for node in &nodes {
            if let Some(Json::Object(properties)) = node.get("properties") {
                for (name, sub) in properties {
                    if let Some(value) = fields.get(name) {
                        let previous = old.and_then(|o| o.get(name));
                        walk(sub, value, previous, &path.child(name), budget, errors)?;
                    }
                }
            }
            if let Some(values) = node.get("additionalProperties").filter(|s| s.is_object()) {
                for (key, value) in fields {
                    let previous = old.and_then(|o| o.get(key));
                    walk(values, value, previous, &path.key(key), budget, errors)?;
                }
            }
        }
    }
    if let Json::Array(items) = new {
        for node in &nodes {
            let Some(item_schema) = node.get("items") else {
                continue;
            };
            let old_items = old.and_then(Json::as_array);
            let keys: Vec<&str> = node
                .get("x-kubernetes-list-map-keys")
                .and_then(Json::as_array)
                .map(|k| k.iter().filter_map(Json::as_str).collect())
                .unwrap_or_default();
            let list_type = node.get("x-kubernetes-list-type").and_then(Json::as_str);
            for (index, item) in items.iter().enumerate() {
                // Only items that can be told apart across versions of the list have an old value: a map
                // list's by key, a set's by value.
                let previous = match list_type {
                    Some("map") if !keys.is_empty() => old_items.and_then(|olds| {
                        olds.iter()
                            .find(|o| keys.iter().all(|k| o.get(*k) == item.get(*k)))
                    }),
                    Some("set") => old_items.and_then(|olds| olds.iter().find(|o| *o == item)),
                    _ => None,
                };
                walk(
                    item_schema,
                    item,
                    previous,
                    &path.index(index),
                    budget,
                    errors,
                )?;
            }
        }
    }
    Ok(())
}

/// Binds a value with its schema's types where they fit (dates, int-or-string), else as plain JSON.
#[cfg(feature = "cel")]
fn bind(activation: Activation, name: &str, value: &Json, schema: &Json) -> Activation {
    match apiserver_cel::json_to_value_with_schema(value, schema) {
        Ok(converted) => activation.bind(name, converted),
        Err(_) => activation.bind_json(name, value),
    }
}

#[cfg(feature = "cel")]
#[allow(clippy::too_many_arguments)]
fn check_rule(
    rule: &Json,
    schema: &Json,
    new: &Json,
    old: Option<&Json>,
    path: &Path,
    kind: &str,
    budget: &mut Budget,
    errors: &mut ErrorList,
) -> Result<(), ()> {
    let source = rule.get("rule").and_then(Json::as_str).unwrap_or_default();
    let message = rule
        .get("message")
        .and_then(Json::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty());
    // Upstream's `ruleErrorString`: the message if there is one, else the rule.
    let described = message.unwrap_or(source.trim());
    let mut at = path.clone();
    if let Some(field_path) = rule.get("fieldPath").and_then(Json::as_str) {
        for segment in field_path.split('.').filter(|s| !s.is_empty()) {
            at = at.child(segment);
        }
    }
    let transition = source.contains("oldSelf");
    if transition && old.is_none() {
        // Transition rules are checked only when there is a comparable old value.
        return Ok(());
    }
    let mut activation = bind(Activation::new(), "self", new, schema);
    if let Some(old) = old {
        activation = bind(activation, "oldSelf", old, schema);
    }
    let compiled = match program(source) {
        Ok(p) => p,
        Err(e) => {
            errors.push(FieldError::invalid(
                at,
                kind,
                &format!("compilation failed: {e}"),
            ));
            return Ok(());
        }
    };
    let evaluate = |program: &Program, budget: &mut Budget| {
        let evaluation = program.evaluate_with_limit(&activation, budget.0.min(PER_CALL_LIMIT));
        let over = evaluation.cost > budget.0;
        budget.0 = budget.0.saturating_sub(evaluation.cost);
        (evaluation.result, over)
    };
    let (result, over) = evaluate(&compiled, budget);
    if over {
        errors.push(FieldError::invalid(
            at,
            kind,
            "validation failed due to running out of cost budget, no further validation rules will be run",
        ));
        return Err(());
    }
    match result {
        Ok(Value::Bool(true)) => Ok(()),
        Ok(Value::Bool(false)) => {
            let from_expression = rule
                .get("messageExpression")
                .and_then(Json::as_str)
                .and_then(|e| program(e).ok())
                .and_then(|p| match evaluate(&p, budget).0 {
                    Ok(Value::String(s)) => {
                        let s = s.trim().to_string();
                        (!s.is_empty() && !s.contains('\n')).then_some(s)
                    }
                    _ => None,
                });
            let detail = from_expression.unwrap_or_else(|| match message {
                Some(m) => m.to_string(),
                None => format!("failed rule: {described}"),
            });
            errors.push(match rule.get("reason").and_then(Json::as_str) {
                Some("FieldValueRequired") => FieldError::required(at, &detail),
                Some("FieldValueForbidden") => FieldError::forbidden(at, &detail),
                Some("FieldValueDuplicate") => FieldError::duplicate(at, detail.as_str()),
                _ => FieldError::invalid(at, kind, &detail),
            });
            Ok(())
        }
        Ok(_) => {
            errors.push(FieldError::invalid(
                at,
                kind,
                &format!("'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {described}"),
            ));
            Ok(())
        }
        Err(EvalError::CostLimitExceeded) => {
            errors.push(FieldError::invalid(
                at,
                kind,
                &format!("'{}': no further validation rules will be run due to call cost exceeds limit for rule: {described}", EvalError::CostLimitExceeded),
            ));
            Err(())
        }
        Err(e)
            if e.to_string().contains("no matching overload")
                || e.to_string().starts_with("no such overload") =>
        {
            errors.push(FieldError::invalid(
                at,
                kind,
                &format!("'{e}': call arguments did not match a supported operator, function or macro signature for rule: {described}"),
            ));
            Ok(())
        }
        Err(e) => {
            errors.push(FieldError::invalid(
                at,
                kind,
                &format!("{e} evaluating rule: {described}"),
            ));
            Ok(())
        }
    }
}

#[cfg(all(test, feature = "cel"))]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn rules_that_do_not_compile_or_could_cost_too_much_are_refused_before_they_run() {
        let schema = |max_items: Option<u64>, rule: &str| {
            let mut list = json!({"type": "array", "items": {"type": "string"}});
            if let Some(max) = max_items {
                list["maxItems"] = max.into();
                list["items"]["maxLength"] = 64.into();
            }
            list[VALIDATIONS] = json!([{"rule": rule}]);
            json!({"type": "object", "properties": {"names": list}})
        };
        let pairwise = "self.all(a, self.all(b, a == b || !a.matches(b)))";
        let errors = check_rules_statically(&schema(None, pairwise)).unwrap_err();
        assert!(
            errors[0].starts_with("openAPIV3Schema.properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of"),
            "{errors:?}"
        );
        assert!(check_rules_statically(&schema(Some(10), pairwise)).is_ok());
        let errors = check_rules_statically(&schema(Some(10), "self.size() <")).unwrap_err();
        assert!(
            errors[0].contains("Invalid value") && errors[0].contains("compilation failed"),
            "{errors:?}"
        );
    }

    /// Every case recorded from kube-apiserver (`tests/fixtures/crd_checks`, see its `record.sh`): a CRD whose rule
    /// kube-apiserver refuses is refused here with the same text after `spec.validation.`, and one it accepts is
    /// accepted, except where this checker is knowingly more lenient (data under
    /// `x-kubernetes-preserve-unknown-fields` is `dyn` here, an object without fields there; cel-go's `math`
    /// extension is declared here, not there) or estimates a cost differently (the `format` library).
    #[test]
    fn rules_are_type_checked_as_kube_apiserver_checks_a_crd() {
        let recorded: Vec<Json> = serde_json::from_str(include_str!(
            "../../tests/fixtures/crd_checks/recorded.json"
        ))
        .unwrap();
        let lenient = ["ok_preserve_unknown", "ok_math", "ok_format"];
        let mut compared = 0;
        let mut wrong = Vec::new();
        for case in recorded.iter().filter(|c| c.get("columns").is_none()) {
            let name = case["name"].as_str().unwrap();
            let schema = json!({"type": "object", "properties": {"spec": case["spec"]}});
            let ours = check_rules_statically(&schema);
            let expected = match case["message"].as_str() {
                Some(message) if !lenient.contains(&name) => {
                    let (_, expected) = message.split_once("is invalid: spec.validation.").unwrap();
                    Err(vec![expected.to_string()])
                }
                _ => Ok(()),
            };
            if ours != expected {
                wrong.push(format!(
                    "{name}:\n  ours: {ours:?}\n  kube-apiserver: {expected:?}"
                ));
            }
            compared += 1;
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
        assert!(compared > 70, "{compared}");
    }

    /// A rule's estimate is multiplied by how often it can run: the sizes of the lists above it, or, under a list
    /// without `maxItems`, the most times its data fits in a request.
    #[test]
    fn rules_under_lists_cost_as_often_as_they_can_run() {
        // each inner list: at most 10 numbers; the rule costs some tens
        let inner = |rule: &str| {
            json!({
                "type": "array", "maxItems": 10, "items": {"type": "integer"},
                VALIDATIONS: [{"rule": rule}],
            })
        };
        let outer = |max_items: Option<u64>, rule: &str| {
            let mut list = json!({"type": "array", "items": inner(rule)});
            if let Some(max) = max_items {
                list["maxItems"] = max.into();
            }
            json!({"type": "object", "properties": {"rows": list}})
        };
        let rule = "self.all(x, x > 0)";
        let once =
            Program::compile(rule)
                .unwrap()
                .estimate_cost(&[apiserver_cel::VariableSchema {
                    name: "self",
                    schema: &inner(rule),
                }]);
        assert!(once.max > 10 && once.max < 1000, "{once:?}");
        // under a list of 100: 100 times, fine
        assert!(check_rules_statically(&outer(Some(100), rule)).is_ok());
        // under lists of 100 and 10,000 (a map without maxProperties in between is unbounded too)
        let nested = json!({"type": "object", "properties": {"grid": {
            "type": "array", "maxItems": 10_000,
            "items": {"type": "array", "maxItems": 100, "items": inner(rule)},
        }}});
        let errors = check_rules_statically(&nested).unwrap_err();
        let factor = (once.max * 1_000_000) as f64 / 10_000_000.0;
        assert_eq!(
            errors,
            vec![format!(
                "openAPIV3Schema.properties[grid].items.items.x-kubernetes-validations[0].rule: Forbidden: \
                 estimated rule cost exceeds budget by factor of {} (try simplifying the rule, or adding maxItems, \
                 maxProperties, and maxLength where arrays, maps, and strings are declared)",
                if factor < 1.5 {
                    format!("{factor:.6}x")
                } else {
                    format!("{factor:.1}x")
                }
            )]
        );
        // under a list without maxItems: as often as a 2-byte `[]` and a comma fit in 3 MiB
        assert_eq!(
            apiserver_cel::max_cardinality(&inner(rule)),
            3 * 1024 * 1024 / 3
        );
        let errors = check_rules_statically(&outer(None, rule)).unwrap_err();
        assert!(
            errors[0].starts_with("openAPIV3Schema.properties[rows].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget"),
            "{errors:?}"
        );
        // the same under a map: bounded by maxProperties, unbounded without
        let map = |max: Option<u64>| {
            let mut m = json!({"type": "object", "additionalProperties": inner(rule)});
            if let Some(max) = max {
                m["maxProperties"] = max.into();
            }
            json!({"type": "object", "properties": {"byName": m}})
        };
        assert!(check_rules_statically(&map(Some(100))).is_ok());
        assert!(check_rules_statically(&map(None)).is_err());
        // fields of a struct run once per struct
        let fields = json!({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": inner(rule)}}}});
        assert!(check_rules_statically(&fields).is_ok());
    }

    fn schema() -> Json {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "toppings": {
                            "type": "array",
                            "x-kubernetes-validations": [{"rule": "self.size() <= 2", "message": "at most 2 toppings"}],
                            "x-kubernetes-list-type": "map",
                            "x-kubernetes-list-map-keys": ["name"],
                            "items": {
                                "type": "object",
                                "properties": {
                                    "name": {"type": "string"},
                                    "cost": {
                                        "type": "number",
                                        "x-kubernetes-validations": [{"rule": "self <= oldSelf * 2.0", "message": "may not double"}],
                                    },
                                },
                            },
                        },
                    },
                },
            },
        })
    }

    fn errors(new: Json, old: Option<Json>) -> Vec<String> {
        let mut list = ErrorList::new();
        check(&schema(), &new, old.as_ref(), &mut list);
        list.iter().map(|e| e.to_string()).collect()
    }

    #[test]
    fn rules_transition_rules_and_ratcheting() {
        let three = json!({"spec": {"toppings": [{"name": "a"}, {"name": "b"}, {"name": "c"}]}});
        assert_eq!(
            errors(three.clone(), None),
            ["spec.toppings: Invalid value: \"array\": at most 2 toppings"]
        );
        // Ratcheting: an update that leaves the invalid list as it was passes.
        let mut relabelled = three.clone();
        relabelled["metadata"] = json!({"labels": {"x": "y"}});
        assert!(errors(relabelled, Some(three.clone())).is_empty());
        // Transition rule: only on update, only for an item with an old value (matched by key).
        let cheap = json!({"spec": {"toppings": [{"name": "a", "cost": 1.0}]}});
        let dear = json!({"spec": {"toppings": [{"name": "a", "cost": 3.0}]}});
        assert!(errors(dear.clone(), None).is_empty());
        assert_eq!(
            errors(dear.clone(), Some(cheap.clone())),
            ["spec.toppings[0].cost: Invalid value: \"number\": may not double"]
        );
        assert!(errors(cheap, Some(dear)).is_empty());
    }

    #[test]
    fn default_messages_and_runtime_errors() {
        let schema = json!({"type": "object", "x-kubernetes-validations": [
            {"rule": "self.a > 1"},
            {"rule": "self.missing == 1"},
            {"rule": "self.a > 5", "messageExpression": "'a is ' + string(self.a)", "reason": "FieldValueForbidden", "fieldPath": ".a"},
        ]});
        let mut list = ErrorList::new();
        check(&schema, &json!({"a": 1}), None, &mut list);
        let bodies: Vec<String> = list.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            bodies,
            [
                "Invalid value: \"object\": failed rule: self.a > 1".to_string(),
                "Invalid value: \"object\": no such key: missing evaluating rule: self.missing == 1".to_string(),
                "a: Forbidden: a is 1".to_string(),
            ]
        );
    }

    #[test]
    fn cost_limit() {
        let schema = json!({"type": "array", "x-kubernetes-validations": [
            {"rule": "self.all(x, self.all(y, self.all(z, x + y + z >= 0)))", "message": "expensive"},
            {"rule": "false", "message": "never reached"},
        ]});
        let big: Vec<i64> = (0..200).collect();
        let mut list = ErrorList::new();
        check(&schema, &json!(big), None, &mut list);
        let bodies: Vec<String> = list.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            bodies,
            [
                "Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: expensive"
            ]
        );
    }
}

/// A build without the `cel` feature cannot check rules: a type that has any is refused at start.
#[cfg(not(feature = "cel"))]
pub(crate) fn check_rules_statically(_: &Json) -> Result<(), Vec<String>> {
    Err(vec![format!(
        "{VALIDATIONS}: this server was built without CEL (cargo feature `cel`)"
    )])
}

/// Never reached (a server with rules and without CEL does not start); were it reached, the object is refused.
#[cfg(not(feature = "cel"))]
pub(crate) fn check(_: &Json, _: &Json, _: Option<&Json>, errors: &mut ErrorList) {
    errors.push(FieldError::internal(
        Path::default(),
        "validation rules need the cargo feature `cel`",
    ));
}
