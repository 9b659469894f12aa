//! Python entries of the transaction checker's native core: `txn_check2_edn` (a history
//! file, parsed here), `txn_check2_cols` (transactions as int64 columns) and
//! `txn_check2_rows` (a History's txn rows as Arrow buffers). Each takes the options
//! (`order_kind`: 0 none, 3 process, 4 real-time edges; `wfr`), the lattice `tables`
//! (`checkers/txn/native.py`), and returns `(n, anomalies, counts, unfinished, txn_info,
//! anomalous, empty, skipped)`: at most `keep` anomalies per type (shortest cycles
//! first), each `(type, txns, cycle or None, key or None, detail JSON)` with cycle steps
//! `(src, dst, kind, key or None, a, b)`; `counts` per type; the unfinished searches
//! `(size, sample, classes, limit)`; `txn_info` the `(position, index, process)` of
//! every transaction named; `anomalous` how many transactions take part in some anomaly;
//! `empty` whether the dependency graph has no edge; `skipped` (non-client events,
//! non-txn ops). An input error raises ValueError `"txn-input:<index>:<message>"`.

use std::collections::BTreeMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::txn::{self, Anomaly, Budget, Edges, Tables, Txns, NIL};

type Step = (u32, u32, u8, Option<String>, Option<i64>, Option<i64>);
type RawAnomaly = (String, Vec<u32>, Option<Vec<Step>>, Option<String>, String);
type Out = (usize, Vec<RawAnomaly>, Vec<(String, usize)>, Vec<(u32, Vec<u32>, Vec<String>, String)>,
            Vec<(u32, i64, i64)>, usize, bool, (usize, usize));
/// (names, implied, specs, spec_implying, spec_prohibits, si_killers)
type TablesIn = (Vec<String>, Vec<u32>, Vec<(String, u8, bool)>, Vec<u32>, Vec<u32>,
                 Vec<String>);

fn opt(v: i64) -> Option<i64> {
    if v == NIL { None } else { Some(v) }
}

