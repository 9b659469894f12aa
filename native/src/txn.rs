//! The native core of the transaction checker (`replicalab.checkers.txn`): the same
//! analysis as the pure-Python reference, on columns. `analyse_list_append` /
//! `analyse_register`: the dependency edges and the anomalies no cycle is needed for
//! (`listappend.py`, `register.py`); `order_edges`: Elle's process and real-time orders
//! (`graph.py`); `search`: per strongly connected component, Elle's cycle classes in
//! Elle's order, each decided exactly or left undecided when the budget runs out
//! (`cycles.py`); `si_completion`: snapshot isolation over the unknown orders of unread
//! appends. What the lattice of models says (which class implies which) comes from
//! Python as `Tables`.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

pub const NIL: i64 = i64::MIN;
pub const WW: u8 = 0;
pub const WR: u8 = 1;
pub const RW: u8 = 2;
pub const PROCESS: u8 = 3;
pub const REALTIME: u8 = 4;
pub const OK: u8 = 1;
pub const FAIL: u8 = 2;
pub const INFO: u8 = 3;
const APPEND: u8 = 0;
const READ: u8 = 1;
const WRITE: u8 = 2;
pub const NEVER: i64 = -1;
const DFS_STEPS: i64 = 2_000_000;
const B_WW: u8 = 1;
const B_WR: u8 = 2;
const B_RW: u8 = 4;
const B_P: u8 = 8;
const B_RT: u8 = 16;

/// FxHash-style hasher (one multiply per word): keys here are small integers.
#[derive(Default)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

pub type FxBuild = BuildHasherDefault<Fx>;
type Map<K, V> = HashMap<K, V, FxBuild>;

/// Transactions as columns. Micro-op `m` of transaction `t` is at `mop_start[t] + j`;
/// `f` 0 append, 1 r, 2 w; `val` the value appended/written, a register read's value
/// (`rlen` -2; nil: `rlen` -1) or a list read's start in `reads` (`rlen` its length).
/// `invoke`/`complete`: instants (positions or ns), NEVER when not in the history.
#[derive(Default)]
pub struct Txns {
    pub index: Vec<i64>,
    pub process: Vec<i64>,
    pub outcome: Vec<u8>,
    pub invoke: Vec<i64>,
    pub complete: Vec<i64>,
    pub mop_start: Vec<u32>,
    pub mop_len: Vec<u32>,
    pub f: Vec<u8>,
    pub key: Vec<u32>,
    pub val: Vec<i64>,
    pub rlen: Vec<i32>,
    pub reads: Vec<i64>,
    pub keys: Vec<String>,
}

impl Txns {
    pub fn len(&self) -> usize {
        self.index.len()
    }
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
    fn mops(&self, t: usize) -> std::ops::Range<usize> {
        let s = self.mop_start[t] as usize;
        s..s + self.mop_len[t] as usize
    }
    /// A list read's elements (nil and the empty list: none).
    fn list(&self, m: usize) -> &[i64] {
        if self.rlen[m] <= 0 {
            return &[];
        }
        let s = self.val[m] as usize;
        &self.reads[s..s + self.rlen[m] as usize]
    }
    fn nil(&self, m: usize) -> bool {
        self.rlen[m] == -1
    }
    /// A register read's value (NIL for nil).
    fn reg(&self, m: usize) -> i64 {
        if self.rlen[m] == -1 { NIL } else { self.val[m] }
    }
}

/// An input error: the transaction's `index` and the problem.
pub struct InputError {
    pub index: i64,
    pub msg: String,
}

/// A non-cycle anomaly, or a cycle (edge ids into the search's edges).
pub struct Anomaly {
    pub kind: String,
    pub txns: Vec<u32>,
    pub cycle: Option<Vec<usize>>,
    pub key: Option<u32>,
    pub detail: String,
}

impl Anomaly {
    fn plain(kind: &str, txns: Vec<u32>, key: u32, detail: String) -> Anomaly {
        Anomaly { kind: kind.to_string(), txns, cycle: None, key: Some(key), detail }
    }
}

/// The dependency edges as columns. Each edge's detail (key, the values a and b) is kept
/// only from the first edge that has one: process and real-time edges, most of the
/// edges of a long history and added last, have none and take no room for it.
#[derive(Default, Clone)]
pub struct Edges {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub kind: Vec<u8>,
    key: Vec<u32>,
    a: Vec<i64>,
    b: Vec<i64>,
}

impl Edges {
    pub fn push(&mut self, s: u32, d: u32, k: u8, key: u32, a: i64, b: i64) {
        self.src.push(s);
        self.dst.push(d);
        self.kind.push(k);
        if key != u32::MAX || a != NIL || b != NIL {
            let i = self.src.len() - 1;
            if self.key.len() < i {
                self.key.resize(i, u32::MAX);
                self.a.resize(i, NIL);
                self.b.resize(i, NIL);
            }
            self.key.push(key);
            self.a.push(a);
            self.b.push(b);
        }
    }
    /// Edge `i`'s key (u32::MAX: none) and values a, b (NIL: none).
    pub fn detail(&self, i: usize) -> (u32, i64, i64) {
        if i < self.key.len() { (self.key[i], self.a[i], self.b[i]) } else { (u32::MAX, NIL, NIL) }
    }
    pub fn len(&self) -> usize {
        self.src.len()
    }
    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }
}

fn jv(v: i64) -> String {
    if v == NIL { "null".to_string() } else { v.to_string() }
}

fn jlist(v: &[i64]) -> String {
    let inner: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", inner.join(","))
}

/// A read as JSON: null for nil, else the list.
fn jread(t: &Txns, m: usize) -> String {
    if t.nil(m) { "null".to_string() } else { jlist(t.list(m)) }
}

fn err<T>(t: &Txns, tx: usize, msg: String) -> Result<T, InputError> {
    Err(InputError { index: t.index[tx], msg })
}

// ---------------------------------------------------------------------------------------
// list-append

struct Writes {
    /// (key, value) -> (the transaction that appended it, the micro-op)
    writer: Map<(u32, i64), (u32, u32)>,
    intermediate: Map<(u32, i64), u32>,
}

impl Writes {
    fn tx(&self, kv: &(u32, i64)) -> Option<u32> {
        self.writer.get(kv).map(|&(x, _)| x)
    }
}

/// The last value transaction `tx` appended to key `k` (it appended some).
fn last_append(t: &Txns, tx: u32, k: u32) -> i64 {
    t.mops(tx as usize).rev().find(|&m| t.f[m] == APPEND && t.key[m] == k)
        .map_or(NIL, |m| t.val[m])
}

fn la_writes(t: &Txns) -> Result<Writes, InputError> {
    let mut w = Writes { writer: Map::default(), intermediate: Map::default() };
    w.writer.reserve(t.f.iter().filter(|&&f| f == APPEND).count());
    for tx in 0..t.len() {
        for m in t.mops(tx) {
            match t.f[m] {
                APPEND => {
                    let kv = (t.key[m], t.val[m]);
                    if let Some(&(o, _)) = w.writer.get(&kv) {
                        return err(t, tx, format!(
                            "appends {} to key {}, which T{} appended too; list-append needs \
                             values unique per key", t.val[m], t.keys[kv.0 as usize],
                            t.index[o as usize]));
                    }
                    w.writer.insert(kv, (tx as u32, m as u32));
                    // an earlier append of this transaction to the key is intermediate
                    let before = t.mop_start[tx] as usize..m;
                    if let Some(p) = before.rev().find(|&p| t.f[p] == APPEND
                                                       && t.key[p] == t.key[m]) {
                        w.intermediate.insert((t.key[m], t.val[p]), tx as u32);
                    }
                }
                READ => {
                    if t.rlen[m] == -2 {
                        return err(t, tx, format!(
                            "the read of key {} returned {}; list-append reads return a list \
                             (or nil)", t.keys[t.key[m] as usize], t.val[m]));
                    }
                }
                _ => return err(t, tx, ":w; list-append takes :append and :r (for :w use \
                                        {model} rw-register)".to_string()),
            }
        }
    }
    Ok(w)
}

/// Per key (dense key ids): its version order (the last seen of its longest reads, each
/// element once; a key appended once and never read: that element, unless
/// `reads_only`; none: empty) and, for a key whose reads are not all prefixes of one,
/// its distinct non-empty reads sorted by length (first seen first on a tie) with the
/// transaction that first read each (as (start, len) into `t.reads`); reads of the
/// transactions whose outcome is in `outcomes`.
struct Orders {
    order: Vec<Vec<i64>>,
    sorted: Vec<(u32, Vec<Span>)>,
}

/// A read as (start, len) into `t.reads`, and the transaction that made it.
type Span = (usize, usize, u32);

type Distinct = Map<(u64, usize), Vec<(usize, usize, u32, u32)>>;

