//! The Wing–Gong–Lowe search for one part of a history (one key), with memoisation of
//! (set of linearized operations, model state), over the register and cas-register models:
//! the native twin of `replicalab.checkers.linearizability.search.search_part`, same contract.
//!
//! The history is a doubly linked list of invoke and completion events in time order. The
//! search walks it from the head: at an invoke it tries to linearize that operation now
//! (the model step must be legal and the resulting (set, state) new), lifting the invoke
//! and its completion out of the list and starting again from the head; at a completion
//! (an operation that must already have been linearized was not) it backtracks. Operations
//! whose outcome is unknown (`info`) have no completion: they may be linearized at any
//! point after their invoke or never, so the search succeeds when it walks past the last
//! event left (every completed operation placed; info ones still there never took effect).
//! An `optional` operation has a completion but may also not have happened: when the walk
//! reaches its completion with the operation not placed, it is dropped (counted done, the
//! state unchanged) instead of the search backtracking; shrinking a counterexample makes
//! the operations it leaves out optional.
//!
//! Three reductions, all exact (the pure-Python core makes the same ones):
//! * a read legal in the current state is linearized at once, without trying anything
//!   else there: if any linearization goes on from that configuration, one goes on with
//!   the read first (it changes no state and everything that must precede it is placed);
//! * a value that no operation left to linearize can observe (read, or expect in a cas)
//!   makes the state `DEAD`, so orders that differ only in such writes share a memo entry;
//! * a step that replaces a value some op that must happen still has to observe, when no
//!   op left writes that value again, is pruned at once (that op could never be placed).
//!
//! Memo keys are cheap to compare because the set of linearized completed operations,
//! numbered in invoke order, is all of `0..lc`, none of `hc..`, and a few words in between
//! (an operation can only be linearized once every operation that completed before its
//! invoke has been): an entry stores those words and the small bitset of `info`
//! operations. The hash is a Zobrist hash kept up to date in O(1) per step.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

/// Operation codes (`f`).
pub const READ: u8 = 0;
pub const WRITE: u8 = 1;
pub const CAS: u8 = 2;

const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

/// One operation of a part: `a` is the value a read returned or a write wrote, or the
/// value a cas expected (`ANY`: legal in every state); a cas writes `b`. Values are
/// integers chosen by the caller. `opt`: the op may also not have happened (see the
/// module docs; only meaningful for an op with a completion event).
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub f: u8,
    pub a: i64,
    pub b: i64,
    pub opt: bool,
}

/// A cas's expected value meaning "whatever the state is" (it was not recorded).
pub const ANY: i64 = -1;

/// How the search ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    NotLinearizable,
    /// The deadline passed first.
    Timeout,
}

/// The verdict; a linearization (op ids in order: every op that took effect when
/// linearizable, else the longest linearizable prefix the search reached); the op whose
/// completion that prefix could not get past (None if none); how many (set, state)
/// configurations were memoised in all.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub verdict: Verdict,
    pub order: Vec<u32>,
    pub stuck: Option<u32>,
    pub states: u64,
}

/// Bounds of one search: an optional deadline and the most memo entries kept at once
/// (the memo is emptied when full: that costs time, never a wrong verdict).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub deadline: Option<Instant>,
    pub max_entries: usize,
}

/// The state once the register holds a value no op left to linearize can observe (read,
/// or expect in a cas): all such values act alike, so orders that differ only in which of
/// them came last share one memo entry.
pub const DEAD: i64 = -2;

/// The value `op` observes (a read's, a cas's expected one), if any.
#[inline]
fn observed(op: &MOp) -> Option<usize> {
    match op.kind {
        READ => Some(op.a as usize),
        CAS if op.a != ANY => Some(op.a as usize),
        _ => None,
    }
}

#[inline]
fn mix64(mut z: u64) -> u64 {
    // splitmix64's finaliser: a cheap bijection that spreads every input bit
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[inline]
pub(crate) fn zobrist(id: u32, info: bool) -> u64 {
    mix64(((info as u64) << 40) | id as u64)
}

#[inline]
pub(crate) fn state_hash(state: i64) -> u64 {
    mix64(state as u64 ^ 0x5851_F42D_4C95_7F2D).rotate_left(17)
}

/// The memo keys are already well mixed 64-bit hashes: use them as they are (values are
/// mixed first).
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 keys are hashed")
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn write_i64(&mut self, n: i64) {
        // values are the caller's ints, often small and dense: spread them
        self.0 = mix64(n as u64);
    }
}

