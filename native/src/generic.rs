//! The search over any model ("machine"): Lowe's Wing–Gong–Lowe search with memoised
//! (set of linearized operations, state) pairs, where a machine says what an operation
//! does to a state. States are integer ids the machine hands out (it interns what it
//! needs: strings, sets, queues). The native twin of
//! `replicalab.checkers.linearizability.search.search_model`, step for step (same order, longest
//! prefix and stuck op), so both give the same results.
//!
//! Machines: `append` (kv with append: read, write, cas, append onto strings), `set`
//! (add, read of the whole set), `fifo-queue` (enqueue, dequeue), `counter` (add, read),
//! `mutex` (acquire, release). Each mirrors its Python model in
//! `replicalab.checkers.linearizability.register_models` / `datatype_models`.
//!
//! One reduction, exact for any machine: at a new configuration, the first operation that
//! never changes the state (a read: `Machine::pure`) and is legal now is linearized at
//! once, without a choice. Optional operations are dropped at their completion, as in
//! `wgl`.

use std::collections::HashMap;
use std::time::Instant;

use crate::kv::{self, Columns, Part, OK, OPTIONAL};
use crate::wgl::{state_hash, zobrist, LinSet, Limits, Memo, Outcome, Verdict};

const NIL: u32 = u32::MAX;
const HEAD: u32 = 0;

/// One operation as a machine takes it: `kind` is the position of its name in the
/// model's ops; `a` and `b` are the machine's.
#[derive(Clone, Copy, Debug)]
pub struct MOp {
    pub kind: u8,
    pub a: i64,
    pub b: i64,
    pub opt: bool,
}

/// A sequential object over integer states.
pub trait Machine {
    /// The initial state.
    fn init(&mut self) -> i64;
    /// The state after `op` in `state`, or None when it is not legal there.
    fn step(&mut self, state: i64, op: &MOp) -> Option<i64>;
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
}

/// A value of the append machine's table: nil, a string, or a value that is not one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Text {
    Nil,
    Str(String),
    Opaque,
}

/// kv with append: read (0), write (1), cas (2: `a` expected, -1 unrecorded; `b` new),
/// append (3). States are value ids: the table's, then the strings appends build; nil
/// and "" are one value (id 0).
pub struct Append {
    texts: Vec<Text>,
    by_str: HashMap<String, i64>,
    appended: HashMap<(i64, i64), i64>,
    /// Reads that must happen: (op, the string read, the writes or cas that may put a
    /// prefix of it there); empty when the part has no append (no pruning then).
    reads: Vec<(usize, String, Vec<usize>)>,
}

impl Append {
    /// A machine whose ids `0..table.len()` are `table`'s values (id 0 nil).
    pub fn new(table: Vec<Text>) -> Self {
        let mut by_str = HashMap::new();
        for (i, t) in table.iter().enumerate() {
            if let Text::Str(s) = t {
                by_str.entry(s.clone()).or_insert(i as i64);
            }
        }
        Append { texts: table, by_str, appended: HashMap::new(), reads: Vec::new() }
    }

    fn concat(&mut self, state: i64, v: i64) -> Option<i64> {
        if let Some(&id) = self.appended.get(&(state, v)) {
            return Some(id);
        }
        let text = |t: &Text| match t {
            Text::Nil => Some(String::new()),
            Text::Str(s) => Some(s.clone()),
            Text::Opaque => None,
        };
        let mut s = text(self.texts.get(state as usize)?)?;
        s.push_str(&text(self.texts.get(v as usize)?)?);
        let id = if s.is_empty() {
            0
        } else if let Some(&id) = self.by_str.get(&s) {
            id
        } else {
            let id = self.texts.len() as i64;
            self.texts.push(Text::Str(s.clone()));
            self.by_str.insert(s, id);
            id
        };
        self.appended.insert((state, v), id);
        Some(id)
    }
}

impl Append {
    /// The string of value `id`: nil is "", a value that is not a string None.
    fn text(&self, id: i64) -> Option<&str> {
        match self.texts.get(id as usize)? {
            Text::Nil => Some(""),
            Text::Str(s) => Some(s),
            Text::Opaque => None,
        }
    }
}

impl Machine for Append {
    fn init(&mut self) -> i64 {
        0
    }

