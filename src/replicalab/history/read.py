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
from collections.abc import Iterator
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


_TOKEN = re.compile(r"""
    (?P<ws>[\s,]+)
  | (?P<comment>;[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<open>\#\{|[\[{(])
  | (?P<close>[\]})])
  | (?P<discard>\#_)
  | (?P<tag>\#[A-Za-z][^\s,\[\]{}()"]*)
  | (?P<char>\\(?:newline|space|tab|return|u[0-9a-fA-F]{4}|.))
  | (?P<atom>[^\s,\[\]{}()";]+)
""", re.VERBOSE | re.DOTALL)
_INT = re.compile(r"[+-]?\d+N?")
_FLOAT = re.compile(r"[+-]?(\d+\.\d*|\d*\.\d+|\d+)([eE][+-]?\d+)?M?")
_RATIO = re.compile(r"[+-]?\d+/\d+")
_CHARS = {"newline": "\n", "space": " ", "tab": "\t", "return": "\r"}
_CLOSE = {"[": "]", "{": "}", "(": ")", "#{": "}"}


class _Parser:
    """EDN forms from text, each with the line it starts on."""

    def __init__(self, text: str, name: str) -> None:
        self.text = text
        self.name = name
        self.pos = 0
        self.line = 1

    def error(self, line: int, what: str) -> HistoryFileError:
        return HistoryFileError(f"{self.name}:{line}: {what}")

    def _next(self) -> tuple[str, str, int] | None:
        """Return (kind, text, line) of the next token that is not space or a comment."""
        while self.pos < len(self.text):
            m = _TOKEN.match(self.text, self.pos)
            if m is None:
                raise self.error(self.line, f"cannot read {self.text[self.pos:self.pos + 20]!r}"
                                 f"; expected EDN such as {EXAMPLE}")
            kind, tok, line = m.lastgroup or "", m.group(), self.line
            self.pos = m.end()
            self.line += tok.count("\n")
            if kind not in ("ws", "comment"):
                return kind, tok, line
        return None

    def forms(self) -> Iterator[tuple[Any, int]]:
        """Yield each top-level form with its line."""
        while True:
            tok = self._next()
            if tok is None:
                return
            yield self._form(tok), tok[2]

    def _need(self, line: int, what: str) -> tuple[str, str, int]:
        tok = self._next()
        if tok is None:
            raise self.error(line, f"the file ends inside {what}")
        return tok

    def _form(self, tok: tuple[str, str, int]) -> Any:
        kind, text, line = tok
        if kind == "open":
            return self._collection(text, line)
        if kind == "close":
            raise self.error(line, f"unexpected {text!r}; expected EDN such as {EXAMPLE}")
        if kind == "str":
            try:
                return json.loads(text)
            except ValueError:
                raise self.error(line, f"bad string {text[:30]!r}") from None
        if kind == "discard":
            self._form(self._need(line, "#_"))
            return self._form(self._need(line, "a form after #_"))
        if kind == "tag":
            return Tagged(text[1:], self._form(self._need(line, text)))
        if kind == "char":
            body = text[1:]
            return _CHARS.get(body, chr(int(body[1:], 16)) if len(body) == 5 and
                              body[0] == "u" else body)
        return self._atom(text, line)

    def _collection(self, opener: str, line: int) -> Any:
        closer = _CLOSE[opener]
        items: list[Any] = []
        while True:
            tok = self._need(line, f"the {opener} opened on line {line}")
            if tok[0] == "close":
                if tok[1] != closer:
                    raise self.error(tok[2], f"{tok[1]!r} closes the {opener} opened on line "
                                     f"{line}; expected {closer!r}")
                break
            if tok[0] == "discard":
                self._form(self._need(tok[2], "#_"))
                continue
            items.append(self._form(tok))
        if opener == "{":
            if len(items) % 2:
                raise self.error(line, "a map needs an even number of forms (key value pairs)")
            return {_hashable(items[i]): items[i + 1] for i in range(0, len(items), 2)}
        if opener == "#{":
            return frozenset(_hashable(x) for x in items)
        return items if opener == "[" else tuple(items)

    def _atom(self, text: str, line: int) -> Any:
        if text == "nil":
            return None
        if text in ("true", "false"):
            return text == "true"
        if text.startswith(":"):
            return Keyword(text[1:])
        if _INT.fullmatch(text):
            return int(text.rstrip("N"))
        if _FLOAT.fullmatch(text):
            return float(text.rstrip("M"))
        if _RATIO.fullmatch(text):
            num, den = text.split("/")
            return int(num) / int(den)
        if text[0].isdigit() or (text[0] in "+-" and len(text) > 1 and text[1].isdigit()):
            raise self.error(line, f"bad number {text!r}")
        return Symbol(text)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((repr(k), _hashable(x)) for k, x in v.items()))
    return v


def parse_edn(text: str, name: str = "<edn>") -> list[tuple[Any, int]]:
    """Return the top-level EDN forms of ``text`` with the line each starts on; raises
    HistoryFileError (``name:line: ...``) on malformed EDN."""
    return list(_Parser(text, name).forms())


def _edn_events(path: Path, text: str) -> list[tuple[dict[str, Any], int]]:
    """Return the op maps of an EDN history (one per line, or one vector of maps) with
    their lines, keys as plain names."""
    p = _Parser(text, str(path))
    forms = list(p.forms())
    if len(forms) == 1 and isinstance(forms[0][0], list | tuple):
        # one vector of maps: find each element's line by parsing it again element-wise
        p2 = _Parser(text, str(path))
        tok = p2._next()
        assert tok is not None
        items = []
        while True:
            t = p2._need(tok[2], "the vector of ops")
            if t[0] == "close":
                break
            items.append((p2._form(t), t[2]))
        forms = items
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
        text = path.read_text()
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
