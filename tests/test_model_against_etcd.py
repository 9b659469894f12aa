"""``model paxos-wan --against etcd``: the leader transfer, the model's store delays and their
fit, model/twin/real side by side, the recorded evidence judged again, and a 3-region run on a
real etcd (integration).

Whether the fitted model holds within 15 % of every client region's median, with the best
leader the model's, is judged from a recording (``docs/data/paxos-wan-etcd-*.json``, written
by ``benchmarks/paxos_wan_etcd.py``: ~200 writes per leader and client region), from the file
alone. The integration test measures once, briefly, on the shared etcd: the plumbing, a hop
too many or too few, and a verdict that is "agrees" or "inconclusive" with its cause.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import time
from pathlib import Path

import pytest

from replicalab.cluster import toxiproxy
from replicalab.cluster.etcd import leader_index, leader_view, transfer_leadership
from replicalab.cluster.state import Cluster, Node
from replicalab.models import paxos_wan_fit as F
from replicalab.models.paxos_wan import WanParams, latency_by_region_ms
from replicalab.models.twins.wan import simulate_paxos_wan
from replicalab.report.against import against_results, render_against_report, verdicts
from replicalab.workloads.consensus_latency import run_writes


def _status(member: int, leader: int | str | None) -> dict:
    st: dict = {"header": {"member_id": str(member)}}
    if leader is not None:
        st["leader"] = str(leader)
    return st


# ----------------------------------------------------------------------------- leader transfer


def test_leader_view_needs_every_answering_member_to_name_the_same_leader():
    assert leader_view([_status(11, 22), _status(22, 22), _status(33, 22)]) == (22, [11, 22, 33])
    # a member that does not answer does not block agreement among the others
    assert leader_view([None, _status(22, 22), _status(33, 22)]) == (22, [None, 22, 33])
    # members disagree during an election
    assert leader_view([_status(11, 11), _status(22, 22), _status(33, 22)])[0] is None
    # "0" or a missing leader field: no leader
    assert leader_view([_status(11, 0), _status(22, 0), _status(33, 0)])[0] is None
    assert leader_view([_status(11, None), _status(22, None)])[0] is None
    # the named leader is not a member, or does not answer itself
    assert leader_view([_status(11, 99), _status(22, 99)])[0] is None
    assert leader_view([_status(11, 33), _status(22, 33), None])[0] is None
    assert leader_view([None, None]) == (None, [None, None])


def _dead_cluster(n: int) -> Cluster:
    ports = []
    for _ in range(n):  # ports nothing listens on
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    return Cluster("etcd", "gone", "dc3", [Node(i, "US-E", "", p, "/nonexistent")
                                           for i, p in enumerate(ports)])


def test_transfer_leadership_names_what_failed_and_keeps_to_its_deadline():
    c = _dead_cluster(3)
    with pytest.raises(ValueError, match=r"no member n3 \(it has n0..n2\)"):
        transfer_leadership(c, 3)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"did not move to n1 within 0.5 s \(n1 does not "
                                         r"answer\).*cluster status gone"):
        transfer_leadership(c, 1, timeout_s=0.5)
    assert time.monotonic() - t0 < 3.0
    assert leader_index(c) is None


# ----------------------------------------------------------------------------- model and fit


def test_store_delays_shift_the_model_and_its_twin_alike():
    base = WanParams(regions="dc3", leader="US-W")
    p = WanParams(regions="dc3", leader="US-W", persist_ms=10.0, forward_ms=3.0)
    before, after = latency_by_region_ms(base, 100), latency_by_region_ms(p, 100)
    assert before and after
    for r in p.rs.regions:
        # persist shifts every reply, hence the quorum, by exactly itself
        assert after[r] - before[r] == pytest.approx(10.0 + (3.0 if r != "US-W" else 0.0),
                                                     abs=1e-6)
    twin = simulate_paxos_wan(p, [100.0], seed=3, rounds=600).points[0].extra
    for r in p.rs.regions:
        assert twin[f"lat_{r}_ms"] == pytest.approx(after[r], rel=0.01)
    with pytest.raises(ValueError, match="persist_ms"):
        WanParams(persist_ms=-1.0)


def test_the_fit_recovers_the_store_delays_from_a_calibration():
    p = WanParams(regions="dc3")
    zero = latency_by_region_ms(F.zero_delay(p).with_leader("US-W"), 0.0)
    assert zero and max(zero.values()) < 1.0  # no WAN delay: sub-ms processing and hops
    cal = {"US-W": [zero["US-W"] + 7.0 + d for d in (-1.0, 0.0, 1.0)],
           "US-E": [zero["US-E"] + 9.5] * 4, "EU": [zero["EU"] + 9.5] * 2}
    f = F.fit(p, "US-W", cal)
    assert f.persist_ms == pytest.approx(7.0)
    assert f.forward_ms == pytest.approx(2.5)
    assert f.samples == 9
    q = F.fitted(p, f)
    assert (q.persist_ms, q.forward_ms) == (f.persist_ms, f.forward_ms)
    # clients at followers faster than at the leader (noise): no negative delay
    f2 = F.fit(p, "US-W", {"US-W": [zero["US-W"] + 5.0], "EU": [zero["EU"] + 4.0]})
    assert f2.forward_ms == 0.0
    with pytest.raises(ValueError, match="no write of a client at the leader"):
        F.fit(p, "EU", {"US-W": [3.0]})


def _measured(p: WanParams, scale: dict[str, float], rate: float) -> list[F.MeasuredPoint]:
    out = []
    for leader, s in scale.items():
        model = latency_by_region_ms(p.with_leader(leader), rate)
        assert model
        out.append(F.MeasuredPoint(leader, rate, {r: [v * s * 0.98, v * s * 1.02]
                                                  for r, v in model.items()}))
    return out


def test_side_by_side_deviations_and_the_best_leader_check():
    p = WanParams(regions="dc3", persist_ms=5.0)
    rows = F.side_by_side(p, _measured(p, {"US-E": 1.05, "US-W": 0.97, "EU": 1.0}, 30.0),
                          with_twin=False)
    assert len(rows) == 9
    for r in rows:
        want = {"US-E": 0.05, "US-W": -0.03, "EU": 0.0}[r.leader]
        assert r.deviation == pytest.approx(want, abs=1e-9)
        assert r.twin_ms is None and r.samples == 2
        assert r.real_p50_ms == pytest.approx(r.model_ms * (1 + want) * 0.98)
    (rank,) = F.rankings(p, rows)
    assert rank.model_best == rank.real_best == "US-E" and rank.agree
    v = verdicts(rows, [rank], 0.04)
    assert not v["within"] and v["worst"].leader == "US-E" and v["ranking_agrees"]
    # measured US-E 40 % slower: US-W is then measured best, and the check says they differ
    rows = F.side_by_side(p, _measured(p, {"US-E": 1.4, "US-W": 1.0}, 30.0),
                          with_twin=False)
    (rank,) = F.rankings(p, rows)
    assert (rank.model_best, rank.real_best, rank.agree) == ("US-E", "US-W", False)
    assert not verdicts(rows, [rank])["ranking_agrees"]


def test_a_region_without_answered_writes_is_never_within_tolerance():
    p = WanParams(regions="dc3")
    (m,) = _measured(p, {"US-E": 1.0}, 30.0)
    rows = F.side_by_side(p, [F.MeasuredPoint("US-E", 30.0, {**m.latencies_ms, "EU": []})],
                          with_twin=False)
    assert [r.real_ms is None for r in rows] == [False, False, True]
    assert not verdicts(rows, F.rankings(p, rows))["within"]


# ----------------------------------------------------------------------------- the command


def _against(tmp_path: Path, capsys, *args: str, **kw) -> tuple[int, str, str]:
    """Run ``model <args[0]> --against ...`` as the command line does (``cli/main.py``'s
    error policy included); return (exit code, stdout, stderr)."""
    import sys

    from replicalab.cli.main import main

    model, *rest = args
    opts = {"against": "etcd", "duration": None, "params": None, "sets": [],
            "compare": None, "loads": None, "rounds": 20_000, "seed": 1,
            "out": tmp_path / "runs", **kw}
    assert not rest
    argv = ["model", model]
    for name, value in opts.items():
        flag = "--set" if name == "sets" else "--" + name.replace("_", "-")
        for v in value if isinstance(value, list) else [value]:
            if v is not None:
                argv += [flag, str(v)]
    saved = sys.argv
    sys.argv = ["replicalab", *argv]
    try:
        with pytest.raises(SystemExit) as ended:
            main()
    finally:
        sys.argv = saved
    out = capsys.readouterr()
    return int(ended.value.code or 0), out.out, out.err


@pytest.mark.parametrize(("model", "kw", "needle"), [
    ("epaxos", {}, "the epaxos model has no real store to be measured against"),
    ("paxos-wan", {"against": "zookeeper"}, "use one of etcd"),
    ("paxos-wan", {"against": None, "duration": "5s"}, "--duration applies to --against only"),
    ("paxos-wan", {"duration": "soon"}, "--duration 'soon'"),
    ("paxos-wan", {"compare": "sigma_r_factor=1,2"}, "only the leader can vary"),
    ("paxos-wan", {"sets": ["leader=XX"]}, "unknown region 'XX'"),
    ("paxos-wan", {"sets": ["rtt_sd_ms=5"]}, "leave rtt_sd_ms unset"),
    ("paxos-wan", {"sets": ["persist_ms=3"]}, "--against 'etcd' fits persist_ms and forward_ms"),
    ("paxos-wan", {"loads": "10,x"}, "comma-separated writes/s"),
    ("paxos-wan", {"loads": "0"}, "between 0 and 5000"),
    ("paxos-wan", {"rounds": 10}, "--rounds 10 must be at least 100"),
])
def test_bad_input_is_one_line_exit_2_and_starts_nothing(tmp_path, capsys, monkeypatch,
                                                         model, kw, needle):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(tmp_path / ".replicalab"))
    code, out, err = _against(tmp_path, capsys, model, **kw)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines
    assert "Traceback" not in err + out
    assert not (tmp_path / ".replicalab").exists()  # no cluster was started
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_a_custom_region_table_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    params = tmp_path / "p.toml"
    params.write_text('[params.regions]\nregions = ["a", "b", "c"]\n'
                      'rtt_ms = [[0, 10, 20], [10, 0, 30], [20, 30, 0]]\n')
    code, _, err = _against(tmp_path, capsys, "paxos-wan", params=params)
    assert code == 2 and "named region set" in err, err


# ----------------------------------------------------------------------------- recorded evidence

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
RECORDINGS = sorted(p.name for p in DATA.glob("paxos-wan-etcd-*.json"))


def _judged(doc: dict, extra_forward_ms: float = 0.0) -> tuple[dict[str, str], list]:
    """Fit the store delays from a recording's calibration and judge the model against each
    leader's medians (TOLERANCE): per leader "agrees", "disagrees", or "inconclusive" when a
    region misses while the machine added more than that point's tightest tolerance at p99
    (its own noise floor). Return (verdict per leader, rankings)."""
    from replicalab.experiments.against import TOLERANCE, wan_noise_tolerance_ms
    from replicalab.runtime.noise import NoiseFloor

    p = WanParams(regions=doc["regions"])
    cal = doc["calibration"]
    fit = F.fit(p, cal["leader"], cal["latencies_ms"])
    pf = F.fitted(p, fit)
    pf = dataclasses.replace(pf, forward_ms=pf.forward_ms + extra_forward_ms)
    rows = F.side_by_side(pf, [F.MeasuredPoint(x["leader"], x["offered_rps"],
                                               x["latencies_ms"]) for x in doc["points"]],
                          with_twin=False)
    rows = [dataclasses.replace(r, real_ms=r.real_p50_ms) for r in rows]  # medians
    out = {}
    for x in doc["points"]:
        mine = [r for r in rows if r.leader == x["leader"]]
        within = all(r.deviation is not None and abs(r.deviation) <= TOLERANCE for r in mine)
        floor = NoiseFloor.from_json(x["noise"])
        out[x["leader"]] = ("agrees" if within else "inconclusive"
                            if floor.added_p99_ms > wan_noise_tolerance_ms(mine) else
                            "disagrees")
    return out, F.rankings(pf, rows)


def test_a_recording_of_etcd_is_there():
    assert RECORDINGS, "python benchmarks/paxos_wan_etcd.py writes docs/data/paxos-wan-etcd-*"
    doc = json.loads((DATA / RECORDINGS[-1]).read_text())
    assert doc["command"].startswith("python benchmarks/paxos_wan_etcd.py")
    assert {x["leader"] for x in doc["points"]} == {"US-E", "US-W", "EU"}
    assert all(len(v) >= 100 for x in doc["points"] for v in x["latencies_ms"].values())
    assert all(x["noise"] and x["leader_held"] for x in doc["points"])


@pytest.mark.parametrize("name", RECORDINGS)
def test_the_model_agrees_with_the_recorded_medians_and_best_leader(name):
    """The fitted model against every client region's recorded median within TOLERANCE, per
    leader, from the file alone: each leader agrees, or is inconclusive with the noise its
    point measured; at least two agree, and the measured best leader is the model's. A model
    that makes a client outside the leader's region pay one more one-way hop (its forward
    40 ms longer) agrees nowhere, and disagrees where the machine was quiet enough to tell."""
    doc = json.loads((DATA / name).read_text())
    per_leader, ranks = _judged(doc)
    assert "disagrees" not in per_leader.values(), per_leader
    assert sum(v == "agrees" for v in per_leader.values()) >= 2, per_leader
    assert all(k.agree for k in ranks)
    wrong, _ = _judged(doc, extra_forward_ms=40.0)
    assert all(wrong[x] != "agrees" for x, v in per_leader.items() if v == "agrees"), wrong
    assert "disagrees" in wrong.values(), wrong


# ----------------------------------------------------------------------------- real etcd



@pytest.mark.integration
def test_transfer_leadership_moves_the_leader_to_each_member(etcd_dc3):
    c, _ = etcd_dc3
    first = leader_index(c)
    assert first is not None
    for target in [*(i for i in range(len(c.nodes)) if i != first), first]:
        took_s = transfer_leadership(c, target)
        assert leader_index(c) == target and took_s < 10
        assert [n.role for n in c.nodes].count("leader") == 1
        assert c.nodes[target].role == "leader"
    assert transfer_leadership(c, first) < 1.0  # already there: nothing to do


@pytest.mark.integration
def test_three_regions_measured_the_plumbing_and_a_hop_too_many_or_few(etcd_dc3, tmp_path):
    """The measurement on the shared 3-member etcd, once, short (2 s of calibration and 3 s
    per leader): the links' delays and the leader are put back, the leader held through each
    point, every point has its noise floor (through the cluster's Toxiproxy), and every client
    region's median is within 35 ms of the fitted model (a hop too many or too few is a 40 ms
    one-way delay or more) unless the machine added more than that at p99; the verdict is
    "agrees" or "inconclusive" with its measured cause. Whether the model holds within 15 %
    is judged from the recording above, not re-measured here."""
    from replicalab.experiments.against import _judge_with_noise
    from replicalab.runtime.noise import worst

    c, _ = etcd_dc3
    leaders = [n.region for n in c.nodes]  # US-E, US-W, EU
    before_leader = leader_index(c)
    tp = toxiproxy.Toxiproxy(c.toxiproxy_port)
    try:
        before = {k: sorted(t["name"] for t in v["toxics"]) for k, v in tp.proxies().items()}
        run = run_writes(c, leaders, [30.0], duration_s=3.0, seed=5, calibration_s=2.0)
        after = {k: sorted(t["name"] for t in v["toxics"]) for k, v in tp.proxies().items()}
    finally:
        tp.close()
    assert after == before  # the links' delays are as they were (the echo proxies gone)
    assert leader_index(c) == before_leader
    assert len(run.points) == 3 and all(x.leader_held for x in run.points)
    assert all(x.noise is not None and x.noise.echo_via.startswith("toxiproxy")
               for x in [run.calibration, *run.points])
    # the servers watched too: etcd's threads (under its demultiplexer) and Toxiproxy's, and
    # an fsync beside etcd's log, which every write waits for
    assert all(x.noise.server_samples > 0 and x.noise.server_threads > 20
               and x.noise.fsync_samples > 0 and x.noise.fsync_dir == c.nodes[0].data_dir
               for x in [run.calibration, *run.points] if x.noise is not None)
    assert 0 < run.fsync_ms < 1000
    p = WanParams(regions=c.regions)
    fit = F.fit(p, run.calibration.leader, run.calibration.latencies_ms)
    pf = F.fitted(p, fit)
    rows = F.side_by_side(pf, [F.MeasuredPoint(x.leader, x.offered_rps, x.latencies_ms)
                               for x in run.points], with_twin=False)
    rows = [dataclasses.replace(r, real_ms=r.real_p50_ms) for r in rows]
    # The fit comes from the calibration, so its noise bounds the prediction as the points'
    # bound the measurement (the product judges the same way, experiments/against.py).
    floor = worst([x.noise for x in [run.calibration, *run.points] if x.noise is not None])
    assert floor is not None
    far = [(r.leader, r.region, r.model_ms, r.real_ms) for r in rows
           if r.real_ms is None or r.model_ms is None or abs(r.real_ms - r.model_ms) >= 35]
    assert not far or floor.added_p99_ms > 35, (far, floor.line())
    results = against_results("etcd", c.regions, {"regions": c.regions}, fit, run.fsync_ms,
                              rows, F.rankings(pf, rows), {"leaders": leaders})
    _judge_with_noise(results, rows, floor)
    print(results["verdict_line"])
    assert results["verdict"] in ("agrees", "inconclusive"), results["verdict_line"]
    report = render_against_report(results, rows, tmp_path)
    assert "Leader US-W: mean write latency per client region" in report.read_text()
    assert (tmp_path / "figures" / "against.png").exists()


def test_the_model_command_takes_against_and_duration(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from replicalab.cli.main import app

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("REPLICALAB_STATE_DIR", str(tmp_path / ".replicalab"))
    r = CliRunner().invoke(app, ["model", "paxos-wan", "--duration", "5s"])
    assert r.exit_code == 2 and "--duration applies to --against only" in r.stderr, r.stderr
    r = CliRunner().invoke(app, ["model", "epaxos", "--against", "etcd"])
    assert r.exit_code == 2 and "the epaxos model has no real store" in r.stderr, r.stderr
    assert not (tmp_path / ".replicalab").exists()
