"""Concurrent conditional increments: do compare-and-set writes lose updates?

``clients`` clients increment one counter element as fast as they can: read it (consistent
where the store can), then write value + 1 conditioned on the value read, retrying after a
failed condition. Each written value is ``<count>.<client>@<t_ns>``, so the count is the
value's sequence. After the run the runner reads the counter back (process FINAL): with
conditional writes that work, the final count equals the increments acknowledged, plus at
most the increments whose outcome is unknown (timeouts). A final count below the
acknowledged increments is a lost update.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replicalab.checkers.accounting import FINAL
from replicalab.errors import ParameterError
from replicalab.history import History, decode_value, encode_value
from replicalab.stores import Feature, Store
from replicalab.workloads.base import Flag, ProbeOptions, Workload, deadline, envelope
from replicalab.workloads.recorder import Recorder

KEY = "increments/item/counter"
RETRY_PAUSE_NS = 50_000_000  # after a read that failed: the store may be down
BACKOFF_NS = 5_000_000  # after a write that did not happen, before reading again


@dataclass(frozen=True)
class IncrementsConfig:
    """How many clients increment the counter at once, and from which region."""

    clients: int = 4
    region: str | None = None

    def check(self) -> None:
        """Raise ValueError naming a bad option."""
        if self.clients < 2:
            raise ParameterError("clients", f"{self.clients}: concurrent increments need at "
                                            "least 2 clients")


async def _client(store: Store, rec: Recorder, process: int, consistent: bool,
                  region: str | None, end_ns: int) -> None:
    rt = store.runtime
    client = await store.connect(region)
    try:
        while rt.now_ns() < end_ns:
            got = await rec.read(client, process, (KEY,), consistent)
            if got is None or decode_value(got.values[0]) is None:
                await rt.sleep_ns(RETRY_PAUSE_NS)
                continue
            count = decode_value(got.values[0]).seq
            ok = await rec.write(client, process,
                                 {KEY: encode_value(process, count + 1, rt.now_ns())},
                                 expect={KEY: got.values[0]})
            if not ok:  # lost the race (or the store did not answer): back off a little
                await rt.sleep_ns(BACKOFF_NS)
    finally:
        await client.close()


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: IncrementsConfig,
                   rec: Recorder) -> None:
    """Set the counter to 0, then let ``clients`` clients increment it until the run ends."""
    rt = store.runtime
    first = await store.connect(cfg.region)
    try:
        if not await rec.write(first, 0, {KEY: encode_value(0, 0, rt.now_ns())}):
            return  # the counter could not be set: nothing to count
    finally:
        await first.close()
    consistent = Feature.CONSISTENT_READ in store.info.features
    end = deadline(rt, opts.duration_s)
    await rt.gather(*(_client(store, rec, p, consistent, cfg.region, end)
                      for p in range(cfg.clients)))


def check(h: History, store_url: str, opts: ProbeOptions, cfg: IncrementsConfig,
          features: frozenset[Feature] = frozenset()) -> dict[str, Any]:
    """Return the increments acknowledged, failed on their condition and unknown, the final
    count read back, and the lost updates (acknowledged increments missing from it)."""
    out = envelope("increments", store_url, opts, h)
    out["config"] = {**asdict(opts), **asdict(cfg)}
    proc, types, f = h.column("process"), h.types(), h.column("f")
    cas = (proc >= 0) & (f == h.f_code("cas"))
    acked, failed, unknown = (int((cas & (types == t)).sum()) for t in (1, 2, 3))
    finals = np.flatnonzero((proc == FINAL) & (types == 1) & (f == h.f_code("read")))
    final = decode_value(h.values[int(finals[-1])][0]) if len(finals) else None
    count = None if final is None else final.seq
    out["increments"] = {
        "acknowledged": acked, "failed_condition": failed, "unknown": unknown,
        "final_count": count, "checked": count is not None,
        "lost_updates": None if count is None else max(0, acked - count),
        "unexplained_extra": None if count is None else max(0, count - acked - unknown),
    }
    if count is None:
        out["notes"].append("the counter was not read back after the run: lost updates "
                            "unchecked")
    return out


def required_features(opts: ProbeOptions, cfg: IncrementsConfig) -> set[Feature]:
    """Return what the workload needs: conditional writes."""
    return {Feature.CONDITIONAL_WRITE}


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: increments by outcome, the count read back, the
    lost updates."""
    inc = results["increments"]
    return [("increments acknowledged / failed condition / unknown",
             f"{inc['acknowledged']:,} / {inc['failed_condition']:,} / {inc['unknown']:,}"),
            ("final count read back", "not read" if inc["final_count"] is None
             else f"{inc['final_count']:,}"),
            ("lost updates", "unchecked" if inc["lost_updates"] is None
             else f"{inc['lost_updates']:,}")]


WORKLOAD = Workload("increments", IncrementsConfig, generate, check, required_features,
                    flags=(Flag("clients", int, "clients incrementing at once"),),
                    summary_rows=summary_rows)
