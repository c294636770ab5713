//! Cost limits: the runtime limit on one evaluation, and the estimate that refuses a rule before it runs.

use apiserver_cel::{
    Activation, COST_LIMIT_EXCEEDED, CompileError, EvalError, PER_CALL_LIMIT, Program, Value,
    VariableSchema,
};
use serde_json::json;

fn list_of(n: usize) -> serde_json::Value {
    json!((0..n).map(|i| format!("item-{i}")).collect::<Vec<_>>())
}

#[test]
fn cheap_expressions_stay_under_the_limit_and_report_their_cost() {
    let program = Program::compile("self.all(x, x.startsWith('item-'))").expect("compiles");
    let act = Activation::new().bind_json("self", &list_of(100));
    let run = program.evaluate_with_limit(&act, PER_CALL_LIMIT);
    assert_eq!(run.result, Ok(Value::Bool(true)));
    assert!(run.cost >= 100, "each iteration is charged: {}", run.cost);
    let bigger = program.evaluate_with_limit(
        &Activation::new().bind_json("self", &list_of(200)),
        PER_CALL_LIMIT,
    );
    assert!(bigger.cost > run.cost, "cost grows with the input");
}

#[test]
fn the_runtime_limit_cancels_with_upstreams_text() {
    let program = Program::compile("self.all(x, self.all(y, x != y || x == y))").expect("compiles");
    let act = Activation::new().bind_json("self", &list_of(2000));
    let run = program.evaluate_with_limit(&act, PER_CALL_LIMIT);
    assert_eq!(run.result, Err(EvalError::CostLimitExceeded));
    assert_eq!(
        EvalError::CostLimitExceeded.to_string(),
        COST_LIMIT_EXCEEDED
    );
    assert_eq!(
        COST_LIMIT_EXCEEDED,
        "operation cancelled: actual cost limit exceeded"
    );
    // stopped soon after the limit, not after the 4 million iterations
    assert!(run.cost < PER_CALL_LIMIT + 1000, "{}", run.cost);
    // the same program with a small input is fine
    let small = Activation::new().bind_json("self", &list_of(10));
    assert_eq!(program.evaluate(&small), Ok(Value::Bool(true)));
}

#[test]
fn an_error_that_logic_would_absorb_still_ends_in_the_cost_error() {
    // `exists` defers errors while looking for a `true`: the cost error must not be swallowed.
    let program =
        Program::compile("self.exists(x, self.exists(y, x == 'nope')) || true").expect("compiles");
    let act = Activation::new().bind_json("self", &list_of(3000));
    assert_eq!(program.evaluate(&act), Err(EvalError::CostLimitExceeded));
}

#[test]
fn map_and_filter_are_charged_too() {
    let act = Activation::new().bind_json("self", &list_of(1000));
    for expr in [
        "self.map(x, self.map(y, y)).size() > 0",
        "self.filter(x, self.filter(y, y == x).size() > 0).size() > 0",
        "self.exists_one(x, self.exists_one(y, y == x))",
    ] {
        let run = Program::compile(expr)
            .expect("compiles")
            .evaluate_with_limit(&act, 100_000);
        assert_eq!(run.result, Err(EvalError::CostLimitExceeded), "{expr}");
    }
}

#[test]
fn library_functions_charge_for_their_input() {
    let act = Activation::new().bind_json("self", &json!("a".repeat(100_000)));
    let run = Program::compile("self.find('b') == ''")
        .expect("compiles")
        .evaluate_with_limit(&act, 1_000_000);
    assert_eq!(run.result, Ok(Value::Bool(true)));
    assert!(
        run.cost >= 10_000,
        "a tenth of the string's length: {}",
        run.cost
    );
    // string concatenation is charged by the size it produces
    let run = Program::compile("size(self + self) > 0")
        .expect("compiles")
        .evaluate_with_limit(&act, 1_000);
    assert_eq!(run.result, Err(EvalError::CostLimitExceeded));
}

fn items_schema(max_items: Option<u64>, max_length: Option<u64>) -> serde_json::Value {
    let mut item = json!({"type": "string"});
    if let Some(l) = max_length {
        item["maxLength"] = json!(l);
    }
    let mut list = json!({"type": "array", "items": item});
    if let Some(m) = max_items {
        list["maxItems"] = json!(m);
    }
    json!({"type": "object", "properties": {"items": list}})
}

#[test]
fn estimation_refuses_unbounded_rules_with_upstreams_text() {
    let program =
        Program::compile("self.items.all(x, self.items.exists(y, x == y))").expect("compiles");
    let unbounded = items_schema(None, None);
    let vars = [VariableSchema {
        name: "self",
        schema: &unbounded,
    }];
    let err = program
        .check_estimated_cost(&vars, PER_CALL_LIMIT)
        .expect_err("too costly");
    assert_eq!(
        err.to_string(),
        "estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding \
         maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    );
    assert!(matches!(err, CompileError::CostExceedsBudget { .. }));

    let bounded = items_schema(Some(10), Some(20));
    let vars = [VariableSchema {
        name: "self",
        schema: &bounded,
    }];
    assert_eq!(program.check_estimated_cost(&vars, PER_CALL_LIMIT), Ok(()));
    let estimate = program.estimate_cost(&vars);
    assert!(estimate.min <= estimate.max);
    assert!(estimate.max >= 100, "10 × 10 iterations: {estimate:?}");
}

#[test]
fn estimation_reports_small_factors_as_upstream_does() {
    let program = Program::compile("self.items.all(x, x.contains('a'))").expect("compiles");
    let schema = items_schema(Some(1000), Some(100));
    let vars = [VariableSchema {
        name: "self",
        schema: &schema,
    }];
    let estimate = program.estimate_cost(&vars).max;
    let just_under = estimate * 10 / 12; // factor 1.2: printed with six decimals
    let err = program
        .check_estimated_cost(&vars, just_under)
        .expect_err("over");
    assert!(err.to_string().contains("by factor of 1.2"), "{err}");
    let err = program
        .check_estimated_cost(&vars, estimate / 3)
        .expect_err("over");
    assert!(err.to_string().contains("by factor of 3.0x"), "{err}");
}