fn version_orders(t: &Txns, outcomes: &[u8], reads_only: bool) -> Orders {
    let nk = t.keys.len();
    // the usual case first: every read of a key is a prefix of its longest one, which
    // then is the order (no hashing of read contents)
    let mut best: Vec<(usize, usize)> = vec![(0, usize::MAX); nk]; // (len, mop)
    let mut appends: Vec<(i64, u8)> = vec![(0, 0); nk]; // (value, count capped at 2)
    for tx in 0..t.len() {
        if !outcomes.contains(&t.outcome[tx]) {
            continue;
        }
        for m in t.mops(tx) {
            let k = t.key[m] as usize;
            if t.f[m] == READ {
                let n = t.list(m).len();
                if n > 0 && (best[k].1 == usize::MAX || n >= best[k].0) {
                    best[k] = (n, m);
                }
            } else if !reads_only {
                appends[k] = (t.val[m], (appends[k].1 + 1).min(2));
            }
        }
    }
    let mut exact = vec![false; nk];
    for tx in 0..t.len() {
        if !outcomes.contains(&t.outcome[tx]) {
            continue;
        }
        for m in t.mops(tx) {
            let k = t.key[m] as usize;
            if t.f[m] == READ && !exact[k] && best[k].1 != usize::MAX {
                let l = t.list(m);
                let longest = t.list(best[k].1);
                if l.len() > longest.len() || longest[..l.len()] != *l {
                    exact[k] = true;
                }
            }
        }
    }
    let mut order: Vec<Vec<i64>> = vec![Vec::new(); nk];
    for k in 0..nk {
        if best[k].1 != usize::MAX && !exact[k] {
            order[k] = dedup(t.list(best[k].1));
        }
    }
    // keys whose reads disagree: distinct reads, sorted, as Elle does
    let mut seen: Map<u32, Distinct> = Map::default();
    let mut key_order: Vec<u32> = Vec::new();
    let mut seq = 0u32;
    if exact.iter().any(|&x| x) {
        for tx in 0..t.len() {
            if !outcomes.contains(&t.outcome[tx]) {
                continue;
            }
            for m in t.mops(tx) {
                let k = t.key[m];
                if t.f[m] != READ || !exact[k as usize] {
                    continue;
                }
                let l = t.list(m);
                if l.is_empty() {
                    continue;
                }
                let mut h = Fx::default();
                for &x in l {
                    h.write_i64(x);
                }
                let per = seen.entry(k).or_insert_with(|| {
                    key_order.push(k);
                    Map::default()
                });
                let bucket = per.entry((h.finish(), l.len())).or_default();
                if !bucket.iter().any(|&(s, n, _, _)| &t.reads[s..s + n] == l) {
                    bucket.push((t.val[m] as usize, l.len(), tx as u32, seq));
                    seq += 1;
                }
            }
        }
    }
    let mut sorted = Vec::new();
    for k in key_order {
        let mut all: Vec<(usize, usize, u32, u32)> =
            seen[&k].values().flatten().copied().collect();
        // by length, first seen first among equal lengths; the order is the last longest
        all.sort_by_key(|&(_, n, _, q)| (n, q));
        let vals: Vec<(usize, usize, u32)> = all.iter().map(|&(s, n, tx, _)| (s, n, tx)).collect();
        let (s, n, _) = *vals.last().unwrap();
        order[k as usize] = dedup(&t.reads[s..s + n]);
        sorted.push((k, vals));
    }
    for k in 0..nk {
        if appends[k].1 == 1 && order[k].is_empty() {
            order[k] = vec![appends[k].0];
        }
    }
    Orders { order, sorted }
}

fn dedup(l: &[i64]) -> Vec<i64> {
    let mut o: Vec<i64> = Vec::with_capacity(l.len());
    if l.len() <= 64 {
        for &x in l {
            if !o.contains(&x) {
                o.push(x);
            }
        }
    } else {
        let mut seen: Map<i64, ()> = Map::default();
        for &x in l {
            if seen.insert(x, ()).is_none() {
                o.push(x);
            }
        }
    }
    o
}

pub fn analyse_list_append(t: &Txns, edges: &mut Edges, an: &mut Vec<Anomaly>)
                           -> Result<(), InputError> {
    let prof = std::env::var_os("REPLICALAB_TXN_PROFILE").is_some();
    let t0 = Instant::now();
    let lap = |what: &str| if prof { eprintln!("  {what}: {:?}", t0.elapsed()) };
    let w = la_writes(t)?;
    lap("writes");
    let possible = [OK, INFO];
    let orders = version_orders(t, &possible, false);
    lap("orders");
    for (k, vals) in &orders.sorted {
        for p in vals.windows(2) {
            let (a, b) = (&t.reads[p[0].0..p[0].0 + p[0].1], &t.reads[p[1].0..p[1].0 + p[1].1]);
            if b.len() < a.len() || &b[..a.len()] != a {
                an.push(Anomaly::plain("incompatible-order", vec![p[0].2, p[1].2], *k,
                                       format!("{{\"values\":[{},{}]}}", jlist(a), jlist(b))));
                break;
            }
        }
    }
    // per key, per place in its order: the element's writer (not failed); the position
    // of an element in a short order is found by a scan, in a long one by a map
    let nk = t.keys.len();
    let mut wstart = vec![0usize; nk + 1];
    for k in 0..nk {
        wstart[k + 1] = wstart[k] + orders.order[k].len();
    }
    // one look-up per element: its writer, whether it is bad (an aborted transaction or
    // nobody appended it: `bad` counts those up to each point, so a read that is a
    // prefix of the order with none needs no look-up), and where each append stands
    // (`apos`, by micro-op)
    let mut owriter = vec![u32::MAX; wstart[nk]];
    let mut apos = vec![u32::MAX; t.f.len()];
    let mut bad: Vec<Vec<u32>> = Vec::with_capacity(nk);
    for (k, o) in orders.order.iter().enumerate() {
        let mut acc = vec![0u32; o.len() + 1];
        for (i, &v) in o.iter().enumerate() {
            let is_bad = match w.writer.get(&(k as u32, v)) {
                Some(&(x, m)) => {
                    apos[m as usize] = i as u32;
                    if t.outcome[x as usize] != FAIL {
                        owriter[wstart[k] + i] = x;
                    }
                    t.outcome[x as usize] == FAIL
                }
                None => true,
            };
            acc[i + 1] = acc[i] + is_bad as u32;
        }
        bad.push(acc);
    }
    // the place of a value in its key's order: in a short order by a scan, in a long
    // one by a map, made the first time a read needs it
    let position: std::cell::OnceCell<Map<(u32, i64), u32>> = std::cell::OnceCell::new();
    let pos_of = |k: u32, v: i64| -> Option<usize> {
        let o = &orders.order[k as usize];
        if o.len() > 32 {
            position.get_or_init(|| {
                let mut p = Map::default();
                for (k, o) in orders.order.iter().enumerate().filter(|(_, o)| o.len() > 32) {
                    for (i, &v) in o.iter().enumerate() {
                        p.insert((k as u32, v), i as u32);
                    }
                }
                p
            }).get(&(k, v)).map(|&i| i as usize)
        } else {
            o.iter().position(|&x| x == v)
        }
    };
    let live = |kv: &(u32, i64)| -> Option<u32> {
        w.tx(kv).filter(|&x| t.outcome[x as usize] != FAIL)
    };
    // who read the list ending at each place of its key's order (0: the empty list;
    // i + 1: up to element i), as a flat index (a read ending at an element not in the
    // order is no append's predecessor: it gives no rw edge)
    let mut bstart = vec![0usize; nk + 1];
    for k in 0..nk {
        bstart[k + 1] = bstart[k] + orders.order[k].len() + 1;
    }
    let mut slots: Vec<(u32, u32)> = Vec::with_capacity(t.f.len() / 2); // (bucket, reader)
    for tx in 0..t.len() {
        let o = t.outcome[tx];
        if o != OK && o != INFO {
            continue;
        }
        for m in t.mops(tx) {
            if t.f[m] != READ || (t.nil(m) && o == INFO) {
                continue;
            }
            let k = t.key[m];
            let l = t.list(m);
            let ord = &orders.order[k as usize];
            let at = if l.is_empty() {
                Some(0)
            } else if l.len() <= ord.len() && ord[l.len() - 1] == l[l.len() - 1] {
                Some(l.len()) // the usual case: the read is the order up to there
            } else {
                pos_of(k, l[l.len() - 1]).map(|i| i + 1)
            };
            if let Some(b) = at {
                slots.push(((bstart[k as usize] + b) as u32, tx as u32));
            }
            if let Some(&last) = l.last() {
                let src = match at {
                    Some(b) if b > 0 => {
                        let x = owriter[wstart[k as usize] + b - 1];
                        (x != u32::MAX).then_some(x)
                    }
                    _ => live(&(k, last)),
                };
                if let Some(src) = src {
                    if src != tx as u32 {
                        edges.push(src, tx as u32, WR, k, last, last);
                    }
                }
            }
        }
    }
    slots.sort_unstable();
    slots.dedup();
    let mut roff = vec![0u32; bstart[nk] + 1];
    for &(b, _) in &slots {
        roff[b as usize + 1] += 1;
    }
    for i in 0..bstart[nk] {
        roff[i + 1] += roff[i];
    }
    for tx in 0..t.len() {
        let o = t.outcome[tx];
        if o != OK && o != INFO {
            continue;
        }
        for m in t.mops(tx) {
            if t.f[m] != APPEND {
                continue;
            }
            let (k, v) = (t.key[m], t.val[m]);
            let ku = k as usize;
            let order = &orders.order[ku];
            // the place before this append: its predecessor in the order, or the end
            // its place, found when the orders were walked (a value of the order is
            // this append: values are unique per key)
            let b = if apos[m] == u32::MAX { order.len() } else { apos[m] as usize };
            let prev = if b > 0 { order[b - 1] } else { NIL };
            if b > 0 {
                let src = owriter[wstart[ku] + b - 1];
                if src != u32::MAX && src != tx as u32 {
                    edges.push(src, tx as u32, WW, k, prev, v);
                }
            }
            let bucket = bstart[ku] + b;
            for &(_, r) in &slots[roff[bucket] as usize..roff[bucket + 1] as usize] {
                if r != tx as u32 {
                    edges.push(r, tx as u32, RW, k, prev, v);
                }
            }
        }
    }
    lap("edges");
    la_reads(t, &w, &orders, &bad, an);
    lap("reads");
    lost_updates(t, APPEND, true, an);
    let bad_any: Vec<bool> = bad.iter().map(|b| b.last().is_some_and(|&c| c > 0)).collect();
    dirty_updates(t, &w, &orders, &bad_any, an);
    lap("lost and dirty");
    Ok(())
}

fn la_reads(t: &Txns, w: &Writes, orders: &Orders, bad: &[Vec<u32>], an: &mut Vec<Anomaly>) {
    let mut scratch: Vec<i64> = Vec::new();
    for tx in 0..t.len() {
        let o = t.outcome[tx];
        if o == INFO {
            for m in t.mops(tx) {
                if t.f[m] == READ {
                    duplicates(t, tx, m, an, &mut scratch);
                }
            }
        }
        if o != OK {
            continue;
        }
        for m in t.mops(tx) {
            if t.f[m] != READ {
                continue;
            }
            let l = t.list(m);
            if l.is_empty() {
                continue;
            }
            let k = t.key[m];
            let o = &orders.order[k as usize];
            let clean = l.len() <= o.len() && o[..l.len()] == *l && bad[k as usize][l.len()] == 0;
            if clean {
                // a prefix of the order, every element from a transaction not failed
                let e = *l.last().unwrap();
                if let Some(&src) = w.intermediate.get(&(k, e)) {
                    if src != tx as u32 {
                        an.push(Anomaly::plain("G1b", vec![src, tx as u32], k, format!(
                            "{{\"value\":{},\"final\":{},\"read\":{}}}", e,
                            last_append(t, src, k), jlist(l))));
                    }
                }
                continue;
            }
            duplicates(t, tx, m, an, &mut scratch);
            if let Some(&g) = l.iter().find(|&&e| !w.writer.contains_key(&(k, e))) {
                an.push(Anomaly::plain("garbage-read", vec![tx as u32], k, format!(
                    "{{\"element\":{},\"read\":{}}}", g, jlist(l))));
            }
            for &e in l {
                if let Some(src) = w.tx(&(k, e)) {
                    if t.outcome[src as usize] == FAIL {
                        an.push(Anomaly::plain("G1a", vec![src, tx as u32], k, format!(
                            "{{\"value\":{},\"read\":{}}}", e, jlist(l))));
                    }
                }
            }
            let e = *l.last().unwrap();
            if let Some(&src) = w.intermediate.get(&(k, e)) {
                if src != tx as u32 {
                    an.push(Anomaly::plain("G1b", vec![src, tx as u32], k, format!(
                        "{{\"value\":{},\"final\":{},\"read\":{}}}", e, last_append(t, src, k),
                        jlist(l))));
                }
            }
        }
        la_internal(t, tx, an, &mut scratch);
        future_read(t, tx, an);
    }
}

