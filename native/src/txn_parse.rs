//! Reading a Jepsen/Elle transaction history (EDN: one op map per line, or one vector of
//! maps) straight into the transaction columns (`txn::Txns`), without building a tree
//! of values: the fields the checker needs (`:type`, `:f`, `:process`, `:time`,
//! `:value`) are parsed in place and every other field is skipped.
//!
//! An invoke is paired with the next completion of the same process (as Jepsen does);
//! a `:ok` takes its completion's micro-ops (the reads filled in), a `:fail` or `:info`
//! its invoke's; an invoke never completed is `info`; a completion with no invoke (a
//! history of completions only) is a transaction whose invoke is not known. Instants are
//! positions in the history (its lines, or the events' order when a line holds several),
//! as Elle orders them (`history.read` + `checkers.txn.prepare` in Python). Events of a
//! process that is not an integer (`:nemesis`) and ops other than `:txn` are left out
//! and counted. Malformed input is an error naming the line.

use std::collections::HashMap;

use crate::txn::{FxBuild, Txns, NEVER, NIL};

pub struct ParseError {
    pub line: usize,
    pub msg: String,
}

fn err<T>(line: usize, msg: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError { line, msg: msg.into() })
}

/// One micro-op as parsed: f (0 append, 1 r, 2 w), key id, value (append/w), read.
#[derive(Clone, Copy)]
struct Mop {
    f: u8,
    key: u32,
    val: i64,
    /// -1 nil, -2 a single integer (in `val`), else the list's length; the list is at
    /// `lstart` in the event's list buffer
    rlen: i32,
    lstart: u32,
}

/// An invoked transaction waiting for its completion: its slot in the columns, and its
/// micro-ops (what a `:fail` or `:info` keeps).
struct Open {
    slot: usize,
    line: usize,
    time: i64,
    mops: Vec<Mop>,
}

/// The micro-ops' names, by code (a static: an array built per micro-op cost a stall).
static FNAMES: [&str; 3] = ["append", "r", "w"];

/// The bytes that end an atom.
static DELIM: [bool; 256] = {
    let mut t = [false; 256];
    let d = b" \t\r\n,[]{}()\";";
    let mut i = 0;
    while i < d.len() {
        t[d[i] as usize] = true;
        i += 1;
    }
    t
};

/// How many of the 8 bytes of `w` (first byte lowest) are decimal digits before the first
/// that is not. A byte below '0' borrows from the bytes above it, one above '9' carries
/// into them: both only above the first non-digit, which is all that is read.
#[inline]
fn leading_digits(w: u64) -> usize {
    let below = w.wrapping_sub(0x3030_3030_3030_3030);
    let above = w.wrapping_add(0x4646_4646_4646_4646);
    let not_digit = (below | above) & 0x8080_8080_8080_8080;
    (not_digit.trailing_zeros() / 8) as usize
}

/// The value of the first `n` (1..=7) bytes of `w`, decimal digits, first byte lowest:
/// the digits moved to the top of the word (zeros below: leading zeros), then summed
/// in pairs, fours and eights.
#[inline]
fn digits_value(w: u64, n: usize) -> u64 {
    let d = (w.wrapping_sub(0x3030_3030_3030_3030)) << (8 * (8 - n));
    let d = (d & 0x0F0F_0F0F_0F0F_0F0F).wrapping_mul(2561) >> 8;
    let d = (d & 0x00FF_00FF_00FF_00FF).wrapping_mul(6_553_601) >> 16;
    (d & 0x0000_FFFF_0000_FFFF).wrapping_mul(42_949_672_960_001) >> 32
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
    line: usize,
    keys: HashMap<Vec<u8>, u32, FxBuild>,
    /// keys spelt as canonical decimal integers, by value
    int_keys: HashMap<i64, u32, FxBuild>,
    key_names: Vec<String>,
    /// the current event's micro-ops and list elements
    mops: Vec<Mop>,
    lists: Vec<i64>,
}

