"""Export a History as Jepsen events (invoke + completion) in JSONL or EDN.

Other checkers (Elle, Knossos, Porcupine) read these; times are ns, as Jepsen's ``:time``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from replicalab.history.core import NEMESIS, History, Op
from replicalab.history.txn import edn_value


def _value(op: Op, values: tuple[str | None, ...]) -> Any:
    if op.f == "txn":  # Elle's [[:append k v] [:r k [..]]]
        return edn_value(op.keys, values)
    # a cas whose expected values were kept is Jepsen's [from to] (per key when several)
    if op.f == "cas" and len(op.expects) == len(values):
        pairs = [[e, v] for e, v in zip(op.expects, values, strict=True)]
        return pairs[0] if len(op.keys) == 1 else dict(zip(op.keys, pairs, strict=True))
    if len(op.keys) == 1:
        return values[0]
    return dict(zip(op.keys, values, strict=False))


def events(h: History) -> Iterator[dict[str, Any]]:
    """Yield Jepsen-style events ordered by time: each op's invoke, then its completion."""
    rows: list[tuple[int, int, dict[str, Any]]] = []
    for op in h:
        proc: Any = "nemesis" if op.process == NEMESIS else op.process
        key = op.keys[0] if len(op.keys) == 1 else list(op.keys)
        base = {"process": proc, "f": op.f, "key": key, "consistency": op.consistency}
        if op.f == "txn":  # the keys are in the value, as in Elle's histories
            base = {"process": proc, "f": op.f}
        inv_val = _value(op, op.values) if op.f != "read" else None
        if op.f == "txn":  # the invoke does not know what its reads will return
            inv_val = [[f, k, None if f == "r" else v] for f, k, v in inv_val]
        rows.append((op.invoke_ns, 2 * op.index,
                     {**base, "type": "invoke", "value": inv_val, "time": op.invoke_ns}))
        if op.type != "invoke":
            done = {**base, "type": op.type, "value": _value(op, op.values),
                    "time": op.complete_ns}
            if op.node:
                done["node"] = op.node
            if op.error:
                done["error"] = op.error
            rows.append((op.complete_ns, 2 * op.index + 1, done))
    rows.sort(key=lambda r: (r[0], r[1]))
    for i, (_, _, ev) in enumerate(rows):
        yield {"index": i, **ev}


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
