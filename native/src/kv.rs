//! A whole kv history checked natively: Jepsen's preparation, the per-key partition,
//! event ordering and the search of each key, with the same results as the Python
//! pipeline (`register_models.KV.partition`, `CasRegister.encode`, `event_order`, then
//! `search_part` on each part) and the same scheduling of parts under a deadline as
//! `linearizability.check`.
//!
//! The history comes as flat integer columns, one row per operation (see `Columns`); an
//! op is identified by its row, and every order returned lists rows.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::time::Instant;

use crate::wgl::{self, IdHasher, Limits, Op, Verdict, ANY, CAS, READ, WRITE};

/// Outcome codes of the `outcome` column: `OPTIONAL` took effect inside its interval or
/// not at all (what shrinking makes of the ops it leaves out of a counterexample).
pub const OK: i64 = 0;
pub const INFO: i64 = 1;
pub const FAIL: i64 = 2;
pub const OPTIONAL: i64 = 3;

/// The verdict of a part that `fail_fast` left unchecked (never searched).
pub const SKIPPED: i32 = 2;

/// One history as columns of equal length, one row per op: `key` an id per key (any
/// ints; parts come in first-seen order), `kind` 0 read / 1 write / 2 cas, `a` the value
/// read or written or a cas's expected value (`ANY` = -1: not recorded), `b` a cas's new
/// value, `outcome` `OK` / `INFO` / `FAIL`, `invoke` and `complete` times (ns; complete
/// is ignored unless ok), `index` the tie-break among ops invoked at the same time
/// (`LinOp.index`). Values are ints >= 0; 0 is nil, the register's initial value.
pub struct Columns<'a> {
    pub key: &'a [i64],
    pub kind: &'a [i64],
    pub a: &'a [i64],
    pub b: &'a [i64],
    pub outcome: &'a [i64],
    pub invoke: &'a [i64],
    pub complete: &'a [i64],
    pub index: &'a [i64],
}

impl Columns<'_> {
    /// The number of rows, or an error naming a column whose length differs, a kind
    /// outside `0..kinds` or an outcome that is not one of the four.
    pub fn lengths(&self, kinds: i64) -> Result<usize, String> {
        self.checked(kinds, &format!("0..{}", kinds - 1))
    }

    /// As `lengths`, a bad kind named with `kind_help` (what to give instead).
    fn checked(&self, kinds: i64, kind_help: &str) -> Result<usize, String> {
        let n = self.key.len();
        let cols = [("kind", self.kind), ("a", self.a), ("b", self.b), ("outcome", self.outcome),
                    ("invoke_ns", self.invoke), ("complete_ns", self.complete),
                    ("index", self.index)];
        for (name, col) in cols {
            if col.len() != n {
                return Err(format!("column {name} has {} rows, key has {n}", col.len()));
            }
        }
        for i in 0..n {
            let (k, o) = (self.kind[i], self.outcome[i]);
            if !(0..kinds).contains(&k) {
                return Err(format!("row {i} has kind {k}; give {kind_help}"));
            }
            if !(0..=3).contains(&o) {
                return Err(format!(
                    "row {i} has outcome {o}; give 0 (ok), 1 (info), 2 (fail) or 3 (optional)"));
            }
        }
        if n >= (u32::MAX / 2) as usize {
            return Err(format!("{n} rows is too many"));
        }
        Ok(n)
    }

    /// The number of rows of a register history, or an error naming the first bad one.
    pub fn rows(&self) -> Result<usize, String> {
        let n = self.checked(3, "0 (read), 1 (write) or 2 (cas)")?;
        for i in 0..n {
            let (k, a, b) = (self.kind[i], self.a[i], self.b[i]);
            let cas = k == CAS as i64;
            if (a < 0 && !(cas && a == ANY)) || (cas && b < 0) {
                return Err(format!(
                    "row {i} has a={a} b={b}; values are ints >= 0 (a cas may expect -1: any)"));
            }
        }
        Ok(n)
    }
}

