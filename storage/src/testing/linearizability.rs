//! A linearizability checker for recorded histories of storage operations (feature `testing`).
//!
//! The search is Wing & Gong's, with Lowe's memoization as Porcupine does it: the call and return entries of a
//! history are kept in one time-ordered doubly-linked list; a depth-first search linearizes the operation of the
//! first call entry it can (the model accepts it from the current state and the pair (set of linearized
//! operations, state) was not tried before), lifts its two entries out of the list and starts over; reaching a
//! return entry of an operation not yet linearized means that prefix is a dead end, so it backtracks. The history
//! is linearizable when the list empties.
//!
//! Models may be nondeterministic ([`Model::step`] returns every possible next state) so an operation whose
//! outcome is unknown (a timeout, a broken connection: "maybe happened") is expressed as an operation that returns
//! at infinity and may or may not have taken effect.
//!
//! [`KvModel`] is the model of one key of a [`Storage`]: create, get, compare-and-swap
//! on the resourceVersion, read-modify-write, upsert and delete (with or without a resourceVersion precondition),
//! every write returning the revision it took. [`check_kv_history`] checks a history of many keys: each key on its
//! own (a key's operations never constrain another key's), then the one constraint across keys, that revisions are
//! unique and never go backwards in real time ([`check_revision_order`]). [`record_storage_history`] drives a
//! store with concurrent random clients and records such a history.

use std::collections::{BTreeMap, HashSet};
use std::fmt::{self, Debug};
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::{AllowDeletion, GetOptions, Preconditions, Storage, StorageError, StoredObject};

// ---------------------------------------------------------------- the generic checker

/// A sequential specification: which states an operation may lead to.
pub trait Model {
    /// The model's state; hashed for the memoization cache.
    type State: Clone + Eq + Hash + Debug;
    /// What an operation asked for.
    type Input: Debug;
    /// What it answered.
    type Output: Debug;

    /// The state before any operation.
    fn init(&self) -> Self::State;

    /// Every state `state` may move to when the operation `input` takes effect answering `output` (`None`: the
    /// answer is unknown, the operation may or may not have taken effect). Empty when the answer is impossible
    /// from `state`.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Vec<Self::State>;
}

/// One operation of a history. Times are from one monotonic clock, in any unit.
#[derive(Clone, Debug)]
pub struct Operation<I, O> {
    /// Which client issued it (for reports).
    pub client: usize,
    /// When it was called.
    pub call: u64,
    /// When it returned (ignored when `output` is `None`: an operation of unknown outcome may take effect at any
    /// time after its call, so it returns at infinity).
    pub ret: u64,
    /// What it asked.
    pub input: I,
    /// Its answer; `None` when unknown (timed out, failed ambiguously).
    pub output: Option<O>,
}

/// The verdict of [`check_operations`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A linearization exists.
    Linearizable,
    /// None exists; the longest linearizable prefix the search found is attached (operation indices, in order).
    NotLinearizable {
        /// The indices of the operations of the longest prefix the search could linearize, in that order.
        longest_prefix: Vec<usize>,
    },
    /// The search gave up after its step budget.
    Unknown,
}

struct Entry {
    time: u64,
    is_call: bool,
    op: usize,
}

/// A fixed-size set of operation indices.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Self {
        Bits(vec![0; n.div_ceil(64)])
    }
    fn set(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }
    fn clear(&mut self, i: usize) {
        self.0[i / 64] &= !(1 << (i % 64));
    }
}

const NIL: usize = usize::MAX;

struct Frame<S> {
    call_entry: usize,
    prev_state: S,
    alternatives: Vec<S>,
    tried: usize,
}

/// Whether `ops` is linearizable with respect to `model`, searching at most `max_steps` steps (then
/// [`Verdict::Unknown`]).
pub fn check_operations<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    max_steps: u64,
) -> Verdict {
    // Entries in time order; at equal times calls come first (touching operations count as concurrent).
    let mut entries: Vec<Entry> = Vec::with_capacity(ops.len() * 2);
    for (i, op) in ops.iter().enumerate() {
        entries.push(Entry {
            time: op.call,
            is_call: true,
            op: i,
        });
        let ret = if op.output.is_some() {
            op.ret.max(op.call)
        } else {
            u64::MAX
        };
        entries.push(Entry {
            time: ret,
            is_call: false,
            op: i,
        });
    }
    entries.sort_by_key(|e| (e.time, !e.is_call, e.op));
    let n = entries.len();
    let head = n;
    let mut next = vec![NIL; n + 1];
    let mut prev = vec![NIL; n + 1];
    let mut ret_of = vec![NIL; ops.len()];
    let mut order = head;
    for (i, e) in entries.iter().enumerate() {
        next[order] = i;
        prev[i] = order;
        order = i;
        if !e.is_call {
            ret_of[e.op] = i;
        }
    }
    let mut return_entry = vec![NIL; n];
    for (i, e) in entries.iter().enumerate() {
        if e.is_call {
            return_entry[i] = ret_of[e.op];
        }
    }
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        let (p, q) = (prev[x], next[x]);
        next[p] = q;
        if q != NIL {
            prev[q] = p;
        }
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        let (p, q) = (prev[x], next[x]);
        next[p] = x;
        if q != NIL {
            prev[q] = x;
        }
    };

    let mut linearized = Bits::new(ops.len());
    let mut state = model.init();
    let mut stack: Vec<Frame<M::State>> = Vec::new();
    let mut cache: HashSet<(Bits, M::State)> = HashSet::new();
    let mut longest: Vec<usize> = Vec::new();
    let mut steps = 0u64;
    let mut entry = next[head];

    // Tries the alternatives of `frame` from `frame.tried` on; true when one is new and was taken.
    let take = |frame: &mut Frame<M::State>,
                linearized: &mut Bits,
                cache: &mut HashSet<(Bits, M::State)>,
                op: usize|
     -> Option<M::State> {
        linearized.set(op);
        while frame.tried < frame.alternatives.len() {
            let candidate = frame.alternatives[frame.tried].clone();
            frame.tried += 1;
            if cache.insert((linearized.clone(), candidate.clone())) {
                return Some(candidate);
            }
        }
        linearized.clear(op);
        None
    };

    loop {
        steps += 1;
        if steps > max_steps {
            return Verdict::Unknown;
        }
        if next[head] == NIL {
            return Verdict::Linearizable;
        }
        let e = &entries[entry];
        if e.is_call {
            let op = e.op;
            let mut frame = Frame {
                call_entry: entry,
                prev_state: state.clone(),
                alternatives: model.step(&state, &ops[op].input, ops[op].output.as_ref()),
                tried: 0,
            };
            if let Some(new_state) = take(&mut frame, &mut linearized, &mut cache, op) {
                state = new_state;
                unlink(&mut next, &mut prev, entry);
                unlink(&mut next, &mut prev, return_entry[entry]);
                stack.push(frame);
                if stack.len() > longest.len() {
                    longest = stack.iter().map(|f| entries[f.call_entry].op).collect();
                }
                entry = next[head];
            } else {
                entry = next[entry];
            }
        } else {
            // The return of an operation not linearized yet: this prefix cannot be extended.
            let Some(mut frame) = stack.pop() else {
                return Verdict::NotLinearizable {
                    longest_prefix: longest,
                };
            };
            let call = frame.call_entry;
            let op = entries[call].op;
            relink(&mut next, &mut prev, return_entry[call]);
            relink(&mut next, &mut prev, call);
            linearized.clear(op);
            state = frame.prev_state.clone();
            if let Some(new_state) = take(&mut frame, &mut linearized, &mut cache, op) {
                state = new_state;
                unlink(&mut next, &mut prev, call);
                unlink(&mut next, &mut prev, return_entry[call]);
                stack.push(frame);
                entry = next[head];
            } else {
                entry = next[call];
            }
        }
    }
}

