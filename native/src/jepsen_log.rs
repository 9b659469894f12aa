//! Reading Jepsen's log lines (`INFO  jepsen.util - 3	:invoke	:cas	[1 2]`, the form of
//! Knossos's and Porcupine's corpora) straight into paired operations: the native twin of
//! `history/read.py`'s `_log_events` + `_pair` for the files they read without a problem.
//!
//! It reads what those lines hold in practice: processes that are integers (others, such
//! as `:nemesis`, are left out and counted), values `nil`, `true`, `false`, integers,
//! keywords, strings without escapes and flat vectors of those. Anything else — another
//! value, a malformed line the Python reader would refuse, a completion with no invoke,
//! bytes outside printable ASCII (the Python reader's Unicode line and space rules) — makes
//! it answer `None`, and the Python reader takes the file (and names the problem): so the
//! two agree wherever this one answers (tests/test_history_native_read.py).
//!
//! An invoke is paired with the next completion of the same process; the op's value is
//! its `:ok` completion's when that has one (a read's result), else its invoke's; an
//! invoke left open is `info` ("never completed"). Times are lines (a log has no `:time`).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::wgl::{FnvHasher, IdHasher};

/// A value as the history keeps it (`_value` in Python): keywords become the text
/// `":name"`, vectors tuples.
#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Nil,
    Bool(bool),
    Int(i64),
    Str(String),
    Vec(Vec<Val>),
}

/// One operation, in `FileOp`'s field order.
#[derive(Debug, PartialEq)]
pub struct LogOp<'a> {
    pub line: i64,
    pub process: i64,
    pub f: &'a str,
    pub key: Option<Val>,
    pub value: Val,
    /// "ok", "fail" or "info"
    pub outcome: &'static str,
    pub invoke: i64,
    pub complete: i64,
    pub error: String,
    pub complete_line: i64,
}

const TYPES: [&str; 4] = ["invoke", "ok", "fail", "info"];

/// The bytes this reader takes: printable ASCII, tab and the line ends \n and \r.
const FINE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0x20;
    while b < 0x7f {
        t[b] = true;
        b += 1;
    }
    t[b'\t' as usize] = true;
    t[b'\n' as usize] = true;
    t[b'\r' as usize] = true;
    t
};
const SHOW_LIMIT: usize = 40;

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t')
}

/// Return the atom `text` as a value, or None when it is not one this reader takes.
fn atom(text: &[u8], in_vector: bool) -> Option<Val> {
    match text {
        b"nil" => return Some(Val::Nil),
        b"true" => return Some(Val::Bool(true)),
        b"false" => return Some(Val::Bool(false)),
        _ => {}
    }
    let first = *text.first()?;
    if first == b'"' {
        // a string without escapes; in a vector without spaces or commas either (the
        // Python reader splits a vector's atoms on them)
        let body = text.get(1..text.len().checked_sub(1)?)?;
        if text.len() < 2 || *text.last()? != b'"'
            || body.iter().any(|&b| b == b'"' || b == b'\\' || (in_vector && b == b','))
        {
            return None;
        }
        return Some(Val::Str(String::from_utf8(body.to_vec()).ok()?));
    }
    if first == b':' {
        let name = &text[1..];
        if name.is_empty() || name.iter().any(|&b| b == b'"' || b == b'\\' || b == b',') {
            return None;
        }
        return Some(Val::Str(String::from_utf8(text.to_vec()).ok()?));
    }
    let digits = if first == b'+' || first == b'-' { &text[1..] } else { text };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // "+5" is 5 in Python's int(); an integer beyond i64 is left to Python
    let s = std::str::from_utf8(text).ok()?;
    s.trim_start_matches('+').parse::<i64>().ok().map(Val::Int)
}

/// Return a log line's value (what follows its `:f`, spaces trimmed), or None.
fn value(raw: &[u8]) -> Option<Val> {
    if raw.is_empty() {
        return Some(Val::Nil);
    }
    if raw[0] == b'[' {
        if *raw.last()? != b']' {
            return None;
        }
        let inner = &raw[1..raw.len() - 1];
        if inner.iter().any(|&b| matches!(b, b'[' | b']' | b'{' | b'}' | b'(' | b')' | b'#')) {
            return None;
        }
        let mut out = Vec::new();
        for a in inner.split(|&b| is_space(b) || b == b',').filter(|a| !a.is_empty()) {
            out.push(atom(a, true)?);
        }
        return Some(Val::Vec(out));
    }
    if raw.iter().any(|&b| is_space(b) || b == b',') && raw[0] != b'"' {
        return None; // more than one form: the Python reader decides
    }
    atom(raw, false)
}

