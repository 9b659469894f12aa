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
//! The search itself is `wgl::search_machine`, the one loop the register core runs too;
//! a machine is its model interface (`wgl::Machine`). One reduction, exact for any
//! machine: at a new configuration, the first operation that never changes the state (a
//! read: `Machine::pure`) and is legal now is linearized at once, without a choice.
//! Optional operations are dropped at their completion.

use std::collections::HashMap;
use std::time::Instant;

use crate::kv::{self, Columns, Part, OK, OPTIONAL};
use crate::wgl::{search_machine, Limits, Outcome};

pub use crate::wgl::{MOp, Machine};

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
    fn step(&mut self, state: i64, _i: usize, op: &MOp) -> Option<i64> {
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
    fn step(&mut self, state: i64, _i: usize, op: &MOp) -> Option<i64> {
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
    fn step(&mut self, state: i64, _i: usize, op: &MOp) -> Option<i64> {
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
    fn step(&mut self, state: i64, _i: usize, op: &MOp) -> Option<i64> {
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
    fn step(&mut self, state: i64, _i: usize, op: &MOp) -> Option<i64> {
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

/// Search ops `0..n` (events as `wgl::search` takes them) under `machine`.
pub fn search(machine: &mut dyn Machine, ops: &[MOp], events: &[u32], limits: Limits)
              -> Outcome {
    search_machine(machine, ops, events, limits)
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
    use crate::wgl::Verdict;

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
