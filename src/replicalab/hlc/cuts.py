"""Consistent cuts over HLC-stamped per-node logs (Retroscope style, seed 002).

The cut at HLC time ``T`` holds, on every node, every event stamped at or before ``T``.  It is
consistent because HLC keeps the clock condition (``e hb f`` implies ``hlc(e) < hlc(f)``): a
receive at or before ``T`` has its send strictly before it, so the send is in the cut too, and a
node's events are a prefix of its log because its HLC strictly grows.  There is one cut per
distinct HLC time in the logs; each carries the state of every variable on every node, where a
node's state is its ``vars`` merged over its events so far (a variable keeps its last value).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from replicalab.hlc.clock import Timestamp
from replicalab.hlc.trace import Event, LogError, read_log


class CutError(ValueError):
    """The logs cannot be cut: a node's HLC does not grow, or one node appears twice."""


@dataclass(frozen=True)
class Cut:
    """The global state at HLC time ``time`` (``l`` in µs).

    ``state[node][var]`` is the variable's value on that node after its last event in the cut
    (absent when the node has not set it yet); ``seqs[node]`` is that last event's ``seq``
    (None: the node has no event at or before ``time``).
    """

    time: Timestamp
    state: Mapping[str, Mapping[str, Any]]
    seqs: Mapping[str, int | None]

    def values(self, var: str) -> dict[str, Any]:
        """Return ``{node: value}`` of ``var`` on the nodes where it is set in this cut."""
        return {n: s[var] for n, s in self.state.items() if var in s}


class CutBuilder:
    """Builds cuts incrementally from events of a fixed set of nodes.

    Events of one node must be added in log order.  ``cuts(limit)`` applies every added event
    stamped at or before ``limit`` (all of them with ``limit=None``) and yields one cut per
    distinct HLC time, in time order; later calls continue where the last one stopped.
    """

    def __init__(self, nodes: Iterable[str] = ()) -> None:
        self._state: dict[str, dict[str, Any]] = {}
        self._seqs: dict[str, int | None] = {}
        self._last: dict[str, Timestamp] = {}
        self._heap: list[tuple[int, int, str, int, Event]] = []
        self.fields: set[str] = set()
        for n in nodes:
            self.add_node(n)

    def add_node(self, node: str) -> None:
        """Add a node (empty state); cuts yielded from now on include it."""
        if node in self._state:
            raise CutError(f"node {node!r} has more than one log; give one file per node")
        self._state[node] = {}
        self._seqs[node] = None

    @property
    def nodes(self) -> list[str]:
        """Return the node names, in the order given."""
        return list(self._state)

    def add(self, ev: Event) -> None:
        """Queue one event; raises CutError if its node is unknown or its HLC does not grow."""
        if ev.node not in self._state:
            raise CutError(f"event of unknown node {ev.node!r} (known: "
                           f"{', '.join(self._state)})")
        ts = Timestamp(ev.l_us, ev.c)
        prev = self._last.get(ev.node)
        if prev is not None and ts <= prev:
            raise CutError(f"HLC of node {ev.node!r} does not grow at seq {ev.seq}: "
                           f"({ts.l}, {ts.c}) after ({prev.l}, {prev.c})")
        self._last[ev.node] = ts
        self.fields.update(ev.vars)
        heapq.heappush(self._heap, (ev.l_us, ev.c, ev.node, ev.seq, ev))

    def latest(self, node: str) -> Timestamp | None:
        """Return the HLC time of the last event added for ``node`` (None: none yet)."""
        return self._last.get(node)

    def pending(self) -> int:
        """Return how many added events are not yet in a yielded cut."""
        return len(self._heap)

    def cuts(self, limit: Timestamp | None = None) -> Iterator[Cut]:
        """Yield the cuts at every queued HLC time ``<= limit`` (all with None), in order."""
        heap = self._heap
        while heap and (limit is None or Timestamp(heap[0][0], heap[0][1]) <= limit):
            l_us, c = heap[0][0], heap[0][1]
            while heap and heap[0][0] == l_us and heap[0][1] == c:
                ev = heapq.heappop(heap)[4]
                self._state[ev.node].update(ev.vars)
                self._seqs[ev.node] = ev.seq
            yield Cut(Timestamp(l_us, c), {n: dict(s) for n, s in self._state.items()},
                      dict(self._seqs))


def nodes_of(logs: Iterable[list[Event]]) -> list[str]:
    """Return the node of each non-empty log, in order; raises CutError on a repeated node."""
    out: list[str] = []
    for events in logs:
        if not events:
            continue
        node = events[0].node
        if node in out:
            raise CutError(f"node {node!r} has more than one log; give one file per node")
        out.append(node)
    return out


def consistent_cuts(logs: list[list[Event]]) -> Iterator[Cut]:
    """Yield the consistent cut at every distinct HLC time of ``logs`` (one list per node)."""
    builder = CutBuilder(nodes_of(logs))
    for events in logs:
        for ev in events:
            builder.add(ev)
    yield from builder.cuts()


def is_consistent(cut: Cut, logs: list[list[Event]]) -> bool:
    """Return True when every receive in ``cut`` has its send in ``cut`` too.

    A node's events in the cut are those with ``seq`` up to ``cut.seqs[node]``.
    """
    included: list[Event] = []
    for events in logs:
        for ev in events:
            last = cut.seqs.get(ev.node)
            if last is not None and ev.seq <= last:
                included.append(ev)
    sent = {ev.msg for ev in included if ev.kind == "send"}
    return all(ev.msg in sent for ev in included if ev.kind == "recv")


def load_logs(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[list[Event]], LogError | None]:
    """Return the events of every log (one list per file) and the first LogError met.

    A malformed file keeps the events before its bad line; the other files are read in full.
    """
    logs: list[list[Event]] = []
    first: LogError | None = None
    for path in paths:
        try:
            logs.append(read_log(path))
        except LogError as e:
            logs.append(e.partial)
            first = first or e
    return logs, first
