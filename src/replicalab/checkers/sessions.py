"""Session guarantees (Terry et al.) seen by clients: read-your-writes and monotonic reads."""

from __future__ import annotations

import numpy as np

from replicalab.checkers.extract import ReadLog, WriteLog
from replicalab.checkers.freshness import Judged
from replicalab.checkers.stats import pearson


def read_your_writes(writes: WriteLog, reads: ReadLog) -> dict[str, object]:
    """Return reads by a writer process that missed that process's last completed write."""
    result = {"applicable": False, "reads": 0, "violations": 0, "fraction": None}
    for proc in np.unique(writes.process).tolist():
        mine = writes.process == proc
        done_t = writes.complete_ns[mine]
        order = np.argsort(done_t, kind="stable")
        done_t, ver = done_t[order], writes.version[mine][order]
        sel = reads.process == proc
        if not sel.any():
            continue
        last = np.searchsorted(done_t, reads.invoke_ns[sel], side="right") - 1
        has = last >= 0
        need = np.maximum.accumulate(ver)[last[has]]
        result["applicable"] = True
        result["reads"] += int(has.sum())
        result["violations"] += int((reads.version[sel][has] < need).sum())
    if result["reads"]:
        result["fraction"] = round(result["violations"] / result["reads"], 6)
    return result


def successive_reads(j: Judged, reads: ReadLog, window_ms: tuple[float, float]
                     ) -> dict[str, object]:
    """Return the 2x2 table of consecutive reads by one process after the same write.

    Both reads must fall in ``window_ms`` after that write's start; fresh-then-stale pairs
    are monotonic-read violations. Also returns the Pearson correlation of the outcomes.
    """
    proc = reads.process[j.read]
    inwin = (j.elapsed_ms >= window_ms[0]) & (j.elapsed_ms < window_ms[1])
    first_fresh, second_fresh = [], []
    for p in np.unique(proc).tolist():
        idx = np.flatnonzero(proc == p)
        order = idx[np.argsort(reads.invoke_ns[j.read[idx]], kind="stable")]
        a, b = order[:-1], order[1:]
        ok = inwin[a] & inwin[b] & (j.write[a] == j.write[b])
        first_fresh.append(j.fresh[a[ok]])
        second_fresh.append(j.fresh[b[ok]])
    x = np.concatenate(first_fresh) if first_fresh else np.zeros(0, bool)
    y = np.concatenate(second_fresh) if second_fresh else np.zeros(0, bool)
    n = len(x)
    counts = {
        "stale_stale": int((~x & ~y).sum()), "stale_fresh": int((~x & y).sum()),
        "fresh_stale": int((x & ~y).sum()), "fresh_fresh": int((x & y).sum()),
    }
    out: dict[str, object] = {"window_ms": list(window_ms), "pairs": n, "counts": counts}
    out.update({k: round(v / n, 6) if n else None for k, v in counts.items()})
    r = pearson(x, y)
    out["pearson"] = None if r is None else round(r, 6)
    return out


def monotonic_read_violations(reads: ReadLog) -> dict[str, int]:
    """Return how many reads saw an older version than an earlier read by the same process."""
    total = viol = 0
    for p in np.unique(reads.process).tolist():
        sel = np.flatnonzero(reads.process == p)
        order = sel[np.argsort(reads.invoke_ns[sel], kind="stable")]
        v = reads.version[order]
        if len(v) < 2:
            continue
        best = np.maximum.accumulate(v)
        viol += int((v[1:] < best[:-1]).sum())
        total += len(v) - 1
    return {"pairs": total, "violations": viol}
