//! Interning of a History's Python values into the int64 ids `check_kv` takes.
//!
//! A replicalab History keeps keys, values and a cas's expected values as Python lists of
//! tuples (one tuple per row). Turning them into ids is the one part of a native check
//! that walks Python objects, so it is done here (`encode_register_history`, the whole
//! History to `check_kv`'s columns) in one pass per column: ids are handed out in
//! first-seen order under Python's equality (so any hashable value works and the ids are
//! exactly those `dict.fromkeys` gives), with a map on object identity in front: a
//! History holds the same string object in many rows (a value written and the reads
//! that saw it), and an identity hit costs no Python hashing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

/// A hasher for pointers (already spread out; one multiply mixes the low bits).
#[derive(Default)]
struct PtrHasher(u64);

impl Hasher for PtrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        // splitmix64's finaliser: every bit of the address reaches the bucket and the tag
        let mut z = n as u64;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }
}

/// Ids in first-seen order under Python's equality (as a dict's keys: equal hashes, then
/// the same object or ``==``), kept on the Rust side: a value's Python hash (cached by
/// str) picks a chain of the distinct values with that hash. An identity map in front
/// answers the repeats of one object without hashing.
struct Interner<'py> {
    distinct: Vec<Bound<'py, PyAny>>,
    by_hash: HashMap<isize, Vec<u32>, BuildHasherDefault<PtrHasher>>,
    by_ptr: HashMap<usize, i64, BuildHasherDefault<PtrHasher>>,
}

impl<'py> Interner<'py> {
    fn new() -> Self {
        // maps grow with the distinct values (a kv history has few keys)
        Interner { distinct: Vec::new(), by_hash: HashMap::default(), by_ptr: HashMap::default() }
    }

    /// The id of the object at `p` (a live borrowed pointer; null: `empty`).
    fn id_ptr(&mut self, py: Python<'py>, p: *mut ffi::PyObject, empty: &Bound<'py, PyAny>)
              -> PyResult<i64> {
        if p.is_null() {
            return self.id(empty);
        }
        if let Some(&id) = self.by_ptr.get(&(p as usize)) {
            return Ok(id);
        }
        // SAFETY: p is a live object held by the History's lists for the whole call
        let v = unsafe { Bound::from_borrowed_ptr(py, p) };
        self.id(&v)
    }

    fn id(&mut self, v: &Bound<'py, PyAny>) -> PyResult<i64> {
        let p = v.as_ptr() as usize;
        if let Some(&id) = self.by_ptr.get(&p) {
            return Ok(id);
        }
        let h = v.hash()?;
        let chain = self.by_hash.entry(h).or_default();
        let mut found = None;
        for &i in chain.iter() {
            let d = &self.distinct[i as usize];
            if d.as_ptr() == v.as_ptr() || d.eq(v)? {
                found = Some(i as i64);
                break;
            }
        }
        let id = match found {
            Some(id) => id,
            None => {
                let id = self.distinct.len();
                chain.push(id as u32);
                self.distinct.push(v.clone());
                id as i64
            }
        };
        // the object stays alive (the list holds it) for the whole call: its address
        // cannot be reused by another value meanwhile
        self.by_ptr.insert(p, id);
        Ok(id)
    }
}

/// How far ahead the loops over a History's objects prefetch (rows).
const AHEAD: usize = 16;