#[allow(clippy::too_many_arguments)]
fn run(py: Python<'_>, t: Txns, model: &str, order_kind: u8, wfr: bool, tables: TablesIn,
       deadline_s: Option<f64>, max_steps: i64, keep: usize, skipped: (usize, usize))
       -> PyResult<Out> {
    let register = match model {
        "list-append" => false,
        "rw-register" => true,
        _ => return Err(PyValueError::new_err(format!("model {model:?}: use list-append or \
                                                       rw-register"))),
    };
    let (names, implied, specs, spec_implying, spec_prohibits, si_killers) = tables;
    let tb = Tables { names, implied, specs, spec_implying, spec_prohibits };
    let deadline = crate::instant_of(py, deadline_s)?;
    let res = py.detach(|| -> Result<_, txn::InputError> {
        let prof = std::env::var_os("REPLICALAB_TXN_PROFILE").is_some();
        let t0 = std::time::Instant::now();
        let lap = |what: &str| if prof { eprintln!("{what}: {:?}", t0.elapsed()) };
        let mut edges = Edges::default();
        let mut an: Vec<Anomaly> = Vec::new();
        if register {
            txn::analyse_register(&t, wfr, &mut edges, &mut an)?;
        } else {
            txn::analyse_list_append(&t, &mut edges, &mut an)?;
        }
        lap("analysis");
        txn::order_edges(&t, order_kind, &mut edges);
        lap("order edges");
        let empty = edges.is_empty();
        let mut budget = Budget { steps: max_steps, deadline, hit: "" };
        let f = txn::search(t.len(), &edges, &tb, &mut budget);
        lap("search");
        for (name, ids) in f.cycles {
            let txns = ids.iter().map(|&i| edges.src[i]).collect();
            an.push(Anomaly { kind: name, txns, cycle: Some(ids), key: None,
                              detail: String::new() });
        }
        for (name, vs) in f.exists {
            an.push(Anomaly { kind: name, txns: vs.iter().take(8).copied().collect(),
                              cycle: None, key: None,
                              detail: format!("{{\"size\":{}}}", vs.len()) });
        }
        let mut unfinished = f.unfinished;
        // without a dependency cycle the order of unread appends changes nothing
        let cyclic = !f.on_cycle.is_empty();
        if !register && cyclic && !an.iter().any(|a| si_killers.contains(&a.kind)) {
            let unread = txn::unread_appenders(&t);
            if !unread.is_empty() {
                let verdict = txn::si_completion(&t, &edges, &unread, &mut budget);
                let mut involved: Vec<u32> = unread.iter().flat_map(|u| u.1.iter().copied())
                    .collect();
                involved.sort_unstable();
                involved.dedup();
                if verdict == "impossible" {
                    let keys: Vec<String> = unread.iter()
                        .map(|u| format!("\"{}\"", t.keys[u.0 as usize].replace('"', "\\\"")))
                        .collect();
                    an.push(Anomaly { kind: "PL-SI-cycle-exists".to_string(),
                                      txns: involved.iter().take(8).copied().collect(),
                                      cycle: None, key: None,
                                      detail: format!("{{\"size\":{},\"keys\":[{}]}}",
                                                      involved.len(), keys.join(",")) });
                } else if verdict == "unknown" {
                    unfinished.push(txn::Unfinished {
                        size: involved.len() as u32,
                        sample: involved.iter().take(8).copied().collect(),
                        classes: vec!["PL-SI-cycle-exists".to_string()],
                        limit: if budget.hit.is_empty() { "steps" } else { budget.hit }
                            .to_string() });
                }
            }
        }
        let mut on = vec![false; t.len()];
        for &v in &f.on_cycle {
            on[v as usize] = true;
        }
        for a in &an {
            for &x in &a.txns {
                on[x as usize] = true;
            }
        }
        let anomalous = on.iter().filter(|&&x| x).count();
        lap("snapshot isolation orders");
        Ok((an, edges, unfinished, anomalous, empty))
    });
    let (an, edges, unfinished, anomalous, empty) = match res {
        Ok(x) => x,
        Err(e) => return Err(PyValueError::new_err(format!("txn-input:{}:{}", e.index, e.msg))),
    };
    let keyname = |k: u32| -> Option<String> {
        if k == u32::MAX { None } else { Some(t.keys[k as usize].clone()) }
    };
    let mut by_type: BTreeMap<String, Vec<&Anomaly>> = BTreeMap::new();
    for a in &an {
        by_type.entry(a.kind.clone()).or_default().push(a);
    }
    let mut out = Vec::new();
    let mut counts = Vec::new();
    let mut named: Vec<u32> = Vec::new();
    for (kind, mut list) in by_type {
        counts.push((kind.clone(), list.len()));
        list.sort_by(|x, y| {
            let lx = x.cycle.as_ref().map_or(0, |c| c.len());
            let ly = y.cycle.as_ref().map_or(0, |c| c.len());
            (lx, &x.txns).cmp(&(ly, &y.txns))
        });
        for a in list.into_iter().take(keep) {
            named.extend(&a.txns);
            let cycle = a.cycle.as_ref().map(|c| c.iter().map(|&x| {
                let (key, ea, eb) = edges.detail(x);
                (edges.src[x], edges.dst[x], edges.kind[x], keyname(key), opt(ea), opt(eb))
            }).collect());
            out.push((kind.clone(), a.txns.clone(), cycle, a.key.and_then(keyname),
                      a.detail.clone()));
        }
    }
    for u in &unfinished {
        named.extend(&u.sample);
    }
    named.sort_unstable();
    named.dedup();
    let info = named.iter().map(|&x| (x, t.index[x as usize], t.process[x as usize])).collect();
    let unf = unfinished.into_iter().map(|u| (u.size, u.sample, u.classes, u.limit)).collect();
    Ok((t.len(), out, counts, unf, info, anomalous, empty, skipped))
}

/// Check the Jepsen/Elle EDN history in file ``path`` under ``model``.
#[pyfunction]
#[pyo3(signature = (path, model, order_kind, wfr, tables, deadline_s=None,
                    max_steps=200_000_000, keep=8))]
#[allow(clippy::too_many_arguments)]
pub fn txn_check2_edn(py: Python<'_>, path: &str, model: &str, order_kind: u8, wfr: bool,
                      tables: TablesIn, deadline_s: Option<f64>, max_steps: i64, keep: usize)
                      -> PyResult<Out> {
    let bytes = crate::file_map::FileBytes::open(path)
        .map_err(|e| PyValueError::new_err(format!("txn-input:0:cannot read it ({e})")))?;
    let t0 = std::time::Instant::now();
    let parsed = py.detach(|| crate::txn_parse::parse(&bytes));
    if std::env::var_os("REPLICALAB_TXN_PROFILE").is_some() {
        eprintln!("parse: {:?}", t0.elapsed());
    }
    let (t, sk) = parsed
        .map_err(|e| PyValueError::new_err(format!("txn-input:{}:{}", e.line, e.msg)))?;
    drop(bytes);
    run(py, t, model, order_kind, wfr, tables, deadline_s, max_steps, keep,
        (sk.non_client, sk.non_txn))
}

