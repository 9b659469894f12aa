//! The native core of the transaction checker (`replicalab.checkers.txn`): the same
//! analysis as the pure-Python reference (`listappend.py`, `register.py`, `graph.py`),
//! on columns. List-append: each key's version order is its longest read, every read a
//! prefix of it; rw-register: wr from unique writes, ww/rw where a transaction read a
//! version and then overwrote it, rw from the readers of nil. Then process and real-time
//! edges, Tarjan's components (iterative), and per anomaly class a breadth-first search
//! for the shortest cycle through a few anchor edges, under a step budget and a deadline.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Instant;

pub const NIL: i64 = i64::MIN;
pub const WW: u8 = 0;
pub const WR: u8 = 1;
pub const RW: u8 = 2;
pub const PROCESS: u8 = 3;
pub const REALTIME: u8 = 4;
const OK: u8 = 1;
const FAIL: u8 = 2;
const APPEND: u8 = 0;
const READ: u8 = 1;
const WRITE: u8 = 2;
pub const ANCHORS: usize = 4;
const UNREAD_EDGE_BUDGET: usize = 1024;
const NIL_EDGE_BUDGET: usize = 100_000;

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
    fn mops(&self, t: usize) -> std::ops::Range<usize> {
        let s = self.mop_start[t] as usize;
        s..s + self.mop_len[t] as usize
    }
    fn list(&self, m: usize) -> &[i64] {
        if self.rlen[m] <= 0 {
            return &[]; // nil (or an empty list)
        }
        let s = self.val[m] as usize;
        &self.reads[s..s + self.rlen[m].max(0) as usize]
    }
}

/// An input error: the transaction's `index` and the problem.
pub struct InputError {
    pub index: i64,
    pub msg: String,
}

/// A non-cycle anomaly or a cycle.
pub struct Anomaly {
    pub kind: String,
    pub txns: Vec<u32>,
    pub cycle: Option<Vec<usize>>,
    pub key: Option<u32>,
    pub detail: String,
}

#[derive(Default)]
pub struct Edges {
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    pub kind: Vec<u8>,
    pub key: Vec<u32>,
    pub a: Vec<i64>,
    pub b: Vec<i64>,
}

impl Edges {
    fn push(&mut self, s: u32, d: u32, k: u8, key: u32, a: i64, b: i64) {
        self.src.push(s);
        self.dst.push(d);
        self.kind.push(k);
        self.key.push(key);
        self.a.push(a);
        self.b.push(b);
    }
    pub fn len(&self) -> usize {
        self.src.len()
    }
}

fn jv(v: i64) -> String {
    if v == NIL { "null".to_string() } else { v.to_string() }
}

fn jlist(v: &[i64]) -> String {
    let inner: Vec<String> = v.iter().map(|x| x.to_string()).collect();
    format!("[{}]", inner.join(","))
}

// ---------------------------------------------------------------------------------------
// list-append

