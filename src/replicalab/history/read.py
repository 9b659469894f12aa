"""Read Jepsen-style histories from files: EDN (one op map per line, or one vector of
maps) and JSON lines (our ``export --format jsonl``), into a :class:`History`.

Each event is a map with ``:type`` (``:invoke``, ``:ok``, ``:fail``, ``:info``), ``:f``
(``:read``, ``:write``, ``:cas``), ``:process`` and ``:value``, and optionally ``:time``
(ns; without it the event's position stands for its time, which is all that orders
ops), ``:key`` (our export) and ``:consistency``. An invoke is paired with the next
completion of the same process, as Jepsen does; an invoke left open becomes an op that
never completed (``info``). Events of a process that is not an integer (``:nemesis``)
are left out. A cas's ``:value`` is ``[from to]``; with ``independent=True``
(``jepsen.independent``, the ``kv`` model) values are ``[key value]`` tuples unless the
event has a ``:key``.

Malformed input raises :class:`HistoryFileError` naming the file, the line and what was
expected. The parser is a small EDN reader of its own (maps, vectors, lists, sets,
keywords, strings, numbers, nil/true/false, symbols, tagged values such as
``#jepsen.history.Op{...}``, comments and ``#_`` discards).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicalab.history.core import CONSISTENCY_NAMES, History

EXAMPLE = "{:type :invoke, :f :read, :process 0, :value nil, :time 0}"
_F = ("read", "write", "cas")
_TYPES = ("invoke", "ok", "fail", "info")


class HistoryFileError(ValueError):
    """A history file that cannot be read: the message names the file, the line and what
    was expected."""


class Keyword(str):
    """An EDN keyword (``:read`` is ``Keyword("read")``), distinct from the string "read"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f":{str.__str__(self)}"


class Symbol(str):
    """An EDN symbol."""

    __slots__ = ()


@dataclass(frozen=True)
class Tagged:
    """An EDN tagged value ``#tag value``."""

    tag: str
    value: Any


# One alternative per token kind, in this group order: space (commas are space), comment,
# string, opener, closer, discard, tag, character, atom; anything else is an error.
_TOKEN = re.compile(r"""([\s,]+)|(;[^\n]*)|("(?:[^"\\]|\\.)*")|(\#\{|[\[{(])|([\]})])|(\#_)"""
                    r"""|(\#[A-Za-z][^\s,\[\]{}()"]*)|(\\(?:newline|space|tab|return|u[0-9a-fA-F]{4}|.))"""
                    r"""|([^\s,\[\]{}()";\\]+)|(.)""", re.DOTALL)
_INT = re.compile(r"[+-]?\d+N?")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\d*\.\d+|\d+)([eE][+-]?\d+)?M?")
_RATIO = re.compile(r"[+-]?\d+/\d+")
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r"}
_CLOSE = {"[": "]", "{": "}", "(": ")", "#{": "}"}
_ONE = object()
"""Marks a stack frame that takes one form: a tag's value, or a discarded form."""


def _atom(text: str, line: int, name: str) -> Any:
    if text == "nil":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text[0] == ":":
        return Keyword(text[1:])
    if _INT.fullmatch(text):
        return int(text.rstrip("N"))
    if _FLOAT.fullmatch(text):
        return float(text.rstrip("M"))
    if _RATIO.fullmatch(text):
        num, den = text.split("/")
        return int(num) / int(den)
    if text[0].isdigit() or (text[0] in "+-" and len(text) > 1 and text[1].isdigit()):
        raise HistoryFileError(f"{name}:{line}: bad number {text!r}")
    return Symbol(text)


def _close(items: list[Any], opener: str, line: int, name: str) -> Any:
    if opener == "{":
        if len(items) % 2:
            raise HistoryFileError(f"{name}:{line}: a map needs an even number of forms "
                                   "(key value pairs)")
        return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
    if opener == "#{":
        return frozenset(_hashable(x) for x in items)
    return items if opener == "[" else tuple(items)


