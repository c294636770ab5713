//! Compiling and evaluating expressions.

use crate::check::CelType;
use crate::cost::{self, Meter};
use crate::estimate::{self, CostEstimate, VariableSchema};
use crate::{convert, library};
use cel::common::ast::{Expr, IdedExpr};
use cel::common::value::{CowVal, Val};
use cel::context::VariableResolver;
use cel::{Context, Env, ExecutionError, Value};
use serde_json::Value as Json;
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The longest expression accepted, in code points (cel-go's default `ExpressionSizeCodePointLimit`).
const MAX_EXPRESSION_CODE_POINTS: usize = 100_000;

/// The deepest expression accepted. The interpreter recurses once per level, so this bounds its stack use; upstream's
/// parser refuses nesting deeper than 250, which is more than validation rules need.
const MAX_EXPRESSION_DEPTH: usize = 64;

/// The most nesting the source text may suggest before it is parsed (see [`nesting_bound`]): the parser and the drop
/// of its tree recurse once per level, so a chain like `1 + 1 + ... + 1` must be refused before either sees it.
const MAX_SOURCE_NESTING: usize = 128;

/// Parsing runs with at least this much stack left (the ANTLR parser takes several kilobytes a level in a debug
/// build) ...
const STACK_RED_ZONE: usize = 8 << 20;
/// ... and evaluation with this much: the interpreter recurses once per level of a tree at most
/// [`MAX_EXPRESSION_DEPTH`] deep. Evaluation runs on every request, on tokio's 2 MiB workers: a red zone larger
/// than what such a thread has left would map a fresh stack for every evaluation.
const EVAL_RED_ZONE: usize = 1 << 20;
/// The stack grown to when the calling thread has less left.
const STACK_SIZE: usize = 32 << 20;

/// Runs `f` with [`STACK_RED_ZONE`] of stack at least.
fn with_stack<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(STACK_RED_ZONE, STACK_SIZE, f)
}

/// An upper bound of how deep the expression `src` parses, from its text alone: brackets nest, and so do operators
/// and selections chained at one level (`a.b.c`, `1 + 2 + 3` parse left-deep), except across `&&`, `||` and `,`
/// (the parser balances `&&`/`||` chains). String literals are skipped.
fn nesting_bound(src: &str) -> usize {
    // per open bracket: operators chained since the last `&&`/`||`/`,`, and ternaries (which nest to the right);
    // `total` is the sum over all open brackets, kept as they change
    let mut levels: Vec<(usize, usize)> = vec![(0, 0)];
    let mut total = 0usize;
    let mut max = 0;
    let mut chars = src.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                // a literal: up to the same quote, escapes skipped (triple quotes end at the next quote too:
                // an over-estimate of nesting is harmless)
                while let Some(d) = chars.next() {
                    if d == '\\' {
                        chars.next();
                    } else if d == c {
                        break;
                    }
                }
            }
            '(' | '[' | '{' => {
                if c == '['
                    && let Some(l) = levels.last_mut()
                {
                    // `a[0][0]` chains like selections
                    l.0 += 1;
                    total += 1;
                }
                levels.push((0, 0));
            }
            ')' | ']' | '}' => {
                if levels.len() > 1
                    && let Some((ops, ternaries)) = levels.pop()
                {
                    total -= ops + ternaries;
                }
            }
            '&' | '|' | ',' => {
                if let Some(l) = levels.last_mut() {
                    total -= l.0;
                    l.0 = 0;
                }
            }
            '?' => {
                if let Some(l) = levels.last_mut() {
                    total = total - l.0 + 1;
                    l.0 = 0;
                    l.1 += 1;
                }
            }
            '.' | '+' | '-' | '*' | '/' | '%' | '<' | '>' | '=' | '!' => {
                if let Some(l) = levels.last_mut() {
                    l.0 += 1;
                    total += 1;
                }
            }
            _ => {}
        }
        max = max.max(levels.len() + total);
    }
    max
}

/// The environment every program runs in: the standard library, Kubernetes' libraries and the cost functions.
fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Kubernetes runs cel-go, which keeps the last of repeated map literal keys.
        env.set_error_on_duplicate_map_keys(false);
        if let Err(e) = library::register(&mut env).and_then(|()| cost::register(&mut env)) {
            // The declarations are fixed: a conflict is a bug in this crate, caught by every test.
            panic!("declaring the CEL libraries: {e}");
        }
        Arc::new(env)
    })
}