/// FNV-1a for keys that are not one integer (a value of a log line, strings in it): a
/// few instructions per byte where SipHash, the std default, costs a hundred per key.
#[derive(Default)]
pub(crate) struct FnvHasher(u64);

impl Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for &b in bytes {
            h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

#[derive(Clone, Copy)]
struct Entry {
    state: i64,
    lc: u32,
    hc: u32,
    off: usize,
    next: u32,
}

/// Memo table: hash -> chain of entries whose words live in one arena.
pub(crate) struct Memo {
    heads: HashMap<u64, u32, BuildHasherDefault<IdHasher>>,
    entries: Vec<Entry>,
    words: Vec<u64>,
}

/// The current set of linearized (or dropped) operations, in the compact form the memo
/// compares.
pub(crate) struct LinSet {
    pub(crate) done: Vec<u64>,
    pub(crate) info: Vec<u64>,
    pub(crate) lc: u32,
    pub(crate) hc: u32,
}

impl LinSet {
    #[inline]
    fn window(&self) -> &[u64] {
        if self.hc > self.lc {
            &self.done[(self.lc / 64) as usize..=((self.hc - 1) / 64) as usize]
        } else {
            &[]
        }
    }

    /// The first completed operation at or after `from` that is not linearized.
    pub(crate) fn next_unset(&self, from: u32, n: u32) -> u32 {
        let mut w = (from / 64) as usize;
        if w >= self.done.len() {
            return n;
        }
        let mut bits = !self.done[w] & (!0u64 << (from % 64));
        loop {
            if bits != 0 {
                return (w as u32 * 64 + bits.trailing_zeros()).min(n);
            }
            w += 1;
            if w >= self.done.len() {
                return n;
            }
            bits = !self.done[w];
        }
    }
}

impl Memo {
    /// A memo sized for about `n` configurations (a linearizable part with little
    /// backtracking needs one per op).
    pub(crate) fn with_capacity(n: usize) -> Self {
        Memo {
            heads: HashMap::with_capacity_and_hasher(n, Default::default()),
            entries: Vec::with_capacity(n),
            words: Vec::with_capacity(2 * n),
        }
    }

    pub(crate) fn clear(&mut self) {
        self.heads.clear();
        self.entries.clear();
        self.words.clear();
    }

