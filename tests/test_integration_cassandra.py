"""Real Cassandra 5.0 on emulated dc3 links (one data centre per region): the cluster's
layout and links, store operations, staleness at ONE and QUORUM, the register workload's
verdicts, a region partition per consistency level, and nothing left after SIGTERM.

The tests share the session cluster ``cassandra_dc3`` (one start per run, see conftest.py),
but for two: the SIGTERM one, and one single-node cluster that checks a client region and
then that ``down`` leaves nothing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import wan
from freshcheck import done_before_ms
from replicalab.checkers import visibility
from replicalab.checkers.accounting import availability, run_start_ns
from replicalab.checkers.extract import element_ops
from replicalab.checkers.freshness import since_ack
from replicalab.cluster import base, process
from replicalab.cluster.cassandra import CQL_PORT, STORAGE_PORT, advertised
from replicalab.cluster.state import Cluster
from replicalab.faults.schedule import parse_fault
from replicalab.history import F_NAMES, NEMESIS, load_history
from replicalab.runtime.noise import NoiseFloor
from replicalab.stores import ABSENT, ConditionFailed, Unsupported, open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.register import RegisterConfig
from replicalab.workloads.runner import ProbeSpec, run_probe
from replicalab.workloads.staleness import KEY, StalenessConfig
from servers import server_missing

pytestmark = pytest.mark.integration


def _one_way_ms(c: Cluster, src: str, dst: str) -> float:
    """Injected delay from the node of region ``src`` to the node of region ``dst``."""
    a = next(n.index for n in c.nodes if n.region == src)
    b = next(n.index for n in c.nodes if n.region == dst)
    return next(x.upstream_ms for x in c.links if x.name == f"peer-{a}-{b}")


async def _ops(url: str, *steps: Any, region: str | None = "US-W") -> list[Any]:
    store = open_store(url, 1)
    try:
        client = await store.connect(region)
        return [await step(client) for step in steps]
    finally:
        await store.close()


def test_layout_links_and_status(cassandra_dc3):
    c, root = cassandra_dc3
    assert c.url.startswith("cassandra://127.42.")
    assert [n.region for n in c.nodes] == ["US-E", "US-W", "EU"]
    assert len({advertised(n) for n in c.nodes}) == 3
    # one proxy per ordered pair of nodes, each carrying its own direction's delay
    assert sorted(x.name for x in c.links if x.kind != "client") == sorted(
        f"peer-{a}-{b}" for a in range(3) for b in range(3) if a != b)
    # and one client link per client region and node outside it
    assert sorted(x.name for x in c.links if x.kind == "client") == sorted(
        f"client-{r}-{i}" for r in ("US-E", "US-W", "EU") for i in range(3)
        if c.nodes[i].region != r)
    assert _one_way_ms(c, "US-E", "US-W") == 40 and _one_way_ms(c, "US-W", "US-E") == 41.5
    _, rows = base.status(c.name, root)
    assert [r["role"] for r in rows] == ["up"] * 3 and all(r["alive"] == "yes" for r in rows)


def test_store_operations_lwt_and_batches(cassandra_dc3):
    c, _ = cassandra_dc3

    async def fail_cas(cl, values, expect):
        with pytest.raises(ConditionFailed):
            await cl.write(values, expect=expect)

    async def cross_item_cas(cl):
        with pytest.raises(Unsupported):
            await cl.write({"t/i/a": "x"}, expect={"t/j/c": "3"})

    steps = [
        lambda cl: cl.delete(["t/i/a", "t/i/b", "t/j/c", "t/k/new"]),
        lambda cl: cl.write({"t/i/a": "1", "t/i/b": "2", "t/j/c": "3"}),  # logged batch
        lambda cl: cl.write({"t/i/a": "4"}, expect={"t/i/a": "1"}),
        lambda cl: fail_cas(cl, {"t/i/a": "5"}, {"t/i/a": "1"}),
        lambda cl: fail_cas(cl, {"t/i/b": "5"}, {"t/i/a": ABSENT}),
        lambda cl: cl.write({"t/k/new": "6"}, expect={"t/k/new": ABSENT, "t/k/none": ABSENT}),
        cross_item_cas,
        lambda cl: cl.delete(["t/j/c", "t/j/never"]),
        lambda cl: cl.read(["t/i/a", "t/i/b", "t/j/c", "t/k/new", "t/k/none"],
                           consistent=True),
    ]
    got = asyncio.run(_ops(c.url, *steps))[-1]
    assert got.values == ("4", "2", None, "6", None)
    assert got.node == "n1"  # the US-W client is pinned to the US-W node
    with pytest.raises(ValueError, match=r"cannot reach Cassandra at 127\.0\.0\.1:1 ") as err:
        asyncio.run(_ops("cassandra://127.0.0.1:1?timeout_ms=500", region=None))
    assert "\n" not in str(err.value)


def _staleness(url: str, consistency: str, out: Path, duration_s: float = 6.0,
               readers: int = 1) -> tuple[dict[str, Any], Path]:
    # one measurement period per write: the periods' median is the median over the writes
    spec = ProbeSpec(store=url, workload="staleness",
                     options=ProbeOptions(consistency=consistency, duration_s=duration_s,
                                          write_interval_s=0.3, read_rate=200, period_s=0.3),
                     config=StalenessConfig(placement="separate-clients", readers=readers,
                                            writer_region="US-E", reader_region="US-W",
                                            ranges="0-30,150-400"))
    run = run_probe(spec, out)
    assert not run.error, run.error
    return run.results, run.run_dir


def test_one_one_stale_for_the_one_way_delay_quorum_never_after_ack(cassandra_dc3, tmp_path):
    c, _ = cassandra_dc3
    one_way = _one_way_ms(c, "US-E", "US-W")
    # ONE/ONE: the US-W replica applies a write one one-way delay after US-E did.
    r, run_dir = _staleness(c.url + "&write_cl=ONE&eventual_cl=ONE", "eventual", tmp_path)
    # Stale until the delay: a read that has *completed* within 0.8 x the delay of the
    # write's start cannot have seen it, however busy the machine (judging reads by their
    # start instead failed under load: a read started 10 ms after the write but answered
    # 200 ms later is fresh). A fresh one would mean a read served by US-E, or no delay.
    early, stale = done_before_ms(run_dir, 0.8 * one_way)
    assert early >= 10 and stale == early, (early, stale, r["fresh_by_range"])
    # ... then fresh: every write visible at US-W within 150 ms of its acknowledgement, a
    # miss excused only where the run's noise floor measured the machine adding as much
    # meanwhile (counting from the write's start failed beside a CPU hog: 5 of 518 reads
    # begun 150-400 ms after it were stale, every one within 150 ms of a late ack)
    h, _ = load_history(run_dir)
    vis = visibility.of_element(*element_ops(h, KEY))
    got = visibility.judge_window(vis, 0.0, 150.0, NoiseFloor.from_json(r["noise"]))
    assert vis.writes >= 10 and got.verdict == "exact", got.line()
    # the last stale read's start, median over the writes: about the delay; longer by the
    # emulation's and a busy machine's own work (40-46 ms idle or at load 16; one slow
    # write moved the maximum over the writes, the figure this test used to take, to 95 ms)
    window = r["periods"]["last_lt_100_median_ms"]
    assert window is not None and window <= one_way + 40, (window, one_way)
    # QUORUM/QUORUM: every read that starts after a write was acknowledged returns it
    # (three readers: a quorum read from US-W takes a WAN round trip)
    r, run_dir = _staleness(c.url, "consistent", tmp_path, duration_s=4.0, readers=3)
    h, _ = load_history(run_dir)
    writes, reads = element_ops(h, KEY)
    after = since_ack(writes, reads)
    assert sum(after["total"]) > 20 and sum(after["fresh"]) == sum(after["total"])
    assert r["lost_writes"]["lost"] == 0


def _register(url: str, consistency: str, out: Path, duration_s: float = 5.0,
              ops: int = 0) -> dict[str, Any]:
    spec = ProbeSpec(store=url, workload="register",
                     options=ProbeOptions(consistency=consistency, duration_s=duration_s),
                     config=RegisterConfig(keys=3, clients=6, rate=25.0, writer_region="US-E",
                                           reader_region="US-W", ops=ops))
    run = run_probe(spec, out)
    assert not run.error, run.error
    return run.results


def test_register_one_reads_remote_not_linearizable_serial_with_lwt_is(cassandra_dc3,
                                                                       tmp_path):
    c, _ = cassandra_dc3
    r = _register(c.url + "&write_cl=ONE&eventual_cl=ONE", "eventual", tmp_path)
    lin = r["linearizability"]
    assert lin["valid"] is False, lin
    part = min((p for p in lin["parts"] if p["valid"] is False),
               key=lambda p: len(p["counterexample"]))
    assert 1 <= len(part["counterexample"]) <= 8 and part["explanation"]
    # an operation budget, not a time: an LWT costs four WAN round trips and contends on
    # three keys, so a busy machine completed 6 in the 5 s this run once had (80: 27 reads
    # and 32 writes quiet; the time is only a bound)
    r = _register(c.url + "&consistent_cl=SERIAL&writes=lwt", "consistent", tmp_path,
                  duration_s=60.0, ops=80)
    assert r["linearizability"]["valid"] is True, r["linearizability"]["parts"]
    assert r["ops"]["reads"] >= 10 and r["ops"]["writes"] >= 10


def test_partition_of_a_region_local_one_stays_quorum_does_not(cassandra_dc3, tmp_path):
    c, root = cassandra_dc3
    fault = parse_fault("at=1.5s partition region=EU for=4s")

    def run(level: str, consistency: str) -> tuple[dict[str, Any], Path]:
        spec = ProbeSpec(store=f"{c.url}&eventual_cl={level}&consistent_cl={level}",
                         workload="staleness",
                         options=ProbeOptions(consistency=consistency, duration_s=6,
                                              write_interval_s=0.25, read_rate=50),
                         config=StalenessConfig(placement="separate-clients",
                                                writer_region="US-E", reader_region="EU"),
                         cluster=c.name, cluster_root=str(root), faults=(fault,))
        out = run_probe(spec, tmp_path)
        assert not out.error, out.error
        return out.results, out.run_dir

    # the reads' availability from the moment every link was cut (the nemesis op's
    # completion: on a busy machine cutting four links took over a second) to the heal
    local, local_dir = run("LOCAL_ONE", "eventual")
    assert _reads_while_cut(local_dir) >= 0.75, (_errors(local_dir), local["availability"])
    quorum, quorum_dir = run("QUORUM", "consistent")
    assert _reads_while_cut(quorum_dir) <= 0.1, (_errors(quorum_dir), quorum["availability"])
    for r in (local, quorum):  # the writer at US-E kept a quorum: nothing it was told is lost
        assert r["lost_writes"]["checked"] and r["lost_writes"]["lost"] == 0
        assert r["availability"]["by_f"]["write"]["overall"] == 1.0


def _reads_while_cut(run_dir: Path, window_s: float = 0.25) -> float:
    """Return the fraction of the reader's time answered while the partition held: from
    ``window_s`` after the nemesis finished cutting (a read sent before the cut may still be
    answered) to the heal's start, in windows of ``window_s`` (a mean over a stretch of a
    few seconds: on a loaded 2-core machine a JVM stalled for a second once)."""
    h, _ = load_history(run_dir)
    t0 = run_start_ns(h)
    nemesis = [i for i in range(len(h)) if h.process[i] == NEMESIS]
    cut = [i for i in nemesis if F_NAMES[h.f[i]] == "partition" and h.type[i] == 1]
    heal = [i for i in nemesis if F_NAMES[h.f[i]] == "heal"]
    assert cut and heal, [(F_NAMES[h.f[i]], h.type[i], h.error[i]) for i in nemesis]
    start_s = (h.complete_ns[cut[0]] - t0) / 1e9 + window_s
    end_s = (h.invoke_ns[heal[0]] - t0) / 1e9
    a = availability(h, window_s)["by_f"]["read"]
    inside = [x for t, x in zip(a["t_s"], a["ok_fraction"], strict=True)
              if t >= start_s and t + window_s <= end_s]
    assert len(inside) >= 4, (start_s, end_s, a["t_s"])  # at least a second of the cut
    return sum(inside) / len(inside)


def _errors(run_dir: Path) -> dict[str, int]:
    """Return {error, cut to its first 100 characters: how many ops} of a run's clients."""
    h, _ = load_history(run_dir)
    out: dict[str, int] = {}
    for i in range(len(h)):
        if h.error[i] and h.process[i] >= 0:
            out[h.error[i][:100]] = out.get(h.error[i][:100], 0) + 1
    return out