/// Return `v` written as EDN the way `history.read.edn_text` writes a history's value.
fn edn(v: &Val, out: &mut String) {
    match v {
        Val::Nil => out.push_str("nil"),
        Val::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Val::Int(i) => out.push_str(&i.to_string()),
        Val::Str(s) => {
            // json.dumps of printable ASCII without quotes or backslashes: quoted as is
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Val::Vec(xs) => {
            out.push('[');
            for (i, x) in xs.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                edn(x, out);
            }
            out.push(']');
        }
    }
}

/// `_show`: the value as EDN, cut at 40 characters.
fn show(v: &Val) -> String {
    let mut s = String::new();
    edn(v, &mut s);
    if s.len() > SHOW_LIMIT {
        s.truncate(SHOW_LIMIT);
        s.push_str("...");
    }
    s
}

/// One event of a line: (process, or None for a process that is not an integer; type;
/// f; the value as written).
type Event<'a> = (Option<i64>, &'a [u8], &'a [u8], &'a [u8]);

fn skip_spaces(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && is_space(s[i]) {
        i += 1;
    }
    i
}

fn word_end(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && !is_space(s[i]) {
        i += 1;
    }
    i
}

/// Match `jepsen\.util\s+-\s+(\S+)\s+:(\S+)\s+:(\S+)\s*(.*?)\s*$` from `at` (just past
/// "jepsen.util").
fn match_at(line: &[u8], at: usize) -> Option<(&[u8], &[u8], &[u8], &[u8])> {
    let mut i = at;
    let j = skip_spaces(line, i);
    if j == i || line.get(j) != Some(&b'-') {
        return None;
    }
    i = skip_spaces(line, j + 1);
    if i == j + 1 {
        return None;
    }
    let mut fields: [&[u8]; 3] = [b"", b"", b""];
    for (n, field) in fields.iter_mut().enumerate() {
        if n > 0 {
            if line.get(i) != Some(&b':') {
                return None;
            }
            i += 1;
        }
        let end = word_end(line, i);
        if end == i {
            return None;
        }
        *field = &line[i..end];
        i = end;
        if n < 2 {
            let k = skip_spaces(line, i);
            if k == i {
                return None;
            }
            i = k;
        }
    }
    let start = skip_spaces(line, i);
    let mut end = line.len();
    while end > start && is_space(line[end - 1]) {
        end -= 1;
    }
    Some((fields[0], fields[1], fields[2], &line[start..end]))
}

/// Return the event on `line`, None if it holds none, or Err(()) when this reader does
/// not take it.
fn event(line: &[u8]) -> Result<Option<Event<'_>>, ()> {
    const TAG: &[u8] = b"jepsen.util";
    let mut from = 0;
    // the tag's first byte, then the rest (a window compared at every position was a
    // good part of reading a line)
    while let Some(p) = line[from..].iter().position(|&b| b == b'j') {
        if !line[from + p..].starts_with(TAG) {
            from += p + 1;
            continue;
        }
        let at = from + p + TAG.len();
        if let Some((proc_, typ, f, raw)) = match_at(line, at) {
            let process = if proc_.iter().all(u8::is_ascii_digit) {
                Some(std::str::from_utf8(proc_).map_err(|_| ())?.parse::<i64>().map_err(|_| ())?)
            } else {
                None
            };
            return Ok(Some((process, typ, f, raw)));
        }
        from = from + p + 1;
    }
    Ok(None)
}

struct Open<'a> {
    slot: usize,
    line: i64,
    f: &'a str,
    key: Option<Val>,
    value: Val,
}

/// Return the ops of a Jepsen log (in invoke order) and how many events of non-client
/// processes were left out, or None when the Python reader should read the file (see the
/// module docstring). `tuples`: values are `jepsen.independent` `[key value]` tuples.
pub fn read(text: &str, tuples: bool) -> Option<(Vec<LogOp<'_>>, usize)> {
    read_ops(text, tuples, true)
}

