"""Trace alignment with HLC (seed 002): per-node clock offsets from HLC-stamped logs.

HLC time follows the fastest physical clock in the system (the *driver*): a node's ``l`` is the
largest ``pt`` in its causal past.  If node ``j``'s event ``b`` has ``l_b > pt_b``, some event
``x`` with ``x hb b`` (so ``x`` came first in true time) read ``pt_x = l_b`` on a clock no faster
than the driver's, hence the offset ``θ_j = skew_driver − skew_j`` is at least ``l_b − pt_b``.
The seed's alignment shifts each log by the smallest offset that removes every such violation,
``max(0, max_b(l_b − pt_b))``: n − 1 independent two-log alignments against the driver.

Message pairs bound the offset from both sides without any assumption about which clock is
fastest: a causal chain from ``x`` on ``j`` to ``a`` on the driver means ``x`` came first in true
time, so ``θ_j <= pt_a − pt_x``; a chain from ``a`` on the driver to ``b`` on ``j`` gives
``θ_j >= pt_a − pt_b``.  Each node thus gets an interval ``[low_us, high_us]`` holding the true
offset whenever no message takes negative time; the seed's estimate lies in it when the driver
really has the fastest clock (then it is itself a lower bound, at least ``low_us``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from replicalab.hlc.trace import Event


class AlignError(ValueError):
    """The logs cannot be aligned: they contradict HLC order or pair messages ambiguously."""


@dataclass(frozen=True)
class NodeOffset:
    """One node's offset: add ``offset_us`` to its pt to place it on the driver's timeline."""

    node: str
    offset_us: int          # the seed's estimate: the smallest shift the HLC condition allows
    low_us: int | None      # lower bound from causal chains from the driver; None if none
    high_us: int | None     # upper bound from causal chains to the driver; None if none
    evidence: int           # events whose l exceeded their pt (support of the lower bound)
    events: int


@dataclass(frozen=True)
class Alignment:
    """Per-node offsets relative to the driver, and what the logs' messages say about them."""

    driver: str
    driver_excess_us: int   # max(l − pt) on the driver: > 0 means it is not the fastest clock
    driver_candidates: tuple[str, ...]  # nodes equally likely to drive HLC (> 1: ambiguous)
    nodes: dict[str, NodeOffset]
    messages: int           # matched send/receive pairs
    unmatched_sends: int    # sent but not received within the logs
    unmatched_recvs: int    # received from a log that is not given
    violations_pt: int      # matched pairs whose receive precedes the send by raw pt
    violations_aligned: int  # the same after alignment

    def offset_us(self, node: str) -> int:
        """Return the estimated offset of ``node`` in µs."""
        return self.nodes[node].offset_us

    def aligned_us(self, ev: Event) -> int:
        """Return the event's time on the driver's timeline in µs."""
        return ev.pt_us + self.nodes[ev.node].offset_us

    def inconsistent(self) -> list[str]:
        """Return the nodes whose bounds cross (low > high): the model's assumptions fail."""
        return [n.node for n in self.nodes.values()
                if n.high_us is not None and n.low_us is not None and n.low_us > n.high_us]


def _check_order(logs: Mapping[str, Sequence[Event]]) -> tuple[dict[str, Event], dict[str, Event]]:
    """Return (sends, recvs) by msg id after checking per-node HLC order and pairing."""
    sends: dict[str, Event] = {}
    recvs: dict[str, Event] = {}
    for node, events in logs.items():
        prev: Event | None = None
        for ev in events:
            if ev.node != node:
                raise AlignError(f"event seq {ev.seq} of node {ev.node!r} is in the log of "
                                 f"{node!r}")
            if prev is not None and ev.hlc <= prev.hlc:
                raise AlignError(f"{node} seq {ev.seq}: HLC timestamp ({ev.l_us}, {ev.c}) does "
                                 f"not increase (previous ({prev.l_us}, {prev.c}))")
            prev = ev
            if ev.kind in ("send", "recv"):
                table = sends if ev.kind == "send" else recvs
                if ev.msg in table:
                    raise AlignError(f"message {ev.msg!r} is {ev.kind} twice "
                                     f"({table[ev.msg].node} and {node})")
                table[ev.msg] = ev  # type: ignore[index]
    for msg, r in recvs.items():
        s = sends.get(msg)
        if s is not None and r.hlc <= s.hlc:
            raise AlignError(f"message {msg!r}: the receive's HLC ({r.l_us}, {r.c}) is not "
                             f"after the send's ({s.l_us}, {s.c})")
    return sends, recvs


def _excess_us(events: Sequence[Event]) -> int:
    return max((ev.l_us - ev.pt_us for ev in events), default=0)


