//! replicalab_native: the native search core of replicalab's linearizability checker.
//!
//! Two entries: `search_part` searches one part (one key) given as op columns and events
//! in time order (Python prepared it); `check_kv` takes a whole kv history as flat int64
//! columns and does the preparation, the per-key partition, the event ordering and the
//! search of every key (`kv::check_all`). Searches run without the GIL.
//! `encode_register_history` turns a replicalab History (its numeric columns and its
//! Python lists of keys and values) into those int64 columns (`intern`).

pub mod file_map;
pub mod generic;
pub mod intern;
pub mod jepsen_log;
pub mod simpledb;
pub mod simreads;
pub mod simrt;
pub mod kv;
pub mod linops;
pub mod signals;
pub mod txn;
pub mod txn_parse;
pub mod txn_py;
pub mod wgl;

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, Instant};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use wgl::{Limits, Op, Verdict};

/// The default bound on memo entries (as ``search.DEFAULT_MAX_CACHE``).
const DEFAULT_MAX_CACHE: usize = 2_000_000;

/// Return ``(verdict, order, stuck)`` for one register part: a drop-in for
/// ``replicalab.checkers.linearizability.search.search_part``, same arguments and same meaning.
///
/// ``kinds[i]`` is 0 (read), 1 (write) or 2 (cas); ``a[i]`` the value read or written, or
/// the value a cas expected (-1: any); ``b[i]`` the value a cas wrote; ``events`` lists
/// ``2 i`` (invoke of op ``i``) and ``2 i + 1`` (its completion; none for an op that may
/// take effect at any time after its invoke, or never) in time order; ``init`` the initial
/// state; ``deadline_s`` a ``time.monotonic()`` value in seconds after which the search
/// gives up (None: no limit); ``max_cache`` the most memo entries kept at once. The
/// verdict is 1 (linearizable), 0 (not) or -1 (deadline reached); ``order`` the op ids of
/// a full linearization (1) or of the longest linearizable prefix found; ``stuck`` the op
/// whose completion that prefix could not get past (-1 if none). ``optional[i]`` (None:
/// all False): op ``i`` took effect inside its interval or not at all. The search runs
/// without the GIL.
#[pyfunction]
#[pyo3(signature = (kinds, a, b, events, init=0, deadline_s=None, max_cache=DEFAULT_MAX_CACHE,
                    optional=None))]
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
    optional: Option<Vec<bool>>,
) -> PyResult<(i32, Vec<u32>, i64)> {
    let (out, _) = run(py, kinds, a, b, events, init, deadline_s, max_cache, optional)?;
    Ok(out)
}

/// As ``search_part``, and how many (set, state) configurations the search memoised
/// (``(verdict, order, stuck, states)``): the benchmark reports it.
#[pyfunction]
#[pyo3(signature = (kinds, a, b, events, init=0, deadline_s=None, max_cache=DEFAULT_MAX_CACHE,
                    optional=None))]
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
    optional: Option<Vec<bool>>,
) -> PyResult<(i32, Vec<u32>, i64, u64)> {
    let ((v, order, stuck), states) =
        run(py, kinds, a, b, events, init, deadline_s, max_cache, optional)?;
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
    optional: Option<Vec<bool>>,
) -> PyResult<(Found, u64)> {
    let n = kinds.len();
    let optional = optional.unwrap_or_else(|| vec![false; n]);
    if optional.len() != n {
        return Err(PyValueError::new_err(format!(
            "search_part: {n} ops but {} optional flags; give one per op", optional.len())));
    }
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
    let ops: Vec<Op> =
        (0..n).map(|i| Op { f: kinds[i], a: a[i], b: b[i], opt: optional[i] }).collect();
    let deadline = instant_of(py, deadline_s)?;
    let limits = Limits { deadline, max_entries: max_cache.max(1) };
    let out = py.detach(|| wgl::search(&ops, &events, init, limits));
    raise_if_interrupted(py)?;
    let verdict = match out.verdict {
        Verdict::Linearizable => 1,
        Verdict::NotLinearizable => 0,
        Verdict::Timeout => -1,
    };
    let stuck = out.stuck.map_or(-1, i64::from);
    Ok(((verdict, out.order, stuck), out.states))
}

