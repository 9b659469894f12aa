"""Per-node trace logs: one JSONL file per node, one HLC-stamped event per line.

A line looks like::

    {"node": "n1", "seq": 12, "pt_us": 1700000000123456, "l_us": 1700000000123460, "c": 0,
     "kind": "send", "msg": "n1->n2#7", "vars": {"x": 5}}

``pt_us`` is the node's physical clock, ``(l_us, c)`` its HLC timestamp, ``msg`` pairs a send
with its receive, ``vars`` holds the values of named variables after the event.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicalab.hlc.clock import Timestamp

KINDS = ("local", "send", "recv")
_INT_FIELDS = ("seq", "pt_us", "l_us", "c")


@dataclass(frozen=True)
class Event:
    """One traced event of one node; times in µs, ``(l_us, c)`` its HLC timestamp."""

    node: str
    seq: int
    pt_us: int
    l_us: int
    c: int
    kind: str
    msg: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)

    @property
    def hlc(self) -> Timestamp:
        """Return the HLC timestamp ``(l_us, c)`` (l in µs)."""
        return Timestamp(self.l_us, self.c)

    def to_json(self) -> str:
        """Return the event as one JSON line (no newline)."""
        return json.dumps({"node": self.node, "seq": self.seq, "pt_us": self.pt_us,
                           "l_us": self.l_us, "c": self.c, "kind": self.kind, "msg": self.msg,
                           "vars": self.vars}, separators=(",", ":"))


class LogError(ValueError):
    """A malformed trace-log line; the message names ``file:line`` and the problem.

    ``partial`` holds the events read before the bad line.
    """

    def __init__(self, path: str, line: int, problem: str, partial: list[Event]) -> None:
        super().__init__(f"{path}:{line}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem
        self.partial = partial


def parse_event(text: str) -> Event:
    """Return the Event encoded in one JSON line; raises ValueError naming the problem."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError("expected a JSON object")
    missing = [k for k in ("node", *_INT_FIELDS, "kind") if k not in obj]
    if missing:
        raise ValueError(f"missing field(s) {', '.join(missing)}")
    if not isinstance(obj["node"], str) or not obj["node"]:
        raise ValueError("field node must be a non-empty string")
    for k in _INT_FIELDS:
        v = obj[k]
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ValueError(f"field {k} must be a non-negative integer, got {v!r}")
    if obj["kind"] not in KINDS:
        raise ValueError(f"field kind must be one of {', '.join(KINDS)}, got {obj['kind']!r}")
    msg = obj.get("msg")
    if msg is not None and not isinstance(msg, str):
        raise ValueError(f"field msg must be a string or null, got {msg!r}")
    if obj["kind"] in ("send", "recv") and not msg:
        raise ValueError(f"a {obj['kind']} event needs a msg id")
    vars_ = obj.get("vars") or {}
    if not isinstance(vars_, dict):
        raise ValueError("field vars must be an object")
    unknown = set(obj) - {"node", *_INT_FIELDS, "kind", "msg", "vars"}
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
    return Event(obj["node"], obj["seq"], obj["pt_us"], obj["l_us"], obj["c"], obj["kind"],
                 msg, vars_)


def read_log(path: str | os.PathLike[str]) -> list[Event]:
    """Return the events of one node's JSONL log, in file order.

    Blank lines are skipped.  Raises LogError (``file:line: problem``, events so far in
    ``.partial``) on a malformed line, a line of another node, or a seq that does not increase.
    """
    name = str(path)
    events: list[Event] = []
    try:
        with Path(path).open(encoding="utf-8") as fh:
            _read_lines(name, fh, events)
    except OSError as e:
        raise LogError(name, 0, f"cannot read ({e.strerror})", events) from None
    return events


def _read_lines(name: str, lines: Iterable[str], events: list[Event]) -> None:
    for lineno, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        try:
            ev = parse_event(text)
        except ValueError as e:
            raise LogError(name, lineno, str(e), events) from None
        if events and ev.node != events[0].node:
            raise LogError(name, lineno, f"event of node {ev.node!r} in the log of "
                           f"{events[0].node!r} (one file per node)", events)
        if events and ev.seq <= events[-1].seq:
            raise LogError(name, lineno, f"seq {ev.seq} does not increase "
                           f"(previous {events[-1].seq})", events)
        events.append(ev)


def write_log(path: str | os.PathLike[str], events: Iterable[Event]) -> None:
    """Write ``events`` to ``path`` as JSONL, one event per line (overwrites)."""
    with Path(path).open("w", encoding="utf-8") as fh:
        for ev in events:
            fh.write(ev.to_json() + "\n")
