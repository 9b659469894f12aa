//! replicalab_native: the native search core of replicalab's linearizability checker.
//!
//! Python splits a history into parts (one per key) and calls `search_part` on each with
//! plain integer columns; the search itself (`wgl::search`) runs without the GIL.

pub mod wgl;

use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use wgl::{Limits, Op, Verdict};

/// The default bound on memo entries (as ``linsearch.DEFAULT_MAX_CACHE``).
const DEFAULT_MAX_CACHE: usize = 2_000_000;

/// Return ``(verdict, order, stuck)`` for one register part: a drop-in for
/// ``replicalab.checkers.linsearch.search_part``, same arguments and same meaning.
///
/// ``kinds[i]`` is 0 (read), 1 (write) or 2 (cas); ``a[i]`` the value read or written, or
/// the value a cas expected (-1: any); ``b[i]`` the value a cas wrote; ``events`` lists
/// ``2 i`` (invoke of op ``i``) and ``2 i + 1`` (its completion; none for an op that may
/// take effect at any time after its invoke, or never) in time order; ``init`` the initial
/// state; ``deadline_s`` a ``time.monotonic()`` value in seconds after which the search
/// gives up (None: no limit); ``max_cache`` the most memo entries kept at once. The
/// verdict is 1 (linearizable), 0 (not) or -1 (deadline reached); ``order`` the op ids of
/// a full linearization (1) or of the longest linearizable prefix found; ``stuck`` the op
/// whose completion that prefix could not get past (-1 if none). The search runs
/// without the GIL.
#[pyfunction]
#[pyo3(signature = (kinds, a, b, events, init=0, deadline_s=None, max_cache=DEFAULT_MAX_CACHE))]
#[allow(clippy::too_many_arguments)]
fn search_part(
    py: Python<'_>,
    kinds: Vec<u8>,
    a: Vec<i64>,
    b: Vec<i64>,
    events: Vec<u32>,
    init: i64,
    deadline_s: Option<f64>,
    max_cache: usize,
) -> PyResult<(i32, Vec<u32>, i64)> {
    let (out, _) = run(py, kinds, a, b, events, init, deadline_s, max_cache)?;
    Ok(out)
}

/// As ``search_part``, and how many (set, state) configurations the search memoised
/// (``(verdict, order, stuck, states)``): the benchmark reports it.
#[pyfunction]
#[pyo3(signature = (kinds, a, b, events, init=0, deadline_s=None, max_cache=DEFAULT_MAX_CACHE))]
#[allow(clippy::too_many_arguments)]
fn search_part_stats(
    py: Python<'_>,
    kinds: Vec<u8>,
    a: Vec<i64>,
    b: Vec<i64>,
    events: Vec<u32>,
    init: i64,
    deadline_s: Option<f64>,
    max_cache: usize,
) -> PyResult<(i32, Vec<u32>, i64, u64)> {
    let ((v, order, stuck), states) = run(py, kinds, a, b, events, init, deadline_s, max_cache)?;
    Ok((v, order, stuck, states))
}

/// (verdict, order, stuck) as ``search_part`` returns them.
type Found = (i32, Vec<u32>, i64);

#[allow(clippy::too_many_arguments)]
fn run(
    py: Python<'_>,
    kinds: Vec<u8>,
    a: Vec<i64>,
    b: Vec<i64>,
    events: Vec<u32>,
    init: i64,
    deadline_s: Option<f64>,
    max_cache: usize,
) -> PyResult<(Found, u64)> {
    let n = kinds.len();
    if a.len() != n || b.len() != n {
        return Err(PyValueError::new_err(format!(
            "search_part: kinds, a and b have {n}, {} and {} entries; give one per op",
            a.len(), b.len())));
    }
    if n >= (u32::MAX / 2) as usize {
        return Err(PyValueError::new_err(format!("search_part: {n} ops is too many")));
    }
    if let Some(i) = kinds.iter().position(|&k| k > wgl::CAS) {
        return Err(PyValueError::new_err(format!(
            "search_part: op {i} has kind {}; give 0 (read), 1 (write) or 2 (cas)", kinds[i])));
    }
    for i in 0..n {
        let bad_a = a[i] < 0 && !(kinds[i] == wgl::CAS && a[i] == wgl::ANY);
        if bad_a || (kinds[i] == wgl::CAS && b[i] < 0) {
            return Err(PyValueError::new_err(format!(
                "search_part: op {i} has a={} b={}; values are ints >= 0 (a cas may expect -1: any)",
                a[i], b[i])));
        }
    }
    if init < 0 {
        return Err(PyValueError::new_err(format!("search_part: init {init} must be >= 0")));
    }
    wgl::check_events(n, &events).map_err(PyValueError::new_err)?;
    let ops: Vec<Op> = (0..n).map(|i| Op { f: kinds[i], a: a[i], b: b[i] }).collect();
    let deadline = match deadline_s {
        None => None,
        Some(d) => {
            // deadline_s is on Python's monotonic clock: turn it into time left from now
            let now: f64 = py.import("time")?.getattr("monotonic")?.call0()?.extract()?;
            let left = d - now;
            Some(if left > 0.0 { Instant::now() + Duration::from_secs_f64(left.min(1e9)) }
                 else { Instant::now() })
        }
    };
    let limits = Limits { deadline, max_entries: max_cache.max(1) };
    let out = py.detach(|| wgl::search(&ops, &events, init, limits));
    let verdict = match out.verdict {
        Verdict::Linearizable => 1,
        Verdict::NotLinearizable => 0,
        Verdict::Timeout => -1,
    };
    let stuck = out.stuck.map_or(-1, i64::from);
    Ok(((verdict, out.order, stuck), out.states))
}

#[pymodule]
fn replicalab_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(search_part, m)?)?;
    m.add_function(wrap_pyfunction!(search_part_stats, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
