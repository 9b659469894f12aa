"""Bounded Counters under faults between data centres (seed 004 §IV-E): a partition, the
loss of a data centre and the recovery of its rights.

Unit tests run on simulated data centres (``cluster.datacentres`` kind ``sim``); the
integration tests at the end run ``counter bench``'s ``partition`` and ``dc-loss`` points on
three real Redis servers (Toxiproxy links carrying dc3's delays, one topology shared by the
module). Expected numbers come from the clients' own arithmetic (the initial value, what was
acknowledged), never from the middleware's state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.cluster import datacentres as topology
from replicalab.counters import faults, recovery
from replicalab.counters.bench import OK, OpLog, PointSpec, rights_accounting, run_point
from replicalab.counters.bench_deploy import open_deployment
from replicalab.counters.crdt import BoundedCounter, InsufficientRights
from replicalab.counters.middleware import Options, Stopped
from replicalab.counters.server_mw import ServerMiddleware
from replicalab.counters.service import Placement, read_state, state_key
from replicalab.stores import Unavailable
from servers import server_missing

DCS = ("US-E", "US-W", "EU")
QUIET = Options(sync_ms=60_000, policy_ms=60_000, threshold=0)  # nothing in the background


def run(coro: Any) -> Any:
    """Run ``coro`` with a hard bound on its wall time (no test may hang)."""
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.fixture
def dcs(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(topology, "LINK_TIMEOUT_S", 0.3)  # a cut link's calls fail sooner
    t = topology.start("sim", tmp_path, "faults")
    yield t
    t.down()


async def _sessions(t: topology.DataCentres, names: tuple[str, ...]) -> dict[str, Any]:
    return {d: await t.store(d).connect() for d in names}


# -- the pure parts -----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(("dec", "inc", "transfer")), st.integers(0, 2),
                              st.integers(0, 2), st.integers(1, 5)), max_size=30),
       lost=st.integers(0, 2))
def test_moving_a_lost_dcs_rights_keeps_value_and_total_and_empties_it(ops, lost):
    """Whatever happened before, moving the lost DC's rights leaves the value and the total
    of rights as they were, gives the lost DC none, and splits what it had evenly."""
    state = BoundedCounter.create(DCS, initial=60, lower=0)
    for op, i, j, n in ops:
        with contextlib.suppress(InsufficientRights, ValueError):
            if op == "dec":
                state = state.dec(DCS[i], n)
            elif op == "inc":
                state = state.inc(DCS[i], n)
            elif i != j:
                state = state.transfer(DCS[i], DCS[j], n)
    had = {d: state.local_rights(d) for d in DCS}
    survivors = [d for d in DCS if d != DCS[lost]]
    new, moved = recovery.move_rights(state, DCS[lost], survivors)
    after = {d: new.local_rights(d) for d in DCS}
    assert new.value() == state.value()
    assert sum(after.values()) == sum(had.values())
    assert after[DCS[lost]] == 0
    gained = [after[s] - had[s] for s in survivors]
    assert sum(gained) == had[DCS[lost]] and max(gained) - min(gained) <= 1
    assert sum(moved.get("dec", {}).values()) == had[DCS[lost]]
    assert state.leq(new)  # only ever grows: a merge anywhere keeps it


def test_rights_accounting_from_the_state_and_the_acknowledgements():
    spec = PointSpec("partition", "server-based", 3, inc_fraction=0.0, initial=30,
                     fault="partition")
    state = BoundedCounter.create(DCS, initial=30, lower=0).dec("US-E", 4).inc("EU", 2)
    log = OpLog()
    for is_dec, outcome in ((True, OK),) * 4 + ((False, OK),) * 2:
        log.add(0, 1, 0, is_dec, outcome, 0, None)
    r = rights_accounting([state], log, spec)
    assert (r["granted"], r["used"], r["acked_decrements"], r["acked_increments"]) == (
        32, 4, 4, 2)  # 30 initial + 2 increments; 4 decrements
    assert r["used_matches_acks"] and r["granted_matches_acks"]
    assert r["held"] == {"US-E": 6, "US-W": 10, "EU": 12}
    log.add(0, 1, 0, True, OK, 0, None)  # an acknowledged decrement the state does not have
    assert not rights_accounting([state], log, spec)["used_matches_acks"]


# -- the data centres' faults --------------------------------------------------------------------

def test_a_cut_link_holds_calls_until_their_timeout_and_heals(dcs):
    async def go() -> None:
        far = await dcs.store("EU", "US-E").connect()
        other = await dcs.store("US-W", "US-E").connect()
        await far.write({"a/b/c": "1"})
        dcs.cut("US-E", "EU")
        t0 = time.monotonic()
        with pytest.raises(Unavailable, match="link is cut"):
            await far.read(["a/b/c"], consistent=True)
        assert time.monotonic() - t0 >= 0.3  # held, not refused
        assert (await other.read(["a/b/c"], consistent=True)).values == (None,)  # not cut
        dcs.cut("EU", "US-E", on=False)  # either way round
        assert (await far.read(["a/b/c"], consistent=True)).values == ("1",)
        dcs.stop_store("EU")
        t0 = time.monotonic()
        with pytest.raises(Unavailable, match="down"):
            await far.read(["a/b/c"], consistent=True)
        assert time.monotonic() - t0 < 0.3  # refused at once
        dcs.start_store("EU")
        assert (await far.read(["a/b/c"], consistent=True)).values == ("1",)
        with pytest.raises(ValueError, match="from itself"):
            dcs.cut("EU", "EU")

    run(go())


def test_a_stopped_middleware_refuses_and_does_not_come_back(dcs):
    async def go() -> None:
        m = ServerMiddleware(Placement.from_topology(dcs, "US-E"), QUIET, batch_ms=0)
        await m.create("k", 9)
        await m.close()
        for call in (m.dec("k"), m.inc("k"), m.value("k"), m.create("j", 1)):
            with pytest.raises(Stopped, match="did not happen"):
                await call
        state = (await read_state(await dcs.store("US-E").connect(), "k")).state
        assert state is not None and state.value() == 9

    run(go())


# -- recovering a lost DC's rights ----------------------------------------------------------------

async def _lose_eu_with_unsynced_sales(t: topology.DataCentres, sold: int
                                       ) -> dict[str, ServerMiddleware]:
    """Three middlewares, a counter of 90 (30 rights each), synchronised; then EU sells
    ``sold`` units that no survivor hears of, and is lost: its middleware stopped, its store
    down and cut off (no survivor can take rights from it)."""
    mws = {dc: ServerMiddleware(Placement.from_topology(t, dc), QUIET, batch_ms=0)
           for dc in DCS}
    await mws["US-E"].create("k", 90)
    for dc in DCS[1:]:
        await mws[dc].syncer.sync_key("k")
    for _ in range(sold):
        await mws["EU"].dec("k")
    await mws["EU"].close()
    for dc in DCS[:2]:
        t.cut("EU", dc)
    t.stop_store("EU")
    view = await mws["US-E"].durable("k")
    assert view is not None and view.local_rights("EU") == 30  # the survivors' stale view
    return mws


async def _sell_everything(mws: dict[str, ServerMiddleware], dcs: tuple[str, ...]) -> int:
    """Decrement (globally) in ``dcs`` until refused; return the units sold."""
    sold = 0
    for dc in dcs:
        for _ in range(200):
            try:
                await mws[dc].dec("k", allow_global=True)
            except InsufficientRights:
                break
            sold += 1
    return sold


def test_recovery_moves_what_the_lost_dc_really_held_and_nothing_is_sold_twice(dcs):
    async def go() -> None:
        mws = await _lose_eu_with_unsynced_sales(dcs, sold=10)
        try:
            survivors = await _sessions(dcs, ("US-E", "US-W"))
            dcs.start_store("EU")  # restarted from its disk, read by the operator directly
            lost = await dcs.store("EU").connect()
            r = await recovery.recover("k", "EU", lost, survivors)
            # EU held its 30 less the 10 it sold, not the 30 the survivors believed
            assert (r.source, r.held, r.written_off) == ("final state", {"dec": 20},
                                                         {"dec": 0})
            assert r.recovered == {"dec": {"US-E": 10, "US-W": 10}}
            at_lost = (await read_state(lost, "k")).state
            assert at_lost is not None and at_lost.local_rights("EU") == 0  # fenced
            for dc in ("US-E", "US-W"):
                await mws[dc].absorb("k", r.state)
            # 90 units, 10 sold by EU: the survivors sell exactly the other 80
            assert await _sell_everything(mws, ("US-E", "US-W")) == 80
            again = await recovery.recover("k", "EU", lost, survivors)
            assert again.recovered_total() == 0 and again.held == {"dec": 0}
        finally:
            for m in mws.values():
                await m.close()

    run(go())


@pytest.mark.parametrize("how", ["unreadable", "state lost"])
def test_a_lost_dc_whose_state_is_gone_has_its_rights_written_off(dcs, how):
    async def go() -> None:
        mws = await _lose_eu_with_unsynced_sales(dcs, sold=10)
        try:
            survivors = await _sessions(dcs, ("US-E", "US-W"))
            lost = None
            if how == "state lost":
                dcs.start_store("EU")
                lost = await dcs.store("EU").connect()
                await lost.delete([state_key("k")])  # its disk is gone
            r = await recovery.recover("k", "EU", lost, survivors)
            assert r.source == how and r.recovered_total() == 0
            assert r.written_off == r.held == {"dec": 30}  # all the survivors know of
            # the survivors sell their own 60 and no more: EU's 10 unseen sales can never
            # be sold again, whatever EU held
            assert await _sell_everything(mws, ("US-E", "US-W")) == 60
        finally:
            for m in mws.values():
                await m.close()

    run(go())


class _StillLoading:
    """The data centres, but ``dc``'s restarted store refuses every session for ``for_s``
    after its restart as a Redis replaying its append-only file does: it listens (the
    restart has returned), then answers every command, PING included, with LOADING."""

    def __init__(self, t: topology.DataCentres, dc: str, for_s: float) -> None:
        self.t, self.dc, self.for_s = t, dc, for_s
        self.until = 0.0
        self.refused = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.t, name)

    def start_store(self, dc: str) -> None:
        self.t.start_store(dc)
        if dc == self.dc:
            self.until = time.monotonic() + self.for_s

    def store(self, dc: str, from_dc: str | None = None) -> Any:
        real = self.t.store(dc, from_dc)
        if dc != self.dc or from_dc not in (None, dc):
            return real
        outer = self

        class Loading:
            async def connect(self) -> Any:
                if time.monotonic() < outer.until:
                    outer.refused += 1
                    raise ValueError("cannot reach Redis at 127.0.0.1:1 (node n0): LOADING "
                                     "Redis is loading the dataset in memory")
                return await real.connect()

            async def close(self) -> None:
                await real.close()

        return Loading()


def test_a_restarted_lost_store_still_loading_is_waited_for_not_written_off(dcs):
    """The bench's dc-loss restarts the lost DC's store and reads it at once: a store that
    still loads its data must be waited for. Taking its LOADING refusal for a lost disk wrote
    EU's rights off and left its 10 unsynchronised sales out of the survivors' state: a
    drift of +10 (failed once on a busy machine)."""
    async def go() -> None:
        mws = await _lose_eu_with_unsynced_sales(dcs, sold=10)
        try:
            slow = _StillLoading(dcs, "EU", 0.5)
            (r,) = await faults.recover_lost(slow, "EU", ("US-E", "US-W"), ["k"])
            assert slow.refused > 0  # it did refuse first
            assert (r.source, r.held, r.written_off) == ("final state", {"dec": 20},
                                                         {"dec": 0})
            for dc in ("US-E", "US-W"):
                await mws[dc].absorb("k", r.state)
            # EU's 10 sales are in every survivor's state: 90 - 10 - 80 = 0, no drift
            assert await _sell_everything(mws, ("US-E", "US-W")) == 80
            east, west = [await mws[dc].durable("k") for dc in ("US-E", "US-W")]
            assert east is not None and west is not None and east.merge(west).value() == 0
        finally:
            for m in mws.values():
                await m.close()

    run(go())


def test_counter_recover_from_urls_waits_for_a_lost_store_still_loading(dcs):
    """What ``replicalab counter recover`` runs, given each DC's store: an operator who runs
    it just after restarting the lost DC's Redis, while it still answers LOADING, gets EU's
    rights recovered, not written off; a store that never answers is written off after
    ``ready_s``."""
    from replicalab.counters.recovery import recover_from_urls

    async def go() -> None:
        mws = await _lose_eu_with_unsynced_sales(dcs, sold=10)
        try:
            urls = {dc: f"dc://{dc}" for dc in DCS}
            dead = _StillLoading(dcs, "EU", 60.0)
            dead.start_store("EU")
            (r,) = await recover_from_urls(["k"], "EU", urls, ready_s=0.3,
                                           opener=lambda u: dead.store(u[5:]))
            assert (r.source, r.written_off) == ("unreadable", {"dec": 30})
            slow = _StillLoading(dcs, "EU", 0.5)
            slow.start_store("EU")
            (r,) = await recover_from_urls(["k"], "EU", urls,
                                           opener=lambda u: slow.store(u[5:]))
            assert slow.refused > 0
            assert (r.source, r.held, r.written_off) == ("final state", {"dec": 20},
                                                         {"dec": 0})
        finally:
            for m in mws.values():
                await m.close()

    run(go())


def test_a_restarted_lost_store_that_never_answers_has_its_rights_written_off(dcs):
    async def go() -> None:
        mws = await _lose_eu_with_unsynced_sales(dcs, sold=10)
        try:
            dead = _StillLoading(dcs, "EU", 60.0)
            (r,) = await faults.recover_lost(dead, "EU", ("US-E", "US-W"), ["k"], ready_s=0.3)
            assert (r.source, r.written_off) == ("unreadable", {"dec": 30})
        finally:
            for m in mws.values():
                await m.close()

    run(go())


# -- counter bench's fault points on real Redis ------------------------------------------------

@pytest.fixture(scope="module")
def redis_dcs():
    # each DC's Redis writes an append-only file: a killed server restarts with what it
    # acknowledged (the seed's DC never loses its state)
    root = Path(tempfile.mkdtemp(prefix="replicalab-faults-"))
    root.chmod(0o755)
    try:
        try:
            t = topology.start("redis", root, f"flt{os.getpid()}",
                               settings={"appendonly": "yes", "appendfsync": "no"})
        except ValueError as err:
            server_missing("redis data centres", err)
        yield t
        t.down()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _point(t: topology.DataCentres, fault: str, config: str, initial: int = 600) -> dict:
    spec = PointSpec(fault, config, 30, inc_fraction=0.0, initial=initial, duration_s=40,
                     until_exhausted=True, fault=fault, fault_dc="EU", fault_at_s=1.0,
                     fault_for_s=2.5, seed=11)

    async def main() -> dict:
        dep = await open_deployment(config, t, sync_ms=200.0, seed=spec.seed)
        try:
            r = await run_point(dep, t.dcs, spec, f"f{os.getpid()}", topo=t)
        finally:
            await dep.close()
        return r.to_json()

    return asyncio.run(asyncio.wait_for(main(), 90))


def _kept_the_invariant_and_accounted(p: dict, initial: int) -> None:
    v, r = p["violations"], p["rights"]
    assert v["final_excess"] == v["observed_below"] == v["acked_excess"] == 0, v
    # a decrement whose outcome is unknown (a client of the lost DC cut off mid-call) may
    # have happened: the store then holds it without an acknowledgement (drift < 0), never
    # more of them than the unknown outcomes, and never an acknowledged one missing
    maybe = r["maybe_decrements"]
    assert p["converged"] and -maybe <= v["drift"] <= 0 and v["final_values"] == [0], v
    # every unit sold exactly once: all of the initial value, acknowledged or not, none twice
    assert p["outcomes"]["ok"] - v["drift"] == initial, (p["outcomes"], v)
    assert r["used_matches_acks"] and r["granted_matches_acks"], r
    assert (r["granted"], r["used"]) == (initial, initial), r
    assert r["acked_decrements"] == p["outcomes"]["ok"], r
    assert sum(r["held"].values()) == 0


@pytest.mark.integration
def test_a_partition_on_redis_keeps_the_invariant_and_no_right_crosses_it(redis_dcs,
                                                                          tmp_path: Path):
    p = _point(redis_dcs, "partition", "client-based")
    _kept_the_invariant_and_accounted(p, 600)
    eff = p["fault_effects"]
    f = p["fault"]
    assert not f["error"] and f["end_s"] - f["start_s"] >= 2.5
    # both sides sold from the rights they held; none crossed the cut, and the cut was
    # real: exchanges across it failed
    assert all(n > 0 for n in eff["ok_during_by_dc"].values()), eff
    assert eff["transfers_across_during"] == 0
    assert eff["sync_failures"] > 0
    # the report draws the point and tabulates its accounting
    from replicalab.counters.bench_run import BenchSpec, new_results
    from replicalab.report.counters import render_counter_report

    results = new_results(BenchSpec(store="redis", experiments=("partition",)))
    results["points"] = [p]
    html = render_counter_report(results, tmp_path).read_text()
    assert (tmp_path / "figures" / "partition-client-based.png").stat().st_size > 1000
    assert "Faults between data centres" in html and "Transfers across" in html


@pytest.mark.integration
def test_a_lost_dc_on_redis_has_its_rights_recovered_and_the_survivors_use_them(redis_dcs):
    p = _point(redis_dcs, "dc-loss", "server-based+batch")
    _kept_the_invariant_and_accounted(p, 600)
    r, eff, f = p["rights"], p["fault_effects"], p["fault"]
    assert not f["error"] and r["recovery_source"] == ["final state"]
    assert r["recovered"] == r["held_by_lost_at_loss"] > 0 and r["written_off"] == 0
    assert r["held_by_lost_at_end"] == 0
    assert p["outcomes"]["down"] > 0  # EU's clients were refused once it was lost
    # EU sold nothing once lost (a few between the cut and its middleware's stop, which only
    # its own store knew of: the recovery read them there)
    assert eff["ok_after_by_dc"]["EU"] == 0
    # the survivors sold what they held and, after the recovery, what EU had held
    assert sum(eff["ok_after_by_dc"].values()) > 0
    # healed for the next point: EU's restarted server is the one its cluster records
    (node,) = redis_dcs._cluster_of("EU").nodes
    os.kill(node.pid, 0)
    assert not redis_dcs.stopped and not redis_dcs.cuts


@pytest.mark.integration
def test_a_lost_redis_dc_is_read_once_its_restarted_server_has_loaded_its_log(tmp_path: Path):
    """On real Redis: a restarted server listens (``start_store`` returns) while it still
    replays its append-only file, answering LOADING; the recovery waits for it and recovers
    from EU's final state. A long log (padding keys) makes the window certain here; a busy
    machine opens it for a short one. Its own data centres: the padding would slow every
    later restart of the shared ones."""
    import redis

    root = tmp_path / "dcs"
    root.mkdir()
    root.chmod(0o755)
    try:
        t = topology.start("redis", root, f"fld{os.getpid()}",
                           settings={"appendonly": "yes", "appendfsync": "no"})
    except ValueError as err:
        server_missing("redis data centres", err)
    try:
        (node,) = t._cluster_of("EU").nodes
        pad = redis.Redis("127.0.0.1", node.port).pipeline(transaction=False)
        for i in range(200_000):
            pad.set(f"pad/{i}/x", "v" * 50)
        pad.execute()

        async def go() -> None:
            mws = await _lose_eu_with_unsynced_sales(t, sold=10)
            try:
                (r,) = await faults.recover_lost(t, "EU", ("US-E", "US-W"), ["k"])
                assert (r.source, r.held, r.recovered_total()) == ("final state",
                                                                   {"dec": 20}, 20)
            finally:
                for m in mws.values():
                    await m.close()

        run(go())
    finally:
        t.down()


@pytest.mark.integration
def test_counter_recover_on_the_command_line(redis_dcs, tmp_path: Path):
    """``replicalab counter recover`` on real Redis DCs: EU sold 7 of its 30 units without
    anyone hearing of it, then its server was killed and restarted from its disk; the
    command moves the 23 it really held, and running it again moves nothing."""
    import json

    from replicalab.counters.client_mw import ClientMiddleware
    from test_cli import _one_line_error
    from test_cli import run as cli

    t = redis_dcs
    key = f"cli-recover-{os.getpid()}"

    async def setup() -> None:
        mws = {dc: ClientMiddleware(Placement.from_topology(t, dc), QUIET) for dc in DCS}
        try:
            await mws["US-E"].create(key, 90)  # pushed to every DC
            for _ in range(7):
                await mws["EU"].dec(key)  # never synchronised
        finally:
            for m in mws.values():
                await m.close()

    run(setup())
    t.stop_store("EU")
    t.start_store("EU")
    stores = [a for dc in DCS for a in ("--store", f"{dc}={t.url(dc)}")]
    p = cli("counter", "recover", key, "--lost", "EU", *stores, "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    (r,) = json.loads(p.stdout)["recoveries"]
    assert (r["source"], r["held"], r["recovered_total"], r["written_off"]) == (
        "final state", {"dec": 23}, {"dec": 23}, {"dec": 0})
    again = cli("counter", "recover", key, "--lost", "EU", *stores, cwd=tmp_path)
    assert again.returncode == 0 and "held 0 rights" in again.stdout, again.stdout
    _one_line_error(cli("counter", "recover", key, "--lost", "Mars", *stores, cwd=tmp_path),
                    2, "--lost 'Mars'")