def _read_forms(text: str, name: str) -> tuple[list[tuple[Any, int]], list[int]]:
    """Return the top-level forms of ``text`` with the line each starts on, and the lines
    of the elements of the first form when it is a vector or list.

    One pass over the tokens (``re.findall``) with an explicit stack: no recursion, no
    call per token, which keeps a 200,000-event history to seconds.
    """
    forms: list[tuple[Any, int]] = []
    first_lines: list[int] = []
    # frames: [items, opener, line, element lines] for a collection; [_ONE, tag, line] for
    # a tag (tag = its name) or a discard (tag = None)
    stack: list[list[Any]] = []
    atoms: dict[str, Any] = {}
    line = 1
    for ws, comment, string, opener, closer, discard, tag, char, atom, bad in _TOKEN.findall(
            text):
        if ws:
            line += ws.count("\n")
            continue
        if comment:
            continue
        start = line
        if atom:
            v = atoms.get(atom, _ONE)
            if v is _ONE:
                v = _atom(atom, line, name)
                if len(atoms) < 4096 and not isinstance(v, int | float):
                    atoms[atom] = v
        elif opener:
            stack.append([[], opener, line, []])
            continue
        elif closer:
            if not stack or stack[-1][0] is _ONE:
                raise HistoryFileError(f"{name}:{line}: unexpected {closer!r}; expected EDN "
                                       f"such as {EXAMPLE}")
            items, op, start, lines = stack.pop()
            if closer != _CLOSE[op]:
                raise HistoryFileError(f"{name}:{line}: {closer!r} closes the {op} opened on "
                                       f"line {start}; expected {_CLOSE[op]!r}")
            v = _close(items, op, start, name)
            if not stack and not forms and isinstance(v, list | tuple):
                first_lines = lines
        elif string:
            line += string.count("\n")
            try:
                v = json.loads(string)
            except ValueError:
                raise HistoryFileError(f"{name}:{start}: bad string {string[:30]!r}") from None
        elif discard or tag:
            stack.append([_ONE, tag[1:] if tag else None, line])
            continue
        elif char:
            body = char[1:]
            v = _CHARS.get(body, chr(int(body[1:], 16)) if len(body) == 5 and
                           body[0] == "u" else body)
        else:
            raise HistoryFileError(f"{name}:{line}: cannot read {bad!r}; expected EDN such "
                                   f"as {EXAMPLE}")
        # a complete value: feed it to the frames waiting for one
        while True:
            if not stack:
                forms.append((v, start))
                break
            top = stack[-1]
            if top[0] is _ONE:
                stack.pop()
                start = top[2]
                if top[1] is None:  # #_ discards the form
                    break
                v = Tagged(top[1], v)
                continue
            top[0].append(v)
            top[3].append(start)
            break
    if stack:
        top = stack[-1]
        what = "#_ or a tag" if top[0] is _ONE else f"the {top[1]} opened on line {top[2]}"
        raise HistoryFileError(f"{name}:{top[2]}: the file ends inside {what}")
    return forms, first_lines


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((repr(k), _hashable(x)) for k, x in v.items()))
    return v


def parse_edn(text: str, name: str = "<edn>") -> list[tuple[Any, int]]:
    """Return the top-level EDN forms of ``text`` with the line each starts on; raises
    HistoryFileError (``name:line: ...``) on malformed EDN."""
    return _read_forms(text, name)[0]


def _edn_events(path: Path, text: str) -> list[tuple[dict[str, Any], int]]:
    """Return the op maps of an EDN history (one per line, or one vector of maps) with
    their lines, keys as plain names."""
    forms, first_lines = _read_forms(text, str(path))
    if len(forms) == 1 and isinstance(forms[0][0], list | tuple):
        forms = list(zip(forms[0][0], first_lines, strict=True))
    out = []
    for form, line in forms:
        if isinstance(form, Tagged):
            form = form.value
        if not isinstance(form, dict):
            raise HistoryFileError(f"{path}:{line}: expected an op map like {EXAMPLE}, "
                                   f"got {_show(form)}")
        out.append(({_name(k): v for k, v in form.items()}, line))
    return out


def _name(k: Any) -> str:
    return str.__str__(k) if isinstance(k, str) else str(k)


def _show(v: Any, limit: int = 40) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


def _jsonl_events(path: Path, text: str) -> list[tuple[dict[str, Any], int]]:
    out = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError as err:
            raise HistoryFileError(f"{path}:{line_no}: not JSON ({err.msg}); expected one "
                                   'event per line like {"type": "invoke", "f": "read", '
                                   '"process": 0, "value": null, "time": 0}') from None
        if not isinstance(ev, dict):
            raise HistoryFileError(f"{path}:{line_no}: expected a JSON object per line, got "
                                   f"{_show(ev)}")
        out.append((ev, line_no))
    return out