    fn prepare(&mut self, ops: &[MOp], must: &[bool]) {
        self.reads.clear();
        if !ops.iter().any(|o| o.kind == 3) {
            return;
        }
        let mut resets: Vec<(usize, String)> = Vec::new();
        for (i, o) in ops.iter().enumerate() {
            let new = match o.kind {
                1 => o.a,
                2 => o.b,
                _ => continue,
            };
            if let Some(w) = self.text(new) {
                resets.push((i, w.to_string()));
            }
        }
        for (i, o) in ops.iter().enumerate() {
            if o.kind != 0 || !must[i] {
                continue;
            }
            if let Some(t) = self.text(o.a) {
                let by: Vec<usize> = resets.iter().filter(|(_, w)| t.starts_with(w.as_str()))
                    .map(|&(j, _)| j).collect();
                self.reads.push((i, t.to_string(), by));
            }
        }
    }

    fn viable(&self, state: i64, done: &dyn Fn(usize) -> bool) -> bool {
        let Some(s) = self.text(state) else { return true };
        self.reads.iter().all(|(i, t, by)| {
            done(*i) || t.starts_with(s) || by.iter().any(|&j| !done(j))
        })
    }
    fn step(&mut self, state: i64, op: &MOp) -> Option<i64> {
        match op.kind {
            0 => (state == op.a).then_some(state),
            1 => Some(op.a),
            2 => (op.a == -1 || op.a == state).then_some(op.b),
            _ => self.concat(state, op.a),
        }
    }
    fn pure(&self, kind: u8) -> bool {
        kind == 0
    }
    fn kinds(&self) -> u8 {
        4
    }
}

/// Interned states that are sequences of ids (sets sorted, queues oldest first).
struct Seqs {
    items: Vec<Vec<i64>>,
    ids: HashMap<Vec<i64>, i64>,
}

impl Seqs {
    fn new() -> Self {
        Seqs { items: Vec::new(), ids: HashMap::new() }
    }
    fn id(&mut self, v: Vec<i64>) -> i64 {
        if let Some(&id) = self.ids.get(&v) {
            return id;
        }
        let id = self.items.len() as i64;
        self.items.push(v.clone());
        self.ids.insert(v, id);
        id
    }
}

/// A set: add (0, `a` the element id), read (1, `a` the id of the set read, whose
/// elements are `table[a]`).
pub struct Set {
    states: Seqs,
    read_state: Vec<i64>,
    added: HashMap<(i64, i64), i64>,
}

impl Set {
    /// A machine whose read ids name the sets of `table` (sorted element ids).
    pub fn new(table: Vec<Vec<i64>>) -> Self {
        let mut states = Seqs::new();
        states.id(Vec::new());
        let read_state = table.into_iter().map(|mut s| {
            s.sort_unstable();
            s.dedup();
            states.id(s)
        }).collect();
        Set { states, read_state, added: HashMap::new() }
    }
}

impl Machine for Set {
    fn init(&mut self) -> i64 {
        0
    }
    fn step(&mut self, state: i64, op: &MOp) -> Option<i64> {
        if op.kind == 1 {
            return (self.read_state.get(op.a as usize) == Some(&state)).then_some(state);
        }
        if let Some(&id) = self.added.get(&(state, op.a)) {
            return Some(id);
        }
        let mut s = self.states.items[state as usize].clone();
        if let Err(p) = s.binary_search(&op.a) {
            s.insert(p, op.a);
        }
        let id = self.states.id(s);
        self.added.insert((state, op.a), id);
        Some(id)
    }
    fn pure(&self, kind: u8) -> bool {
        kind == 1
    }
    fn kinds(&self) -> u8 {
        2
    }
}

/// A FIFO queue: enqueue (0, `a` the value id), dequeue (1, `a` the value returned, 0
/// nil = the queue was empty, -1 not recorded: the oldest value whatever it is).
pub struct Fifo {
    states: Seqs,
    moved: HashMap<(i64, u8, i64), i64>,
}

impl Fifo {
    /// An empty-queue machine.
    pub fn new() -> Self {
        let mut states = Seqs::new();
        states.id(Vec::new());
        Fifo { states, moved: HashMap::new() }
    }
}

impl Default for Fifo {
    fn default() -> Self {
        Self::new()
    }
}

impl Machine for Fifo {
    fn init(&mut self) -> i64 {
        0
    }
    fn step(&mut self, state: i64, op: &MOp) -> Option<i64> {
        let q = &self.states.items[state as usize];
        if op.kind == 1 {
            if q.is_empty() {
                return (op.a <= 0).then_some(state);
            }
            if op.a != -1 && q[0] != op.a {
                return None;
            }
        }
        let key = (state, op.kind, op.a);
        if let Some(&id) = self.moved.get(&key) {
            return Some(id);
        }
        let next = if op.kind == 0 {
            let mut n = q.clone();
            n.push(op.a);
            n
        } else {
            q[1..].to_vec()
        };
        let id = self.states.id(next);
        self.moved.insert(key, id);
        Some(id)
    }
    fn pure(&self, _kind: u8) -> bool {
        false
    }
    fn kinds(&self) -> u8 {
        2
    }
}

