"""Pure analysis of open-loop load runs: latency histograms with and without coordinated
omission, error kinds, exact merging of workers, step verdicts, the SLA search and cost.

Two latencies per request (HdrHistograms in µs):

* **response time** = completion - *intended* start (the arrival schedule's time). A request
  that waited in the generator's queue because the store was slow is charged that wait, so a
  stall shows up in every request it delayed (coordinated omission corrected).
* **service time** = completion - actual send: what a closed-loop tester would report.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram

from replicalab.history import History

LOWEST_US = 1
HIGHEST_US = 3_600_000_000  # one hour
SIGNIFICANT_FIGURES = 3
ERROR_KINDS = ("timeout", "busy", "refused", "unsent", "other")
"""timeout: no answer in time; busy: the store said it is overloaded (503, BUSY, max clients,
LOADING ...); refused: the connection was refused, reset or lost; unsent: the generator never got
to send it before the run's drain limit (its backlog); other: anything else."""
OPS = ("read", "write")

_KIND_PATTERNS = (
    ("refused", re.compile(r"refused|errno 111|connection reset|connect call failed|"
                           r"cannot connect|broken pipe|connection lost|closed by server", re.I)),
    ("timeout", re.compile(r"timed?\s?out|no reply", re.I)),
    ("busy", re.compile(r"busy|overload|\b503\b|unavailable|loading|max(imum)? number of "
                        r"clients|too many|masterdown|tryagain|throttl", re.I)),
)


def classify_error(message: str) -> str:
    """Return the error kind (one of ERROR_KINDS) of a recorded error message."""
    if message == "unsent":
        return "unsent"
    for kind, pattern in _KIND_PATTERNS:
        if pattern.search(message):
            return kind
    return "other"


def new_histogram() -> HdrHistogram:
    """Return an empty latency histogram (µs, 1 µs .. 1 h, 3 significant figures)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


def histogram_of(values_us: np.ndarray) -> HdrHistogram:
    """Return a histogram of ``values_us`` (clipped to the trackable range)."""
    hist = new_histogram()
    if len(values_us):
        vals, counts = np.unique(np.clip(values_us, LOWEST_US, HIGHEST_US), return_counts=True)
        for v, c in zip(vals.tolist(), counts.tolist(), strict=True):
            hist.record_value(v, c)
    return hist


def encode_histograms(hists: Mapping[str, HdrHistogram]) -> dict[str, str]:
    """Return each histogram in HdrHistogram's compressed base64 form (for pickling/JSON)."""
    return {name: h.encode().decode("ascii") for name, h in hists.items()}


def decode_histograms(encoded: Mapping[str, str]) -> dict[str, HdrHistogram]:
    """Return the histograms encoded by :func:`encode_histograms`."""
    out = {}
    for name, text in encoded.items():
        hist = new_histogram()
        hist.decode_and_add(text.encode("ascii"))
        out[name] = hist
    return out


def histogram_counts(hist: HdrHistogram) -> dict[int, int]:
    """Return {bucket value (µs): count} for every non-empty bucket (for equality checks)."""
    return {int(it.value_iterated_to): int(it.count_at_value_iterated_to)
            for it in hist.get_recorded_iterator()}


def _done_mask(h: History) -> np.ndarray:
    return (h.column("process") >= 0) & (h.types() == 1)


