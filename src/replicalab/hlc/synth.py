"""Synthetic multi-node traces with known clock skews, stamped by real HLC clocks (seed 002).

Time advances in integer ticks (1 tick = 1 µs in the logs).  Node ``j``'s physical clock reads
``base_us + t + skew_j`` at true tick ``t``.  At every tick each node first receives the messages
due, then sends one message to a random peer with probability ``p_message`` and records a local
event with probability ``p_event``.  A message takes a uniform whole number of ticks in
``latency_ticks``; messages still in flight at the end are sent but never received.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

from replicalab.hlc.clock import HLC, Timestamp
from replicalab.hlc.trace import Event

BASE_US = 1_700_000_000_000_000


@dataclass(frozen=True)
class SynthConfig:
    """Parameters of one synthetic trace (all times in ticks)."""

    skews_ticks: tuple[int, ...]          # true clock offset of each node: pt = t + skew
    latency_ticks: tuple[int, int] = (3, 10)  # inclusive range of one-way message latency
    p_event: float = 0.4                   # chance of a local event per node per tick
    p_message: float = 0.05                # chance of a send per node per tick
    length_ticks: int = 200                # simulated duration
    seed: int = 1
    base_us: int = BASE_US

    def __post_init__(self) -> None:
        if len(self.skews_ticks) < 2:
            raise ValueError("need at least two nodes")
        lo, hi = self.latency_ticks
        if not 0 <= lo <= hi:
            raise ValueError(f"latency range must satisfy 0 <= min <= max, got {lo}..{hi}")
        for name in ("p_event", "p_message"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {p}")
        if self.length_ticks < 1:
            raise ValueError("length_ticks must be >= 1")


@dataclass(frozen=True)
class SynthTrace:
    """Per-node logs plus the truth: each node's skew in ticks (= µs)."""

    logs: dict[str, list[Event]]
    skews_us: dict[str, int]
    messages_sent: int
    messages_received: int

    def true_offsets_us(self, reference: str) -> dict[str, int]:
        """Return per node the µs to add to its pt to land on ``reference``'s clock."""
        ref = self.skews_us[reference]
        return {node: ref - skew for node, skew in self.skews_us.items()}

    def fastest(self) -> str:
        """Return the node with the fastest clock (the one that drives HLC)."""
        return max(self.skews_us, key=lambda n: self.skews_us[n])


def node_names(n: int) -> list[str]:
    """Return the names n1..nN used for synthetic nodes."""
    return [f"n{i + 1}" for i in range(n)]


def generate(cfg: SynthConfig) -> SynthTrace:
    """Return a synthetic trace for ``cfg``; same config, same trace."""
    rng = random.Random(cfg.seed)
    names = node_names(len(cfg.skews_ticks))
    now = {"t": 0}
    clocks = {name: HLC(lambda s=skew: cfg.base_us + now["t"] + s)
              for name, skew in zip(names, cfg.skews_ticks, strict=True)}
    logs: dict[str, list[Event]] = {name: [] for name in names}
    value = dict.fromkeys(names, 0)
    sent_count = dict.fromkeys(names, 0)
    # (arrival tick, tie-breaker, destination, msg id, sender timestamp)
    in_flight: list[tuple[int, int, str, str, Timestamp]] = []
    order = 0
    received = 0

    def record(name: str, kind: str, msg: str | None, ts_l: int, ts_c: int) -> None:
        log = logs[name]
        log.append(Event(name, len(log) + 1, clocks[name].physical_us(), ts_l, ts_c, kind, msg,
                         {"x": value[name]}))

    lo, hi = cfg.latency_ticks
    for t in range(cfg.length_ticks):
        now["t"] = t
        while in_flight and in_flight[0][0] <= t:
            _, _, dst, msg, ts = heapq.heappop(in_flight)
            got = clocks[dst].update(ts)
            record(dst, "recv", msg, got.l, got.c)
            received += 1
        for name in names:
            if rng.random() < cfg.p_message:
                dst = rng.choice([m for m in names if m != name])
                sent_count[name] += 1
                msg = f"{name}->{dst}#{sent_count[name]}"
                ts = clocks[name].now()
                record(name, "send", msg, ts.l, ts.c)
                order += 1
                heapq.heappush(in_flight, (t + rng.randint(lo, hi), order, dst, msg, ts))
            if rng.random() < cfg.p_event:
                value[name] += rng.choice((-1, 1))
                ts = clocks[name].now()
                record(name, "local", None, ts.l, ts.c)
    return SynthTrace(logs, dict(zip(names, cfg.skews_ticks, strict=True)),
                      sum(sent_count.values()), received)


def spread_skews(n: int, max_skew_ticks: int, seed: int) -> tuple[int, ...]:
    """Return ``n`` skews: one node at ``max_skew_ticks``, one at 0, the rest uniform between,
    in a random node order (the seed's "two nodes with the maximum skew difference")."""
    rng = random.Random(seed)
    skews = [max_skew_ticks, 0] + [rng.randint(0, max_skew_ticks) for _ in range(n - 2)]
    rng.shuffle(skews)
    return tuple(skews)
