//! Static cost estimation, as upstream refuses a rule whose worst case exceeds its budget before it ever runs.
//!
//! The estimate follows cel-go's cost model in outline: one per identifier, selection and call, 10 for a list literal
//! and 30 for a map literal, a tenth of a string's or list's size for functions that traverse it, and a
//! comprehension's iteration cost multiplied by the most elements its range can have. Sizes come from the schemas of
//! the bound variables (`maxItems`, `maxProperties`, `maxLength`); where a schema sets no bound, upstream's
//! assumption is used: as many elements as fit in the largest request (3 MiB).

use crate::cost;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value as Json;

/// The largest request Kubernetes accepts, in bytes: what an unbounded list, map or string is assumed to fill.
const MAX_REQUEST_SIZE: u64 = 3 * 1024 * 1024;

/// A variable's name and the OpenAPI v3 schema of the data it will be bound to.
#[derive(Debug, Clone, Copy)]
pub struct VariableSchema<'a> {
    pub name: &'a str,
    pub schema: &'a Json,
}

/// The range an expression's cost falls in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CostEstimate {
    pub min: u64,
    pub max: u64,
}

/// What is known statically of a value: its schema, if any, and the most characters, elements or entries it holds.
#[derive(Clone, Copy)]
struct Shape<'a> {
    schema: Option<&'a Json>,
    size: u64,
}

impl<'a> Shape<'a> {
    fn unknown() -> Shape<'a> {
        Shape {
            schema: None,
            size: MAX_REQUEST_SIZE,
        }
    }

    fn of(schema: &'a Json) -> Shape<'a> {
        Shape {
            schema: Some(schema),
            size: max_size(schema),
        }
    }

    fn sized(size: u64) -> Shape<'a> {
        Shape { schema: None, size }
    }

    /// The shape of this value's elements (a list's items, a map's values).
    fn element(&self) -> Shape<'a> {
        let Some(schema) = self.schema else {
            return Shape::unknown();
        };
        match schema.get("type").and_then(Json::as_str) {
            Some("array") => schema.get("items").map_or_else(Shape::unknown, Shape::of),
            Some("object") => schema
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .map_or_else(|| Shape::sized(max_key_length(schema)), Shape::of),
            _ => Shape::unknown(),
        }
    }

    /// The shape of field `name` of this object.
    fn field(&self, name: &str) -> Shape<'a> {
        let Some(schema) = self.schema else {
            return Shape::unknown();
        };
        let unescaped = crate::escaping::unescape(name).unwrap_or_else(|| name.to_owned());
        if let Some(prop) = schema.get("properties").and_then(|p| p.get(&unescaped)) {
            return Shape::of(prop);
        }
        self.element()
    }
}

/// The most characters in a property name of `schema`: what iterating its keys yields.
fn max_key_length(schema: &Json) -> u64 {
    schema
        .get("properties")
        .and_then(Json::as_object)
        .and_then(|p| p.keys().map(|k| k.len() as u64).max())
        .unwrap_or(MAX_REQUEST_SIZE)
}

/// The most characters (string), elements (array) or entries (object) data of `schema` can have.
fn max_size(schema: &Json) -> u64 {
    let bound = |name: &str| schema.get(name).and_then(Json::as_u64);
    match schema.get("type").and_then(Json::as_str) {
        Some("array") => bound("maxItems").unwrap_or_else(|| {
            let item = schema.get("items").map_or(1, min_serialized_size);
            (MAX_REQUEST_SIZE - 2) / (item + 1)
        }),
        Some("object") => bound("maxProperties").unwrap_or_else(|| {
            let value = schema
                .get("additionalProperties")
                .filter(|a| a.is_object())
                .map_or(1, min_serialized_size);
            // `"":` and a comma around each value
            (MAX_REQUEST_SIZE - 2) / (value + 4)
        }),
        Some("string") => {
            bound("maxLength").unwrap_or(match schema.get("format").and_then(Json::as_str) {
                Some("date-time") | Some("duration") => 32,
                Some("date") => 12,
                _ => MAX_REQUEST_SIZE - 2,
            })
        }
        _ => 1,
    }
}