fn i64s(name: &str, b: &[u8]) -> PyResult<Vec<i64>> {
    if !b.len().is_multiple_of(8) {
        return Err(PyValueError::new_err(format!("{name}: not int64 bytes")));
    }
    Ok(b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect())
}

/// Check transactions given as int64 columns (bytes): per transaction ``index``,
/// ``process``, ``outcome`` (1 ok, 2 fail, 3 info), ``invoke``, ``complete``,
/// ``mop_start``, ``mop_len``; per micro-op ``f`` (0 append, 1 r, 2 w), ``key`` (index
/// into ``keys``), ``val``, ``rlen``; ``reads`` the list reads' elements.
#[pyfunction]
#[pyo3(signature = (cols, keys, model, order_kind, wfr, tables, deadline_s=None,
                    max_steps=200_000_000, keep=8))]
#[allow(clippy::too_many_arguments)]
pub fn txn_check2_cols(py: Python<'_>, cols: Vec<Vec<u8>>, keys: Vec<String>, model: &str,
                       order_kind: u8, wfr: bool, tables: TablesIn, deadline_s: Option<f64>,
                       max_steps: i64, keep: usize) -> PyResult<Out> {
    let names = ["index", "process", "outcome", "invoke", "complete", "mop_start", "mop_len",
                 "f", "key", "val", "rlen", "reads"];
    if cols.len() != names.len() {
        return Err(PyValueError::new_err("txn_check2_cols: 12 columns expected"));
    }
    let v: Vec<Vec<i64>> = cols.iter().zip(names).map(|(c, n)| i64s(n, c))
        .collect::<PyResult<_>>()?;
    let t = Txns {
        index: v[0].clone(), process: v[1].clone(),
        outcome: v[2].iter().map(|&x| x as u8).collect(),
        invoke: v[3].clone(), complete: v[4].clone(),
        mop_start: v[5].iter().map(|&x| x as u32).collect(),
        mop_len: v[6].iter().map(|&x| x as u32).collect(),
        f: v[7].iter().map(|&x| x as u8).collect(),
        key: v[8].iter().map(|&x| x as u32).collect(),
        val: v[9].clone(), rlen: v[10].iter().map(|&x| x as i32).collect(),
        reads: v[11].clone(), keys,
    };
    run(py, t, model, order_kind, wfr, tables, deadline_s, max_steps, keep, (0, 0))
}

/// Add the transaction checker's entries to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(txn_check2_edn, m)?)?;
    m.add_function(wrap_pyfunction!(txn_check2_cols, m)?)?;
    m.add_function(wrap_pyfunction!(txn_check2_rows, m)?)?;
    m.add("TXN_CHECK", 2)?;
    Ok(())
}

fn i32s(name: &str, b: &[u8]) -> PyResult<Vec<i32>> {
    if !b.len().is_multiple_of(4) {
        return Err(PyValueError::new_err(format!("{name}: not int32 bytes")));
    }
    Ok(b.chunks_exact(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect())
}

/// One encoded micro-op of a History row (``history/txn.py``): "append 3", "w 3", "r",
/// "r 5", "r [1,2,3]"; pushes it onto `t`.
fn push_encoded(t: &mut Txns, key: u32, text: &[u8]) -> Result<(), String> {
    let bad = || format!("micro-op {:?}: expected 'append N', 'w N', 'r', 'r N' or 'r [..]'",
                         String::from_utf8_lossy(text));
    let num = |b: &[u8]| -> Result<i64, String> {
        std::str::from_utf8(b).ok().and_then(|x| x.trim().parse::<i64>().ok()).ok_or_else(bad)
    };
    let (f, rest) = match text.iter().position(|&c| c == b' ') {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, &text[text.len()..]),
    };
    t.key.push(key);
    match f {
        b"append" | b"w" => {
            t.f.push(if f == b"w" { 2 } else { 0 });
            t.val.push(num(rest)?);
            t.rlen.push(-1);
        }
        b"r" => {
            t.f.push(1);
            if rest.is_empty() {
                t.val.push(NIL);
                t.rlen.push(-1);
            } else if rest[0] == b'[' {
                let body = rest.strip_prefix(b"[").and_then(|r| r.strip_suffix(b"]"))
                    .ok_or_else(bad)?;
                let start = t.reads.len();
                if !body.is_empty() {
                    for part in body.split(|&c| c == b',') {
                        t.reads.push(num(part)?);
                    }
                }
                t.val.push(start as i64);
                t.rlen.push((t.reads.len() - start) as i32);
            } else {
                t.val.push(num(rest)?);
                t.rlen.push(-2);
            }
        }
        _ => return Err(bad()),
    }
    Ok(())
}

