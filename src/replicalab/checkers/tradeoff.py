"""Seed 003 §4's figures from paced load steps, and the paper's observations judged on them.

A *cell* is one paced step (:func:`replicalab.checkers.load.step_summary` plus the read
ratio, consistency, client groups and repeat it ran). Per (read ratio, consistency, groups)
a *point* holds, over the repeats, the mean, minimum and maximum of

* throughput: successful requests per second of the step's duration (Figure 10);
* throughput share: successful requests over the requests the clients were meant to send,
  one per client per slot, in % (Figure 11: "what is possible with this number of
  clients");
* failure rate: requests sent that failed, over requests sent (Figure 12);

and read and write latency from the repeats' service-time histograms merged exactly (the
time a client waited for its reply, as the paper's clients measured it; failed requests
excluded, as in Figure 7): mean, p95, p99.9 in ms.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.checkers.load import decode_histograms, merge_histograms, summarize

SCHEMA_VERSION = 1
SAME_MEAN_WITHIN = 0.10
"""Eventual and consistent mean read latencies count as "no visible difference" when they
are within 10 % of each other at every load."""
RATIO_SPREAD_WITHIN = 0.25
"""Read ratios have "no marked impact" on mean latency when the slowest is within 25 % of
the fastest at every load."""


def cell_figures(step: Mapping[str, Any]) -> dict[str, float | None]:
    """Return one step's throughput (requests/s over its duration), throughput share (%
    of the requests meant to be sent) and failure rate (failed / sent, None if none sent)."""
    c = step["counts"]
    errors = c["errors"]
    failed = sum(errors.values()) - errors.get("unsent", 0)
    return {"throughput_rps": c["ok"] / step["duration_s"],
            "throughput_pct": 100.0 * c["ok"] / c["offered"] if c["offered"] else None,
            "failure_rate": failed / c["sent"] if c["sent"] else None}


def _spread(values: Sequence[float | None]) -> dict[str, float | None]:
    v = [x for x in values if x is not None]
    if not v:
        return {"mean": None, "min": None, "max": None}
    return {"mean": sum(v) / len(v), "min": min(v), "max": max(v)}


def points(cells: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Return one point per (read ratio, consistency, groups) of ``cells``, sorted by
    read ratio (highest first), consistency and groups (see the module's docstring)."""
    by: dict[tuple[float, str, int], list[Mapping[str, Any]]] = {}
    for c in cells:
        by.setdefault((c["read_ratio"], c["consistency"], c["groups"]), []).append(c)
    out = []
    for (ratio, consistency, groups), mine in sorted(by.items(),
                                                     key=lambda kv: (-kv[0][0], *kv[0][1:])):
        figs = [cell_figures(c["step"]) for c in mine]
        hists = merge_histograms(decode_histograms(c["step"]["histograms"]) for c in mine)
        first = mine[0]
        out.append({
            "read_ratio": ratio, "consistency": consistency, "groups": groups,
            "clients": first["clients"], "offered_per_s": first["step"]["rate_per_s"],
            "repeats": len(mine),
            **{k: _spread([f[k] for f in figs])
               for k in ("throughput_rps", "throughput_pct", "failure_rate")},
            "latency": {op: summarize(hists[f"service/{op}"])
                        for op in ("read", "write") if f"service/{op}" in hists}})
    return out


def _series(pts: Sequence[Mapping[str, Any]], ratio: float, consistency: str
            ) -> list[Mapping[str, Any]]:
    return sorted((p for p in pts if p["read_ratio"] == ratio
                   and p["consistency"] == consistency), key=lambda p: p["groups"])


def _lat(p: Mapping[str, Any], op: str, key: str) -> float | None:
    lat = p["latency"].get(op, {})
    return lat.get(key) if lat.get("count") else None