// ---------------------------------------------------------------- the key-value model

/// A value written to a key: unique per write in a recorded history, so a read names the write it saw.
pub type Value = u64;

/// A value and the revision that wrote it, as a read or a read-modify-write saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Version {
    /// The value.
    pub value: Value,
    /// Its modification revision (resourceVersion).
    pub revision: u64,
}

/// What a write saw as the current object before writing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prev {
    /// Not observed (a blind write, or a protocol that does not report it).
    Unobserved,
    /// The key did not exist.
    Absent,
    /// This version.
    Present(Version),
}

/// An operation on one key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvInput {
    /// Create the key with this value; fails if it exists.
    Create(Value),
    /// Read the key.
    Get,
    /// Write `value` if the key is at revision `expect` (guaranteed_update with a resourceVersion precondition,
    /// PUT with a resourceVersion).
    Cas {
        /// The revision the key must be at.
        expect: u64,
        /// The new value.
        value: Value,
    },
    /// Read-modify-write of an existing key (guaranteed_update whose try-update reads the current object).
    Update(Value),
    /// Write whether or not the key exists (guaranteed_update with `ignore_not_found`).
    Upsert(Value),
    /// Delete the key, if it is at revision `expect` when given.
    Delete {
        /// The revision precondition.
        expect: Option<u64>,
    },
}

/// The answer to a [`KvInput`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvOutput {
    /// A write (create, CAS, update, upsert) took effect at `revision`, having seen `prev`.
    Written {
        /// The revision of the write.
        revision: u64,
        /// What it replaced, when known.
        prev: Prev,
    },
    /// A get found this version.
    Read(Version),
    /// A delete removed `value`; the deletion took `revision`.
    Deleted {
        /// The value deleted.
        value: Value,
        /// The revision of the deletion.
        revision: u64,
    },
    /// A delete succeeded without saying what it removed or at which revision (an HTTP DELETE answering a
    /// Status).
    Gone,
    /// The key did not exist (get, update, CAS, delete).
    NotFound,
    /// The key existed (create).
    Exists,
    /// The resourceVersion precondition did not hold (CAS, delete).
    PreconditionFailed,
}

/// The state of one key in [`KvModel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KvState {
    /// The current value and its revision; `None` as the revision after a write of unknown outcome whose
    /// revision nobody has seen yet (it is then only known to be above `last_write`).
    pub current: Option<(Value, Option<u64>)>,
    /// The highest known revision of a write (or deletion) of the key: the next write must be above it.
    pub last_write: u64,
}

/// The sequential specification of one key of a [`Storage`].
#[derive(Clone, Copy, Debug, Default)]
pub struct KvModel;

/// Whether a current revision (`None`: unknown, above `last`) may be `x`.
fn may_be(rev: Option<u64>, x: u64, last: u64) -> bool {
    match rev {
        Some(r) => r == x,
        None => x > last,
    }
}

impl KvModel {
    /// The state after a version was observed as current: pins an unknown revision.
    fn observed(s: &KvState, v: Version) -> Option<KvState> {
        match s.current {
            Some((value, rev)) if value == v.value && may_be(rev, v.revision, s.last_write) => {
                Some(KvState {
                    current: Some((value, Some(v.revision))),
                    last_write: s.last_write.max(v.revision),
                })
            }
            _ => None,
        }
    }

    fn prev_matches(s: &KvState, prev: Prev) -> Option<KvState> {
        match prev {
            Prev::Unobserved => Some(*s),
            Prev::Absent => s.current.is_none().then_some(*s),
            Prev::Present(v) => Self::observed(s, v),
        }
    }

    fn written(s: &KvState, value: Value, revision: u64) -> Option<KvState> {
        (revision > s.last_write).then_some(KvState {
            current: Some((value, Some(revision))),
            last_write: revision,
        })
    }
}

impl Model for KvModel {
    type State = KvState;
    type Input = KvInput;
    type Output = KvOutput;

    fn init(&self) -> KvState {
        KvState {
            current: None,
            last_write: 0,
        }
    }

