"""Each check of issue 38 against the wrong product it must catch: a mutant replaces one
function of replicalab (in the test process only, through a pytest plugin written for the
run; the source tree is never touched), the check's tests run, and they must go red. The
unmutated tests run first and must be green, so a red mutant is the mutation's doing.

    python benchmarks/mutations.py                 # the checks that need no server (~1 min)
    python benchmarks/mutations.py --integration   # also those that start Redis/PostgreSQL
    python benchmarks/mutations.py --only pbs      # mutants whose name starts with pbs

Prints one line per mutant (killed: the tests went red; SURVIVED: they passed) and exits 1
if any mutant survived or a baseline was red.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutant:
    """``patch``: Python run at pytest's start in the test process (it replaces one
    function); ``tests``: the pytest node ids that must go red."""

    name: str
    what: str
    tests: tuple[str, ...]
    patch: str
    integration: bool = False


PBS_TEST = ("tests/test_pbs_evidence.py",)
_PBS = """
from replicalab.experiments import against
import numpy as np
_real = against.PbsPrediction.__call__
def __call__(self, ts):
    t = np.asarray(ts, dtype=float)
    return {body}
against.PbsPrediction.__call__ = __call__
"""

MUTANTS = (
    Mutant("pbs-shift-late", "the shipped PBS prediction shifted 5 ms later", PBS_TEST,
           _PBS.format(body="_real(self, t - 5.0)")),
    Mutant("pbs-shift-early", "the shipped PBS prediction shifted 5 ms earlier", PBS_TEST,
           _PBS.format(body="_real(self, t + 5.0)")),
    Mutant("pbs-step", "a step at dc3's 40 ms US-E -> US-W one-way delay", PBS_TEST,
           _PBS.format(body="(t >= 40.0).astype(float)")),
    Mutant("pbs-constant", "a constant 1.0", PBS_TEST, _PBS.format(body="np.ones(len(t))")),
    Mutant("pbs-legs-sqrt2", "a one-way leg made from round trips as before 2026-11-29: half "
           "the mean, deviations over sqrt 2 (the round trip's shape kept)",
           ("tests/test_pbs_legs.py",), """
import math
import numpy as np
from replicalab.models import pbs
def one_way_from_round_trips(x, bin_ms=0.5):
    x = np.maximum(np.asarray(x, dtype=float), 0.0)
    return np.maximum(x.mean() / 2 + (x - x.mean()) / math.sqrt(2), 0.0)
pbs.one_way_from_round_trips = one_way_from_round_trips
"""),
    Mutant("pbs-legs-half", "a one-way leg as half of each round trip (half the variance)",
           ("tests/test_pbs_legs.py",), """
import numpy as np
from replicalab.models import pbs
pbs.one_way_from_round_trips = lambda x, bin_ms=0.5: np.maximum(np.asarray(x, float), 0) / 2
"""),
    Mutant("paxos-wan-hop-too-many", "the fitted paxos-wan model makes a client outside "
           "the leader's region pay one more one-way hop (forward 40 ms longer)",
           ("tests/test_model_against_etcd.py::"
            "test_the_model_agrees_with_the_recorded_medians_and_best_leader",),
           """
import dataclasses
from replicalab.models import paxos_wan_fit as F
_real = F.fitted
F.fitted = lambda p, f: dataclasses.replace(_real(p, f), forward_ms=f.forward_ms + 40.0)
"""),
    Mutant("windows-visible-at-ack", "the staleness window of every store is [0, 2] ms: "
           "visible at the ack",
           ("tests/test_staleness_evidence.py::"
            "test_every_write_became_visible_inside_the_window_the_links_allow",),
           """
from replicalab.experiments import windows
windows.window_ms = lambda kind, links, writer, reader, leader=None: (0.0, 2.0)
"""),
    Mutant("windows-hop-too-many", "the staleness window a one-way hop later than the path",
           ("tests/test_staleness_evidence.py::"
            "test_every_write_became_visible_inside_the_window_the_links_allow",),
           """
from replicalab.experiments import windows
_real = windows.window_ms
def window_ms(kind, links, writer, reader, leader=None):
    lo, hi = _real(kind, links, writer, reader, leader)
    d = windows.delay_ms(links, writer, reader)[0]
    return lo + d, hi + d
windows.window_ms = window_ms
"""),
    Mutant("noise-stop-waits-for-ever", "the noise monitor's echo waits with asyncio.wait_for "
           "and stop() gathers its tasks unbounded (the 14-minute hang)",
           ("tests/test_noise.py::test_stop_ends_the_instruments_whenever_it_comes",),
           """