/// The result of one part (one key): `verdict` 1 linearizable, 0 not, -1 unknown (its
/// deadline came first), `SKIPPED` never searched; `order` the rows of a linearization
/// (1) or of the longest linearizable prefix found; `stuck` the row whose completion
/// that prefix could not get past (-1: none); `ops` the part's rows as given; `seconds`
/// the time its search took.
#[derive(Clone, Debug)]
pub struct Part {
    pub key: i64,
    pub ops: u32,
    pub verdict: i32,
    pub order: Vec<u32>,
    pub stuck: i64,
    pub seconds: f64,
}

/// Return (key of each part in first-seen order, start of each part in `rows`, rows
/// grouped by part, each group in row order).
pub fn partition(key: &[i64]) -> (Vec<i64>, Vec<u32>, Vec<u32>) {
    let n = key.len();
    let mut part_of = vec![0u32; n];
    let mut keys: Vec<i64> = Vec::new();
    let (lo, hi) = key.iter().fold((i64::MAX, i64::MIN), |(l, h), &k| (l.min(k), h.max(k)));
    // dense ids (what the Python side gives) index a table; anything else goes through a map
    if n > 0 && lo >= 0 && hi < 4 * n as i64 + 64 {
        let mut id = vec![u32::MAX; hi as usize + 1];
        for (r, &k) in key.iter().enumerate() {
            let slot = &mut id[k as usize];
            if *slot == u32::MAX {
                *slot = keys.len() as u32;
                keys.push(k);
            }
            part_of[r] = *slot;
        }
    } else {
        let mut id: HashMap<i64, u32, BuildHasherDefault<IdHasher>> = HashMap::default();
        for (r, &k) in key.iter().enumerate() {
            let next = keys.len() as u32;
            let p = *id.entry(k).or_insert_with(|| {
                keys.push(k);
                next
            });
            part_of[r] = p;
        }
    }
    // counting sort of the rows by part (stable: each part keeps row order)
    let mut start = vec![0u32; keys.len() + 1];
    for &p in &part_of {
        start[p as usize + 1] += 1;
    }
    for j in 0..keys.len() {
        start[j + 1] += start[j];
    }
    let mut fill = start.clone();
    let mut rows = vec![0u32; n];
    for (r, &p) in part_of.iter().enumerate() {
        rows[fill[p as usize] as usize] = r as u32;
        fill[p as usize] += 1;
    }
    (keys, start, rows)
}

/// One part as the search takes it: the rows kept (in invoke order), their ops and their
/// events in time order.
pub struct Prepared {
    pub rows: Vec<u32>,
    pub ops: Vec<Op>,
    pub events: Vec<u32>,
}

/// Scratch space reused across parts: a mark per value (`seen[v] == tag` when seen).
pub struct Scratch {
    seen: Vec<u32>,
    tag: u32,
}

impl Scratch {
    /// Scratch for values `0..values`.
    pub fn new(values: usize) -> Self {
        Scratch { seen: vec![0; values], tag: 0 }
    }
}

/// Whether an op of this outcome has a completion event (ok, optional).
#[inline]
pub fn has_completion(outcome: i64) -> bool {
    outcome == OK || outcome == OPTIONAL
}