/// `read`, with each failed or unknown op's `error` text only when `errors` (a register's
/// columns have no use for it).
fn read_ops(text: &str, tuples: bool, errors: bool) -> Option<(Vec<LogOp<'_>>, usize)> {
    let bytes = text.as_bytes();
    // printable ASCII, tabs and line ends only: Python's \s and splitlines() agree with
    // this reader's on those (checked a block at a time, a table look-up per byte)
    if !bytes.chunks(64).all(|c| c.iter().fold(true, |ok, &b| ok & FINE[b as usize])) {
        return None;
    }
    // most logs end their lines with \n alone: then only \n is looked for
    let has_cr = bytes.contains(&b'\r');
    let mut out: Vec<Option<LogOp>> = Vec::new();
    // processes are small ints: hashed as themselves, not through SipHash
    let mut open: HashMap<i64, Open, BuildHasherDefault<IdHasher>> = HashMap::default();
    let mut skipped = 0usize;
    let mut events = 0usize;
    let mut line_no: i64 = 0;
    let mut rest = bytes;
    while !rest.is_empty() {
        // a line ends at \n, \r\n or \r (as str.splitlines)
        let end = if has_cr {
            rest.iter().position(|&b| b == b'\n' || b == b'\r')
        } else {
            rest.iter().position(|&b| b == b'\n')
        }.unwrap_or(rest.len());
        let line = &rest[..end];
        let mut next = end;
        if next < rest.len() {
            next += if rest[next] == b'\r' && rest.get(next + 1) == Some(&b'\n') { 2 } else { 1 };
        }
        rest = &rest[next..];
        line_no += 1;
        let Some((process, typ, f, raw)) = event(line).ok()? else { continue };
        events += 1;
        let Some(process) = process else {
            skipped += 1;
            continue;
        };
        let typ = TYPES.iter().copied().find(|t| t.as_bytes() == typ)?;
        let f = std::str::from_utf8(f).ok()?;
        let v = value(raw)?;
        let (key, v) = if tuples {
            match v {
                Val::Vec(mut kv) if kv.len() == 2 => {
                    let val = kv.pop().unwrap();
                    (Some(kv.pop().unwrap()), val)
                }
                _ => return None, // the Python reader names the value
            }
        } else {
            (None, v)
        };
        if typ == "invoke" {
            if open.contains_key(&process) {
                return None;
            }
            open.insert(process, Open { slot: out.len(), line: line_no, f, key,
                                        value: v });
            out.push(None);
            continue;
        }
        let op = open.remove(&process)?; // a completion with no invoke: Python decides
        if op.f != f {
            return None;
        }
        let error = if typ == "ok" || !errors {
            String::new()
        } else if tuples {
            // the completion's whole value, its key included
            show(&Val::Vec(vec![key.unwrap_or(Val::Nil), v.clone()]))
        } else {
            show(&v)
        };
        let value = if typ == "ok" && (v != Val::Nil || op.value == Val::Nil) { v } else { op.value };
        out[op.slot] = Some(LogOp { line: op.line, process, f: op.f, key: op.key, value,
                                    outcome: typ, invoke: op.line, complete: line_no, error,
                                    complete_line: line_no });
    }
    if events == 0 {
        return None; // "no events": the Python reader says so
    }
    for (process, op) in open {
        let error = if errors { "never completed".to_string() } else { String::new() };
        out[op.slot] = Some(LogOp { line: op.line, process, f: op.f, key: op.key,
                                    value: op.value, outcome: "info", invoke: op.line,
                                    complete: -1, error, complete_line: -1 });
    }
    Some((out.into_iter().flatten().collect(), skipped))
}

// ------------------------------------------------------------------- register columns

/// A value as Python's equality sees it, for interning: `True` is `1` and `False` is `0`
/// (equal, with equal hashes), a vector a tuple of such values; `Unrecorded` a cas's
/// expected value that the line did not give (`ops.UNRECORDED`, one object).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    Nil,
    Int(i64),
    Str(String),
    Tuple(Vec<Key>),
    Unrecorded,
}

fn key_of(v: &Val) -> Key {
    match v {
        Val::Nil => Key::Nil,
        Val::Bool(b) => Key::Int(*b as i64),
        Val::Int(i) => Key::Int(*i),
        Val::Str(s) => Key::Str(s.clone()),
        Val::Vec(xs) => Key::Tuple(xs.iter().map(key_of).collect()),
    }
}