/// The most times data of `schema` can occur in one request (upstream's `maxCardinality`: the largest request over
/// the data's smallest JSON and a comma). A rule under lists or maps without `maxItems`/`maxProperties` may run that
/// often, and its estimated cost is multiplied by it.
pub fn max_cardinality(schema: &Json) -> u64 {
    MAX_REQUEST_SIZE / (min_serialized_size(schema) + 1)
}

/// The fewest bytes data of `schema` takes in JSON (upstream's `MinStringSize`, `MinBoolSize`, ...).
fn min_serialized_size(schema: &Json) -> u64 {
    match schema.get("type").and_then(Json::as_str) {
        Some("string") => match schema.get("format").and_then(Json::as_str) {
            Some("date-time") => 21,
            Some("date") => 12,
            Some("duration") => 3,
            _ => 2 + schema.get("minLength").and_then(Json::as_u64).unwrap_or(0),
        },
        Some("boolean") => 4,
        Some("integer") | Some("number") => 1,
        Some("object") | Some("array") => 2,
        _ => 1,
    }
}

/// Names bound while walking: the variables, then comprehension variables, innermost last.
struct Scope<'a> {
    bound: Vec<(String, Shape<'a>)>,
}

impl<'a> Scope<'a> {
    fn lookup(&self, name: &str) -> Shape<'a> {
        self.bound
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or_else(Shape::unknown, |(_, s)| *s)
    }
}

/// Functions whose cost grows with the size of their target or first argument, and by how much: a tenth of it for
/// string and list traversals (cel-go's traversal factor), all of it for list scans that compare elements.
fn traversal_cost(function: &str, size: u64) -> u64 {
    match function {
        "contains"
        | "startsWith"
        | "endsWith"
        | "lowerAscii"
        | "upperAscii"
        | "trim"
        | "replace"
        | "split"
        | "substring"
        | "charAt"
        | "indexOf"
        | "lastIndexOf"
        | "reverse"
        | "join"
        | "quote"
        | "format"
        | "size"
        | operators::ADD
        | operators::EQUALS
        | operators::NOT_EQUALS
        | operators::LESS
        | operators::LESS_EQUALS
        | operators::GREATER
        | operators::GREATER_EQUALS
        | "string"
        | "bytes"
        | "url"
        | "isURL"
        | "quantity"
        | "isQuantity"
        | "ip"
        | "isIP"
        | "cidr"
        | "isCIDR"
        | "semver"
        | "isSemver"
        | "validate" => size.div_ceil(10),
        "isSorted"
        | "sum"
        | "min"
        | "max"
        | "sets.contains"
        | "sets.equivalent"
        | "sets.intersects"
        | operators::IN
        | "distinct"
        | "sort"
        | "flatten"
        | "slice"
        | "getQuery" => size,
        _ => 0,
    }
}