/// Jepsen's preparation of one part (as `CasRegister.encode`): fail ops and reads that
/// did not complete ok are dropped, the rest sorted by (invoke, index); an info or
/// optional write or cas whose new value no op that must happen observes (or, to a fixed
/// point, no such op kept for that reason expects) is dropped too; then the events in
/// time order (as `event_order`: an invoke before a completion at the same time).
pub fn prepare(c: &Columns, part: &[u32], scratch: &mut Scratch) -> Prepared {
    let mut kept: Vec<u32> = part
        .iter()
        .copied()
        .filter(|&r| {
            let o = c.outcome[r as usize];
            o != FAIL && !(c.kind[r as usize] == READ as i64 && o != OK)
        })
        .collect();
    let sorted = kept.windows(2).all(|w| {
        let (x, y) = (w[0] as usize, w[1] as usize);
        (c.invoke[x], c.index[x]) <= (c.invoke[y], c.index[y])
    });
    if !sorted {
        kept.sort_by_key(|&r| (c.invoke[r as usize], c.index[r as usize]));
    }
    // what the ops that must happen observe; then, to a fixed point, info ops whose new
    // value is observed are kept and what they expect is observed in turn
    scratch.tag = scratch.tag.wrapping_add(1);
    if scratch.tag == 0 {
        scratch.seen.iter_mut().for_each(|s| *s = 0);
        scratch.tag = 1;
    }
    let tag = scratch.tag;
    let seen = &mut scratch.seen;
    // pending: positions in `kept` of info writes and cas not (yet) kept
    let mut pending: Vec<u32> = Vec::new();
    for (p, &r) in kept.iter().enumerate() {
        let r = r as usize;
        let (k, a) = (c.kind[r], c.a[r]);
        if c.outcome[r] == OK {
            if k == READ as i64 || (k == CAS as i64 && a != ANY) {
                seen[a as usize] = tag;
            }
        } else if k != READ as i64 {
            pending.push(p as u32);
        }
    }
    let mut retained = vec![false; 0];
    if !pending.is_empty() {
        retained = vec![false; kept.len()];
        let mut grew = true;
        while grew {
            grew = false;
            pending.retain(|&p| {
                let r = kept[p as usize] as usize;
                let cas = c.kind[r] == CAS as i64;
                let new = if cas { c.b[r] } else { c.a[r] };
                if seen[new as usize] != tag {
                    return true;
                }
                retained[p as usize] = true;
                let a = c.a[r];
                if cas && a != ANY && seen[a as usize] != tag {
                    seen[a as usize] = tag;
                    grew = true;
                }
                false
            });
        }
    }
    let rows: Vec<u32> = if retained.is_empty() {
        kept
    } else {
        kept.iter()
            .enumerate()
            .filter(|&(p, &r)| c.outcome[r as usize] == OK || retained[p])
            .map(|(_, &r)| r)
            .collect()
    };
    let ops: Vec<Op> = rows
        .iter()
        .map(|&r| {
            let r = r as usize;
            let f = c.kind[r] as u8;
            Op { f, a: c.a[r], b: if f == CAS { c.b[r] } else { 0 },
                 opt: c.outcome[r] == OPTIONAL }
        })
        .collect();
    let events = events_of(c, &rows);
    Prepared { rows, ops, events }
}

/// The events of `rows` (sorted by (invoke, index)) in time order, as `event_order`
/// makes them: `2 p` the invoke of `rows[p]`, `2 p + 1` its completion (ok and optional
/// ops, at their completion or their invoke if earlier), an invoke before a completion
/// at the same time.
pub fn events_of(c: &Columns, rows: &[u32]) -> Vec<u32> {
    // invokes are already in order; completions are sorted and merged in
    let mut done: Vec<(i64, u32)> = rows
        .iter()
        .enumerate()
        .filter(|&(_, &r)| has_completion(c.outcome[r as usize]))
        .map(|(p, &r)| (c.complete[r as usize].max(c.invoke[r as usize]), p as u32))
        .collect();
    done.sort_unstable();
    let mut events = Vec::with_capacity(rows.len() + done.len());
    let mut d = done.iter().peekable();
    for (p, &r) in rows.iter().enumerate() {
        let t = c.invoke[r as usize];
        while let Some(&&(ct, q)) = d.peek() {
            if ct >= t {
                break;
            }
            events.push(2 * q + 1);
            d.next();
        }
        events.push(2 * p as u32);
    }
    events.extend(d.map(|&(_, q)| 2 * q + 1));
    events
}

