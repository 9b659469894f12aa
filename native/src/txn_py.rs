//! Python entries of the transaction checker's native core: `txn_check_edn` (a history
//! file, parsed here) and `txn_check_cols` (transactions as int64 columns). Both return
//! `(n, anomalies, counts, unfinished, txn_info)`: at most `keep` anomalies per type
//! (shortest cycles first), each `(type, txns, cycle or None, key or None, detail JSON)`
//! with cycle steps `(src, dst, kind, key or None, a, b)`; `counts` per type; the
//! unfinished components `(variant, size, sample, might_hold)`; `txn_info` the
//! `(position, index, process)` of every transaction an anomaly names. An input error
//! raises ValueError `"txn-input:<index>:<message>"`.

use std::collections::BTreeMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::txn::{self, Budget, Txns, NIL};

type Step = (u32, u32, u8, Option<String>, Option<i64>, Option<i64>);
type RawAnomaly = (String, Vec<u32>, Option<Vec<Step>>, Option<String>, String);
type Out = (usize, Vec<RawAnomaly>, Vec<(String, usize)>, Vec<(String, u32, Vec<u32>, Vec<String>)>,
            Vec<(u32, i64, i64)>);

fn opt(v: i64) -> Option<i64> {
    if v == NIL { None } else { Some(v) }
}

fn run(py: Python<'_>, t: Txns, model: &str, deadline_s: Option<f64>, max_steps: i64,
       keep: usize) -> PyResult<Out> {
    let register = match model {
        "list-append" => false,
        "rw-register" => true,
        _ => return Err(PyValueError::new_err(format!("model {model:?}: use list-append or \
                                                       rw-register"))),
    };
    let deadline = crate::instant_of(py, deadline_s)?;
    let res = py.detach(|| {
        let mut budget = Budget { steps: max_steps, deadline };
        txn::check(&t, register, &mut budget)
    });
    let (an, edges, unfinished) = match res {
        Ok(x) => x,
        Err(e) => return Err(PyValueError::new_err(format!("txn-input:{}:{}", e.index, e.msg))),
    };
    let keyname = |k: u32| -> Option<String> {
        if k == u32::MAX { None } else { Some(t.keys[k as usize].clone()) }
    };
    let mut by_type: BTreeMap<String, Vec<&txn::Anomaly>> = BTreeMap::new();
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
                (edges.src[x], edges.dst[x], edges.kind[x], keyname(edges.key[x]),
                 opt(edges.a[x]), opt(edges.b[x]))
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
    let unf = unfinished.into_iter().map(|u| (u.variant, u.size, u.sample, u.might_hold)).collect();
    Ok((t.len(), out, counts, unf, info))
}

/// Check the Jepsen/Elle EDN history in file ``path`` under ``model``.
#[pyfunction]
#[pyo3(signature = (path, model, deadline_s=None, max_steps=200_000_000, keep=8))]
pub fn txn_check_edn(py: Python<'_>, path: &str, model: &str, deadline_s: Option<f64>,
                     max_steps: i64, keep: usize) -> PyResult<Out> {
    let bytes = std::fs::read(path)
        .map_err(|e| PyValueError::new_err(format!("txn-input:0:cannot read it ({e})")))?;
    let parsed = py.detach(|| crate::txn_parse::parse(&bytes));
    let t = parsed.map_err(|e| PyValueError::new_err(format!("txn-input:{}:{}", e.line, e.msg)))?;
    drop(bytes);
    run(py, t, model, deadline_s, max_steps, keep)
}

fn i64s(name: &str, b: &[u8]) -> PyResult<Vec<i64>> {
    if b.len() % 8 != 0 {
        return Err(PyValueError::new_err(format!("{name}: not int64 bytes")));
    }
    Ok(b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect())
}

/// Check transactions given as int64 columns (bytes): per transaction ``index``,
/// ``process``, ``outcome`` (1 ok, 2 fail, 3 info), ``invoke``, ``complete``,
/// ``mop_start``, ``mop_len``; per micro-op ``f`` (0 append, 1 r, 2 w), ``key`` (index
/// into ``keys``), ``val``, ``rlen``; ``reads`` the list reads' elements.
#[pyfunction]
#[pyo3(signature = (cols, keys, model, deadline_s=None, max_steps=200_000_000, keep=8))]
pub fn txn_check_cols(py: Python<'_>, cols: Vec<Vec<u8>>, keys: Vec<String>, model: &str,
                      deadline_s: Option<f64>, max_steps: i64, keep: usize) -> PyResult<Out> {
    let names = ["index", "process", "outcome", "invoke", "complete", "mop_start", "mop_len",
                 "f", "key", "val", "rlen", "reads"];
    if cols.len() != names.len() {
        return Err(PyValueError::new_err("txn_check_cols: 12 columns expected"));
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
    run(py, t, model, deadline_s, max_steps, keep)
}

/// Add the transaction checker's entries to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(txn_check_edn, m)?)?;
    m.add_function(wrap_pyfunction!(txn_check_cols, m)?)?;
    m.add("TXN_CHECK", true)?;
    Ok(())
}
