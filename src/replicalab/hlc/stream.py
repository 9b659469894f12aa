"""Streaming queries: evaluate a query over trace logs while they grow (seed 002, RQL).

Each log file is tailed for complete new lines.  A cut at HLC time ``T`` is *final* once every
log holds an event at or after ``T``: a node's HLC strictly grows, so no event at or before
``T`` can still arrive.  Final cuts are built and matched at once; at the end (``close``) the logs
are taken as complete and the remaining cuts are matched too, so the stream's matches equal the
batch matches on the same logs.  A node whose log stays silent holds back every later cut.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from replicalab.hlc.clock import Timestamp
from replicalab.hlc.cuts import CutBuilder
from replicalab.hlc.query import Match, Query
from replicalab.hlc.trace import Event, LogError, parse_event


@dataclass
class LogTail:
    """Reads the complete lines appended to one node's log since the last read."""

    path: Path
    offset_bytes: int = 0
    lineno: int = 0
    node: str | None = None
    last_seq: int | None = None
    _rest: bytes = field(default=b"", repr=False)

    def read(self, final: bool = False) -> list[Event]:
        """Return the events of the complete lines appended since the last call.

        With ``final`` a trailing line without a newline counts as complete.  A missing file
        reads as empty (its writer may not have started).  Raises LogError (``file:line``) on a
        malformed line; ``.partial`` holds the good events of this call before it.
        """
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset_bytes)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        except OSError as e:
            raise LogError(str(self.path), self.lineno, f"cannot read ({e.strerror})", []) \
                from None
        base = self.offset_bytes - len(self._rest)  # file offset of data[0]
        self.offset_bytes += len(data)
        data = self._rest + data
        lines = data.split(b"\n")
        self._rest = lines.pop()
        if final and self._rest.strip():
            lines.append(self._rest)
            self._rest = b""
        out: list[Event] = []
        consumed = 0
        for raw in lines:
            self.lineno += 1
            consumed += len(raw) + 1
            text = raw.decode("utf-8", errors="replace")
            if not text.strip():
                continue
            try:
                ev = parse_event(text)
            except ValueError as e:
                # the next read resumes right after the bad line
                self.offset_bytes, self._rest = min(base + consumed, self.offset_bytes), b""
                raise LogError(str(self.path), self.lineno, str(e), out) from None
            if self.node is not None and ev.node != self.node:
                raise LogError(str(self.path), self.lineno, f"event of node {ev.node!r} in the "
                               f"log of {self.node!r} (one file per node)", out)
            if self.last_seq is not None and ev.seq <= self.last_seq:
                raise LogError(str(self.path), self.lineno, f"seq {ev.seq} does not increase "
                               f"(previous {self.last_seq})", out)
            self.node, self.last_seq = ev.node, ev.seq
            out.append(ev)
        return out


class StreamQuery:
    """A query evaluated incrementally over growing log files (one file per node).

    The query's fields are checked against the variables seen so far when the first cut
    becomes final (QueryError on an unknown field).  Queries in ``also`` run over the same cuts;
    their matches collect in ``also_matches`` (one list per query) instead of being returned.
    """

    def __init__(self, query: Query, paths: Sequence[str | os.PathLike[str]],
                 also: Sequence[Query] = ()) -> None:
        self.query = query
        self.also = list(also)
        self.also_matches: list[list[Match]] = [[] for _ in self.also]
        self.tails = [LogTail(Path(p)) for p in paths]
        self.builder = CutBuilder()
        self.cuts_seen = 0
        self.events_seen = 0
        self._checked = False

    def frontier(self) -> Timestamp | None:
        """Return the latest HLC time up to which every cut is final (None: not yet)."""
        times = [self.builder.latest(t.node) if t.node is not None else None
                 for t in self.tails]
        if not times or any(t is None for t in times):
            return None
        return min(t for t in times if t is not None)

    def _ingest(self, final: bool) -> None:
        for tail in self.tails:
            try:
                events = tail.read(final)
            except LogError as e:
                self._add(tail, e.partial)  # keep what came before the bad line
                raise
            self._add(tail, events)

    def _add(self, tail: LogTail, events: list[Event]) -> None:
        for ev in events:
            if ev.node not in self.builder.nodes:
                self.builder.add_node(ev.node)
            self.builder.add(ev)
            self.events_seen += 1

    def _emit(self, limit: Timestamp | None) -> list[Match]:
        out = []
        for cut in self.builder.cuts(limit):
            if not self._checked:
                for q in (self.query, *self.also):
                    q.check(self.builder.fields)
                self._checked = True
            self.cuts_seen += 1
            m = self.query.match(cut)
            if m is not None:
                out.append(m)
            for q, found in zip(self.also, self.also_matches, strict=True):
                m = q.match(cut)
                if m is not None:
                    found.append(m)
        return out

    def poll(self) -> list[Match]:
        """Read what the logs gained and return the matches of the cuts that became final.

        Raises LogError on a malformed line: the events before it are kept and the next poll
        resumes after it.  Raises QueryError on an unknown field.
        """
        self._ingest(final=False)
        limit = self.frontier()
        return self._emit(limit) if limit is not None else []

    def close(self) -> list[Match]:
        """Take the logs as complete and return the matches of all remaining cuts."""
        self._ingest(final=True)
        return self._emit(None)


@dataclass(frozen=True)
class FollowStats:
    """How a bounded follow ended: matches, cuts and events seen, seconds spent, why it stopped."""

    matches: int
    cuts: int
    events: int
    elapsed_s: float
    stopped: str  # "max-seconds", "max-matches" or "idle"


def follow(stream: StreamQuery, *, max_seconds: float, max_matches: int | None = None,
           poll_interval_s: float = 0.05, idle_seconds: float | None = None,
           clock: Callable[[], float] = time.monotonic,
           sleep: Callable[[float], None] = time.sleep,
           flush_on_timeout: bool = False,
           on_stop: Callable[[FollowStats], None] | None = None) -> Iterator[Match]:
    """Yield matches as the logs grow, until ``max_seconds`` pass, ``max_matches`` are yielded
    or (with ``idle_seconds``) no log grows for that long.

    When the logs went idle (or ``flush_on_timeout`` is set and time ran out) they are taken as
    complete and the remaining cuts are matched too, within ``max_matches``; cuts that are not
    final when time runs out are otherwise left unmatched (their count stays in
    ``stream.builder.pending()``).  ``on_stop`` gets the stats.
    """
    start = clock()
    n = 0
    last_growth = start
    stopped = "max-seconds"
    while clock() - start < max_seconds:
        before = stream.events_seen
        for m in stream.poll():
            yield m
            n += 1
            if max_matches is not None and n >= max_matches:
                break
        if max_matches is not None and n >= max_matches:
            stopped = "max-matches"
            break
        now = clock()
        if stream.events_seen != before:
            last_growth = now
        elif idle_seconds is not None and now - last_growth >= idle_seconds:
            stopped = "idle"
            break
        sleep(poll_interval_s)
    if stopped == "idle" or (stopped == "max-seconds" and flush_on_timeout):
        for m in stream.close():
            if max_matches is not None and n >= max_matches:
                stopped = "max-matches"
                break
            yield m
            n += 1
    if on_stop is not None:
        on_stop(FollowStats(n, stream.cuts_seen, stream.events_seen, clock() - start, stopped))