/// The int64 columns `replicalab_native.check_kv` takes, in `columns.Columns.args()`'s
/// order: key, kind, a, b, outcome, invoke, complete, index.
pub type RegisterColumns = [Vec<i64>; 8];

/// Return `ops` (one register, no keys) as the cas-register model's columns, exactly as
/// `columns.encode_columns` makes them from the ops' LinOps: kind 0 read / 1 write / 2
/// cas; values interned in first-seen order under Python's equality — nil first, then
/// every op's `a` value in order (a read's or write's value, a cas's expected one, or
/// its unrecorded one for a bare `:cas v`, which is `(unrecorded, v)`), then every cas's
/// new value — and a cas's unrecorded expected value written -1; outcome 0 ok / 1 info
/// / 2 fail; times and index the lines. None when an op is not one of the model's as
/// written (another name, a read or write of a vector, a cas of a vector that is not a
/// pair): the model then names the problem, or its aliases map the name.
pub fn register_columns(ops: &[LogOp<'_>]) -> Option<RegisterColumns> {
    register_columns_and_values(ops).map(|(cols, _)| cols)
}

/// `register_columns` and the value behind each id (`Key::Unrecorded` for an unrecorded
/// expected value's id, which no column names).
fn register_columns_and_values(ops: &[LogOp<'_>]) -> Option<(RegisterColumns, Vec<Key>)> {
    let n = ops.len();
    let mut kind = Vec::with_capacity(n);
    let mut a_vals: Vec<Key> = Vec::with_capacity(n);
    let mut b_vals: Vec<(usize, Key)> = Vec::new();
    for (r, op) in ops.iter().enumerate() {
        let k = match op.f {
            "read" => 0,
            "write" => 1,
            "cas" => 2,
            _ => return None,
        };
        kind.push(k);
        match (&op.value, k) {
            (Val::Vec(_), 0 | 1) => return None,
            (Val::Vec(xs), _) if xs.len() == 2 => {
                a_vals.push(key_of(&xs[0]));
                b_vals.push((r, key_of(&xs[1])));
            }
            (Val::Vec(_), _) => return None,
            (v, 2) => {
                a_vals.push(Key::Unrecorded);
                b_vals.push((r, key_of(v)));
            }
            (v, _) => a_vals.push(key_of(v)),
        }
    }
    let mut ids: HashMap<Key, i64, BuildHasherDefault<FnvHasher>> = HashMap::default();
    ids.insert(Key::Nil, 0);
    let mut id = |k: Key, order: &mut Vec<Key>| -> i64 {
        let next = ids.len() as i64;
        *ids.entry(k).or_insert_with_key(|k| {
            order.push(k.clone());
            next
        })
    };
    let mut order: Vec<Key> = vec![Key::Nil];
    let mut a: Vec<i64> = Vec::with_capacity(n);
    for k in a_vals {
        let unrecorded = k == Key::Unrecorded;
        let v = id(k.clone(), &mut order); // an unrecorded value takes its id, as in dict.fromkeys
        a.push(if unrecorded { -1 } else { v });
    }
    let mut b = vec![0i64; n];
    for (r, k) in b_vals {
        b[r] = id(k, &mut order);
    }
    let outcome = ops.iter().map(|o| match o.outcome {
        "ok" => 0,
        "info" => 1,
        _ => 2,
    }).collect();
    Some(([vec![0; n], kind, a, b, outcome, ops.iter().map(|o| o.invoke).collect(),
           ops.iter().map(|o| o.complete).collect(), ops.iter().map(|o| o.line).collect()],
          order))
}

fn has_bool(v: &Val) -> bool {
    match v {
        Val::Bool(_) => true,
        Val::Vec(xs) => xs.iter().any(has_bool),
        _ => false,
    }
}

// ---------------------------------------------------------------------------- Python

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString, PyTuple};

fn py_val<'py>(py: Python<'py>, v: &Val, strs: &mut HashMap<String, Py<PyString>>)
               -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Val::Nil => py.None().into_bound(py),
        Val::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Val::Int(i) => i.into_pyobject(py)?.into_any(),
        Val::Str(s) => py_str(py, s, strs).into_any(),
        Val::Vec(xs) => {
            let items = xs.iter().map(|x| py_val(py, x, strs)).collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
    })
}