fn walk<'a>(expr: &IdedExpr, scope: &mut Scope<'a>) -> (u64, Shape<'a>) {
    match &expr.expr {
        Expr::Unspecified => (0, Shape::unknown()),
        Expr::Literal(l) => (
            0,
            Shape::sized(match l {
                LiteralValue::String(s) => s.inner().chars().count() as u64,
                LiteralValue::Bytes(b) => b.inner().len() as u64,
                _ => 1,
            }),
        ),
        Expr::Ident(name) => (1, scope.lookup(name)),
        Expr::Select(s) => {
            let (cost, shape) = walk(&s.operand, scope);
            let shape = if s.test {
                Shape::sized(1)
            } else {
                shape.field(&s.field)
            };
            (cost.saturating_add(1), shape)
        }
        Expr::List(l) => {
            let mut cost = 10u64;
            for e in &l.elements {
                cost = cost.saturating_add(walk(e, scope).0);
            }
            (cost, Shape::sized(l.elements.len() as u64))
        }
        Expr::Map(_) | Expr::Struct(_) => {
            let entries = match &expr.expr {
                Expr::Map(m) => &m.entries,
                Expr::Struct(s) => &s.entries,
                _ => unreachable_entries(),
            };
            let mut cost = 30u64;
            for entry in entries {
                match &entry.expr {
                    EntryExpr::MapEntry(e) => {
                        cost = cost
                            .saturating_add(walk(&e.key, scope).0)
                            .saturating_add(walk(&e.value, scope).0);
                    }
                    EntryExpr::StructField(f) => {
                        cost = cost.saturating_add(walk(&f.value, scope).0)
                    }
                }
            }
            (cost, Shape::sized(entries.len() as u64))
        }
        Expr::Call(c) => {
            let mut cost = 1u64;
            let mut first: Option<Shape<'a>> = None;
            let mut sizes = Vec::new();
            for e in c.target.as_deref().into_iter().chain(c.args.iter()) {
                let (c, s) = walk(e, scope);
                cost = cost.saturating_add(c);
                first.get_or_insert(s);
                sizes.push(s.size);
            }
            let first = first.unwrap_or_else(|| Shape::sized(1));
            let mut size_driver = first.size;
            if c.func_name == operators::IN {
                // `x in list`: the list is the second operand
                size_driver = sizes.get(1).copied().unwrap_or(1);
            }
            cost = cost.saturating_add(traversal_cost(&c.func_name, size_driver));
            if c.func_name == "check" && c.target.is_some() {
                // an authorization check's fixed cost, the call's 1 included
                cost = cost.saturating_add(crate::cost::CHECK_COST - 1);
            }
            if matches!(c.func_name.as_str(), "matches" | "find" | "findAll") {
                // a regex match is linear in the string, with a factor for the pattern's size
                let pattern = sizes.get(1).copied().unwrap_or(1);
                cost = cost.saturating_add(
                    size_driver
                        .div_ceil(10)
                        .saturating_mul(pattern.div_ceil(4).max(1)),
                );
            }
            let shape = match c.func_name.as_str() {
                operators::INDEX | operators::OPT_INDEX => first.element(),
                operators::ADD => {
                    Shape::sized(sizes.iter().fold(0u64, |a, b| a.saturating_add(*b)))
                }
                "split" | "findAll" | "substring" | "lowerAscii" | "upperAscii" | "trim"
                | "replace" | "reverse" | "distinct" | "sort" | "slice" => Shape::sized(first.size),
                _ => Shape::unknown(),
            };
            (cost, shape)
        }
        Expr::Comprehension(c) => {
            let (range_cost, range) = walk(&c.iter_range, scope);
            let (init_cost, _) = walk(&c.accu_init, scope);
            let iterations = range.size;
            let element = range.element();
            let depth = scope.bound.len();
            scope
                .bound
                .push((c.accu_var.clone(), Shape::sized(iterations)));
            match &c.iter_var2 {
                Some(second) => {
                    // two-variable comprehensions: index or key, then element or value
                    scope
                        .bound
                        .push((c.iter_var.clone(), Shape::sized(iterations)));
                    scope.bound.push((second.clone(), element));
                }
                None => scope.bound.push((c.iter_var.clone(), element)),
            }
            let (cond_cost, _) = walk(&c.loop_cond, scope);
            let (step_cost, _) = walk(&c.loop_step, scope);
            scope.bound.truncate(depth + 1);
            let (result_cost, _) = walk(&c.result, scope);
            scope.bound.truncate(depth);
            let per_iteration = 1u64.saturating_add(cond_cost).saturating_add(step_cost);
            let cost = range_cost
                .saturating_add(init_cost)
                .saturating_add(iterations.saturating_mul(per_iteration))
                .saturating_add(result_cost);
            (cost, Shape::sized(iterations))
        }
    }
}

fn unreachable_entries() -> &'static Vec<cel::common::ast::IdedEntryExpr> {
    static EMPTY: Vec<cel::common::ast::IdedEntryExpr> = Vec::new();
    &EMPTY
}

/// Estimates the cost of `expr` for data of the given schemas.
pub(crate) fn estimate(expr: &IdedExpr, variables: &[VariableSchema<'_>]) -> CostEstimate {
    let mut scope = Scope {
        bound: variables
            .iter()
            .map(|v| (v.name.to_owned(), Shape::of(v.schema)))
            .collect(),
    };
    let (max, _) = walk(expr, &mut scope);
    CostEstimate {
        min: cost::static_cost(expr).min(max),
        max,
    }
}

/// How far `cost` is over `budget`, written as upstream writes it: `more than 100x`, `1.234568x` below 1.5,
/// `18.1x` otherwise.
pub(crate) fn budget_factor(cost: u64, budget: u64) -> String {
    let factor = cost as f64 / budget.max(1) as f64;
    if factor > 100.0 {
        "more than 100x".into()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    }
}