    fn step(&self, s: &KvState, input: &KvInput, output: Option<&KvOutput>) -> Vec<KvState> {
        use KvInput as I;
        use KvOutput as O;
        let exists = s.current.is_some();
        let rev_may_be = |x: u64| s.current.is_some_and(|(_, r)| may_be(r, x, s.last_write));
        let rev_may_differ = |x: u64| s.current.is_some_and(|(_, r)| r != Some(x));
        let unknown_write = |value: Value| KvState {
            current: Some((value, None)),
            last_write: s.last_write,
        };
        let Some(output) = output else {
            // Unknown outcome: no effect, or the effect with an unseen revision.
            let mut states = vec![*s];
            match *input {
                I::Get => {}
                I::Create(v) if !exists => states.push(unknown_write(v)),
                I::Cas { expect, value } if rev_may_be(expect) => states.push(unknown_write(value)),
                I::Update(v) if exists => states.push(unknown_write(v)),
                I::Upsert(v) => states.push(unknown_write(v)),
                I::Delete { expect } if exists && expect.is_none_or(rev_may_be) => {
                    states.push(KvState {
                        current: None,
                        last_write: s.last_write,
                    })
                }
                _ => {}
            }
            return states;
        };
        let next = match (*input, *output) {
            (I::Create(v), O::Written { revision, prev }) if !exists => {
                Self::prev_matches(s, prev).and_then(|s| Self::written(&s, v, revision))
            }
            (I::Create(_), O::Exists) if exists => Some(*s),
            (I::Get, O::Read(v)) => Self::observed(s, v),
            (I::Get | I::Update(_) | I::Cas { .. } | I::Delete { .. }, O::NotFound) if !exists => {
                Some(*s)
            }
            // A swap to the bytes already there writes nothing and reports the revision it expected.
            (I::Cas { expect, value }, O::Written { revision, .. }) if revision == expect => {
                Self::observed(s, Version { value, revision })
            }
            (I::Cas { expect, value }, O::Written { revision, prev }) if rev_may_be(expect) => {
                let (v, _) = s.current.expect("exists");
                Self::observed(
                    s,
                    Version {
                        value: v,
                        revision: expect,
                    },
                )
                .and_then(|s| Self::prev_matches(&s, prev))
                .and_then(|s| Self::written(&s, value, revision))
            }
            (
                I::Cas { expect, .. }
                | I::Delete {
                    expect: Some(expect),
                },
                O::PreconditionFailed,
            ) if rev_may_differ(expect) => Some(*s),
            // The same bytes again: nothing is written, the current object is returned (the Storage contract).
            (
                I::Update(v) | I::Upsert(v),
                O::Written {
                    revision,
                    prev: Prev::Present(p),
                },
            ) if p.revision == revision && p.value == v => Self::observed(s, p),
            (I::Update(v), O::Written { revision, prev }) if exists => {
                Self::prev_matches(s, prev).and_then(|s| Self::written(&s, v, revision))
            }
            (I::Upsert(v), O::Written { revision, prev }) => {
                Self::prev_matches(s, prev).and_then(|s| Self::written(&s, v, revision))
            }
            (I::Delete { expect }, O::Gone) if exists && expect.is_none_or(rev_may_be) => {
                let pinned = match (s.current, expect) {
                    (Some((cur, _)), Some(expect)) => Self::observed(
                        s,
                        Version {
                            value: cur,
                            revision: expect,
                        },
                    ),
                    _ => Some(*s),
                };
                pinned.map(|s| KvState {
                    current: None,
                    last_write: s.last_write,
                })
            }
            (I::Delete { expect }, O::Deleted { value, revision }) => {
                let s = match (s.current, expect) {
                    (Some((cur, _)), Some(expect)) => Self::observed(
                        s,
                        Version {
                            value: cur,
                            revision: expect,
                        },
                    ),
                    _ => Some(*s),
                };
                s.filter(|s| {
                    s.current.is_some_and(|(cur, _)| cur == value) && revision > s.last_write
                })
                .map(|_| KvState {
                    current: None,
                    last_write: revision,
                })
            }
            _ => None,
        };
        next.into_iter().collect()
    }
}

/// One recorded operation on a key.
pub type KvOperation = Operation<KvInput, KvOutput>;

/// An operation of a history of several keys.
#[derive(Clone, Debug)]
pub struct KeyedOperation {
    /// The key (any name; operations on different keys are independent but for revision order).
    pub key: String,
    /// The operation.
    pub op: KvOperation,
}

/// What [`check_kv_history`] found.
#[derive(Clone, Debug, Default)]
pub struct KvReport {
    /// Operations checked.
    pub operations: usize,
    /// Of which with unknown outcome.
    pub ambiguous: usize,
    /// Keys whose history is not linearizable, with an explanation each.
    pub violations: Vec<String>,
    /// Keys the search gave up on.
    pub unknown: Vec<String>,
}

impl KvReport {
    /// True when every key was linearizable and revisions were consistent.
    pub fn is_linearizable(&self) -> bool {
        self.violations.is_empty() && self.unknown.is_empty()
    }
}

impl fmt::Display for KvReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} operations ({} ambiguous): {} violation(s), {} undecided key(s)",
            self.operations,
            self.ambiguous,
            self.violations.len(),
            self.unknown.len()
        )?;
        for v in &self.violations {
            writeln!(f, "{v}")?;
        }
        for u in &self.unknown {
            writeln!(f, "undecided: {u}")?;
        }
        Ok(())
    }
}

/// Steps the search may take per key before giving up.
pub const MAX_STEPS_PER_KEY: u64 = 20_000_000;

/// Checks a history of several keys: each key's operations against [`KvModel`], then [`check_revision_order`]
/// across keys.
pub fn check_kv_history(history: &[KeyedOperation]) -> KvReport {
    let mut by_key: BTreeMap<&str, Vec<KvOperation>> = BTreeMap::new();
    for k in history {
        // A read of unknown outcome constrains nothing.
        if k.op.input == KvInput::Get && k.op.output.is_none() {
            continue;
        }
        by_key.entry(&k.key).or_default().push(k.op.clone());
    }
    let mut report = KvReport {
        operations: history.len(),
        ambiguous: history.iter().filter(|k| k.op.output.is_none()).count(),
        ..KvReport::default()
    };
    for (key, ops) in &by_key {
        match check_operations(&KvModel, ops, MAX_STEPS_PER_KEY) {
            Verdict::Linearizable => {}
            Verdict::Unknown => report.unknown.push(key.to_string()),
            Verdict::NotLinearizable { longest_prefix } => {
                report.violations.push(explain(key, ops, &longest_prefix));
            }
        }
    }
    report.violations.extend(check_revision_order(history));
    report
}

/// A readable account of a key's non-linearizable history: the longest linearizable prefix, then every other
/// operation in call order.
fn explain(key: &str, ops: &[KvOperation], prefix: &[usize]) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "key {key:?} is not linearizable; the longest linearizable prefix ({} of {} operations):\n",
        prefix.len(),
        ops.len()
    );
    let line = |s: &mut String, op: &KvOperation| {
        let ret = match op.output {
            Some(_) => op.ret.to_string(),
            None => "?".to_string(),
        };
        let _ = writeln!(
            s,
            "  client {:>2} [{:>12} .. {:>12}] {:?} -> {:?}",
            op.client, op.call, ret, op.input, op.output
        );
    };
    for &i in prefix {
        line(&mut s, &ops[i]);
    }
    let _ = writeln!(s, " then none of these fits next:");
    let mut rest: Vec<&KvOperation> = (0..ops.len())
        .filter(|i| !prefix.contains(i))
        .map(|i| &ops[i])
        .collect();
    rest.sort_by_key(|op| op.call);
    for op in rest.iter().take(20) {
        line(&mut s, op);
    }
    if rest.len() > 20 {
        let _ = writeln!(s, "  ... and {} more", rest.len() - 20);
    }
    s
}

