"""Shared integration scenario: crash the reader's node; availability drops and returns."""

from __future__ import annotations

from pathlib import Path

from replicalab.cluster.state import Cluster
from replicalab.faults.schedule import parse_fault
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import StalenessConfig


def crash_reader_node(c: Cluster, root: Path, out: Path, duration_s: float = 16.0,
                      recovered_in_run: bool = True) -> dict:
    """Run a probe whose reader sits at n1 (US-W) while n1 is crashed from 4 s to 7 s and
    restarted; assert availability fell during the crash and (``recovered_in_run``)
    recovered before the run's end; return results."""

    spec = ProbeSpec(store=c.url, workload="staleness",
                     options=ProbeOptions(duration_s=duration_s, write_interval_s=0.5,
                                          read_rate=50),
                     config=StalenessConfig(placement="separate-clients",
                                               writer_region="US-E", reader_region="US-W"),
                     cluster=c.name, cluster_root=str(root),
                     faults=(parse_fault("at=4s crash node=1 for=3s"),))
    r = run_probe(spec, out).results
    a = dict(zip(r["availability"]["t_s"], r["availability"]["ok_fraction"], strict=True))
    during = [a[t] for t in (4.0, 5.0, 6.0) if t in a]
    # the reader's node is down: its operations fail or time out (a blocked closed-loop
    # reader issues few of them, so the fraction need not reach 0)
    assert during and min(during) < 1.0 and r["ops"]["info"] + r["ops"]["failed"] > 0, a
    assert a.get(1.0) == 1.0, a                       # fine before the fault
    if recovered_in_run:
        tail = [a[t] for t in sorted(a)[-2:]]
        assert min(tail) >= 0.9, a                    # and back after the restart
    assert [f["label"] for f in r["faults"]] == ["crash n1"]
    return r