fn duplicates(t: &Txns, tx: usize, m: usize, an: &mut Vec<Anomaly>, scratch: &mut Vec<i64>) {
    let l = t.list(m);
    if l.len() < 2 {
        return;
    }
    scratch.clear();
    scratch.extend_from_slice(l);
    scratch.sort_unstable();
    if scratch.windows(2).all(|w| w[0] != w[1]) {
        return;
    }
    let mut counts: Vec<(i64, usize)> = Vec::new();
    for &e in l {
        match counts.iter_mut().find(|c| c.0 == e) {
            Some(c) => c.1 += 1,
            None => counts.push((e, 1)),
        }
    }
    let dups: Vec<String> = counts.iter().filter(|c| c.1 > 1)
        .map(|c| format!("\"{}\":{}", c.0, c.1)).collect();
    an.push(Anomaly::plain("duplicate-elements", vec![tx as u32], t.key[m], format!(
        "{{\"read\":{},\"duplicates\":{{{}}}}}", jlist(l), dups.join(","))));
}

/// The transaction's first read that disagrees with what it read or appended before
/// (its previous read of the key plus its appends since, or, with no read before, an
/// unknown prefix followed by its appends): no allocation, transactions are short.
fn la_internal(t: &Txns, tx: usize, an: &mut Vec<Anomaly>, appended: &mut Vec<i64>) {
    let r = t.mops(tx);
    for j in r.clone() {
        if t.f[j] != READ {
            continue;
        }
        let k = t.key[j];
        appended.clear();
        let mut prev: Option<usize> = None;
        for i in (r.start..j).rev() {
            if t.key[i] != k {
                continue;
            }
            if t.f[i] == APPEND {
                appended.push(t.val[i]);
            } else {
                prev = Some(i);
                break;
            }
        }
        appended.reverse();
        let read = t.list(j);
        let bad = match prev {
            Some(p) => {
                let base = t.list(p);
                let nil = t.nil(p) && appended.is_empty();
                nil != t.nil(j) || read.len() != base.len() + appended.len()
                    || &read[..base.len()] != base || &read[base.len()..] != appended.as_slice()
            }
            None if appended.is_empty() => false,
            None => read.len() < appended.len()
                || &read[read.len() - appended.len()..] != appended.as_slice(),
        };
        if bad {
            let expected = match prev {
                Some(p) => {
                    if t.nil(p) && appended.is_empty() {
                        "null".to_string()
                    } else {
                        let mut all = t.list(p).to_vec();
                        all.extend_from_slice(appended);
                        jlist(&all)
                    }
                }
                None => {
                    let rest: Vec<String> = appended.iter().map(|x| x.to_string()).collect();
                    format!("[\"...\",{}]", rest.join(","))
                }
            };
            an.push(Anomaly::plain("internal", vec![tx as u32], k, format!(
                "{{\"expected\":{},\"read\":{}}}", expected, jread(t, j))));
            return;
        }
    }
}

fn future_read(t: &Txns, tx: usize, an: &mut Vec<Anomaly>) {
    let r = t.mops(tx);
    for j in r.clone() {
        if t.f[j] != APPEND {
            continue;
        }
        let (k, v) = (t.key[j], t.val[j]);
        if let Some(i) = (r.start..j).find(|&i| t.f[i] == READ && t.key[i] == k
                                             && t.list(i).contains(&v)) {
            an.push(Anomaly::plain("future-read", vec![tx as u32], k, format!(
                "{{\"element\":{},\"read\":{}}}", v, jlist(t.list(i)))));
            return;
        }
    }
}

/// Committed transactions that read the same value of a key (their first read of it,
/// before writing it) and then wrote it, when two or more did.
fn lost_updates(t: &Txns, write: u8, lists: bool, an: &mut Vec<Anomaly>) {
    // (key, value read as (nil?, hash, length or register value), txn, the read) sorted
    let mut found: Vec<(u32, bool, u64, i64, u32, usize)> = Vec::new();
    // per transaction: (key, its first read, recorded?) in a reused buffer
    let mut seen: Vec<(u32, usize, bool)> = Vec::new();
    for tx in 0..t.len() {
        if t.outcome[tx] != OK {
            continue;
        }
        seen.clear();
        for m in t.mops(tx) {
            let k = t.key[m];
            let at = seen.iter().position(|e| e.0 == k);
            if t.f[m] == write {
                if let Some(i) = at {
                    if !seen[i].2 {
                        let r = seen[i].1;
                        seen[i].2 = true;
                        let (h, v) = if lists {
                            let mut h = Fx::default();
                            for &x in t.list(r) {
                                h.write_i64(x);
                            }
                            (h.finish(), t.list(r).len() as i64)
                        } else {
                            (0, t.reg(r))
                        };
                        found.push((k, t.nil(r), h, v, tx as u32, r));
                    }
                }
            } else if t.f[m] == READ && at.is_none() {
                seen.push((k, m, false));
            }
        }
    }
    found.sort_unstable();
    let mut i = 0;
    while i < found.len() {
        let id = (found[i].0, found[i].1, found[i].2, found[i].3);
        let mut j = i + 1;
        while j < found.len() && (found[j].0, found[j].1, found[j].2, found[j].3) == id {
            j += 1;
        }
        if j - i > 1 {
            let r = found[i].5;
            let v = if lists { jread(t, r) } else { jv(t.reg(r)) };
            an.push(Anomaly::plain("lost-update", found[i..j].iter().map(|f| f.4).collect(),
                                   id.0, format!("{{\"value\":{v}}}")));
        }
        i = j;
    }
}

/// `bad_any[k]`: whether some element of key k's (possible) order has a failed or no
/// writer (a dirty update needs a failed one).
fn dirty_updates(t: &Txns, w: &Writes, possible: &Orders, bad_any: &[bool],
                 an: &mut Vec<Anomaly>) {
    let failed_reads = (0..t.len()).any(|tx| t.outcome[tx] == FAIL
        && t.mops(tx).any(|m| t.f[m] == READ && !t.list(m).is_empty()));
    let all;
    let orders = if failed_reads {
        all = version_orders(t, &[OK, INFO, FAIL], true);
        &all
    } else {
        possible
    };
    for (k, order) in orders.order.iter().enumerate() {
        let k = k as u32;
        if !failed_reads && !bad_any[k as usize] {
            continue; // no element of this order from a failed or unknown writer
        }
        let mut t1: Option<u32> = None;
        let mut from = 0usize; // the stretch since t1's element
        for (i, &v) in order.iter().enumerate() {
            let t2 = w.tx(&(k, v));
            let o1 = t1.map_or(OK, |x| t.outcome[x as usize]);
            let o2 = t2.map_or(INFO, |x| t.outcome[x as usize]);
            if o2 == OK {
                if o1 == FAIL {
                    an.push(Anomaly::plain("dirty-update", vec![t1.unwrap(), t2.unwrap()], k,
                                           format!("{{\"values\":{}}}",
                                                   jlist(&order[from..=i]))));
                }
                t1 = t2;
                from = i;
            } else if o2 == FAIL && o1 != FAIL {
                t1 = t2;
                from = i;
            }
        }
    }
}

/// Per key (keys with two or more), the committed transactions whose appends to it no
/// read shows: ok ones, and info ones a read shows did commit.
pub fn unread_appenders(t: &Txns) -> Vec<(u32, Vec<u32>)> {
    let orders = version_orders(t, &[OK, INFO], false);
    let mut seen: Map<(u32, i64), ()> = Map::default();
    for (k, o) in orders.order.iter().enumerate() {
        for &v in o {
            seen.insert((k as u32, v), ());
        }
    }
    let committed = |tx: usize| -> bool {
        t.outcome[tx] == OK || (t.outcome[tx] == INFO && t.mops(tx).any(
            |m| t.f[m] == APPEND && seen.contains_key(&(t.key[m], t.val[m]))))
    };
    let mut out: Map<u32, Vec<u32>> = Map::default();
    for tx in 0..t.len() {
        if !committed(tx) {
            continue;
        }
        for m in t.mops(tx) {
            if t.f[m] == APPEND && !seen.contains_key(&(t.key[m], t.val[m])) {
                let v = out.entry(t.key[m]).or_default();
                if v.last() != Some(&(tx as u32)) {
                    v.push(tx as u32);
                }
            }
        }
    }
    let mut res: Vec<(u32, Vec<u32>)> = out.into_iter().filter(|(_, v)| v.len() > 1).collect();
    res.sort_by(|a, b| t.keys[a.0 as usize].cmp(&t.keys[b.0 as usize]));
    res
}

// ---------------------------------------------------------------------------------------
// rw-register