def load_histograms(h: History, intended_ns: Sequence[int] | np.ndarray
                    ) -> dict[str, HdrHistogram]:
    """Return response and service time histograms (µs) of successful client ops, per
    operation ("response/read", "service/write", ...) and over all ("response/all", ...).

    ``intended_ns[i]`` is op i's intended start (same clock as the history; -1 = unknown,
    then the actual send is used)."""
    out: dict[str, HdrHistogram] = {}
    ok = _done_mask(h)
    intended = np.asarray(intended_ns, dtype=np.int64)
    if len(intended) < len(h):
        intended = np.concatenate([intended, np.full(len(h) - len(intended), -1, np.int64)])
    inv = h.column("invoke_ns")
    done = h.column("complete_ns")
    start = np.where(intended >= 0, intended[:len(h)], inv)
    f = h.column("f")
    is_read = f == h.f_code("read")
    for label, sel in (("read", ok & is_read), ("write", ok & ~is_read), ("all", ok)):
        out[f"response/{label}"] = histogram_of((done[sel] - start[sel]) // 1000)
        out[f"service/{label}"] = histogram_of((done[sel] - inv[sel]) // 1000)
    return out


@dataclass
class Counts:
    """What happened to the requests of one step (they add exactly across workers)."""

    offered: int = 0
    sent: int = 0
    ok_reads: int = 0
    ok_writes: int = 0
    errors: dict[str, int] | None = None

    @property
    def ok(self) -> int:
        """Return the requests that completed successfully."""
        return self.ok_reads + self.ok_writes

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {"offered": self.offered, "sent": self.sent, "ok": self.ok,
                "ok_reads": self.ok_reads, "ok_writes": self.ok_writes,
                "errors": dict(self.errors or dict.fromkeys(ERROR_KINDS, 0))}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Counts:
        """Return the Counts saved by :meth:`to_json`."""
        return cls(d["offered"], d["sent"], d["ok_reads"], d["ok_writes"], dict(d["errors"]))


def count_outcomes(h: History, offered: int) -> Counts:
    """Return the Counts of a history of client ops; ``offered`` requests were scheduled and
    those never sent are counted as ``unsent`` errors."""
    client = h.column("process") >= 0
    types = h.types()
    f = h.column("f")
    ok = client & (types == 1)
    errors = dict.fromkeys(ERROR_KINDS, 0)
    for i in np.flatnonzero(client & ((types == 2) | (types == 3))):
        errors[classify_error(h.error[int(i)])] += 1
    sent = int(client.sum())
    errors["unsent"] += max(0, offered - sent)
    return Counts(offered, sent, int((ok & (f == h.f_code("read"))).sum()),
                  int((ok & (f != h.f_code("read"))).sum()), errors)


def merge_counts(parts: Iterable[Counts]) -> Counts:
    """Return the sum of ``parts`` (every field adds)."""
    total = Counts(errors=dict.fromkeys(ERROR_KINDS, 0))
    for p in parts:
        total.offered += p.offered
        total.sent += p.sent
        total.ok_reads += p.ok_reads
        total.ok_writes += p.ok_writes
        for k, v in (p.errors or {}).items():
            total.errors[k] = total.errors.get(k, 0) + v  # type: ignore[index]
    return total


def merge_histograms(parts: Iterable[Mapping[str, HdrHistogram]]) -> dict[str, HdrHistogram]:
    """Return, per name, the sum of the workers' histograms (exact: bucket counts add)."""
    out: dict[str, HdrHistogram] = {}
    for part in parts:
        for name, hist in part.items():
            if name not in out:
                out[name] = new_histogram()
            out[name].add(hist)
    return out


def merge_histories(parts: Sequence[tuple[History, Sequence[int], int, int]]
                    ) -> tuple[History, np.ndarray]:
    """Return one History (and its intended starts) from workers' ``(history, intended_ns,
    shift_ns, process_offset)``: times are shifted by ``shift_ns`` onto the common timeline,
    process ids by ``process_offset``; rows are ordered by invoke time (stable)."""
    rows: list[tuple[int, int, int]] = []
    for w, (h, _, shift, _) in enumerate(parts):
        inv = h.column("invoke_ns")
        rows.extend((int(inv[i]) + shift, w, i) for i in range(len(h)))
    rows.sort()
    out = History()
    intended_out = np.full(len(rows), -1, np.int64)
    for j, (_, w, i) in enumerate(rows):
        h, intended, shift, poff = parts[w]
        op = h.op(i)
        proc = op.process + poff if op.process >= 0 else op.process
        k = out.invoke(proc, op.f, op.keys, op.values, op.consistency, op.invoke_ns + shift)
        if op.type == "ok":
            out.ok(k, op.complete_ns + shift, op.values, op.node)
        elif op.type == "fail":
            out.fail(k, op.complete_ns + shift, op.error, op.node)
        elif op.type == "info":
            out.info(k, op.complete_ns + shift, op.error)
        if i < len(intended) and intended[i] >= 0:
            intended_out[j] = int(intended[i]) + shift
    return out, intended_out


def summarize(hist: HdrHistogram) -> dict[str, float | int]:
    """Return count, mean and p50/p90/p95/p99/p99.9/max in ms of a µs histogram."""
    n = int(hist.get_total_count())
    if n == 0:
        return {"count": 0}
    return {"count": n, "mean_ms": round(hist.get_mean_value() / 1000, 4),
            **{f"{label}_ms": round(hist.get_value_at_percentile(p) / 1000, 4)
               for label, p in (("p50", 50), ("p90", 90), ("p95", 95), ("p99", 99),
                                ("p999", 99.9))},
            "max_ms": round(hist.get_max_value() / 1000, 4)}


def step_summary(rate_per_s: float, duration_s: float, counts: Counts,
                 hists: Mapping[str, HdrHistogram], elapsed_s: float) -> dict[str, Any]:
    """Return one step's figures: offered and achieved rate (per s), throughput as % of the
    offered rate, error rate (fraction of offered requests) by kind, failure rate (the
    requests sent that failed: errors but unsent over sent, seed 003 §4's Figure 12), and
    response/service latency (ms)."""
    offered = max(counts.offered, 1)
    errors = counts.errors or {}
    failed = sum(errors.values())
    answered_badly = failed - errors.get("unsent", 0)
    return {
        "rate_per_s": rate_per_s,
        "duration_s": duration_s,
        "counts": counts.to_json(),
        "throughput_rps": round(counts.ok / max(elapsed_s, duration_s), 3),
        # Completions per second over the offered requests per second of the schedule:
        # requests that finish only during the drain after the schedule lower it.
        "throughput_pct": round(100.0 * counts.ok / offered * duration_s
                                / max(elapsed_s, duration_s), 3),
        "error_rate": round(failed / offered, 6),
        "failure_rate": round(answered_badly / counts.sent, 6) if counts.sent else None,
        "error_rate_by_kind": {k: round(v / offered, 6) for k, v in errors.items()},
        "latency": {name: summarize(h) for name, h in sorted(hists.items())},
    }


def p99_ms(step: Mapping[str, Any], which: str = "response/all") -> float:
    """Return a step's p99 in ms (inf when nothing succeeded: no answer is not fast)."""
    lat = step["latency"].get(which, {})
    return float(lat["p99_ms"]) if lat.get("count") else math.inf


def step_failure(step: Mapping[str, Any], max_error_rate: float, fail_p99_ms: float) -> str:
    """Return why the store failed this step ("" if it did not): error rate or p99 too high."""
    if step["error_rate"] > max_error_rate:
        return (f"error rate {100 * step['error_rate']:.2f}% > "
                f"{100 * max_error_rate:.2f}%")
    p99 = p99_ms(step)
    if p99 > fail_p99_ms:
        return f"p99 {p99:.1f} ms > {fail_p99_ms:g} ms"
    return ""


def meets_sla(step: Mapping[str, Any], sla_p99_ms: float, max_error_rate: float) -> bool:
    """Return True if a step's response-time p99 is under ``sla_p99_ms`` and its error rate
    at most ``max_error_rate``."""
    return p99_ms(step) < sla_p99_ms and step["error_rate"] <= max_error_rate


def sla_search(steps: Sequence[Mapping[str, Any]], sla_p99_ms: float,
               max_error_rate: float) -> dict[str, Any]:
    """Return the highest offered rate (per s) whose p99 stays under ``sla_p99_ms``.

    Bisection over the steps sorted by rate for the first one that misses the SLA, assuming
    that a store that misses it at some rate misses it at every higher rate; the answer is
    the rate just below it (None when even the lowest misses). ``monotone`` says whether the
    steps actually bear that assumption out (if not, the answer is the conservative one)."""
    ordered = sorted(steps, key=lambda s: s["rate_per_s"])
    ok = [meets_sla(s, sla_p99_ms, max_error_rate) for s in ordered]
    lo, hi = 0, len(ordered)  # invariant: the first miss is in [lo, hi]
    probes = []
    while lo < hi:
        mid = (lo + hi) // 2
        probes.append(ordered[mid]["rate_per_s"])
        if ok[mid]:
            lo = mid + 1
        else:
            hi = mid
    first_miss = lo
    best = ordered[first_miss - 1]["rate_per_s"] if first_miss > 0 else None
    monotone = all(ok[:first_miss]) and not any(ok[first_miss:])
    return {"sla_p99_ms": sla_p99_ms, "max_error_rate": max_error_rate,
            "best_rate_per_s": best,
            "first_miss_rate_per_s": (ordered[first_miss]["rate_per_s"]
                                      if first_miss < len(ordered) else None),
            "bisection_probes_per_s": probes, "monotone": monotone,
            "met": [s["rate_per_s"] for s, m in zip(ordered, ok, strict=True) if m]}


def next_refinement(lo_rate: float, hi_rate: float, min_gap: float) -> float | None:
    """Return the rate to try between a met ``lo_rate`` and a missed ``hi_rate`` (the
    midpoint), or None once they are within ``min_gap`` per second."""
    if hi_rate - lo_rate <= min_gap:
        return None
    return round((lo_rate + hi_rate) / 2, 3)


@dataclass(frozen=True)
class PriceTable:
    """Price per million requests by operation, in ``currency`` (seed 003 §4.2)."""

    name: str
    currency: str
    read_per_million: float
    write_per_million: float


SIMPLEDB_2011 = PriceTable("SimpleDB US West, 2011 (seed 003 §4.2)", "USD", 1.436, 3.387)
"""The seed's measured charges: reads $1.436 and writes $3.387 per 10^6 requests, whatever
the consistency option (from $0.154 per SimpleDB machine hour)."""


def parse_prices(text: str, source: str) -> PriceTable:
    """Return the PriceTable in TOML ``text`` (ValueError naming ``source`` and the fix).

    Format: ``[prices]`` with ``name``, ``currency``, ``read_per_million`` and
    ``write_per_million``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{source} is not valid TOML ({err}); see docs/load.md for the "
                         "price table format") from None
    t = doc.get("prices")
    if not isinstance(t, dict):
        raise ValueError(f"{source} has no [prices] table; add [prices] with "
                         "read_per_million and write_per_million")
    try:
        read, write = float(t["read_per_million"]), float(t["write_per_million"])
    except KeyError as err:
        raise ValueError(f"{source}: [prices] needs {err.args[0]} (price per 10^6 "
                         "requests)") from None
    except (TypeError, ValueError):
        raise ValueError(f"{source}: read_per_million and write_per_million must be "
                         "numbers") from None
    if read < 0 or write < 0 or not (math.isfinite(read) and math.isfinite(write)):
        raise ValueError(f"{source}: prices must be finite and not negative")
    return PriceTable(str(t.get("name", source)), str(t.get("currency", "USD")), read, write)


def cost(counts: Counts, prices: PriceTable, duration_s: float) -> dict[str, Any]:
    """Return the charge for the successful requests of a run: total, per operation (mean
    over the mix) and per hour at the achieved rate, in ``prices.currency``."""
    read_cost = counts.ok_reads * prices.read_per_million / 1e6
    write_cost = counts.ok_writes * prices.write_per_million / 1e6
    total = read_cost + write_cost
    return {"prices": prices.name, "currency": prices.currency,
            "read_per_million": prices.read_per_million,
            "write_per_million": prices.write_per_million,
            "total": round(total, 9), "reads": round(read_cost, 9),
            "writes": round(write_cost, 9),
            "per_operation": round(total / counts.ok, 12) if counts.ok else None,
            "per_hour": round(total * 3600 / duration_s, 6) if duration_s > 0 else None}

