"""Read Jepsen-style histories from files: EDN (one op map per line, or one vector of
maps), JSON lines (our ``export --format jsonl``) and Jepsen's log lines (``INFO
jepsen.util - 3 :invoke :cas [1 2]``, the form of Knossos's and Porcupine's test corpora),
and Porcupine's JSON (an array of operations ``{"ClientId", "Input", "Call", "Output",
"Return"}`` or of call/return events, :func:`porcupine_ops`), into :class:`FileOp`
records: plain data, no numpy, so a short check starts fast.

Each event has a type (``:invoke``, ``:ok``, ``:fail``, ``:info``), an ``:f`` (any name:
the model decides what it takes), a ``:process`` and a ``:value``, and optionally
``:time`` (ns), ``:index``, ``:key`` (our export) and ``:consistency``. An invoke is
paired with the next completion of the same process, as Jepsen does; an invoke left open
becomes an op that never completed (``info``). With ``lone_completions=True`` a
completion with no invoke before it (a history of completions only, as Elle's README shows
them) is an op of its own whose invoke is unknown (``FileOp.invoked`` False; its invoke
time is the history's first, the earliest it can have been); without it, an error.
Events of a process that is not an integer (``:nemesis``) are left out and counted
(``FileHistory.skipped``). An op's value is its ``:ok``
completion's (a read's result), else its invoke's. With ``tuples=True``
(``jepsen.independent``, the ``kv`` model) values are ``[key value]`` tuples unless the
event has a ``:key``.

A history without ``:time`` (Knossos's and Porcupine's corpora) is ordered by its lines:
each op's times are then the lines of its invoke and completion (``FileHistory.timed`` is
False), so explanations name lines, never invented times.

Malformed input raises :class:`HistoryFileError` naming the file, the line and what was
expected. The EDN reader is a small one of its own (maps, vectors, lists, sets, keywords,
strings, numbers, nil/true/false, symbols, tagged values such as
``#jepsen.history.Op{...}``, comments and ``#_`` discards); a flat map on one line, what
Jepsen writes, is read by one regular expression.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from replicalab.errors import MODEL, InputError
from replicalab.records import record

EXAMPLE = "{:type :invoke, :f :read, :process 0, :value nil, :time 0}"
_TYPES = ("invoke", "ok", "fail", "info")


class HistoryFileError(InputError):
    """A history file that cannot be read: the message names the file, the line and what
    was expected (and, for one the model cannot take, ``{model}`` the model that would:
    :class:`~replicalab.errors.InputError`)."""


class Keyword(str):
    """An EDN keyword (``:read`` is ``Keyword("read")``), distinct from the string "read"."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f":{str.__str__(self)}"


class Symbol(str):
    """An EDN symbol."""

    __slots__ = ()


@record(frozen=True)
class Tagged:
    """An EDN tagged value ``#tag value``."""

    tag: str
    value: Any


class FileOp(NamedTuple):
    """One operation of a history file: ``line`` of its invoke (its position among the
    events, 1-based, when several events share a line); ``f`` as written; ``key`` None
    unless given; ``value`` as the history keeps it (vectors as tuples, keywords as
    ":name"); ``outcome`` ok / fail / info (info too for an invoke never completed);
    times in ns, or lines for a history without times (``complete_ns`` -1: never
    completed). A named tuple rather than a dataclass: a history holds thousands, and
    the native reader's rows are made FileOps without a call each."""

    line: int
    process: int
    f: str
    key: Any
    value: Any
    outcome: str
    invoke_ns: int
    complete_ns: int
    error: str = ""
    complete_line: int = -1
    """The position of its completion event (as ``line``; -1: never completed)."""
    invoked: bool = True
    """False for a completion with no invoke in the history (its invoke is unknown)."""


class FileHistory(NamedTuple):
    """The ops of a history file in invoke order, whether its events had ``:time`` (if
    not, times are lines), and how many events of non-client processes (``:nemesis``)
    were left out."""

    ops: list[FileOp]
    timed: bool
    skipped: int = 0