pub fn analyse_register(t: &Txns, wfr: bool, edges: &mut Edges, an: &mut Vec<Anomaly>)
                        -> Result<(), InputError> {
    let mut seen: Map<(u32, i64), u32> = Map::default();
    for tx in 0..t.len() {
        for m in t.mops(tx) {
            match t.f[m] {
                WRITE => {
                    let kv = (t.key[m], t.val[m]);
                    if let Some(&o) = seen.get(&kv) {
                        return err(t, tx, format!(
                            "writes {} to key {}, which T{} wrote too; rw-register needs \
                             values unique per key", t.val[m], t.keys[kv.0 as usize],
                            t.index[o as usize]));
                    }
                    seen.insert(kv, tx as u32);
                }
                READ => {
                    if t.rlen[m] >= 0 {
                        return err(t, tx, format!(
                            "the read of key {} returned a list; rw-register reads return an \
                             integer (or nil)", t.keys[t.key[m] as usize]));
                    }
                }
                _ => return err(t, tx, ":append; rw-register takes :w and :r (for :append use \
                                        {model} list-append)".to_string()),
            }
        }
    }
    // external reads (ok) and writes (ok, info)
    let mut writers: Map<(u32, i64), Vec<u32>> = Map::default();
    let mut readers: Map<(u32, i64), Vec<u32>> = Map::default();
    let mut reader_keys: Vec<(u32, i64)> = Vec::new();
    let mut xr: Vec<Vec<(u32, i64)>> = vec![Vec::new(); t.len()];
    let mut xw: Vec<Vec<(u32, i64)>> = vec![Vec::new(); t.len()];
    for tx in 0..t.len() {
        let o = t.outcome[tx];
        if o != OK && o != INFO {
            continue;
        }
        let mut touched: Vec<u32> = Vec::new();
        let mut last: Vec<(u32, i64)> = Vec::new();
        for m in t.mops(tx) {
            let k = t.key[m];
            if !touched.contains(&k) {
                touched.push(k);
                if t.f[m] == READ && o == OK {
                    xr[tx].push((k, t.reg(m)));
                }
            }
            if t.f[m] == WRITE {
                match last.iter_mut().find(|e| e.0 == k) {
                    Some(e) => e.1 = t.val[m],
                    None => last.push((k, t.val[m])),
                }
            }
        }
        for &kv in &last {
            writers.entry(kv).or_default().push(tx as u32);
        }
        for &kv in &xr[tx] {
            let r = readers.entry(kv).or_insert_with(|| {
                reader_keys.push(kv);
                Vec::new()
            });
            r.push(tx as u32);
        }
        xw[tx] = last;
    }
    for kv in &reader_keys {
        if let Some(ws) = writers.get(kv) {
            for &w in ws {
                for &r in &readers[kv] {
                    if r != w {
                        edges.push(w, r, WR, kv.0, kv.1, kv.1);
                    }
                }
            }
        }
    }
    // version order: nil before every value; with wfr, a read value before the write
    let mut versions: Vec<(u32, i64, i64)> = Vec::new();
    let mut nil_next: Map<u32, Vec<i64>> = Map::default();
    let mut seen_v: Map<(u32, i64), ()> = Map::default();
    for tx in 0..t.len() {
        for &(k, v) in xw[tx].iter().chain(xr[tx].iter()) {
            if v != NIL && seen_v.insert((k, v), ()).is_none() {
                nil_next.entry(k).or_default().push(v);
            }
        }
    }
    if wfr {
        let mut extra: Vec<(u32, i64, i64)> = Vec::new();
        for tx in 0..t.len() {
            if t.outcome[tx] != OK {
                continue;
            }
            for &(k, v) in &xr[tx] {
                if v == NIL {
                    continue;
                }
                if let Some(&(_, v2)) = xw[tx].iter().find(|e| e.0 == k) {
                    if v2 != v {
                        extra.push((k, v, v2));
                    }
                }
            }
        }
        let cyclic = version_cycles(&extra);
        if cyclic.is_empty() {
            versions = extra;
        } else {
            for (k, scc) in cyclic {
                let vs: Vec<String> = scc.iter().map(|x| x.to_string()).collect();
                an.push(Anomaly { kind: "cyclic-versions".to_string(), txns: Vec::new(),
                                  cycle: None, key: Some(k),
                                  detail: format!("{{\"scc\":[{}],\"sources\":[\"initial-state\",\
                                                   \"wfr-keys\"]}}", vs.join(",")) });
            }
        }
    }
    let mut keys: Vec<&u32> = nil_next.keys().collect();
    keys.sort_unstable();
    for &k in keys {
        if let Some(rs) = readers.get(&(k, NIL)) {
            for &v in &nil_next[&k] {
                if let Some(ws) = writers.get(&(k, v)) {
                    for &w2 in ws {
                        for &r in rs {
                            if r != w2 {
                                edges.push(r, w2, RW, k, NIL, v);
                            }
                        }
                    }
                }
            }
        }
    }
    for &(k, v1, v2) in &versions {
        if let Some(ws2) = writers.get(&(k, v2)) {
            for &w2 in ws2 {
                if let Some(ws1) = writers.get(&(k, v1)) {
                    for &w1 in ws1 {
                        if w1 != w2 {
                            edges.push(w1, w2, WW, k, v1, v2);
                        }
                    }
                }
                if let Some(rs) = readers.get(&(k, v1)) {
                    for &r in rs {
                        if r != w2 {
                            edges.push(r, w2, RW, k, v1, v2);
                        }
                    }
                }
            }
        }
    }
    reg_reads(t, an);
    lost_updates(t, WRITE, false, an);
    Ok(())
}

/// The cycles (components of two or more versions) of per-key version edges.
fn version_cycles(edges: &[(u32, i64, i64)]) -> Vec<(u32, Vec<i64>)> {
    let mut ids: Map<(u32, i64), u32> = Map::default();
    let mut names: Vec<(u32, i64)> = Vec::new();
    let mut adj: Vec<Vec<u32>> = Vec::new();
    let mut id = |kv: (u32, i64), names: &mut Vec<(u32, i64)>, adj: &mut Vec<Vec<u32>>| -> u32 {
        *ids.entry(kv).or_insert_with(|| {
            names.push(kv);
            adj.push(Vec::new());
            (names.len() - 1) as u32
        })
    };
    for &(k, a, b) in edges {
        let x = id((k, a), &mut names, &mut adj);
        let y = id((k, b), &mut names, &mut adj);
        adj[x as usize].push(y);
    }
    let comp = tarjan(names.len(), |v, out| out.extend_from_slice(&adj[v]));
    let mut groups: Map<u32, Vec<usize>> = Map::default();
    for (i, &c) in comp.iter().enumerate() {
        groups.entry(c).or_default().push(i);
    }
    let mut out: Vec<(u32, Vec<i64>)> = groups.into_values().filter(|g| g.len() > 1)
        .map(|g| {
            let mut vs: Vec<i64> = g.iter().map(|&i| names[i].1).collect();
            vs.sort_unstable();
            (names[g[0]].0, vs)
        }).collect();
    out.sort();
    out
}