    pub(crate) fn contains(&self, key: u64, state: i64, set: &LinSet) -> bool {
        let mut i = match self.heads.get(&key) {
            Some(&i) => i,
            None => return false,
        };
        let ni = set.info.len();
        let window = set.window();
        while i != NIL {
            let e = &self.entries[i as usize];
            if e.state == state && e.lc == set.lc && e.hc == set.hc {
                let w = &self.words[e.off..e.off + ni + window.len()];
                if w[..ni] == set.info[..] && w[ni..] == *window {
                    return true;
                }
            }
            i = e.next;
        }
        false
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(crate) fn insert(&mut self, key: u64, state: i64, set: &LinSet) {
        let off = self.words.len();
        self.words.extend_from_slice(&set.info);
        self.words.extend_from_slice(set.window());
        let idx = self.entries.len() as u32;
        let next = self.heads.insert(key, idx).unwrap_or(NIL);
        self.entries.push(Entry { state, lc: set.lc, hc: set.hc, off, next });
    }
}

struct Frame {
    node: u32,
    state: i64,
    lc: u32,
    hc: u32,
    /// A read taken, or an optional op dropped, without branching: backtracking past it
    /// backtracks its parent too.
    forced: bool,
    /// The op was dropped (it did not happen): left out of orders.
    dropped: bool,
}

/// Return an error naming the first problem unless `events` holds each op's invoke
/// (`2 i`) once, before its completion (`2 i + 1`) if it has one, for ops `0..n`.
pub fn check_events(n: usize, events: &[u32]) -> Result<(), String> {
    let mut seen = vec![0u8; n];
    for &ev in events {
        let i = (ev >> 1) as usize;
        if i >= n {
            return Err(format!("event {ev} names op {i}, outside 0..{}", n as i64 - 1));
        }
        if seen[i] != (ev & 1) as u8 {
            return Err(format!("event {ev}: op {i}'s invoke must come once, before its completion"));
        }
        seen[i] += 1;
    }
    if seen.contains(&0) {
        return Err("every op needs an invoke event".to_string());
    }
    Ok(())
}

/// One operation as a machine takes it: `kind` is the position of its name in the
/// model's ops (the register's `READ`, `WRITE`, `CAS`); `a` and `b` are the machine's.
#[derive(Clone, Copy, Debug)]
pub struct MOp {
    pub kind: u8,
    pub a: i64,
    pub b: i64,
    pub opt: bool,
}

/// A sequential object over integer states: the model's side of the search, the only
/// thing that differs between the register core and the other data types.
pub trait Machine {
    /// The initial state (asked after `prepare`).
    fn init(&mut self) -> i64;
    /// The state after op `i` (`op`) in `state`, or None when it is not legal there.
    fn step(&mut self, state: i64, i: usize, op: &MOp) -> Option<i64>;
    /// Whether ops of `kind` never change the state (reads).
    fn pure(&self, kind: u8) -> bool;
    /// How many kinds of op the machine has.
    fn kinds(&self) -> u8;
    /// Learn the part's ops before a search (`must[i]`: op `i` has to happen).
    fn prepare(&mut self, _ops: &[MOp], _must: &[bool]) {}
    /// Whether the ops left (`done(i)` false) can still be linearized from `state` as far
    /// as the machine can tell at once; false only when none can (the Python model's
    /// `viability`). A step to a state that is not viable is refused.
    fn viable(&self, _state: i64, _done: &dyn Fn(usize) -> bool) -> bool {
        true
    }
    /// Op `i` was placed or dropped (`d` = -1) or taken back (`d` = 1): for a machine
    /// whose steps depend on what is left to linearize.
    fn count(&mut self, _i: usize, _op: &MOp, _d: i32) {}
    /// The state once optional op `i` is dropped (did not happen) in `state`.
    fn dropped(&self, state: i64, _i: usize, _op: &MOp) -> i64 {
        state
    }
    /// What makes two `info` ops of this machine interchangeable (same key: once both are
    /// invoked the search places one only after the other, which leaves out orders that
    /// differ by swapping them), or None for no such reduction.
    fn twin_key(&self, _op: &MOp) -> Option<(u8, i64, i64)> {
        None
    }
}

/// Check one part (one key's operations) against the register model starting from
/// `init`. `events` lists `2 i` for the invoke of op `i` and `2 i + 1` for its completion,
/// in time order (see `check_events`); an op without a completion may take effect at any
/// time after its invoke, or never.
pub fn search(ops: &[Op], events: &[u32], init: i64, limits: Limits) -> Outcome {
    let n = ops.len();
    // values renumbered densely (the caller's may be any ints >= 0)
    let mut dense: HashMap<i64, i64, BuildHasherDefault<IdHasher>> =
        HashMap::with_capacity_and_hasher(n + 1, Default::default());
    let mut id_of = |v: i64| {
        let k = dense.len() as i64;
        *dense.entry(v).or_insert(k)
    };
    let init = id_of(init);
    let owned: Vec<MOp> = ops
        .iter()
        .map(|o| MOp {
            kind: o.f,
            a: if o.f == CAS && o.a == ANY { ANY } else { id_of(o.a) },
            b: if o.f == CAS { id_of(o.b) } else { 0 },
            opt: o.opt,
        })
        .collect();
    let values = dense.len() + 1;
    let mut register = Register {
        init,
        must: Vec::new(),
        obs_left: vec![0; values],
        must_left: vec![0; values],
        writes_left: vec![0; values],
    };
    search_machine(&mut register, &owned, events, limits)
}

/// The register and cas-register models over dense value ids, with the register core's
/// two exact reductions that need to know what is left to linearize: a value that no op
/// left can observe (read, or expect in a cas) makes the state `DEAD`, so orders that
/// differ only in such writes share a memo entry; and a step that replaces a value some
/// op that must happen still has to observe, when no op left writes that value again, is
/// refused at once (that op could never be placed).
struct Register {
    init: i64,
    must: Vec<bool>,
    /// Per value: ops left to linearize that observe it, those of them that must happen,
    /// and ops left that write it.
    obs_left: Vec<u32>,
    must_left: Vec<u32>,
    writes_left: Vec<u32>,
}

impl Machine for Register {
    fn init(&mut self) -> i64 {
        if self.obs_left[self.init as usize] == 0 { DEAD } else { self.init }
    }