/// Why an expression does not compile. The texts follow cel-go's where it has fixed ones.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompileError {
    /// The expression does not parse.
    #[error("{0}")]
    Syntax(String),
    /// The expression is longer than the parser accepts.
    #[error("expression code point size exceeds limit: size: {size}, limit {limit}")]
    TooLong { size: usize, limit: usize },
    /// The expression nests deeper than the interpreter may recurse.
    #[error("max recursion depth exceeded")]
    TooDeep,
    /// The estimated cost is over the budget it was checked against (see [`Program::check_estimated_cost`]).
    #[error(
        "estimated rule cost exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, \
         maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )]
    CostExceedsBudget { factor: String },
    /// The expression does not type-check against its variables' schemas (see [`Program::check`]): cel-go's
    /// `ERROR: <input>:LINE:COLUMN: ...` lines.
    #[error("{0}")]
    Check(String),
}

/// Why an evaluation failed. Displayed with upstream's texts where it has fixed ones (`no such key: x`,
/// `found no matching overload for ...`, `operation cancelled: actual cost limit exceeded`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvalError {
    /// The runtime cost limit was passed.
    #[error("operation cancelled: actual cost limit exceeded")]
    CostLimitExceeded,
    /// The expression failed: a missing key, a function's error, no overload for the arguments.
    #[error("{0}")]
    Execution(String),
    /// Bound data does not fit its schema.
    #[error("{0}")]
    InvalidData(String),
    /// A value has no JSON form.
    #[error("{0}")]
    Conversion(String),
}

impl From<ExecutionError> for EvalError {
    fn from(e: ExecutionError) -> Self {
        EvalError::Execution(match e {
            ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
            ExecutionError::UndeclaredReference(name) => {
                format!("undeclared reference to '{name}' (in container '')")
            }
            ExecutionError::FunctionError { message, .. } => message,
            ExecutionError::DivisionByZero(_) => "division by zero".into(),
            ExecutionError::RemainderByZero(_) => "modulus by zero".into(),
            ExecutionError::Overflow(..) => "integer overflow".into(),
            ExecutionError::IndexOutOfBounds(i) => match i {
                Value::Int(i) => format!("index out of range: {i}"),
                Value::UInt(i) => format!("index out of range: {i}"),
                other => format!("index out of range: {other:?}"),
            },
            other => other.to_string(),
        })
    }
}

/// A compiled expression, ready to evaluate any number of times, from any thread.
#[derive(Debug, Clone)]
pub struct Program {
    source: String,
    /// As parsed: what cost estimation reads.
    parsed: IdedExpr,
    /// With cost charging woven in: what evaluation runs.
    instrumented: IdedExpr,
    static_cost: u64,
}

/// The outcome of one evaluation and what it cost, for callers that add up costs over a request (upstream's
/// per-request budget, [`crate::RUNTIME_COST_BUDGET`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub result: Result<Value, EvalError>,
    /// The runtime cost spent, also when the evaluation failed.
    pub cost: u64,
}

impl Program {
    /// Parses `source` and expands its macros. There is no type checker: a misspelt field or function is an error
    /// when evaluated, not here.
    pub fn compile(source: &str) -> Result<Program, CompileError> {
        Program::compile_with(source, false)
    }

    /// Compiles a MutatingAdmissionPolicy expression: as [`Program::compile`], and its object literals
    /// (`Object{...}`, `Object.spec{...}`, `JSONPatch{...}`) evaluate to maps of their fields.
    pub fn compile_mutation(source: &str) -> Result<Program, CompileError> {
        Program::compile_with(source, true)
    }

    fn compile_with(source: &str, object_literals: bool) -> Result<Program, CompileError> {
        let size = source.chars().count();
        if size > MAX_EXPRESSION_CODE_POINTS {
            return Err(CompileError::TooLong {
                size,
                limit: MAX_EXPRESSION_CODE_POINTS,
            });
        }
        if nesting_bound(source) > MAX_SOURCE_NESTING {
            return Err(CompileError::TooDeep);
        }
        with_stack(|| Program::parse(source, object_literals))
    }

