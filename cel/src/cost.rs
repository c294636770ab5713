//! Runtime cost: what an evaluation has spent, and the limit it must stay under.
//!
//! The `cel` crate has no cost tracker and no interpreter hook, so cost is counted in two places we control:
//!
//! - the program's AST is rewritten at compile time ([`instrument`]): every comprehension's per-iteration work is
//!   guarded by a call to [`CHARGE`] with the static cost of one iteration (its loop condition and step, nested
//!   comprehensions excepted, as they charge their own iterations), and every `_+_` is wrapped in [`CHARGE_SIZE`],
//!   which charges a tenth of the size of the string, bytes or list it produced (upstream's traversal factor);
//! - library functions charge what their work depends on (string lengths, list sizes) with [`charge`].
//!
//! The static part of the expression is charged once when evaluation starts. The tracker lives in a thread-local for
//! the duration of one evaluation (the crate's overloads are plain `fn`s and cannot capture it); evaluation is
//! synchronous, so nothing else runs on the thread meanwhile.

use cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue, operators,
};
use cel::common::types::{CelBool, CelInt, DYN_TYPE, INT_TYPE};
use cel::common::value::CowVal;
use cel::{DeclarationError, Env, ExecutionError};
use std::cell::Cell;

/// The per-expression runtime cost limit upstream applies to validation rules and admission policy expressions
/// (`PerCallLimit`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The total runtime cost upstream allows all the validation rules of one CRD request (`RuntimeCELCostBudget`).
pub const RUNTIME_COST_BUDGET: u64 = 10_000_000;

/// What upstream charges for one authorization `check` (a fixed cost, "allows for only two authorization checks per
/// expression" under [`PER_CALL_LIMIT`]).
pub const CHECK_COST: u64 = 350_000;

/// The text of upstream's runtime cost error.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Cost of an identifier or field selection (cel-go's `SelectAndIdentCost`).
const SELECT_AND_IDENT_COST: u64 = 1;
/// Cost of a function call or operator.
const CALL_COST: u64 = 1;
/// Cost of building a list literal (cel-go's `ListCreateBaseCost`).
const LIST_CREATE_COST: u64 = 10;
/// Cost of building a map literal (cel-go's `MapCreateBaseCost`).
const MAP_CREATE_COST: u64 = 30;

/// The function a comprehension's iteration calls before its work: `@cost.charge(n)` charges `n`, returns `true`.
pub(crate) const CHARGE: &str = "@cost.charge";
/// `@cost.size(x)` charges for the size of `x` and returns it.
pub(crate) const CHARGE_SIZE: &str = "@cost.size";

thread_local! {
    static SPENT: Cell<u64> = const { Cell::new(0) };
    static LIMIT: Cell<u64> = const { Cell::new(u64::MAX) };
    static EXCEEDED: Cell<bool> = const { Cell::new(false) };
}

/// Adds `n` to the running evaluation's cost, failing once the limit is passed. The failure is remembered, so an
/// error that CEL's `&&`/`||` would absorb still ends the evaluation with the cost error.
pub(crate) fn charge(n: u64) -> Result<(), ExecutionError> {
    if EXCEEDED.with(Cell::get) {
        // Already over: fail again at once, without counting (CEL's `&&`/`||` and `all`/`exists` go on evaluating
        // the rest after an error, each further step stopping here).
        return Err(crate::library::error(COST_LIMIT_EXCEEDED));
    }
    let spent = SPENT.with(|s| {
        let v = s.get().saturating_add(n);
        s.set(v);
        v
    });
    if spent > LIMIT.with(Cell::get) {
        EXCEEDED.with(|e| e.set(true));
        return Err(crate::library::error(COST_LIMIT_EXCEEDED));
    }
    Ok(())
}

/// Charges the traversal of `len` units (characters, bytes, elements): a tenth of them, rounded up.
pub(crate) fn charge_traversal(len: usize) -> Result<(), ExecutionError> {
    charge((len as u64).div_ceil(10))
}

/// One evaluation's tracking: installed on the thread by [`Meter::start`], the previous one put back on drop (so a
/// library function that evaluates another program does not disturb the outer count).
pub(crate) struct Meter {
    saved: (u64, u64, bool),
}

impl Meter {
    pub(crate) fn start(limit: u64) -> Meter {
        let saved = (
            SPENT.with(|s| s.replace(0)),
            LIMIT.with(|l| l.replace(limit)),
            EXCEEDED.with(|e| e.replace(false)),
        );
        Meter { saved }
    }