    fn prepare(&mut self, ops: &[MOp], must: &[bool]) {
        self.must = must.to_vec();
        for (i, op) in ops.iter().enumerate() {
            self.count(i, op, 1);
        }
    }

    /// The state after op `i` if it is legal now (DEAD when no op left to linearize can
    /// observe the new value), or None.
    #[inline]
    fn step(&mut self, state: i64, i: usize, op: &MOp) -> Option<i64> {
        let live = |v: i64, k: u32| if self.obs_left[v as usize] > k { v } else { DEAD };
        // would replacing the current value strand an op that must observe it? (`mine`:
        // this op is one of those observers itself)
        let strands = |new: i64, mine: u32| {
            state >= 0 && new != state && self.must_left[state as usize] > mine
                && self.writes_left[state as usize] == 0
        };
        match op.kind {
            // after this read one observer fewer is left
            READ => (state == op.a).then(|| live(op.a, 1)),
            WRITE => (!strands(op.a, 0)).then(|| live(op.a, 0)),
            _ if op.a == ANY => (!strands(op.b, 0)).then(|| live(op.b, 0)),
            _ => (state == op.a && !strands(op.b, self.must[i] as u32))
                .then(|| live(op.b, (op.b == op.a) as u32)),
        }
    }

    #[inline]
    fn pure(&self, kind: u8) -> bool {
        kind == READ
    }

    fn kinds(&self) -> u8 {
        3
    }

    #[inline]
    fn count(&mut self, i: usize, op: &MOp, d: i32) {
        let add = |x: &mut u32| *x = x.wrapping_add_signed(d);
        if let Some(v) = observed(op) {
            add(&mut self.obs_left[v]);
            if self.must[i] {
                add(&mut self.must_left[v]);
            }
        }
        match op.kind {
            WRITE => add(&mut self.writes_left[op.a as usize]),
            CAS => add(&mut self.writes_left[op.b as usize]),
            _ => {}
        }
    }

    fn dropped(&self, state: i64, _i: usize, op: &MOp) -> i64 {
        match observed(op) {
            Some(v) if v as i64 == state && self.obs_left[v] == 1 => DEAD,
            _ => state,
        }
    }

