"""A History as Jepsen events (invoke + completion) in EDN or JSON lines, and back.

Jepsen's conventions, so Knossos, Elle and Porcupine read what we write:

* one op map per line, ``:index`` the event's position, ``:time`` in ns, ``:type``
  (``:invoke``, ``:ok``, ``:fail``, ``:info``) and ``:f`` as keywords, ``:process`` an
  integer (``:nemesis`` for the fault injector);
* a register op on one key is a ``jepsen.independent`` tuple, ``:value [k v]`` (a read's
  invoke ``[k nil]``, a cas ``[k [from to]]``), its values plain integers: each distinct
  value of a key is numbered 1, 2, ... in the order of the ops' invokes (nil stays nil),
  as a Jepsen register test writes small integers; an op on several keys is a map
  ``{k v}``;
* a transaction is Elle's ``[[:append k v] [:r k [..]]]``;
* besides them each event may carry ``:consistency``, ``:node``, ``:error`` and, for an op
  whose values were numbered, ``:replicalab/value``: the values as recorded (probe values
  such as ``"1.0@0"``). Other tools ignore fields they do not know; :func:`read_history`
  reads them, so a history exported and read back is the same History (lossless).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from replicalab.history.core import NEMESIS, History, Op
from replicalab.history.txn import edn_value, encode_txn

ORIGINAL = "replicalab/value"
"""The field holding an op's values as recorded, where ``:value`` holds them numbered."""


class _Numbers:
    """Plain integers for the values of each key: 1, 2, ... in order of first use."""

    def __init__(self) -> None:
        self.by_key: dict[str, dict[str, int]] = {}

    def __call__(self, key: str, value: str | None) -> int | None:
        if value is None:
            return None
        seen = self.by_key.setdefault(key, {})
        return seen.setdefault(value, len(seen) + 1)


def _shaped(op: Op, values: Sequence[Any], expects: Sequence[Any]) -> Any:
    """Return ``values`` (one per key) in the shape of a Jepsen ``:value``: ``[k v]`` for
    one key (``[k [from to]]`` for a cas that kept its expected value), ``{k v}`` for
    several."""
    cas = op.f == "cas" and len(expects) == len(values)
    each = [[e, v] for e, v in zip(expects, values, strict=True)] if cas else list(values)
    if len(op.keys) == 1:
        return [op.keys[0], each[0]]
    return dict(zip(op.keys, each, strict=False))


def _register_value(op: Op, values: tuple[str | None, ...], number: _Numbers
                    ) -> tuple[Any, Any]:
    """Return (``:value``, ``:replicalab/value`` or None) of a register op's event."""
    expects = [number(k, e) for k, e in zip(op.keys, op.expects, strict=False)]
    plain = [number(k, v) for k, v in zip(op.keys, values, strict=False)]
    shaped = _shaped(op, plain, expects)
    if all(v is None for v in values) and all(e is None for e in op.expects):
        return shaped, None
    original = _shaped(op, values, op.expects)
    return shaped, original[1] if len(op.keys) == 1 else original


def _nemesis_value(op: Op) -> Any:
    if len(op.keys) == 1:
        return [op.keys[0], op.values[0] if op.values else None]
    return dict(zip(op.keys, op.values, strict=False))