def _block_free(addresses: list[str]) -> bool:
    for a in addresses:
        for port in (STORAGE_PORT, CQL_PORT):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    s.bind((a, port))
                except OSError:
                    return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM], ids=["SIGTERM"])
def test_sigterm_during_up_leaves_nothing(tmp_path: Path, sig: int):
    proc = subprocess.Popen([sys.executable, "-m", "replicalab.cli.main", "cluster", "up",
                             "cassandra", "--nodes", "3", "--name", "c-sig"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ,
                                 "REPLICALAB_STATE_DIR": str(tmp_path / ".replicalab")})
    state = tmp_path / ".replicalab" / "clusters" / "c-sig" / "cluster.json"
    seen: set[int] = set()
    addresses: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while True:  # wait until every node's JVM runs: the signal lands mid-start
            now = process.descendants(proc.pid)
            seen |= set(now)
            if state.exists():
                with open(state) as f:
                    try:
                        data = json.load(f)
                    except ValueError:
                        data = {}
                nodes = data.get("nodes", [])
                addresses = [n["extra"].get(k) for n in nodes for k in ("address", "listen")
                             if n["extra"].get(k)]
                # the JVMs themselves (a wrapper's command line names CassandraDaemon too)
                # (counting every descendant that named CassandraDaemon, wrappers and JVMs
                # alike, waited for exactly 3 of 6 and so, when a busy machine's first look
                # came after the JVMs had started, never signalled)
                if nodes and all(n["pid"] for n in nodes) and sum(
                        _is_jvm(p) for p in now) >= len(nodes):
                    break
            if proc.poll() is not None:
                out = proc.stderr.read() if proc.stderr else ""
                if state.exists():  # it came up before the signal: leave no cluster behind
                    base.down("c-sig", state.parents[2])
                if "not installed" in out:
                    server_missing("cassandra", out.strip())
                raise AssertionError(f"cluster up ended before the signal: {out}")
            assert time.monotonic() < deadline, "the nodes never started"
            time.sleep(0.05)
        proc.send_signal(sig)
        proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            process.stop_many(list(seen))
    left = [p for p in seen if process.alive(p)]
    assert not left, {p: _cmdline(p) for p in left}
    assert proc.returncode != 0
    assert not state.parent.exists()
    assert addresses and _block_free(addresses)


