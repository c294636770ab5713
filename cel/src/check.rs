//! A type checker for expressions over variables typed by their OpenAPI schemas, as cel-go's checker runs when
//! kube-apiserver admits a CRD's `x-kubernetes-validations`: a rule that selects a field its type does not have,
//! applies an operator or function to types it does not take, names an undeclared variable or function, or does
//! not evaluate to what the caller needs, is refused before it runs, with cel-go's texts
//! (`ERROR: <input>:1:17: type 'int' does not support field selection`, with the line and a caret under the place).
//!
//! The `cel` crate is an interpreter without a checker, so this one types the parsed tree itself. What it does not
//! know precisely (a function whose signature it does not spell out, data under `x-kubernetes-preserve-unknown-fields`
//! or `x-kubernetes-int-or-string`) is `dyn`, which every operand accepts: it may let through a rule cel-go refuses
//! (that rule then fails when it runs, as before), but never refuses one cel-go accepts.

use crate::VariableSchema;
use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, SourceInfo, operators};
use serde_json::Value as Json;
use std::fmt;

/// The type of a checked expression, as cel-go names it.
#[derive(Debug, Clone, PartialEq)]
pub enum CelType {
    Dyn,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    /// A type value (`int`, `type(x)`).
    Type,
    List(Box<CelType>),
    Map(Box<CelType>, Box<CelType>),
    /// An object with the properties of its schema.
    Object,
    /// A library's type: `kubernetes.Quantity`, `net.IP`, ...
    Opaque(&'static str),
}

impl fmt::Display for CelType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CelType::Dyn => f.write_str("dyn"),
            CelType::Null => f.write_str("null_type"),
            CelType::Bool => f.write_str("bool"),
            CelType::Int => f.write_str("int"),
            CelType::Uint => f.write_str("uint"),
            CelType::Double => f.write_str("double"),
            CelType::String => f.write_str("string"),
            CelType::Bytes => f.write_str("bytes"),
            CelType::Duration => f.write_str("duration"),
            CelType::Timestamp => f.write_str("timestamp"),
            CelType::Type => f.write_str("type"),
            CelType::List(e) => write!(f, "list({e})"),
            CelType::Map(k, v) => write!(f, "map({k}, {v})"),
            CelType::Object => f.write_str("object"),
            CelType::Opaque(name) => f.write_str(name),
        }
    }
}