import asyncio, contextlib, socket, time
from replicalab.runtime import noise
async def _echo(self):
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", self.echo_port), noise.ECHO_TIMEOUT_S)
    try:
        while True:
            t0 = time.perf_counter()
            writer.write(noise._PING)
            await asyncio.wait_for(reader.readexactly(len(noise._PING)), noise.ECHO_TIMEOUT_S)
            self.echoes_ms.append((time.perf_counter() - t0) * 1000)
            await asyncio.sleep(self.echo_every_s)
    finally:
        writer.close()
async def _stalls(self):
    while True:
        await asyncio.sleep(self.tick_s)
        self.stalls_ms.append(0.0)
_real_stop = noise.NoiseMonitor.stop
async def stop(self):
    for t in self._tasks:
        t.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.gather(*self._tasks, return_exceptions=True)
    self._tasks = []
    return await _real_stop(self)
noise.NoiseMonitor._echo = _echo
noise.NoiseMonitor._stalls = _stalls
noise.NoiseMonitor.stop = stop
"""),
    Mutant("queues-no-fence", "central's commit checks only that no effect exists, not the "
           "token (the conditional write alone)",
           ("tests/test_queues_nemesis.py::"
            "test_a_consumer_woken_while_the_taker_works_is_refused_by_the_fence",),
           """
from replicalab.queues import fenced
from replicalab.stores.base import ABSENT
async def _commit_no_token(self, w, d, tag, key, held):
    real_store_of = w.store_of
    class Unfenced:
        def __init__(self, c):
            self.c = c
        async def write(self, values, expect=None):
            expect = {k: v for k, v in (expect or {}).items() if v is ABSENT}
            return await self.c.write(values, expect=expect)
        def __getattr__(self, n):
            return getattr(self.c, n)
    w.store_of = lambda dd: Unfenced(real_store_of(dd))
    try:
        return await _real_commit(self, w, d, tag, key, held)
    finally:
        w.store_of = real_store_of
_real_commit = fenced.FencedStrategy._commit
fenced.FencedStrategy._commit = _commit_no_token
"""),
    Mutant("queues-dead-letter-undecided", "exactly_once None (not False) for a run cut short "
           "with a message dead-lettered without a commit (before issue 38)",
           ("tests/test_queues_checker.py::"
            "test_a_message_that_ended_uncommitted_makes_exactly_once_false_even_cut_short",),
           """
from replicalab.checkers import deliveries
_real = deliveries._exactly_once
def _old(all_done, duplicated, ended_uncommitted, cut_short):
    if duplicated:
        return False
    if cut_short:
        return None
    return _real(all_done, duplicated, ended_uncommitted, cut_short)
deliveries._exactly_once = _old
"""),
    Mutant("queues-unlabelled-fallback", "effects that could not be read back counted from "
           "the consumer record under 'effect store'",
           ("tests/test_queues_checker.py::"
            "test_results_the_read_back_could_not_read_are_labelled_as_the_record_s",),
           """
from replicalab.checkers import deliveries
_real = deliveries.check_deliveries
def check_deliveries(cols, dead_letters=(), cut_short=False):
    out = _real(cols, dead_letters, cut_short)
    if out["summary"]["results_from"].startswith("effect store"):
        out["summary"]["results_from"] = "effect store"
        out["summary"]["results_from_record"] = 0
    return out
deliveries.check_deliveries = check_deliveries
import sys
for mod in list(sys.modules.values()):
    if getattr(mod, "check_deliveries", None) is _real:
        mod.check_deliveries = check_deliveries
"""),
    Mutant("redis-remote-eventual-read", "a Redis client in the primary's region reads "
           "eventually from a remote replica (before issue 38)",
           ("tests/test_integration_redis.py::"
            "test_a_client_pays_one_round_trip_to_a_remote_primary_and_reads_where_it_stands",),
           """
from replicalab.stores import redis as r
def _replica_for(self, region):
    replicas = self.nodes[1:]
    return self.url.pick(replicas, region or self.nodes[0].region, self.rng) if replicas \\
        else self.nodes[0]
r.RedisStore._replica_for = _replica_for
""", integration=True),
    Mutant("postgres-remote-eventual-read", "a PostgreSQL client in the primary's region "
           "reads eventually from a remote standby (before issue 38)",
           ("tests/test_integration_postgres.py::"
            "test_a_client_pays_one_round_trip_to_a_remote_primary_and_reads_where_it_stands",),
           """