/// The `Part` of a search's outcome over `rows` (op ids are positions in `rows`).
pub fn part_of(key: i64, ops: usize, rows: &[u32], out: wgl::Outcome, started: Instant) -> Part {
    let verdict = match out.verdict {
        Verdict::Linearizable => 1,
        Verdict::NotLinearizable => 0,
        Verdict::Timeout => -1,
    };
    Part {
        key,
        ops: ops as u32,
        verdict,
        order: out.order.iter().map(|&i| rows[i as usize]).collect(),
        stuck: out.stuck.map_or(-1, |i| rows[i as usize] as i64),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Most memo entries of a part of `n` ops within `cache_bytes` (as the Python side's
/// `_cache_entries`).
pub fn cache_entries(n: usize, cache_bytes: usize) -> usize {
    (cache_bytes / (n / 8 + 100)).max(1024)
}

/// Search one part until `deadline`.
pub fn check_part(c: &Columns, key: i64, part: &[u32], scratch: &mut Scratch,
                  deadline: Option<Instant>, cache_bytes: usize) -> Part {
    let t = Instant::now();
    let p = prepare(c, part, scratch);
    let limits = Limits { deadline, max_entries: cache_entries(p.ops.len(), cache_bytes) };
    let out = wgl::search(&p.ops, &p.events, 0, limits);
    part_of(key, part.len(), &p.rows, out, t)
}

/// Whether the `constrained` rows of one part (`c` holds that part alone) can be
/// linearized with every other op relaxed, as `PartSearch._register_window` decides it:
/// only the ops that overlap the window of the constrained ones (from their first invoke
/// to their last completion) are searched, other `ok` ops made optional (inside their
/// interval or not at all), `info` ops as they are, starting from any value the register
/// could hold when the window opens (nil, a value written by an op invoked before it, or
/// to a fixed point the new value of a cas before it from one of those).
/// Returns 1 linearizable, 0 not, -1 the deadline came first.
#[allow(clippy::needless_range_loop)]
pub fn check_window(c: &Columns, constrained: &[u8], scratch: &mut Scratch,
                    deadline: Option<Instant>, cache_bytes: usize) -> i32 {
    let n = c.key.len();
    let inside = |r: usize| constrained[r] != 0;
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for r in (0..n).filter(|&r| inside(r)) {
        lo = lo.min(c.invoke[r]);
        hi = hi.max(c.complete[r]);
    }
    if lo == i64::MAX {
        return 1;
    }
    let mut outcome = c.outcome.to_vec();
    let mut starts: Vec<i64> = vec![0];
    let mut cas_before: Vec<(i64, i64)> = Vec::new();
    let mut rows: Vec<u32> = Vec::new();
    for r in 0..n {
        let o = c.outcome[r];
        if o == FAIL || c.invoke[r] > hi {
            continue;
        }
        if inside(r) {
            rows.push(r as u32);
            continue;
        }
        let k = c.kind[r];
        if c.invoke[r] < lo && k != READ as i64 {
            if k == CAS as i64 {
                cas_before.push((c.a[r], c.b[r]));
            } else {
                starts.push(c.a[r]);
            }
        }
        if o != OK {
            rows.push(r as u32);
        } else if c.complete[r] >= lo {
            outcome[r] = OPTIONAL;
            rows.push(r as u32);
        }
    }
    // the starts: nil, the values written before the window, and to a fixed point the
    // new value of a cas whose expected value is one of them (or unrecorded)
    let mut grew = true;
    while grew && !cas_before.is_empty() {
        grew = false;
        cas_before.retain(|&(x, y)| {
            if x == ANY || starts.contains(&x) {
                if !starts.contains(&y) {
                    starts.push(y);
                    grew = true;
                }
                return false;
            }
            true
        });
    }
    let w = Columns { outcome: &outcome, ..*c };
    let p = prepare(&w, &rows, scratch);
    // Where the register starts: nil, or any start an op of the window observes (the
    // others act alike: a state nothing observes). One search, not one per start: each
    // start is a write that may happen (optional) before every event of the window, so
    // the searches from different starts share their memo once they meet.
    let mut observed = std::collections::HashSet::new();
    for op in &p.ops {
        if op.f == READ || (op.f == CAS && op.a != ANY) {
            observed.insert(op.a);
        }
    }
    starts.sort_unstable();
    starts.dedup();
    let virt: Vec<i64> = starts.into_iter().filter(|&v| v != 0 && observed.contains(&v)).collect();
    let k = virt.len() as u32;
    let mut ops: Vec<Op> = virt.iter().map(|&v| Op { f: WRITE, a: v, b: 0, opt: true }).collect();
    ops.extend(p.ops.iter().copied());
    let mut events: Vec<u32> = (0..k).map(|i| 2 * i).chain((0..k).map(|i| 2 * i + 1)).collect();
    events.extend(p.events.iter().map(|&e| e + 2 * k));
    let limits = Limits { deadline, max_entries: cache_entries(ops.len(), cache_bytes) };
    match wgl::search(&ops, &events, 0, limits).verdict {
        Verdict::Linearizable => 1,
        Verdict::NotLinearizable => 0,
        Verdict::Timeout => -1,
    }
}

/// Check every part of a history (parts in first-seen key order in the result). Parts
/// are searched smallest first; with a deadline each first gets a fair share of the time
/// left, then the undecided ones share what remains (keeping the longer prefix), as
/// `linearizability.check` does. With `fail_fast` the search stops at the first part
/// found not linearizable: parts not yet searched are `SKIPPED`. `progress(done, total)`
/// is called as parts are decided.
pub fn check_all(c: &Columns, deadline: Option<Instant>, cache_bytes: usize, fail_fast: bool,
                 progress: &mut dyn FnMut(usize, usize)) -> Vec<Part> {
    let values = c.a.iter().chain(c.b.iter()).copied().max().unwrap_or(0).max(0) as usize + 1;
    let mut scratch = Scratch::new(values);
    schedule(c, deadline, fail_fast, progress, &mut |key, part, dl| {
        check_part(c, key, part, &mut scratch, dl, cache_bytes)
    })
}

/// A counterexample of one register part found without a search, as
/// `CasRegister.refute` finds it (same rows, same choice among several): the first op in
/// (invoke, index) order that completed ok and needs a value (a read's, a cas's expected
/// one; nil aside) no write or cas of the part began to write by its end — `[op]`;
/// else a stale read — `[w, r]`: a read r of v and an ok write or cas w of another value
/// that began after every write of v invoked by r's completion completed (all of them
/// ok) and completed before r began, picked by sweeping the reads by invoke over the ok
/// writes by completion.
pub fn refute(c: &Columns, part: &[u32]) -> Option<Vec<u32>> {
    let is_write = |r: usize| c.kind[r] == WRITE as i64 || c.kind[r] == CAS as i64;
    let written = |r: usize| if c.kind[r] == CAS as i64 { c.b[r] } else { c.a[r] };
    // the earliest invoke writing each value; every writer of each value
    let mut first: HashMap<i64, i64, BuildHasherDefault<IdHasher>> = HashMap::default();
    let mut writers: HashMap<i64, Vec<u32>, BuildHasherDefault<IdHasher>> = HashMap::default();
    for &r in part {
        let r = r as usize;
        if c.outcome[r] != FAIL && is_write(r) {
            let e = first.entry(written(r)).or_insert(c.invoke[r]);
            *e = (*e).min(c.invoke[r]);
            writers.entry(written(r)).or_default().push(r as u32);
        }
    }
    let mut by_invoke: Vec<u32> = part.to_vec();
    by_invoke.sort_by_key(|&r| (c.invoke[r as usize], c.index[r as usize]));
    for &r in &by_invoke {
        let r = r as usize;
        if c.outcome[r] != OK || !(c.kind[r] == READ as i64 || c.kind[r] == CAS as i64) {
            continue;
        }
        let v = c.a[r];
        if v == 0 || v == ANY {
            continue;
        }
        // a write invoked when r completed may still have come first (they touch)
        if first.get(&v).is_none_or(|&t| t > c.complete[r]) {
            return Some(vec![r as u32]);
        }
    }
    // stale reads
    let mut done: Vec<u32> = part.iter().copied()
        .filter(|&r| c.outcome[r as usize] == OK && is_write(r as usize)).collect();
    done.sort_by_key(|&r| c.complete[r as usize]); // stable: ties keep row order
    let mut reads: Vec<u32> = part.iter().copied()
        .filter(|&r| c.outcome[r as usize] == OK && c.kind[r as usize] == READ as i64)
        .collect();
    reads.sort_by_key(|&r| c.invoke[r as usize]);
    let mut best: Vec<(u32, i64)> = Vec::new(); // up to two (write, value), latest invoke first
    let mut i = 0;
    for &r in &reads {
        let r = r as usize;
        while i < done.len() && c.complete[done[i] as usize] < c.invoke[r] {
            let w = done[i];
            let v = written(w as usize);
            best.retain(|&(_, bv)| bv != v);
            best.push((w, v));
            best.sort_by_key(|&(x, _)| std::cmp::Reverse(c.invoke[x as usize])); // stable
            best.truncate(2);
            i += 1;
        }
        let v = c.a[r];
        // only the writes of v that could take effect before r completed
        let of_v = writers.get(&v).map_or(&[][..], |x| &x[..]);
        let serves = |x: u32| c.invoke[x as usize] <= c.complete[r];
        if of_v.iter().any(|&x| serves(x) && c.outcome[x as usize] != OK) {
            continue;
        }
        let last_v = of_v.iter().filter(|&&x| serves(x)).map(|&x| c.complete[x as usize]).max();
        for &(w, wv) in &best {
            if wv != v && last_v.is_none_or(|l| c.invoke[w as usize] > l) {
                return Some(vec![w, r as u32]);
            }
        }
    }
    None
}

/// How `schedule` searches one part: (key, rows, deadline) to its result.
pub type PartSearch<'a> = dyn FnMut(i64, &[u32], Option<Instant>) -> Part + 'a;

/// Search every part of `c` with `search(key, rows, deadline)` (parts in first-seen key
/// order in the result). Parts are searched smallest first; with a deadline each first
/// gets a fair share of the time left, then the undecided ones share what remains
/// (keeping the longer prefix), as `linearizability.check` does. With `fail_fast` the
/// search stops at the first part found not linearizable: parts not yet searched are
/// `SKIPPED`. `progress(done, total)` is called as parts are decided.
pub fn schedule(c: &Columns, deadline: Option<Instant>, fail_fast: bool,
                progress: &mut dyn FnMut(usize, usize),
                search: &mut PartSearch) -> Vec<Part> {
    let (keys, start, rows) = partition(c.key);
    let total = keys.len();
    let part = |j: usize| &rows[start[j] as usize..start[j + 1] as usize];
    let mut results: Vec<Part> = (0..total)
        .map(|j| Part { key: keys[j], ops: part(j).len() as u32, verdict: SKIPPED,
                        order: Vec::new(), stuck: -1, seconds: 0.0 })
        .collect();
    let mut order: Vec<usize> = (0..total).collect();
    order.sort_by_key(|&j| part(j).len()); // stable: equal sizes keep key order
    let mut done = 0;
    match deadline {
        None => {
            for &j in &order {
                results[j] = search(keys[j], part(j), None);
                done += 1;
                progress(done, total);
                if fail_fast && results[j].verdict == 0 {
                    break;
                }
            }
        }
        Some(end) => {
            let mut deferred = Vec::new();
            let mut stop = false;
            for (n, &j) in order.iter().enumerate() {
                let now = Instant::now();
                let share = now + end.saturating_duration_since(now) / (total - n) as u32;
                let r = search(keys[j], part(j), Some(share.min(end)));
                let v = r.verdict;
                results[j] = r;
                if v == -1 {
                    deferred.push(j);
                } else {
                    done += 1;
                    progress(done, total);
                }
                if fail_fast && v == 0 {
                    stop = true;
                    break;
                }
            }
            for &j in &deferred {
                if stop {
                    break;
                }
                if Instant::now() < end {
                    let r = search(keys[j], part(j), Some(end));
                    if r.verdict != -1 || r.order.len() >= results[j].order.len() {
                        results[j] = r;
                    }
                }
                done += 1;
                progress(done, total);
                if fail_fast && results[j].verdict == 0 {
                    stop = true;
                }
            }
        }
    }
    results
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows (key, kind, a, b, outcome, invoke, complete) as owned columns.
    fn cols(rows: &[(i64, u8, i64, i64, i64, i64, i64)]) -> Vec<Vec<i64>> {
        let mut out = vec![Vec::new(); 8];
        for (i, &(k, f, a, b, o, inv, comp)) in rows.iter().enumerate() {
            for (c, v) in out.iter_mut().zip([k, f as i64, a, b, o, inv, comp, i as i64]) {
                c.push(v);
            }
        }
        out
    }

    fn view(v: &[Vec<i64>]) -> Columns<'_> {
        Columns { key: &v[0], kind: &v[1], a: &v[2], b: &v[3], outcome: &v[4], invoke: &v[5],
                  complete: &v[6], index: &v[7] }
    }

    #[test]
    fn keys_are_checked_apart_and_fail_fast_skips_the_rest() {
        // key 5: a stale read (not linearizable); key 9: fine; key 7: fine, larger
        let v = cols(&[
            (5, WRITE, 1, 0, OK, 0, 10),
            (9, WRITE, 2, 0, OK, 0, 10),
            (5, READ, 0, 0, OK, 11, 12),
            (9, READ, 2, 0, OK, 11, 12),
            (7, WRITE, 3, 0, OK, 0, 1),
            (7, READ, 3, 0, OK, 2, 3),
            (7, READ, 3, 0, OK, 4, 5),
        ]);
        let c = view(&v);
        assert_eq!(c.rows().unwrap(), 7);
        let all = check_all(&c, None, 1 << 20, false, &mut |_, _| {});
        let got: Vec<(i64, i32, u32)> = all.iter().map(|p| (p.key, p.verdict, p.ops)).collect();
        assert_eq!(got, vec![(5, 0, 2), (9, 1, 2), (7, 1, 3)]);
        assert_eq!(all[0].stuck, 0);
        assert_eq!(all[1].order, vec![1, 3]);
        let ff = check_all(&c, None, 1 << 20, true, &mut |_, _| {});
        let got: Vec<i32> = ff.iter().map(|p| p.verdict).collect();
        assert_eq!(got, vec![0, SKIPPED, SKIPPED]);
    }

    #[test]
    fn fail_ops_bad_reads_and_unobserved_info_writes_are_dropped() {
        let v = cols(&[
            (0, WRITE, 1, 0, FAIL, 0, 5),  // never happened
            (0, READ, 4, 0, INFO, 0, 5),   // saw nothing
            (0, WRITE, 2, 0, INFO, 1, 0),  // nobody reads 2: dropped
            (0, CAS, 3, 5, INFO, 2, 0),    // 5 is read: kept, and so 3 is observed
            (0, WRITE, 3, 0, INFO, 3, 0),  // kept because the cas expects 3
            (0, READ, 5, 0, OK, 20, 21),
        ]);
        let c = view(&v);
        let (_, start, rows) = partition(c.key);
        let p = prepare(&c, &rows[start[0] as usize..start[1] as usize], &mut Scratch::new(8));
        assert_eq!(p.rows, vec![3, 4, 5]);
        assert_eq!(p.events, vec![0, 2, 4, 5]);
        let all = check_all(&c, None, 1 << 20, false, &mut |_, _| {});
        assert_eq!((all[0].verdict, all[0].order.clone()), (1, vec![4, 3, 5]));
    }

    #[test]
    fn bad_columns_are_named() {
        let mut v = cols(&[(0, READ, 1, 0, OK, 0, 1)]);
        v[4][0] = 7;
        assert!(view(&v).rows().unwrap_err().contains("outcome 7"));
        v[4][0] = OK;
        v[2][0] = -5;
        assert!(view(&v).rows().unwrap_err().contains("values are ints"));
        v[2][0] = 1;
        v[6].push(3);
        assert!(view(&v).rows().unwrap_err().contains("complete_ns"));
    }
}