impl<'a> Reader<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() {
            let c = self.s[self.i];
            if c > b',' && c != b';' {
                break; // no blank nor comma sorts above the comma
            }
            match self.s[self.i] {
                b'\n' => {
                    self.line += 1;
                    self.i += 1;
                }
                b' ' | b'\t' | b'\r' | b',' => self.i += 1,
                b';' => {
                    while self.i < self.s.len() && self.s[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    /// An atom's bytes (up to a delimiter).
    fn atom(&mut self) -> &'a [u8] {
        let start = self.i;
        let s = self.s;
        let mut i = self.i;
        while i < s.len() && !DELIM[s[i] as usize] {
            i += 1;
        }
        self.i = i;
        &s[start..i]
    }

    fn string(&mut self) -> Result<Vec<u8>, ParseError> {
        // at the opening quote
        self.i += 1;
        let mut out = Vec::new();
        while self.i < self.s.len() {
            let c = self.s[self.i];
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    if let Some(&e) = self.s.get(self.i) {
                        self.i += 1;
                        out.push(match e {
                            b'n' => b'\n',
                            b't' => b'\t',
                            b'r' => b'\r',
                            other => other,
                        });
                    }
                }
                b'\n' => {
                    self.line += 1;
                    out.push(c);
                }
                _ => out.push(c),
            }
        }
        err(self.line, "a string that never ends; expected a closing \"")
    }

    /// Skip one EDN form of any kind.
    fn skip(&mut self) -> Result<(), ParseError> {
        self.ws();
        let Some(c) = self.peek() else { return err(self.line, "the file ends inside a map") };
        match c {
            b'"' => {
                self.string()?;
            }
            b'[' | b'{' | b'(' => {
                let close = match c { b'[' => b']', b'{' => b'}', _ => b')' };
                self.i += 1;
                loop {
                    self.ws();
                    match self.peek() {
                        None => return err(self.line, "the file ends inside a collection"),
                        Some(x) if x == close => {
                            self.i += 1;
                            break;
                        }
                        Some(b']' | b'}' | b')') => {
                            return err(self.line, "a collection closed by the wrong bracket")
                        }
                        _ => self.skip()?,
                    }
                }
            }
            b'#' => {
                self.i += 1;
                if self.peek() == Some(b'{') {
                    self.i -= 0;
                    return self.skip();
                }
                if self.peek() == Some(b'_') {
                    self.i += 1;
                    self.skip()?;
                    return self.skip();
                }
                self.atom(); // a tag: its value follows
                return self.skip();
            }
            b']' | b'}' | b')' => return err(self.line, "an unexpected closing bracket"),
            _ => {
                if self.atom().is_empty() {
                    return err(self.line, format!("unexpected character {:?}", c as char));
                }
            }
        }
        Ok(())
    }

    /// An integer, or None for nil: the usual case (1 to 7 digits then a delimiter) here,
    /// inlined; any other in `int_rest`.
    #[inline(always)]
    fn int(&mut self) -> Result<Option<i64>, ParseError> {
        let s = self.s;
        let i = self.i;
        // up to 7 digits at once (8 bytes loaded, the digits found and summed in a word)
        if let Some(w) = s.get(i..i + 8) {
            let w = u64::from_le_bytes(w.try_into().unwrap());
            let n = leading_digits(w);
            if (1..8).contains(&n) && DELIM[s[i + n] as usize] {
                self.i = i + n;
                return Ok(Some(digits_value(w, n) as i64));
            }
        }
        self.int_rest()
    }

    #[inline(never)]
    fn int_rest(&mut self) -> Result<Option<i64>, ParseError> {
        // in one pass: up to 18 decimal digits, maybe after a minus, then a delimiter (or
        // the end)
        let s = self.s;
        let mut i = self.i;
        let neg = s.get(i) == Some(&b'-');
        if neg {
            i += 1;
        }
        let first = i;
        let mut v: i64 = 0;
        while i < s.len() && s[i].is_ascii_digit() {
            v = v.wrapping_mul(10).wrapping_add((s[i] - b'0') as i64);
            i += 1;
        }
        if i > first && i - first <= 18 && (i == s.len() || DELIM[s[i] as usize]) {
            self.i = i;
            return Ok(Some(if neg { -v } else { v }));
        }
        let a = self.atom();
        if a == b"nil" {
            return Ok(None);
        }
        // the usual case, decimal digits: no UTF-8 check, no allocation
        if !a.is_empty() && a.len() <= 18 && a.iter().all(u8::is_ascii_digit) {
            return Ok(Some(a.iter().fold(0i64, |v, &c| v * 10 + (c - b'0') as i64)));
        }
        let t = a.strip_suffix(b"N").unwrap_or(a);
        match std::str::from_utf8(t).ok().and_then(|x| x.parse::<i64>().ok()) {
            Some(v) => Ok(Some(v)),
            None => err(self.line, format!("{} is not an integer", String::from_utf8_lossy(a))),
        }
    }

    fn key(&mut self) -> Result<u32, ParseError> {
        self.ws();
        let owned: Vec<u8>;
        let bytes: &[u8] = match self.peek() {
            Some(b'"') => {
                owned = self.string()?;
                &owned
            }
            Some(b'[') => {
                // a vector key ([:anti 3]): its atoms, as the Python reader names it
                self.i += 1;
                let mut parts: Vec<u8> = vec![b'['];
                loop {
                    self.ws();
                    match self.peek() {
                        Some(b']') => {
                            self.i += 1;
                            break;
                        }
                        Some(b'[' | b'{' | b'(' | b'#' | b'"') | None => {
                            return err(self.line, "a micro-op's key is an integer, a string, a \
                                                   keyword or a vector of those atoms")
                        }
                        _ => {
                            let a = self.atom();
                            let a = a.strip_prefix(b":").unwrap_or(a);
                            if parts.len() > 1 {
                                parts.push(b' ');
                            }
                            parts.extend_from_slice(a.strip_suffix(b"N").unwrap_or(a));
                        }
                    }
                }
                parts.push(b']');
                owned = parts;
                &owned
            }
            Some(b'{' | b'(' | b'#') => {
                return err(self.line, "a micro-op's key is an integer, a string or a keyword")
            }
            _ => {
                let a = self.atom();
                let a = a.strip_prefix(b":").unwrap_or(a);
                a.strip_suffix(b"N").unwrap_or(a)
            }
        };
        if bytes.is_empty() {
            return err(self.line, "a micro-op without its key");
        }
        // the usual key, a decimal integer in its canonical form: looked up by its value
        // (no hashing of bytes, no key bytes to compare); any other spelling by its bytes
        let canonical = bytes.len() <= 18 && bytes.iter().all(u8::is_ascii_digit)
            && (bytes.len() == 1 || bytes[0] != b'0');
        if canonical {
            let v = bytes.iter().fold(0i64, |v, &c| v * 10 + (c - b'0') as i64);
            if let Some(&id) = self.int_keys.get(&v) {
                return Ok(id);
            }
            let id = self.key_names.len() as u32;
            self.key_names.push(String::from_utf8_lossy(bytes).into_owned());
            self.int_keys.insert(v, id);
            return Ok(id);
        }
        if let Some(&id) = self.keys.get(bytes) {
            return Ok(id);
        }
        let id = self.key_names.len() as u32;
        self.key_names.push(String::from_utf8_lossy(bytes).into_owned());
        self.keys.insert(bytes.to_vec(), id);
        Ok(id)
    }

    /// Parse a `:value` (`[[:append 5 3] [:r 5 nil]]`) into `self.mops`/`self.lists`;
    /// false for nil.
    fn txn_value(&mut self) -> Result<bool, ParseError> {
        self.ws();
        match self.peek() {
            Some(b'[') | Some(b'(') => {}
            _ => {
                let a = self.atom();
                if a == b"nil" {
                    return Ok(false);
                }
                return err(self.line, format!(":value {} is not a vector of micro-ops like \
                                               [[:r 5 nil]]", String::from_utf8_lossy(a)));
            }
        }
        self.i += 1;
        loop {
            self.ws();
            match self.peek() {
                Some(b']') | Some(b')') => {
                    self.i += 1;
                    return Ok(true);
                }
                Some(b'[') | Some(b'(') => {
                    self.i += 1;
                    let m = self.mop()?;
                    self.mops.push(m);
                }
                None => return err(self.line, "the file ends inside a :value"),
                _ => return err(self.line, "a micro-op that is not a vector; expected \
                                            [:append k v], [:w k v] or [:r k v]"),
            }
        }
    }

    fn mop(&mut self) -> Result<Mop, ParseError> {
        self.ws();
        let owned: Vec<u8>;
        let raw: &[u8] = if self.peek() == Some(b'"') {
            owned = self.string()?;
            &owned
        } else {
            self.atom()
        };
        let f: &[u8] = raw.strip_prefix(b":").unwrap_or(raw);
        let code = match f {
            b"append" => 0u8,
            b"r" => 1,
            b"w" => 2,
            _ => return err(self.line, format!("micro-op :{}; expected :append, :w or :r",
                                               String::from_utf8_lossy(f))),
        };
        let fname = FNAMES[code as usize];
        let key = self.key()?;
        self.ws();
        let mut m = Mop { f: code, key, val: NIL, rlen: -1, lstart: self.lists.len() as u32 };
        if matches!(self.peek(), Some(b']' | b')')) {
            // [:r k]: a read without its value, nil
            if code != 1 {
                return err(self.line, format!(":{} takes an integer, not nil",
                                              fname));
            }
            self.i += 1;
            return Ok(m);
        }
        match self.peek() {
            Some(b'[') | Some(b'(') if code == 1 => {
                self.i += 1;
                loop {
                    self.ws();
                    match self.peek() {
                        Some(b']') | Some(b')') => {
                            self.i += 1;
                            break;
                        }
                        None => return err(self.line, "the file ends inside a read"),
                        _ => match self.int()? {
                            Some(v) => self.lists.push(v),
                            None => return err(self.line, "a read holds nil; expected integers"),
                        },
                    }
                }
                m.rlen = (self.lists.len() - m.lstart as usize) as i32;
            }
            Some(b'[' | b'{' | b'(' | b'"' | b'#') => {
                return err(self.line, "a micro-op's value is an integer, nil or (for a read) \
                                       a list of integers")
            }
            _ => {
                let v = self.int()?;
                if code == 1 {
                    if let Some(v) = v {
                        m.val = v;
                        m.rlen = -2;
                    }
                } else {
                    match v {
                        Some(v) => m.val = v,
                        None => return err(self.line, format!(
                            ":{} takes an integer, not nil", fname)),
                    }
                }
            }
        }
        self.ws();
        match self.peek() {
            Some(b']') | Some(b')') => {
                self.i += 1;
                Ok(m)
            }
            _ => err(self.line, "a micro-op of more than three elements; expected [f k v]"),
        }
    }
}