/// A counter from 0: add (0, `a` the amount), read (1, `a` the total read). The state is
/// the total itself.
pub struct Counter;

impl Machine for Counter {
    fn init(&mut self) -> i64 {
        0
    }
    fn step(&mut self, state: i64, op: &MOp) -> Option<i64> {
        if op.kind == 0 {
            state.checked_add(op.a)
        } else {
            (state == op.a).then_some(state)
        }
    }
    fn pure(&self, kind: u8) -> bool {
        kind == 1
    }
    fn kinds(&self) -> u8 {
        2
    }
}

/// A lock: acquire (0) when free, release (1) when held; state 0 free, 1 held.
pub struct Mutex;

impl Machine for Mutex {
    fn init(&mut self) -> i64 {
        0
    }
    fn step(&mut self, state: i64, op: &MOp) -> Option<i64> {
        if op.kind == 0 {
            (state == 0).then_some(1)
        } else {
            (state == 1).then_some(0)
        }
    }
    fn pure(&self, _kind: u8) -> bool {
        false
    }
    fn kinds(&self) -> u8 {
        2
    }
}

struct Frame {
    node: u32,
    state: i64,
    lc: u32,
    hc: u32,
    forced: bool,
    dropped: bool,
}

/// Search ops `0..n` (events as `wgl::search` takes them) under `machine`.
pub fn search(machine: &mut dyn Machine, ops: &[MOp], events: &[u32], limits: Limits)
              -> Outcome {
    let n = ops.len();
    let mut info = vec![true; n];
    for &ev in events {
        if ev & 1 == 1 {
            info[(ev >> 1) as usize] = false;
        }
    }
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
    let must: Vec<bool> = (0..n).map(|i| !info[i] && !ops[i].opt).collect();
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
    let mut best: Vec<u32> = Vec::new();
    let mut agree = 0usize;
    let mut states: u64 = 0;
    let mut hash: u64 = 0;
    let mut state = machine.init();
    let mut stuck: Option<u32> = None;
    let mut fresh = false;
    let mut scan = true;
    let mut entry = next[HEAD as usize];
    let mut iter: u64 = 0;

    let order_of = |nodes: &mut dyn Iterator<Item = u32>, is_call: &[bool], node_op: &[u32]|
        -> Vec<u32> { nodes.filter(|&x| is_call[x as usize]).map(|x| node_op[x as usize]).collect() };

    loop {
        iter += 1;
        if (iter & 0x3FF == 0 && limits.deadline.is_some_and(|d| Instant::now() >= d))
            || (iter & crate::signals::EVERY == 0 && crate::signals::interrupted())
        {
            let order = order_of(&mut best.iter().copied(), &is_call, &node_op);
            return Outcome { verdict: Verdict::Timeout, order, stuck, states };
        }
        if entry == NIL {
            let mut it = stack.iter().filter(|f| !f.dropped).map(|f| f.node);
            let order = order_of(&mut it, &is_call, &node_op);
            return Outcome { verdict: Verdict::Linearizable, order, stuck: None, states };
        }
        let mut take: Option<i64> = None;
        if scan {
            scan = false;
            let mut e = entry;
            while e != NIL && is_call[e as usize] {
                let i = node_op[e as usize] as usize;
                if pure[i] {
                    if let Some(s) = machine.step(state, &ops[i]) {
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
            let new = if take.is_some() {
                take
            } else {
                machine.step(state, &ops[i]).filter(|&s| {
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
            placing = Some((call_node[i], state, true, true));
        } else if fresh || stuck.is_none() {
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

fn lift(call: u32, next: &mut [u32], prev: &mut [u32], ret_of: &[u32]) {
    unlink(call, next, prev);
    let r = ret_of[call as usize];
    if r != NIL {
        unlink(r, next, prev);
    }
}

fn unlift(call: u32, next: &mut [u32], prev: &mut [u32], ret_of: &[u32]) {
    let r = ret_of[call as usize];
    if r != NIL {
        relink(r, next, prev);
    }
    relink(call, next, prev);
}

/// One part prepared for a machine: Jepsen's drops (fail ops; reads that did not complete
/// ok), sorted by (invoke, index), and the events in time order.
pub fn prepare(c: &Columns, part: &[u32], machine: &dyn Machine) -> (Vec<u32>, Vec<MOp>, Vec<u32>) {
    let mut rows: Vec<u32> = part
        .iter()
        .copied()
        .filter(|&r| {
            let r = r as usize;
            let o = c.outcome[r];
            o != kv::FAIL && !(machine.pure(c.kind[r] as u8) && o != OK)
        })
        .collect();
    rows.sort_by_key(|&r| (c.invoke[r as usize], c.index[r as usize]));
    let ops: Vec<MOp> = rows
        .iter()
        .map(|&r| {
            let r = r as usize;
            MOp { kind: c.kind[r] as u8, a: c.a[r], b: c.b[r], opt: c.outcome[r] == OPTIONAL }
        })
        .collect();
    let events = kv::events_of(c, &rows);
    (rows, ops, events)
}

/// Search one part of `c` under `machine` until `deadline`.
pub fn check_part(c: &Columns, key: i64, part: &[u32], machine: &mut dyn Machine,
                  deadline: Option<Instant>, cache_bytes: usize) -> Part {
    let t = Instant::now();
    let (rows, ops, events) = prepare(c, part, machine);
    let limits = Limits { deadline, max_entries: kv::cache_entries(ops.len(), cache_bytes) };
    let out = search(machine, &ops, &events, limits);
    kv::part_of(key, part.len(), &rows, out, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (kind, a, invoke, complete): complete < 0 marks an info op.
    fn run(machine: &mut dyn Machine, rows: &[(u8, i64, i64, i64)]) -> Outcome {
        let ops: Vec<MOp> = rows.iter().map(|&(k, a, _, _)| MOp { kind: k, a, b: 0, opt: false })
            .collect();
        let mut evs: Vec<(i64, u8, u32)> = Vec::new();
        for (i, &(_, _, inv, done)) in rows.iter().enumerate() {
            evs.push((inv, 0, 2 * i as u32));
            if done >= 0 {
                evs.push((done, 1, 2 * i as u32 + 1));
            }
        }
        evs.sort();
        let events: Vec<u32> = evs.iter().map(|e| e.2).collect();
        search(machine, &ops, &events, Limits { deadline: None, max_entries: 1 << 20 })
    }

    #[test]
    fn queue_order_and_empty_dequeues() {
        // enqueue 1 then 2, dequeue 2 first: not FIFO
        let bad = [(0, 1, 0, 1), (0, 2, 2, 3), (1, 2, 4, 5)];
        assert_eq!(run(&mut Fifo::new(), &bad).verdict, Verdict::NotLinearizable);
        let ok = [(0, 1, 0, 1), (0, 2, 2, 3), (1, 1, 4, 5), (1, 2, 6, 7), (1, 0, 8, 9)];
        assert_eq!(run(&mut Fifo::new(), &ok).verdict, Verdict::Linearizable);
    }

    #[test]
    fn counter_set_mutex_and_append() {
        let c = [(0, 5, 0, 1), (0, -2, 0, 3), (1, 3, 4, 5)];
        assert_eq!(run(&mut Counter, &c).verdict, Verdict::Linearizable);
        let c2 = [(0, 5, 0, 1), (1, 0, 2, 3)];
        assert_eq!(run(&mut Counter, &c2).verdict, Verdict::NotLinearizable);
        let m = [(0, 0, 0, 1), (0, 0, 2, 3)];
        assert_eq!(run(&mut Mutex, &m).verdict, Verdict::NotLinearizable);
        // set ids: read id 0 = {}, 1 = {7}
        let s = [(1, 0, 0, 1), (0, 7, 2, 3), (1, 1, 4, 5)];
        assert_eq!(run(&mut Set::new(vec![vec![], vec![7]]), &s).verdict, Verdict::Linearizable);
        // append "a" then "b" (ids 1, 2), read "ab" (id 3)
        let table = vec![Text::Nil, Text::Str("a".into()), Text::Str("b".into()),
                         Text::Str("ab".into())];
        let ap = [(3, 1, 0, 1), (3, 2, 2, 3), (0, 3, 4, 5)];
        assert_eq!(run(&mut Append::new(table.clone()), &ap).verdict, Verdict::Linearizable);
        let ba = [(3, 2, 0, 1), (3, 1, 2, 3), (0, 3, 4, 5)];
        assert_eq!(run(&mut Append::new(table), &ba).verdict, Verdict::NotLinearizable);
    }
}
