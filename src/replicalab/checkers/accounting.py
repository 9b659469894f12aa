"""Accounting of a run: availability over time, fault periods, lost acknowledged writes."""

from __future__ import annotations

from typing import Any

import numpy as np

from replicalab.history import CONDITION_FAILED, F_NAMES, NEMESIS, History, decode_value
from replicalab.history.core import OpType

FINAL = -2
"""Process id of the final consistent reads made after a run to check acknowledged writes."""


def run_start_ns(h: History) -> int:
    """Return the invoke time of the first operation (0 for an empty history)."""
    inv = h.column("invoke_ns")
    return int(inv.min()) if len(inv) else 0


def _client_spans(h: History) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (row indices, span start ns, span end ns) of the completed client ops.

    A client process is sequential: each of its ops stands for the time from its invoke to
    the next op's invoke of the same process (the slots it used or skipped); a process's last
    op stands for its own duration.
    """
    proc = h.column("process")
    done = np.flatnonzero((proc >= 0) & (h.types() != 0))
    inv = h.column("invoke_ns")[done]
    comp = h.column("complete_ns")[done]
    order = np.lexsort((inv, proc[done]))
    idx, start, end = done[order], inv[order], comp[order].copy()
    same = proc[idx][1:] == proc[idx][:-1]
    nxt = np.flatnonzero(same)
    end[nxt] = start[nxt + 1]
    return idx, start, np.maximum(end, start)


def _covered_ns(start: np.ndarray, end: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Return, for each time in ``t``, the total length of spans [start, end) before it."""
    a, b = np.sort(start), np.sort(end)
    ca = np.concatenate(([0], np.cumsum(a, dtype=np.float64)))
    cb = np.concatenate(([0], np.cumsum(b, dtype=np.float64)))
    na = np.searchsorted(a, t, side="left")
    nb = np.searchsorted(b, t, side="left")
    tf = t.astype(np.float64)
    # spans begun before t count (t - start); those also ended before t give back (t - end)
    return (tf * na - ca[na]) - (tf * nb - cb[nb])


def _during(start: np.ndarray, end: np.ndarray, ok: np.ndarray, answered_at: np.ndarray,
            periods: np.ndarray) -> float | None:
    """Return the fraction of client time inside ``periods`` ([a, b) rows, ns relative like
    the spans) during which the client was served; None when no client time falls in them.

    Only time the client was actually served inside the fault counts: an op answered before
    the fault began covers nothing after it began, and its idle tail inside the fault (the
    wait before the client's next op) counts neither way, because the client asked nothing
    then (so a client the fault does not touch stays at 1.0); an ok op answered inside the
    fault covers its span there; an op answered after the heal (a read that waited out the
    fault) was not served while the fault lasted.
    """
    total = good = 0.0
    for a, b in periods.tolist():
        edges = np.array([a, b], dtype=np.int64)
        inside = answered_at >= a
        total += float(np.diff(_covered_ns(start[inside], end[inside], edges))[0])
        m = inside & ok & (answered_at < b)
        good += float(np.diff(_covered_ns(start[m], end[m], edges))[0])
    return round(good / total, 6) if total > 0 else None