def events(h: History) -> Iterator[dict[str, Any]]:
    """Yield Jepsen events ordered by time (see the module docstring): each op's invoke,
    then its completion."""
    rows: list[tuple[int, int, dict[str, Any]]] = []
    number = _Numbers()
    for op in sorted(h, key=lambda o: (o.invoke_ns, o.index)):  # values numbered as seen
        proc: Any = "nemesis" if op.process == NEMESIS else op.process
        extra: dict[str, Any] = {}
        if op.consistency != "none":
            extra["consistency"] = op.consistency
        if op.f == "txn":
            inv: Any = edn_value(op.keys, op.values)
            done: Any = inv
            inv = [[f, k, None if f == "r" else v] for f, k, v in inv]
            inv_orig = done_orig = None
        elif op.process == NEMESIS:
            inv = done = _nemesis_value(op)
            inv_orig = done_orig = None
        else:
            # a read's invoke does not know what it will return: [k nil]
            blank = tuple(None for _ in op.keys) if op.f == "read" else op.values
            inv, inv_orig = _register_value(op, blank, number)
            done, done_orig = _register_value(op, op.values, number)
            if op.f == "read" and any(v is not None for v in op.values) and op.type == "invoke":
                inv_orig = done_orig  # what the row holds, kept for the way back
        rows.append((op.invoke_ns, 2 * op.index, _event(
            proc, op.f, "invoke", inv, op.invoke_ns, extra, inv_orig)))
        if op.type != "invoke":
            if op.node:
                extra = {**extra, "node": op.node}
            if op.error:
                extra = {**extra, "error": op.error}
            rows.append((op.complete_ns, 2 * op.index + 1, _event(
                proc, op.f, op.type, done, op.complete_ns, extra, done_orig)))
    rows.sort(key=lambda r: (r[0], r[1]))
    for i, (_, _, ev) in enumerate(rows):
        yield {"index": i, **ev}


def _event(process: Any, f: str, typ: str, value: Any, time_ns: int, extra: dict[str, Any],
           original: Any) -> dict[str, Any]:
    ev = {"process": process, "f": f, "type": typ, "value": value, "time": time_ns, **extra}
    if original is not None:
        ev[ORIGINAL] = original
    return ev


def record_events(cols: Mapping[str, Sequence[Any]]) -> Iterator[dict[str, Any]]:
    """Yield Jepsen-style events ordered by time from a record of rows that are not
    register operations (a queue run's: ``kind`` is the event's ``f``; ``process``,
    ``invoke_ns``, ``complete_ns``, ``outcome`` as in a History, every other column kept as
    a field of the ``value`` map)."""
    kinds, procs = cols["kind"], cols["process"]
    inv, comp, outcome = cols["invoke_ns"], cols["complete_ns"], cols["outcome"]
    fields = [c for c in cols if c not in ("kind", "process", "invoke_ns", "complete_ns",
                                           "outcome")]
    rows: list[tuple[int, int, dict[str, Any]]] = []
    for i in range(len(kinds)):
        value = {c: cols[c][i] for c in fields if cols[c][i] not in ("", None)}
        base = {"process": procs[i], "f": kinds[i], "value": value}
        rows.append((inv[i], 2 * i, {**base, "type": "invoke", "time": inv[i]}))
        if outcome[i] != "invoke":
            rows.append((comp[i], 2 * i + 1, {**base, "type": outcome[i], "time": comp[i]}))
    rows.sort(key=lambda r: (r[0], r[1]))
    for n, (_, _, ev) in enumerate(rows):
        yield {"index": n, **ev}


def write_jsonl(evs: Iterable[dict[str, Any]], path: Path) -> int:
    """Write ``evs`` as JSON lines to ``path``; return the number of events."""
    n = 0
    with path.open("w") as out:
        for ev in evs:
            out.write(json.dumps(ev) + "\n")
            n += 1
    return n


def to_jsonl(h: History, path: Path) -> int:
    """Write events as JSON lines to ``path``; return the number of events."""
    return write_jsonl(events(h), path)