fn reg_reads(t: &Txns, an: &mut Vec<Anomaly>) {
    let mut failed: Map<(u32, i64), u32> = Map::default();
    let mut intermediate: Map<(u32, i64), u32> = Map::default();
    let mut last: Map<(u32, u32), i64> = Map::default();
    for tx in 0..t.len() {
        for m in t.mops(tx) {
            if t.f[m] != WRITE {
                continue;
            }
            let k = t.key[m];
            if t.outcome[tx] == FAIL {
                failed.insert((k, t.val[m]), tx as u32);
            }
            if let Some(&p) = last.get(&(tx as u32, k)) {
                intermediate.insert((k, p), tx as u32);
            }
            last.insert((tx as u32, k), t.val[m]);
        }
    }
    for tx in 0..t.len() {
        if t.outcome[tx] != OK {
            continue;
        }
        for m in t.mops(tx) {
            if t.f[m] != READ || t.nil(m) {
                continue;
            }
            let kv = (t.key[m], t.val[m]);
            if let Some(&src) = failed.get(&kv) {
                an.push(Anomaly::plain("G1a", vec![src, tx as u32], kv.0,
                                       format!("{{\"value\":{}}}", kv.1)));
            }
            if let Some(&src) = intermediate.get(&kv) {
                if src != tx as u32 {
                    an.push(Anomaly::plain("G1b", vec![src, tx as u32], kv.0, format!(
                        "{{\"value\":{},\"final\":{}}}", kv.1, last[&(src, kv.0)])));
                }
            }
        }
        let mut state: Map<u32, i64> = Map::default();
        for m in t.mops(tx) {
            let k = t.key[m];
            if t.f[m] == WRITE {
                state.insert(k, t.val[m]);
                continue;
            }
            let v = t.reg(m);
            match state.get(&k) {
                Some(&s) if s != v => {
                    an.push(Anomaly::plain("internal", vec![tx as u32], k, format!(
                        "{{\"expected\":{},\"read\":{}}}", jv(s), jv(v))));
                    break;
                }
                _ => {
                    state.insert(k, v);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// order edges

/// Process edges (each process's committed transactions in completion order) or
/// real-time edges (Elle's transitive reduction: from each committed transaction to the
/// ones invoked after it completed, failed and unknown ones included).
pub fn order_edges(t: &Txns, kind: u8, edges: &mut Edges) {
    let n = t.len();
    if kind == PROCESS {
        let mut ok: Vec<u32> = (0..n as u32).filter(|&x| t.outcome[x as usize] == OK).collect();
        ok.sort_by_key(|&x| (t.complete[x as usize], x));
        let mut last: Map<i64, u32> = Map::default();
        for x in ok {
            if let Some(&p) = last.get(&t.process[x as usize]) {
                edges.push(p, x, PROCESS, u32::MAX, NIL, NIL);
            }
            last.insert(t.process[x as usize], x);
        }
    } else if kind == REALTIME {
        let ev = realtime_events(t);
        let mut frontier: Vec<u32> = Vec::new();
        let mut in_frontier = vec![false; n];
        // each transaction's predecessors, as (start, len) in one arena
        let mut span: Vec<(u32, u32)> = vec![(0, 0); n];
        let mut arena: Vec<u32> = Vec::new();
        for (_, k, x) in ev {
            if k == 0 {
                frontier.retain(|&s| in_frontier[s as usize]);
                frontier.sort_unstable();
                span[x as usize] = (arena.len() as u32, frontier.len() as u32);
                for &s in &frontier {
                    edges.push(s, x, REALTIME, u32::MAX, NIL, NIL);
                    arena.push(s);
                }
            } else {
                let (a, l) = span[x as usize];
                for &s in &arena[a as usize..(a + l) as usize] {
                    in_frontier[s as usize] = false;
                }
                frontier.retain(|&s| in_frontier[s as usize]);
                in_frontier[x as usize] = true;
                frontier.push(x);
            }
        }
    }
}

/// The invokes (0) and ok completions (1) of `t` as (instant, 0|1, txn), sorted. Instants
/// read from a file are its lines, fewer than a few per transaction: then a counting sort
/// by instant (invokes before completions, each in transaction order: the tuple order),
/// else a sort.
fn realtime_events(t: &Txns) -> Vec<(i64, u8, u32)> {
    let n = t.len();
    let mut count = 0usize;
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for x in 0..n {
        for (at, on) in [(t.invoke[x], true), (t.complete[x], t.outcome[x] == OK)] {
            if on && at != NEVER {
                count += 1;
                lo = lo.min(at);
                hi = hi.max(at);
            }
        }
    }
    let mut ev: Vec<(i64, u8, u32)> = Vec::with_capacity(count);
    let dense = count > 0 && (hi - lo) as u128 <= 4 * count as u128 + 1024;
    if !dense {
        for x in 0..n {
            if t.invoke[x] != NEVER {
                ev.push((t.invoke[x], 0, x as u32));
            }
            if t.outcome[x] == OK && t.complete[x] != NEVER {
                ev.push((t.complete[x], 1, x as u32));
            }
        }
        ev.sort_unstable();
        return ev;
    }
    let span = (hi - lo) as usize + 1;
    let mut start = vec![0u32; span + 1];
    for x in 0..n {
        if t.invoke[x] != NEVER {
            start[(t.invoke[x] - lo) as usize + 1] += 1;
        }
        if t.outcome[x] == OK && t.complete[x] != NEVER {
            start[(t.complete[x] - lo) as usize + 1] += 1;
        }
    }
    for i in 0..span {
        start[i + 1] += start[i];
    }
    ev.resize(count, (0, 0, 0));
    // invokes first, then completions, each in transaction order: within an instant the
    // placement is then (kind, txn) order, as the sort's
    for x in 0..n {
        if t.invoke[x] != NEVER {
            let at = t.invoke[x];
            let slot = &mut start[(at - lo) as usize];
            ev[*slot as usize] = (at, 0, x as u32);
            *slot += 1;
        }
    }
    for x in 0..n {
        if t.outcome[x] == OK && t.complete[x] != NEVER {
            let at = t.complete[x];
            let slot = &mut start[(at - lo) as usize];
            ev[*slot as usize] = (at, 1, x as u32);
            *slot += 1;
        }
    }
    debug_assert!(ev.windows(2).all(|w| w[0] <= w[1]));
    ev
}

// ---------------------------------------------------------------------------------------
// Tarjan

/// Component ids (iterative Tarjan; reverse topological order: a component's successors
/// have smaller ids); `nbrs(v, out)` appends v's successors to `out`.
pub fn tarjan<F: FnMut(usize, &mut Vec<u32>)>(n: usize, mut nbrs: F) -> Vec<u32> {
    let mut index = vec![u32::MAX; n];
    let mut low = vec![0u32; n];
    let mut comp = vec![u32::MAX; n];
    let mut on = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    // frames: (v, next neighbour, end, start) into `buf`
    let mut work: Vec<(u32, u32, u32, u32)> = Vec::new();
    let mut buf: Vec<u32> = Vec::new();
    let mut counter = 0u32;
    let mut ncomp = 0u32;
    for root in 0..n {
        if index[root] != u32::MAX {
            continue;
        }
        nbrs(root, &mut buf);
        work.push((root as u32, 0, buf.len() as u32, 0));
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root as u32);
        on[root] = true;
        while let Some(&(v, i, e, st)) = work.last() {
            if i < e {
                work.last_mut().unwrap().1 += 1;
                let w = buf[i as usize] as usize;
                if index[w] == u32::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w as u32);
                    on[w] = true;
                    let s = buf.len() as u32;
                    nbrs(w, &mut buf);
                    work.push((w as u32, s, buf.len() as u32, s));
                } else if on[w] && index[w] < low[v as usize] {
                    low[v as usize] = index[w];
                }
                continue;
            }
            work.pop();
            buf.truncate(st as usize);
            if let Some(&(u, _, _, _)) = work.last() {
                if low[v as usize] < low[u as usize] {
                    low[u as usize] = low[v as usize];
                }
            }
            if low[v as usize] == index[v as usize] {
                loop {
                    let w = stack.pop().unwrap() as usize;
                    on[w] = false;
                    comp[w] = ncomp;
                    if w == v as usize {
                        break;
                    }
                }
                ncomp += 1;
            }
        }
        buf.clear();
    }
    comp
}

// ---------------------------------------------------------------------------------------
// the cycle search

/// What Python's lattice says, as tables over the cycle classes in Elle's order:
/// `names`; `implied[i]` the classes class i implies (bit mask, itself included);
/// `specs` the cycle-exists specs (model name, edge mask, extension?), `spec_implying[i]`
/// the specs whose model implies spec i's, `spec_prohibits[i]` the classes spec i's model
/// forbids.
pub struct Tables {
    pub names: Vec<String>,
    pub implied: Vec<u32>,
    pub specs: Vec<(String, u8, bool)>,
    pub spec_implying: Vec<u32>,
    pub spec_prohibits: Vec<u32>,
}

pub struct Budget {
    pub steps: i64,
    pub deadline: Option<Instant>,
    pub hit: &'static str,
}

impl Budget {
    fn spend(&mut self, n: i64) -> bool {
        self.steps -= n;
        if self.steps < 0 {
            self.hit = "steps";
            return false;
        }
        if let Some(d) = self.deadline {
            if Instant::now() >= d {
                self.hit = "deadline";
                return false;
            }
        }
        true
    }
}

struct OutOfBudget;

pub struct Unfinished {
    pub size: u32,
    pub sample: Vec<u32>,
    pub classes: Vec<String>,
    pub limit: String,
}

struct Graph {
    n: usize,
    comp: Vec<u32>,
    /// edge ids (into the caller's edges) inside components, deduplicated
    ids: Vec<usize>,
    src: Vec<u32>,
    dst: Vec<u32>,
    bits: Vec<u8>,
    off: Vec<u32>,
    adj: Vec<u32>,
    subs: Map<u8, Vec<u32>>,
}

impl Graph {
    fn new(n: usize, e: &Edges) -> Graph {
        let mut off = vec![0u32; n + 1];
        for &s in &e.src {
            off[s as usize + 1] += 1;
        }
        for i in 0..n {
            off[i + 1] += off[i];
        }
        let mut fill = off.clone();
        let mut all = vec![0u32; e.len()];
        for (i, &s) in e.src.iter().enumerate() {
            all[fill[s as usize] as usize] = e.dst[i];
            fill[s as usize] += 1;
        }
        let comp = tarjan(n, |v, out| out.extend_from_slice(
            &all[off[v] as usize..off[v + 1] as usize]));
        drop(all);
        let mut seen: Map<(u32, u32, u8), ()> = Map::default();
        let mut g = Graph { n, comp, ids: Vec::new(), src: Vec::new(), dst: Vec::new(),
                            bits: Vec::new(), off: vec![0; n + 1], adj: Vec::new(),
                            subs: Map::default() };
        for i in 0..e.len() {
            let (s, d, k) = (e.src[i], e.dst[i], e.kind[i]);
            if s != d && g.comp[s as usize] == g.comp[d as usize]
                && seen.insert((s, d, k), ()).is_none() {
                g.ids.push(i);
                g.src.push(s);
                g.dst.push(d);
                g.bits.push(1 << k);
            }
        }
        for &s in &g.src {
            g.off[s as usize + 1] += 1;
        }
        for i in 0..n {
            g.off[i + 1] += g.off[i];
        }
        let mut fill = g.off.clone();
        g.adj = vec![0; g.src.len()];
        for (i, &s) in g.src.iter().enumerate() {
            g.adj[fill[s as usize] as usize] = i as u32;
            fill[s as usize] += 1;
        }
        g
    }

    fn out(&self, v: usize) -> &[u32] {
        &self.adj[self.off[v] as usize..self.off[v + 1] as usize]
    }

    fn sub(&mut self, mask: u8) -> &Vec<u32> {
        if !self.subs.contains_key(&mask) {
            let c = tarjan(self.n, |v, out| {
                for &i in self.out(v) {
                    if self.bits[i as usize] & mask != 0 {
                        out.push(self.dst[i as usize]);
                    }
                }
            });
            self.subs.insert(mask, c);
        }
        &self.subs[&mask]
    }

    /// A shortest path src ~> dst over `mask` edges (staying in `within`'s component of
    /// src if given), as edge ids.
    fn path(&self, src: u32, dst: u32, mask: u8, within: Option<&Vec<u32>>) -> Option<Vec<u32>> {
        if src == dst {
            return Some(Vec::new());
        }
        let mut parent: Map<u32, u32> = Map::default();
        parent.insert(src, u32::MAX);
        let mut q = VecDeque::from([src]);
        let target = within.map(|w| w[src as usize]);
        while let Some(v) = q.pop_front() {
            for &i in self.out(v as usize) {
                if self.bits[i as usize] & mask == 0 {
                    continue;
                }
                let w = self.dst[i as usize];
                if parent.contains_key(&w) || within.is_some_and(|c| Some(c[w as usize]) != target) {
                    continue;
                }
                parent.insert(w, i);
                if w == dst {
                    let mut out = Vec::new();
                    let mut x = w;
                    while x != src {
                        let e = parent[&x];
                        out.push(e);
                        x = self.src[e as usize];
                    }
                    out.reverse();
                    return Some(out);
                }
                q.push_back(w);
            }
        }
        None
    }

    fn kinds(&self, cyc: &[u32]) -> Vec<u8> {
        cyc.iter().map(|&i| self.bits[i as usize]).collect()
    }
}

/// The class of a cycle given its edge bits in order (see `graph.classify`).
fn classify(bits: &[u8]) -> (usize, usize) {
    let n_rw = bits.iter().filter(|&&b| b == B_RW).count();
    let base = if n_rw == 1 {
        2
    } else if n_rw > 1 {
        let adj = (0..bits.len()).any(|i| bits[i] == B_RW
            && bits[(i + bits.len() - 1) % bits.len()] == B_RW);
        if adj { 4 } else { 3 }
    } else if bits.contains(&B_WR) {
        1
    } else {
        0
    };
    let var = if bits.contains(&B_RT) { 2 } else if bits.contains(&B_P) { 1 } else { 0 };
    (base, var)
}

const BASES: [&str; 5] = ["G0", "G1c", "G-single-item", "G-nonadjacent-item", "G2-item"];
const SUFFIX: [&str; 3] = ["", "-process", "-realtime"];
const MASKS: [u8; 5] = [B_WW, B_WW | B_WR, B_WW | B_WR | B_RW, B_WW | B_WR | B_RW,
                        B_WW | B_WR | B_RW];
const XBITS: [u8; 3] = [0, B_P, B_RT];

struct Comp {
    members: Vec<u32>,
    redundant: u32,
    found: Vec<Option<Vec<u32>>>,
    absent: u32,
    unknown: u32,
    limit: &'static str,
    exists: Vec<(usize, Vec<u32>)>,
}

pub struct Findings {
    pub cycles: Vec<(String, Vec<usize>)>,
    pub exists: Vec<(String, Vec<u32>)>,
    pub unfinished: Vec<Unfinished>,
    pub on_cycle: Vec<u32>,
}

struct Search<'a> {
    g: Graph,
    tb: &'a Tables,
    /// class index (into tb.names) of (base, variant)
    class_of: [[usize; 3]; 5],
    spec: Vec<(usize, usize)>,
}

impl<'a> Search<'a> {
    fn cls(&self, cyc: &[u32]) -> usize {
        let (b, v) = classify(&self.g.kinds(cyc));
        self.class_of[b][v]
    }
}

pub fn search(n: usize, e: &Edges, tb: &Tables, budget: &mut Budget) -> Findings {
    let mut class_of = [[usize::MAX; 3]; 5];
    let mut spec = vec![(0, 0); tb.names.len()];
    for (i, name) in tb.names.iter().enumerate() {
        for b in 0..5 {
            for v in 0..3 {
                if *name == format!("{}{}", BASES[b], SUFFIX[v]) {
                    class_of[b][v] = i;
                    spec[i] = (b, v);
                }
            }
        }
    }
    let mut s = Search { g: Graph::new(n, e), tb, class_of, spec };
    if s.g.src.is_empty() {
        // no strongly connected component: no cycle anywhere
        return Findings { cycles: Vec::new(), exists: Vec::new(), unfinished: Vec::new(),
                          on_cycle: Vec::new() };
    }
    let mut groups: Map<u32, Vec<u32>> = Map::default();
    let mut order: Vec<u32> = Vec::new();
    for i in 0..s.g.src.len() {
        let c = s.g.comp[s.g.src[i] as usize];
        let v = groups.entry(c).or_insert_with(|| {
            order.push(c);
            Vec::new()
        });
        v.push(s.g.src[i]);
    }
    let nt = tb.names.len();
    let mut comps: Vec<Comp> = order.iter().map(|c| {
        let mut m = groups[c].clone();
        m.sort_unstable();
        m.dedup();
        Comp { members: m, redundant: 0, found: vec![None; nt], absent: 0, unknown: 0,
               limit: "", exists: Vec::new() }
    }).collect();
    let cid: Map<u32, usize> = order.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    cycle_exists(&mut s, &mut comps, &cid);
    for c in comps.iter_mut() {
        c.redundant |= impossible_from_exists(tb, c);
    }
    for typ in 0..nt {
        let todo: Vec<usize> = (0..comps.len()).filter(|&i| {
            let bit = 1u32 << typ;
            comps[i].redundant & bit == 0 && comps[i].found[typ].is_none()
                && comps[i].absent & bit == 0
        }).collect();
        if !todo.is_empty() {
            decide(&mut s, typ, &mut comps, &todo, &cid, budget);
        }
    }
    let mut f = Findings { cycles: Vec::new(), exists: Vec::new(), unfinished: Vec::new(),
                           on_cycle: Vec::new() };
    for c in &comps {
        let mut redundant = impossible_from_exists(tb, c);
        for t in 0..nt {
            if let Some(cyc) = &c.found[t] {
                if redundant & (1 << t) == 0 {
                    f.cycles.push((tb.names[t].clone(),
                                   cyc.iter().map(|&i| s.g.ids[i as usize]).collect()));
                    redundant |= tb.implied[t];
                }
            }
        }
        let left: Vec<String> = (0..nt).filter(|&t| c.unknown & (1 << t) != 0
            && redundant & (1 << t) == 0).map(|t| tb.names[t].clone()).collect();
        if !left.is_empty() {
            for (sp, vs) in &c.exists {
                f.exists.push((format!("{}-cycle-exists", tb.specs[*sp].0), vs.clone()));
            }
            f.unfinished.push(Unfinished { size: c.members.len() as u32,
                                           sample: c.members.iter().take(8).copied().collect(),
                                           classes: left, limit: c.limit.to_string() });
        }
    }
    let dep = s.g.sub(B_WW | B_WR | B_RW).clone();
    let mut on = vec![false; n];
    for i in 0..s.g.src.len() {
        let (a, b) = (s.g.src[i] as usize, s.g.dst[i] as usize);
        if s.g.bits[i] & (B_WW | B_WR | B_RW) != 0 && dep[a] == dep[b] {
            on[a] = true;
            on[b] = true;
        }
    }
    f.on_cycle = (0..n as u32).filter(|&v| on[v as usize]).collect();
    f
}

fn impossible_from_exists(tb: &Tables, c: &Comp) -> u32 {
    let mut impossible = 0u32;
    for (sp, _) in &c.exists {
        impossible |= tb.spec_implying[*sp];
    }
    let mut out = 0u32;
    for j in 0..tb.specs.len() {
        if impossible & (1 << j) == 0 {
            out |= tb.spec_prohibits[j];
        }
    }
    out
}

fn record(s: &Search, c: &mut Comp, cyc: Vec<u32>) -> usize {
    let cls = s.cls(&cyc);
    debug_assert!(c.absent & (1 << cls) == 0);
    if c.found[cls].is_none() {
        c.found[cls] = Some(cyc);
        c.unknown &= !(1 << cls);
        c.redundant |= s.tb.implied[cls] & !(1 << cls);
    }
    cls
}

enum Cand {
    None,
    Unknown,
    Cycle(Vec<u32>),
}

fn decide(s: &mut Search, typ: usize, comps: &mut [Comp], todo: &[usize], cid: &Map<u32, usize>,
          budget: &mut Budget) {
    let (b, v) = s.spec[typ];
    let mask = MASKS[b] | XBITS[v];
    if v > 0 && !s.g.bits.iter().any(|&x| x & XBITS[v] != 0) {
        for &i in todo {
            comps[i].absent |= 1 << typ;
        }
        return;
    }
    let need: Vec<bool> = {
        let mut need = vec![false; comps.len()];
        for &i in todo {
            need[i] = true;
        }
        need
    };
    let mut cands: Vec<Cand> = (0..comps.len()).map(|_| Cand::None).collect();
    match b {
        2 => single(s, mask, &need, cid, &mut cands, budget),
        3 => nonadjacent(s, mask, &need, cid, &mut cands),
        _ => {
            let anchor = match b {
                0 => if v > 0 { XBITS[v] } else { B_WW },
                1 => if v > 0 { XBITS[v] } else { B_WR },
                _ => B_RW,
            };
            anchored(s, mask, anchor, &need, cid, &mut cands);
        }
    }
    for &i in todo {
        let bit = 1u32 << typ;
        if comps[i].redundant & bit != 0 || comps[i].found[typ].is_some() {
            continue;
        }
        match std::mem::replace(&mut cands[i], Cand::None) {
            Cand::Unknown => {
                comps[i].unknown |= bit;
                comps[i].limit = budget.hit;
            }
            Cand::None => comps[i].absent |= bit,
            Cand::Cycle(cyc) => {
                if simple(&s.g, &cyc) {
                    let cls = record(s, &mut comps[i], cyc);
                    if cls == typ || comps[i].redundant & bit != 0 {
                        continue;
                    }
                }
                match dfs(&s.g, &comps[i].members, s, typ, mask, budget) {
                    Err(OutOfBudget) => {
                        comps[i].unknown |= bit;
                        comps[i].limit = if budget.hit.is_empty() { "steps" } else { budget.hit };
                    }
                    Ok(None) => comps[i].absent |= bit,
                    Ok(Some(cyc)) => {
                        record(s, &mut comps[i], cyc);
                    }
                }
            }
        }
    }
}

fn simple(g: &Graph, cyc: &[u32]) -> bool {
    let mut vs: Vec<u32> = cyc.iter().map(|&i| g.src[i as usize]).collect();
    vs.sort_unstable();
    vs.windows(2).all(|w| w[0] != w[1])
}

fn anchored(s: &mut Search, mask: u8, anchor: u8, need: &[bool], cid: &Map<u32, usize>,
            cands: &mut [Cand]) {
    let sub = s.g.sub(mask).clone();
    for i in 0..s.g.src.len() {
        let bits = s.g.bits[i];
        if bits & anchor == 0 || bits & mask == 0 {
            continue;
        }
        let (a, d) = (s.g.src[i], s.g.dst[i]);
        let ci = cid[&s.g.comp[a as usize]];
        if !need[ci] || !matches!(cands[ci], Cand::None) || sub[a as usize] != sub[d as usize] {
            continue;
        }
        let path = s.g.path(d, a, mask, Some(&sub)).expect("a path inside a component");
        let mut cyc = vec![i as u32];
        cyc.extend(path);
        cands[ci] = Cand::Cycle(cyc);
    }
}

/// Reachability over the condensation of the `mask` edges, pruned by topological order
/// (Tarjan ids) and longest-path levels.
struct Reach {
    cid: Vec<u32>,
    off: Vec<u32>,
    succ: Vec<u32>,
    up: Vec<u32>,
    down: Vec<u32>,
    stamp: Vec<u32>,
    q: u32,
}

impl Reach {
    fn new(g: &mut Graph, mask: u8) -> Reach {
        let cid = g.sub(mask).clone();
        let k = cid.iter().map(|&c| c as usize + 1).max().unwrap_or(0);
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for i in 0..g.src.len() {
            if g.bits[i] & mask != 0 {
                let (a, b) = (cid[g.src[i] as usize], cid[g.dst[i] as usize]);
                if a != b {
                    pairs.push((a, b));
                }
            }
        }
        // successors sorted by decreasing id: a search may stop at the first one below
        pairs.sort_unstable_by(|x, y| x.0.cmp(&y.0).then(y.1.cmp(&x.1)));
        pairs.dedup();
        let mut off = vec![0u32; k + 1];
        for &(a, _) in &pairs {
            off[a as usize + 1] += 1;
        }
        for i in 0..k {
            off[i + 1] += off[i];
        }
        let succ: Vec<u32> = pairs.iter().map(|p| p.1).collect();
        let mut down = vec![0u32; k];
        for x in 0..k {
            for &y in &succ[off[x] as usize..off[x + 1] as usize] {
                down[x] = down[x].max(down[y as usize] + 1);
            }
        }
        let mut up = vec![0u32; k];
        for x in (0..k).rev() {
            for &y in &succ[off[x] as usize..off[x + 1] as usize] {
                up[y as usize] = up[y as usize].max(up[x] + 1);
            }
        }
        Reach { cid, off, succ, up, down, stamp: vec![0; k], q: 0 }
    }

    fn query(&mut self, src: u32, dst: u32, budget: &mut Budget) -> Result<bool, OutOfBudget> {
        let (a, b) = (self.cid[src as usize], self.cid[dst as usize]);
        if a == b {
            return Ok(true);
        }
        let (ua, ub, da, db) = (self.up[a as usize], self.up[b as usize], self.down[a as usize],
                                self.down[b as usize]);
        if a < b || ua >= ub || da <= db {
            return Ok(false);
        }
        self.q += 1;
        let q = self.q;
        let mut stack = vec![a];
        self.stamp[a as usize] = q;
        let mut steps = 0i64;
        while let Some(x) = stack.pop() {
            for j in self.off[x as usize]..self.off[x as usize + 1] {
                let y = self.succ[j as usize];
                steps += 1;
                if y < b {
                    break;
                }
                if y == b {
                    budget.spend(steps);
                    return Ok(true);
                }
                let yu = y as usize;
                if self.stamp[yu] == q || self.up[yu] >= ub || self.down[yu] <= db {
                    continue;
                }
                self.stamp[yu] = q;
                stack.push(y);
            }
            if steps > 4096 {
                if !budget.spend(steps) {
                    return Err(OutOfBudget);
                }
                steps = 0;
            }
        }
        if !budget.spend(steps) {
            return Err(OutOfBudget);
        }
        Ok(false)
    }
}

fn single(s: &mut Search, mask: u8, need: &[bool], cid: &Map<u32, usize>, cands: &mut [Cand],
          budget: &mut Budget) {
    let flow = mask & !B_RW;
    let mut reach = Reach::new(&mut s.g, flow);
    for i in 0..s.g.src.len() {
        if s.g.bits[i] != B_RW {
            continue;
        }
        let (a, d) = (s.g.src[i], s.g.dst[i]);
        let ci = cid[&s.g.comp[a as usize]];
        if !need[ci] || !matches!(cands[ci], Cand::None) {
            continue;
        }
        match reach.query(d, a, budget) {
            Err(OutOfBudget) => cands[ci] = Cand::Unknown,
            Ok(false) => {}
            Ok(true) => {
                let path = s.g.path(d, a, flow, None).expect("reachable");
                let mut cyc = vec![i as u32];
                cyc.extend(path);
                cands[ci] = Cand::Cycle(cyc);
            }
        }
    }
}

fn nonadjacent(s: &mut Search, mask: u8, need: &[bool], cid: &Map<u32, usize>,
               cands: &mut [Cand]) {
    let flow = mask & !B_RW;
    let g = &s.g;
    let n = g.n;
    // the (transaction, last edge was rw) state graph
    let hnb = |v: usize, out: &mut Vec<u32>| {
        let (x, st) = (v / 2, v % 2);
        for &i in g.out(x) {
            let b = g.bits[i as usize];
            let d = g.dst[i as usize] as usize;
            if b & flow != 0 {
                out.push((2 * d) as u32);
            } else if b == B_RW && st == 0 && mask & B_RW != 0 {
                out.push((2 * d + 1) as u32);
            }
        }
    };
    let hcomp = tarjan(2 * n, hnb);
    for i in 0..g.src.len() {
        if g.bits[i] != B_RW {
            continue;
        }
        let (a, d) = (g.src[i] as usize, g.dst[i] as usize);
        let ci = cid[&g.comp[a]];
        if !need[ci] || !matches!(cands[ci], Cand::None) || hcomp[2 * a] != hcomp[2 * d + 1] {
            continue;
        }
        // a walk (d, rw-state) ~> (a, free) in the state graph
        let (from, to) = (2 * d + 1, 2 * a);
        let mut parent: Map<u32, (u32, u32)> = Map::default();
        parent.insert(from as u32, (u32::MAX, u32::MAX));
        let mut q = VecDeque::from([from as u32]);
        let mut walk = Vec::new();
        while let Some(v) = q.pop_front() {
            if v as usize == to {
                let mut x = v;
                while x as usize != from {
                    let (u, e) = parent[&x];
                    walk.push(e);
                    x = u;
                }
                walk.reverse();
                break;
            }
            let (x, st) = (v as usize / 2, v as usize % 2);
            for &e in g.out(x) {
                let b = g.bits[e as usize];
                let dd = g.dst[e as usize] as usize;
                let w = if b & flow != 0 { 2 * dd } else if b == B_RW && st == 0 { 2 * dd + 1 }
                        else { continue };
                if hcomp[w] != hcomp[from] || parent.contains_key(&(w as u32)) {
                    continue;
                }
                parent.insert(w as u32, (v, e));
                q.push_back(w as u32);
            }
        }
        let mut cyc = vec![i as u32];
        cyc.extend(walk);
        cands[ci] = Cand::Cycle(simplify(g, cyc));
    }
}

fn valid_nonadjacent(bits: &[u8]) -> bool {
    let n = bits.len();
    bits.contains(&B_RW) && !(0..n).any(|i| bits[i] == B_RW && bits[(i + n - 1) % n] == B_RW)
}

fn simplify(g: &Graph, mut walk: Vec<u32>) -> Vec<u32> {
    loop {
        let verts: Vec<u32> = walk.iter().map(|&i| g.src[i as usize]).collect();
        let mut first: Map<u32, usize> = Map::default();
        let mut rep = None;
        for (j, &v) in verts.iter().enumerate() {
            if let Some(&i) = first.get(&v) {
                rep = Some((i, j));
                break;
            }
            first.insert(v, j);
        }
        let Some((i, j)) = rep else { return walk };
        let inner: Vec<u32> = walk[i..j].to_vec();
        let mut outer: Vec<u32> = walk[j..].to_vec();
        outer.extend_from_slice(&walk[..i]);
        if valid_nonadjacent(&g.kinds(&inner)) {
            walk = inner;
        } else if valid_nonadjacent(&g.kinds(&outer)) {
            walk = outer;
        } else {
            return walk;
        }
    }
}

/// A simple cycle of class `typ` in the component, or none: every simple cycle is
/// enumerated once, from its smallest vertex.
fn dfs(g: &Graph, members: &[u32], s: &Search, typ: usize, mask: u8, budget: &mut Budget)
       -> Result<Option<Vec<u32>>, OutOfBudget> {
    let (base, _) = s.spec[typ];
    let limit = DFS_STEPS.min(budget.steps.max(0));
    let mut spent = 0i64;
    let mut into: Map<u32, Vec<u32>> = Map::default();
    for &v in members {
        for &i in g.out(v as usize) {
            if g.bits[i as usize] & mask != 0 {
                into.entry(g.dst[i as usize]).or_default().push(v);
            }
        }
    }
    for &s0 in members {
        // the vertices not below s0 that reach s0
        let mut back: Map<u32, ()> = Map::default();
        back.insert(s0, ());
        let mut todo = vec![s0];
        while let Some(x) = todo.pop() {
            if let Some(us) = into.get(&x) {
                for &u in us {
                    if u >= s0 && back.insert(u, ()).is_none() {
                        todo.push(u);
                    }
                }
            }
        }
        let mut stack: Vec<(u32, usize)> = vec![(s0, 0)];
        let mut path: Vec<u32> = Vec::new();
        let mut on_path: Map<u32, ()> = Map::default();
        on_path.insert(s0, ());
        while let Some(&(v, k)) = stack.last() {
            let out = g.out(v as usize);
            if k >= out.len() {
                stack.pop();
                if !path.is_empty() {
                    on_path.remove(&v);
                    path.pop();
                }
                continue;
            }
            let i = out[k];
            stack.last_mut().unwrap().1 += 1;
            spent += 1;
            if spent % 4096 == 0 && (spent > limit || !budget.spend(4096)) {
                if budget.hit.is_empty() {
                    budget.hit = "steps";
                }
                return Err(OutOfBudget);
            }
            let b = g.bits[i as usize];
            if b & mask == 0 {
                continue;
            }
            let w = g.dst[i as usize];
            if w == s0 {
                let mut cyc = path.clone();
                cyc.push(i);
                if s.cls(&cyc) == typ {
                    budget.spend(spent % 4096);
                    return Ok(Some(cyc));
                }
                continue;
            }
            if w < s0 || on_path.contains_key(&w) || !back.contains_key(&w) {
                continue;
            }
            if b == B_RW {
                let n_rw = path.iter().filter(|&&j| g.bits[j as usize] == B_RW).count();
                if (base == 2 && n_rw > 0)
                    || (base == 3 && path.last().is_some_and(|&j| g.bits[j as usize] == B_RW)) {
                    continue;
                }
            }
            path.push(i);
            on_path.insert(w, ());
            stack.push((w, 0));
        }
    }
    budget.spend(spent % 4096);
    Ok(None)
}

fn cycle_exists(s: &mut Search, comps: &mut [Comp], cid: &Map<u32, usize>) {
    let tb = s.tb;
    let mut per_spec: Vec<Map<usize, Vec<u32>>> = Vec::new();
    for (_, mask, ext) in &tb.specs {
        per_spec.push(smallest_cycle_sets(&mut s.g, *mask, *ext, cid));
    }
    for (ci, c) in comps.iter_mut().enumerate() {
        let mut redundant = 0u32;
        for (j, found) in per_spec.iter().enumerate() {
            if redundant & (1 << j) != 0 {
                continue;
            }
            if let Some(vs) = found.get(&ci) {
                c.exists.push((j, vs.clone()));
                redundant |= tb.spec_implying[j];
            }
        }
    }
}

fn smallest_cycle_sets(g: &mut Graph, mask: u8, ext: bool, cid: &Map<u32, usize>)
                       -> Map<usize, Vec<u32>> {
    let mut members: Map<u32, Vec<u32>> = Map::default();
    if !ext {
        let sub = g.sub(mask).clone();
        for i in 0..g.src.len() {
            let (a, b) = (g.src[i], g.dst[i]);
            if g.bits[i] & mask != 0 && sub[a as usize] == sub[b as usize] {
                let m = members.entry(sub[a as usize]).or_default();
                m.push(a);
                m.push(b);
            }
        }
    } else {
        let gg: &Graph = g;
        let n = gg.n;
        let nb = |v: usize, out: &mut Vec<u32>| {
            let (x, st) = (v / 2, v % 2);
            for &i in gg.out(x) {
                let b = gg.bits[i as usize];
                let d = gg.dst[i as usize] as usize;
                if b & mask != 0 {
                    out.push((2 * d) as u32);
                } else if b == B_RW && st == 0 {
                    out.push((2 * d + 1) as u32);
                }
            }
        };
        let hcomp = tarjan(2 * n, nb);
        let mut buf = Vec::new();
        for v in 0..2 * n {
            buf.clear();
            nb(v, &mut buf);
            for &w in &buf {
                if hcomp[v] == hcomp[w as usize] {
                    let m = members.entry(hcomp[v]).or_default();
                    m.push((v / 2) as u32);
                    m.push(w / 2);
                }
            }
        }
    }
    let mut out: Map<usize, Vec<u32>> = Map::default();
    for (_, mut vs) in members {
        vs.sort_unstable();
        vs.dedup();
        let ci = cid[&g.comp[vs[0] as usize]];
        match out.get(&ci) {
            Some(cur) if cur.len() < vs.len() || (cur.len() == vs.len() && *cur <= vs) => {}
            _ => {
                out.insert(ci, vs);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// snapshot isolation over unknown append orders

/// The state-graph components of the ww/wr/rw edges plus `extra` ww edges, and the
/// state graph's adjacency (`off`, `adj`).
fn si_hcomp(n: usize, e: &Edges, extra: &[(u32, u32)]) -> (Vec<u32>, Vec<u32>, Vec<(u32, u8)>) {
    let mut off = vec![0u32; n + 1];
    let mut pairs: Vec<(u32, u32, u8)> = Vec::with_capacity(e.len() + extra.len());
    for i in 0..e.len() {
        if e.kind[i] <= RW {
            pairs.push((e.src[i], e.dst[i], e.kind[i]));
        }
    }
    for &(a, b) in extra {
        pairs.push((a, b, WW));
    }
    for p in &pairs {
        off[p.0 as usize + 1] += 1;
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut adj = vec![(0u32, 0u8); pairs.len()];
    for p in &pairs {
        adj[fill[p.0 as usize] as usize] = (p.1, p.2);
        fill[p.0 as usize] += 1;
    }
    let hcomp = tarjan(2 * n, |v, out| {
        let (x, st) = (v / 2, v % 2);
        for &(d, k) in &adj[off[x] as usize..off[x + 1] as usize] {
            if k != RW {
                out.push(2 * d);
            } else if st == 0 {
                out.push(2 * d + 1);
            }
        }
    });
    (hcomp, off, adj)
}

fn si_cycle(n: usize, e: &Edges, extra: &[(u32, u32)]) -> bool {
    let (hcomp, off, adj) = si_hcomp(n, e, extra);
    (0..n).any(|x| adj[off[x] as usize..off[x + 1] as usize].iter().any(|&(d, k)| {
        let w = 2 * d as usize + if k == RW { 1 } else { 0 };
        hcomp[w] == hcomp[2 * x] || (k != RW && hcomp[w] == hcomp[2 * x + 1])
    }))
}

fn permutations(items: &[u32]) -> Vec<Vec<u32>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let x = rest.remove(i);
        for mut p in permutations(&rest) {
            p.insert(0, x);
            out.push(p);
        }
    }
    out
}

/// Each transaction's place in a topological order of the ww and wr edges (acyclic where
/// snapshot isolation is still possible), earlier completions first among those free:
/// the likely commit order.
fn topo_ranks(t: &Txns, e: &Edges) -> (Vec<u32>, bool) {
    let n = t.len();
    let mut indeg = vec![0u32; n];
    let mut off = vec![0u32; n + 1];
    for i in 0..e.len() {
        if e.kind[i] == WW || e.kind[i] == WR {
            off[e.src[i] as usize + 1] += 1;
            indeg[e.dst[i] as usize] += 1;
        }
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut adj = vec![0u32; off[n] as usize];
    for i in 0..e.len() {
        if e.kind[i] == WW || e.kind[i] == WR {
            adj[fill[e.src[i] as usize] as usize] = e.dst[i];
            fill[e.src[i] as usize] += 1;
        }
    }
    // the components of all dependencies, in their order; earlier completions first
    // among those free (a commit precedes its completion)
    let mut doff = vec![0u32; n + 1];
    for i in 0..e.len() {
        if e.kind[i] <= RW {
            doff[e.src[i] as usize + 1] += 1;
        }
    }
    for i in 0..n {
        doff[i + 1] += doff[i];
    }
    let mut dfill = doff.clone();
    let mut dadj = vec![0u32; doff[n] as usize];
    for i in 0..e.len() {
        if e.kind[i] <= RW {
            dadj[dfill[e.src[i] as usize] as usize] = e.dst[i];
            dfill[e.src[i] as usize] += 1;
        }
    }
    let comp = tarjan(n, |v, out| out.extend_from_slice(&dadj[doff[v] as usize..doff[v + 1] as usize]));
    let key = |x: usize| {
        let c = t.complete[x];
        std::cmp::Reverse((u32::MAX - comp[x], if c == NEVER { i64::MAX } else { c }, x))
    };
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u32, i64, usize)>> =
        (0..n).filter(|&x| indeg[x] == 0).map(key).collect();
    let acyclic = {
        let mut size = vec![0u32; n];
        comp.iter().all(|&c| {
            size[c as usize] += 1;
            size[c as usize] == 1
        })
    };
    let mut rank = vec![u32::MAX; n];
    let mut next = 0u32;
    while let Some(std::cmp::Reverse((_, _, x))) = heap.pop() {
        rank[x] = next;
        next += 1;
        for &y in &adj[off[x] as usize..off[x + 1] as usize] {
            indeg[y as usize] -= 1;
            if indeg[y as usize] == 0 {
                heap.push(key(y as usize));
            }
        }
    }
    (rank, acyclic)
}

/// "possible", "impossible" or "unknown": whether some order of each key's unread
/// appenders leaves no cycle snapshot isolation forbids (see `cycles.si_completion`).
pub fn si_completion(t: &Txns, e: &Edges, unread: &[(u32, Vec<u32>)], budget: &mut Budget)
                     -> &'static str {
    const MAX_ORDERED: usize = 7;
    let n = t.len();
    let (pos, acyclic) = topo_ranks(t, e);
    if acyclic {
        // no dependency cycle at all: chains in a topological order add none
        return "possible";
    }
    let mut keys: Vec<&(u32, Vec<u32>)> = unread.iter().collect();
    keys.sort_by_key(|k| std::cmp::Reverse(k.1.len()));
    let likely = |k: &(u32, Vec<u32>)| -> Vec<u32> {
        let mut v = k.1.clone();
        v.sort_by_key(|&x| (pos[x as usize], x));
        v
    };
    let orders = |k: &(u32, Vec<u32>)| -> Vec<Vec<u32>> {
        let first = likely(k);
        let mut out = vec![first.clone()];
        if first.len() <= MAX_ORDERED {
            out.extend(permutations(&first).into_iter().filter(|p| *p != first));
        }
        out
    };
    let chain = |o: &[u32], out: &mut Vec<(u32, u32)>| {
        for w in o.windows(2) {
            out.push((w[0], w[1]));
        }
    };
    let cost = (e.len() + 2 * n) as i64;
    // the likely order of every key at once; then, for the keys whose order closes a
    // forbidden cycle, their other orders one key at a time; then every combination
    let mut current: Vec<Vec<u32>> = keys.iter().map(|k| likely(k)).collect();
    for _ in 0..=keys.len() {
        if !budget.spend(cost) {
            return "unknown";
        }
        let mut added = Vec::new();
        let mut owner = Vec::new();
        for (i, o) in current.iter().enumerate() {
            let before = added.len();
            chain(o, &mut added);
            owner.extend(std::iter::repeat_n(i, added.len() - before));
        }
        let (hcomp, _, _) = si_hcomp(n, e, &added);
        let bad = added.iter().zip(&owner).filter(|((a, b), _)| {
            let (a, b) = (*a as usize, *b as usize);
            hcomp[2 * a] == hcomp[2 * b] || hcomp[2 * a + 1] == hcomp[2 * b]
        }).map(|(_, &i)| i).min();
        let Some(k) = bad else { return "possible" };
        let mut others = Vec::new();
        for (i, o) in current.iter().enumerate() {
            if i != k {
                chain(o, &mut others);
            }
        }
        let mut repaired = false;
        for order in orders(keys[k]).into_iter().skip(1) {
            if !budget.spend(cost) {
                return "unknown";
            }
            let mut trial = others.clone();
            chain(&order, &mut trial);
            if !si_cycle(n, e, &trial) {
                current[k] = order;
                repaired = true;
                break;
            }
        }
        if !repaired {
            break;
        }
    }
    type Unread = (u32, Vec<u32>);
    fn go(i: usize, keys: &[&Unread], orders: &dyn Fn(&Unread) -> Vec<Vec<u32>>,
          added: &mut Vec<(u32, u32)>, n: usize, e: &Edges, budget: &mut Budget)
          -> Result<bool, OutOfBudget> {
        if i == keys.len() {
            return Ok(true);
        }
        for order in orders(keys[i]) {
            let before = added.len();
            for w in order.windows(2) {
                added.push((w[0], w[1]));
            }
            if !budget.spend((e.len() + added.len() + 2 * n) as i64) {
                return Err(OutOfBudget);
            }
            if !si_cycle(n, e, added) && go(i + 1, keys, orders, added, n, e, budget)? {
                return Ok(true);
            }
            added.truncate(before);
        }
        if keys[i].1.len() > MAX_ORDERED {
            return Err(OutOfBudget); // too many orders to try
        }
        Ok(false)
    }
    let mut added = Vec::new();
    match go(0, &keys, &orders, &mut added, n, e, budget) {
        Ok(true) => "possible",
        Ok(false) => "impossible",
        Err(_) => "unknown",
    }
}