def _windows(start: np.ndarray, end: np.ndarray, ok: np.ndarray, invoke: np.ndarray,
             t0: int, window_ns: int, n_windows: int, complete: np.ndarray,
             periods: np.ndarray) -> dict[str, Any]:
    """Return time-weighted and per-op availability per window, overall, and during the
    fault ``periods`` (ns relative to t0) for spans of ops completed at ``complete``."""
    # relative to t0: the prefix sums stay small enough for float64 to hold them to the ns
    start, end, complete = start - t0, end - t0, complete - t0
    edges = window_ns * np.arange(n_windows + 1, dtype=np.int64)
    total = np.diff(_covered_ns(start, end, edges))
    good = np.diff(_covered_ns(start[ok], end[ok], edges))
    w = np.clip((invoke - t0) // window_ns, 0, max(n_windows - 1, 0)).astype(np.int64)
    ops = np.bincount(w, minlength=n_windows)[:n_windows]
    ok_ops = np.bincount(w[ok], minlength=n_windows)[:n_windows]
    keep = np.flatnonzero((total > 0) | (ops > 0))
    frac = np.where(total[keep] > 0, good[keep] / np.maximum(total[keep], 1), ok_ops[keep]
                    / np.maximum(ops[keep], 1))
    span_ns = float((end - start).sum())
    return {
        "t_s": (keep * window_ns / 1e9).tolist(),
        "ok_fraction": np.round(frac, 6).tolist(),
        "client_s": np.round(total[keep] / 1e9, 6).tolist(),
        "ops": ops[keep].tolist(),
        "ok_ops": ok_ops[keep].tolist(),
        "ok_fraction_ops": np.round(ok_ops[keep] / np.maximum(ops[keep], 1), 6).tolist(),
        "overall": (round(float((end - start)[ok].sum()) / span_ns, 6) if span_ns > 0
                    else round(float(ok.mean()), 6) if len(ok) else None),
        "overall_ops": round(float(ok.mean()), 6) if len(ok) else None,
        "during_faults": _during(start, end, ok, complete, periods),
        "time_s": round(span_ns / 1e9, 6),
        "ok_time_s": round(float((end - start)[ok].sum()) / 1e9, 6),
        "count": len(ok),
        "ok_count": int(ok.sum()),
    }


def answered(h: History, rows: np.ndarray) -> np.ndarray:
    """Return, for each of ``rows``, whether the store answered the op: ``ok``, or ``fail``
    because a conditional write's condition was false (the store said no, which is an
    answer). A refusal (any other ``fail``) and an unknown outcome (``info``) are not."""
    types = h.types()[rows]
    out = types == 1
    for j in np.flatnonzero(types == 2).tolist():
        out[j] = h.error[int(rows[j])].startswith(CONDITION_FAILED)
    return out


def availability(h: History, window_s: float = 1.0) -> dict[str, Any]:
    """Return how available the store was to its clients, weighted by time.

    "ok" here means answered (:func:`answered`): a compare-and-set whose condition was
    false counts as available, so a fault-free run is available 1.0.

    Each completed client op stands for the time from its invoke to its process's next
    invoke (see :func:`_client_spans`): ``ok_fraction`` per window of ``window_s`` and
    ``overall`` are the fractions of that client time covered by ok ops, so a stalled or
    partitioned client counts for as long as it could not get an answer however few ops it
    issued; ``client_s`` is the client time (s) a window holds. Beside them, per window
    ``ops`` (invoked in it), ``ok_ops`` and
    ``ok_fraction_ops``, and overall ``overall_ops`` (fraction of ops ok), ``time_s`` and
    ``ok_time_s`` (client seconds); ``during_faults`` is the share of client time inside
    the injected faults' periods (:func:`fault_periods`; None without faults) during which
    the client was served (see :func:`_during`: ops answered before the fault began cover
    nothing in it, ops answered after it ended were not served in it): what a user means by
    "available while the region is cut off", recovery after the heal left out; ``by_f``
    holds the same for reads and for writes (``write`` includes conditional writes). Times
    are s since the first op.
    """
    empty = {"window_s": window_s, "t_s": [], "ok_fraction": [], "client_s": [], "ops": [],
             "ok_ops": [],
             "ok_fraction_ops": [], "overall": None, "overall_ops": None,
             "during_faults": None, "time_s": 0.0,
             "ok_time_s": 0.0, "count": 0, "ok_count": 0, "by_f": {}}
    idx, start, end = _client_spans(h)
    if len(idx) == 0:
        return empty
    t0 = run_start_ns(h)
    window_ns = max(1, int(window_s * 1e9))
    n_windows = int((max(int(end.max()), int(start.max())) - t0) // window_ns) + 1
    ok = answered(h, idx)
    invoke = h.column("invoke_ns")[idx]
    periods = np.array([(round(p["start_ms"] * 1e6), round(p["end_ms"] * 1e6))
                        for p in fault_periods(h)], dtype=np.int64).reshape(-1, 2)
    complete = h.column("complete_ns")[idx]
    out = {"window_s": window_s, **_windows(start, end, ok, invoke, t0, window_ns, n_windows,
                                            complete, periods)}
    f = h.column("f")[idx]
    kinds = {"read": f == h.f_code("read"),
             "write": (f == h.f_code("write")) | (f == h.f_code("cas"))}
    out["by_f"] = {name: {"window_s": window_s, **_windows(start[m], end[m], ok[m], invoke[m],
                                                          t0, window_ns, n_windows,
                                                          complete[m], periods)}
                   for name, m in kinds.items() if m.any()}
    return out


def fault_periods(h: History) -> list[dict[str, Any]]:
    """Return [{start_ms, end_ms, label}] from nemesis ops, ms since the run started: from
    when the fault's action completed (it is in place: on hosts, installing it over SSH
    took 1 to 1.7 s of a 3 s cut on a busy machine) to when its heal began."""
    proc = h.column("process")
    types = h.types()
    t0 = run_start_ns(h)
    open_: dict[str, tuple[int, str]] = {}
    out = []
    for i in np.flatnonzero(proc == NEMESIS).tolist():
        f = F_NAMES[h.f[i]]
        label = h.values[i][0] or f
        if f == "heal":
            start = open_.pop(label, None)
            if start is not None:
                out.append({"start_ms": (start[0] - t0) / 1e6,
                            "end_ms": (h.invoke_ns[i] - t0) / 1e6, "label": label})
        else:
            done = types[i] == OpType.OK and h.complete_ns[i] >= 0
            open_[label] = (h.complete_ns[i] if done else h.invoke_ns[i], label)
    end = h.column("complete_ns").max() if len(h) else t0
    out += [{"start_ms": (s - t0) / 1e6, "end_ms": (end - t0) / 1e6, "label": lbl}
            for s, lbl in open_.values()]
    return sorted(out, key=lambda x: x["start_ms"])


def lost_writes(h: History, limit: int = 50) -> dict[str, Any]:
    """Return acknowledged writes missing from the final consistent read of their key.

    A write is lost if the final value of its key is an older version from the same
    writer (versions are ordered per writer) or absent. Needs FINAL reads in the history.
    """
    proc, types, f = h.column("process"), h.types(), h.column("f")
    finals = np.flatnonzero((proc == FINAL) & (types == 1) & (f == h.f_code("read")))
    if len(finals) == 0:
        out: dict[str, Any] = {"checked": False, "keys": 0, "acknowledged": 0, "lost": 0,
                               "examples": []}
        failed = np.flatnonzero((proc == FINAL) & (types != 1))
        if len(failed):  # why no final read answered, as the last attempt was told
            out["why"] = h.error[int(failed[-1])] or "no final read answered"
        return out
    final: dict[str, Any] = {}
    for i in finals.tolist():
        for k, v in zip(h.keys[i], h.values[i], strict=True):
            final[k] = decode_value(v)
    acked = np.flatnonzero((proc >= 0) & (types == 1) & ((f == h.f_code("write"))
                                                          | (f == h.f_code("cas"))))
    lost, n = [], 0
    for i in acked.tolist():
        for k, v in zip(h.keys[i], h.values[i], strict=True):
            if k not in final:
                continue
            n += 1
            mine, now = decode_value(v), final[k]
            if mine is None:
                continue
            if now is None or (now.writer == mine.writer and now.seq < mine.seq):
                lost.append({"key": k, "value": v, "op": i, "final": None if now is None
                             else f"{now.seq}.{now.writer}"})
    return {"checked": True, "keys": len(final), "acknowledged": n, "lost": len(lost),
            "examples": lost[:limit]}


def unreachable_since(h: History, min_s: float = 2.0, min_ops: int = 5) -> float | None:
    """Return seconds into the run from which the store answered no client op (see
    :func:`answered`) to the end, if that
    stretch lasts at least ``min_s`` and holds at least ``min_ops`` ops (else None)."""
    proc, types = h.column("process"), h.types()
    client = np.flatnonzero((proc >= 0) & (types != 0))
    if len(client) == 0:
        return None
    inv = h.column("invoke_ns")[client]
    order = np.argsort(inv, kind="stable")
    ok = answered(h, client[order])
    last_ok = np.flatnonzero(ok)
    tail = order[last_ok[-1] + 1:] if len(last_ok) else order
    if len(tail) < min_ops:
        return None
    start, end = inv[tail].min(), h.column("complete_ns")[client][tail].max()
    if (end - start) / 1e9 < min_s:
        return None
    return (start - run_start_ns(h)) / 1e9
