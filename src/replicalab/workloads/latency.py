"""Latency of each kind of operation (seed 000, single thread): eventual read, consistent
read, put and conditional put, N of each on one item, interleaved so drift hits all alike.

The conditional put first reads the current value (a consistent read, recorded as process 1
so it is not counted with the measured reads) and then puts conditioned on it; only the put
is timed, as in the seed.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replicalab.checkers.compare import bootstrap_diff, verdict
from replicalab.errors import ParameterError
from replicalab.history import History, encode_value
from replicalab.stores import Feature, Store
from replicalab.workloads.base import Flag, ProbeOptions, Workload, envelope
from replicalab.workloads.recorder import Recorder

KEY = "latency/item/value"
VARIANTS = {
    "eventual read": ("read", "eventual", Feature.EVENTUAL_READ),
    "consistent read": ("read", "consistent", Feature.CONSISTENT_READ),
    "put": ("write", "none", None),
    "conditional put": ("cas", "none", Feature.CONDITIONAL_WRITE),
}
PREP = 1  # process of the reads that prepare a conditional put


@dataclass(frozen=True)
class LatencyConfig:
    """How many operations of each variant to time, and from which region's client (None:
    the store's first node)."""

    ops: int = 1000
    region: str | None = None

    def check(self) -> None:
        """Raise ValueError if too few operations are asked for a comparison."""
        if self.ops < 2:
            raise ParameterError("ops", f"{self.ops} must be at least 2")


def variants(features: frozenset[Feature]) -> list[str]:
    """Return the variants a store with ``features`` can run."""
    return [v for v, (_, _, need) in VARIANTS.items() if need is None or need in features]


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: LatencyConfig,
                   rec: Recorder) -> None:
    """Issue ``ops`` operations of every supported variant, round-robin, one at a time."""
    client = await store.connect(cfg.region)
    seq = itertools.count(1)
    await rec.write(client, 0, {KEY: encode_value(0, next(seq), store.runtime.now_ns())})
    todo = variants(store.info.features)
    for _ in range(cfg.ops):
        for v in todo:
            if v == "eventual read":
                await rec.read(client, 0, (KEY,), False)
            elif v == "consistent read":
                await rec.read(client, 0, (KEY,), True)
            elif v == "put":
                await rec.write(client, 0, {KEY: encode_value(0, next(seq),
                                                              store.runtime.now_ns())})
            else:
                prev = await rec.read(client, PREP, (KEY,), True)
                if prev is not None:
                    await rec.write(client, 0, {KEY: encode_value(0, next(seq),
                                                                  store.runtime.now_ns())},
                                    expect={KEY: prev.values[0]})
    await client.close()


def _samples(h: History) -> dict[str, np.ndarray]:
    proc, types, f, cons = (h.column("process"), h.types(), h.column("f"),
                            h.column("consistency"))
    lat = (h.column("complete_ns") - h.column("invoke_ns")) / 1e6
    out = {}
    for v, (fname, cname, _) in VARIANTS.items():
        sel = ((proc == 0) & (types == 1) & (f == h.f_code(fname))
               & (cons == h.consistency_code(cname)))
        if sel.any():
            out[v] = lat[sel][1:] if v == "put" else lat[sel]  # the first put is set-up
    return out


def check(h: History, store_url: str, opts: ProbeOptions, cfg: LatencyConfig,
          features: frozenset[Feature] = frozenset()) -> dict[str, Any]:
    """Return per-variant latency summaries and every pairwise difference with a bootstrap
    95 % interval (means, ms) and a verdict."""
    out = envelope("latency", store_url, opts, h)
    out["config"] = {**asdict(opts), "ops": cfg.ops, "client_region": cfg.region}
    samples = _samples(h)
    out["variants"] = {
        v: {"count": len(x), "mean_ms": round(float(x.mean()), 4),
            **{f"{k}_ms": round(float(np.percentile(x, q)), 4)
               for k, q in (("p50", 50), ("p99", 99), ("p999", 99.9))}}
        for v, x in samples.items() if len(x)}
    pairs = []
    for a, b in itertools.combinations(samples, 2):
        if len(samples[a]) < 2 or len(samples[b]) < 2:
            continue
        d, lo, hi = bootstrap_diff(samples[a], samples[b], seed=opts.seed)
        pairs.append({"a": a, "b": b, "mean_diff_ms": round(d, 4), "lo_ms": round(lo, 4),
                      "hi_ms": round(hi, 4), "verdict": verdict(lo, hi)})
    out["differences"] = pairs
    return out


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: percentiles per variant and their differences."""
    rows = []
    for v, x in results["variants"].items():
        rows.append((f"{v} mean / p50 / p99 / p99.9",
                     f"{x['mean_ms']:.2f} / {x['p50_ms']:.2f} / {x['p99_ms']:.2f} / "
                     f"{x['p999_ms']:.2f} ms"))
    for d in results["differences"]:
        rows.append((f"{d['a']} - {d['b']}",
                     f"{d['mean_diff_ms']:+.2f} ms [{d['lo_ms']:+.2f}, {d['hi_ms']:+.2f}] "
                     f"{d['verdict']}"))
    return rows


# The variant rows already give latency per variant: the per-operation rows would count a
# conditional put's own read as a consistent read.
WORKLOAD = Workload("latency", LatencyConfig, generate, check,
                    flags=(Flag("ops", int, "operations per variant"),
                           Flag("client_region", str, "region of the client (a cluster's "
                                "client links: it pays the WAN to nodes elsewhere)",
                                field="region")),
                    summary_rows=summary_rows, per_op_latency_rows=False,
                    legacy_config=lambda d: {"ops": d.get("ops", 1000)})