def _overlap(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Return True if two [min, max] whiskers overlap (the difference is not significant
    in the paper's sense)."""
    if None in (a["min"], a["max"], b["min"], b["max"]):
        return False
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def observations(pts: Sequence[Mapping[str, Any]], ratio: float = 0.99
                 ) -> list[dict[str, Any]]:
    """Return seed 003 §4's observations, each ``{"claim", "holds" (True, False or None
    when the run cannot say), "evidence"}``, judged on the points of read ratio ``ratio``
    (and, for Figures 8 and 9, on every read ratio of eventual reads)."""
    ev, co = _series(pts, ratio, "eventual"), _series(pts, ratio, "consistent")
    paired = [(e, c) for e in ev for c in co if e["groups"] == c["groups"]]
    out: list[dict[str, Any]] = []

    def add(claim: str, holds: bool | None, evidence: str) -> None:
        out.append({"claim": claim, "holds": holds, "evidence": evidence})

    if not paired:
        add("eventual and consistent reads measured side by side", None,
            f"the run has no pair of eventual and consistent points at read ratio {ratio:g}")
        return out
    diffs = []
    for e, c in paired:
        me, mc = _lat(e, "read", "mean_ms"), _lat(c, "read", "mean_ms")
        if me and mc is not None:
            diffs.append(abs(mc - me) / me)
    worst = max(diffs) if diffs else None
    add("Figure 7: no visible difference between the average response times of eventual "
        "and consistent reads, at every load",
        None if worst is None else worst <= SAME_MEAN_WITHIN,
        "no read completed" if worst is None else
        f"largest difference of the means {_pct(worst)} (within {_pct(SAME_MEAN_WITHIN)} "
        "counts as no visible difference)")
    for key, label in (("p95_ms", "95th"), ("p999_ms", "99.9th")):
        pairs = [(_lat(e, "read", key), _lat(c, "read", key)) for e, c in paired]
        pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
        better = sum(b <= a for a, b in pairs)
        add(f"Figure 7: consistent reads slightly outperform eventual reads at the {label} "
            "percentile",
            None if not pairs else better > len(pairs) / 2,
            f"consistent at or below eventual at {better} of {len(pairs)} loads")
    ratios = sorted({p["read_ratio"] for p in pts}, reverse=True)
    if len(ratios) > 1:
        for op, fig in (("read", "8"), ("write", "9")):
            spreads = []
            for g in sorted({p["groups"] for p in pts}):
                means = [_lat(p, op, "mean_ms") for p in pts if p["groups"] == g
                         and p["consistency"] == "eventual"]
                means = [m for m in means if m]
                if len(means) > 1:
                    spreads.append(max(means) / min(means) - 1)
            add(f"Figure {fig}: the read ratio has no marked impact on the average {op} "
                "response time",
                None if not spreads else max(spreads) <= RATIO_SPREAD_WITHIN,
                "no two read ratios to compare" if not spreads else
                f"slowest ratio's mean at most {_pct(max(spreads))} above the fastest's "
                f"(within {_pct(RATIO_SPREAD_WITHIN)} counts as no marked impact)")
    single = min(p["repeats"] for pair in paired for p in pair) < 2

    def alike(key: str, claim: str) -> None:
        if single:
            add(claim, None, "one run per load: no whiskers to compare (2 or more repeats "
                "give them)")
            return
        apart = [e["groups"] for e, c in paired if not _overlap(e[key], c[key])]
        add(claim, not apart, "whiskers overlap at every load" if not apart else
            f"whiskers apart at {len(apart)} of {len(paired)} loads (groups {apart})")

    alike("throughput_rps", "Figure 10: eventual and consistent reads give the same "
          "throughput (no significant difference: the min-max whiskers overlap)")
    shares = [e["throughput_pct"]["mean"] for e in ev if e["throughput_pct"]["mean"] is not None]
    add("Figure 11: the throughput share of the potential load falls as the load grows",
        None if len(shares) < 2 else shares[-1] < shares[0],
        "fewer than two loads" if len(shares) < 2 else
        f"{shares[0]:.1f} % at {ev[0]['clients']} clients, {shares[-1]:.1f} % at "
        f"{ev[-1]['clients']}")
    rates = [e["failure_rate"]["mean"] for e in ev if e["failure_rate"]["mean"] is not None]
    rising = len(rates) >= 2 and rates[-1] > rates[0] and all(
        b >= a for a, b in itertools.pairwise(rates))
    add("Figure 12: the failure rate rises as the offered load rises",
        None if len(rates) < 2 else rising,
        "fewer than two loads" if len(rates) < 2 else
        "failure rate by load: " + ", ".join(f"{e['clients']} clients {_pct(r)}"
                                             for e, r in zip(ev, rates, strict=False)))
    alike("failure_rate", "Figure 12: eventual and consistent reads fail alike (no "
          "significant difference: the min-max whiskers overlap)")
    return out
