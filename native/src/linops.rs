//! Making the checker's ops (`ops.LinOp`, a frozen dataclass with slots) of a register
//! history file read natively, as `from_file.ops_from_columns` makes them: the LinOps of
//! a part are needed only when it is not linearizable (shrinking and explanations), but
//! then all of them, and made in Python they were the largest share of `replicalab check`
//! on a directory of failing Jepsen histories (nine calls per op).

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple, PyType};

use crate::int64s;

/// Return the LinOps of a register file's columns (``check_kv``'s ``kind``, ``a``, ``b``,
/// ``outcome``, ``invoke_ns``, ``complete_ns``, ``index``, and the ops' ``process``), one
/// per row: instances of ``cls`` (``ops.LinOp``) made as ``object.__new__(cls)`` makes
/// them, their slots (``fields``: the eight field names in order) set as
/// ``object.__setattr__`` sets them (a frozen dataclass's own ``__setattr__`` refuses):
/// ``index``, ``process``, ``f`` = ``names[kind]``, ``key`` None, ``value`` =
/// ``values[a]`` (a cas: ``(values[a], values[b])``, ``unrecorded`` for ``a`` < 0),
/// ``outcome`` = ``outcomes[outcome]``, ``invoke_ns``, ``complete_ns``.
#[pyfunction]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
pub fn register_linops<'py>(
    py: Python<'py>,
    cls: &Bound<'py, PyType>,
    fields: Vec<Bound<'py, PyString>>,
    kind: &[u8],
    a: &[u8],
    b: &[u8],
    outcome: &[u8],
    process: &[u8],
    invoke_ns: &[u8],
    complete_ns: &[u8],
    index: &[u8],
    values: &Bound<'py, PyList>,
    names: Vec<Bound<'py, PyAny>>,
    outcomes: Vec<Bound<'py, PyAny>>,
    unrecorded: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyList>> {
    let cols = [("kind", kind), ("a", a), ("b", b), ("outcome", outcome), ("process", process),
                ("invoke_ns", invoke_ns), ("complete_ns", complete_ns), ("index", index)];
    let v = cols.iter().map(|&(n, c)| int64s(n, c)).collect::<PyResult<Vec<_>>>()?;
    let n = v[0].len();
    if fields.len() != 8 || v.iter().any(|c| c.len() != n) {
        return Err(PyValueError::new_err(
            "register_linops: give eight field names and columns of one length"));
    }
    let value = |i: i64| -> PyResult<Bound<'py, PyAny>> {
        if i < 0 {
            return Ok(unrecorded.clone());
        }
        values.get_item(i as usize)
    };
    let pick = |xs: &[Bound<'py, PyAny>], i: i64, what: &str| -> PyResult<Bound<'py, PyAny>> {
        xs.get(i as usize).cloned().ok_or_else(|| PyValueError::new_err(
            format!("register_linops: no name for {what} {i}")))
    };
    let out = PyList::empty(py);
    let none = py.None().into_bound(py);
    for r in 0..n {
        let k = v[0][r];
        let val = if k == 2 {
            PyTuple::new(py, [value(v[1][r])?, value(v[2][r])?])?.into_any()
        } else {
            value(v[1][r])?
        };
        let slots = [v[7][r].into_pyobject(py)?.into_any(), v[4][r].into_pyobject(py)?.into_any(),
                     pick(&names, k, "kind")?, none.clone(), val,
                     pick(&outcomes, v[3][r], "outcome")?, v[5][r].into_pyobject(py)?.into_any(),
                     v[6][r].into_pyobject(py)?.into_any()];
        // SAFETY: `cls` is a type object; GenericAlloc returns a new reference or NULL
        let op = unsafe {
            let p = ffi::PyType_GenericAlloc(cls.as_ptr().cast::<ffi::PyTypeObject>(), 0);
            if p.is_null() {
                return Err(PyErr::fetch(py));
            }
            Bound::from_owned_ptr(py, p)
        };
        for (name, x) in fields.iter().zip(slots.iter()) {
            // SAFETY: valid object, attribute name and value; -1 leaves an exception set
            if unsafe { ffi::PyObject_GenericSetAttr(op.as_ptr(), name.as_ptr(), x.as_ptr()) } < 0 {
                return Err(PyErr::fetch(py));
            }
        }
        out.append(op)?;
    }
    Ok(out)
}
