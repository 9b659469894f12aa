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
fn observed(op: &Op) -> Option<usize> {
    match op.f {
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

/// Check one part (one key's operations) against the register model starting from
/// `init`. `events` lists `2 i` for the invoke of op `i` and `2 i + 1` for its completion,
/// in time order (see `check_events`); an op without a completion may take effect at any
/// time after its invoke, or never.
pub fn search(ops: &[Op], events: &[u32], init: i64, limits: Limits) -> Outcome {
    let n = ops.len();
    let mut info = vec![true; n];
    for &ev in events {
        if ev & 1 == 1 {
            info[(ev >> 1) as usize] = false;
        }
    }
    // must happen: a completion and not optional
    let must: Vec<bool> = (0..n).map(|i| !info[i] && !ops[i].opt).collect();
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

    // values renumbered densely (the caller's may be any ints >= 0), then how many ops
    // still to linearize observe each
    let mut dense: HashMap<i64, i64, BuildHasherDefault<IdHasher>> =
        HashMap::with_capacity_and_hasher(n + 1, Default::default());
    let mut id_of = |v: i64| {
        let k = dense.len() as i64;
        *dense.entry(v).or_insert(k)
    };
    let init = id_of(init);
    let owned: Vec<Op> = ops
        .iter()
        .map(|o| Op {
            f: o.f,
            a: if o.f == CAS && o.a == ANY { ANY } else { id_of(o.a) },
            b: if o.f == CAS { id_of(o.b) } else { 0 },
            opt: o.opt,
        })
        .collect();
    let ops = &owned[..];
    let values = dense.len() + 1;
    // per info op, the latest identical info op invoked before it (see `Search::twin`)
    let mut twin = vec![NIL; n];
    let mut last: HashMap<(u8, i64, i64), u32> = HashMap::new();
    for &ev in events {
        let i = (ev >> 1) as usize;
        if ev & 1 == 1 || !info[i] || ops[i].f == READ {
            continue;
        }
        let o = &ops[i];
        let k = (o.f, o.a, if o.f == CAS { o.b } else { 0 });
        if let Some(&j) = last.get(&k) {
            twin[i] = j;
        }
        last.insert(k, i as u32);
    }
    let mut s = Search {
        ops,
        twin,
        info,
        must,
        call_node,
        cid,
        nc,
        next,
        node_op,
        is_call,
        prev,
        ret_of,
        set: LinSet {
            done: vec![0; (nc as usize).div_ceil(64)],
            info: vec![0; (ni as usize).div_ceil(64)],
            lc: 0,
            hc: 0,
        },
        memo: Memo::with_capacity(n.min(limits.max_entries)),
        max_entries: limits.max_entries,
        states: 0,
        stack: Vec::new(),
        state: init,
        obs_left: vec![0; values],
        must_left: vec![0; values],
        writes_left: vec![0; values],
        hash: 0,
        best: Vec::new(),
        agree: 0,
        new_best: false,
    };
    for i in 0..n {
        s.count(i, 1);
    }
    if s.obs_left[init as usize] == 0 {
        s.state = DEAD;
    }
    let mut stuck: Option<u32> = None;
    let mut entry = NIL;
    let mut fresh = true;
    let mut iter: u64 = 0;

    // The search goes on to the end of the list even once every completed op is placed
    // (placing the info ops still legal there), and the longest prefix and stuck op are
    // tracked as `search.search_part` tracks them: both cores give the same result.
    loop {
        iter += 1;
        if (iter & 0x3FF == 0 && limits.deadline.is_some_and(|d| Instant::now() >= d))
            || (iter & crate::signals::EVERY == 0 && crate::signals::interrupted())
        {
            return Outcome { verdict: Verdict::Timeout, order: s.best_order(), stuck,
                             states: s.states };
        }
        if fresh {
            // A configuration just reached. A read legal now is linearized now, without
            // branching: if any linearization goes on from here, one goes on with that read
            // first (a read changes no state, and it is available: every op that must
            // precede it is placed). If the configuration after it was explored already,
            // so in effect was this one.
            fresh = false;
            let read = s.legal_read();
            if read != NIL {
                let new_state = s.step(s.node_op[read as usize] as usize);
                if s.place(read, new_state.unwrap_or(DEAD), true) {
                    fresh = true;
                    continue;
                }
                match s.unwind() {
                    Some(e) => entry = e,
                    None => return Outcome { verdict: Verdict::NotLinearizable,
                                             order: s.best_order(), stuck, states: s.states },
                }
                continue;
            }
            entry = s.next[HEAD as usize];
        }
        if entry == NIL {
            // past every event left: only ops that may never happen remain
            return Outcome { verdict: Verdict::Linearizable, order: s.order(), stuck: None,
                             states: s.states };
        }
        if s.is_call[entry as usize] {
            let i = s.node_op[entry as usize] as usize;
            let t = s.twin[i];
            let twin_free = t != NIL && {
                let id = s.cid[t as usize];
                s.set.info[(id / 64) as usize] >> (id % 64) & 1 == 0
            };
            // no read is legal in this configuration (one would have been taken)
            if s.ops[i].f != READ && !twin_free {
                if let Some(new_state) = s.step(i) {
                    if s.place(entry, new_state, false) {
                        fresh = true;
                        continue;
                    }
                }
            }
            entry = s.next[entry as usize];
        } else {
            let i = s.node_op[entry as usize] as usize;
            if s.ops[i].opt {
                // an optional op not placed by its completion did not happen: drop it,
                // without a choice (placing it earlier is what other branches try)
                let drop_state = match observed(&s.ops[i]) {
                    Some(v) if v as i64 == s.state && s.obs_left[v] == 1 => DEAD,
                    _ => s.state,
                };
                if s.place_as(s.call_node[i], drop_state, true, true) {
                    fresh = true;
                    continue;
                }
                match s.unwind() {
                    Some(e) => entry = e,
                    None => return Outcome { verdict: Verdict::NotLinearizable,
                                             order: s.best_order(), stuck, states: s.states },
                }
                continue;
            }
            // the completion of an op not yet linearized: backtrack; the first completion
            // met since the deepest prefix yet was reached is the one it could not get past
            if s.new_best || stuck.is_none() {
                stuck = Some(s.node_op[entry as usize]);
                s.new_best = false;
            }
            match s.unwind() {
                Some(e) => entry = e,
                None => return Outcome { verdict: Verdict::NotLinearizable,
                                         order: s.best_order(), stuck, states: s.states },
            }
        }
    }
}

/// The search's working data: the event list, the linearized set, the memo and the stack.
struct Search<'a> {
    ops: &'a [Op],
    /// Per info op, the latest identical info op invoked before it (NIL: none): the two
    /// are interchangeable once both are invoked, so one is placed only after its twin
    /// (exact: a linearization placing it first is one with the two swapped).
    twin: Vec<u32>,
    info: Vec<bool>,
    must: Vec<bool>,
    call_node: Vec<u32>,
    cid: Vec<u32>,
    nc: u32,
    next: Vec<u32>,
    prev: Vec<u32>,
    node_op: Vec<u32>,
    is_call: Vec<bool>,
    ret_of: Vec<u32>,
    set: LinSet,
    memo: Memo,
    max_entries: usize,
    states: u64,
    stack: Vec<Frame>,
    state: i64,
    /// Per value: ops left to linearize that observe it, those of them that must happen,
    /// and ops left that write it.
    obs_left: Vec<u32>,
    must_left: Vec<u32>,
    writes_left: Vec<u32>,
    hash: u64,
    /// The nodes of the longest prefix placed yet (the first one reached of that length);
    /// `stack[..agree]` still equals `best[..agree]`, so a longer prefix copies only what
    /// changed since (amortised O(1) per step instead of a copy of the stack).
    best: Vec<u32>,
    agree: usize,
    /// A longer prefix was reached since the stuck op was last recorded.
    new_best: bool,
}

impl Search<'_> {
    /// The register / cas-register step: the state after op `i` if it is legal now (DEAD
    /// when no op left to linearize can observe the new value), or None. A step that
    /// replaces a value some op that must happen still has to observe, when nothing left
    /// writes that value again, is None too: that op could never be linearized.
    #[inline]
    fn step(&self, i: usize) -> Option<i64> {
        let op = &self.ops[i];
        let live = |v: i64, k: u32| if self.obs_left[v as usize] > k { v } else { DEAD };
        // would replacing the current value strand an op that must observe it? (`mine`:
        // this op is one of those observers itself)
        let strands = |new: i64, mine: u32| {
            let s = self.state;
            s >= 0 && new != s && self.must_left[s as usize] > mine
                && self.writes_left[s as usize] == 0
        };
        match op.f {
            // after this read one observer fewer is left
            READ => (self.state == op.a).then(|| live(op.a, 1)),
            WRITE => (!strands(op.a, 0)).then(|| live(op.a, 0)),
            _ if op.a == ANY => (!strands(op.b, 0)).then(|| live(op.b, 0)),
            _ => (self.state == op.a && !strands(op.b, self.must[i] as u32))
                .then(|| live(op.b, (op.b == op.a) as u32)),
        }
    }

    /// Count op `i` in (`d` = 1) or out of (`d` = -1) what is left to linearize.
    #[inline]
    fn count(&mut self, i: usize, d: i32) {
        let op = self.ops[i];
        let add = |x: &mut u32| *x = x.wrapping_add_signed(d);
        if let Some(v) = observed(&op) {
            add(&mut self.obs_left[v]);
            if self.must[i] {
                add(&mut self.must_left[v]);
            }
        }
        match op.f {
            WRITE => add(&mut self.writes_left[op.a as usize]),
            CAS => add(&mut self.writes_left[op.b as usize]),
            _ => {}
        }
    }

    fn order(&self) -> Vec<u32> {
        self.stack.iter().filter(|f| !f.dropped).map(|f| self.node_op[f.node as usize]).collect()
    }

    /// The ops of the longest prefix placed yet, in order (dropped ops, kept as their
    /// return node, left out).
    fn best_order(&self) -> Vec<u32> {
        self.best.iter().filter(|&&node| self.is_call[node as usize])
            .map(|&node| self.node_op[node as usize]).collect()
    }

    /// The first available read (its call comes before any pending completion) that is
    /// legal in the current state, or NIL.
    fn legal_read(&self) -> u32 {
        let mut e = self.next[HEAD as usize];
        while e != NIL && self.is_call[e as usize] {
            let op = &self.ops[self.node_op[e as usize] as usize];
            if op.f == READ && op.a == self.state {
                return e;
            }
            e = self.next[e as usize];
        }
        NIL
    }

    #[inline]
    fn flip(&mut self, i: usize) {
        let id = self.cid[i];
        let bits = if self.info[i] { &mut self.set.info } else { &mut self.set.done };
        bits[(id / 64) as usize] ^= 1 << (id % 64);
    }

    /// Linearize the op of call `node` next, reaching `new_state`, unless that (set, state)
    /// was explored already; return whether it was placed.
    fn place(&mut self, node: u32, new_state: i64, forced: bool) -> bool {
        self.place_as(node, new_state, forced, false)
    }

    /// As `place`; `dropped`: the op is dropped (did not happen) rather than linearized.
    fn place_as(&mut self, node: u32, new_state: i64, forced: bool, dropped: bool) -> bool {
        let i = self.node_op[node as usize] as usize;
        let (id, is_info) = (self.cid[i], self.info[i]);
        let (old_lc, old_hc) = (self.set.lc, self.set.hc);
        self.flip(i);
        if !is_info {
            if id == self.set.lc {
                self.set.lc = self.set.next_unset(id + 1, self.nc);
            }
            self.set.hc = self.set.hc.max(id + 1);
        }
        let z = zobrist(id, is_info);
        let key = self.hash ^ z ^ state_hash(new_state);
        if self.memo.contains(key, new_state, &self.set) {
            self.flip(i);
            self.set.lc = old_lc;
            self.set.hc = old_hc;
            return false;
        }
        if self.memo.entries.len() >= self.max_entries {
            self.memo.clear(); // bounded memory: forget, never prune wrongly
        }
        self.memo.insert(key, new_state, &self.set);
        self.states += 1;
        self.hash ^= z;
        self.stack.push(Frame { node, state: self.state, lc: old_lc, hc: old_hc, forced,
                                dropped });
        if self.stack.len() > self.best.len() {
            self.best.truncate(self.agree);
            let ret_of = &self.ret_of;
            self.best.extend(self.stack[self.agree..].iter()
                .map(|f| if f.dropped { ret_of[f.node as usize] } else { f.node }));
            self.agree = self.stack.len();
            self.new_best = true;
        }
        self.state = new_state;
        lift(node, &mut self.next, &mut self.prev, &self.ret_of);
        self.count(i, -1);
        true
    }

    /// Undo the last placement; return its frame.
    fn pop(&mut self) -> Option<Frame> {
        let top = self.stack.pop()?;
        self.agree = self.agree.min(self.stack.len());
        let i = self.node_op[top.node as usize] as usize;
        self.flip(i);
        self.count(i, 1);
        self.set.lc = top.lc;
        self.set.hc = top.hc;
        self.hash ^= zobrist(self.cid[i], self.info[i]);
        self.state = top.state;
        unlift(top.node, &mut self.next, &mut self.prev, &self.ret_of);
        Some(top)
    }

    /// Backtrack out of a dead configuration: undo placements up to and including the
    /// last one made by choice; return the entry after it, where the search goes on (None
    /// when nothing is left to try).
    fn unwind(&mut self) -> Option<u32> {
        loop {
            let top = self.pop()?;
            if !top.forced {
                return Some(self.next[top.node as usize]);
            }
        }
    }
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
