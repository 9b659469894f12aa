"""CLT analysis (pure): rows in, a results dict of plain numbers out (ms, JSON-safe).

Per pair and pooled percentiles, groups (self, same region, cross region), window averages
over time, quorum latency for every k of n, spikes above a multiple of the median, the
failure-detector timeout table, schedule lag, proxy overhead and, when latencies were
injected, the comparison with the injected RTT matrix. Calibration links (a remote label
containing '/') only feed the proxy-overhead figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from replicalab.clt import quorum, stats
from replicalab.clt.records import Records

SCHEMA_VERSION = 1
FD_P = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)
RELIABLE_EXCEEDANCES = 10
"""A timeout for false-positive rate p rests on n*p values above it; fewer than this many
and the figure is flagged as resting on too few samples."""
DIRECT, PROXIED, PROXIED_10 = "direct", "proxy0", "proxy10"
CALIBRATION_RTT_MS = 10.0


@dataclass(frozen=True)
class Settings:
    """What the analysis needs to know about the run."""

    nodes: list[str]
    rate_hz: float
    timeout_ms: float
    self_loop: bool
    regions: Mapping[str, str] = field(default_factory=dict)
    window_s: float = 30.0
    spike_factor: float = 3.0
    fd_p: Sequence[float] = FD_P
    injected_rtt_ms: Mapping[str, float] = field(default_factory=dict)
    """'a->b' -> RTT injected on that directed link, for the matrix check."""
    planned_rounds: Mapping[str, int] = field(default_factory=dict)


def pair_key(node: str, remote: str) -> str:
    """Return the label of a directed pair, 'a->b'."""
    return f"{node}->{remote}"


def group_of(node: str, remote: str, regions: Mapping[str, str]) -> str:
    """Return 'self', 'same region' or 'cross region' for a pair."""
    if node == remote:
        return "self"
    same = regions.get(node, "default") == regions.get(remote, "default")
    return "same region" if same else "cross region"


def measured(rec: Records) -> Records:
    """Return the rows of real pairs (calibration links removed)."""
    return rec.select(np.char.find(rec.remote.astype(str), "/") < 0)


def pairs(rec: Records) -> list[tuple[str, str]]:
    """Return the (node, remote) pairs present, sorted."""
    if len(rec) == 0:
        return []
    return sorted(set(zip(rec.node.tolist(), rec.remote.tolist(), strict=True)))


def pair_rtts(rec: Records, node: str, remote: str) -> np.ndarray:
    """Return the RTTs in µs (+inf = timeout) of one directed pair, by round."""
    m = (rec.node == node) & (rec.remote == remote)
    order = np.argsort(rec.round[m], kind="stable")
    return rec.rtt_us[m][order]


def windows(rec: Records, rate_hz: float, window_s: float) -> dict:
    """Return mean RTT (ms, observed pings only) and timeout count per pair per window of
    ``window_s`` seconds of schedule time (round / rate, so clock skew does not matter)."""
    if len(rec) == 0:
        return {"window_s": window_s, "t_s": [], "pairs": {}}
    win = np.floor(rec.round / rate_hz / window_s).astype(int)
    n_win = int(win.max()) + 1
    rtt = rec.rtt_us
    out: dict[str, dict] = {}
    for node, remote in pairs(rec):
        m = (rec.node == node) & (rec.remote == remote)
        w, x = win[m], rtt[m]
        fin = np.isfinite(x)
        sums = np.bincount(w[fin], weights=x[fin], minlength=n_win)
        counts = np.bincount(w[fin], minlength=n_win)
        touts = np.bincount(w[~fin], minlength=n_win)
        out[pair_key(node, remote)] = {
            "mean_ms": [stats.ms(s / c) if c else None for s, c in zip(sums, counts, strict=True)],
            "timeouts": touts.astype(int).tolist()}
    return {"window_s": window_s, "t_s": [i * window_s for i in range(n_win)], "pairs": out}


def spikes(rec: Records, factor: float, rate_hz: float, top: int = 20) -> dict:
    """Return per pair the pings above ``factor`` x the pair's median (timeouts included),
    their total and fraction, and the ``top`` largest with their schedule time in s."""
    per_pair, worst = {}, []
    total = 0
    for node, remote in pairs(rec):
        m = (rec.node == node) & (rec.remote == remote)
        x, rounds = rec.rtt_us[m], rec.round[m]
        med = float(stats.quantiles(x, [50.0])[0])
        if not math.isfinite(med):
            threshold = math.inf
            hit = np.zeros(len(x), bool)
        else:
            threshold = factor * med
            hit = x > threshold
        count = int(hit.sum())
        total += count
        per_pair[pair_key(node, remote)] = {"median_ms": stats.ms(med),
                                            "threshold_ms": stats.ms(threshold),
                                            "count": count,
                                            "fraction": count / len(x) if len(x) else 0.0}
        worst.extend((float(v), node, remote, int(r)) for v, r in zip(x[hit], rounds[hit],
                                                                         strict=True))
    worst.sort(key=lambda t: -t[0])
    return {"factor": factor, "total": total,
            "fraction": total / len(rec) if len(rec) else 0.0, "pairs": per_pair,
            "top": [{"pair": pair_key(n, r), "round": rd, "t_s": round(rd / rate_hz, 3),
                     "rtt_ms": stats.ms(v)} for v, n, r, rd in worst[:top]]}


def fd_table(samples_us: np.ndarray, ps: Sequence[float]) -> list[dict]:
    """Return per false-positive rate p the shortest timeout (ms; None = not reachable below
    the ping timeout) and whether enough samples exceed it to trust it."""
    n = len(samples_us)
    rows = []
    for p in ps:
        t = stats.exceedance_timeout(samples_us, p)
        rows.append({"p": p, "timeout_ms": stats.ms(t), "n": n,
                     "expected_exceedances": n * p,
                     "reliable": n * p >= RELIABLE_EXCEEDANCES})
    return rows


def failure_detector(rec: Records, ps: Sequence[float]) -> dict:
    """Return the FD timeout table pooled over peer pairs and for the worst pair (a detector
    watches one peer, so the worst pair sets the timeout that is safe everywhere)."""
    peer = rec.select(rec.node != rec.remote)
    per_pair = {pair_key(a, b): fd_table(pair_rtts(peer, a, b), ps) for a, b in pairs(peer)}
    worst = []
    for i, _p in enumerate(ps):
        rows = [(v[i]["timeout_ms"], k, v[i]) for k, v in per_pair.items()]
        if not rows:
            continue
        inf_first = sorted(rows, key=lambda t: (t[0] is not None, -(t[0] or 0.0)))
        _t_ms, key, row = inf_first[0]
        worst.append({**row, "pair": key})
    return {"pooled": fd_table(peer.rtt_us, ps), "worst_pair": worst, "pairs": per_pair}


def lag(rec: Records, rate_hz: float, planned: Mapping[str, int]) -> dict:
    """Return per node the schedule lag (actual - intended send, ms) percentiles, the
    fraction of pings sent over 1 ms late, and whether the node fell behind: lag p99 over
    one round period, or fewer rounds sent than planned."""
    period_ms = 1000.0 / rate_hz
    out = {}
    for node in sorted(set(rec.node.tolist())):
        m = rec.node == node
        x = rec.lag_us[m].astype(float)
        q = stats.quantiles(x, [50.0, 99.0, 99.9, 100.0])
        sent = len(np.unique(rec.round[m]))
        want = int(planned.get(node, sent))
        out[node] = {"p50_ms": stats.ms(q[0]), "p99_ms": stats.ms(q[1]),
                     "p99.9_ms": stats.ms(q[2]), "max_ms": stats.ms(q[3]),
                     "late_over_1ms": float(np.mean(x > 1000.0)) if len(x) else 0.0,
                     "rounds_sent": sent, "rounds_planned": want,
                     "behind": bool(q[1] / 1000.0 > period_ms or sent < want)}
    return {"period_ms": period_ms, "nodes": out,
            "behind": any(v["behind"] for v in out.values())}


def proxy_overhead(rec: Records) -> dict | None:
    """Return the added RTT of a zero-latency Toxiproxy link: the same pinger pinged the
    same peer directly ('peer/direct') and through the proxy ('peer/proxy0') in the same
    rounds. None when the run had no such calibration links."""
    remotes = set(rec.remote.tolist())
    for r in sorted(remotes):
        if not r.endswith("/" + DIRECT):
            continue
        peer = r[: -len(DIRECT) - 1]
        if f"{peer}/{PROXIED}" not in remotes:
            continue
        node = rec.node[rec.remote == r][0]
        d = stats.quantiles(pair_rtts(rec, node, r), [50.0, 99.0])
        p = stats.quantiles(pair_rtts(rec, node, f"{peer}/{PROXIED}"), [50.0, 99.0])
        out = {"pinger": str(node), "peer": peer,
               "direct_p50_ms": stats.ms(d[0]), "proxied_p50_ms": stats.ms(p[0]),
               "direct_p99_ms": stats.ms(d[1]), "proxied_p99_ms": stats.ms(p[1]),
               "overhead_p50_ms": stats.ms(p[0] - d[0]), "overhead_p99_ms": stats.ms(p[1] - d[1]),
               "emulated_10ms_p50_ms": None, "floor_p50_ms": None}
        if f"{peer}/{PROXIED_10}" in remotes:
            e = stats.quantiles(pair_rtts(rec, node, f"{peer}/{PROXIED_10}"), [50.0])[0]
            out["emulated_10ms_p50_ms"] = stats.ms(e)
            # what any emulated link adds beyond its injected RTT, measured in this run
            out["floor_p50_ms"] = stats.ms(e - CALIBRATION_RTT_MS * 1000)
        return out
    return None


def matrix_check(per_pair: Mapping[str, dict], injected: Mapping[str, float],
                 overhead_ms: float | None, toxic_overhead_ms: float | None = None,
                 tolerance_ms: float = 1.0) -> dict:
    """Return injected vs measured median RTT per pair (ms). A pair matches when they differ
    by at most ``tolerance_ms`` plus the proxy overhead measured in the same run: for a link
    carrying a latency toxic, ``toxic_overhead_ms`` (what the 10 ms calibration link measured
    beyond its 10 ms: loopback, proxy and toxic scheduling), for an un-delayed link
    ``overhead_ms`` (zero-latency proxy vs direct)."""
    rows = []
    for key, want in sorted(injected.items()):
        extra = overhead_ms if want == 0 or toxic_overhead_ms is None else toxic_overhead_ms
        allow = tolerance_ms + max(0.0, extra or 0.0)
        got = per_pair.get(key, {}).get("p", {}).get("p50")
        rows.append({"pair": key, "injected_ms": want, "measured_p50_ms": got,
                     "diff_ms": None if got is None else round(got - want, 3),
                     "allowed_ms": round(allow, 3),
                     "ok": got is not None and abs(got - want) <= allow})
    return {"tolerance_ms": tolerance_ms, "overhead_ms": overhead_ms,
            "toxic_overhead_ms": toxic_overhead_ms, "rows": rows,
            "all_ok": bool(rows) and all(r["ok"] for r in rows)}


def quorums(rec: Records, nodes: list[str], self_loop: bool) -> dict:
    """Return quorum latency summaries for every k of n, the single-pair (no quorum, peers
    only) summary beside them, and how the majority compares with it in the tail."""
    n = len(nodes)
    single = rec.select(rec.node != rec.remote).rtt_us
    by_k = []
    for k in range(1, n + 1):
        lat = quorum.pooled(rec, nodes, k, self_loop)
        kind = "all" if k == n else "majority" if k == quorum.majority(n) else "any"
        by_k.append({"k": k, "label": f"Q{k}/{n}", "kind": kind, **stats.summary(lat)})
    single_s = {"label": "NQ", **stats.summary(single)}
    maj = next(q for q in by_k if q["k"] == quorum.majority(n))
    tail = []
    for q in ("p99", "p99.9", "p99.99", "p99.999"):
        a, b = maj["p"][q], single_s["p"][q]
        tail.append({"q": q, "majority_ms": a, "single_ms": b,
                     "ratio": round(b / a, 2) if a and b else None})
    top_a, top_b = maj["p"]["p99.999"], single_s["p"]["p99.999"]
    # None = above the timeout: a finite majority tail beats a censored single-pair tail
    beats = (top_b is None and top_a is not None) or (
        top_a is not None and top_b is not None and top_a < top_b)
    return {"n": n, "majority_k": quorum.majority(n), "self_loop": self_loop, "by_k": by_k,
            "single": single_s, "tail": tail, "majority_beats_single_tail": bool(beats)}


def analyse(rec_all: Records, s: Settings) -> dict:
    """Return the full CLT results dict (ms, JSON-safe) for the rows of one run."""
    rec = measured(rec_all)
    per_pair = {}
    groups: dict[str, list[np.ndarray]] = {}
    for node, remote in pairs(rec):
        x = pair_rtts(rec, node, remote)
        g = group_of(node, remote, s.regions)
        per_pair[pair_key(node, remote)] = {"node": node, "remote": remote, "group": g,
                                            **stats.summary(x)}
        groups.setdefault(g, []).append(x)
    overhead = proxy_overhead(rec_all)
    out = {
        "schema_version": SCHEMA_VERSION,
        "nodes": list(s.nodes), "regions": dict(s.regions), "rate_hz": s.rate_hz,
        "timeout_ms": s.timeout_ms, "self_loop": s.self_loop, "rows": len(rec_all),
        "pooled": stats.summary(rec.rtt_us),
        "pooled_peers": stats.summary(rec.select(rec.node != rec.remote).rtt_us),
        "pairs": per_pair,
        "groups": {g: stats.summary(np.concatenate(v)) for g, v in sorted(groups.items())},
        "windows": windows(rec, s.rate_hz, s.window_s),
        "spikes": spikes(rec, s.spike_factor, s.rate_hz),
        "failure_detector": failure_detector(rec, s.fd_p),
        "quorum": quorums(rec, list(s.nodes), s.self_loop) if len(rec) else None,
        "lag": lag(rec_all.select(np.char.find(rec_all.remote.astype(str), "/") < 0)
                   if len(rec_all) else rec_all, s.rate_hz, s.planned_rounds),
        "proxy_overhead": overhead,
    }
    if s.injected_rtt_ms:
        out["matrix"] = matrix_check(per_pair, s.injected_rtt_ms,
                                     overhead["overhead_p50_ms"] if overhead else None,
                                     overhead["floor_p50_ms"] if overhead else None)
    return out