def _is_jvm(pid: int) -> bool:
    """Return True if ``pid`` is a Cassandra JVM (not the wrapper that runs it)."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return False
    return comm == "java" and "CassandraDaemon" in _cmdline(pid)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def test_pbs_legs_and_every_pair_on_dc3s_own_links(cassandra_dc3, tmp_path):
    """PBS against the real cluster on dc3's own links, the plumbing and gross errors: the
    legs are the links' round trips (not zero, not two), and for each (R, W) pair the shipped
    prediction says what the measurement shows where it can tell: R = 1, W = 1 stale right
    after the ack and fresh 60 ms later (the write reaches US-W one way after US-E acked it;
    a model predicting 1.0 everywhere fails here), every other pair fresh from the ack (a
    quorum overlaps the US-E write or asks the US-W replica that has it). The shape of the
    curve is judged from recorded runs (tests/test_pbs_evidence.py), not here."""
    from replicalab.models import pbs
    from replicalab.workloads import pbs_real

    c, _ = cassandra_dc3
    cal = pbs_real.calibrate(c, "US-E", "US-W", samples=15)
    medians = [sorted(x)[len(x) // 2] for x in cal.write_rt_ms]
    # a leg is a round trip less the median local one: dc3's US-E<->US-W round trip is 80 +
    # 83 ms / 2 = 81.5 ms, US-E<->EU 94.5 ms, each over links jittering +-1 ms, so no raw
    # round trip is under rtt - 2, and a leg under rtt - 2 less the local share this run
    # subtracted (10.3 ms at its median beside a CPU hog, 2 ms quiet) is no round trip
    local = cal.write_overhead_ms
    assert local < 81.5 / 2, (  # beyond that a leg read as zero could pass unseen
        f"inconclusive: the local round trip took {local} ms at its median", cal)
    for median, rtt in ((medians[1], 81.5), (medians[2], 94.5)):
        assert rtt - 2 - local <= median <= 2 * rtt - 3, (medians, cal)  # one, not two
    assert medians[0] < 0.2 * 81.5, (medians, cal)  # the local replica: no WAN
    wars = pbs.wars_from_round_trips(cal.write_rt_ms, cal.read_rt_ms)
    for r, w in pbs_real.PAIRS:
        m = pbs_real.measure(c, r, w, "US-E", "US-W", 3.5, tmp_path)
        vis = pbs_real.visibility_of_run(Path(m.run_dir))
        hi = np.array(vis.first_fresh_ms)
        p = pbs.t_visibility_after_ack(wars, r, w, [0.0, 60.0], cal.hop_ms, 20_000, 1)
        if (r, w) == (1, 1):
            assert np.mean(hi <= 0.0) < 0.3 and np.mean(hi <= 60.0) > 0.9, vis
            assert p[0] < 0.3 and p[1] > 0.9, p
        else:
            assert np.mean(np.array(vis.last_stale_ms) < 0.0) > 0.9, ((r, w), vis)
            assert p[0] > 0.9, ((r, w), p)


def test_counter_violations_weak_native_counters_oversell_middlewares_never(cassandra_dc3,
                                                                            tmp_path):
    """Seed 004's violations experiment on the session cluster (a data centre per node):
    Cassandra's native counters (Weak) sell more than the stock, the client- and
    server-based middlewares (state at LOCAL_QUORUM in their own DC) never do."""
    from replicalab.cluster import datacentres
    from replicalab.counters.bench import PointSpec, run_point
    from replicalab.counters.bench_deploy import open_deployment

    c, _ = cassandra_dc3
    topo = datacentres.on_cassandra(c, tmp_path, "it-counters")

    async def point(config: str) -> dict[str, Any]:
        spec = PointSpec("violations", config, 12, inc_fraction=0.0, initial=40,
                         until_exhausted=True, duration_s=20.0, think_ms=20.0, seed=3)
        dep = await open_deployment(config, topo, sync_ms=200.0, seed=3)
        try:
            r = await run_point(dep, topo.dcs, spec, f"it{os.getpid()}", converge_s=8.0)
        finally:
            await dep.close()
        return r.to_json()

    try:
        got = {cfg: asyncio.run(point(cfg)) for cfg in ("weak", "client-based",
                                                         "server-based")}
    finally:
        topo.down()
    weak = got["weak"]["violations"]
    assert weak["final_excess"] > 0 and weak["acked_excess"] > 0, weak
    for cfg in ("client-based", "server-based"):
        v = got[cfg]["violations"]
        assert v["final_excess"] == 0 and v["acked_excess"] == 0, (cfg, v)
        assert got[cfg]["converged"] and got[cfg]["outcomes"]["ok"] > 0
    assert all(process.alive(n.pid) for n in c.nodes)  # the shared cluster keeps running


def test_adapter_passes_the_conformance_suite(cassandra_dc3):
    from replicalab.testing import run_conformance

    report = run_conformance(cassandra_dc3[0].url)
    assert report.ok, report.text()
    assert {r.name for r in report.results if r.status == "passed"} == {
        "describes-itself", "absent-reads-none", "consistent-read", "eventual-read",
        "multi-read", "conditional-write", "atomic-multi-write", "delete",
        "timeout-is-unknown", "txn-own-writes",
        "client-region"}, report.text()  # txn-atomic: no isolation


def test_pbs_on_jittering_links_the_spread_the_noise_floor_and_the_verdict(cassandra_dc3,
                                                                          tmp_path):
    """PBS where a model can be wrong, the plumbing: every replication link jitters +-20 ms,
    so the write reaches the US-W replica over a 40 ms spread (not dc3's own 2 ms), the probe
    records its noise floor through the cluster's Toxiproxy, a step at the one-way delay falls
    outside the measurement's band, and the shipped model's verdict is "agrees" or
    "inconclusive" with the machine's measured noise above the tolerance, never "disagrees"
    for a busy machine. Whether the model follows the whole curve is judged on recorded runs
    of 1,000 writes (tests/test_pbs_evidence.py): 10 s here are 100 writes."""
    from replicalab.checkers import visibility
    from replicalab.experiments import against
    from replicalab.experiments.against import PBS_NOISE_TOLERANCE_MS, judge_pbs
    from replicalab.workloads import pbs_real

    c, root = cassandra_dc3
    before = {x.name: x.jitter_ms for x in c.links}
    pbs_real.set_jitter(c, pbs_real.DEFAULT_JITTER_MS)
    try:
        # the command's round trips (400): the model's one-way legs are deconvolved from
        # them; from 60 their upper tail came out short of the links' 60 ms (the model
        # certain at 56 ms where 95 of 100 writes were visible), from 200 their lower edge
        # came out late (0.6 % predicted at 22 ms where 10 of 100 were visible), and the
        # verdict rightly said "disagrees" (2026-11-29, 2026-11-30)
        cal = pbs_real.calibrate(c, "US-E", "US-W", samples=pbs_real.CALIBRATION_SAMPLES)
        m = pbs_real.measure(c, 1, 1, "US-E", "US-W", 10.0, tmp_path, root=root)
    finally:
        from replicalab.cluster import toxiproxy

        tp = toxiproxy.Toxiproxy(c.toxiproxy_port)
        try:
            for x in c.links:  # the session cluster's other tests expect dc3's own jitter
                tp.set_latency(x.name, x.downstream_ms, x.upstream_ms, before[x.name])
                x.jitter_ms = before[x.name]
        finally:
            tp.close()
    vis = pbs_real.visibility_of_run(Path(m.run_dir))
    seen = np.array([x for x in vis.first_fresh_ms if np.isfinite(x)])
    assert vis.writes >= 80 and len(seen) >= 0.9 * vis.writes, vis
    spread = np.percentile(seen, 90) - np.percentile(seen, 10)
    assert spread > 20, spread  # jittered: uniform over 40 ms has 32 ms from P10 to P90
    floor = pbs_real.noise_of_run(Path(m.run_dir))
    assert floor is not None and floor.echo_via.startswith("toxiproxy") and floor.echo_samples
    one_way_ms = next(x.upstream_ms for x in c.links
                      if x.src_region == "US-E" and x.dst_region == "US-W")
    step = visibility.judge(lambda t: (np.asarray(t) >= one_way_ms).astype(float), vis)
    assert step.has_power and not step.within, step.line()
    pair = judge_pbs(against.pbs_prediction(cal.write_rt_ms, cal.read_rt_ms, cal.hop_ms,
                                            floor, trials=40_000), vis, floor)
    got, verdict = pair.judgement, pair.verdict
    print(f"PBS on jittering links: {verdict}; {got.line()}; {floor.line()}")
    assert verdict in ("agrees", "inconclusive"), (got.line(), floor.line())
    if verdict == "inconclusive":  # with its measured cause
        assert floor.added_p99_ms > PBS_NOISE_TOLERANCE_MS or (
            pair.fit_ms is not None and abs(pair.fit_ms) <= floor.added_p99_ms)


def test_cluster_up_takes_a_client_region_and_its_client_pays_the_wan_and_down_leaves_nothing(
        tmp_path: Path):
    """`cluster up cassandra --client-region US-W` (what base.up does for it): one node in
    US-E, so the US-W client reaches its coordinator through its client link (the driver
    connects through the proxy) and pays the US-W <-> US-E round trip; a client placed in
    US-E connects directly. Then `down` leaves no process (the JVM, its wrapper, Toxiproxy)
    and no listening port. (One node, one start for both: the session cluster is three, and
    what `down` stops is the same per node.)"""
    from replicalab.workloads.latency import LatencyConfig

    root = tmp_path / "root"
    try:
        c = base.up("cassandra", 1, "dc3", name="c-west", client_region="US-W", root=root)
    except ValueError as err:
        server_missing("cassandra", err)
    pids = [n.pid for n in c.nodes] + [c.toxiproxy_pid]
    family = [p for pid in pids for p in process.descendants(pid)]
    assert any("CassandraDaemon" in _cmdline(p) for p in family)
    try:
        assert "client_region=US-W" in c.url and "client_links=US-W:0:" in c.url
        assert {x.kind for x in c.links} == {"client"}  # one node: no replication link
        rtt = wan.client_round_trip_ms(c, "US-W", "US-E")  # the configured toxics

        def measured(region: str | None) -> dict[str, Any]:
            spec = ProbeSpec(store=c.url, workload="latency", cluster=c.name,
                             cluster_root=str(root),
                             config=LatencyConfig(ops=20, region=region),
                             options=ProbeOptions(duration_s=60))
            run = run_probe(spec, tmp_path / "runs")
            assert not run.error, run.error
            return run.results

        # The local client first: it warms the JVM and measures what the server itself takes
        # in this run, which the remote client pays on top of the round trip.
        east = measured("US-E")["variants"]
        assert east["put"]["p50_ms"] < 30, east
        west = measured(None)  # the URL's client_region places it
        for variant in ("put", "eventual read"):  # one round trip, not zero, not two
            p50 = west["variants"][variant]["p50_ms"]
            local = east[variant]["p50_ms"]
            verdict = wan.judge_round_trip(p50, rtt, west["noise"], local_p50_ms=local)
            print(f"cassandra US-W {variant}: p50 {p50} ms in {rtt} + local {local}: {verdict}")
    finally:
        base.down(c.name, root)
    assert not any(process.alive(p) for p in pids + family)
    assert _block_free([a for n in c.nodes for a in (n.extra["address"], n.extra["listen"])])
    assert not (root / "clusters" / "c-west").exists()


async def _read_paths(url: str, regions: list[str | None]) -> dict[str | None, Any]:
    from replicalab.stores.cassandra import read_path

    store = open_store(url, 1)
    try:
        out = {}
        for region in regions:
            client = await store.connect(region)
            out[region] = await asyncio.to_thread(read_path, client, KEY)
        return out
    finally:
        await store.close()


def test_a_read_at_one_is_served_by_the_readers_own_replica_and_a_keyspace_without_one_is_refused(
        cassandra_dc3):
    """heldout-2 and -6 of docs/models/pbs.md: the US-W node served the probe's reads at ONE
    from EU (168 ms), the probe keyspace having been created with no replica in US-W by a
    client whose URL named one node, from that node's view of a ring not yet whole. On the
    cluster as ``cluster up`` leaves it, every node knows every node with its data centre,
    and a traced read at ONE from each region is served by that region's node; a keyspace
    without a replica in US-W (the recorded one) is refused by a client whose URL places
    nodes in regions, and the trace of a read at US-W through it shows another replica."""
    from replicalab.experiments import against
    from replicalab.stores.cassandra import data_centres_of, ring_members
    from replicalab.workloads import pbs_real

    c, _ = cassandra_dc3
    url = f"{c.url}&eventual_cl=ONE"
    regions = [n.region for n in c.nodes]

    async def members() -> list[Any]:
        store = open_store(url, 1)
        try:
            return [ring_members((await store.connect(r)).node.session) for r in regions]
        finally:
            await store.close()

    for seen in asyncio.run(members()):
        assert data_centres_of(seen) == {"US-E": 1, "US-W": 1, "EU": 1}, seen
    # as the PBS recordings trace them: the probe's URL at R = 1, W = 1
    good = {r: pbs_real.read_path_of(c, 1, 1, r) for r in regions}
    for node in c.nodes:
        path = good[node.region]
        assert path.local and path.replicas == (f"n{node.index}",), path
        assert path.replication.get(node.region) == "1", path
    assert against.misread(1, None, 2.0, traced=[p.to_json() for p in good.values()]) is None

    ks = "no_replica_in_us_w"
    asyncio.run(_ops(url, lambda cl: cl.cql(
        f"CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': "
        "'NetworkTopologyStrategy', 'US-E': 1, 'EU': 1}", timeout_s=60.0), lambda cl: cl.cql(
        f"CREATE TABLE IF NOT EXISTS {ks}.elements (domain text, item text, attribute text, "
        "value text, PRIMARY KEY ((domain, item), attribute))", timeout_s=60.0)))
    try:
        with pytest.raises(ValueError, match="no replica in data centre US-W"):
            asyncio.run(_read_paths(f"{url}&keyspace={ks}", ["US-W"]))
        # a URL naming the US-W node alone names no region: not refused, and its read goes
        # to another data centre's replica (the URL's one node is n0 to the store)
        us_w = advertised(next(n for n in c.nodes if n.region == "US-W"))
        bad = asyncio.run(_read_paths(f"cassandra://{us_w}:{CQL_PORT}?keyspace={ks}",
                                      [None]))[None]
        others = {advertised(n) for n in c.nodes if n.region != "US-W"}
        assert bad.coordinator == "n0" and bad.replicas and bad.replicas[0] in others, bad
        assert not bad.local and "US-W" not in bad.replication, bad
        assert against.misread(1, None, 2.0, traced=[bad.to_json()]) is not None
        print(json.dumps(bad.to_json()))  # the trace the unit tests' recorded one came from
    finally:
        asyncio.run(_ops(url, lambda cl: cl.cql(f"DROP KEYSPACE IF EXISTS {ks}",
                                                timeout_s=60.0)))


def test_a_coordinator_whose_schema_lags_is_waited_for_not_refused(cassandra_dc3):
    """On a busy machine a node can learn of a schema change seconds after the node that
    made it (the CI run of 2026-11-29: n2 said "keyspace replicalab does not exist" to three
    tests in a row). Here n2 lags for real: its peer links are cut while a table is made
    through n0 (the driver told not to wait for agreement), and healed 2 s later. A store
    whose first client (US-E, n0) finds the table opens a client in EU (pinned to n2)
    meanwhile: it waits until n2 knows the table, then writes and reads through it."""
    from cassandra.cluster import Cluster as Driver

    from replicalab.cluster.toxiproxy import Toxiproxy

    c, _ = cassandra_dc3
    ks = "schema_lag"

    async def through_eu(url: str) -> Any:
        store = open_store(url, 1)
        try:
            await store.connect("US-E")  # finds the table: nothing made through n2
            eu = await store.connect("EU")
            await eu.write({"t/i/a": "lagged"})
            return await eu.read(["t/i/a"], consistent=True)
        finally:
            await store.close()

    n0 = advertised(c.nodes[0])
    cut = [x.name for x in c.links if x.name.startswith("peer-") and "EU" in
           (x.src_region, x.dst_region)]
    assert len(cut) == 4, cut
    tp = Toxiproxy(c.toxiproxy_port)
    driver = Driver([n0], port=CQL_PORT, protocol_version=5, max_schema_agreement_wait=0,
                    schema_metadata_enabled=False, token_metadata_enabled=False)
    try:
        session = driver.connect()
        session.execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=60)
        for name in cut:
            tp.add_timeout(name)
        healed = threading.Timer(2.0, lambda: [tp.remove_timeout(n) for n in cut])
        try:
            session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': "
                            "'NetworkTopologyStrategy', 'US-E': 1, 'US-W': 1, 'EU': 1}",
                            timeout=60)
            session.execute(f"CREATE TABLE {ks}.elements (domain text, item text, attribute "
                            "text, value text, PRIMARY KEY ((domain, item), attribute))",
                            timeout=60)
            healed.start()
            t0 = time.monotonic()
            got = asyncio.run(through_eu(f"{c.url}&keyspace={ks}"))
            waited = time.monotonic() - t0
        finally:
            healed.join()
            for name in cut:
                tp.remove_timeout(name)
        assert got.values == ("lagged",) and got.node == "n2", got
        assert waited >= 1.0, f"n2 answered after {waited:.1f} s: it did not lag"
    finally:
        with contextlib.suppress(Exception):
            driver.connect().execute(f"DROP KEYSPACE IF EXISTS {ks}", timeout=60)
        driver.shutdown()
        tp.close()