/// Check a History's ``txn`` rows given as Arrow buffers (bytes): int64 ``index``,
/// ``process``, ``outcome`` (1 ok, 2 fail, 3 info), ``invoke``, ``complete`` (-1: never
/// completed); the ``keys`` and ``values`` list-of-string columns each as list offsets
/// (int32), string offsets (int32) and UTF-8 data. The micro-ops are decoded here, so
/// no Python object is made per op.
#[pyfunction]
#[pyo3(signature = (index, process, outcome, invoke, complete, key_lists, key_offsets,
                    key_data, value_lists, value_offsets, value_data, model, order_kind, wfr,
                    tables, deadline_s=None, max_steps=200_000_000, keep=8))]
#[allow(clippy::too_many_arguments)]
pub fn txn_check2_rows(py: Python<'_>, index: &[u8], process: &[u8], outcome: &[u8],
                       invoke: &[u8], complete: &[u8], key_lists: &[u8], key_offsets: &[u8],
                       key_data: &[u8], value_lists: &[u8], value_offsets: &[u8],
                       value_data: &[u8], model: &str, order_kind: u8, wfr: bool,
                       tables: TablesIn, deadline_s: Option<f64>, max_steps: i64, keep: usize)
                       -> PyResult<Out> {
    // the buffers are borrowed from the Python bytes (no copy of the string data)
    let v = [i64s("index", index)?, i64s("process", process)?, i64s("outcome", outcome)?,
             i64s("invoke", invoke)?, i64s("complete", complete)?];
    let (klo, kso, kdata) = (i32s("keys", key_lists)?, i32s("keys", key_offsets)?, key_data);
    let (vlo, vso, vdata) = (i32s("values", value_lists)?, i32s("values", value_offsets)?,
                             value_data);
    let n = v[0].len();
    if klo.len() != n + 1 || vlo.len() != n + 1 {
        return Err(PyValueError::new_err("txn_check2_rows: list offsets of the wrong length"));
    }
    let built = py.detach(|| -> Result<Txns, (i64, String)> {
        let mut t = Txns::default();
        let mut ids: std::collections::HashMap<&[u8], u32, txn::FxBuild> = Default::default();
        for r in 0..n {
            let (k0, k1) = (klo[r] as usize, klo[r + 1] as usize);
            let (v0, v1) = (vlo[r] as usize, vlo[r + 1] as usize);
            if k1 - k0 != v1 - v0 {
                return Err((v[0][r], format!("a transaction row has {} keys but {} values",
                                             k1 - k0, v1 - v0)));
            }
            t.index.push(v[0][r]);
            t.process.push(v[1][r]);
            t.outcome.push(v[2][r] as u8);
            t.invoke.push(v[3][r]);
            t.complete.push(v[4][r]);
            t.mop_start.push(t.f.len() as u32);
            t.mop_len.push((k1 - k0) as u32);
            for j in 0..(k1 - k0) {
                let kb = &kdata[kso[k0 + j] as usize..kso[k0 + j + 1] as usize];
                let next = ids.len() as u32;
                let id = *ids.entry(kb).or_insert_with(|| {
                    t.keys.push(String::from_utf8_lossy(kb).into_owned());
                    next
                });
                let text = &vdata[vso[v0 + j] as usize..vso[v0 + j + 1] as usize];
                push_encoded(&mut t, id, text).map_err(|e| (v[0][r], e))?;
            }
        }
        Ok(t)
    });
    let t = built.map_err(|(i, m)| PyValueError::new_err(format!("txn-input:{i}:{m}")))?;
    run(py, t, model, order_kind, wfr, tables, deadline_s, max_steps, keep, (0, 0))
}