pub fn list_append(t: &Txns, edges: &mut Edges, an: &mut Vec<Anomaly>) -> Result<(), InputError> {
    let n = t.len();
    let failed: Vec<bool> = t.outcome.iter().map(|&o| o == FAIL).collect();
    // (key, value) -> (writer, position in the key's order or -1)
    let mut writer: Map<(u32, i64), (u32, i32)> = Map::default();
    writer.reserve(t.f.len() / 2);
    for tx in 0..n {
        for m in t.mops(tx) {
            match t.f[m] {
                APPEND => {
                    let kv = (t.key[m], t.val[m]);
                    if let Some(&(o, _)) = writer.get(&kv) {
                        return Err(InputError { index: t.index[tx], msg: format!(
                            "appends {} to key {}, which T{} appended too; list-append needs \
                             values unique per key", t.val[m], t.keys[kv.0 as usize],
                            t.index[o as usize]) });
                    }
                    writer.insert(kv, (tx as u32, -1));
                }
                READ => {
                    if t.rlen[m] == -2 {
                        return Err(InputError { index: t.index[tx], msg: format!(
                            "the read of key {} returned {}; list-append reads return a list \
                             (or nil)", t.keys[t.key[m] as usize], t.val[m]) });
                    }
                }
                _ => return Err(InputError { index: t.index[tx], msg:
                    ":w; list-append takes :append and :r (for :w use --model rw-register)"
                        .to_string() }),
            }
        }
    }
    // reads: per key (txn, start, len) for orders; external reads; lost-update groups
    let mut key_reads: Vec<(u32, u32, u32, u32)> = Vec::new(); // (key, txn, start, len)
    let mut external: Vec<(u32, u32, u32, u32)> = Vec::new(); // (txn, key, start, prefix len)
    let mut groups: Vec<(u32, u32, u32)> = Vec::new(); // (key, len read, txn)
    let mut own: Vec<(u32, Vec<i64>)> = Vec::new();
    let mut seen: Vec<(u32, Vec<i64>)> = Vec::new();
    let mut first: Vec<(u32, u32)> = Vec::new();
    for tx in 0..n {
        if t.outcome[tx] != OK {
            continue;
        }
        own.clear();
        seen.clear();
        first.clear();
        for m in t.mops(tx) {
            let k = t.key[m];
            if t.f[m] == APPEND {
                let v = t.val[m];
                if let Some(s) = seen.iter_mut().find(|s| s.0 == k) {
                    s.1.push(v);
                }
                let has_own = own.iter().any(|o| o.0 == k);
                if !has_own {
                    if let Some(&(_, len)) = first.iter().find(|f| f.0 == k) {
                        groups.push((k, len, tx as u32));
                    }
                }
                match own.iter_mut().find(|o| o.0 == k) {
                    Some(o) => o.1.push(v),
                    None => own.push((k, vec![v])),
                }
                continue;
            }
            let r = t.list(m);
            let start = if t.rlen[m] >= 0 { t.val[m] as u32 } else { 0 };
            // duplicates (reads are short: a sort of a copy)
            let mut sorted = r.to_vec();
            sorted.sort_unstable();
            if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
                an.push(Anomaly { kind: "duplicate-elements".into(), txns: vec![tx as u32],
                                  cycle: None, key: Some(k), detail: format!(
                        "{{\"element\": {}, \"read\": {}}}", w[0], jlist(r)) });
                continue;
            }
            if let Some(s) = seen.iter_mut().find(|s| s.0 == k) {
                if s.1.as_slice() != r {
                    an.push(Anomaly { kind: "internal".into(), txns: vec![tx as u32],
                                      cycle: None, key: Some(k), detail: format!(
                            "{{\"expected\": {}, \"read\": {}}}", jlist(&s.1), jlist(r)) });
                }
                s.1 = r.to_vec();
                continue;
            }
            seen.push((k, r.to_vec()));
            let mine: &[i64] = own.iter().find(|o| o.0 == k).map(|o| o.1.as_slice()).unwrap_or(&[]);
            if !mine.is_empty() && (r.len() < mine.len() || &r[r.len() - mine.len()..] != mine) {
                an.push(Anomaly { kind: "internal".into(), txns: vec![tx as u32], cycle: None,
                                  key: Some(k), detail: format!(
                        "{{\"expected_suffix\": {}, \"read\": {}}}", jlist(mine), jlist(r)) });
                continue;
            }
            key_reads.push((k, tx as u32, start, r.len() as u32));
            let plen = (r.len() - mine.len()) as u32;
            external.push((tx as u32, k, start, plen));
            if mine.is_empty() {
                first.push((k, plen));
            }
        }
    }
    // orders: the longest read per key; every read of it a prefix
    let nkeys = t.keys.len();
    let mut order: Vec<Option<(u32, u32)>> = vec![None; nkeys]; // (start, len)
    let mut longest: Vec<Option<(u32, u32, u32)>> = vec![None; nkeys]; // (txn, start, len)
    for &(k, tx, s, l) in &key_reads {
        let cur = &mut longest[k as usize];
        if cur.is_none_or(|c| l > c.2) {
            *cur = Some((tx, s, l));
        }
    }
    let mut bad: Vec<bool> = vec![false; nkeys];
    for &(k, tx, s, l) in &key_reads {
        if bad[k as usize] {
            continue;
        }
        let (lt, ls, ll) = longest[k as usize].unwrap();
        let _ = ll;
        let a = &t.reads[s as usize..(s + l) as usize];
        let b = &t.reads[ls as usize..(ls + l) as usize];
        if a != b {
            bad[k as usize] = true;
            an.push(Anomaly { kind: "incompatible-order".into(), txns: vec![tx, lt], cycle: None,
                              key: Some(k), detail: format!("{{\"reads\": [{}, {}]}}", jlist(a),
                              jlist(&t.reads[ls as usize..(ls + ll) as usize])) });
        }
    }
    // keys in first-read order, as the reference walks its dict
    let mut key_seq: Vec<u32> = Vec::new();
    let mut listed = vec![false; nkeys];
    for &(k, ..) in &key_reads {
        if !listed[k as usize] {
            listed[k as usize] = true;
            key_seq.push(k);
        }
    }
    for &k in &key_seq {
        if bad[k as usize] {
            continue;
        }
        let (_, s, l) = longest[k as usize].unwrap();
        order[k as usize] = Some((s, l));
        let o = &t.reads[s as usize..(s + l) as usize];
        let mut prev: i64 = -1;
        for (i, &v) in o.iter().enumerate() {
            let mut w: i64 = -1;
            if let Some(e) = writer.get_mut(&(k, v)) {
                e.1 = i as i32;
                w = e.0 as i64;
            }
            if w >= 0 && failed[w as usize] {
                w = -1;
            }
            if w >= 0 && prev >= 0 && w != prev {
                edges.push(prev as u32, w as u32, WW, k, o[i - 1], v);
            }
            prev = w;
        }
    }
    // appends no read shows: after every version read
    let mut unread: Vec<Vec<(u32, i64)>> = vec![Vec::new(); nkeys];
    for tx in 0..n {
        if failed[tx] {
            continue;
        }
        for m in t.mops(tx) {
            if t.f[m] == APPEND {
                let k = t.key[m];
                if order[k as usize].is_some() && writer[&(k, t.val[m])].1 < 0 {
                    unread[k as usize].push((tx as u32, t.val[m]));
                }
            }
        }
    }
    for &k in &key_seq {
        let ws = &unread[k as usize];
        if ws.is_empty() {
            continue;
        }
        let (s, l) = order[k as usize].unwrap();
        if l == 0 {
            continue;
        }
        let last = t.reads[(s + l - 1) as usize];
        if let Some(&(lw, _)) = writer.get(&(k, last)) {
            if !failed[lw as usize] {
                for &(w, v) in ws.iter().take(UNREAD_EDGE_BUDGET) {
                    if w != lw {
                        edges.push(lw, w, WW, k, last, v);
                    }
                }
            }
        }
    }
    let last_append = |w: usize, k: u32| -> i64 {
        let mut out = NIL;
        for m in t.mops(w) {
            if t.f[m] == APPEND && t.key[m] == k {
                out = t.val[m];
            }
        }
        out
    };
    for &(tx, k, s, plen) in &external {
        let prefix = &t.reads[s as usize..(s + plen) as usize];
        for &v in prefix {
            if let Some(&(w, _)) = writer.get(&(k, v)) {
                if failed[w as usize] {
                    an.push(Anomaly { kind: "G1a".into(), txns: vec![w, tx], cycle: None,
                                      key: Some(k), detail: format!("{{\"value\": {v}}}") });
                }
            }
        }
        let mut from_w: i64 = -1;
        if let Some(&v) = prefix.last() {
            if let Some(&(w, _)) = writer.get(&(k, v)) {
                from_w = w as i64;
                if !failed[w as usize] && w != tx {
                    edges.push(w, tx, WR, k, v, v);
                    let fin = last_append(w as usize, k);
                    if fin != v {
                        an.push(Anomaly { kind: "G1b".into(), txns: vec![w, tx], cycle: None,
                                          key: Some(k), detail: format!(
                                "{{\"value\": {v}, \"final\": {fin}}}") });
                    }
                }
            }
        }
        let a = prefix.last().copied().unwrap_or(NIL);
        if let Some((os, ol)) = order[k as usize] {
            if plen < ol {
                let nxt = t.reads[(os + plen) as usize];
                if let Some(&(w, _)) = writer.get(&(k, nxt)) {
                    if !failed[w as usize] && w != tx && w as i64 != from_w {
                        edges.push(tx, w, RW, k, a, nxt);
                    }
                }
            } else {
                for &(w, v) in unread[k as usize].iter().take(UNREAD_EDGE_BUDGET) {
                    if w != tx && w as i64 != from_w {
                        edges.push(tx, w, RW, k, a, v);
                    }
                }
            }
        }
    }
    lost_updates(groups, an, |len| format!("{{\"read_length\": {len}}}"));
    Ok(())
}