def _kind(path: Path, text: str) -> str:
    """Return "jsonl" or "edn": by suffix, else by whether the first line is JSON."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".edn":
        return "edn"
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    try:
        json.loads(first)
    except ValueError:
        return "edn"
    return "jsonl"


def _word(v: Any) -> Any:
    """Return a keyword or a string as plain text (other values as they are)."""
    return str.__str__(v) if isinstance(v, str) else v


def _value(v: Any) -> Any:
    """Return an EDN/JSON value as the History keeps it: lists as tuples, keywords as
    text."""
    if isinstance(v, list | tuple):
        return tuple(_value(x) for x in v)
    if isinstance(v, Tagged):
        return _value(v.value)
    if isinstance(v, Keyword):
        return f":{str.__str__(v)}"
    return v


@dataclass
class _Open:
    row: int
    line: int
    f: str


def read_history(path: Path, independent: bool = False) -> tuple[History, list[int]]:
    """Return the History of the EDN or JSONL file ``path`` and, per row, the line of its
    invoke (or the invoke's position among the events, 1-based, when several events share
    a line); raises HistoryFileError naming the file and line of the first problem."""
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is not an op
    except UnicodeDecodeError:
        raise HistoryFileError(f"{path}: not a text file; expected Jepsen EDN or JSON "
                               "lines") from None
    except OSError as err:
        raise HistoryFileError(f"{path}: cannot read it ({err.strerror})") from None
    events = (_jsonl_events if _kind(path, text) == "jsonl" else _edn_events)(path, text)
    if not events:
        raise HistoryFileError(f"{path}:1: no events; expected op maps like {EXAMPLE}")
    lines_unique = len({ln for _, ln in events}) == len(events)
    h = History()
    ids: list[int] = []
    open_ops: dict[int, _Open] = {}
    for n, (ev, line) in enumerate(events, start=1):
        where = f"{path}:{line}"
        process = ev.get("process")
        if isinstance(process, bool) or not isinstance(process, int):
            continue  # :nemesis and other non-client processes
        typ = _word(ev.get("type"))
        if typ not in _TYPES:
            raise HistoryFileError(f"{where}: :type {_show(ev.get('type'))}; expected :invoke, "
                                   ":ok, :fail or :info")
        f = _word(ev.get("f"))
        if f not in _F:
            raise HistoryFileError(f"{where}: :f {_show(ev.get('f'))}; expected :read, :write "
                                   "or :cas")
        t = ev.get("time", n)
        if isinstance(t, bool) or not isinstance(t, int | float):
            raise HistoryFileError(f"{where}: :time {_show(t)}; expected a number (ns)")
        t = int(t)
        if typ == "invoke":
            if process in open_ops:
                raise HistoryFileError(
                    f"{where}: process {process} invokes again before its op on line "
                    f"{open_ops[process].line} completed; expected its :ok, :fail or :info")
            key, value = _key_value(ev, f, independent, where)
            consistency = _word(ev.get("consistency", "none"))
            expects: tuple[Any, ...] = ()
            if f == "cas" and len(value) == 2:  # [from to]; a bare value: from unknown
                expects, value = value[:1], value[1:]
            row = h.invoke(process, f, (key,), value, consistency if consistency in
                           CONSISTENCY_NAMES else "none", t, expects)
            open_ops[process] = _Open(row, line, f)
            ids.append(line if lines_unique else n)
            continue
        op = open_ops.pop(process, None)
        if op is None:
            raise HistoryFileError(f"{where}: a :{typ} of process {process} with no :invoke "
                                   "before it; expected the invoke first")
        if op.f != f:
            raise HistoryFileError(f"{where}: a :{typ} :{f} completes the :{op.f} invoked on "
                                   f"line {op.line}; expected :f :{op.f}")
        if t < h.invoke_ns[op.row]:
            raise HistoryFileError(f"{where}: completes at {t}, before its invoke on line "
                                   f"{op.line}; expected times that do not go back")
        if typ == "ok":
            values = None
            if f == "read":
                _, v = _key_value(ev, f, independent, where)
                values = v
            h.ok(op.row, t, values)
        elif typ == "fail":
            h.fail(op.row, t, _show(ev.get("error", "")))
        else:
            h.info(op.row, t, _show(ev.get("error", "")))
    return h, ids


def _key_value(ev: dict[str, Any], f: str, independent: bool, where: str
               ) -> tuple[Any, tuple[Any, ...]]:
    """Return (key, values as the History keeps them) of an event: a read or write one
    value, a cas (from, to) when given as a pair."""
    raw = ev.get("value")
    key: Any = None
    if "key" in ev:
        key = _value(ev["key"])
        if isinstance(key, tuple):
            raise HistoryFileError(f"{where}: an op on {len(key)} keys; expected one key per "
                                   "op (a register history)")
    elif independent:
        if not (isinstance(raw, list | tuple) and len(raw) == 2):
            raise HistoryFileError(f"{where}: :value {_show(raw)}; --model kv expects "
                                   "jepsen.independent [key value] tuples (or a :key field); "
                                   "for one register use --model register or cas-register")
        key, raw = _value(raw[0]), raw[1]
    v = _value(raw)
    if f == "cas" and isinstance(v, tuple):
        if len(v) != 2:
            raise HistoryFileError(f"{where}: cas :value {_show(raw)}; expected [from to]")
        return key, v
    if f != "cas" and isinstance(v, tuple):
        raise HistoryFileError(f"{where}: {f} :value {_show(raw)}; expected one value")
    return key, (v,)