/// The revision an operation's answer carries, if any, and whether it is a write's.
fn revision_of(op: &KvOperation) -> Option<(u64, bool)> {
    match op.output? {
        // An update to the bytes already there wrote nothing: it reports the current revision, as a read does.
        KvOutput::Written {
            revision,
            prev: Prev::Present(p),
        } if p.revision == revision => Some((revision, false)),
        // So does a swap to them: a write would have taken a revision above the one it expected.
        KvOutput::Written { revision, .. } if matches!(op.input, KvInput::Cas { expect, .. } if expect == revision) => {
            Some((revision, false))
        }
        KvOutput::Written { revision, .. } | KvOutput::Deleted { revision, .. } => {
            Some((revision, true))
        }
        KvOutput::Read(v) => Some((v.revision, false)),
        _ => None,
    }
}

/// The constraints on revisions across keys: every acknowledged write took its own revision, and a write called
/// after an operation returned took a revision above the one that operation reported (revisions never go
/// backwards in real time). Returns the violations found.
pub fn check_revision_order(history: &[KeyedOperation]) -> Vec<String> {
    let mut violations = Vec::new();
    let mut seen: BTreeMap<u64, &KeyedOperation> = BTreeMap::new();
    for k in history {
        if let Some((rev, true)) = revision_of(&k.op)
            && let Some(other) = seen.insert(rev, k)
        {
            violations.push(format!(
                "revision {rev} was taken by two writes: {:?} {:?} -> {:?} and {:?} {:?} -> {:?}",
                other.key, other.op.input, other.op.output, k.key, k.op.input, k.op.output
            ));
        }
    }
    // Sweep: operations by return time, writes by call time; the highest revision returned before each write.
    let mut returned: Vec<(u64, u64, &KeyedOperation)> = history
        .iter()
        .filter_map(|k| revision_of(&k.op).map(|(rev, _)| (k.op.ret, rev, k)))
        .collect();
    returned.sort_by_key(|(ret, _, _)| *ret);
    let mut writes: Vec<&KeyedOperation> = history
        .iter()
        .filter(|k| matches!(revision_of(&k.op), Some((_, true))))
        .collect();
    writes.sort_by_key(|k| k.op.call);
    let mut i = 0;
    let mut highest: Option<(u64, &KeyedOperation)> = None;
    for w in writes {
        while i < returned.len() && returned[i].0 < w.op.call {
            if highest.is_none_or(|(h, _)| returned[i].1 > h) {
                highest = Some((returned[i].1, returned[i].2));
            }
            i += 1;
        }
        let (rev, _) = revision_of(&w.op).expect("a write");
        if let Some((h, before)) = highest
            && rev <= h
        {
            violations.push(format!(
                "revision went backwards: {:?} {:?} -> {:?} (called at {}) took revision {rev}, but {:?} {:?} -> \
                 {:?} had returned revision {h} at {}",
                w.key, w.op.input, w.op.output, w.op.call, before.key, before.op.input, before.op.output, before.op.ret
            ));
        }
    }
    violations
}

// ---------------------------------------------------------------- recording histories

/// A small deterministic random generator (splitmix64), so a failing history can be replayed from its seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// A shared recorder of [`KeyedOperation`]s with one monotonic clock (nanoseconds since it was made).
#[derive(Clone)]
pub struct Recorder {
    start: Instant,
    ops: Arc<Mutex<Vec<KeyedOperation>>>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Self {
        Recorder {
            start: Instant::now(),
            ops: Arc::default(),
        }
    }

    /// Nanoseconds since the recorder was made.
    pub fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Records an operation.
    pub fn record(&self, key: &str, op: KvOperation) {
        self.ops.lock().expect("recorder").push(KeyedOperation {
            key: key.to_string(),
            op,
        });
    }

    /// Everything recorded so far.
    pub fn history(&self) -> Vec<KeyedOperation> {
        self.ops.lock().expect("recorder").clone()
    }
}

/// How [`record_storage_history`] drives a store.
#[derive(Clone, Debug)]
pub struct Workload {
    /// Concurrent clients.
    pub clients: usize,
    /// Keys they share.
    pub keys: usize,
    /// Operations per client.
    pub ops_per_client: usize,
    /// Each operation is abandoned (recorded as of unknown outcome) after this long.
    pub op_timeout: Duration,
    /// The seed of the random choices (client `c` uses `seed + c`).
    pub seed: u64,
    /// When set, each client runs for this long instead of `ops_per_client` operations.
    pub duration: Option<Duration>,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            clients: 8,
            keys: 3,
            ops_per_client: 40,
            op_timeout: Duration::from_secs(10),
            seed: 1,
            duration: None,
        }
    }
}

/// The stored bytes of value `v` of key `name`: a JSON object like the conformance suite's.
pub fn encode_value(name: &str, v: Value) -> Bytes {
    Bytes::from(format!(
        r#"{{"metadata":{{"name":"{name}","uid":"uid-{name}"}},"data":"{v}"}}"#
    ))
}

/// The value in bytes written by [`encode_value`].
pub fn decode_value(bytes: &[u8]) -> Result<Value, StorageError> {
    let json: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| StorageError::Internal(format!("not a history value: {e}")))?;
    json["data"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| StorageError::Internal(format!("not a history value: {json}")))
}

fn version_of(o: &StoredObject) -> Result<Version, StorageError> {
    Ok(Version {
        value: decode_value(&o.value)?,
        revision: o.revision,
    })
}

/// The answer a storage error gives: `None` when it says nothing certain about the outcome.
pub fn output_of_error(e: &StorageError) -> Option<KvOutput> {
    match e {
        StorageError::KeyNotFound { .. } => Some(KvOutput::NotFound),
        StorageError::KeyExists { .. } => Some(KvOutput::Exists),
        StorageError::InvalidObj { message, .. } if message.starts_with("Precondition failed") => {
            Some(KvOutput::PreconditionFailed)
        }
        _ => None,
    }
}

/// Statistics of one recorded run, for the fault-injection tests.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    /// Operations that answered within the timeout.
    pub answered: usize,
    /// Operations that failed with an error of unknown outcome.
    pub errors: usize,
    /// Operations abandoned at the timeout (a hang, as the client sees it).
    pub timeouts: usize,
    /// The longest an operation took, timeouts included.
    pub longest: Duration,
    /// How many errors of unknown outcome had each HTTP status code ([`StorageError::code`]).
    pub error_codes: BTreeMap<u16, usize>,
    /// The first such error, for reports.
    pub first_error: Option<String>,
}

