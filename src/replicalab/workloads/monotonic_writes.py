"""Monotonic writes (seed 003 §3.1): cycles of back-to-back writes, then reads for a while.

Variants: ``different`` (v1 then v2), ``three`` (v1, v2, v3), ``same`` (v1 twice),
``two-then-one`` (v1 into A1 and A2, then v2 into A1) and ``two-then-one-same`` (v2 = v1).
Each read is classified as the version it returns: v0 = the value before the cycle.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replicalab.errors import ParameterError
from replicalab.history import History, encode_value
from replicalab.history.core import OpType
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Feature, Store
from replicalab.workloads.base import Flag, ProbeOptions, Workload, deadline, envelope
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.slots import Slots

A1 = "probe/item/A1"
A2 = "probe/item/A2"
VARIANTS = ("different", "three", "same", "two-then-one", "two-then-one-same")
CYCLE_S = 3.0
BUCKET_MS = 10.0
WINDOW_MS = (50.0, 400.0)


@dataclass(frozen=True)
class MonotonicWritesConfig:
    """Which cycle of writes to make (see the module docstring)."""

    variant: str = "different"

    def check(self) -> None:
        """Raise ValueError unless the variant is known."""
        if self.variant not in VARIANTS:
            raise ParameterError("variant", f"{self.variant!r}: use one of "
                                            f"{', '.join(VARIANTS)}")


def cycle_writes(variant: str, seq: int, now_ns: int) -> list[dict[str, str]]:
    """Return the writes of one cycle for ``variant`` (values unique across cycles)."""
    v = [encode_value(0, 10 * seq + i, now_ns) for i in range(1, 4)]
    if variant == "different":
        return [{A1: v[0]}, {A1: v[1]}]
    if variant == "three":
        return [{A1: v[0]}, {A1: v[1]}, {A1: v[2]}]
    if variant == "same":
        return [{A1: v[0]}, {A1: v[0]}]
    if variant == "two-then-one":
        return [{A1: v[0], A2: v[0]}, {A1: v[1]}]
    return [{A1: v[0], A2: v[0]}, {A1: v[0]}]


def attributes(variant: str) -> list[str]:
    """Return the elements read in each cycle."""
    return [A1, A2] if variant.startswith("two-then-one") else [A1]


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: MonotonicWritesConfig,
                   rec: Recorder) -> None:
    """Run cycles (writes then reads for 3 s) until the duration has passed."""
    rt = store.runtime
    consistent = opts.consistency == "consistent"
    variant = cfg.variant
    client = await store.connect()
    keys = attributes(variant)
    stop = deadline(rt, opts.duration_s)
    gap = int(NS_PER_S / opts.read_rate)
    seq = 0
    cycles = Slots(rt, int(CYCLE_S * NS_PER_S))
    # slots an operation outlasted (a stall, a partition) are skipped, never caught up
    while cycles.slot_ns < stop:
        seq += 1
        start = rt.now_ns()
        for w in cycle_writes(variant, seq, start):
            await rec.write(client, 0, w)
        end = cycles.slot_ns + int(CYCLE_S * NS_PER_S)
        reads = Slots(rt, gap)
        while reads.slot_ns < end and rt.now_ns() < min(end, stop):
            await reads.wait()
            await rec.read(client, 0, keys, consistent)
            reads.advance()
        cycles.advance()
        await cycles.wait()


def _cycles(h: History) -> list[tuple[int, list[int]]]:
    """Return (start ns, write op indices) per cycle: maximal runs of consecutive writes."""
    f, types = h.column("f"), h.types()
    write = h.f_code("write")
    cycles: list[tuple[int, list[int]]] = []
    prev_was_write = False
    for i in range(len(h)):
        if f[i] == write:
            if not prev_was_write:
                cycles.append((h.invoke_ns[i], []))
            if types[i] == OpType.OK:
                cycles[-1][1].append(i)
            prev_was_write = True
        else:
            prev_was_write = False
    return cycles


def check(h: History, store_url: str, opts: ProbeOptions, cfg: MonotonicWritesConfig,
          features: frozenset[Feature] = frozenset()) -> dict[str, Any]:
    """Return version-vs-time curves and version fractions in the 50-400 ms window."""
    out = envelope("monotonic-writes", store_url, opts, h)
    variant = cfg.variant
    out["config"] = {**asdict(opts), "variant": variant}
    out["variant"] = variant
    out["window_ms"] = list(WINDOW_MS)
    cycles = _cycles(h)
    starts = np.array([c[0] for c in cycles], dtype=np.int64)
    types, f = h.types(), h.column("f")
    reads = np.flatnonzero((types == OpType.OK) & (f == h.f_code("read"))
                           & (h.column("process") >= 0))
    curves, fractions = {}, {}
    nver = 4 if variant == "three" else 3
    for key in attributes(variant):
        name = key.rsplit("/", 1)[1]
        prev: str | None = None
        versions_by_cycle: list[dict[str | None, int]] = []
        for _, widx in cycles:
            vs = [prev]
            for i in widx:
                ks = h.keys[i]
                if key in ks:
                    val = h.values[i][ks.index(key)]
                    if val not in vs:
                        vs.append(val)
            versions_by_cycle.append({v: n for n, v in enumerate(vs)})
            prev = vs[-1]
        cyc = np.searchsorted(starts, h.column("invoke_ns")[reads], side="right") - 1
        elapsed, cls = [], []
        for r, c in zip(reads.tolist(), cyc.tolist(), strict=True):
            if c < 0:
                continue
            ks = h.keys[r]
            val = h.values[r][ks.index(key)]
            cls.append(versions_by_cycle[c].get(val, -1))
            elapsed.append((h.invoke_ns[r] - starts[c]) / 1e6)
        el, cl = np.array(elapsed), np.array(cls, dtype=np.int64)
        b = (el // BUCKET_MS).astype(np.int64) if len(el) else np.zeros(0, np.int64)
        total = np.bincount(b) if len(b) else np.zeros(0, np.int64)
        keep = np.flatnonzero(total)
        curves[name] = {
            "t_ms": (keep * BUCKET_MS).tolist(), "total": total[keep].tolist(),
            "versions": {f"v{k}": np.round(np.bincount(b, weights=(cl == k).astype(float),
                                                       minlength=len(total))[keep]
                                           / total[keep], 6).tolist() for k in range(nver)},
        }
        win = (el >= WINDOW_MS[0]) & (el < WINDOW_MS[1])
        n = int(win.sum())
        fractions[name] = {f"v{k}": round(float((cl[win] == k).sum()) / n, 6) if n else None
                           for k in range(nver)}
    out["curves"] = curves
    out["version_fraction"] = fractions
    return out


def required_features(opts: ProbeOptions, cfg: MonotonicWritesConfig) -> set[Feature]:
    """Return the store features this probe needs."""
    need = {Feature.CONSISTENT_READ if opts.consistency == "consistent"
            else Feature.EVENTUAL_READ}
    if cfg.variant.startswith("two-then-one"):
        need |= {Feature.ATOMIC_MULTI_WRITE, Feature.MULTI_READ}
    return need


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: the share of each version per attribute."""
    return [(f"{attr} versions in [50, 400) ms",
             "  ".join(f"{k} {100 * v:.2f}%" for k, v in fr.items() if v is not None))
            for attr, fr in results["version_fraction"].items()]


WORKLOAD = Workload(
    "monotonic-writes", MonotonicWritesConfig, generate, check, required_features,
    flags=(Flag("variant", str, "different | three | same | two-then-one | "
                "two-then-one-same"),),
    summary_rows=summary_rows,
    legacy_config=lambda d: {"variant": d["variant"]})