    fn twin_key(&self, op: &MOp) -> Option<(u8, i64, i64)> {
        (op.kind != READ).then_some((op.kind, op.a, if op.kind == CAS { op.b } else { 0 }))
    }
}

/// Search ops `0..n` (`events` as `search` takes them) under `machine`: the one
/// Wing–Gong–Lowe loop, for the register core and every other machine (monomorphised for
/// the register, so its steps are inlined).
pub fn search_machine<M: Machine + ?Sized>(machine: &mut M, ops: &[MOp], events: &[u32],
                                           limits: Limits) -> Outcome {
    let n = ops.len();
    let mut info = vec![true; n];
    for &ev in events {
        if ev & 1 == 1 {
            info[(ev >> 1) as usize] = false;
        }
    }
    // class-local ids in invoke order: completed ops 0..nc, info ops 0..ni
    let mut cid = vec![0u32; n];
    let (mut nc, mut ni) = (0u32, 0u32);
    for &ev in events {
        if ev & 1 == 0 {
            let i = (ev >> 1) as usize;
            if info[i] {
                cid[i] = ni;
                ni += 1;
            } else {
                cid[i] = nc;
                nc += 1;
            }
        }
    }
    // node 0 is the head; node k + 1 is event k
    let m = events.len() + 1;
    let mut next = vec![NIL; m];
    let mut prev = vec![NIL; m];
    let mut node_op = vec![NIL; m];
    let mut is_call = vec![false; m];
    let mut ret_of = vec![NIL; m];
    let mut call_node = vec![NIL; n];
    for (k, &ev) in events.iter().enumerate() {
        let node = (k + 1) as u32;
        let i = ev >> 1;
        prev[node as usize] = k as u32;
        next[k] = node;
        node_op[node as usize] = i;
        if ev & 1 == 0 {
            is_call[node as usize] = true;
            call_node[i as usize] = node;
        } else {
            ret_of[call_node[i as usize] as usize] = node;
        }
    }
    let pure: Vec<bool> = ops.iter().map(|o| machine.pure(o.kind)).collect();
    // must happen: a completion and not optional
    let must: Vec<bool> = (0..n).map(|i| !info[i] && !ops[i].opt).collect();
    // per info op, the latest interchangeable info op invoked before it (`twin_key`)
    let mut twin = vec![NIL; n];
    let mut last: HashMap<(u8, i64, i64), u32> = HashMap::new();
    for &ev in events {
        let i = (ev >> 1) as usize;
        if ev & 1 == 1 || !info[i] {
            continue;
        }
        if let Some(k) = machine.twin_key(&ops[i]) {
            if let Some(&j) = last.get(&k) {
                twin[i] = j;
            }
            last.insert(k, i as u32);
        }
    }
    machine.prepare(ops, &must);
    let mut set = LinSet {
        done: vec![0; (nc as usize).div_ceil(64)],
        info: vec![0; (ni as usize).div_ceil(64)],
        lc: 0,
        hc: 0,
    };
    let mut memo = Memo::with_capacity(n.min(limits.max_entries));
    let mut stack: Vec<Frame> = Vec::new();
    // the longest prefix yet (nodes; a dropped op as its return node) and how much of the
    // stack still equals it, so a longer prefix copies only what changed since
    // (amortised O(1) per step instead of a copy of the stack)
    let mut best: Vec<u32> = Vec::new();
    let mut agree = 0usize;
    let mut states: u64 = 0;
    let mut hash: u64 = 0;
    let mut state = machine.init();
    let mut stuck: Option<u32> = None;
    // a longer prefix was reached since the stuck op was last recorded
    let mut fresh = false;
    let mut scan = true;
    let mut entry = next[HEAD as usize];
    let mut iter: u64 = 0;

    let order_of = |nodes: &mut dyn Iterator<Item = u32>, is_call: &[bool], node_op: &[u32]|
        -> Vec<u32> { nodes.filter(|&x| is_call[x as usize]).map(|x| node_op[x as usize]).collect() };

    // The search goes on to the end of the list even once every completed op is placed
    // (placing the info ops still legal there), and the longest prefix and stuck op are
    // tracked as the pure-Python search tracks them: both cores give the same result.
    loop {
        iter += 1;
        if (iter & 0x3FF == 0 && limits.deadline.is_some_and(|d| Instant::now() >= d))
            || (iter & crate::signals::EVERY == 0 && crate::signals::interrupted())
        {
            let order = order_of(&mut best.iter().copied(), &is_call, &node_op);
            return Outcome { verdict: Verdict::Timeout, order, stuck, states };
        }
        if entry == NIL {
            // past every event left: only ops that may never happen remain
            let mut it = stack.iter().filter(|f| !f.dropped).map(|f| f.node);
            let order = order_of(&mut it, &is_call, &node_op);
            return Outcome { verdict: Verdict::Linearizable, order, stuck: None, states };
        }
        let mut take: Option<i64> = None;
        if scan {
            // A configuration just reached. A read legal now is linearized now, without
            // branching: if any linearization goes on from here, one goes on with that read
            // first (a read changes no state, and it is available: every op that must
            // precede it is placed). If the configuration after it was explored already,
            // so in effect was this one.
            scan = false;
            let mut e = entry;
            while e != NIL && is_call[e as usize] {
                let i = node_op[e as usize] as usize;
                if pure[i] {
                    if let Some(s) = machine.step(state, i, &ops[i]) {
                        entry = e;
                        take = Some(s);
                        break;
                    }
                }
                e = next[e as usize];
            }
        }
        let i = node_op[entry as usize] as usize;
        // what to place at `entry`: (call node, new state, forced, dropped)
        let mut placing: Option<(u32, i64, bool, bool)> = None;
        let mut walk_on = false;
        if take.is_some() || (is_call[entry as usize] && !pure[i]) {
            let twin_free = take.is_none() && twin[i] != NIL && {
                let id = cid[twin[i] as usize];
                set.info[(id / 64) as usize] >> (id % 64) & 1 == 0
            };
            let new = if take.is_some() {
                take
            } else if twin_free {
                None // an identical info op invoked before it is still free: that one first
            } else {
                machine.step(state, i, &ops[i]).filter(|&s| {
                    let done = |j: usize| {
                        j == i || {
                            let bits = if info[j] { &set.info } else { &set.done };
                            bits[(cid[j] / 64) as usize] >> (cid[j] % 64) & 1 == 1
                        }
                    };
                    machine.viable(s, &done)
                })
            };
            match new {
                Some(s) => placing = Some((entry, s, take.is_some(), false)),
                None => walk_on = true,
            }
        } else if is_call[entry as usize] {
            walk_on = true; // a read not legal here (a legal one would have been taken)
        } else if ops[i].opt {
            // an optional op not placed by its completion did not happen: drop it, without
            // a choice (placing it earlier is what other branches try)
            placing = Some((call_node[i], machine.dropped(state, i, &ops[i]), true, true));
        } else if fresh || stuck.is_none() {
            // the completion of an op not yet linearized: backtrack; the first completion
            // met since the deepest prefix yet was reached is the one it could not get past
            stuck = Some(i as u32);
            fresh = false;
        }
        if let Some((node, new_state, forced, dropped)) = placing {
            let j = node_op[node as usize] as usize;
            let (id, is_info) = (cid[j], info[j]);
            let (old_lc, old_hc) = (set.lc, set.hc);
            flip(&mut set, id, is_info);
            if !is_info {
                if id == set.lc {
                    set.lc = set.next_unset(id + 1, nc);
                }
                set.hc = set.hc.max(id + 1);
            }
            let z = zobrist(id, is_info);
            let key = hash ^ z ^ state_hash(new_state);
            if memo.contains(key, new_state, &set) {
                flip(&mut set, id, is_info);
                set.lc = old_lc;
                set.hc = old_hc;
                if !forced {
                    entry = next[entry as usize];
                    continue;
                }
            } else {
                if memo.len() >= limits.max_entries {
                    memo.clear(); // bounded memory: forget, never prune wrongly
                }
                memo.insert(key, new_state, &set);
                states += 1;
                hash ^= z;
                stack.push(Frame { node, state, lc: old_lc, hc: old_hc, forced, dropped });
                if stack.len() > best.len() {
                    best.truncate(agree);
                    best.extend(stack[agree..].iter()
                        .map(|f| if f.dropped { ret_of[f.node as usize] } else { f.node }));
                    agree = stack.len();
                    fresh = true;
                }
                state = new_state;
                lift(node, &mut next, &mut prev, &ret_of);
                machine.count(j, &ops[j], -1);
                entry = next[HEAD as usize];
                scan = true;
                continue;
            }
        } else if walk_on {
            entry = next[entry as usize];
            continue;
        }
        // backtrack to the last placement made by choice
        let e = loop {
            let Some(top) = stack.pop() else {
                let order = order_of(&mut best.iter().copied(), &is_call, &node_op);
                return Outcome { verdict: Verdict::NotLinearizable, order, stuck, states };
            };
            agree = agree.min(stack.len());
            let j = node_op[top.node as usize] as usize;
            flip(&mut set, cid[j], info[j]);
            machine.count(j, &ops[j], 1);
            set.lc = top.lc;
            set.hc = top.hc;
            hash ^= zobrist(cid[j], info[j]);
            state = top.state;
            unlift(top.node, &mut next, &mut prev, &ret_of);
            if !top.forced {
                break top.node;
            }
        };
        entry = next[e as usize];
    }
}

#[inline]
fn flip(set: &mut LinSet, id: u32, is_info: bool) {
    let bits = if is_info { &mut set.info } else { &mut set.done };
    bits[(id / 64) as usize] ^= 1 << (id % 64);
}

#[inline]
fn unlink(node: u32, next: &mut [u32], prev: &mut [u32]) {
    let (p, n) = (prev[node as usize], next[node as usize]);
    next[p as usize] = n;
    if n != NIL {
        prev[n as usize] = p;
    }
}

#[inline]
fn relink(node: u32, next: &mut [u32], prev: &mut [u32]) {
    let (p, n) = (prev[node as usize], next[node as usize]);
    next[p as usize] = node;
    if n != NIL {
        prev[n as usize] = node;
    }
}

/// Take a call and its return out of the list (their own links are kept for `unlift`).
#[inline]
fn lift(call: u32, next: &mut [u32], prev: &mut [u32], ret_of: &[u32]) {
    unlink(call, next, prev);
    let r = ret_of[call as usize];
    if r != NIL {
        unlink(r, next, prev);
    }
}

/// Put back what `lift` took out, in the reverse order.
#[inline]
fn unlift(call: u32, next: &mut [u32], prev: &mut [u32], ret_of: &[u32]) {
    let r = ret_of[call as usize];
    if r != NIL {
        relink(r, next, prev);
    }
    relink(call, next, prev);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (f, a, b, invoke, complete); complete < 0 marks an info op.
    type Row = (u8, i64, i64, i64, i64);

    fn run(rows: &[Row]) -> Outcome {
        let ops: Vec<Op> = rows.iter().map(|&(f, a, b, _, _)| Op { f, a, b, opt: false }).collect();
        let mut evs: Vec<(i64, u8, u32)> = Vec::new();
        for (i, &(_, _, _, inv, done)) in rows.iter().enumerate() {
            evs.push((inv, 0, 2 * i as u32));
            if done >= 0 {
                evs.push((done, 1, 2 * i as u32 + 1));
            }
        }
        evs.sort();
        let events: Vec<u32> = evs.iter().map(|e| e.2).collect();
        check_events(ops.len(), &events).unwrap();
        search(&ops, &events, 0, Limits { deadline: None, max_entries: 1 << 20 })
    }

    #[test]
    fn stale_read_is_caught_and_overlap_is_allowed() {
        let ok = [(WRITE, 1, 0, 0, 10), (READ, 1, 0, 5, 6), (READ, 0, 0, 1, 2)];
        assert_eq!(run(&ok).verdict, Verdict::Linearizable);
        let stale = [(WRITE, 1, 0, 0, 10), (READ, 0, 0, 11, 12)];
        let out = run(&stale);
        assert_eq!(out.verdict, Verdict::NotLinearizable);
        // writing 1 would strand the read of 0: the search is stuck at the write's end
        assert_eq!(out.order, Vec::<u32>::new());
        assert_eq!(out.stuck, Some(0));
    }

    #[test]
    fn info_ops_may_happen_late_or_never() {
        // an info write read long after its invoke
        let late = [(WRITE, 1, 0, 0, -1), (READ, 0, 0, 5, 6), (READ, 1, 0, 100, 101)];
        assert_eq!(run(&late).verdict, Verdict::Linearizable);
        // an info cas that must not have happened (its expected value never held)
        let never = [(CAS, 7, 2, 0, -1), (READ, 0, 0, 50, 60)];
        assert_eq!(run(&never).verdict, Verdict::Linearizable);
        // a read of a value nobody could have written
        let bad = [(CAS, 7, 2, 0, -1), (READ, 2, 0, 50, 60)];
        assert_eq!(run(&bad).verdict, Verdict::NotLinearizable);
        // a cas whose expected value was not recorded acts as a write
        let any = [(CAS, ANY, 2, 0, 10), (READ, 2, 0, 50, 60)];
        assert_eq!(run(&any).verdict, Verdict::Linearizable);
    }

    #[test]
    fn the_linearization_is_complete_and_legal() {
        let rows = [(WRITE, 1, 0, 0, 10), (CAS, 1, 2, 1, 11), (READ, 2, 0, 12, 13)];
        let out = run(&rows);
        assert_eq!(out.verdict, Verdict::Linearizable);
        assert_eq!(out.order, vec![0, 1, 2]);
    }

    #[test]
    fn bad_events_are_named() {
        assert!(check_events(2, &[0, 1, 2]).is_ok());
        assert!(check_events(2, &[1, 0, 2]).is_err());
        assert!(check_events(2, &[0, 1]).is_err());
        assert!(check_events(1, &[0, 4]).is_err());
    }
}
