//! Interning of a History's Python values into the int64 ids `check_kv` takes.
//!
//! A replicalab History keeps keys, values and a cas's expected values as Python lists of
//! tuples (one tuple per row). Turning them into ids is the one part of a native check
//! that walks Python objects, so it is done here in one pass per column: ids are handed
//! out in first-seen order through a Python dict (Python's equality, so any hashable
//! value works and the ids are exactly those `dict.fromkeys` gives), with a map on object
//! identity in front of it: a History holds the same string object in many rows (a value
//! written and the reads that saw it), and an identity hit costs no Python hashing.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

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
        self.0 = ((n as u64) >> 4).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    }
}

/// Ids in first-seen order: `ids` (value -> id, shared between columns and updated in
/// place; a new value gets `len(ids)`), with an identity cache in front.
struct Interner<'a, 'py> {
    ids: &'a Bound<'py, PyDict>,
    by_ptr: HashMap<usize, i64, BuildHasherDefault<PtrHasher>>,
}

impl<'a, 'py> Interner<'a, 'py> {
    fn new(ids: &'a Bound<'py, PyDict>) -> Self {
        Interner { ids, by_ptr: HashMap::default() }
    }

    fn id(&mut self, v: &Bound<'py, PyAny>) -> PyResult<i64> {
        let p = v.as_ptr() as usize;
        if let Some(&id) = self.by_ptr.get(&p) {
            return Ok(id);
        }
        let id = match self.ids.get_item(v)? {
            Some(id) => id.extract::<i64>()?,
            None => {
                let id = self.ids.len() as i64;
                self.ids.set_item(v, id)?;
                id
            }
        };
        // the object stays alive (the list holds it) for the whole call: its address
        // cannot be reused by another value meanwhile
        self.by_ptr.insert(p, id);
        Ok(id)
    }
}

/// Positions to take from a list: `rows` (int64, native order) or every position.
fn positions(rows: Option<&[u8]>, n: usize) -> PyResult<Vec<usize>> {
    match rows {
        None => Ok((0..n).collect()),
        Some(b) => {
            if !b.len().is_multiple_of(8) {
                return Err(PyTypeError::new_err("rows: give int64 values (8 bytes each)"));
            }
            b.chunks_exact(8)
                .map(|c| {
                    let r = i64::from_ne_bytes(c.try_into().unwrap());
                    usize::try_from(r).ok().filter(|&r| r < n).ok_or_else(|| {
                        PyTypeError::new_err(format!("rows: {r} is not a position of the list"))
                    })
                })
                .collect()
        }
    }
}

fn tuple_at<'py>(items: &Bound<'py, PyList>, r: usize) -> PyResult<Bound<'py, PyTuple>> {
    let it = items.get_item(r)?;
    it.cast_into::<PyTuple>()
        .map_err(|_| PyTypeError::new_err(format!("item {r} is not a tuple")))
}

fn to_bytes(py: Python<'_>, v: &[i64]) -> Py<PyBytes> {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
    PyBytes::new(py, &bytes).unbind()
}

/// Return ``(ids, bad)`` for the first item of each tuple of ``items`` at ``rows`` (int64
/// positions, ``bytes`` in native order; None: every item): ``ids`` the ``bytes`` of one
/// int64 id per row, handed out in first-seen order through ``ids`` (a dict value -> id,
/// updated in place: a new value gets ``len(ids)``), an empty tuple counting as ``empty``;
/// ``bad`` the first output position whose tuple does not have exactly one item (-1:
/// none). Raises TypeError for an item that is not a tuple or a row out of range.
#[pyfunction]
#[pyo3(signature = (items, rows, ids, empty))]
pub fn intern_first<'py>(
    py: Python<'py>,
    items: &Bound<'py, PyList>,
    rows: Option<&[u8]>,
    ids: &Bound<'py, PyDict>,
    empty: &Bound<'py, PyAny>,
) -> PyResult<(Py<PyBytes>, i64)> {
    let pos = positions(rows, items.len())?;
    let mut interner = Interner::new(ids);
    let mut out = Vec::with_capacity(pos.len());
    let mut bad = -1i64;
    for (p, &r) in pos.iter().enumerate() {
        let t = tuple_at(items, r)?;
        let n = t.len();
        if n != 1 && bad < 0 {
            bad = p as i64;
        }
        out.push(if n == 0 { interner.id(empty)? } else { interner.id(&t.get_item(0)?)? });
    }
    Ok((to_bytes(py, &out), bad))
}

/// Return ``(a, b)``, the value columns of a register history as
/// ``linearizability.encode_columns`` builds them, for the rows ``rows`` of ``values``
/// and ``expects`` (None: every row) whose kinds are ``kind`` (int64, 0 read / 1 write /
/// 2 cas, one per taken row): ``a`` the id of the value read or written (the tuple's
/// first item, None if empty) or of a cas's expected value (``expects``; -1 if it is
/// empty or missing, after interning ``unknown`` in its place), ``b`` a cas's new value
/// (0 otherwise). Ids come from ``ids`` in first-seen order, every ``a`` before the
/// ``b`` of the cas, as ``encode_columns`` interns them. Both are ``bytes`` of int64.
#[pyfunction]
#[pyo3(signature = (values, expects, kind, rows, ids, unknown))]
pub fn intern_register_values<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyList>,
    expects: &Bound<'py, PyList>,
    kind: &[u8],
    rows: Option<&[u8]>,
    ids: &Bound<'py, PyDict>,
    unknown: &Bound<'py, PyAny>,
) -> PyResult<(Py<PyBytes>, Py<PyBytes>)> {
    let pos = positions(rows, values.len())?;
    if kind.len() != 8 * pos.len() {
        return Err(PyTypeError::new_err("kind: give one int64 per row taken"));
    }
    let kinds: Vec<i64> =
        kind.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().unwrap())).collect();
    let none = py.None().into_bound(py);
    let mut interner = Interner::new(ids);
    let mut a = Vec::with_capacity(pos.len());
    let mut b = vec![0i64; pos.len()];
    let mut cas = Vec::new();
    for (p, &r) in pos.iter().enumerate() {
        if kinds[p] == 2 {
            cas.push(p);
            let e = if r < expects.len() { Some(tuple_at(expects, r)?) } else { None };
            match e {
                Some(e) if !e.is_empty() => a.push(interner.id(&e.get_item(0)?)?),
                _ => {
                    interner.id(unknown)?; // interned as encode_columns does, then "any"
                    a.push(-1);
                }
            }
        } else {
            let t = tuple_at(values, r)?;
            a.push(if t.is_empty() { interner.id(&none)? } else { interner.id(&t.get_item(0)?)? });
        }
    }
    for p in cas {
        let t = tuple_at(values, pos[p])?;
        b[p] = if t.is_empty() { interner.id(&none)? } else { interner.id(&t.get_item(0)?)? };
    }
    Ok((to_bytes(py, &a), to_bytes(py, &b)))
}