    pub(crate) fn spent(&self) -> u64 {
        SPENT.with(Cell::get)
    }

    pub(crate) fn exceeded(&self) -> bool {
        EXCEEDED.with(Cell::get)
    }
}

impl Drop for Meter {
    fn drop(&mut self) {
        SPENT.with(|s| s.set(self.saved.0));
        LIMIT.with(|l| l.set(self.saved.1));
        EXCEEDED.with(|e| e.set(self.saved.2));
    }
}

/// Registers the functions the instrumented AST calls. Their names start with `@`, which CEL source cannot write.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_overload(CHARGE, "@cost_charge_int", vec![INT_TYPE], charge_overload)?;
    env.add_overload(
        CHARGE_SIZE,
        "@cost_size_dyn",
        vec![DYN_TYPE],
        charge_size_overload,
    )
}

fn charge_overload<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let n = args
        .first()
        .and_then(|a| a.downcast_ref::<CelInt>())
        .map(|i| (*i.inner()).max(0) as u64)
        .unwrap_or(0);
    charge(n)?;
    Ok(CowVal::owned(CelBool::from(true)))
}

fn charge_size_overload<'b, 'v>(
    mut args: Vec<CowVal<'b, 'v>>,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let Some(value) = args.pop() else {
        return Err(ExecutionError::invalid_argument_count(1, 0));
    };
    if let Some(sizer) = value.as_sizer() {
        charge_traversal((*sizer.size().inner()).max(0) as usize)?;
    }
    Ok(value)
}

/// The static cost of `expr`: every node evaluated once, a comprehension's iterations excepted (they charge at
/// run time).
pub(crate) fn static_cost(expr: &IdedExpr) -> u64 {
    match &expr.expr {
        Expr::Unspecified | Expr::Literal(_) => 0,
        Expr::Ident(_) => SELECT_AND_IDENT_COST,
        Expr::Select(s) => SELECT_AND_IDENT_COST + static_cost(&s.operand),
        Expr::Call(c) => {
            CALL_COST
                + c.target.as_deref().map_or(0, static_cost)
                + c.args.iter().map(static_cost).sum::<u64>()
        }
        Expr::List(l) => LIST_CREATE_COST + l.elements.iter().map(static_cost).sum::<u64>(),
        Expr::Map(m) => {
            MAP_CREATE_COST
                + m.entries
                    .iter()
                    .map(|e| match &e.expr {
                        EntryExpr::MapEntry(e) => static_cost(&e.key) + static_cost(&e.value),
                        EntryExpr::StructField(f) => static_cost(&f.value),
                    })
                    .sum::<u64>()
        }
        Expr::Struct(s) => {
            MAP_CREATE_COST
                + s.entries
                    .iter()
                    .map(|e| match &e.expr {
                        EntryExpr::MapEntry(e) => static_cost(&e.key) + static_cost(&e.value),
                        EntryExpr::StructField(f) => static_cost(&f.value),
                    })
                    .sum::<u64>()
        }
        Expr::Comprehension(c) => {
            static_cost(&c.iter_range) + static_cost(&c.accu_init) + static_cost(&c.result)
        }
    }
}

/// The cost of one iteration of `c`: its loop condition and step.
fn iteration_cost(c: &ComprehensionExpr) -> u64 {
    1 + static_cost(&c.loop_cond) + static_cost(&c.loop_step)
}

/// Rewrites `expr` so that evaluating it charges its dynamic cost, see the module documentation.
pub(crate) fn instrument(expr: &mut IdedExpr, next_id: &mut u64) {
    match &mut expr.expr {
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => {}
        Expr::Select(s) => instrument(&mut s.operand, next_id),
        Expr::Call(c) => {
            if let Some(t) = c.target.as_deref_mut() {
                instrument(t, next_id);
            }
            for a in &mut c.args {
                instrument(a, next_id);
            }
            if c.func_name == operators::ADD && c.target.is_none() && !is_accumulation(c) {
                let inner = std::mem::take(expr);
                *expr = call(next_id, CHARGE_SIZE, vec![inner]);
            }
        }
        Expr::List(l) => l.elements.iter_mut().for_each(|e| instrument(e, next_id)),
        Expr::Map(m) => m
            .entries
            .iter_mut()
            .for_each(|e| instrument_entry(&mut e.expr, next_id)),
        Expr::Struct(s) => s
            .entries
            .iter_mut()
            .for_each(|e| instrument_entry(&mut e.expr, next_id)),
        Expr::Comprehension(c) => {
            let per_iteration = iteration_cost(c);
            instrument(&mut c.iter_range, next_id);
            instrument(&mut c.accu_init, next_id);
            instrument(&mut c.loop_cond, next_id);
            instrument(&mut c.loop_step, next_id);
            instrument(&mut c.result, next_id);
            guard_iteration(c, per_iteration, next_id);
        }
    }
}