    fn parse(source: &str, object_literals: bool) -> Result<Program, CompileError> {
        let mut parsed = env().parser().parse(source).map_err(syntax_error)?;
        if depth_exceeds(&parsed, MAX_EXPRESSION_DEPTH) {
            return Err(CompileError::TooDeep);
        }
        let mut next_id = cost::max_id(&parsed);
        if object_literals {
            crate::mutation::rewrite(&mut parsed, None, &mut next_id)?;
        }
        let mut instrumented = parsed.clone();
        cost::instrument(&mut instrumented, &mut next_id);
        Ok(Program {
            source: source.to_owned(),
            static_cost: cost::static_cost(&parsed),
            parsed,
            instrumented,
        })
    }

    /// The expression as written.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates with upstream's per-expression limit, [`crate::PER_CALL_LIMIT`].
    pub fn evaluate(&self, activation: &Activation) -> Result<Value, EvalError> {
        self.evaluate_with_limit(activation, cost::PER_CALL_LIMIT)
            .result
    }

    /// Evaluates, stopping with [`EvalError::CostLimitExceeded`] once the runtime cost passes `limit`.
    pub fn evaluate_with_limit(&self, activation: &Activation, limit: u64) -> Evaluation {
        let meter = Meter::start(limit);
        let result = cost::charge(self.static_cost)
            .and_then(|()| {
                let mut context = Context::with_env(Arc::clone(env()));
                context.set_variable_resolver(activation);
                stacker::maybe_grow(EVAL_RED_ZONE, STACK_SIZE, || {
                    Value::resolve(&self.instrumented, &context)
                })
            })
            .map_err(EvalError::from);
        let result = if meter.exceeded() {
            Err(EvalError::CostLimitExceeded)
        } else {
            result
        };
        Evaluation {
            result,
            cost: meter.spent(),
        }
    }

