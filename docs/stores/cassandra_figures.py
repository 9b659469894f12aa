"""Figures and tables of docs/stores/cassandra.md, measured on a Cassandra cluster.

Run from the repository root:  .venv/bin/python docs/stores/cassandra_figures.py
It brings up `cluster up cassandra --nodes 3 --regions dc3` (its own, stopped at the end),
runs the probes below and prints the Markdown tables quoted in the page; writes
docs/stores/img/cassandra-staleness.png. About 12 minutes on this machine.

* staleness, writer at US-E, reader at US-W: ONE/ONE (eventual reads) and QUORUM/QUORUM
  (consistent reads), 60 s each, a write every second, 100 reads/s;
* the register workload (3 keys, 6 clients, 20 s): ONE/ONE eventual reads at US-W, SERIAL
  reads with every write a lightweight transaction, QUORUM/QUORUM;
* EU cut off for 10 s (from 5 s of a 20 s probe) with the writer at US-E writing at QUORUM
  and the reader in each region reading at LOCAL_ONE, ONE and QUORUM.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import since_ack
from replicalab.cluster import base
from replicalab.faults.schedule import parse_fault
from replicalab.history import load_history
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig

IMG = Path(__file__).parent / "img"
OUT = Path(tempfile.mkdtemp(prefix="cassandra-figures-"))


def staleness(url: str, consistency: str) -> tuple[dict[str, Any], Path]:
    spec = ProbeSpec(store=url, workload="staleness",
                     options=ProbeOptions(consistency=consistency, duration_s=60,
                                          write_interval_s=1.0, read_rate=100),
                     config=StalenessConfig(placement="separate-clients", writer_region="US-E",
                                            reader_region="US-W", ranges="0-30,30-60,60-1000"))
    run = run_probe(spec, OUT)
    assert not run.error, run.error
    return run.results, run.run_dir


def staleness_section(c: Any) -> None:
    fig = Figure(figsize=(7.5, 4.0), layout="constrained", facecolor="white")
    ax = fig.add_subplot()
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    print("\n| levels (read/write) | reads | stale reads | last stale read after the write "
          "started (median of the writes) | fresh 0–30 / 30–60 / 60–1000 ms | reads after an "
          "ack: fresh |")
    print("|---|---|---|---|---|---|")
    for label, suffix, consistency in (("ONE / ONE", "&write_cl=ONE", "eventual"),
                                       ("QUORUM / QUORUM", "", "consistent")):
        r, run_dir = staleness(c.url + suffix, consistency)
        f = r["freshness"]  # non-empty 1 ms buckets: t_ms, fresh, total
        t = np.asarray(f["t_ms"], dtype=float)
        total = np.asarray(f["total"], dtype=float)
        fresh = np.asarray(f["fresh"], dtype=float)
        keep = total > 0
        # 5 ms buckets for the figure
        b = (t // 5).astype(int)
        tot5 = np.bincount(b, weights=total)
        fr5 = np.bincount(b, weights=fresh)
        ok = tot5 > 0
        ax.plot((np.flatnonzero(ok) * 5 + 2.5), fr5[ok] / tot5[ok], linewidth=1.4,
                label=f"{label} (reader at US-W)")
        h, _ = load_history(run_dir)
        writes, reads = element_ops(h, KEY)
        after = since_ack(writes, reads)
        stale = sum(total[keep]) - sum(fresh[keep])
        ranges = " / ".join(f"{100 * x['p']:.1f} %" for x in r["fresh_by_range"])
        print(f"| {label} | {r['ops']['reads']:,} | {100 * stale / sum(total[keep]):.2f} % | "
              f"{r['periods']['last_lt_100_median_ms']} ms | {ranges} | "
              f"{sum(after['fresh']):,} of {sum(after['total']):,} |")
    ax.set_xlim(0, 250)
    ax.set_xlabel("time since the write started (ms)")
    ax.set_ylabel("fraction of fresh reads")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(frameon=False, fontsize=8)
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG / "cassandra-staleness.png", dpi=130)
    print(f"wrote {IMG / 'cassandra-staleness.png'}")


def register_section(c: Any) -> None:
    print("\n| register (writer US-E, reader US-W) | reads / writes ok | info | verdict | "
          "smallest counterexample |")
    print("|---|---|---|---|---|")
    for label, suffix, consistency in (
            ("ONE reads, ONE writes", "&write_cl=ONE&eventual_cl=ONE", "eventual"),
            ("SERIAL reads, every write an LWT", "&consistent_cl=SERIAL&writes=lwt",
             "consistent"),
            ("QUORUM reads, QUORUM writes (cas: LWT)", "", "consistent")):
        spec = ProbeSpec(store=c.url + suffix, workload="register",
                         options=ProbeOptions(consistency=consistency, duration_s=20),
                         config=RegisterConfig(keys=3, clients=6, rate=25.0,
                                               writer_region="US-E", reader_region="US-W"))
        run = run_probe(spec, OUT)
        r = run.results
        lin = r["linearizability"]
        bad = [p for p in lin["parts"] if p["valid"] is False]
        ce = ""
        if bad:
            part = min(bad, key=lambda p: len(p["counterexample"]))
            ce = f"{len(part['counterexample'])} ops: {part['explanation']}"
        print(f"| {label} | {r['ops']['reads']} / {r['ops']['writes']} | {r['ops']['info']} | "
              f"{lin['valid']} | {ce} |")
        print(f"  run: {run.run_dir}", file=sys.stderr)


def partition_section(c: Any) -> None:
    fault = parse_fault("at=5s partition region=EU for=10s")
    print("\n| reader in | level | reads answered (time) before / during / after the cut | "
          "writes at QUORUM from US-E: acknowledged, lost |")
    print("|---|---|---|---|")
    for reader in ("US-E", "US-W", "EU"):
        for level, consistency in (("LOCAL_ONE", "eventual"), ("ONE", "eventual"),
                                   ("QUORUM", "consistent")):
            spec = ProbeSpec(store=f"{c.url}&eventual_cl={level}&consistent_cl={level}",
                             workload="staleness",
                             options=ProbeOptions(consistency=consistency, duration_s=20,
                                                  write_interval_s=0.25, read_rate=50),
                             config=StalenessConfig(placement="separate-clients",
                                                    writer_region="US-E", reader_region=reader),
                             cluster=c.name, faults=(fault,))
            r = run_probe(spec, OUT).results
            a = r["availability"]
            reads = a["by_f"]["read"]["ok_fraction"]
            t = a["t_s"]

            def mean(lo: float, hi: float, reads: list[float] = reads,
                     t: list[float] = t) -> float:
                xs = [x for s, x in zip(t, reads, strict=True) if lo <= s < hi]
                return sum(xs) / len(xs)

            lw = r["lost_writes"]
            print(f"| {reader} | {level} | {100 * mean(0, 5):.0f} % / {100 * mean(5, 15):.0f} % "
                  f"/ {100 * mean(15, 20):.0f} % | {lw['acknowledged']}, {lw['lost']} |")


def main() -> None:
    c = base.up("cassandra", 3, "dc3", name="cassandra-figures")
    try:
        print(json.dumps({"url": c.url}))
        staleness_section(c)
        register_section(c)
        partition_section(c)
    finally:
        base.down(c.name)


if __name__ == "__main__":
    main()
