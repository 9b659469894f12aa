"""Faults on the simulated store, in virtual time: partition, crash, pause and slow act on
sim://primary and sim://quorum nodes, nodes catch up when they rejoin, runs stay
deterministic, and stores or targets that cannot take a fault are refused before a run
directory is made."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from replicalab.cli.main import app
from replicalab.faults.schedule import parse_fault
from replicalab.history import NEMESIS, History, load_history
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import StalenessConfig

DC3 = "sim://primary?regions=dc3"
WRITER_E_READER_W = StalenessConfig(placement="separate-clients", writer_region="US-E",
                                    reader_region="US-W")


def probe(tmp_path: Path, store: str, *faults: str, duration_s: float = 20.0,
          consistency: str = "eventual", config: StalenessConfig = WRITER_E_READER_W
          ) -> tuple[dict, History]:
    spec = ProbeSpec(store=store, workload="staleness",
                     options=ProbeOptions(duration_s=duration_s, consistency=consistency),
                     config=config, faults=tuple(parse_fault(f) for f in faults))
    run = run_probe(spec, tmp_path)
    assert run.error == "", run.error
    h, _ = load_history(run.run_dir)
    return run.results, h


def reads(h: History, from_s: float, to_s: float) -> tuple[np.ndarray, list[tuple]]:
    """Return (latency ms, values) of client reads invoked in [from_s, to_s) of the run."""
    inv = h.column("invoke_ns")
    t0 = inv[h.column("process") >= 0].min()
    t = (inv - t0) / 1e9
    sel = np.flatnonzero((h.column("f") == h.f_code("read")) & (h.column("process") >= 0)
                         & (t >= from_s) & (t < to_s))
    lat = (h.column("complete_ns")[sel] - inv[sel]) / 1e6
    return lat, [h.values[i] for i in sel]


def versions(values: list[tuple]) -> set[int]:
    """Return the write numbers ("<n>.0@<ns>") the reads saw."""
    return {int(v[0].split(".")[0]) for v in values}


def test_a_partitioned_region_reads_stale_and_catches_up_when_healed(tmp_path: Path):
    r, h = probe(tmp_path, DC3, "at=5s partition region=US-W for=5s")
    assert [f["label"] for f in r["faults"]] == ["partition region US-W"]
    # writes every 3 s (v1 at 0 s ... v3 at 6 s, v4 at 9 s): US-W keeps v2 while cut off
    assert versions(reads(h, 5.5, 10.0)[1]) == {2}
    assert versions(reads(h, 10.3, 12.0)[1]) == {4}  # the resync after the heal
    assert r["availability"]["overall"] == 1.0  # the region's own replica still answers


def test_a_crashed_replica_times_out_then_rejoins_fresh(tmp_path: Path):
    r, h = probe(tmp_path, DC3 + "&timeout_ms=500", "at=4s crash node=1 for=4.5s")
    assert r["ops"]["info"] >= 8  # the reader's requests to the dead node (US-W's) time out
    lat, _ = reads(h, 4.0, 8.4)
    assert lat.min() >= 500  # timeouts, never an answer
    # v3 was written at 6 s while n1 was down: only the resync at its restart brings it
    assert versions(reads(h, 8.7, 9.0)[1]) == {3}
    assert versions(reads(h, 9.4, 12.0)[1]) == {4}


def test_a_crashed_primary_makes_writes_time_out_until_it_restarts(tmp_path: Path):
    same = StalenessConfig(placement="separate-clients", writer_region="US-E",
                           reader_region="US-E")
    r, h = probe(tmp_path, DC3, "at=4s crash node=0 for=3s", config=same)
    writes = np.flatnonzero((h.column("f") == h.f_code("write"))
                            & (h.column("process") >= 0))
    kinds = h.column("type")[writes]
    assert (kinds == 3).sum() >= 1 and (kinds == 1).sum() >= 4  # info during, ok around
    a = dict(zip(r["availability"]["t_s"], r["availability"]["ok_fraction"], strict=True))
    assert a[4.0] < 1.0 and a[1.0] == 1.0 and a[max(a)] == 1.0


def test_sync_replication_blocks_while_a_replica_is_cut_off(tmp_path: Path):
    _, h = probe(tmp_path, DC3 + "&replication=sync", "at=2s partition region=EU for=4s",
                 config=StalenessConfig(placement="separate-clients",
                                           writer_region="US-E", reader_region="US-E"))
    writes = np.flatnonzero((h.column("f") == h.f_code("write")) & (h.column("process") >= 0))
    inv = (h.column("invoke_ns")[writes] - h.column("invoke_ns").min()) / 1e9
    kinds = h.column("type")[writes]
    assert set(kinds[(inv > 2) & (inv < 6)]) == {3}  # no acknowledgement while cut off
    assert set(kinds[inv > 12]) == {1}


def test_pause_queues_requests_and_slow_adds_delay_nothing_lost(tmp_path: Path):
    same = StalenessConfig(placement="separate-clients", writer_region="US-E",
                           reader_region="US-E")
    r, h = probe(tmp_path, DC3, "at=2s pause node=0 for=1s", "at=6s slow node=0 ms=20 for=2s",
                 consistency="consistent", config=same, duration_s=10)
    assert r["ops"]["info"] == r["ops"]["failed"] == 0
    before, _ = reads(h, 0.5, 1.9)
    paused, _ = reads(h, 1.95, 2.05)
    slowed, _ = reads(h, 6.1, 7.9)
    assert before.max() < 2 and 900 < paused.max() < 1100  # waited out the pause
    assert 40 <= np.median(slowed) < 42  # 20 ms more each way
    assert np.median(reads(h, 8.2, 10)[0]) < 2  # restored


def test_quorum_replicas_take_faults_too(tmp_path: Path):
    store = "sim://quorum?n=3&r=3&w=3&regions=lan"
    r, h = probe(tmp_path, store, "at=2s pause node=1 for=1s", "at=5s slow node=2 ms=10 for=2s",
                 "at=8s crash node=0 for=2s", duration_s=12,
                 config=StalenessConfig(placement="separate-clients"))
    assert 900 < reads(h, 1.95, 2.05)[0].max() < 1100  # R=3 waits for the paused replica
    assert 20 <= np.median(reads(h, 5.1, 6.9)[0]) < 22
    assert r["ops"]["info"] >= 1  # R=3 cannot be met with a replica down


def test_runs_with_faults_are_deterministic(tmp_path: Path):
    a, _ = probe(tmp_path / "a", DC3, "at=5s partition region=US-W for=5s",
                 "at=12s crash node=0 for=3s")
    b, _ = probe(tmp_path / "b", DC3, "at=5s partition region=US-W for=5s",
                 "at=12s crash node=0 for=3s")
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def test_a_fault_due_after_the_run_is_neither_started_nor_healed(tmp_path: Path):
    r, h = probe(tmp_path, DC3, "at=50s crash node=0 for=10s", duration_s=5)
    assert r["faults"] == [] and (h.column("process") == NEMESIS).sum() == 0
    assert h.column("complete_ns").max() - h.column("invoke_ns").min() < 7e9  # not extended


@pytest.mark.parametrize("store, fault, message", [
    ("sim://simpledb", "at=1s crash node=0 for=1s", "sim://primary or sim://quorum"),
    (DC3, "at=1s crash node=7 for=1s", "node=0..2"),
    (DC3, "at=1s partition region=Mars for=1s", "US-E, US-W"),
])
def test_faults_a_simulated_store_cannot_take_are_one_line_errors(tmp_path: Path, store,
                                                                    fault, message):
    out = tmp_path / "runs"
    res = CliRunner().invoke(app, ["probe", "--store", store, "--duration", "5s",
                                   "--fault", fault, "--out", str(out)])
    assert res.exit_code == 2, res.output
    assert message in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not out.exists() or not any(out.iterdir())  # no run directory left behind


def test_a_schedule_cut_short_heals_what_it_started():
    # a run interrupted (Ctrl-C, a failed store) mid-fault must not leave the node down
    import asyncio

    from replicalab.faults.nemesis import run_schedule
    from replicalab.history.core import F_NAMES
    from replicalab.runtime.real import RealRuntime

    rt, h = RealRuntime(), History()
    crash, later = parse_fault("at=0s crash node=1 for=60s"), parse_fault("at=50s pause "
                                                                          "node=2 for=1s")
    acts: list[tuple[str, bool]] = []
    began = asyncio.Event()

    async def act(f, ending: bool) -> None:
        acts.append((f.action, ending))
        began.set()

    async def main() -> None:
        t0 = rt.now_ns()
        task = asyncio.ensure_future(run_schedule([crash, later], h, rt, t0, t0 + int(120e9),
                                                  act))
        await asyncio.wait_for(began.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert acts == [("crash", False), ("crash", True)]  # healed; the pause never began
    ops = [(F_NAMES[h.f[i]], h.type[i]) for i in range(len(h)) if h.process[i] == NEMESIS]
    assert ops == [("crash", 1), ("heal", 1)]  # both recorded ok