/// The `Instant` of a ``time.monotonic()`` deadline in seconds (None: no deadline).
fn instant_of(py: Python<'_>, deadline_s: Option<f64>) -> PyResult<Option<Instant>> {
    let Some(d) = deadline_s else { return Ok(None) };
    // deadline_s is on Python's monotonic clock: turn it into time left from now
    let now: f64 = py.import("time")?.getattr("monotonic")?.call0()?.extract()?;
    let left = d - now;
    Ok(Some(if left > 0.0 { Instant::now() + Duration::from_secs_f64(left.min(1e9)) }
            else { Instant::now() }))
}

/// The int64 values (native byte order) in `b`: borrowed when aligned, else copied.
fn int64s<'a>(name: &str, b: &'a [u8]) -> PyResult<Cow<'a, [i64]>> {
    if !b.len().is_multiple_of(8) {
        return Err(PyValueError::new_err(format!(
            "check_kv: column {name} has {} bytes; give int64 values (8 bytes each)", b.len())));
    }
    // SAFETY: every bit pattern is a valid i64; align_to only splits off what is misaligned
    let (pre, mid, post) = unsafe { b.align_to::<i64>() };
    Ok(if pre.is_empty() && post.is_empty() {
        Cow::Borrowed(mid)
    } else {
        Cow::Owned(b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect())
    })
}

/// One part of ``check_kv``'s result: (key id, ops, verdict, order, stuck row, seconds).
type KvPart = (i64, u32, i32, Py<PyBytes>, i64, f64);

/// Return the verdict on every key of a whole kv history given as flat columns, one row
/// per op, each ``bytes`` of int64 in native byte order (``numpy.ndarray.tobytes()``):
/// ``key`` an id per key, ``kind`` 0 read / 1 write / 2 cas, ``a`` the value read or
/// written or a cas's expected value (-1: not recorded, legal in every state), ``b`` a
/// cas's new value, ``outcome`` 0 ok / 1 info / 2 fail, ``invoke_ns`` and ``complete_ns``
/// in ns, ``index`` the tie-break among ops invoked at the same instant. Values are ints
/// >= 0 with 0 the register's initial nil.
///
/// Jepsen's preparation is applied per key as ``CasRegister.encode`` does (fail ops and
/// reads not ok dropped, info writes whose value nothing observed dropped), then each
/// key's events are ordered and searched, smallest key first: with ``deadline_s`` (a
/// ``time.monotonic()`` value in s) each key first gets a fair share of the time left,
/// then undecided keys share the rest; ``cache_bytes`` bounds each key's memo (as
/// ``linearizability.check``); ``fail_fast`` stops at the first key found not
/// linearizable. ``progress(done, total)`` is called as keys are decided.
///
/// Returns one tuple per key in first-seen order: ``(key id, ops, verdict, order, stuck,
/// seconds)`` where verdict is 1 linearizable, 0 not, -1 unknown (deadline), 2 skipped
/// (left unchecked by ``fail_fast``); ``order`` the rows (``bytes`` of uint32, native
/// order) of a linearization or of the longest linearizable prefix found; ``stuck`` the
/// row whose completion that prefix could not get past (-1: none); ``seconds`` the key's
/// search time in s. The GIL is released while searching.
#[pyfunction]
#[pyo3(signature = (key, kind, a, b, outcome, invoke_ns, complete_ns, index, deadline_s=None,
                    cache_bytes=256 << 20, fail_fast=false, progress=None))]