/// Runs one operation against `store`, records it and returns its answer (`None`: unknown outcome).
async fn run_one(
    store: &dyn Storage,
    rec: &Recorder,
    client: usize,
    key: &str,
    input: KvInput,
    timeout: Duration,
    stats: &Mutex<RunStats>,
) -> Option<KvOutput> {
    let name = key.rsplit('/').next().unwrap_or(key).to_string();
    let call = rec.now();
    let started = Instant::now();
    let fut = async {
        match input {
            KvInput::Create(v) => {
                store
                    .create(key, encode_value(&name, v))
                    .await
                    .map(|o| KvOutput::Written {
                        revision: o.revision,
                        prev: Prev::Absent,
                    })
            }
            KvInput::Get => match store.get(key, &GetOptions::default()).await {
                Ok(o) => version_of(&o).map(KvOutput::Read),
                Err(e) => Err(e),
            },
            KvInput::Cas { expect, value } => {
                let pre = Preconditions::new().with_resource_version(expect);
                let bytes = encode_value(&name, value);
                let mut f = |cur: Option<StoredObject>| {
                    let bytes = bytes.clone();
                    async move {
                        cur.ok_or_else(|| StorageError::Internal("no current object".into()))?;
                        Ok::<Bytes, StorageError>(bytes)
                    }
                };
                store
                    .guaranteed_update(key, false, Some(&pre), &mut f, None)
                    .await
                    .map(|o| KvOutput::Written {
                        revision: o.revision,
                        prev: Prev::Unobserved,
                    })
            }
            KvInput::Update(value) | KvInput::Upsert(value) => {
                let upsert = matches!(input, KvInput::Upsert(_));
                let seen: Arc<Mutex<Option<Prev>>> = Arc::default();
                let bytes = encode_value(&name, value);
                let mut f = |cur: Option<StoredObject>| {
                    let bytes = bytes.clone();
                    let seen = seen.clone();
                    async move {
                        let prev = match &cur {
                            None => Prev::Absent,
                            Some(o) => Prev::Present(version_of(o)?),
                        };
                        *seen.lock().expect("seen") = Some(prev);
                        Ok::<Bytes, StorageError>(bytes)
                    }
                };
                let o = store
                    .guaranteed_update(key, upsert, None, &mut f, None)
                    .await?;
                let prev = seen.lock().expect("seen").unwrap_or(Prev::Unobserved);
                Ok(KvOutput::Written {
                    revision: o.revision,
                    prev,
                })
            }
            KvInput::Delete { expect } => {
                let pre = expect.map(|rv| Preconditions::new().with_resource_version(rv));
                match store
                    .delete(key, pre.as_ref(), &mut AllowDeletion, None)
                    .await
                {
                    Ok(o) => decode_value(&o.value).map(|value| KvOutput::Deleted {
                        value,
                        revision: o.revision,
                    }),
                    Err(e) => Err(e),
                }
            }
        }
    };
    let result = tokio::time::timeout(timeout, fut).await;
    let ret = rec.now();
    let output = {
        let mut s = stats.lock().expect("stats");
        s.longest = s.longest.max(started.elapsed());
        match result {
            Ok(Ok(out)) => {
                s.answered += 1;
                Some(out)
            }
            Ok(Err(e)) => match output_of_error(&e) {
                Some(out) => {
                    s.answered += 1;
                    Some(out)
                }
                None => {
                    s.errors += 1;
                    *s.error_codes.entry(e.code()).or_default() += 1;
                    s.first_error.get_or_insert_with(|| e.to_string());
                    None
                }
            },
            Err(_) => {
                s.timeouts += 1;
                None
            }
        }
    };
    rec.record(
        key,
        Operation {
            client,
            call,
            ret,
            input,
            output,
        },
    );
    output
}

/// Picks a random operation; CAS and conditional deletes use the last revision this client saw of the key (or a
/// random small one).
pub fn random_input(rng: &mut Rng, next_value: &mut Value, last_seen: Option<u64>) -> KvInput {
    let expect = last_seen.unwrap_or_else(|| rng.below(5) + 1);
    let mut fresh = || {
        *next_value += 1;
        *next_value
    };
    match rng.below(100) {
        0..20 => KvInput::Create(fresh()),
        20..45 => KvInput::Get,
        45..63 => KvInput::Cas {
            expect,
            value: fresh(),
        },
        63..75 => KvInput::Update(fresh()),
        75..82 => KvInput::Upsert(fresh()),
        82..91 => KvInput::Delete { expect: None },
        _ => KvInput::Delete {
            expect: Some(expect),
        },
    }
}

/// The revision an answer reports for its key, for the next CAS of the same client.
pub fn seen_revision(output: Option<&KvOutput>) -> Option<u64> {
    match output? {
        KvOutput::Written { revision, .. } => Some(*revision),
        KvOutput::Read(v) => Some(v.revision),
        _ => None,
    }
}

