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

/// Ids in first-seen order (`rows`: how many values will be asked, to size the maps)
/// under Python's equality (as a dict's keys: equal hashes, then
/// the same object or ``==``), kept on the Rust side: a value's Python hash (cached by
/// str) picks a chain of the distinct values with that hash. An identity map in front
/// answers the repeats of one object without hashing.
struct Interner<'py> {
    distinct: Vec<Bound<'py, PyAny>>,
    by_hash: HashMap<isize, Vec<u32>, BuildHasherDefault<PtrHasher>>,
    by_ptr: HashMap<usize, i64, BuildHasherDefault<PtrHasher>>,
}

impl<'py> Interner<'py> {
    fn new(rows: usize) -> Self {
        let cap = rows.min(1 << 16);
        Interner {
            distinct: Vec::new(),
            by_hash: HashMap::with_capacity_and_hasher(cap, Default::default()),
            by_ptr: HashMap::with_capacity_and_hasher(cap, Default::default()),
        }
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
/// Python objects, and a cold History spends most of its encoding waiting for them.
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

/// The first item of the tuple at each of `rows` of `items`, as (borrowed pointer, null
/// for an empty tuple) with the tuple's length; `missing` rows past the list's end (an
/// older History's shorter `expects`) count as empty. Raises TypeError for an item that
/// is not a tuple.
fn firsts(items: &Bound<'_, PyList>, rows: &[usize]) -> PyResult<Vec<(*mut ffi::PyObject, isize)>> {
    let list = items.as_ptr();
    let n = items.len();
    // SAFETY: borrowed references into a list the caller holds for the whole call (no
    // Python code runs meanwhile, so nothing can remove them); indexes are in range
    let tuples: Vec<*mut ffi::PyObject> = rows
        .iter()
        .map(|&r| if r < n { unsafe { ffi::PyList_GetItem(list, r as ffi::Py_ssize_t) } }
                  else { std::ptr::null_mut() })
        .collect();
    let mut out = Vec::with_capacity(rows.len());
    for (p, &t) in tuples.iter().enumerate() {
        if let Some(&ahead) = tuples.get(p + AHEAD) {
            prefetch(ahead);
        }
        if t.is_null() {
            out.push((std::ptr::null_mut(), 0));
            continue;
        }
        // SAFETY: t is a live object (see above); the tuple calls only read it
        unsafe {
            if ffi::PyTuple_Check(t) == 0 {
                return Err(PyTypeError::new_err(format!("item {} is not a tuple", rows[p])));
            }
            let len = ffi::PyTuple_Size(t);
            out.push((if len > 0 { ffi::PyTuple_GetItem(t, 0) } else { std::ptr::null_mut() }, len));
        }
    }
    Ok(out)
}

fn to_bytes<T: Copy, const N: usize>(py: Python<'_>, v: &[T], f: fn(T) -> [u8; N]) -> Py<PyBytes> {
    let bytes: Vec<u8> = v.iter().flat_map(|&x| f(x)).collect();
    PyBytes::new(py, &bytes).unbind()
}

fn i64s(b: &[u8]) -> Vec<i64> {
    b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect()
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
    let (inv_all, comp_all) = (i64s(invoke), i64s(complete));
    let rows: Vec<usize> = (0..n)
        .filter(|&r| {
            let p = i32::from_ne_bytes(process[4 * r..4 * r + 4].try_into().unwrap());
            (f[r] as i8) >= 0 && f[r] <= 2 && p != nemesis
        })
        .collect();
    let m = rows.len();
    let none = py.None().into_bound(py);
    let key_items = firsts(keys, &rows)?;
    let mut keyer = Interner::new(m);
    let mut key = Vec::with_capacity(m);
    let mut bad = -1i64;
    for (p, &(item, len)) in key_items.iter().enumerate() {
        if len != 1 {
            bad = rows[p] as i64;
            break;
        }
        if let Some(&(ahead, _)) = key_items.get(p + AHEAD) {
            prefetch(ahead);
        }
        key.push(keyer.id_ptr(py, item, &none)?);
    }
    let key_list = PyList::new(py, &keyer.distinct)?.unbind();
    let empty = || PyBytes::new(py, b"").unbind();
    if bad >= 0 {
        return Ok((key_list, bad, empty(), empty(), empty(), empty(), empty(), empty(),
                   empty(), empty(), 0));
    }
    let value_items = firsts(values, &rows)?;
    let cas: Vec<usize> = (0..m).filter(|&p| f[rows[p]] == 2).collect();
    let cas_rows: Vec<usize> = cas.iter().map(|&p| rows[p]).collect();
    let expect_items = firsts(expects, &cas_rows)?;
    let mut valuer = Interner::new(m);
    valuer.id(&none)?; // nil is 0
    let mut a = Vec::with_capacity(m);
    let mut b = vec![0i64; m];
    let mut next_cas = 0;
    for (p, &(item, _)) in value_items.iter().enumerate() {
        if let Some(&(ahead, _)) = value_items.get(p + AHEAD) {
            prefetch(ahead);
        }
        if cas.get(next_cas) == Some(&p) {
            let (e, _) = expect_items[next_cas];
            next_cas += 1;
            if e.is_null() {
                valuer.id(unknown)?; // interned as encode_columns does, then "any"
                a.push(-1);
            } else {
                a.push(valuer.id_ptr(py, e, &none)?);
            }
        } else {
            a.push(valuer.id_ptr(py, item, &none)?);
        }
    }
    for &p in &cas {
        b[p] = valuer.id_ptr(py, value_items[p].0, &none)?;
    }
    let kind: Vec<i64> = rows.iter().map(|&r| f[r] as i64).collect();
    let outcome: Vec<i64> = rows
        .iter()
        .map(|&r| match type_[r] {
            1 => 0,
            2 => 2,
            _ => 1,
        })
        .collect();
    let inv: Vec<i64> = rows.iter().map(|&r| inv_all[r]).collect();
    let comp: Vec<i64> = rows.iter().map(|&r| comp_all[r]).collect();
    let index: Vec<i64> = rows.iter().map(|&r| r as i64).collect();
    let t0 = inv.iter().copied().min().unwrap_or(0);
    let le = i64::to_ne_bytes;
    Ok((key_list, -1, to_bytes(py, &key, le), to_bytes(py, &kind, le), to_bytes(py, &a, le),
        to_bytes(py, &b, le), to_bytes(py, &outcome, le), to_bytes(py, &inv, le),
        to_bytes(py, &comp, le), to_bytes(py, &index, le), t0))
}