def _edn(v: Any) -> str:
    if v is None:
        return "nil"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + " ".join(_edn(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_edn(k)} {_edn(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as EDN")


def _edn_txn(mops: list[list[Any]]) -> str:
    # micro-op names are keywords in Elle's histories: [[:append 5 3] [:r 5 [1 2]]]
    return "[" + " ".join(f"[:{f} {_edn(k)} {_edn(v)}]" for f, k, v in mops) + "]"


_KEYWORD_FIELDS = {"type", "f", "consistency"}


def to_edn(h: History, path: Path) -> int:
    """Write events as one EDN map per line (Jepsen's history.edn); return the count."""
    return write_edn(events(h), path)


def write_edn(evs: Iterable[dict[str, Any]], path: Path) -> int:
    """Write ``evs`` as one EDN map per line; return the count."""
    n = 0
    with path.open("w") as out:
        for ev in evs:
            parts = []
            for k, v in ev.items():
                if k in _KEYWORD_FIELDS or (k == "process" and v == "nemesis"):
                    parts.append(f":{k} :{v}")
                elif k == "value" and ev.get("f") == "txn" and isinstance(v, list):
                    parts.append(f":value {_edn_txn(v)}")
                else:
                    parts.append(f":{k} {_edn(v)}")
            out.write("{" + ", ".join(parts) + "}\n")
            n += 1
    return n


# -- the way back ---------------------------------------------------------------------------


def _plain(v: Any) -> Any:
    """Return a value read from a file as the History keeps it: text or None."""
    if v is None or isinstance(v, str):
        return v
    return str(v) if not isinstance(v, tuple | list) else [_plain(x) for x in v]


def _keys_values(ev: Mapping[str, Any], cas: bool) -> tuple[tuple[str, ...],
                                                          tuple[str | None, ...],
                                                          tuple[str | None, ...]]:
    """Return (keys, values, expects) of a register or nemesis event: its ``[k v]`` tuple or
    ``{k v}`` map, with the recorded values (``:replicalab/value``) where it has them."""
    value, original = ev.get("value"), ev.get(ORIGINAL)
    if isinstance(value, Mapping):
        keys = tuple(str(k) for k in value)
        each = list(original.values()) if isinstance(original, Mapping) else list(
            value.values())
    elif isinstance(value, tuple | list) and len(value) == 2:
        keys = (str(value[0]),)
        each = [original if ORIGINAL in ev else value[1]]
    else:
        raise ValueError(f":value {value!r}: expected a [key value] tuple or a {{key value}} "
                         "map")
    if cas and all(isinstance(x, tuple | list) and len(x) == 2 for x in each):
        return keys, tuple(_plain(x[1]) for x in each), tuple(_plain(x[0]) for x in each)
    return keys, tuple(_plain(x) for x in each), ()


def _txn_row(value: Any) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    """Return the History row's (keys, values) of an Elle ``:value``."""
    mops = [(str(f).lstrip(":"), str(k), list(v) if isinstance(v, tuple | list) else v)
            for f, k, v in value]
    return encode_txn(mops)


def read_history(path: Path) -> History:
    """Return the History of a file written by :func:`to_edn` or :func:`to_jsonl`: the
    same History, row for row, for a history whose rows were recorded in order of their
    invoke times (every run's). A Jepsen history of register ops or transactions reads as
    well (integer values as text). Raises ValueError naming the file and line of an event
    that is not such an op."""
    from replicalab.history.read import read_events

    h = History()
    open_rows: dict[Any, int] = {}
    for ev, line in read_events(path):
        process = ev.get("process")
        process = NEMESIS if process == ":nemesis" or process == "nemesis" else process
        typ, f = str(ev.get("type", "")).lstrip(":"), str(ev.get("f", "")).lstrip(":")
        try:
            if f == "txn":
                keys, values = _txn_row(ev.get("value") or ())
                expects: tuple[str | None, ...] = ()
            else:
                keys, values, expects = _keys_values(ev, f == "cas")
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}:{line}: {err}") from None
        t = int(ev.get("time", 0))
        if typ == "invoke":
            consistency = str(ev.get("consistency", "none")).lstrip(":")
            open_rows[process] = h.invoke(process, f, keys, values, consistency, t, expects)
            continue
        row = open_rows.pop(process, None)
        if row is None:
            raise ValueError(f"{path}:{line}: a :{typ} of process {process} with no :invoke "
                             "before it")
        node, error = str(ev.get("node", "")), str(ev.get("error", ""))
        h.values[row], h.expects[row] = values, expects or h.expects[row]
        if typ == "ok":
            h.ok(row, t, values, node)
        elif typ == "fail":
            h.fail(row, t, error, node)
        else:
            h.info(row, t, error)
    return h