#[allow(clippy::too_many_arguments)]
fn check_kv(
    py: Python<'_>,
    key: &[u8],
    kind: &[u8],
    a: &[u8],
    b: &[u8],
    outcome: &[u8],
    invoke_ns: &[u8],
    complete_ns: &[u8],
    index: &[u8],
    deadline_s: Option<f64>,
    cache_bytes: usize,
    fail_fast: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<KvPart>> {
    let cols = [("key", key), ("kind", kind), ("a", a), ("b", b), ("outcome", outcome),
                ("invoke_ns", invoke_ns), ("complete_ns", complete_ns), ("index", index)];
    let v = cols.iter().map(|&(n, c)| int64s(n, c)).collect::<PyResult<Vec<_>>>()?;
    let c = kv::Columns { key: &v[0], kind: &v[1], a: &v[2], b: &v[3], outcome: &v[4],
                          invoke: &v[5], complete: &v[6], index: &v[7] };
    c.rows().map_err(|e| PyValueError::new_err(format!("check_kv: {e}")))?;
    let deadline = instant_of(py, deadline_s)?;
    let mut err: Option<PyErr> = None;
    let parts = py.detach(|| {
        let mut tick = |done: usize, total: usize| {
            if let (Some(cb), None) = (&progress, &err) {
                if let Err(e) = Python::attach(|py| cb.call1(py, (done, total))) {
                    err = Some(e);
                }
            }
        };
        kv::check_all(&c, deadline, cache_bytes, fail_fast, &mut tick)
    });
    raise_if_interrupted(py)?;
    if let Some(e) = err {
        return Err(e);
    }
    Ok(parts
        .into_iter()
        .map(|p| {
            let bytes: Vec<u8> = p.order.iter().flat_map(|x| x.to_ne_bytes()).collect();
            (p.key, p.ops, p.verdict, PyBytes::new(py, &bytes).unbind(), p.stuck, p.seconds)
        })
        .collect())
}

/// The machines ``check_machine`` has (``generic``), as the Python models name them.
const MACHINES: [&str; 5] = ["append", "set", "fifo-queue", "counter", "mutex"];

/// The machine named `name`, built from `table` (what it needs besides the columns).
fn machine_of(name: &str, table: Option<&Bound<'_, PyAny>>)
              -> PyResult<Box<dyn generic::Machine + Send>> {
    Ok(match name {
        "append" => {
            let mut texts = Vec::new();
            if let Some(t) = table {
                for item in t.try_iter()? {
                    let item = item?;
                    texts.push(if item.is_none() {
                        generic::Text::Nil
                    } else if let Ok(s) = item.extract::<String>() {
                        generic::Text::Str(s)
                    } else {
                        generic::Text::Opaque
                    });
                }
            }
            if texts.is_empty() {
                texts.push(generic::Text::Nil);
            }
            Box::new(generic::Append::new(texts))
        }
        "set" => {
            let sets: Vec<Vec<i64>> = match table {
                Some(t) => t.extract()?,
                None => Vec::new(),
            };
            Box::new(generic::Set::new(sets))
        }
        "fifo-queue" => Box::new(generic::Fifo::new()),
        "counter" => Box::new(generic::Counter),
        "mutex" => Box::new(generic::Mutex),
        _ => return Err(PyValueError::new_err(format!(
            "check_machine: no machine {name:?}; give one of {}", MACHINES.join(", ")))),
    })
}

/// As ``check_kv`` for any machine of ``MACHINES``: ``kind``, ``a`` and ``b`` are the
/// machine's (``Model.native_columns``), ``table`` what it needs besides (the strings
/// behind value ids for ``append``, the sets read for ``set``). Outcome 3 (optional):
/// took effect inside its interval or not at all. Same result tuples as ``check_kv``.
#[pyfunction]
#[pyo3(signature = (machine, key, kind, a, b, outcome, invoke_ns, complete_ns, index,
                    table=None, deadline_s=None, cache_bytes=256 << 20, fail_fast=false,
                    progress=None))]