/// A type while checking: [`CelType`] with the schema of objects kept, and the element type of an empty list
/// literal left open until something fixes it (`[]` then `+ [x]`, as `map` and `filter` expand).
#[derive(Debug, Clone, PartialEq)]
enum Ty<'a> {
    /// Unknown: accepted everywhere, as cel-go's `dyn` and its error type (so one mistake is reported once).
    Dyn,
    /// Not known yet: an empty list's elements.
    Free,
    Null,
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Type,
    List(Box<Ty<'a>>),
    Map(Box<Ty<'a>>, Box<Ty<'a>>),
    Object(&'a Json),
    Opaque(&'static str),
}

const QUANTITY: &str = "kubernetes.Quantity";

impl<'a> Ty<'a> {
    fn public(&self) -> CelType {
        match self {
            Ty::Dyn | Ty::Free => CelType::Dyn,
            Ty::Null => CelType::Null,
            Ty::Bool => CelType::Bool,
            Ty::Int => CelType::Int,
            Ty::Uint => CelType::Uint,
            Ty::Double => CelType::Double,
            Ty::String => CelType::String,
            Ty::Bytes => CelType::Bytes,
            Ty::Duration => CelType::Duration,
            Ty::Timestamp => CelType::Timestamp,
            Ty::Type => CelType::Type,
            Ty::List(e) => CelType::List(Box::new(e.public())),
            Ty::Map(k, v) => CelType::Map(Box::new(k.public()), Box::new(v.public())),
            Ty::Object(_) => CelType::Object,
            Ty::Opaque(name) => CelType::Opaque(name),
        }
    }

    fn name(&self) -> String {
        self.public().to_string()
    }

    fn is_dyn(&self) -> bool {
        matches!(self, Ty::Dyn | Ty::Free)
    }

    fn list(e: Ty<'a>) -> Ty<'a> {
        Ty::List(Box::new(e))
    }

    /// The type of data of `schema`, as Kubernetes declares it to CEL (`SchemaDeclType`).
    fn of_schema(schema: &'a Json) -> Ty<'a> {
        if schema.get("x-kubernetes-int-or-string") == Some(&Json::Bool(true)) {
            return Ty::Dyn;
        }
        let types: Vec<&str> = match schema.get("type") {
            Some(Json::String(t)) => vec![t.as_str()],
            Some(Json::Array(ts)) => ts
                .iter()
                .filter_map(Json::as_str)
                .filter(|t| *t != "null")
                .collect(),
            _ => Vec::new(),
        };
        match types.as_slice() {
            ["object"] => {
                if schema.get("properties").is_some_and(Json::is_object) {
                    Ty::Object(schema)
                } else if let Some(values) =
                    schema.get("additionalProperties").filter(|a| a.is_object())
                {
                    Ty::Map(Box::new(Ty::String), Box::new(Ty::of_schema(values)))
                } else {
                    // no declared fields: whatever it holds (preserve-unknown-fields, embedded resources)
                    Ty::Dyn
                }
            }
            ["array"] => Ty::list(schema.get("items").map_or(Ty::Dyn, Ty::of_schema)),
            ["string"] => match schema.get("format").and_then(Json::as_str) {
                Some("byte") => Ty::Bytes,
                Some("date") | Some("date-time") => Ty::Timestamp,
                Some("duration") => Ty::Duration,
                _ => Ty::String,
            },
            ["integer"] => Ty::Int,
            ["number"] => Ty::Double,
            ["boolean"] => Ty::Bool,
            [] => {
                // an optional field's schema wraps its type in one `allOf` alternative
                let alternatives = ["allOf", "anyOf", "oneOf"]
                    .iter()
                    .filter_map(|k| schema.get(*k).and_then(Json::as_array))
                    .flatten()
                    .collect::<Vec<_>>();
                match alternatives.as_slice() {
                    [one] if schema.get("properties").is_none() => Ty::of_schema(one),
                    _ if schema.get("properties").is_some_and(Json::is_object) => {
                        Ty::Object(schema)
                    }
                    _ => Ty::Dyn,
                }
            }
            _ => Ty::Dyn,
        }
    }
}

/// Whether a value of type `a` may stand where `b` is expected (and the reverse: the relation is symmetric).
fn compatible(a: &Ty, b: &Ty) -> bool {
    match (a, b) {
        (x, y) if x.is_dyn() || y.is_dyn() => true,
        // null compares with anything that may be absent; cel-go's rules are finer, never coarser
        (Ty::Null, _) | (_, Ty::Null) => true,
        (Ty::List(x), Ty::List(y)) => compatible(x, y),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => compatible(k1, k2) && compatible(v1, v2),
        // objects of different schemas are still objects: not told apart here
        (Ty::Object(_), Ty::Object(_)) => true,
        (x, y) => std::mem::discriminant(x) == std::mem::discriminant(y) && x == y,
    }
}

/// The type both `a` and `b` are, if they are compatible: the more precise one, `dyn` where they differ.
fn join<'a>(a: &Ty<'a>, b: &Ty<'a>) -> Option<Ty<'a>> {
    if !compatible(a, b) {
        return None;
    }
    Some(match (a, b) {
        (Ty::Free, y) => y.clone(),
        (x, Ty::Free) => x.clone(),
        (Ty::List(x), Ty::List(y)) => Ty::list(join(x, y)?),
        (Ty::Map(k1, v1), Ty::Map(k2, v2)) => {
            Ty::Map(Box::new(join(k1, k2)?), Box::new(join(v1, v2)?))
        }
        (x, y) if x == y => x.clone(),
        _ => Ty::Dyn,
    })
}

fn numeric(t: &Ty) -> bool {
    matches!(t, Ty::Int | Ty::Uint | Ty::Double)
}

/// One overload of a function whose signature the checker knows: parameters (the target first for a member
/// function) and result.
struct Overload<'a> {
    params: Vec<Ty<'a>>,
    result: Ty<'a>,
}

fn o<'a>(params: Vec<Ty<'a>>, result: Ty<'a>) -> Overload<'a> {
    Overload { params, result }
}

/// The overloads the checker knows of `name` called as a member (`member`) or globally; `None` for a function it
/// leaves unchecked (its result is `dyn`).
fn overloads<'a>(name: &str, member: bool) -> Option<Vec<Overload<'a>>> {
    use Ty::*;
    let s = || String;
    let q = || Opaque(QUANTITY);
    let ls = || Ty::list(String);
    Some(match (name, member) {
        ("contains" | "startsWith" | "endsWith" | "matches", true) => vec![o(vec![s(), s()], Bool)],
        ("matches", false) => vec![o(vec![s(), s()], Bool)],
        ("lowerAscii" | "upperAscii" | "trim", true) => vec![o(vec![s()], s())],
        ("charAt", true) => vec![o(vec![s(), Int], s())],
        ("substring", true) => vec![o(vec![s(), Int], s()), o(vec![s(), Int, Int], s())],
        ("replace", true) => vec![
            o(vec![s(), s(), s()], s()),
            o(vec![s(), s(), s(), Int], s()),
        ],
        ("split", true) => vec![o(vec![s(), s()], ls()), o(vec![s(), s(), Int], ls())],
        ("find", true) => vec![o(vec![s(), s()], s())],
        ("findAll", true) => vec![o(vec![s(), s()], ls()), o(vec![s(), s(), Int], ls())],
        ("join", true) => vec![o(vec![ls()], s()), o(vec![ls(), s()], s())],
        ("indexOf" | "lastIndexOf", true) => vec![
            o(vec![s(), s()], Int),
            o(vec![s(), s(), Int], Int),
            o(vec![Ty::list(Dyn), Dyn], Int),
        ],
        ("isSorted", true) => vec![o(vec![Ty::list(Dyn)], Bool)],
        (
            "getFullYear" | "getMonth" | "getDayOfYear" | "getDayOfMonth" | "getDate"
            | "getDayOfWeek" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds",
            true,
        ) => vec![
            o(vec![Timestamp], Int),
            o(vec![Timestamp, s()], Int),
            o(vec![Duration], Int),
        ],
        ("quantity", false) => vec![o(vec![s()], q())],
        ("isQuantity", false) => vec![o(vec![s()], Bool)],
        ("sign", true) => vec![o(vec![q()], Int)],
        ("isGreaterThan" | "isLessThan", true) => vec![o(vec![q(), q()], Bool)],
        ("compareTo", true) => vec![o(vec![q(), q()], Int)],
        ("asApproximateFloat", true) => vec![o(vec![q()], Double)],
        ("asInteger", true) => vec![o(vec![q()], Int)],
        ("isInteger", true) => vec![o(vec![q()], Bool)],
        ("add" | "sub", true) => vec![o(vec![q(), q()], q()), o(vec![q(), Int], q())],
        _ => return None,
    })
}

/// The type named by a bare identifier that is not a variable.
fn type_ident(name: &str) -> bool {
    matches!(
        name,
        "int"
            | "uint"
            | "double"
            | "bool"
            | "string"
            | "bytes"
            | "list"
            | "map"
            | "null_type"
            | "type"
            | "dyn"
    )
}

/// One error, at an offset of the source.
struct Found {
    offset: u32,
    message: String,
}

struct Checker<'a, 's> {
    scopes: Vec<(String, Ty<'a>)>,
    errors: Vec<Found>,
    /// While false, errors are dropped (a comprehension's step is typed twice).
    reporting: bool,
    info: &'s SourceInfo,
    /// Whether a function of that name is declared in the environment (member or global).
    declared: &'s dyn Fn(&str, bool) -> bool,
}

impl<'a> Checker<'a, '_> {
    fn error(&mut self, id: u64, message: String) {
        if self.reporting {
            let offset = self.info.offset_for(id).map_or(0, |(start, _)| start);
            self.errors.push(Found { offset, message });
        }
    }

    fn no_overload(&mut self, id: u64, function: &str, member: bool, args: &[Ty<'a>]) {
        let names: Vec<String> = args.iter().map(Ty::name).collect();
        let applied = if member {
            format!("{}.({})", names[0], names[1..].join(", "))
        } else {
            format!("({})", names.join(", "))
        };
        self.error(
            id,
            format!("found no matching overload for '{function}' applied to '{applied}'"),
        );
    }

    fn lookup(&self, name: &str) -> Option<Ty<'a>> {
        self.scopes
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
    }

    /// Whether `expr` spells a qualified name whose root is not a variable: a namespace (`sets`, `format`).
    fn is_namespace(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Ident(name) => self.lookup(name).is_none() && !type_ident(name),
            Expr::Select(s) if !s.test => self.is_namespace(&s.operand.expr),
            _ => false,
        }
    }

    fn check(&mut self, e: &IdedExpr) -> Ty<'a> {
        match &e.expr {
            Expr::Unspecified => Ty::Dyn,
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => Ty::Bool,
                LiteralValue::Bytes(_) => Ty::Bytes,
                LiteralValue::Double(_) => Ty::Double,
                LiteralValue::Int(_) => Ty::Int,
                LiteralValue::Null => Ty::Null,
                LiteralValue::String(_) => Ty::String,
                LiteralValue::UInt(_) => Ty::Uint,
            },
            Expr::Ident(name) => {
                if let Some(t) = self.lookup(name) {
                    t
                } else if type_ident(name) {
                    Ty::Type
                } else {
                    self.error(
                        e.id,
                        format!("undeclared reference to '{name}' (in container '')"),
                    );
                    Ty::Dyn
                }
            }
            Expr::Select(select) => {
                if self.is_namespace(&select.operand.expr) {
                    // a qualified name (`google.protobuf.Duration`, a library's constant): not typed here
                    return Ty::Dyn;
                }
                let operand = self.check(&select.operand);
                let field = match &operand {
                    Ty::Object(schema) => {
                        let name = crate::escaping::unescape(&select.field)
                            .unwrap_or_else(|| select.field.clone());
                        match schema.get("properties").and_then(|p| p.get(&name)) {
                            Some(prop) => Ty::of_schema(prop),
                            None => {
                                self.error(e.id, format!("undefined field '{}'", select.field));
                                Ty::Dyn
                            }
                        }
                    }
                    Ty::Map(_, v) => (**v).clone(),
                    t if t.is_dyn() => Ty::Dyn,
                    t => {
                        self.error(
                            e.id,
                            format!("type '{}' does not support field selection", t.name()),
                        );
                        Ty::Dyn
                    }
                };
                if select.test { Ty::Bool } else { field }
            }
            Expr::List(list) => {
                let mut element = Ty::Free;
                for item in &list.elements {
                    let t = self.check(item);
                    match join(&element, &t) {
                        Some(j) => element = j,
                        None => {
                            self.error(
                                item.id,
                                format!(
                                    "expected type '{}' but found '{}'",
                                    element.name(),
                                    t.name()
                                ),
                            );
                            element = Ty::Dyn;
                        }
                    }
                }
                if !list.optional_indices.is_empty() {
                    element = Ty::Dyn;
                }
                Ty::list(element)
            }
            Expr::Map(map) => {
                let (mut key, mut value) = (Ty::Free, Ty::Free);
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        let k = self.check(&entry.key);
                        let v = self.check(&entry.value);
                        key = join(&key, &k).unwrap_or(Ty::Dyn);
                        value = if entry.optional {
                            Ty::Dyn
                        } else {
                            join(&value, &v).unwrap_or(Ty::Dyn)
                        };
                    }
                }
                Ty::Map(Box::new(key), Box::new(value))
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let EntryExpr::StructField(f) = &entry.expr {
                        self.check(&f.value);
                    }
                }
                Ty::Dyn
            }
            Expr::Comprehension(c) => {
                let range = self.check(&c.iter_range);
                let (first, second) = match &range {
                    Ty::List(element) => match &c.iter_var2 {
                        Some(_) => (Ty::Int, (**element).clone()),
                        None => ((**element).clone(), Ty::Dyn),
                    },
                    Ty::Map(k, v) => ((**k).clone(), (**v).clone()),
                    t if t.is_dyn() => (Ty::Dyn, Ty::Dyn),
                    t => {
                        self.error(
                            c.iter_range.id,
                            format!(
                                "expression of type '{}' cannot be the range of a comprehension (must be list, map, or dynamic)",
                                t.name()
                            ),
                        );
                        (Ty::Dyn, Ty::Dyn)
                    }
                };
                let init = self.check(&c.accu_init);
                let depth = self.scopes.len();
                self.scopes.push((c.accu_var.clone(), init.clone()));
                self.scopes.push((c.iter_var.clone(), first));
                if let Some(v2) = &c.iter_var2 {
                    self.scopes.push((v2.clone(), second));
                }
                // the step's type fixes what `[]` left open: typed once quietly, then again with the accumulator's type
                let reporting = std::mem::replace(&mut self.reporting, false);
                let step = self.check(&c.loop_step);
                self.reporting = reporting;
                let accu = join(&init, &step).unwrap_or(Ty::Dyn);
                self.scopes[depth].1 = accu.clone();
                self.check(&c.loop_cond);
                self.check(&c.loop_step);
                self.scopes.truncate(depth);
                self.scopes.push((c.accu_var.clone(), accu));
                let result = self.check(&c.result);
                self.scopes.truncate(depth);
                result
            }
            Expr::Call(call) => self.call(e.id, call),
        }
    }

    fn call(&mut self, id: u64, call: &cel::common::ast::CallExpr) -> Ty<'a> {
        let name = call.func_name.as_str();
        if let Some(target) = &call.target
            && self.is_namespace(&target.expr)
        {
            // a namespaced function (`sets.contains`, `format.named`, `optional.of`): arguments checked, result open
            for arg in &call.args {
                self.check(arg);
            }
            return Ty::Dyn;
        }
        if name == operators::LOGICAL_AND || name == operators::LOGICAL_OR {
            for arg in &call.args {
                let t = self.check(arg);
                if !(t == Ty::Bool || t.is_dyn()) {
                    self.error(
                        arg.id,
                        format!("expected type 'bool' but found '{}'", t.name()),
                    );
                }
            }
            return Ty::Bool;
        }
        let member = call.target.is_some();
        let mut args: Vec<Ty<'a>> = Vec::with_capacity(call.args.len() + 1);
        if let Some(target) = &call.target {
            args.push(self.check(target));
        }
        for arg in &call.args {
            args.push(self.check(arg));
        }
        if args.iter().any(Ty::is_dyn) && !matches!(name, "_?_:_" | "_[_]" | "_+_") {
            // an unknown operand: anything may be called on it, and the result is as open
            return match name {
                "_==_"
                | "_!=_"
                | "_<_"
                | "_<=_"
                | "_>_"
                | "_>=_"
                | "@in"
                | "!_"
                | "@not_strictly_false" => Ty::Bool,
                "size" => Ty::Int,
                _ => self.fixed_result(name, member).unwrap_or(Ty::Dyn),
            };
        }
        let result = match (name, args.as_slice()) {
            ("@not_strictly_false", _) => Some(Ty::Bool),
            ("!_", [Ty::Bool]) => Some(Ty::Bool),
            ("-_", [t]) if matches!(t, Ty::Int | Ty::Double | Ty::Duration) => Some(t.clone()),
            ("_==_" | "_!=_", [a, b]) => compatible(a, b).then_some(Ty::Bool),
            ("_<_" | "_<=_" | "_>_" | "_>=_", [a, b]) => {
                let ordered = matches!(
                    a,
                    Ty::Int
                        | Ty::Uint
                        | Ty::Double
                        | Ty::String
                        | Ty::Bytes
                        | Ty::Bool
                        | Ty::Timestamp
                        | Ty::Duration
                );
                (ordered && (a == b || (numeric(a) && numeric(b)))).then_some(Ty::Bool)
            }
            ("_?_:_", [c, a, b]) => {
                if *c == Ty::Bool || c.is_dyn() {
                    join(a, b)
                } else {
                    None
                }
            }
            ("_+_", [a, b]) => match (a, b) {
                (Ty::List(_), Ty::List(_)) => join(a, b),
                (Ty::Timestamp, Ty::Duration) | (Ty::Duration, Ty::Timestamp) => {
                    Some(Ty::Timestamp)
                }
                (x, y) if x.is_dyn() || y.is_dyn() => Some(Ty::Dyn),
                (x, y)
                    if x == y
                        && matches!(
                            x,
                            Ty::Int | Ty::Uint | Ty::Double | Ty::String | Ty::Bytes | Ty::Duration
                        ) =>
                {
                    Some(x.clone())
                }
                _ => None,
            },
            ("_-_", [a, b]) => match (a, b) {
                (Ty::Timestamp, Ty::Timestamp) => Some(Ty::Duration),
                (Ty::Timestamp, Ty::Duration) => Some(Ty::Timestamp),
                (x, y) if x == y && matches!(x, Ty::Int | Ty::Uint | Ty::Double | Ty::Duration) => {
                    Some(x.clone())
                }
                _ => None,
            },
            ("_*_" | "_/_", [a, b]) => (a == b && numeric(a)).then(|| a.clone()),
            ("_%_", [a, b]) => (a == b && matches!(a, Ty::Int | Ty::Uint)).then(|| a.clone()),
            ("_[_]", [c, i]) => match c {
                Ty::List(element) => {
                    (matches!(i, Ty::Int) || i.is_dyn()).then(|| (**element).clone())
                }
                Ty::Map(k, v) => compatible(k, i).then(|| (**v).clone()),
                t if t.is_dyn() => Some(Ty::Dyn),
                Ty::Object(_) => Some(Ty::Dyn),
                _ => None,
            },
            ("@in", [a, c]) => match c {
                Ty::List(element) => compatible(a, element).then_some(Ty::Bool),
                Ty::Map(k, _) => compatible(a, k).then_some(Ty::Bool),
                _ => None,
            },
            ("size", [t]) => {
                matches!(t, Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(..)).then_some(Ty::Int)
            }
            ("int", [_]) => Some(Ty::Int),
            ("uint", [_]) => Some(Ty::Uint),
            ("double", [_]) => Some(Ty::Double),
            ("string", [_]) => Some(Ty::String),
            ("bytes", [_]) => Some(Ty::Bytes),
            ("bool", [_]) => Some(Ty::Bool),
            ("duration", [_]) => Some(Ty::Duration),
            ("timestamp", [_]) => Some(Ty::Timestamp),
            ("dyn", [_]) => Some(Ty::Dyn),
            ("type", [_]) => Some(Ty::Type),
            ("sum" | "min" | "max", [Ty::List(element)]) if member => Some((**element).clone()),
            _ => match overloads(name, member) {
                Some(candidates) => candidates
                    .into_iter()
                    .find(|o| {
                        o.params.len() == args.len()
                            && o.params.iter().zip(&args).all(|(p, a)| compatible(p, a))
                    })
                    .map(|o| o.result),
                None if matches!(name, "_?._" | "_[?_]") => Some(Ty::Dyn),
                // the operators and `size` not matched above: no overload for these operands
                None if name.starts_with('_') || matches!(name, "!_" | "-_" | "@in" | "size") => {
                    None
                }
                None => {
                    if !(self.declared)(name, member) {
                        self.error(
                            id,
                            format!("undeclared reference to '{name}' (in container '')"),
                        );
                    }
                    Some(Ty::Dyn)
                }
            },
        };
        result.unwrap_or_else(|| {
            self.no_overload(id, name, member, &args);
            Ty::Dyn
        })
    }

    /// The result of a function whose overloads all give the same type, whatever the arguments.
    fn fixed_result(&self, name: &str, member: bool) -> Option<Ty<'a>> {
        match name {
            "int" => return Some(Ty::Int),
            "uint" => return Some(Ty::Uint),
            "double" => return Some(Ty::Double),
            "string" => return Some(Ty::String),
            "bytes" => return Some(Ty::Bytes),
            "bool" => return Some(Ty::Bool),
            "duration" => return Some(Ty::Duration),
            "timestamp" => return Some(Ty::Timestamp),
            "type" => return Some(Ty::Type),
            _ => {}
        }
        let candidates = overloads(name, member)?;
        let first = candidates.first()?.result.clone();
        candidates
            .iter()
            .all(|o| o.result == first)
            .then_some(first)
    }
}