/// Drives `store` with `workload.clients` concurrent clients doing random operations on `workload.keys` keys
/// under `prefix` and records the history (into `rec`, which may be shared with other recorders of the run).
/// Values are unique: client `c` writes `c * 1_000_000 + n`.
pub async fn record_storage_history(
    store: Arc<dyn Storage>,
    prefix: &str,
    workload: &Workload,
    rec: &Recorder,
) -> RunStats {
    let stats = Arc::new(Mutex::new(RunStats::default()));
    let mut tasks = Vec::new();
    for client in 0..workload.clients {
        let store = store.clone();
        let rec = rec.clone();
        let stats = stats.clone();
        let workload = workload.clone();
        let prefix = prefix.to_string();
        tasks.push(tokio::spawn(async move {
            let mut rng = Rng::new(workload.seed.wrapping_add(client as u64));
            let mut next_value = (client as u64 + 1) * 1_000_000;
            let mut seen: BTreeMap<usize, u64> = BTreeMap::new();
            let started = Instant::now();
            for n in 0.. {
                let more = match workload.duration {
                    Some(d) => started.elapsed() < d,
                    None => n < workload.ops_per_client,
                };
                if !more {
                    break;
                }
                let k = rng.below(workload.keys as u64) as usize;
                let key = format!("{prefix}/k{k}");
                let input = random_input(&mut rng, &mut next_value, seen.get(&k).copied());
                let output = run_one(
                    store.as_ref(),
                    &rec,
                    client,
                    &key,
                    input,
                    workload.op_timeout,
                    &stats,
                )
                .await;
                if let Some(rev) = seen_revision(output.as_ref()) {
                    seen.insert(k, rev);
                }
                if output.is_none() {
                    // Back off after a failure, as real clients do (and keep the history checkable).
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }));
    }
    for t in tasks {
        t.await.expect("history client panicked");
    }
    stats.lock().expect("stats").clone()
}

// ---------------------------------------------------------------- watches

/// Watches everything under `prefix` from revision `from` (above 0: a watch from 0 starts with the current state)
/// until it sees an event of `sentinel` (written by the
/// caller once the run is over; the event is not returned) or `stop` is set, re-establishing the watch from the
/// last revision seen whenever it ends or fails (as a reflector would), and returns every object event seen.
pub async fn follow_watch(
    store: Arc<dyn Storage>,
    prefix: String,
    from: u64,
    sentinel: String,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<crate::WatchEvent> {
    use crate::{EventType, WatchOptions};
    use futures::StreamExt;
    use std::sync::atomic::Ordering;
    assert!(from > 0, "follow_watch needs a start revision above 0");
    let mut events = Vec::new();
    let mut last = from;
    while !stop.load(Ordering::SeqCst) {
        let opts = WatchOptions {
            resource_version: Some(last),
            recursive: true,
            ..WatchOptions::default()
        };
        let mut stream =
            match tokio::time::timeout(Duration::from_secs(5), store.watch(&prefix, &opts)).await {
                Ok(Ok(stream)) => stream,
                _ => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
        loop {
            let event = tokio::select! {
                e = stream.next() => e,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {
                    if stop.load(Ordering::SeqCst) {
                        return events;
                    }
                    continue;
                }
            };
            match event {
                Some(e) if e.event_type == EventType::Error => break,
                None => break,
                Some(e) if e.event_type == EventType::Bookmark => {}
                Some(e) if e.key == sentinel => return events,
                Some(e) => {
                    last = last.max(e.revision);
                    events.push(e);
                }
            }
        }
    }
    events
}

/// Checks what a watch from revision `from` saw against a recorded history and the final state of its keys
/// (`finals`: key → the version read after the run, `None` when absent): events in strictly increasing revision
/// order with no duplicate; every acknowledged write or deletion of the history above `from` seen at its revision
/// with its key and value; every event explained by a write of the history (acknowledged or of unknown outcome);
/// replaying the events gives the final state; and, with `contiguous` (nothing else writes to the store), no
/// revision between `from` and the last acknowledged one missing. Returns the violations.
pub fn check_watch(
    events: &[crate::WatchEvent],
    history: &[KeyedOperation],
    from: u64,
    finals: &BTreeMap<String, Option<Version>>,
    contiguous: bool,
) -> Vec<String> {
    use crate::EventType;
    let mut violations = Vec::new();
    let mut by_rev: BTreeMap<u64, &crate::WatchEvent> = BTreeMap::new();
    let mut prev = from;
    for e in events {
        if e.revision <= prev {
            violations.push(format!(
                "watch event at revision {} ({:?} {}) after revision {prev}: out of order or duplicated",
                e.revision, e.event_type, e.key
            ));
        }
        prev = prev.max(e.revision);
        by_rev.insert(e.revision, e);
    }
    let value_of = |e: &crate::WatchEvent| decode_value(&e.value).ok();
    let mut max_acked = from;
    for k in history {
        let expected = match k.op.output {
            Some(KvOutput::Written { revision, .. }) => match k.op.input {
                KvInput::Create(v)
                | KvInput::Update(v)
                | KvInput::Upsert(v)
                | KvInput::Cas { value: v, .. } => Some((revision, v, false)),
                _ => None,
            },
            Some(KvOutput::Deleted { value, revision }) => Some((revision, value, true)),
            _ => None,
        };
        let Some((rev, value, deleted)) = expected else {
            continue;
        };
        if rev <= from {
            continue;
        }
        max_acked = max_acked.max(rev);
        match by_rev.get(&rev) {
            None => violations.push(format!(
                "the watch missed acknowledged {:?} of {} at revision {rev}",
                k.op.input, k.key
            )),
            Some(e) => {
                let ok = e.key == k.key
                    && value_of(e) == Some(value)
                    && (e.event_type == EventType::Deleted) == deleted;
                if !ok {
                    violations.push(format!(
                        "at revision {rev} the watch saw {:?} {} {:?}, but {:?} of {} was acknowledged there",
                        e.event_type,
                        e.key,
                        value_of(e),
                        k.op.input,
                        k.key
                    ));
                }
            }
        }
    }
    // Every event is some write of the history.
    for e in events {
        let explained = history.iter().any(|k| {
            k.key == e.key
                && match (e.event_type, k.op.input) {
                    (EventType::Deleted, KvInput::Delete { .. }) => match k.op.output {
                        Some(KvOutput::Deleted { revision, .. }) => revision == e.revision,
                        None => true,
                        _ => false,
                    },
                    (
                        EventType::Added | EventType::Modified,
                        KvInput::Create(v)
                        | KvInput::Update(v)
                        | KvInput::Upsert(v)
                        | KvInput::Cas { value: v, .. },
                    ) => {
                        value_of(e) == Some(v)
                            && match k.op.output {
                                Some(KvOutput::Written { revision, .. }) => revision == e.revision,
                                None => true,
                                _ => false,
                            }
                    }
                    _ => false,
                }
        });
        if !explained {
            violations.push(format!(
                "watch event {:?} {} {:?} at revision {} is no write of the history",
                e.event_type,
                e.key,
                value_of(e),
                e.revision
            ));
        }
    }
    // Replaying the events gives the final state.
    let mut state: BTreeMap<&str, Option<Version>> = BTreeMap::new();
    for e in events {
        let v = match e.event_type {
            EventType::Deleted => None,
            _ => value_of(e).map(|value| Version {
                value,
                revision: e.revision,
            }),
        };
        state.insert(&e.key, v);
    }
    for (key, want) in finals {
        if let Some(got) = state.get(key.as_str())
            && got != want
        {
            violations.push(format!(
                "replaying the watch gives {key} = {got:?}, but it reads {want:?} at the end"
            ));
        }
    }
    if contiguous && violations.is_empty() {
        let last = by_rev.keys().next_back().copied().unwrap_or(from);
        let top = last.max(max_acked);
        let missing: Vec<u64> = (from + 1..=top)
            .filter(|r| !by_rev.contains_key(r))
            .take(10)
            .collect();
        if !missing.is_empty() {
            violations.push(format!("the watch skipped revisions {missing:?}"));
        }
    }
    violations
}

/// Reads the final version of each key (retrying errors for up to a minute) and records the reads in `rec`.
pub async fn read_finals(
    store: &dyn Storage,
    keys: &[String],
    rec: &Recorder,
) -> BTreeMap<String, Option<Version>> {
    let mut finals = BTreeMap::new();
    for key in keys {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let call = rec.now();
            let r = tokio::time::timeout(
                Duration::from_secs(10),
                store.get(key, &GetOptions::default()),
            )
            .await;
            let ret = rec.now();
            let output = match r {
                Ok(Ok(o)) => version_of(&o).ok().map(KvOutput::Read),
                Ok(Err(e)) => output_of_error(&e),
                Err(_) => None,
            };
            if let Some(output) = output {
                rec.record(
                    key,
                    Operation {
                        client: usize::MAX,
                        call,
                        ret,
                        input: KvInput::Get,
                        output: Some(output),
                    },
                );
                finals.insert(
                    key.clone(),
                    match output {
                        KvOutput::Read(v) => Some(v),
                        _ => None,
                    },
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the final read of {key} kept failing"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    finals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(client: usize, call: u64, ret: u64, input: KvInput, output: KvOutput) -> KvOperation {
        Operation {
            client,
            call,
            ret,
            input,
            output: Some(output),
        }
    }

    fn maybe(client: usize, call: u64, input: KvInput) -> KvOperation {
        Operation {
            client,
            call,
            ret: call,
            input,
            output: None,
        }
    }

    fn w(revision: u64) -> KvOutput {
        KvOutput::Written {
            revision,
            prev: Prev::Unobserved,
        }
    }

    fn read(value: Value, revision: u64) -> KvOutput {
        KvOutput::Read(Version { value, revision })
    }

    fn ok(ops: &[KvOperation]) -> bool {
        check_operations(&KvModel, ops, 1_000_000) == Verdict::Linearizable
    }

    fn keyed(key: &str, op: KvOperation) -> KeyedOperation {
        KeyedOperation {
            key: key.into(),
            op,
        }
    }

    #[test]
    fn sequential_history_is_linearizable() {
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(5)),
            op(0, 2, 3, KvInput::Get, read(1, 5)),
            op(
                0,
                4,
                5,
                KvInput::Cas {
                    expect: 5,
                    value: 2,
                },
                w(7),
            ),
            op(
                0,
                6,
                7,
                KvInput::Cas {
                    expect: 5,
                    value: 3,
                },
                KvOutput::PreconditionFailed,
            ),
            op(
                0,
                8,
                9,
                KvInput::Delete { expect: None },
                KvOutput::Deleted {
                    value: 2,
                    revision: 8,
                },
            ),
            op(0, 10, 11, KvInput::Get, KvOutput::NotFound),
        ];
        assert!(ok(&h));
    }

    #[test]
    fn concurrent_reads_may_see_either_side_of_a_write() {
        // A read overlapping a write may see the old or the new value; one after it must see the new one.
        let base = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            op(
                0,
                10,
                20,
                KvInput::Cas {
                    expect: 2,
                    value: 2,
                },
                w(3),
            ),
        ];
        for seen in [read(1, 2), read(2, 3)] {
            let mut h = base.to_vec();
            h.push(op(1, 12, 14, KvInput::Get, seen));
            assert!(ok(&h), "{seen:?}");
        }
        // The reads were ordered: seeing the new value then the old one is not linearizable.
        let mut h = base.to_vec();
        h.push(op(1, 11, 12, KvInput::Get, read(2, 3)));
        h.push(op(2, 13, 14, KvInput::Get, read(1, 2)));
        assert!(!ok(&h));
    }

    #[test]
    fn stale_read_is_rejected() {
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            op(0, 2, 3, KvInput::Update(2), w(3)),
            op(1, 4, 5, KvInput::Get, read(1, 2)),
        ];
        match check_operations(&KvModel, &h, 1_000_000) {
            Verdict::NotLinearizable { longest_prefix } => assert_eq!(longest_prefix, vec![0, 1]),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn lost_update_is_rejected() {
        // Two concurrent read-modify-writes both saw version 1 and both succeeded.
        let prev = Prev::Present(Version {
            value: 1,
            revision: 2,
        });
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            op(
                0,
                2,
                5,
                KvInput::Update(2),
                KvOutput::Written { revision: 3, prev },
            ),
            op(
                1,
                2,
                5,
                KvInput::Update(3),
                KvOutput::Written { revision: 4, prev },
            ),
        ];
        assert!(!ok(&h));
        // Two CAS on one revision both succeeding is the same bug.
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            op(
                0,
                2,
                5,
                KvInput::Cas {
                    expect: 2,
                    value: 2,
                },
                w(3),
            ),
            op(
                1,
                2,
                5,
                KvInput::Cas {
                    expect: 2,
                    value: 3,
                },
                w(4),
            ),
        ];
        assert!(!ok(&h));
        // When the second saw the first's write, it is fine.
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            op(
                0,
                2,
                5,
                KvInput::Update(2),
                KvOutput::Written { revision: 3, prev },
            ),
            op(
                1,
                2,
                5,
                KvInput::Update(3),
                KvOutput::Written {
                    revision: 4,
                    prev: Prev::Present(Version {
                        value: 2,
                        revision: 3,
                    }),
                },
            ),
        ];
        assert!(ok(&h));
    }

    #[test]
    fn revision_going_backwards_is_rejected() {
        // On one key: a later write with a lower revision.
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(5)),
            op(0, 2, 3, KvInput::Upsert(2), w(4)),
        ];
        assert!(!ok(&h));
        // Across keys: per key fine, but b's write started after a's returned revision 5 and took 4.
        let h = [
            keyed("a", op(0, 0, 1, KvInput::Create(1), w(5))),
            keyed("b", op(1, 2, 3, KvInput::Create(2), w(4))),
        ];
        let report = check_kv_history(&h);
        assert!(!report.is_linearizable());
        assert!(report.violations[0].contains("backwards"), "{report}");
        // Concurrent, either order of revisions is fine.
        let h = [
            keyed("a", op(0, 0, 3, KvInput::Create(1), w(5))),
            keyed("b", op(1, 2, 4, KvInput::Create(2), w(4))),
        ];
        assert!(check_kv_history(&h).is_linearizable());
        // Two writes with one revision.
        let h = [
            keyed("a", op(0, 0, 3, KvInput::Create(1), w(5))),
            keyed("b", op(1, 2, 4, KvInput::Create(2), w(5))),
        ];
        assert!(!check_kv_history(&h).is_linearizable());
    }

    /// Found by the SQLite disk-full test: a swap to the bytes already stored answers the revision it expected,
    /// which neither takes that revision a second time nor goes backwards.
    #[test]
    fn a_swap_to_the_same_bytes_reports_the_expected_revision() {
        let swap = |value| KvInput::Cas { expect: 5, value };
        let h = [
            keyed("a", op(0, 0, 1, KvInput::Create(1), w(5))),
            keyed("b", op(1, 2, 3, KvInput::Create(2), w(6))),
            keyed("a", op(0, 4, 5, swap(1), w(5))),
        ];
        assert!(check_kv_history(&h).is_linearizable());
        // Other bytes than those stored at 5 must take a new revision.
        let h = [
            keyed("a", op(0, 0, 1, KvInput::Create(1), w(5))),
            keyed("a", op(0, 4, 5, swap(2), w(5))),
        ];
        assert!(!check_kv_history(&h).is_linearizable());
    }

    #[test]
    fn create_twice_and_phantom_delete_are_rejected() {
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            op(1, 2, 3, KvInput::Create(2), w(3)),
        ];
        assert!(!ok(&h));
        let h = [
            op(0, 0, 1, KvInput::Get, KvOutput::NotFound),
            op(
                0,
                2,
                3,
                KvInput::Delete { expect: None },
                KvOutput::Deleted {
                    value: 1,
                    revision: 3,
                },
            ),
        ];
        assert!(!ok(&h));
    }

    #[test]
    fn ambiguous_operations_may_or_may_not_happen() {
        // A timed-out create, then a read that sees it: fine (and pins its revision).
        let h = [
            maybe(0, 0, KvInput::Create(1)),
            op(1, 5, 6, KvInput::Get, read(1, 9)),
            op(
                1,
                7,
                8,
                KvInput::Cas {
                    expect: 9,
                    value: 2,
                },
                w(10),
            ),
        ];
        assert!(ok(&h));
        // ... or a read that does not see it, even long after.
        let h = [
            maybe(0, 0, KvInput::Create(1)),
            op(1, 50, 60, KvInput::Get, KvOutput::NotFound),
        ];
        assert!(ok(&h));
        // But it cannot happen twice or before it was called.
        let h = [
            op(1, 0, 1, KvInput::Get, read(1, 9)),
            maybe(0, 5, KvInput::Create(1)),
        ];
        assert!(!ok(&h));
        // An acknowledged write is not lost, whatever is ambiguous around it.
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            maybe(1, 2, KvInput::Delete { expect: Some(7) }),
            op(0, 3, 4, KvInput::Get, KvOutput::NotFound),
        ];
        assert!(!ok(&h));
        let h = [
            op(0, 0, 1, KvInput::Create(1), w(2)),
            maybe(1, 2, KvInput::Delete { expect: Some(2) }),
            op(0, 3, 4, KvInput::Get, KvOutput::NotFound),
            op(0, 5, 6, KvInput::Create(3), w(8)),
        ];
        assert!(ok(&h));
    }

    #[test]
    fn wide_concurrent_history_is_checked_quickly() {
        // 8 clients CAS-ing one counter in rounds where all overlap and one wins: the losers that expected the
        // new revision must go before the winner, the others after (2^7 orders of the losers per round to try).
        let mut h = vec![op(0, 0, 1, KvInput::Create(0), w(1))];
        let mut rev = 1;
        for round in 0..40u64 {
            for c in 0..8u64 {
                let t = 10 + round * 100;
                let wins = c == round % 8;
                let output = if wins {
                    rev += 1;
                    w(rev)
                } else {
                    KvOutput::PreconditionFailed
                };
                h.push(op(
                    c as usize,
                    t + c,
                    t + 50 + c,
                    KvInput::Cas {
                        expect: rev - u64::from(wins),
                        value: 1000 + round * 8 + c,
                    },
                    output,
                ));
            }
        }
        let started = Instant::now();
        assert!(ok(&h));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn recorded_memory_history_is_linearizable() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store = crate::MemoryStorage::new().into_dyn();
            let rec = Recorder::new();
            record_storage_history(store, "/lin", &Workload::default(), &rec).await;
            let report = check_kv_history(&rec.history());
            assert!(report.is_linearizable(), "{report}");
            assert_eq!(report.operations, 8 * 40);
        });
    }
}

