"""Seed 003 §4 on the simulator: paced closed-loop clients, SimpleDB's admission control
(ServiceUnavailable past its capacity, none below), the observations judged on a run, and
``replicalab load tradeoff`` end to end."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from replicalab.checkers.tradeoff import observations
from replicalab.sim.simpledb import CAPACITY_PER_S
from replicalab.workloads.load import LoadSpec, run_worker
from replicalab.workloads.load_runner import merge_step

NS = 1_000_000_000
QUIET = "read_hiccup_p=0&write_hiccup_p=0&client_cpu_ms=0"


def _by_client(h) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for op in h:
        if op.process >= 0:
            out.setdefault(op.process, []).append((op.invoke_ns, op.complete_ns))
    return {p: sorted(v) for p, v in out.items()}


def test_paced_clients_send_one_request_per_slot_and_wait_for_each_reply():
    spec = LoadSpec.paced(f"sim://simpledb?{QUIET}", groups=2, clients_per_group=5,
                          client_rate_per_s=2.0, duration_s=10.0, read_ratio=1.0)
    spec.check()
    r = run_worker(spec)
    assert not r.error
    # each client's first slot lies in [0, 500 ms): slots 0..19 fall inside 10 s
    assert r.counts.offered == 10 * 20
    assert r.counts.sent == r.counts.offered  # 22 ms replies: no slot is missed
    clients = _by_client(r.history)
    assert len(clients) == 10
    for ops in clients.values():
        assert len(ops) == 20
        invokes = np.array([i for i, _ in ops])
        assert np.all(np.diff(invokes) == NS // 2)  # one request a slot, on the grid
        assert all(nxt >= done for (_, done), (nxt, _) in itertools.pairwise(ops))
    firsts = sorted(ops[0][0] for ops in clients.values())
    assert len(set(firsts)) == 10 and firsts[-1] - firsts[0] < NS // 2  # phases spread


def test_a_reply_slower_than_a_slot_skips_slots_and_lowers_the_throughput_share():
    # every read takes 700 ms; a client meant to read every 500 ms reads every 700 ms
    spec = LoadSpec.paced(f"sim://simpledb?{QUIET}&client_rtt_ms=700&client_sd_ms=0",
                          groups=1, clients_per_group=4, client_rate_per_s=2.0,
                          duration_s=14.0, read_ratio=1.0)
    r = run_worker(spec)
    step = merge_step([r], spec.rate_per_s, spec.duration_s)
    assert r.counts.offered == 4 * 28
    for ops in _by_client(r.history).values():
        gaps = np.diff([i for i, _ in ops]) / 1e6
        assert np.all(np.abs(gaps - 700.05) < 1.0), gaps  # sent at each reply, no burst
    assert r.counts.errors["unsent"] == r.counts.offered - r.counts.sent > 0
    share = 100 * r.counts.ok / r.counts.offered
    assert abs(share - 100 * 500 / 700) < 5, share
    assert step["failure_rate"] == 0.0  # skipped slots are not failures


def _overload_step(groups: int) -> dict:
    spec = LoadSpec.paced("sim://simpledb?clients_per_machine=100", groups=groups,
                          clients_per_group=100, client_rate_per_s=1.0, duration_s=5.0,
                          read_ratio=1.0, keyspace=100, timeout_ms=10_000, drain_s=10)
    r = run_worker(spec)
    assert not r.error
    return {"step": merge_step([r], spec.rate_per_s, spec.duration_s), "result": r}


def test_simpledb_refuses_calls_beyond_its_capacity_with_service_unavailable():
    offered = 3000.0  # reads a second, one unit each, against 2000
    got = _overload_step(30)
    step, h = got["step"], got["result"].history
    refused = [op for op in h if op.process >= 0 and op.type == "fail"]
    assert refused and all(op.error.startswith("ServiceUnavailable (503)") for op in refused)
    assert not [op for op in h if op.process >= 0 and op.type == "info"]
    assert step["counts"]["errors"]["busy"] == len(refused)
    # the share past the capacity is refused: 1/3 of 3000/s (less the first 100 ms burst
    # of tolerance, 200 units of 15,000)
    expected = 1 - CAPACITY_PER_S / offered
    assert abs(step["failure_rate"] - expected) < 0.03, step["failure_rate"]
    # refused at once: a refusal costs the client one round trip, no queueing
    assert max(op.complete_ns - op.invoke_ns for op in refused) < 40e6


def test_below_its_capacity_simpledb_refuses_nothing():
    step = _overload_step(15)["step"]  # 1500 reads/s against 2000
    assert step["failure_rate"] == 0.0
    assert step["counts"]["errors"]["busy"] == 0


def test_groups_are_dealt_out_to_workers_whole():
    spec = LoadSpec.paced("sim://simpledb", groups=7, clients_per_group=10)
    shares = [spec.share(w, 3) for w in range(3)]
    assert [s.groups for s in shares] == [3, 2, 2]
    assert sum(s.rate_per_s for s in shares) == spec.rate_per_s
    assert len({s.seed for s in shares}) == 3


def _point(consistency: str, groups: int, mean: float, p95: float, p999: float,
           thr: tuple[float, float, float], fail: tuple[float, float, float],
           ratio: float = 0.99) -> dict:
    return {"read_ratio": ratio, "consistency": consistency, "groups": groups,
            "clients": 100 * groups, "offered_per_s": 100.0 * groups, "repeats": 3,
            "throughput_rps": dict(zip(("mean", "min", "max"), thr, strict=True)),
            "throughput_pct": {"mean": 100.0 - groups, "min": 0.0, "max": 100.0},
            "failure_rate": dict(zip(("mean", "min", "max"), fail, strict=True)),
            "latency": {"read": {"count": 10, "mean_ms": mean, "p95_ms": p95,
                                 "p999_ms": p999},
                        "write": {"count": 10, "mean_ms": 110.0}}}


def test_observations_judge_the_papers_claims_on_the_points():
    pts = [_point("eventual", 1, 22.0, 40.0, 300.0, (100, 99, 101), (0, 0, 0)),
           _point("consistent", 1, 22.5, 39.0, 290.0, (100, 98, 101), (0, 0, 0)),
           _point("eventual", 25, 30.0, 60.0, 900.0, (2000, 1990, 2010), (0.2, 0.18, 0.22)),
           _point("consistent", 25, 30.5, 58.0, 950.0, (2001, 1995, 2008), (0.19, 0.17, 0.2))]
    got = {o["claim"].split(":")[0] + o["claim"][-20:]: o["holds"] for o in observations(pts)}
    holds = [o["holds"] for o in observations(pts)]
    assert holds == [True, True, False, True, True, True, True], got
    # consistent reads 20 % slower on average: a visible difference; whiskers apart
    pts[1] = _point("consistent", 1, 27.0, 39.0, 290.0, (90, 89, 91), (0, 0, 0))
    judged = observations(pts)
    assert judged[0]["holds"] is False and "22.7 %" in judged[0]["evidence"]
    assert judged[3]["holds"] is False and "groups [1]" in judged[3]["evidence"]


def test_observations_say_when_the_run_cannot_tell():
    only = [_point("eventual", 1, 22.0, 40.0, 300.0, (100, 99, 101), (0, 0, 0))]
    (o,) = observations(only)
    assert o["holds"] is None and "no pair" in o["evidence"]


def test_cli_tradeoff_fails_past_capacity_only_and_draws_the_figures(tmp_path: Path):
    out = tmp_path / "runs"
    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "load", "tradeoff", "--groups",
                        "1,25", "--repeats", "1", "--step-duration", "2s", "--read-ratios",
                        "0.99", "--out", str(out), "--json"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["complete"] and len(doc["cells"]) == 2 * 2
    by = {(pt["consistency"], pt["groups"]): pt for pt in doc["points"]}
    for c in ("eventual", "consistent"):
        assert by[(c, 1)]["failure_rate"]["max"] == 0.0
        # 2500 clients offer 2525 units/s against 2000: about a fifth refused
        assert 0.15 < by[(c, 25)]["failure_rate"]["min"] <= by[(c, 25)]["failure_rate"]["max"]
        assert by[(c, 25)]["throughput_rps"]["mean"] < 2100
    claims = {o["claim"]: o["holds"] for o in doc["observations"]}
    assert claims["Figure 12: the failure rate rises as the offered load rises"] is True
    # one run per load: whiskers cannot say whether eventual and consistent differ
    assert [h for c, h in claims.items() if "whiskers" in c] == [None, None]
    run_dir = Path(doc["run_dir"])
    assert {f.name for f in (run_dir / "figures").iterdir()} == {
        "tradeoff-read-latency.png", "tradeoff-ratio-latency.png", "tradeoff-throughput.png",
        "tradeoff-share.png", "tradeoff-failures.png"}
    assert (run_dir / "report.html").stat().st_size > 10_000


@pytest.mark.parametrize(("args", "needle"), [
    (["--groups", "1,x"], "--groups '1,x' must be a comma-separated list"),
    (["--consistency", "strong"], "--consistency strong: use eventual, consistent"),
    (["--repeats", "0"], "--repeats 0 must be at least 1"),
    (["--store", "nope://x"], "nope"),
])
def test_cli_tradeoff_bad_input_is_one_line_and_exit_2(args, needle, tmp_path: Path):
    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "load", "tradeoff", *args,
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())  # refused before a run directory is made


DOC_RUN = Path(__file__).resolve().parent.parent / "docs" / "data" / \
    "tradeoff-2026-11-29-simpledb.json"


@pytest.mark.parametrize(("ratio", "consistency"), [(0.99, "eventual"), (0.5, "consistent")])
def test_the_documented_run_is_what_this_code_gives(ratio, consistency):
    """docs/reproductions.md's §4 figures come from docs/data's run: a cell of it, run
    again (virtual time: the same seed gives the same run), gives the same counts and
    latencies, and the run's observations are the ones its points give."""
    from replicalab.experiments.tradeoff import TradeoffPlan, run_cell

    doc = json.loads(DOC_RUN.read_text())
    plan = TradeoffPlan(**{**doc["plan"], **{k: tuple(v) for k, v in doc["plan"].items()
                                             if isinstance(v, list)}})
    (cell,) = [c for c in doc["cells"] if (c["read_ratio"], c["consistency"], c["groups"],
                                           c["repeat"]) == (ratio, consistency, 1, 0)]
    step = run_cell(plan.spec(ratio, consistency, 1, 0))
    assert step["counts"] == cell["step"]["counts"]
    assert step["latency"] == cell["step"]["latency"]
    assert observations(doc["points"]) == doc["observations"]