/// Formats errors as cel-go does: `ERROR: <input>:LINE:COLUMN: message`, the line, and a caret under the column.
fn render(source: &str, mut errors: Vec<Found>) -> String {
    errors.sort_by_key(|f| f.offset);
    let mut out = Vec::with_capacity(errors.len());
    for found in errors {
        let before = &source[..(found.offset as usize).min(source.len())];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = source[line_start..found.offset as usize].chars().count() + 1;
        let text = source[line_start..].lines().next().unwrap_or("");
        out.push(format!(
            "ERROR: <input>:{line}:{column}: {}\n | {text}\n | {}^",
            found.message,
            ".".repeat(column - 1)
        ));
    }
    out.join("\n")
}

/// Checks `expr` (parsed from `source`, with `info`) with `variables` bound, typed by their schemas: the type it
/// evaluates to, or cel-go's error text.
pub(crate) fn check<'a>(
    source: &str,
    expr: &IdedExpr,
    info: &SourceInfo,
    variables: &[VariableSchema<'a>],
    declared: &dyn Fn(&str, bool) -> bool,
) -> Result<CelType, String> {
    let mut checker = Checker {
        scopes: variables
            .iter()
            .map(|v| (v.name.to_owned(), Ty::of_schema(v.schema)))
            .collect(),
        errors: Vec::new(),
        reporting: true,
        info,
        declared,
    };
    let t = checker.check(expr);
    if checker.errors.is_empty() {
        Ok(t.public())
    } else {
        Err(render(source, checker.errors))
    }
}
