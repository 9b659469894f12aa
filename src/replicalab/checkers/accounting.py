"""Accounting of a run: availability over time, fault periods, lost acknowledged writes."""

from __future__ import annotations

from typing import Any

import numpy as np

from replicalab.history import F_NAMES, NEMESIS, History, decode_value

FINAL = -2
"""Process id of the final consistent reads made after a run to check acknowledged writes."""


def run_start_ns(h: History) -> int:
    """Return the invoke time of the first operation (0 for an empty history)."""
    inv = h.column("invoke_ns")
    return int(inv.min()) if len(inv) else 0


def availability(h: History, window_s: float = 1.0) -> dict[str, Any]:
    """Return per window of ``window_s`` the fraction of completed client ops that were ok."""
    proc = h.column("process")
    types = h.types()
    done = (proc >= 0) & (types != 0)
    if not done.any():
        return {"window_s": window_s, "t_s": [], "ok_fraction": [], "ops": [], "overall": None}
    t0 = run_start_ns(h)
    w = ((h.column("invoke_ns")[done] - t0) // int(window_s * 1e9)).astype(np.int64)
    ops = np.bincount(w)
    ok = np.bincount(w, weights=(types[done] == 1).astype(float), minlength=len(ops))
    keep = np.flatnonzero(ops)
    return {"window_s": window_s, "t_s": (keep * window_s).tolist(),
            "ok_fraction": np.round(ok[keep] / ops[keep], 6).tolist(),
            "ops": ops[keep].tolist(),
            "overall": round(float(ok.sum() / ops.sum()), 6)}


def fault_periods(h: History) -> list[dict[str, Any]]:
    """Return [{start_ms, end_ms, label}] from nemesis ops, ms since the run started."""
    proc = h.column("process")
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
            open_[label] = (h.invoke_ns[i], label)
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
        return {"checked": False, "keys": 0, "acknowledged": 0, "lost": 0, "examples": []}
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
    """Return seconds into the run from which no client op succeeded to the end, if that
    stretch lasts at least ``min_s`` and holds at least ``min_ops`` ops (else None)."""
    proc, types = h.column("process"), h.types()
    client = np.flatnonzero((proc >= 0) & (types != 0))
    if len(client) == 0:
        return None
    inv = h.column("invoke_ns")[client]
    order = np.argsort(inv, kind="stable")
    ok = types[client][order] == 1
    last_ok = np.flatnonzero(ok)
    tail = order[last_ok[-1] + 1:] if len(last_ok) else order
    if len(tail) < min_ops:
        return None
    start, end = inv[tail].min(), h.column("complete_ns")[client][tail].max()
    if (end - start) / 1e9 < min_s:
        return None
    return (start - run_start_ns(h)) / 1e9