fn lost_updates(mut groups: Vec<(u32, u32, u32)>, an: &mut Vec<Anomaly>,
                detail: impl Fn(i64) -> String) {
    groups.sort_unstable();
    let mut i = 0;
    while i < groups.len() {
        let mut j = i + 1;
        while j < groups.len() && groups[j].0 == groups[i].0 && groups[j].1 == groups[i].1 {
            j += 1;
        }
        if j - i > 1 {
            let mut ts: Vec<u32> = groups[i..j].iter().map(|g| g.2).collect();
            ts.dedup();
            if ts.len() > 1 {
                an.push(Anomaly { kind: "lost-update".into(), txns: ts, cycle: None,
                                  key: Some(groups[i].0), detail: detail(groups[i].1 as i64) });
            }
        }
        i = j;
    }
}

// ---------------------------------------------------------------------------------------
// rw-register

pub fn rw_register(t: &Txns, edges: &mut Edges, an: &mut Vec<Anomaly>) -> Result<(), InputError> {
    let n = t.len();
    let failed: Vec<bool> = t.outcome.iter().map(|&o| o == FAIL).collect();
    let mut writer: Map<(u32, i64), u32> = Map::default();
    let nkeys = t.keys.len();
    let mut writers_of: Vec<Vec<u32>> = vec![Vec::new(); nkeys];
    for tx in 0..n {
        let mut wrote: Vec<u32> = Vec::new();
        for m in t.mops(tx) {
            match t.f[m] {
                WRITE => {
                    let kv = (t.key[m], t.val[m]);
                    if let Some(&o) = writer.get(&kv) {
                        return Err(InputError { index: t.index[tx], msg: format!(
                            "writes {} to key {}, which T{} wrote too; rw-register needs values \
                             unique per key", t.val[m], t.keys[kv.0 as usize],
                            t.index[o as usize]) });
                    }
                    writer.insert(kv, tx as u32);
                    if !wrote.contains(&kv.0) {
                        wrote.push(kv.0);
                        if !failed[tx] {
                            writers_of[kv.0 as usize].push(tx as u32);
                        }
                    }
                }
                READ => {
                    if t.rlen[m] >= 0 {
                        return Err(InputError { index: t.index[tx], msg: format!(
                            "the read of key {} returned a list; rw-register reads return an \
                             integer (or nil)", t.keys[t.key[m] as usize]) });
                    }
                }
                _ => return Err(InputError { index: t.index[tx], msg:
                    ":append; rw-register takes :w and :r (for :append use --model list-append)"
                        .to_string() }),
            }
        }
    }
    let last_write = |w: usize, k: u32| -> i64 {
        let mut out = NIL;
        for m in t.mops(w) {
            if t.f[m] == WRITE && t.key[m] == k {
                out = t.val[m];
            }
        }
        out
    };
    let first_write = |w: usize, k: u32| -> i64 {
        t.mops(w).find(|&m| t.f[m] == WRITE && t.key[m] == k).map(|m| t.val[m]).unwrap_or(NIL)
    };
    let mut readers: Map<(u32, i64), Vec<u32>> = Map::default();
    let mut overwrote: Vec<((u32, i64), u32)> = Vec::new();
    let mut own: Vec<(u32, i64)> = Vec::new();
    let mut read: Vec<(u32, i64)> = Vec::new();
    for tx in 0..n {
        if t.outcome[tx] != OK {
            continue;
        }
        own.clear();
        read.clear();
        for m in t.mops(tx) {
            let k = t.key[m];
            if t.f[m] == WRITE {
                let has_own = own.iter().any(|o| o.0 == k);
                if !has_own {
                    if let Some(&(_, r)) = read.iter().find(|r| r.0 == k) {
                        overwrote.push(((k, r), tx as u32));
                    }
                }
                match own.iter_mut().find(|o| o.0 == k) {
                    Some(o) => o.1 = t.val[m],
                    None => own.push((k, t.val[m])),
                }
                continue;
            }
            let v = if t.rlen[m] == -2 { t.val[m] } else { NIL };
            let o = own.iter().find(|o| o.0 == k).map(|o| o.1);
            let r0 = read.iter().find(|r| r.0 == k).map(|r| r.1);
            if o.is_some() || r0.is_some() {
                let expected = o.or(r0).unwrap();
                if v != expected {
                    an.push(Anomaly { kind: "internal".into(), txns: vec![tx as u32], cycle: None,
                                      key: Some(k), detail: format!(
                            "{{\"expected\": {}, \"read\": {}}}", jv(expected), jv(v)) });
                }
                if o.is_none() {
                    if let Some(r) = read.iter_mut().find(|r| r.0 == k) {
                        r.1 = v;
                    }
                }
                continue;
            }
            read.push((k, v));
            readers.entry((k, v)).or_default().push(tx as u32);
            if v == NIL {
                continue;
            }
            let Some(&w) = writer.get(&(k, v)) else { continue };
            if w as usize == tx {
                continue;
            }
            if failed[w as usize] {
                an.push(Anomaly { kind: "G1a".into(), txns: vec![w, tx as u32], cycle: None,
                                  key: Some(k), detail: format!("{{\"value\": {v}}}") });
                continue;
            }
            edges.push(w, tx as u32, WR, k, v, v);
            let fin = last_write(w as usize, k);
            if fin != v {
                an.push(Anomaly { kind: "G1b".into(), txns: vec![w, tx as u32], cycle: None,
                                  key: Some(k), detail: format!(
                        "{{\"value\": {v}, \"final\": {fin}}}") });
            }
        }
    }
    // group overwrote by (key, value) in first-seen order, as the reference's dict
    let mut order_of: Map<(u32, i64), usize> = Map::default();
    let mut grouped: Vec<((u32, i64), Vec<u32>)> = Vec::new();
    for &(kv, tx) in &overwrote {
        let i = *order_of.entry(kv).or_insert_with(|| {
            grouped.push((kv, Vec::new()));
            grouped.len() - 1
        });
        grouped[i].1.push(tx);
    }
    for ((k, v), ts) in &grouped {
        let w = if *v != NIL { writer.get(&(*k, *v)).copied() } else { None };
        for &tx in ts {
            let mine = first_write(tx as usize, *k);
            if let Some(w) = w {
                if w != tx && !failed[w as usize] {
                    edges.push(w, tx, WW, *k, *v, mine);
                }
            }
            if *v == NIL {
                continue;
            }
            if let Some(rs) = readers.get(&(*k, *v)) {
                for &r in rs {
                    if r != tx {
                        edges.push(r, tx, RW, *k, *v, mine);
                    }
                }
            }
        }
        if ts.len() > 1 {
            let mut s = ts.clone();
            s.sort_unstable();
            an.push(Anomaly { kind: "lost-update".into(), txns: s, cycle: None, key: Some(*k),
                              detail: format!("{{\"value\": {}}}", jv(*v)) });
        }
    }
    // keys in first-write order, as the reference's dict
    let mut key_seq: Vec<u32> = Vec::new();
    let mut listed = vec![false; nkeys];
    for tx in 0..n {
        for m in t.mops(tx) {
            let k = t.key[m];
            if t.f[m] == WRITE && !failed[tx] && !listed[k as usize] {
                listed[k as usize] = true;
                key_seq.push(k);
            }
        }
    }
    for k in key_seq {
        let ws = &writers_of[k as usize];
        let Some(nil_readers) = readers.get(&(k, NIL)) else { continue };
        let targets: Vec<u32> = if nil_readers.len() * ws.len() <= NIL_EDGE_BUDGET {
            ws.clone()
        } else {
            grouped.iter().find(|g| g.0 == (k, NIL)).map(|g| g.1.clone()).unwrap_or_default()
        };
        for &r in nil_readers {
            for &w in &targets {
                if w != r {
                    edges.push(r, w, RW, k, NIL, first_write(w as usize, k));
                }
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// process and real-time order

pub fn order_edges(t: &Txns, edges: &mut Edges) {
    let mut ok: Vec<u32> = (0..t.len() as u32).filter(|&x| t.outcome[x as usize] == OK).collect();
    ok.sort_by_key(|&x| (t.invoke[x as usize], x));
    let mut last: Map<i64, u32> = Map::default();
    let mut next_in_process = vec![u32::MAX; t.len()];
    for &x in &ok {
        let p = t.process[x as usize];
        if let Some(&prev) = last.get(&p) {
            edges.push(prev, x, PROCESS, u32::MAX, NIL, NIL);
            next_in_process[prev as usize] = x;
        }
        last.insert(p, x);
    }
    // (time, 0 completion / 1 invoke, txn): completions first at a tie
    let mut events: Vec<(i64, u8, u32)> = Vec::with_capacity(ok.len() * 2);
    for &x in &ok {
        events.push((t.invoke[x as usize], 1, x));
        events.push((t.complete[x as usize], 0, x));
    }
    events.sort_unstable();
    let mut frontier: Vec<u32> = Vec::new();
    let mut in_frontier: Vec<bool> = vec![false; t.len()];
    let mut preds: Map<u32, Vec<u32>> = Map::default();
    for &(_, kind, x) in &events {
        if kind == 1 {
            let mut p: Vec<u32> = frontier.clone();
            p.sort_unstable();
            for &s in &p {
                if next_in_process[s as usize] != x {  // a process edge says it already
                    edges.push(s, x, REALTIME, u32::MAX, NIL, NIL);
                }
            }
            preds.insert(x, p);
        } else {
            if let Some(p) = preds.remove(&x) {
                for s in p {
                    in_frontier[s as usize] = false;
                }
                frontier.retain(|&s| in_frontier[s as usize]);
            }
            frontier.push(x);
            in_frontier[x as usize] = true;
        }
    }
}

// ---------------------------------------------------------------------------------------
// components and cycles

/// Compressed adjacency: out-edges of node v are `ids[off[v]..off[v+1]]` (edge ids).
struct Csr {
    off: Vec<u32>,
    ids: Vec<u32>,
}

fn csr(n: usize, src: impl Fn(usize) -> usize, dst_ids: &[u32]) -> Csr {
    let mut off = vec![0u32; n + 1];
    for &e in dst_ids {
        off[src(e as usize) + 1] += 1;
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut pos = off.clone();
    let mut ids = vec![0u32; dst_ids.len()];
    for &e in dst_ids {
        let s = src(e as usize);
        ids[pos[s] as usize] = e;
        pos[s] += 1;
    }
    Csr { off, ids }
}

/// Component id per node (iterative Tarjan).
fn tarjan(n: usize, g: &Csr, dst: &[u32]) -> Vec<u32> {
    const UNSEEN: u32 = u32::MAX;
    let mut index = vec![UNSEEN; n];
    let mut low = vec![0u32; n];
    let mut comp = vec![UNSEEN; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut work: Vec<(u32, u32)> = Vec::new();
    let mut counter = 0u32;
    let mut ncomp = 0u32;
    for root in 0..n {
        if index[root] != UNSEEN {
            continue;
        }
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root as u32);
        on_stack[root] = true;
        work.push((root as u32, g.off[root]));
        while let Some(&(v, i)) = work.last() {
            let vu = v as usize;
            if i < g.off[vu + 1] {
                work.last_mut().unwrap().1 = i + 1;
                let w = dst[g.ids[i as usize] as usize] as usize;
                if index[w] == UNSEEN {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w as u32);
                    on_stack[w] = true;
                    work.push((w as u32, g.off[w]));
                } else if on_stack[w] && index[w] < low[vu] {
                    low[vu] = index[w];
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                if low[vu] < low[u as usize] {
                    low[u as usize] = low[vu];
                }
            }
            if low[vu] == index[vu] {
                loop {
                    let w = stack.pop().unwrap() as usize;
                    on_stack[w] = false;
                    comp[w] = ncomp;
                    if w == vu {
                        break;
                    }
                }
                ncomp += 1;
            }
        }
    }
    comp
}

pub fn classify(kinds: &[u8]) -> String {
    let n_rw = kinds.iter().filter(|&&k| k == RW).count();
    let base = if n_rw == 0 {
        if kinds.contains(&WR) { "G1c" } else { "G0" }
    } else if n_rw == 1 {
        "G-single"
    } else {
        let l = kinds.len();
        let adjacent = (0..l).any(|i| kinds[i] == RW && kinds[(i + l - 1) % l] == RW);
        if adjacent { "G2-item" } else { "G-nonadjacent" }
    };
    let suffix = if kinds.contains(&REALTIME) { "-realtime" }
                 else if kinds.contains(&PROCESS) { "-process" } else { "" };
    format!("{base}{suffix}")
}

pub struct Budget {
    pub steps: i64,
    pub deadline: Option<Instant>,
}

impl Budget {
    fn spend(&mut self, n: i64) -> bool {
        self.steps -= n;
        if self.steps < 0 {
            return false;
        }
        self.deadline.is_none_or(|d| Instant::now() < d)
    }
}

pub struct Unfinished {
    pub variant: String,
    pub size: u32,
    pub sample: Vec<u32>,
    pub might_hold: Vec<String>,
}

const CLASSES: [&str; 5] = ["G0", "G1c", "G-single", "G-nonadjacent", "G2-item"];

fn class_kinds(cls: &str) -> (&'static [u8], u8) {
    match cls {
        "G0" => (&[WW], WW),
        "G1c" => (&[WW, WR], WR),
        _ => (&[WW, WR, RW], RW),
    }
}

struct TimedOut;

#[allow(clippy::too_many_arguments)]
fn bfs(g: &Csr, e: &Edges, local: &[u32], comp: &[u32], c: u32, anchor: u32, cls: &str,
       required: &[u8], budget: &mut Budget) -> Result<Option<Vec<u32>>, TimedOut> {
    if !budget.spend(1) {
        return Err(TimedOut);
    }
    let a = local[e.src[anchor as usize] as usize];
    let b = local[e.dst[anchor as usize] as usize];
    let k0 = e.kind[anchor as usize];
    let single = matches!(cls, "G0" | "G1c" | "G-single");
    let nonadj = cls == "G-nonadjacent";
    let need = !required.is_empty();
    let got0 = !need || required.contains(&k0);
    let state = |v: u32, last_rw: bool, got: bool| -> u64 {
        (v as u64) << 2 | (last_rw as u64) << 1 | got as u64
    };
    let start = state(b, k0 == RW, got0);
    if b == a && !nonadj && got0 {
        return Ok(Some(vec![anchor]));
    }
    let mut parent: Map<u64, (u64, u32)> = Map::default();
    parent.insert(start, (u64::MAX, u32::MAX));
    let mut queue: VecDeque<u64> = VecDeque::new();
    queue.push_back(start);
    let mut steps: i64 = 0;
    while let Some(s) = queue.pop_front() {
        let v = (s >> 2) as usize;
        let last_rw = s & 2 != 0;
        let got = s & 1 != 0;
        for i in g.off[v]..g.off[v + 1] {
            let eid = g.ids[i as usize];
            steps += 1;
            let w = local[e.dst[eid as usize] as usize];
            if comp[w as usize] != c {
                continue;
            }
            let k = e.kind[eid as usize];
            if k == RW && (single || (nonadj && last_rw)) {
                continue;
            }
            let ns = state(w, k == RW, got || required.contains(&k));
            if parent.contains_key(&ns) {
                continue;
            }
            parent.insert(ns, (s, eid));
            if w == a && ns & 1 != 0 && !(nonadj && ns & 2 != 0) {
                let mut path = vec![eid];
                let mut cur = s;
                while cur != start {
                    let (p, pe) = parent[&cur];
                    path.push(pe);
                    cur = p;
                }
                path.push(anchor);
                path.reverse();
                return Ok(Some(path));
            }
            queue.push_back(ns);
        }
        if steps > 4096 {
            if !budget.spend(steps) {
                return Err(TimedOut);
            }
            steps = 0;
        }
    }
    if !budget.spend(steps) {
        return Err(TimedOut);
    }
    Ok(None)
}

/// The cycles found (class name, edge ids), at most one per class and component, the
/// components whose search stopped, and every transaction on a dependency cycle (ww, wr,
/// rw only: the nodes of the nontrivial strongly connected components of that graph,
/// ascending), as `graph.search_cycles`.
pub fn search_cycles(n: usize, e: &Edges, budget: &mut Budget)
                     -> (Vec<(String, Vec<u32>)>, Vec<Unfinished>, Vec<u32>) {
    let mut found: Vec<(String, Vec<u32>)> = Vec::new();
    let mut unfinished = Vec::new();
    let all: Vec<u32> = (0..e.len() as u32).collect();
    let g = csr(n, |x| e.src[x] as usize, &all);
    let comp_all = tarjan(n, &g, &e.dst);
    drop(g);
    let cyclic: Vec<u32> = all.into_iter()
        .filter(|&x| comp_all[e.src[x as usize] as usize] == comp_all[e.dst[x as usize] as usize])
        .collect();
    if cyclic.is_empty() {
        return (found, unfinished, Vec::new());
    }
    // the cyclic part on local node ids
    let mut local = vec![u32::MAX; n];
    let mut nodes: Vec<u32> = Vec::new();
    for &x in &cyclic {
        for v in [e.src[x as usize], e.dst[x as usize]] {
            if local[v as usize] == u32::MAX {
                local[v as usize] = nodes.len() as u32;
                nodes.push(v);
            }
        }
    }
    // reference order: nodes by txn position (so samples and Tarjan order agree)
    nodes.sort_unstable();
    for (i, &v) in nodes.iter().enumerate() {
        local[v as usize] = i as u32;
    }
    let m = nodes.len();
    // each edge's destination as a local id (edges outside the cyclic part are never used)
    let ldst: Vec<u32> = e.dst.iter().map(|&d| {
        let l = local[d as usize];
        if l == u32::MAX { 0 } else { l }
    }).collect();
    // transactions on a dependency cycle: no serial order places them among the others
    // of their component (process and real-time edges left out: through them a cycle
    // would take in every transaction between its ends)
    let dep: Vec<u32> = cyclic.iter().copied().filter(|&x| e.kind[x as usize] <= RW).collect();
    let g = csr(m, |x| local[e.src[x] as usize] as usize, &dep);
    let comp = tarjan(m, &g, &ldst);
    let mut on = vec![false; m];
    for &x in &dep {
        let (s, d) = (local[e.src[x as usize] as usize], local[e.dst[x as usize] as usize]);
        if comp[s as usize] == comp[d as usize] {
            on[s as usize] = true;
            on[d as usize] = true;
        }
    }
    drop(g);
    let on_cycle: Vec<u32> = (0..m).filter(|&v| on[v]).map(|v| nodes[v]).collect();
    let mut seen_cycles: std::collections::HashSet<Vec<u32>, FxBuild> = Default::default();
    for variant in ["", "-process", "-realtime"] {
        let extra: &[u8] = match variant { "" => &[], "-process" => &[PROCESS],
                                           _ => &[PROCESS, REALTIME] };
        let required: &[u8] = match variant { "" => &[], "-process" => &[PROCESS],
                                              _ => &[REALTIME] };
        for cls in CLASSES {
            let (kinds, want) = class_kinds(cls);
            let allowed: Vec<u32> = cyclic.iter().copied().filter(|&x| {
                let k = e.kind[x as usize];
                kinds.contains(&k) || extra.contains(&k)
            }).collect();
            let g = csr(m, |x| local[e.src[x] as usize] as usize, &allowed);
            let comp = tarjan(m, &g, &ldst);
            let mut sizes: Map<u32, u32> = Map::default();
            for &c in &comp {
                *sizes.entry(c).or_default() += 1;
            }
            let mut anchors: std::collections::BTreeMap<u32, Vec<u32>> = Default::default();
            for &x in &cyclic {
                let (s, d) = (local[e.src[x as usize] as usize], local[e.dst[x as usize] as usize]);
                if e.kind[x as usize] == want && comp[s as usize] == comp[d as usize] && s != d {
                    let l = anchors.entry(comp[s as usize]).or_default();
                    if l.len() < ANCHORS {
                        l.push(x);
                    }
                }
            }
            for (c, list) in anchors {
                let mut best: Option<Vec<u32>> = None;
                let mut stopped = false;
                for &anchor in &list {
                    match bfs(&g, e, &local, &comp, c, anchor, cls, required, budget) {
                        Ok(Some(cyc)) => {
                            if best.as_ref().is_none_or(|b| cyc.len() < b.len()) {
                                best = Some(cyc);
                            }
                        }
                        Ok(None) => {}
                        Err(TimedOut) => {
                            stopped = true;
                            break;
                        }
                    }
                }
                if stopped {
                    let sample: Vec<u32> = (0..m).filter(|&v| comp[v] == c).take(8)
                        .map(|v| nodes[v]).collect();
                    unfinished.push(Unfinished {
                        variant: if variant.is_empty() { "base".into() } else { variant.into() },
                        size: sizes[&c], sample, might_hold: vec![format!("{cls}{variant}")] });
                }
                if let Some(cyc) = best {
                    let mut sorted = cyc.clone();
                    sorted.sort_unstable();
                    if seen_cycles.insert(sorted) {  // else another class's search found it
                        let ks: Vec<u8> = cyc.iter().map(|&x| e.kind[x as usize]).collect();
                        found.push((classify(&ks), cyc));
                    }
                }
            }
        }
    }
    (found, unfinished, on_cycle)
}

/// Everything: analysis, order edges, cycles. `register` picks rw-register. Returns the
/// anomalies, the edges, the unfinished searches and how many transactions take part in
/// an anomaly (on a dependency cycle, or named by an anomaly found).
pub fn check(t: &Txns, register: bool, budget: &mut Budget)
             -> Result<(Vec<Anomaly>, Edges, Vec<Unfinished>, usize), InputError> {
    let mut edges = Edges::default();
    let mut an = Vec::new();
    if register {
        rw_register(t, &mut edges, &mut an)?;
    } else {
        list_append(t, &mut edges, &mut an)?;
    }
    order_edges(t, &mut edges);
    let (found, unfinished, on_cycle) = search_cycles(t.len(), &edges, budget);
    for (name, cyc) in found {
        let txns = cyc.iter().map(|&x| edges.src[x as usize]).collect();
        an.push(Anomaly { kind: name, txns, cycle: Some(cyc.iter().map(|&x| x as usize).collect()),
                          key: None, detail: String::new() });
    }
    let mut involved = vec![false; t.len()];
    for &v in on_cycle.iter().chain(an.iter().flat_map(|a| a.txns.iter())) {
        involved[v as usize] = true;
    }
    let anomalous = involved.iter().filter(|&&x| x).count();
    Ok((an, edges, unfinished, anomalous))
}