#[cfg(test)]
mod stale_backend {
    //! The recorder and checker together catch a backend that serves stale reads.

    use super::*;
    use crate::{
        ListOptions, ListResult, Stats, TryUpdate, ValidateDeletion, WatchOptions, WatchStream,
    };
    use async_trait::async_trait;

    /// Memory storage whose gets answer what the key held at the first get (a broken read cache).
    struct StaleReads {
        inner: Arc<dyn Storage>,
        first: Mutex<BTreeMap<String, Result<StoredObject, StorageError>>>,
    }

    #[async_trait]
    impl Storage for StaleReads {
        async fn create(&self, key: &str, value: Bytes) -> Result<StoredObject, StorageError> {
            self.inner.create(key, value).await
        }
        async fn get(&self, key: &str, opts: &GetOptions) -> Result<StoredObject, StorageError> {
            let fresh = self.inner.get(key, opts).await;
            let mut first = self.first.lock().expect("lock");
            first.entry(key.to_string()).or_insert(fresh).clone()
        }
        async fn list(&self, key: &str, opts: &ListOptions) -> Result<ListResult, StorageError> {
            self.inner.list(key, opts).await
        }
        async fn guaranteed_update(
            &self,
            key: &str,
            ignore_not_found: bool,
            preconditions: Option<&Preconditions>,
            try_update: &mut dyn TryUpdate,
            cached_existing: Option<StoredObject>,
        ) -> Result<StoredObject, StorageError> {
            self.inner
                .guaranteed_update(
                    key,
                    ignore_not_found,
                    preconditions,
                    try_update,
                    cached_existing,
                )
                .await
        }
        async fn delete(
            &self,
            key: &str,
            preconditions: Option<&Preconditions>,
            validate_deletion: &mut dyn ValidateDeletion,
            cached_existing: Option<StoredObject>,
        ) -> Result<StoredObject, StorageError> {
            self.inner
                .delete(key, preconditions, validate_deletion, cached_existing)
                .await
        }
        async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream, StorageError> {
            self.inner.watch(key, opts).await
        }
        async fn current_revision(&self) -> Result<u64, StorageError> {
            self.inner.current_revision().await
        }
        async fn compact(&self, revision: u64) -> Result<(), StorageError> {
            self.inner.compact(revision).await
        }
        async fn compact_revision(&self) -> Result<u64, StorageError> {
            self.inner.compact_revision().await
        }
        async fn stats(&self, prefix: &str) -> Result<Stats, StorageError> {
            self.inner.stats(prefix).await
        }
        async fn readiness(&self) -> Result<(), StorageError> {
            self.inner.readiness().await
        }
    }

    #[test]
    fn stale_reads_of_a_backend_are_caught() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let store: Arc<dyn Storage> = Arc::new(StaleReads {
                inner: crate::MemoryStorage::new().into_dyn(),
                first: Mutex::default(),
            });
            let rec = Recorder::new();
            record_storage_history(store, "/lin", &Workload::default(), &rec).await;
            let report = check_kv_history(&rec.history());
            assert!(!report.is_linearizable());
            assert!(
                report.violations[0].contains("not linearizable"),
                "{report}"
            );
        });
    }
}