# One alternative per token kind, in this group order: space (commas are space), comment,
# string, opener, closer, discard, tag, character, atom; anything else is an error. Compiled
# on first use (re's cache), by the full reader only: a log or flat EDN file never needs it.
_TOKEN = (r"""([\s,]+)|(;[^\n]*)|("(?:[^"\\]|\\.)*")|(\#\{|[\[{(])|([\]})])|(\#_)"""
          r"""|(\#[A-Za-z][^\s,\[\]{}()"]*)|(\\(?:newline|space|tab|return|u[0-9a-fA-F]{4}|.))"""
          r"""|([^\s,\[\]{}()";\\]+)|(.)""")

# the patterns below too are compiled on first use: a log file needs none of them
_INT = r"[+-]?\d+N?"
_FLOAT = r"[+-]?(\d+\.\d*|\d*\.\d+|\d+)([eE][+-]?\d+)?M?"
_RATIO = r"[+-]?\d+/\d+"
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
    if re.fullmatch(_INT, text):
        return int(text.rstrip("N"))
    if re.fullmatch(_FLOAT, text):
        return float(text.rstrip("M"))
    if re.fullmatch(_RATIO, text):
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
    call per token.
    """
    import json  # json is loaded where a form of it is read: a log file needs none

    forms: list[tuple[Any, int]] = []
    first_lines: list[int] = []
    # frames: [items, opener, line, element lines] for a collection; [_ONE, tag, line] for
    # a tag (tag = its name) or a discard (tag = None)
    stack: list[list[Any]] = []
    atoms: dict[str, Any] = {}
    line = 1
    for ws, comment, string, opener, closer, discard, tag, char, atom, bad in re.findall(
            _TOKEN, text, re.DOTALL):
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


# A flat op map on one line: {:k v, ...} with v nil, a boolean, an integer, a string
# without escapes, a keyword or a vector of such atoms (no strings, maps or sets inside):
# what Jepsen writes, read without the tokenizer. Anything else takes the full reader.
_KW = r"[A-Za-z*+!?_][\w.*+!?$%&=<>/-]*"
_SIMPLE = rf'nil|true|false|-?\d+|"[^"\\]*"|:{_KW}'
_VALUE = rf"{_SIMPLE}|\[[^\[\]{{}}()\"#\\;]*\]"
_FLAT_MAP = rf"\s*\{{(?:[\s,]*:{_KW}\s+(?:{_VALUE}))*[\s,]*\}}\s*"
_PAIR = rf":({_KW})\s+({_VALUE})"
_VEC_ATOM = r"[^\s,]+"


def _flat_value(text: str, cache: dict[str, Any]) -> Any:
    v = cache.get(text, _ONE)
    if v is not _ONE:
        return v
    c = text[0]
    if c == '"':
        v = text[1:-1]
    elif c == ":":
        v = Keyword(text[1:])
    elif c == "[":
        v = [_flat_value(a, cache) for a in re.findall(_VEC_ATOM, text[1:-1])]
        if any(x is _ONE for x in v):
            return _ONE
        return v  # a fresh list each time: not cached
    elif text == "nil":
        v = None
    elif text in ("true", "false"):
        v = text == "true"
    elif re.fullmatch(_INT, text):
        v = int(text)
    else:
        return _ONE  # an atom the flat reader does not know: the full reader takes it
    if len(cache) < 4096:
        cache[text] = v
    return v


def _flat_map(line: str, cache: dict[str, Any]) -> dict[str, Any] | None:
    """Return the op map on ``line`` if it is a flat one (see _FLAT_MAP), else None."""
    if not re.fullmatch(_FLAT_MAP, line):
        return None
    out = {}
    for k, raw in re.findall(_PAIR, line):
        v = _flat_value(raw, cache)
        if v is _ONE:
            return None
        out[k] = v
    return out


def _edn_events(path: Path, text: str) -> list[tuple[dict[str, Any], int]]:
    """Return the op maps of an EDN history (one per line, or one vector of maps) with
    their lines, keys as plain names."""
    cache: dict[str, Any] = {}
    out: list[tuple[dict[str, Any], int]] = []
    lines = text.splitlines()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        m = _flat_map(line, cache)
        if m is None:
            out = []
            break
        out.append((m, n))
    else:
        return out
    forms, first_lines = _read_forms(text, str(path))
    if len(forms) == 1 and isinstance(forms[0][0], list | tuple):
        forms = list(zip(forms[0][0], first_lines, strict=True))
    for form, line_no in forms:
        if isinstance(form, Tagged):
            form = form.value
        if not isinstance(form, dict):
            raise HistoryFileError(f"{path}:{line_no}: expected an op map like {EXAMPLE}, "
                                   f"got {_show(form)}")
        out.append(({_name(k): v for k, v in form.items()}, line_no))
    return out


try:  # the native core's reader of Jepsen log lines (native/src/jepsen_log.rs)
    from replicalab_native import read_jepsen_log as _native_read_log
except ImportError:  # not built, or an older build: the Python reader below reads them
    _native_read_log = None
try:  # the same, as a register's columns and no row per op (a build of issue 39 or later)
    from replicalab_native import read_jepsen_log_register as _native_read_register
except ImportError:
    _native_read_register = None


def _native_log(text: str, tuples: bool) -> tuple[list[tuple[Any, ...]], int] | None:
    """Return (rows in FileOp's field order, events of non-client processes left out) of
    Jepsen log lines read by the native core, or None: the core is missing, or the file
    holds something it leaves to :func:`_log_events` and :func:`_pair` (a value other than
    nil, a boolean, an integer, a keyword, a plain string or a flat vector of those; a
    completion with no invoke; malformed input, which they name). Where it answers, its
    ops are theirs (tests/test_history_native_read.py)."""
    if _native_read_log is None:
        return None
    return _native_read_log(text, tuples)


_LOG = re.compile(r"jepsen\.util\s+-\s+(\S+)\s+:(\S+)\s+:(\S+)\s*(.*?)\s*$")

Event = tuple[Any, Any, Any, Any, bool, Any, Any, int]
"""One event as the pairing takes it: (process, type, f, value (``_MISSING`` when the
event has none), whether it has a ``:key``, the key, ``:time`` (None: none), line)."""
_MISSING = object()
LONE_PROCESS_BASE = 1 << 40
"""Processes given to completions that name none (``lone_completions``): one per op, above
any process a history names."""


def _log_events(path: Path, text: str) -> list[Event]:
    """Return the events of Jepsen's log lines (``INFO jepsen.util - 3 :invoke :cas [1
    2]``): process, type, f and the value as EDN; other lines are left out."""
    cache: dict[str, Any] = {}
    flat: dict[str, Any] = {}
    procs: dict[str, Any] = {}
    out: list[Event] = []
    add = out.append
    search = _LOG.search
    for n, line in enumerate(text.splitlines(), start=1):
        m = search(line)
        if m is None:
            continue
        proc, typ, f, raw = m.groups()
        process = procs.get(proc)
        if process is None:
            process = procs[proc] = int(proc) if proc.isdigit() else Keyword(proc.lstrip(":"))
        value = cache.get(raw, _ONE)
        if value is _ONE:
            if not raw:
                value = None
            else:
                value = _flat_value(raw, flat)
                if value is _ONE:
                    forms = parse_edn(raw, f"{path}:{n}")
                    value = forms[0][0] if forms else None
            value = _value(value)
            if len(cache) < 4096:
                cache[raw] = value
        add((process, typ, f, value, False, None, None, n))
    return out


def _from_maps(maps: list[tuple[dict[str, Any], int]]) -> list[Event]:
    """Return EDN or JSON op maps as events; an independent ``[k v]`` tuple whose values
    were numbered on export (``history/export.py``) takes its recorded value back from
    ``:replicalab/value``."""
    out: list[Event] = []
    for ev, line in maps:
        has_key = "key" in ev
        raw = ev.get("value", _MISSING)
        original = ev.get("replicalab/value", _MISSING)
        if original is not _MISSING and isinstance(raw, list | tuple) and len(raw) == 2:
            raw = [raw[0], original]
        out.append((ev.get("process"), _word(ev.get("type")), _word(ev.get("f")),
                    raw if raw is _MISSING else _value(raw), has_key,
                    _value(ev["key"]) if has_key else None, ev.get("time"), line))
    return out


def _name(k: Any) -> str:
    return str.__str__(k) if isinstance(k, str) else str(k)


def edn_text(v: Any) -> str:
    """Return ``v`` written as EDN, the way Jepsen histories write it (``nil``, ``true``,
    ``"text"``, ``:keyword``, ``[1 2]``, ``#{1}``, ``{:k 1}``), for messages: never a
    Python repr such as ``None`` or ``frozenset({1})``."""
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Keyword):
        return f":{str.__str__(v)}"
    if isinstance(v, Symbol):
        return str.__str__(v)
    if isinstance(v, str):
        import json

        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Tagged):
        return f"#{v.tag} {edn_text(v.value)}"
    if isinstance(v, list | tuple):
        return "[" + " ".join(edn_text(x) for x in v) + "]"
    if isinstance(v, set | frozenset):
        return "#{" + " ".join(sorted(edn_text(x) for x in v)) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{edn_text(k)} {edn_text(x)}" for k, x in v.items()) + "}"
    return str(v)


def _show(v: Any, limit: int = 40) -> str:
    text = edn_text(v)
    return text if len(text) <= limit else text[:limit] + "..."


def _jsonl_events(path: Path, text: str) -> list[tuple[dict[str, Any], int]]:
    import json

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


def read_events(path: Path) -> list[tuple[dict[str, Any], int]]:
    """Return the op maps of an EDN or JSON lines history file, each with its line: keys
    as plain names, values as read (EDN vectors as lists, keywords as :class:`Keyword`);
    raises HistoryFileError naming the file and line of malformed input."""
    try:
        text = path.read_text(encoding="utf-8").lstrip("\ufeff")
    except (OSError, UnicodeDecodeError) as err:
        raise HistoryFileError(f"{path}: cannot read it ({err}); expected Jepsen EDN or "
                               "JSON lines") from None
    return (_jsonl_events if _kind(path, text) == "jsonl" else _edn_events)(path, text)


_LINE_END = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
"""Where str.splitlines() ends a line."""


def _kind(path: Path, text: str) -> str:
    """Return "jsonl", "edn" or "log": Jepsen's log lines when the first line is one, else
    by suffix, else by whether the first line is JSON."""
    # the first line that is not blank (its leading spaces aside), without splitting the
    # whole file
    stripped = text.lstrip()
    end = _LINE_END.search(stripped)
    first = stripped[:end.start()] if end else stripped
    if _LOG.search(first) and not first.lstrip().startswith(("{", "[")):
        return "log"
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return "jsonl"
    if suffix == ".edn":
        return "edn"
    import json

    try:
        json.loads(first)
    except ValueError:
        return "edn"
    return "jsonl"


def _word(v: Any) -> Any:
    """Return a keyword or a string as plain text (other values as they are)."""
    return str.__str__(v) if isinstance(v, str) else v


def _value(v: Any) -> Any:
    """Return an EDN/JSON value as the history keeps it: lists as tuples, keywords as
    text."""
    if isinstance(v, list | tuple):
        return tuple(_value(x) for x in v)
    if isinstance(v, Tagged):
        return _value(v.value)
    if isinstance(v, Keyword):
        return f":{str.__str__(v)}"
    return v


def read_register_log(path: Path, data: bytes | None = None
                      ) -> tuple[list[bytes], list[Any]] | None:
    """Return the Jepsen log file ``path`` (``data``: its bytes, already read) as one
    register's columns, without an op object per line: ``(columns, values)`` as
    ``replicalab_native.read_jepsen_log_register`` gives them (``Columns.args()``'s eight
    int64 columns and the ops' processes; ``values[id]`` the value behind an id); or None
    — the native core lacks it, the file is not log lines, or the reader leaves it to
    :func:`read_ops` (which reads it, or names its problem)."""
    if _native_read_register is None:
        return None
    try:
        text = (path.read_bytes() if data is None else data).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None  # read_ops says what is wrong
    text = text.removeprefix("\ufeff")
    if not text.strip() or _kind(path, text) != "log":
        return None
    return _native_read_register(text)


def read_ops(path: Path, tuples: bool = False, lone_completions: bool = False,
             default_f: str | None = None, data: bytes | None = None) -> FileHistory:
    """Return the ops of the EDN, JSONL or Jepsen log file ``path`` in invoke order (see
    the module docstring; ``lone_completions``: accept completions without an invoke;
    ``default_f``: the ``:f`` of an event that has none, as Elle's README histories of
    transactions; ``data``: the file's bytes, already read); raises HistoryFileError
    naming the file and line of the first problem."""
    try:
        text = (path.read_bytes() if data is None else data).decode("utf-8")
        if text.startswith("\ufeff"):
            text = text[1:]  # a byte-order mark is not an op
    except UnicodeDecodeError:
        raise HistoryFileError(f"{path}: not a text file; expected Jepsen EDN, JSON lines "
                               "or Jepsen log lines") from None
    except OSError as err:
        raise HistoryFileError(f"{path}: cannot read it ({err.strerror})") from None
    if not text.strip():
        return FileHistory([], False)  # an empty history (Porcupine's corpus has one)
    whole = _json_array(text)
    if whole is not None:
        if whole and all(isinstance(x, dict) and _porcupine_shaped(x) for x in whole):
            return porcupine_ops(path, whole, tuples)
        if not all(isinstance(x, dict) for x in whole):
            bad = next(x for x in whole if not isinstance(x, dict))
            raise HistoryFileError(f"{path}: a JSON array of {_show(bad)}; expected op maps "
                                   'like {"type": "invoke", "f": "read", "process": 0} or '
                                   'Porcupine operations like {"ClientId": 0, "Input": ..., '
                                   '"Call": 0, "Output": ..., "Return": 5}')
        events = _from_maps([(x, n) for n, x in enumerate(whole, start=1)])
        if not events:
            raise HistoryFileError(f"{path}:1: no events; expected op maps like {EXAMPLE}")
        return _pair(path, events, tuples, lone_completions, default_f)
    kind = _kind(path, text)
    if kind == "log":
        native = _native_log(text, tuples)
        if native is not None:
            rows, skipped = native
            new = tuple.__new__  # the rows are FileOps' fields, in order
            return FileHistory([new(FileOp, row) for row in rows], False, skipped)
        events = _log_events(path, text)
    else:
        events = _from_maps((_jsonl_events if kind == "jsonl" else _edn_events)(path, text))
    if not events:
        raise HistoryFileError(f"{path}:1: no events; expected op maps like {EXAMPLE}")
    return _pair(path, events, tuples, lone_completions, default_f)


def _json_array(text: str) -> list[Any] | None:
    """Return the file as one JSON array, if it is one (else None: EDN, JSON lines)."""
    if not text.lstrip().startswith("["):
        return None
    import json

    try:
        doc = json.loads(text)
    except ValueError:
        return None  # an EDN vector of maps
    return doc if isinstance(doc, list) else None


# -- Porcupine's histories ----------------------------------------------------------------

_PORCUPINE_OP = {"clientid", "input", "call", "output", "return"}
_PORCUPINE_EVENT = {"clientid", "kind", "value", "id"}
_PORCUPINE_F = {0: "read", 1: "write", 2: "append"}
"""Porcupine's key-value test's op codes (its ``kvInput.op``: get, put, append), named as
every register model takes them."""
_PORCUPINE_NAMES = {"get": "read", "put": "write"}
_NEVER = 2**63 - 1
"""A Return this large (Porcupine's math.MaxInt64) marks an op whose outcome is unknown."""


def _lower(d: dict[str, Any]) -> dict[str, Any]:
    return {str(k).lower(): v for k, v in d.items()}


def _porcupine_shaped(d: dict[str, Any]) -> bool:
    keys = {str(k).lower() for k in d}
    return keys >= _PORCUPINE_OP or keys >= _PORCUPINE_EVENT


def _porcupine_f(inp: Any, where: str) -> str:
    """Return the op's name from a Porcupine Input: ``Op``/``F`` as a name (get and put
    read as read and write), as the kv test's code (0 get, 1 put, 2 append) or as the
    register test's bool (true get)."""
    code = _lower(inp).get("op", _lower(inp).get("f")) if isinstance(inp, dict) else None
    if isinstance(code, bool):
        return "read" if code else "write"
    if isinstance(code, int) and code in _PORCUPINE_F:
        return _PORCUPINE_F[code]
    if isinstance(code, str) and code:
        return _PORCUPINE_NAMES.get(code.lower(), code.lower())
    raise HistoryFileError(f"{where}: Input {_show(inp)}; expected an object with \"Op\" "
                           '(0 get, 1 put, 2 append, or a name such as "read", "write", '
                           '"cas"), "Key" and "Value"')


def _porcupine_op(where: str, line: int, process: Any, inp: Any, out: Any, call: Any,
                  ret: Any, tuples: bool) -> FileOp:
    """Return one Porcupine operation as a FileOp (see :func:`porcupine_ops`)."""
    if isinstance(process, bool) or not isinstance(process, int):
        raise HistoryFileError(f"{where}: ClientId {_show(process)}; expected an integer")
    if isinstance(call, bool) or not isinstance(call, int | float):
        raise HistoryFileError(f"{where}: Call {_show(call)}; expected a time (an integer)")
    f = _porcupine_f(inp, where)
    i = _lower(inp)
    o = _lower(out) if isinstance(out, dict) else {"value": out}
    key = _value(i["key"]) if "key" in i else None
    if tuples and key is None:
        raise HistoryFileError(f"{where}: Input {_show(inp)} has no \"Key\"; kv checks one "
                               "register per key (for one register use {model} register or "
                               "cas-register)", MODEL)
    if f == "read":
        value = _value(o.get("value"))
    elif f == "cas":
        value = _value(i["value"]) if "value" in i else (_value(i.get("from")),
                                                          _value(i.get("to")))
    else:
        value = _value(i.get("value"))
    unknown = bool(o.get("unknown")) or ret is None or (
        isinstance(ret, int | float) and ret >= _NEVER)
    if not unknown and (isinstance(ret, bool) or not isinstance(ret, int | float)
                        or ret < call):
        raise HistoryFileError(f"{where}: Return {_show(ret)}; expected a time not before "
                               f"its Call ({call})")
    return FileOp(line, process, f, key, value, "info" if unknown else "ok", int(call),
                  -1 if unknown else int(ret), "unknown outcome" if unknown else "")


def porcupine_ops(path: Path, items: list[dict[str, Any]], tuples: bool) -> FileHistory:
    """Return the ops of a history in Porcupine's JSON form: an array of operations
    ``{"ClientId", "Input", "Call", "Output", "Return"}`` (times: Call and Return), or of
    events ``{"ClientId", "Kind" (0 or "call", 1 or "return"), "Value", "Id"}`` (untimed:
    the array orders them). An Input holds ``Op`` (a name, the kv test's code 0 get / 1 put
    / 2 append, or the register test's bool, true get), ``Key`` and ``Value`` (a cas:
    ``Value`` [from, to], or ``From`` and ``To``); a read's result is the Output's
    ``Value`` (or the Output itself); an Output with ``Unknown`` true, or a Return of
    2^63-1 (Porcupine's way), is an op that may have happened (``info``). Field names are
    read in any case. ``line`` is the op's position in the array, 1-based."""
    first = _lower(items[0])
    if set(first) >= _PORCUPINE_OP:
        ops = []
        for n, item in enumerate(items, start=1):
            d = _lower(item)
            ops.append(_porcupine_op(f"{path}: operation {n}", n, d.get("clientid"),
                                     d.get("input"), d.get("output"), d.get("call"),
                                     d.get("return"), tuples))
        ops.sort(key=lambda op: (op.invoke_ns, op.line))
        return FileHistory(ops, True)
    calls: dict[Any, tuple[int, dict[str, Any]]] = {}
    done: list[FileOp] = []
    for n, item in enumerate(items, start=1):
        d = _lower(item)
        kind = d.get("kind")
        if kind in (0, "call", "CallEvent"):
            if d.get("id") in calls:
                raise HistoryFileError(f"{path}: event {n}: a second call with Id "
                                       f"{_show(d.get('id'))}; expected one call per Id")
            calls[d.get("id")] = (n, d)
        elif kind in (1, "return", "ReturnEvent"):
            start = calls.pop(d.get("id"), None)
            if start is None:
                raise HistoryFileError(f"{path}: event {n}: a return with Id "
                                       f"{_show(d.get('id'))} and no call before it; "
                                       "expected its call first")
            line, c = start
            done.append(_porcupine_op(f"{path}: event {line}", line, c.get("clientid"),
                                      c.get("value"), d.get("value"), line, n, tuples))
        else:
            raise HistoryFileError(f"{path}: event {n}: Kind {_show(kind)}; expected 0 "
                                   '("call") or 1 ("return")')
    for line, c in calls.values():  # never returned: may have happened, or not
        done.append(_porcupine_op(f"{path}: event {line}", line, c.get("clientid"),
                                  c.get("value"), {"unknown": True}, line, None, tuples))
    done.sort(key=lambda op: op.line)
    return FileHistory(done, False)


def _pair(path: Path, events: list[Event], tuples: bool, lone_completions: bool = False,
          default_f: str | None = None) -> FileHistory:
    """Return the ops of ``events``: each invoke paired with its process's next completion
    (a completion without one is an op of its own if ``lone_completions``)."""
    timed = any(ev[6] is not None for ev in events)
    lines_unique = len({ev[7] for ev in events}) == len(events)
    first_t = _first_time(events, timed)
    out: list[FileOp | None] = []
    # per open op: (slot in out, line, f, key, value, time)
    open_ops: dict[int, tuple[int, int, str, Any, Any, int]] = {}
    skipped = 0
    for n, (process, typ, f, value, has_key, key, t, line) in enumerate(events, start=1):
        if process is None and typ == "invoke":
            raise HistoryFileError(f"{path}:{line}: an :invoke without a :process; expected "
                                   "the process that invokes it (its completion names the "
                                   "same one)")
        if process is None and lone_completions:
            # Elle's README writes completions with neither :process nor :f: each is an op
            # of its own, so each gets a process of its own
            process = LONE_PROCESS_BASE + n
        if isinstance(process, bool) or not isinstance(process, int):
            skipped += 1  # :nemesis and other non-client processes
            continue
        if typ not in _TYPES:
            said = "no :type" if typ is None else f":type {_show(typ)}"
            raise HistoryFileError(f"{path}:{line}: {said}; expected :invoke, :ok, :fail or "
                                   ":info")
        if f is None and default_f is not None:
            f = default_f
        if not isinstance(f, str) or not f:
            said = "no :f" if f is None else f":f {_show(f)}"
            raise HistoryFileError(f"{path}:{line}: {said}; expected the op's name "
                                   "(:read, :write, :cas, :append, :enqueue, ...)")
        pos = line if lines_unique else n
        if timed:
            if isinstance(t, bool) or not isinstance(t, int | float):
                raise HistoryFileError(f"{path}:{line}: :time {_show(t)}; expected a number "
                                       "(ns) on every event, or on none")
            t = int(t)
        else:
            t = pos  # no times: the line orders the events
        if typ == "invoke":
            if process in open_ops:
                raise HistoryFileError(
                    f"{path}:{line}: process {process} invokes again before its op on line "
                    f"{open_ops[process][1]} completed; expected its :ok, :fail or :info")
            if has_key or tuples:
                key, value = _key_value(has_key, key, value, tuples, f"{path}:{line}")
            open_ops[process] = (len(out), pos, f, key, None if value is _MISSING else value, t)
            out.append(None)
            continue
        op = open_ops.pop(process, None)
        if op is None and not lone_completions:
            raise HistoryFileError(f"{path}:{line}: a :{typ} of process {process} with no "
                                   ":invoke before it; expected the invoke first")
        if op is None:  # a completion on its own (a history of completions only)
            if has_key or tuples:
                key, value = _key_value(has_key, key, value, tuples, f"{path}:{line}")
            v = None if value is _MISSING else value
            error = "" if typ == "ok" else _show(v if v is not None else "")
            out.append(FileOp(pos, process, f, key if has_key or tuples else None, v, typ,
                              first_t, t, error, pos, invoked=False))
            continue
        slot, inv_line, inv_f, inv_key, inv_value, inv_t = op
        if inv_f != f:
            raise HistoryFileError(f"{path}:{line}: a :{typ} :{f} completes the :{inv_f} "
                                   f"invoked on line {inv_line}; expected :f :{inv_f}")
        if t < inv_t:
            raise HistoryFileError(f"{path}:{line}: completes at {t}, before its invoke on "
                                   f"line {inv_line}; expected times that do not go back")
        v = inv_value
        if typ == "ok" and value is not _MISSING:
            if has_key or tuples:
                _, value = _key_value(has_key, key, value, tuples, f"{path}:{line}")
            if value is not None or v is None:
                v = value  # the completion's value: a read's result
        error = "" if typ == "ok" else _show(value if value is not _MISSING else "")
        out[slot] = FileOp(inv_line, process, f, inv_key, v, typ, inv_t, t, error, pos)
    for process, (slot, inv_line, f, key, value, t) in open_ops.items():
        # never completed: may have happened, or not
        out[slot] = FileOp(inv_line, process, f, key, value, "info", t, -1, "never completed")
    return FileHistory([o for o in out if o is not None], timed, skipped)


def _first_time(events: list[Event], timed: bool) -> int:
    """Return the earliest instant of the history: its smallest ``:time``, or 0 (before
    the first line) when it has none."""
    if not timed:
        return 0
    ts = [ev[6] for ev in events if isinstance(ev[6], int | float)
          and not isinstance(ev[6], bool)]
    return int(min(ts)) if ts else 0


def _key_value(has_key: bool, key: Any, value: Any, tuples: bool, where: str
               ) -> tuple[Any, Any]:
    """Return (key, value) of an event: its ``:key`` field, or the key of an independent
    ``[key value]`` tuple when ``tuples``."""
    if has_key:
        if isinstance(key, tuple):
            raise HistoryFileError(f"{where}: an op on {len(key)} keys; expected one key per "
                                   "op")
        return key, value
    if not (isinstance(value, tuple) and len(value) == 2):
        raise HistoryFileError(f"{where}: :value {_show(value)}; kv expects "
                               "jepsen.independent [key value] tuples (or a :key field); "
                               "for one register use {model} register or cas-register", MODEL)
    return value[0], value[1]