struct Event {
    typ: u8, // 0 invoke 1 ok 2 fail 3 info
    process: Option<i64>,
    /// its :process is not an integer (the nemesis)
    other_process: bool,
    time: Option<i64>,
    /// its :f: None when absent, else whether it is :txn
    f_txn: Option<bool>,
    has_value: bool,
    /// its :value was a vector (the micro-ops are in the reader's buffers)
    some_value: bool,
    /// a :value that is not micro-ops (an error only for a client :txn op)
    value_err: Option<ParseError>,
}

fn event(r: &mut Reader) -> Result<Event, ParseError> {
    // at '{'
    r.i += 1;
    r.mops.clear();
    r.lists.clear();
    let mut ev = Event { typ: 255, process: None, other_process: false, time: None,
                         f_txn: None, has_value: false, some_value: false, value_err: None };
    let line = r.line;
    loop {
        r.ws();
        match r.peek() {
            Some(b'}') => {
                r.i += 1;
                break;
            }
            None => return err(line, "the file ends inside an op map"),
            Some(b':') => {}
            _ => return err(r.line, "an op map's keys are keywords like :type"),
        }
        let k = r.atom();
        r.ws();
        match k {
            b":type" => {
                let v = r.atom();
                ev.typ = match v {
                    b":invoke" => 0,
                    b":ok" => 1,
                    b":fail" => 2,
                    b":info" => 3,
                    _ => return err(r.line, format!(":type {}; expected :invoke, :ok, :fail \
                                                     or :info", String::from_utf8_lossy(v))),
                }
            }
            b":f" => {
                if r.peek() == Some(b':') {
                    ev.f_txn = Some(r.atom() == b":txn");
                } else {
                    r.skip()?;
                    ev.f_txn = Some(false);
                }
            }
            b":process" => {
                if matches!(r.peek(), Some(b':' | b'"')) {
                    r.skip()?;
                    ev.process = None; // :nemesis and other non-client processes
                    ev.other_process = true;
                } else {
                    ev.process = r.int()?;
                }
            }
            b":time" => ev.time = r.int()?,
            b":value" => {
                ev.has_value = true;
                r.mops.clear();
                r.lists.clear();
                if ev.f_txn == Some(false) || ev.other_process {
                    r.skip()?;
                } else {
                    let (i, line) = (r.i, r.line);
                    match r.txn_value() {
                        Ok(x) => ev.some_value = x,
                        Err(e) => {
                            // not micro-ops: an error only if this is a client :txn op
                            r.i = i;
                            r.line = line;
                            r.mops.clear();
                            r.lists.clear();
                            r.skip()?;
                            ev.value_err = Some(e);
                        }
                    }
                }
            }
            _ => r.skip()?,
        }
    }
    if ev.typ == 255 {
        return err(line, "an op map without :type; expected {:type :invoke, :f :txn, \
                          :value [[:r 5 nil]], :process 0}");
    }
    Ok(ev)
}