    /// Type-checks the expression with `variables` bound to data of their schemas, as cel-go's checker does before
    /// Kubernetes admits a rule: the type it evaluates to (`dyn` where the schemas leave it open), or
    /// [`CompileError::Check`] with cel-go's texts (`undefined field 'nope'`, `found no matching overload for
    /// '_>_' applied to '(int, string)'`, `undeclared reference to 'x' (in container '')`). Unknowns are `dyn`, so
    /// what cel-go accepts is never refused here.
    pub fn check(&self, variables: &[VariableSchema<'_>]) -> Result<CelType, CompileError> {
        with_stack(|| {
            let (expr, info) = env()
                .parser()
                .parse_with_source_info(&self.source)
                .map_err(syntax_error)?;
            crate::check::check(&self.source, &expr, &info, variables, &declared)
                .map_err(CompileError::Check)
        })
    }

    /// Estimates the most this expression can cost, from what `variables` say about the data bound to them (their
    /// schemas' `maxItems`, `maxLength`, `maxProperties`), as upstream's estimator does before admitting a rule.
    pub fn estimate_cost(&self, variables: &[VariableSchema<'_>]) -> CostEstimate {
        with_stack(|| estimate::estimate(&self.parsed, variables))
    }

    /// Refuses the expression when its estimated cost exceeds `budget`, with upstream's text (`estimated rule cost
    /// exceeds budget by factor of N`).
    pub fn check_estimated_cost(
        &self,
        variables: &[VariableSchema<'_>],
        budget: u64,
    ) -> Result<(), CompileError> {
        self.check_estimated_cost_times(variables, 1, budget)
    }

    /// As [`Program::check_estimated_cost`] for an expression that may run `times` times (a rule under lists or
    /// maps: upstream multiplies its estimate by their sizes, or by [`crate::max_cardinality`] when unbounded).
    pub fn check_estimated_cost_times(
        &self,
        variables: &[VariableSchema<'_>],
        times: u64,
        budget: u64,
    ) -> Result<(), CompileError> {
        let cost = self.estimate_cost(variables).max.saturating_mul(times);
        if cost > budget {
            return Err(CompileError::CostExceedsBudget {
                factor: estimate::budget_factor(cost, budget),
            });
        }
        Ok(())
    }
}

/// A parse error with cel-go's layout: the source line and the caret line each indented by ` | `.
fn syntax_error(e: cel::ParseErrors) -> CompileError {
    CompileError::Syntax(e.to_string().replace("\n| ", "\n | "))
}

/// Whether the environment declares a function `name` (as a member function when `member`): asked of the
/// interpreter by calling it without arguments, which fails with "undeclared reference" only when it is not.
fn declared(name: &str, member: bool) -> bool {
    use cel::common::ast::{CallExpr, Expr, LiteralValue};
    let call = IdedExpr {
        id: 1,
        expr: Expr::Call(CallExpr {
            func_name: name.to_owned(),
            target: member.then(|| {
                Box::new(IdedExpr {
                    id: 2,
                    expr: Expr::Literal(LiteralValue::Null),
                })
            }),
            args: Vec::new(),
        }),
    };
    let context = Context::with_env(Arc::clone(env()));
    // a function called without its arguments may fail any way it likes, panics included: only "undeclared" counts
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Value::resolve(&call, &context)
    })) {
        Ok(Err(ExecutionError::UndeclaredReference(n))) => n.as_str() != name,
        _ => true,
    }
}

/// Whether `expr` nests deeper than `limit`; walked with an explicit stack, so any depth is safe to ask about.
fn depth_exceeds(expr: &IdedExpr, limit: usize) -> bool {
    let mut stack: Vec<(&IdedExpr, usize)> = vec![(expr, 1usize)];
    while let Some((e, depth)) = stack.pop() {
        if depth > limit {
            return true;
        }
        let mut children: Vec<&IdedExpr> = Vec::new();
        let mut push = |child| children.push(child);
        match &e.expr {
            Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => {}
            Expr::Select(s) => push(&s.operand),
            Expr::Call(c) => {
                c.target
                    .as_deref()
                    .into_iter()
                    .chain(c.args.iter())
                    .for_each(&mut push);
            }
            Expr::List(l) => l.elements.iter().for_each(&mut push),
            Expr::Map(_) | Expr::Struct(_) => m_entries(&e.expr).into_iter().for_each(&mut push),
            Expr::Comprehension(c) => {
                for child in [
                    &c.iter_range,
                    &c.accu_init,
                    &c.loop_cond,
                    &c.loop_step,
                    &c.result,
                ] {
                    push(child);
                }
            }
        }
        stack.extend(children.into_iter().map(|c| (c, depth + 1)));
    }
    false
}

fn m_entries(expr: &Expr) -> Vec<&IdedExpr> {
    use cel::common::ast::EntryExpr;
    let entries = match expr {
        Expr::Map(m) => &m.entries,
        Expr::Struct(s) => &s.entries,
        _ => return vec![],
    };
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

/// The variables an expression is evaluated with (`self`, `oldSelf`, `object`, `request`, `params`, ...).
#[derive(Debug, Default)]
pub struct Activation {
    variables: BTreeMap<String, Box<dyn Val>>,
}

impl Activation {
    pub fn new() -> Activation {
        Activation::default()
    }

    /// Binds `name` to a CEL value.
    pub fn bind(mut self, name: &str, value: Value) -> Activation {
        self.insert(name, value);
        self
    }

    /// Binds `name` to JSON converted without a schema (see [`crate::json_to_value`]).
    pub fn bind_json(self, name: &str, json: &Json) -> Activation {
        self.bind(name, convert::json_to_value(json))
    }

    /// Binds `name` to JSON converted as its OpenAPI v3 `schema` says (see [`crate::json_to_value_with_schema`]).
    pub fn bind_json_with_schema(
        self,
        name: &str,
        json: &Json,
        schema: &Json,
    ) -> Result<Activation, EvalError> {
        Ok(self.bind(name, convert::json_to_value_with_schema(json, schema)?))
    }

    /// Binds `name` to a map from string keys to CEL values (a policy's `variables`).
    pub fn bind_map(
        self,
        name: &str,
        entries: impl IntoIterator<Item = (String, Value)>,
    ) -> Activation {
        let map = entries
            .into_iter()
            .map(|(k, v)| (cel::objects::Key::String(Arc::new(k)), v))
            .collect::<std::collections::HashMap<_, _>>();
        self.bind(name, Value::Map(cel::objects::Map { map: Arc::new(map) }))
    }

    /// Binds `name` to a CEL value, in place.
    pub fn insert(&mut self, name: &str, value: Value) {
        // Every `Value` but a function converts; a function value cannot be written in CEL, so leave it unbound.
        if let Ok(val) = Box::<dyn Val>::try_from(value) {
            self.variables.insert(name.to_owned(), val);
        }
    }
}

impl VariableResolver for Activation {
    fn resolve<'b>(&'b self, variable: &str) -> Option<CowVal<'b, 'b>> {
        self.variables
            .get(variable)
            .map(|v| CowVal::Borrowed(v.as_ref()))
    }
}