fn instrument_entry(entry: &mut EntryExpr, next_id: &mut u64) {
    match entry {
        EntryExpr::MapEntry(e) => {
            instrument(&mut e.key, next_id);
            instrument(&mut e.value, next_id);
        }
        EntryExpr::StructField(f) => instrument(&mut f.value, next_id),
    }
}

/// `@result + [x]`, the accumulation of `map`/`filter`, which the crate evaluates in place: left alone.
fn is_accumulation(c: &CallExpr) -> bool {
    matches!(c.args.as_slice(), [lhs, rhs] if matches!(lhs.expr, Expr::Ident(_)) && matches!(rhs.expr, Expr::List(_)))
}

/// Puts `@cost.charge(n) ? <work> : null` around the per-iteration work of `c`, keeping the shapes the crate
/// recognises (`@result && x`, `@result || x`, `@result + [x]`, `g ? @result + [x] : @result`) intact, so that it
/// still evaluates them the way it does (short-circuits, deferred errors, in-place appends).
fn guard_iteration(c: &mut ComprehensionExpr, n: u64, next_id: &mut u64) {
    let accu = c.accu_var.clone();
    let is_accu = |e: &IdedExpr| matches!(&e.expr, Expr::Ident(name) if *name == accu);
    let step = &mut c.loop_step;
    let slot: &mut IdedExpr = match &mut step.expr {
        Expr::Call(call)
            if (call.func_name == operators::LOGICAL_AND
                || call.func_name == operators::LOGICAL_OR)
                && call.args.len() == 2
                && is_accu(&call.args[0]) =>
        {
            &mut call.args[1]
        }
        Expr::Call(call)
            if call.func_name == operators::ADD
                && call.args.len() == 2
                && is_accu(&call.args[0]) =>
        {
            match &mut call.args[1].expr {
                Expr::List(list) if list.elements.len() == 1 => &mut list.elements[0],
                _ => step,
            }
        }
        Expr::Call(call)
            if call.func_name == operators::CONDITIONAL
                && call.args.len() == 3
                && is_accu(&call.args[2]) =>
        {
            &mut call.args[0]
        }
        _ => step,
    };
    let work = std::mem::take(slot);
    let amount = literal(next_id, LiteralValue::Int(CelInt::from(n as i64)));
    let check = call(next_id, CHARGE, vec![amount]);
    let otherwise = literal(next_id, LiteralValue::Null);
    *slot = call(
        next_id,
        operators::CONDITIONAL,
        vec![check, work, otherwise],
    );
}

fn call(next_id: &mut u64, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
    *next_id += 1;
    IdedExpr {
        id: *next_id,
        expr: Expr::Call(CallExpr {
            func_name: name.to_owned(),
            target: None,
            args,
        }),
    }
}

fn literal(next_id: &mut u64, value: LiteralValue) -> IdedExpr {
    *next_id += 1;
    IdedExpr {
        id: *next_id,
        expr: Expr::Literal(value),
    }
}

/// The largest node id in `expr`, so that instrumentation can number its new nodes after it.
pub(crate) fn max_id(expr: &IdedExpr) -> u64 {
    let children: Vec<&IdedExpr> = match &expr.expr {
        Expr::Unspecified | Expr::Literal(_) | Expr::Ident(_) => vec![],
        Expr::Select(s) => vec![&s.operand],
        Expr::Call(c) => c
            .target
            .as_deref()
            .into_iter()
            .chain(c.args.iter())
            .collect(),
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
    };
    children.into_iter().map(max_id).fold(expr.id, u64::max)
}

fn entries(entries: &[cel::common::ast::IdedEntryExpr]) -> Vec<&IdedExpr> {
    entries
        .iter()
        .flat_map(|e| match &e.expr {
            EntryExpr::MapEntry(e) => vec![&e.key, &e.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}