/// Ask for the cache line at `p` ahead of its use: the History's tuples are scattered
/// Python objects, and a cold History spends much of its encoding waiting for them.
#[inline(always)]
fn prefetch(p: *const ffi::PyObject) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; it never faults, whatever the address
    unsafe {
        std::arch::x86_64::_mm_prefetch(p as *const i8, std::arch::x86_64::_MM_HINT_T0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The first item of the tuple at row `r` of `list` (`n` items; a row past the end, an
/// older History's shorter `expects`, counts as an empty tuple) as (borrowed pointer,
/// null for an empty tuple; the tuple's length). Raises TypeError for an item that is
/// not a tuple.
#[inline(always)]
fn first_at(list: *mut ffi::PyObject, n: usize, r: usize)
            -> PyResult<(*mut ffi::PyObject, isize)> {
    if r >= n {
        return Ok((std::ptr::null_mut(), 0));
    }
    // SAFETY: a borrowed reference into a list the caller holds for the whole call (no
    // Python code that could change it runs meanwhile), at an index in range; the tuple
    // calls only read the object
    unsafe {
        let t = ffi::PyList_GetItem(list, r as ffi::Py_ssize_t);
        if ffi::PyTuple_Check(t) == 0 {
            return Err(PyTypeError::new_err(format!("item {r} is not a tuple")));
        }
        let len = ffi::PyTuple_Size(t);
        Ok((if len > 0 { ffi::PyTuple_GetItem(t, 0) } else { std::ptr::null_mut() }, len))
    }
}

/// Prefetch the tuple at row `r` of `list` (`n` items), a few rows before it is read.
#[inline(always)]
fn prefetch_row(list: *mut ffi::PyObject, n: usize, r: Option<&u32>) {
    if let Some(&r) = r {
        if (r as usize) < n {
            // SAFETY: an index in range of a live list; the pointer is only prefetched
            prefetch(unsafe { ffi::PyList_GetItem(list, r as ffi::Py_ssize_t) });
        }
    }
}

/// A ``bytes`` of `m` int64 (native order), `fill(p)` the value at position `p`, written
/// straight into the new object: no intermediate buffers (each fresh megabyte a call
/// allocates costs page faults).
fn int64_bytes(py: Python<'_>, m: usize, mut fill: impl FnMut(usize) -> PyResult<i64>)
               -> PyResult<Py<PyBytes>> {
    Ok(PyBytes::new_with(py, 8 * m, |buf| {
        for (p, c) in buf.chunks_exact_mut(8).enumerate() {
            c.copy_from_slice(&fill(p)?.to_ne_bytes());
        }
        Ok(())
    })?
    .unbind())
}

/// The columns of `encode_register_history`: (keys in first-seen order, the first row on
/// several keys or -1, then key, kind, a, b, outcome, invoke_ns, complete_ns, index as
/// `bytes` of int64, then the earliest invoke).
type Encoded = (Py<PyList>, i64, Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Py<PyBytes>,
                Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, Py<PyBytes>, i64);

/// Return a replicalab History as ``check_kv``'s columns, exactly as
/// ``linearizability.encode_columns(ops_from_history(h))`` makes them, in one pass per
/// column: ``(keys, bad, key, kind, a, b, outcome, invoke_ns, complete_ns, index, t0)``.
///
/// The History's numeric columns come as ``bytes`` in native order (``array.tobytes()``):
/// ``process`` int32, ``type_`` int8 (0 invoke, 1 ok, 2 fail, 3 info), ``f`` int8 (0
/// read, 1 write, 2 cas, other codes left out), ``invoke`` and ``complete`` int64 ns;
/// ``keys``, ``values`` and ``expects`` are its lists of tuples (``expects`` may be
/// shorter: a missing or empty one is an unrecorded expected value). Rows of process
/// ``nemesis`` and of other f codes are left out; ``index`` is the History row. Keys and
/// values get ids in first-seen order (Python equality; values: None is 0, then every
/// row's value read or written or a cas's expected value, ``unknown`` interned in place
/// of an unrecorded one whose ``a`` is -1, then the cas's new values); an empty value
/// tuple is None; outcome 0 ok, 1 info (also a never-completed invoke), 2 fail. ``bad``
/// is the first kept row whose keys tuple does not have one item (-1: none; then
/// nothing else is filled in); ``t0`` the earliest kept invoke (0 if none). Raises
/// TypeError for items that are not tuples, ValueError for columns of unequal length.
#[pyfunction]
#[pyo3(signature = (process, type_, f, invoke, complete, keys, values, expects, nemesis, unknown))]
#[allow(clippy::too_many_arguments)]
pub fn encode_register_history<'py>(
    py: Python<'py>,
    process: &[u8],
    type_: &[u8],
    f: &[u8],
    invoke: &[u8],
    complete: &[u8],
    keys: &Bound<'py, PyList>,
    values: &Bound<'py, PyList>,
    expects: &Bound<'py, PyList>,
    nemesis: i32,
    unknown: &Bound<'py, PyAny>,
) -> PyResult<Encoded> {
    let n = type_.len();
    if process.len() != 4 * n || f.len() != n || invoke.len() != 8 * n
        || complete.len() != 8 * n || keys.len() != n || values.len() != n {
        return Err(PyValueError::new_err(format!(
            "encode_register_history: columns of unequal length ({n} types)")));
    }
    let at = |col: &[u8], r: u32| {
        let r = 8 * r as usize;
        i64::from_ne_bytes(col[r..r + 8].try_into().unwrap())
    };
    let rows: Vec<u32> = (0..n)
        .filter(|&r| {
            let p = i32::from_ne_bytes(process[4 * r..4 * r + 4].try_into().unwrap());
            (f[r] as i8) >= 0 && f[r] <= 2 && p != nemesis
        })
        .map(|r| r as u32)
        .collect();
    let m = rows.len();
    let none = py.None().into_bound(py);
    let (klist, vlist, elist) = (keys.as_ptr(), values.as_ptr(), expects.as_ptr());
    let ne = expects.len();
    let mut keyer = Interner::new();
    let mut bad = -1i64;
    let key = int64_bytes(py, m, |p| {
        prefetch_row(klist, n, rows.get(p + AHEAD));
        let r = rows[p] as usize;
        let (item, len) = first_at(klist, n, r)?;
        if len != 1 {
            if bad < 0 {
                bad = r as i64;
            }
            return Ok(0);
        }
        keyer.id_ptr(py, item, &none)
    })?;
    let key_list = PyList::new(py, &keyer.distinct)?.unbind();
    let empty = || PyBytes::new(py, b"").unbind();
    if bad >= 0 {
        return Ok((key_list, bad, empty(), empty(), empty(), empty(), empty(), empty(),
                   empty(), empty(), 0));
    }
    let mut valuer = Interner::new();
    valuer.id(&none)?; // nil is 0
    let mut cas: Vec<u32> = Vec::new();
    let a = int64_bytes(py, m, |p| {
        let r = rows[p] as usize;
        if f[r] == 2 {
            cas.push(p as u32);
            let (e, _) = first_at(elist, ne, r)?;
            if e.is_null() {
                valuer.id(unknown)?; // interned as encode_columns does, then "any"
                return Ok(-1);
            }
            return valuer.id_ptr(py, e, &none);
        }
        prefetch_row(vlist, n, rows.get(p + AHEAD));
        let (item, _) = first_at(vlist, n, r)?;
        valuer.id_ptr(py, item, &none)
    })?;
    // the cas's new values, interned after every a as encode_columns does
    let mut next = cas.iter().peekable();
    let b = int64_bytes(py, m, |p| {
        if next.peek() != Some(&&(p as u32)) {
            return Ok(0);
        }
        next.next();
        let (item, _) = first_at(vlist, n, rows[p] as usize)?;
        valuer.id_ptr(py, item, &none)
    })?;
    let kind = int64_bytes(py, m, |p| Ok(f[rows[p] as usize] as i64))?;
    let outcome = int64_bytes(py, m, |p| {
        Ok(match type_[rows[p] as usize] {
            1 => 0,
            2 => 2,
            _ => 1,
        })
    })?;
    let mut t0 = i64::MAX;
    let inv = int64_bytes(py, m, |p| {
        let t = at(invoke, rows[p]);
        t0 = t0.min(t);
        Ok(t)
    })?;
    let comp = int64_bytes(py, m, |p| Ok(at(complete, rows[p])))?;
    let index = int64_bytes(py, m, |p| Ok(rows[p] as i64))?;
    Ok((key_list, -1, key, kind, a, b, outcome, inv, comp, index, if m > 0 { t0 } else { 0 }))
}