/// One Python str per distinct text (names, keywords and values repeat across a history).
fn py_str<'py>(py: Python<'py>, s: &str, strs: &mut HashMap<String, Py<PyString>>)
               -> Bound<'py, PyString> {
    if let Some(p) = strs.get(s) {
        return p.bind(py).clone();
    }
    let p = PyString::new(py, s);
    if strs.len() < 4096 {
        strs.insert(s.to_string(), p.clone().unbind());
    }
    p
}

/// Return ``(rows, skipped)`` for the Jepsen log ``text``: each row a tuple in
/// ``history.read.FileOp``'s field order (line, process, f, key, value, outcome,
/// invoke_ns, complete_ns, error, complete_line, invoked; times are lines), in invoke
/// order, and how many events of non-client processes were left out; or None when the
/// Python reader should read it (a value or a line this reader does not take, or malformed input: see
/// ``native/src/jepsen_log.rs``). ``tuples``: values are ``[key value]`` tuples.
#[pyfunction]
#[pyo3(signature = (text, tuples=false))]
pub fn read_jepsen_log<'py>(py: Python<'py>, text: &str, tuples: bool)
                            -> PyResult<Option<(Bound<'py, PyList>, usize)>> {
    let Some((ops, skipped)) = py.detach(|| read(text, tuples)) else { return Ok(None) };
    Ok(Some((py_rows(py, &ops)?, skipped)))
}

/// Return ``(columns, values)`` of the Jepsen log ``text`` read as one register, without a
/// row per op: ``columns`` nine ``bytes`` of native int64 — ``Columns.args()``'s eight
/// (as ``columns.encode_columns`` makes them from the ops' LinOps, see
/// `register_columns`) and each op's process — and
/// ``values[id]`` the value behind a value id (None for nil and for an unrecorded
/// expected value's id, which no column names); a LinOp is made from a row and the
/// values alone. None when the Python reader should read the file, when an op is not the
/// cas-register model's as written, or when the history holds a boolean (true and 1 are
/// one id, but a LinOp keeps the value as written).
#[pyfunction]
pub fn read_jepsen_log_register<'py>(py: Python<'py>, text: &str)
        -> PyResult<Option<(Vec<Bound<'py, PyBytes>>, Bound<'py, PyList>)>> {
    let found = py.detach(|| {
        let (ops, _) = read_ops(text, false, false)?;
        if ops.iter().any(|o| has_bool(&o.value)) {
            return None;
        }
        let (cols, values) = register_columns_and_values(&ops)?;
        let process: Vec<i64> = ops.iter().map(|o| o.process).collect();
        Some((cols, process, values))
    });
    let Some((cols, process, values)) = found else { return Ok(None) };
    let bytes = |c: &[i64]| {
        let b: Vec<u8> = c.iter().flat_map(|x| x.to_ne_bytes()).collect();
        PyBytes::new(py, &b)
    };
    let mut out: Vec<Bound<'py, PyBytes>> = cols.iter().map(|c| bytes(c)).collect();
    out.push(bytes(&process));
    let list = PyList::empty(py);
    let mut strs: HashMap<String, Py<PyString>> = HashMap::new();
    for k in &values {
        list.append(py_key(py, k, &mut strs)?)?;
    }
    Ok(Some((out, list)))
}

fn py_key<'py>(py: Python<'py>, k: &Key, strs: &mut HashMap<String, Py<PyString>>)
               -> PyResult<Bound<'py, PyAny>> {
    Ok(match k {
        Key::Nil | Key::Unrecorded => py.None().into_bound(py),
        Key::Int(i) => i.into_pyobject(py)?.into_any(),
        Key::Str(s) => py_str(py, s, strs).into_any(),
        Key::Tuple(xs) => {
            let items = xs.iter().map(|x| py_key(py, x, strs)).collect::<PyResult<Vec<_>>>()?;
            PyTuple::new(py, items)?.into_any()
        }
    })
}