def driver_candidates(logs: Mapping[str, Sequence[Event]]) -> list[str]:
    """Return the nodes whose l exceeds their pt the least (sorted): the fastest clock is
    among them."""
    nonempty = [n for n, evs in logs.items() if evs]
    if not nonempty:
        raise AlignError("no events in any log")
    excess = {n: _excess_us(logs[n]) for n in nonempty}
    best = min(excess.values())
    return sorted(n for n in nonempty if excess[n] == best)


def pick_driver(logs: Mapping[str, Sequence[Event]]) -> str:
    """Return the node whose clock drives HLC: the one whose l exceeds its pt the least; ties go
    to the node whose pt values most often appear as l of other nodes' lagging events."""
    candidates = driver_candidates(logs)
    if len(candidates) == 1:
        return candidates[0]
    nonempty = [n for n, evs in logs.items() if evs]
    lagging = {ev.l_us for n in nonempty for ev in logs[n] if ev.l_us > ev.pt_us}

    def feeds(node: str) -> int:
        return len(lagging & {ev.pt_us for ev in logs[node]})

    return max(candidates, key=lambda n: (feeds(n), -candidates.index(n)))


def _causal_bounds_us(logs: Mapping[str, Sequence[Event]], driver: str
                      ) -> tuple[dict[str, int], dict[str, int]]:
    """Return (low, high) per node j: the largest pt_a − pt_b over a on the driver causally
    before b on j, and the least pt_a − pt_x over x on j causally before a on the driver."""
    merged = sorted((ev for evs in logs.values() for ev in evs),
                    key=lambda ev: (ev.l_us, ev.c, ev.node, ev.seq))
    latest: dict[str, dict[str, int]] = {n: {} for n in logs}  # node -> {node: max pt seen}
    at_send: dict[str, dict[str, int]] = {}
    high: dict[str, int] = {}
    low: dict[str, int] = {}
    for ev in merged:
        seen = latest[ev.node]
        if ev.kind == "recv" and ev.msg in at_send:
            for k, pt in at_send.pop(ev.msg).items():  # type: ignore[arg-type]
                if pt > seen.get(k, -1):
                    seen[k] = pt
        seen[ev.node] = ev.pt_us
        if ev.kind == "send":
            at_send[ev.msg] = dict(seen)  # type: ignore[index]
        if ev.node == driver:
            for k, pt in seen.items():
                if k != driver:
                    bound = ev.pt_us - pt
                    if bound < high.get(k, bound + 1):
                        high[k] = bound
        elif driver in seen:
            bound = seen[driver] - ev.pt_us
            if bound > low.get(ev.node, bound - 1):
                low[ev.node] = bound
    return low, high


def align(logs: Mapping[str, Sequence[Event]], driver: str | None = None) -> Alignment:
    """Return per-node offsets (µs, relative to the HLC driver) with bounds for these logs.

    ``logs`` maps node name to its events in log order.  ``driver`` defaults to ``pick_driver``.
    Raises AlignError when the logs break HLC order or pair a message ambiguously.
    """
    sends, recvs = _check_order(logs)
    drv = driver if driver is not None else pick_driver(logs)
    if drv not in logs:
        raise AlignError(f"driver {drv!r} is not one of the logs ({', '.join(sorted(logs))})")
    low, high = _causal_bounds_us(logs, drv)
    nodes: dict[str, NodeOffset] = {}
    for node, events in logs.items():
        if node == drv:
            nodes[node] = NodeOffset(node, 0, 0, 0, 0, len(events))
            continue
        estimate = max(0, _excess_us(events))
        evidence = sum(1 for ev in events if ev.l_us > ev.pt_us)
        nodes[node] = NodeOffset(node, estimate, low.get(node), high.get(node), evidence,
                                 len(events))
    pairs = [(s, recvs[m]) for m, s in sends.items() if m in recvs]
    off = {n: v.offset_us for n, v in nodes.items()}
    return Alignment(
        driver=drv,
        driver_excess_us=_excess_us(logs[drv]),
        driver_candidates=tuple(driver_candidates(logs)),
        nodes=nodes,
        messages=len(pairs),
        unmatched_sends=len(sends) - len(pairs),
        unmatched_recvs=sum(1 for m in recvs if m not in sends),
        violations_pt=sum(1 for s, r in pairs if r.pt_us < s.pt_us),
        violations_aligned=sum(1 for s, r in pairs
                               if r.pt_us + off[r.node] < s.pt_us + off[s.node]),
    )


def alignment_errors(alignment: Alignment, true_offsets_us: Mapping[str, int]) -> dict[str, float]:
    """Return per non-driver node the relative error |true − estimate| / |true| (the seed's
    1 − adjustment / skew); nodes with a true offset of 0 are left out (error undefined)."""
    out: dict[str, float] = {}
    for node, n in alignment.nodes.items():
        if node == alignment.driver:
            continue
        truth = true_offsets_us[node]
        if truth != 0:
            out[node] = abs(truth - n.offset_us) / abs(truth)
    return out