/// Append `mops` (lists in `lists`) to transaction `slot`'s columns; reads nil when the
/// transaction did not commit (what they returned is not known).
fn store(t: &mut Txns, slot: usize, mops: &[Mop], lists: &[i64], committed: bool) {
    t.mop_start[slot] = t.f.len() as u32;
    t.mop_len[slot] = mops.len() as u32;
    for m in mops {
        t.f.push(m.f);
        t.key.push(m.key);
        if m.f == 1 && !committed {
            t.val.push(NIL);
            t.rlen.push(-1);
        } else if m.rlen >= 0 {
            t.val.push(t.reads.len() as i64);
            let s = m.lstart as usize;
            t.reads.extend_from_slice(&lists[s..s + m.rlen as usize]);
            t.rlen.push(m.rlen);
        } else {
            t.val.push(m.val);
            t.rlen.push(m.rlen);
        }
    }
}

/// What the parse left out: events of non-client processes, client ops not `:txn`.
#[derive(Default)]
pub struct Skipped {
    pub non_client: usize,
    pub non_txn: usize,
}

/// Parse `text` into transactions (in invoke order; `index` the position of the invoke,
/// or of a completion with no invoke).
pub fn parse(text: &[u8]) -> Result<(Txns, Skipped), ParseError> {
    let mut r = Reader { s: text, i: 0, line: 1, keys: HashMap::default(),
                         int_keys: HashMap::default(), key_names: Vec::new(), mops: Vec::new(), lists: Vec::new() };
    let mut open: HashMap<i64, Open, FxBuild> = HashMap::default();
    let mut pool: Vec<Vec<Mop>> = Vec::new();
    let mut t = Txns::default();
    let mut skipped = Skipped::default();
    let mut other_open: std::collections::HashSet<i64> = Default::default();
    let mut timed: Option<bool> = None;
    // every event's line, by position (1-based): instants are lines when no two events
    // share one, else positions
    let mut lines: Vec<i64> = vec![0];
    r.ws();
    let mut outer = false;
    if r.peek() == Some(b'[') {
        outer = true;
        r.i += 1;
    }
    loop {
        r.ws();
        let Some(c) = r.peek() else { break };
        if outer && c == b']' {
            r.i += 1;
            r.ws();
            if r.peek().is_some() {
                return err(r.line, "text after the vector of op maps");
            }
            break;
        }
        if c == b'#' {
            r.i += 1;
            r.atom(); // #jepsen.history.Op{...}
            r.ws();
        }
        if r.peek() != Some(b'{') {
            return err(r.line, "expected an op map like {:type :invoke, :f :txn, :value \
                                [[:append 5 3] [:r 5 nil]], :process 0}: is this EDN?");
        }
        let line = r.line;
        let ev = event(&mut r)?;
        lines.push(line as i64);
        let pos = (lines.len() - 1) as i64;
        if ev.other_process {
            skipped.non_client += 1;
            continue;
        }
        // Elle's README writes completions with neither :process nor :f: each is an op
        // of its own, with a process of its own (above any a history names, as the
        // Python reader's LONE_PROCESS_BASE)
        let process = match ev.process {
            Some(p) => p,
            None if ev.typ != 0 => (1i64 << 40) + pos,
            None => return err(line, "an :invoke without an integer :process"),
        };
        match ev.f_txn {
            None | Some(true) => {} // no :f: a transaction, as Elle's README writes them
            Some(false) => {
                // a client op other than a transaction: left out (its invoke and its
                // completion are one op)
                if ev.typ == 0 {
                    skipped.non_txn += 1;
                    other_open.insert(process);
                } else if !other_open.remove(&process) {
                    skipped.non_txn += 1;
                }
                continue;
            }
        }
        if let Some(e) = ev.value_err {
            return Err(e);
        }
        let has_time = ev.time.is_some();
        match timed {
            None => timed = Some(has_time),
            Some(x) if x != has_time => {
                return err(line, ":time on some events but not this one; expected :time on \
                                  every event, or on none")
            }
            _ => {}
        }
        let at = ev.time.unwrap_or(pos);
        if ev.typ == 0 {
            if let Some(o) = open.get(&process) {
                return err(line, format!("process {process} invokes again before its op on \
                                          line {} completed", o.line));
            }
            if !ev.some_value {
                return err(line, "a :txn without a :value; expected [[:append 5 3] [:r 5 nil]]");
            }
            // keep the invoke's micro-ops (reads are nil in an invoke: no list to keep)
            let mut mops = pool.pop().unwrap_or_default();
            mops.clear();
            mops.extend(r.mops.iter().map(|m| Mop { rlen: if m.f == 1 { -1 } else { m.rlen },
                                                    ..*m }));
            let slot = t.index.len();
            t.index.push(pos);
            t.process.push(process);
            t.outcome.push(3);
            t.invoke.push(pos);
            t.complete.push(NEVER);
            t.mop_start.push(0);
            t.mop_len.push(0);
            open.insert(process, Open { slot, line, time: at, mops });
            continue;
        }
        let Some(o) = open.remove(&process) else {
            // a completion on its own (a history of completions only)
            if !ev.some_value {
                return err(line, "a :txn without a :value; expected [[:append 5 3] [:r 5 nil]]");
            }
            let slot = t.index.len();
            t.index.push(pos);
            t.process.push(process);
            t.outcome.push(ev.typ);
            t.invoke.push(NEVER);
            t.complete.push(pos);
            t.mop_start.push(0);
            t.mop_len.push(0);
            let (mops, lists) = (r.mops.clone(), r.lists.clone());
            store(&mut t, slot, &mops, &lists, true);
            continue;
        };
        if at < o.time {
            return err(line, format!("completes at {at}, before its invoke on line {}", o.line));
        }
        if ev.typ == 1 && ev.some_value {
            if r.mops.len() != o.mops.len() {
                return err(line, format!("the :ok has {} micro-ops, its invoke on line {} had \
                                          {}", r.mops.len(), o.line, o.mops.len()));
            }
            store(&mut t, o.slot, &r.mops, &r.lists, true);
        } else if ev.typ == 1 && ev.has_value {
            return err(line, "a :txn :ok with a nil :value; expected its micro-ops");
        } else {
            store(&mut t, o.slot, &o.mops, &[], false);
        }
        t.outcome[o.slot] = ev.typ;
        t.complete[o.slot] = pos;
        pool.push(o.mops);
    }
    let left: Vec<Open> = open.into_values().collect();
    for o in left {
        // never completed: may have happened, or not
        store(&mut t, o.slot, &o.mops, &[], false);
    }
    // positions -> lines when every event has a line of its own
    if lines.windows(2).skip(1).all(|w| w[0] < w[1]) {
        for x in t.index.iter_mut().chain(t.invoke.iter_mut()).chain(t.complete.iter_mut()) {
            if *x != NEVER {
                *x = lines[*x as usize];
            }
        }
    }
    t.keys = r.key_names;
    Ok((t, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swar_digits_agree_with_a_scalar_reading() {
        let cases: &[&[u8]] = &[b"0 ", b"7]", b"42 ", b"1234567 ", b"9999999]", b"0000001,",
                                b"12345678", b"x", b"-5 ", b"12a4 ", b"305}", b"1:"];
        for c in cases {
            let mut w = [b' '; 8];
            w[..c.len()].copy_from_slice(c);
            let w = u64::from_le_bytes(w);
            let n = c.iter().take_while(|b| b.is_ascii_digit()).count().min(8);
            assert_eq!(leading_digits(w), n, "{:?}", std::str::from_utf8(c));
            if (1..8).contains(&n) {
                let want: u64 = std::str::from_utf8(&c[..n]).unwrap().parse().unwrap();
                assert_eq!(digits_value(w, n), want);
            }
        }
        for v in [0u64, 1, 9, 10, 99, 100, 12_345, 999_999, 1_000_000, 9_999_999] {
            let mut w = [b' '; 8];
            let t = v.to_string();
            w[..t.len()].copy_from_slice(t.as_bytes());
            assert_eq!(digits_value(u64::from_le_bytes(w), t.len()), v);
        }
    }
}