#[allow(clippy::too_many_arguments)]
fn check_machine(
    py: Python<'_>,
    machine: &str,
    key: &[u8],
    kind: &[u8],
    a: &[u8],
    b: &[u8],
    outcome: &[u8],
    invoke_ns: &[u8],
    complete_ns: &[u8],
    index: &[u8],
    table: Option<Bound<'_, PyAny>>,
    deadline_s: Option<f64>,
    cache_bytes: usize,
    fail_fast: bool,
    progress: Option<Py<PyAny>>,
) -> PyResult<Vec<KvPart>> {
    let proto = machine_of(machine, table.as_ref())?;
    let kinds = proto.kinds() as i64;
    drop(proto);
    let cols = [("key", key), ("kind", kind), ("a", a), ("b", b), ("outcome", outcome),
                ("invoke_ns", invoke_ns), ("complete_ns", complete_ns), ("index", index)];
    let v = cols.iter().map(|&(n, c)| int64s(n, c)).collect::<PyResult<Vec<_>>>()?;
    let c = kv::Columns { key: &v[0], kind: &v[1], a: &v[2], b: &v[3], outcome: &v[4],
                          invoke: &v[5], complete: &v[6], index: &v[7] };
    c.lengths(kinds).map_err(|e| PyValueError::new_err(format!("check_machine: {e}")))?;
    let deadline = instant_of(py, deadline_s)?;
    // one machine per part (its interned states belong to that part), built with the GIL
    let (keys, _, _) = kv::partition(c.key);
    let mut machines: Vec<Box<dyn generic::Machine + Send>> = Vec::with_capacity(keys.len());
    for _ in 0..keys.len() {
        machines.push(machine_of(machine, table.as_ref())?);
    }
    let slot: HashMap<i64, usize> = keys.iter().enumerate().map(|(j, &k)| (k, j)).collect();
    let mut err: Option<PyErr> = None;
    let parts = py.detach(|| {
        let mut tick = |done: usize, total: usize| {
            if let (Some(cb), None) = (&progress, &err) {
                if let Err(e) = Python::attach(|py| cb.call1(py, (done, total))) {
                    err = Some(e);
                }
            }
        };
        kv::schedule(&c, deadline, fail_fast, &mut tick, &mut |k, part, dl| {
            let m = &mut machines[slot[&k]];
            generic::check_part(&c, k, part, m.as_mut(), dl, cache_bytes)
        })
    });
    raise_if_interrupted(py)?;
    if let Some(e) = err {
        return Err(e);
    }
    Ok(parts
        .into_iter()
        .map(|p| {
            let bytes: Vec<u8> = p.order.iter().flat_map(|x| x.to_ne_bytes()).collect();
            (p.key, p.ops, p.verdict, PyBytes::new(py, &bytes).unbind(), p.stuck, p.seconds)
        })
        .collect())
}

/// Return the register parts of ``check_kv``'s columns refuted without a search
/// (``kv::refute``, as ``CasRegister.refute``): ``[(key id, rows as uint32 bytes)]`` in
/// first-seen key order, parts with none left out.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn refute_register(
    py: Python<'_>,
    key: &[u8],
    kind: &[u8],
    a: &[u8],
    b: &[u8],
    outcome: &[u8],
    invoke_ns: &[u8],
    complete_ns: &[u8],
    index: &[u8],
) -> PyResult<Vec<(i64, Py<PyBytes>)>> {
    let cols = [("key", key), ("kind", kind), ("a", a), ("b", b), ("outcome", outcome),
                ("invoke_ns", invoke_ns), ("complete_ns", complete_ns), ("index", index)];
    let v = cols.iter().map(|&(n, c)| int64s(n, c)).collect::<PyResult<Vec<_>>>()?;
    let c = kv::Columns { key: &v[0], kind: &v[1], a: &v[2], b: &v[3], outcome: &v[4],
                          invoke: &v[5], complete: &v[6], index: &v[7] };
    c.rows().map_err(|e| PyValueError::new_err(format!("refute_register: {e}")))?;
    let (keys, start, rows) = kv::partition(c.key);
    let found: Vec<(i64, Vec<u32>)> = py.detach(|| {
        (0..keys.len())
            .filter_map(|j| {
                kv::refute(&c, &rows[start[j] as usize..start[j + 1] as usize])
                    .map(|r| (keys[j], r))
            })
            .collect()
    });
    Ok(found
        .into_iter()
        .map(|(k, r)| {
            let bytes: Vec<u8> = r.iter().flat_map(|x| x.to_ne_bytes()).collect();
            (k, PyBytes::new(py, &bytes).unbind())
        })
        .collect())
}