from replicalab.stores import postgres as p
def _standby_for(self, region):
    standbys = self.nodes[1:]
    return self.url.pick(standbys, region or self.nodes[0].region, self.rng) if standbys \\
        else self.nodes[0]
p.PostgresStore._standby_for = _standby_for
""", integration=True),
    Mutant("etcd-eventual-crosses-wan", "etcd's eventual reads made linearizable: each pays "
           "the leader's quorum round trip", ("tests/test_integration_etcd.py::"
                                              "test_sweep_runs_in_real_time_on_etcd",),
           """
from replicalab.stores import etcd
_real = etcd.EtcdClient.read
async def read(self, keys, *, consistent):
    return await _real(self, keys, consistent=True)
etcd.EtcdClient.read = read
""", integration=True),
    Mutant("redis-replica-late", "the Redis replica's link carries 10 ms more than configured "
           "(staleness past the window the links allow)",
           ("tests/test_integration_redis.py::"
            "test_remote_replica_stale_for_exactly_the_injected_delay",),
           """
from replicalab.cluster import toxiproxy
_real = toxiproxy.Toxiproxy.set_latency
def set_latency(self, name, downstream_ms, upstream_ms, jitter_ms):
    late = 10 if name.startswith("repl") or "replica" in name or name.startswith("peer") else 0
    return _real(self, name, downstream_ms + late, upstream_ms + late, jitter_ms)
toxiproxy.Toxiproxy.set_latency = set_latency
""", integration=True),
    Mutant("client-link-doubled", "every emulated link carries twice its configured delay",
           ("tests/test_integration_redis.py::"
            "test_a_client_pays_one_round_trip_to_a_remote_primary_and_reads_where_it_stands",),
           """
from replicalab.cluster import toxiproxy
_real = toxiproxy.Toxiproxy.set_latency
def set_latency(self, name, downstream_ms, upstream_ms, jitter_ms):
    return _real(self, name, 2 * downstream_ms, 2 * upstream_ms, jitter_ms)
toxiproxy.Toxiproxy.set_latency = set_latency
""", integration=True),
    Mutant("client-link-skipped", "a client placed in a region connects to remote nodes "
           "directly (a hop too few: no WAN)",
           ("tests/test_integration_redis.py::"
            "test_a_client_pays_one_round_trip_to_a_remote_primary_and_reads_where_it_stands",),
           """
from replicalab.stores import url
url.StoreUrl.via = lambda self, node, region: node
""", integration=True),
)


def run_tests(tests: tuple[str, ...], patch: str | None, timeout_s: float) -> tuple[int, str]:
    """Run ``tests`` with ``patch`` loaded as a pytest plugin (None: unmutated); return the
    exit status and the last lines of the output."""
    env = dict(os.environ)
    args = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    with tempfile.TemporaryDirectory() as tmp:
        if patch is not None:
            (Path(tmp) / "replicalab_mutant.py").write_text(
                "def pytest_configure(config):\n" + textwrap.indent(
                    "exec(compile(" + repr(patch) + ", 'mutant', 'exec'), {})\n", "    "))
            env["PYTHONPATH"] = tmp + os.pathsep + env.get("PYTHONPATH", "")
            args[4:4] = ["-p", "replicalab_mutant"]
        try:
            p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return -1, f"timed out after {timeout_s:g} s"
    tail = (p.stdout + p.stderr).strip().splitlines()[-1:] or [""]
    return p.returncode, tail[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--integration", action="store_true",
                    help="also the mutants whose tests start servers")
    ap.add_argument("--only", default="", help="mutants whose name starts with this")
    ap.add_argument("--timeout-s", type=float, default=900.0, help="per pytest run")
    args = ap.parse_args()
    chosen = [m for m in MUTANTS if m.name.startswith(args.only)
              and (args.integration or not m.integration)]
    failed = False
    for tests in dict.fromkeys(m.tests for m in chosen):
        t0 = time.monotonic()
        code, tail = run_tests(tests, None, args.timeout_s)
        ok = code == 0
        failed |= not ok
        print(f"baseline {'green' if ok else 'RED'} ({time.monotonic() - t0:.0f} s): "
              f"{' '.join(tests)}: {tail}", flush=True)
    for m in chosen:
        t0 = time.monotonic()
        code, tail = run_tests(m.tests, m.patch, args.timeout_s)
        killed = code == 1  # tests ran and failed (not an error of the mutant itself)
        failed |= not killed
        print(f"{m.name}: {'killed' if killed else 'SURVIVED'} ({time.monotonic() - t0:.0f} "
              f"s) - {m.what}: {tail}", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
