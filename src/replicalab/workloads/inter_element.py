"""Inter-element consistency (seed 003 §3.2, Table 3): write X and Y, read both, classify.

Placement: X and Y in the same item, in different items of one domain, or in different
domains. Writing: one call (PutAttributes/BatchPutAttributes) or two calls. Reading: two
single reads or one multi-element read (GetAttributes/Select). Each read pair in the
0-450 ms window after the round's first write is A (both fresh), B (X fresh only),
C (Y fresh only) or D (both stale).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replicalab.checkers.extract import element_ops
from replicalab.errors import ParameterError
from replicalab.history import History, encode_value
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Feature, Store
from replicalab.workloads.base import Flag, ProbeOptions, Workload, deadline, envelope
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.slots import Slots

PLACEMENTS = ("same-item", "same-domain", "diff-domains")
WRITES = ("two-calls", "one-call")
READS = ("two-single", "one-multi")
WINDOW_MS = (0.0, 450.0)


@dataclass(frozen=True)
class Combination:
    """Where X and Y live and how they are written and read."""

    placement: str = "same-item"
    write: str = "one-call"
    read: str = "one-multi"

    def keys(self, tag: int = 0) -> tuple[str, str]:
        """Return the element addresses of X and Y; ``tag`` keeps combinations apart."""
        return {
            "same-item": (f"c{tag}/item/x", f"c{tag}/item/y"),
            "same-domain": (f"c{tag}/item1/x", f"c{tag}/item2/y"),
            "diff-domains": (f"c{tag}x/item/x", f"c{tag}y/item/y"),
        }[self.placement]

    def feasible(self, features: frozenset[Feature]) -> str | None:
        """Return why this combination cannot run on a store, or None if it can."""
        if self.placement == "diff-domains" and "one" in (self.write + self.read):
            return "one call cannot span two domains"
        if self.write == "one-call" and Feature.ATOMIC_MULTI_WRITE not in features:
            return "the store has no atomic multi-element write"
        if self.read == "one-multi" and Feature.MULTI_READ not in features:
            return "the store has no multi-element read"
        return None


def parse_combinations(placement: str, write: str, read: str) -> list[Combination]:
    """Return the combinations selected by the options (each may be ``all``)."""
    choices = []
    for value, allowed, name in ((placement, PLACEMENTS, "placement"),
                                 (write, WRITES, "write_mode"), (read, READS, "read_mode")):
        if value != "all" and value not in allowed:
            raise ParameterError(name, f"{value!r}: use all or one of {', '.join(allowed)}")
        choices.append(allowed if value == "all" else (value,))
    return [Combination(p, w, r) for p, w, r in itertools.product(*choices)]


@dataclass(frozen=True)
class InterElementConfig:
    """Which combinations to run; each field may be ``all``."""

    placement: str = "all"
    write_mode: str = "all"
    read_mode: str = "all"

    def combinations(self) -> list[Combination]:
        """Return the selected combinations (ValueError names a bad option)."""
        return parse_combinations(self.placement, self.write_mode, self.read_mode)

    def check(self) -> None:
        """Raise ValueError naming a bad option."""
        self.combinations()


def skipped(cfg: InterElementConfig, features: frozenset[Feature]) -> dict[Combination, str]:
    """Return {combination: why} for those a store with ``features`` cannot run."""
    return {c: why for c in cfg.combinations() if (why := c.feasible(features))}


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: InterElementConfig,
                   rec: Recorder) -> None:
    """Run every feasible combination of ``cfg`` side by side, each on its own elements."""
    skip = skipped(cfg, store.info.features)
    await store.runtime.gather(*(
        generate_one(store, h, opts, c, rec, i)
        for i, c in enumerate(cfg.combinations()) if c not in skip))


async def generate_one(store: Store, h: History, opts: ProbeOptions, combo: Combination,
                       rec: Recorder, process: int = 0) -> None:
    """Every write interval: write X and Y, then read them at the read rate."""
    rt = store.runtime
    consistent = opts.consistency == "consistent"
    client = await store.connect()
    x, y = combo.keys(process)
    stop = deadline(rt, opts.duration_s)
    interval = int(opts.write_interval_s * NS_PER_S)
    gap = int(NS_PER_S / opts.read_rate)
    seq = 0
    rounds = Slots(rt, interval)
    # slots an operation outlasted (a stall, a partition) are skipped, never caught up
    while rounds.slot_ns < stop:
        seq += 1
        vx, vy = encode_value(process, 2 * seq, rt.now_ns()), encode_value(process, 2 * seq + 1,
                                                                          rt.now_ns())
        if combo.write == "one-call":
            await rec.write(client, process, {x: vx, y: vy})
        else:
            await rec.write(client, process, {x: vx})
            await rec.write(client, process, {y: vy})
        end = rounds.slot_ns + interval
        reads = Slots(rt, gap)
        while reads.slot_ns < end and rt.now_ns() < min(end, stop):
            await reads.wait()
            if combo.read == "one-multi":
                await rec.read(client, process, (x, y), consistent)
            else:
                await rec.read(client, process, (x,), consistent)
                await rec.read(client, process, (y,), consistent)
            reads.advance()
        rounds.advance()
        await rounds.wait()


def classify(h: History, combo: Combination, tag: int = 0) -> dict[str, Any]:
    """Return A/B/C/D counts and fractions for reads in the window after each round start.

    A round starts when X is written (X is written first, or with Y in one call).
    """
    x, y = combo.keys(tag)
    wx, rx = element_ops(h, x)
    wy, ry = element_ops(h, y)
    rounds = wx.invoke_ns
    if combo.read == "one-multi":  # the same op saw both
        pairs = [(i, i) for i in range(min(len(rx.index), len(ry.index)))]
    else:  # the Y read is the next read of Y after the X read
        nxt = np.searchsorted(ry.index, rx.index, side="right")
        pairs = [(i, j) for i, j in enumerate(nxt.tolist()) if j < len(ry.index)]
    if not pairs:
        counts = dict.fromkeys("ABCD", 0)
        return {"counts": counts, "abcd": dict.fromkeys("ABCD", None), "pairs": 0}
    pi = np.array(pairs)
    tx, ty = rx.invoke_ns[pi[:, 0]], ry.invoke_ns[pi[:, 1]]
    r = np.searchsorted(rounds, tx, side="right") - 1
    ok = r >= 0
    elapsed = np.where(ok, (tx - rounds[np.maximum(r, 0)]) / 1e6, -1.0)
    inwin = ok & (elapsed >= WINDOW_MS[0]) & (elapsed < WINDOW_MS[1])

    def fresh(w: Any, t: np.ndarray, seen: np.ndarray) -> np.ndarray:
        latest = np.searchsorted(w.invoke_ns, t, side="right") - 1
        want = np.where(latest >= 0, w.version[np.maximum(latest, 0)], -1)
        return seen >= want

    fx = fresh(wx, tx, rx.version[pi[:, 0]])[inwin]
    fy = fresh(wy, ty, ry.version[pi[:, 1]])[inwin]
    counts = {"A": int((fx & fy).sum()), "B": int((fx & ~fy).sum()),
              "C": int((~fx & fy).sum()), "D": int((~fx & ~fy).sum())}
    n = sum(counts.values())
    return {"counts": counts, "pairs": n,
            "abcd": {k: round(v / n, 6) if n else None for k, v in counts.items()}}


def check(h: History, store_url: str, opts: ProbeOptions, cfg: InterElementConfig,
          features: frozenset[Feature] = frozenset()) -> dict[str, Any]:
    """Return the A/B/C/D table for every combination run (N/A for skipped ones)."""
    combos, skipped_ = cfg.combinations(), skipped(cfg, features)
    out = envelope("inter-element", store_url, opts, h)
    out["config"] = asdict(opts)
    out["window_ms"] = list(WINDOW_MS)
    table = []
    for i, combo in enumerate(combos):
        entry: dict[str, Any] = asdict(combo)
        if combo in skipped_:
            entry.update(abcd=None, counts=None, reason=skipped_[combo])
            out["notes"].append(f"{combo.placement}, {combo.write}, {combo.read}: "
                                f"N/A ({skipped_[combo]})")
        else:
            entry.update(classify(h, combo, i))
        table.append(entry)
    first = next((e for e in table if e["abcd"] is not None), table[0])
    out["combination"] = {k: first[k] for k in ("placement", "write", "read")}
    out["abcd"] = first["abcd"]
    out["counts"] = first["counts"]
    out["table3"] = table
    return out


def required_features(opts: ProbeOptions, cfg: InterElementConfig) -> set[Feature]:
    """Return the read feature the chosen consistency needs."""
    return {Feature.CONSISTENT_READ if opts.consistency == "consistent"
            else Feature.EVENTUAL_READ}


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: outcomes A-D of every combination (cf. Table 3)."""
    rows = []
    for e in results["table3"]:
        label = f"{e['placement']}, {e['write']}, {e['read']}"
        rows.append((label, "N/A" if e["abcd"] is None else "  ".join(
            f"{k} {100 * v:.1f}%" for k, v in e["abcd"].items())))
    return rows


WORKLOAD = Workload(
    "inter-element", InterElementConfig, generate, check, required_features,
    flags=(Flag("placement", str, "same-item | same-domain | diff-domains | all"),
           Flag("write_mode", str, "one-call | two-calls | all"),
           Flag("read_mode", str, "two-single | one-multi | all")),
    summary_rows=summary_rows,
    legacy_config=lambda d: {k: d[k] for k in ("placement", "write_mode", "read_mode")})