/// Return whether the ``constrained`` rows (``bytes``, one 0/1 per row) of a one-part
/// register history given as ``check_kv``'s columns can be linearized with every other
/// op relaxed, on the window of the constrained ops from every start the register could
/// have (``kv::check_window``): 1 yes, 0 no, -1 the deadline came first. What shrinking
/// a counterexample asks, one small search per start.
#[pyfunction]
#[pyo3(signature = (key, kind, a, b, outcome, invoke_ns, complete_ns, index, constrained,
                    deadline_s=None, cache_bytes=256 << 20))]
#[allow(clippy::too_many_arguments)]
fn check_window(
    py: Python<'_>,
    key: &[u8],
    kind: &[u8],
    a: &[u8],
    b: &[u8],
    outcome: &[u8],
    invoke_ns: &[u8],
    complete_ns: &[u8],
    index: &[u8],
    constrained: &[u8],
    deadline_s: Option<f64>,
    cache_bytes: usize,
) -> PyResult<i32> {
    let cols = [("key", key), ("kind", kind), ("a", a), ("b", b), ("outcome", outcome),
                ("invoke_ns", invoke_ns), ("complete_ns", complete_ns), ("index", index)];
    let v = cols.iter().map(|&(n, c)| int64s(n, c)).collect::<PyResult<Vec<_>>>()?;
    let c = kv::Columns { key: &v[0], kind: &v[1], a: &v[2], b: &v[3], outcome: &v[4],
                          invoke: &v[5], complete: &v[6], index: &v[7] };
    let n = c.rows().map_err(|e| PyValueError::new_err(format!("check_window: {e}")))?;
    if constrained.len() != n {
        return Err(PyValueError::new_err(format!(
            "check_window: {} constrained flags for {n} rows", constrained.len())));
    }
    let deadline = instant_of(py, deadline_s)?;
    let values = c.a.iter().chain(c.b.iter()).copied().max().unwrap_or(0).max(0) as usize + 1;
    let v = py.detach(|| {
        let mut scratch = kv::Scratch::new(values);
        kv::check_window(&c, constrained, &mut scratch, deadline, cache_bytes)
    });
    raise_if_interrupted(py)?;
    Ok(v)
}

/// Look at pending signals with the GIL held (installed for `signals::interrupted`): a
/// handler that raised (Ctrl-C) leaves its exception set for `raise_if_interrupted`.
fn poll_signals() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            e.restore(py);
            true
        }
    })
}

/// Raise what a signal handler raised during the search that just returned, if any.
fn raise_if_interrupted(py: Python<'_>) -> PyResult<()> {
    if signals::take() {
        return Err(PyErr::take(py).unwrap_or_else(|| {
            pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted")
        }));
    }
    Ok(())
}

#[pymodule]
fn replicalab_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    signals::install(poll_signals);
    m.add_function(wrap_pyfunction!(check_window, m)?)?;
    m.add_function(wrap_pyfunction!(refute_register, m)?)?;
    m.add_function(wrap_pyfunction!(check_machine, m)?)?;
    m.add("MACHINES", MACHINES.to_vec())?;
    m.add_function(wrap_pyfunction!(search_part, m)?)?;
    m.add_function(wrap_pyfunction!(search_part_stats, m)?)?;
    m.add_function(wrap_pyfunction!(check_kv, m)?)?;
    m.add_function(wrap_pyfunction!(linops::register_linops, m)?)?;
    m.add_function(wrap_pyfunction!(jepsen_log::read_jepsen_log, m)?)?;
    m.add_function(wrap_pyfunction!(jepsen_log::read_jepsen_log_register, m)?)?;
    txn_py::register(m)?;
    m.add_function(wrap_pyfunction!(intern::encode_register_history, m)?)?;
    m.add_class::<simrt::Stream>()?;
    m.add_class::<simrt::SimNode>()?;
    m.add_class::<simpledb::SimpleDbCore>()?;
    m.add_class::<simreads::ReadCore>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