fn py_rows<'py>(py: Python<'py>, ops: &[LogOp<'_>]) -> PyResult<Bound<'py, PyList>> {
    let mut strs: HashMap<String, Py<PyString>> = HashMap::new();
    let none = py.None().into_bound(py);
    let invoked = PyBool::new(py, true).to_owned().into_any();
    let rows = PyList::empty(py);
    for op in ops {
        let key = match &op.key {
            Some(k) => py_val(py, k, &mut strs)?,
            None => none.clone(),
        };
        let row = PyTuple::new(py, [
            op.line.into_pyobject(py)?.into_any(),
            op.process.into_pyobject(py)?.into_any(),
            py_str(py, op.f, &mut strs).into_any(),
            key,
            py_val(py, &op.value, &mut strs)?,
            py_str(py, op.outcome, &mut strs).into_any(),
            op.invoke.into_pyobject(py)?.into_any(),
            op.complete.into_pyobject(py)?.into_any(),
            py_str(py, &op.error, &mut strs).into_any(),
            op.complete_line.into_pyobject(py)?.into_any(),
            invoked.clone(),
        ])?;
        rows.append(row)?;
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_keeps_info() {
        let text = "INFO  jepsen.util - 0\t:invoke\t:read\tnil\n\
                    INFO  jepsen.util - 1\t:invoke\t:cas\t[1 2]\n\
                    INFO  jepsen.util - 0\t:ok\t:read\t3\n\
                    INFO  jepsen.util - 1\t:fail\t:cas\t[1 2]\n\
                    INFO  jepsen.util - 2\t:invoke\t:write\t4\n\
                    INFO  jepsen.util - :nemesis\t:info\t:start\tnil\n";
        let (ops, skipped) = read(text, false).unwrap();
        assert_eq!(skipped, 1);
        assert_eq!(ops.len(), 3);
        assert_eq!((ops[0].line, ops[0].value.clone(), ops[0].outcome, ops[0].complete),
                   (1, Val::Int(3), "ok", 3));
        assert_eq!((ops[1].outcome, ops[1].error.as_str()), ("fail", "[1 2]"));
        assert_eq!((ops[2].outcome, ops[2].complete, ops[2].error.as_str()),
                   ("info", -1, "never completed"));
    }

    #[test]
    fn register_columns_intern_as_python_does() {
        // nil 0; a values in order (1 and true are one value; a bare cas's unrecorded
        // expected value takes an id and is written -1); then the cas's new values
        let text = "INFO  jepsen.util - 0\t:invoke\t:write\t1\n\
                    INFO  jepsen.util - 0\t:ok\t:write\t1\n\
                    INFO  jepsen.util - 1\t:invoke\t:cas\t[true 2]\n\
                    INFO  jepsen.util - 2\t:invoke\t:cas\t5\n\
                    INFO  jepsen.util - 3\t:invoke\t:read\tnil\n\
                    INFO  jepsen.util - 3\t:ok\t:read\t:x\n\
                    INFO  jepsen.util - 1\t:fail\t:cas\t[true 2]\n";
        let (ops, _) = read(text, false).unwrap();
        let [key, kind, a, b, outcome, invoke, complete, index] = register_columns(&ops).unwrap();
        let (_, values) = register_columns_and_values(&ops).unwrap();
        assert_eq!(values, vec![Key::Nil, Key::Int(1), Key::Unrecorded, Key::Str(":x".into()),
                                Key::Int(2), Key::Int(5)]);
        assert_eq!(key, vec![0, 0, 0, 0]);
        assert_eq!(kind, vec![1, 2, 2, 0]);
        assert_eq!(a, vec![1, 1, -1, 3]);
        assert_eq!(b, vec![0, 4, 5, 0]);
        assert_eq!(outcome, vec![0, 2, 1, 0]);
        assert_eq!((invoke, complete, index),
                   (vec![1, 3, 4, 5], vec![2, 7, -1, 6], vec![1, 3, 4, 5]));
        for text in ["INFO  jepsen.util - 0\t:invoke\t:read\t[1 2]\n",
                     "INFO  jepsen.util - 0\t:invoke\t:cas\t[1 2 3]\n",
                     "INFO  jepsen.util - 0\t:invoke\t:get\tnil\n"] {
            assert!(register_columns(&read(text, false).unwrap().0).is_none(), "{text}");
        }
    }

    #[test]
    fn leaves_to_python_what_it_does_not_take() {
        for text in ["INFO  jepsen.util - 0\t:ok\t:read\t3\n",  // no invoke
                     "INFO  jepsen.util - 0\t:invoke\t:read\t{:a 1}\n",
                     "INFO  jepsen.util - 0\t:invoke\t:read\t[[1] 2]\n",
                     "INFO  jepsen.util - 0\t:begin\t:read\tnil\n",
                     "INFO  jepsen.util - 0\t:invoke\t:read\t\"\u{e9}\"\n",
                     "no event here\n"] {
            assert!(read(text, false).is_none(), "{text}");
        }
    }
}

