"""The Bounded Counter middlewares, rights redistribution and synchronisation.

Unit tests run on simulated data centres in real time (``cluster.datacentres`` kind ``sim``,
one in-process ``sim://primary`` store per DC, WAN links as delays); the integration tests
at the end run the same checks on three real Redis and three real PostgreSQL servers with
Toxiproxy links carrying the ``dc3`` latencies.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.cluster import datacentres as topology
from replicalab.cluster.ports import free_port
from replicalab.counters import rights
from replicalab.counters.baselines import StrongDeployment, WeakDeployment
from replicalab.counters.client_mw import ClientMiddleware
from replicalab.counters.crdt import (
    BoundedCounter,
    CounterError,
    InsufficientRights,
    MalformedState,
)
from replicalab.counters.middleware import HINT_EXHAUSTED, HINT_GLOBAL, Middleware, Options
from replicalab.counters.server import RemoteCounterService, serve_async
from replicalab.counters.server_mw import ServerMiddleware
from replicalab.counters.service import (
    Contended,
    Placement,
    UnknownCounter,
    read_state,
    state_key,
    write_state,
)
from replicalab.stores import ConditionFailed, Store, Unavailable
from replicalab.stores.base import Client, ReadResult, WriteResult
from servers import server_missing

DCS = ("US-E", "US-W", "EU")
FAST = Options(sync_ms=30, policy_ms=30, throttle_ms=30, threshold=5)
KINDS = {"client": lambda p, o: ClientMiddleware(p, o),
         "server": lambda p, o: ServerMiddleware(p, o, batch_ms=0),
         "server+batch": lambda p, o: ServerMiddleware(p, o, batch_ms=3, batch_max=64)}


def run(coro: Any) -> Any:
    """Run ``coro`` with a hard bound on its wall time (no test may hang)."""
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.fixture
def dcs(tmp_path: Path):
    t = topology.start("sim", tmp_path, "mwtest")
    yield t
    t.down()


def make(topo: topology.DataCentres, kind: str, dc: str, opts: Options = FAST) -> Middleware:
    return KINDS[kind](Placement.from_topology(topo, dc), opts)


async def stored(topo: topology.DataCentres, dc: str, key: str) -> tuple[BoundedCounter | None,
                                                                          str | None]:
    client = await topo.store(dc).connect()
    got = await read_state(client, key, dc)
    return got.state, got.text


def counter(holder: str | None = None, initial: int = 100) -> BoundedCounter:
    return BoundedCounter.create(DCS, initial=initial, lower=0, holder=holder)


# -- rights: the pure rules -------------------------------------------------------------------

def test_background_asks_richest_for_half_the_difference_not_the_shortfall() -> None:
    state = counter(holder="US-W", initial=100).transfer("US-W", "EU", 20)  # US-W 80, EU 20
    req = rights.plan_background(state, "k", "US-E", threshold=10)
    assert req is not None and req.donor == "US-W"
    assert req.amount == 40  # (80 - 0) / 2, not the shortfall of 10 below the threshold
    assert rights.plan_background(state, "k", "US-W", threshold=10) is None  # rich enough


def test_donor_never_gives_more_than_half_of_what_it_holds() -> None:
    state = counter(holder="US-W", initial=100)
    greedy = rights.TransferRequest("k", "US-W", "US-E", already=0, amount=90)
    after, given = rights.serve(state, greedy)
    assert given == 50
    assert after.local_rights("US-W") == 50 and after.local_rights("US-E") == 50
    poor = counter(holder="US-W", initial=1)
    assert rights.serve(poor, greedy) == (poor, 0)  # half of 1 is nothing


def test_duplicated_transfer_request_gives_rights_once() -> None:
    state = counter(holder="US-W", initial=100)
    req = rights.request_to(state, "k", "US-E", "US-W")
    assert req is not None and req.already == 0 and req.amount == 50
    once, given = rights.serve(state, req)
    twice, again = rights.serve(once, req)
    assert (given, again) == (50, 0) and twice == once
    # a request written from a stale view (it has not yet seen the first transfer) is
    # satisfied already and gives nothing either
    stale = rights.TransferRequest("k", "US-W", "US-E", already=0, amount=20)
    assert rights.serve(once, stale)[1] == 0
    # a new request from the up-to-date view is served
    fresh = rights.request_to(once, "k", "US-E", "US-W")
    assert fresh is None  # 50 and 50: nothing to ask for
    more = rights.TransferRequest("k", "US-W", "US-E", already=50, amount=10)
    assert rights.serve(once, more)[1] == 10


def test_throttle_compares_elapsed_time_the_right_way_round() -> None:
    assert rights.due(now_ns=1_000, last_ns=None, interval_ns=500)
    assert not rights.due(now_ns=1_200, last_ns=1_000, interval_ns=500)  # 200 ns elapsed
    assert rights.due(now_ns=1_500, last_ns=1_000, interval_ns=500)  # exactly the interval
    assert rights.due(now_ns=9_000, last_ns=1_000, interval_ns=500)  # long ago
    th = rights.Throttle(interval_ns=500)
    assert th.allow("k", "EU", 1_000)
    assert not th.allow("k", "EU", 1_100)
    assert th.allow("k", "US-W", 1_100)  # per donor
    assert th.allow("k", "EU", 1_600)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(DCS), st.sampled_from(DCS), st.integers(1, 60)),
                max_size=12),
       st.sampled_from(DCS), st.sampled_from(DCS), st.integers(0, 80), st.integers(1, 80))
def test_serving_is_idempotent_and_gives_at_most_half(
        ops: list[tuple[str, str, int]], donor: str, to: str, already: int,
        amount: int) -> None:
    state = counter(initial=150)
    for a, b, n in ops:  # reach an arbitrary state through transfers and decrements
        with contextlib.suppress(CounterError):
            state = state.transfer(a, b, n) if a != b else state.dec(a, n)
    if donor == to:
        return
    req = rights.TransferRequest("k", donor, to, already, amount)
    held = state.local_rights(donor)
    once, given = rights.serve(state, req)
    assert 0 <= given <= (held or 0) // 2
    assert once.local_rights(donor) == held - given
    assert once.value() == state.value()  # a transfer moves rights, never value
    before = state.transferred(donor, to)
    twice, again = rights.serve(once, req)
    # however often a request is served, the donor's total to the requester never passes
    # the request's target; a request once satisfied gives nothing more
    assert twice.transferred(donor, to) <= max(req.target, before)
    if once.transferred(donor, to) >= req.target:
        assert (twice, again) == (once, 0)


# -- the service: local operations, errors ----------------------------------------------------

@pytest.mark.parametrize("kind", list(KINDS))
def test_strictly_local_decrement_fails_fast_with_a_hint(dcs, kind: str) -> None:
    async def go() -> None:
        opts = Options(sync_ms=10_000, policy_ms=10_000, threshold=0)  # nothing in background
        mws = [make(dcs, kind, dc, opts) for dc in DCS]
        try:
            await mws[0].create("seats", 6)  # 2 rights per DC
            assert await mws[0].dec("seats", 2) == 4
            with pytest.raises(InsufficientRights) as err:
                await mws[0].dec("seats")
            assert HINT_GLOBAL in str(err.value) and err.value.available == 0
            assert err.value.needed == 1
            with pytest.raises(InsufficientRights) as err:
                await mws[0].dec("seats", 5)  # more than the whole counter holds
            assert HINT_EXHAUSTED in str(err.value)
            state, _ = await stored(dcs, "US-E", "seats")
            assert state is not None and state.value() == 4  # failures changed nothing
        finally:
            for m in mws:
                await m.close()

    run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_unknown_counter_and_bad_amounts(dcs, kind: str) -> None:
    async def go() -> None:
        m = make(dcs, kind, "US-E")
        try:
            for call in (m.dec("nope"), m.inc("nope"), m.value("nope")):
                with pytest.raises(UnknownCounter, match="create it first"):
                    await call
            await m.create("k", 10)
            with pytest.raises(CounterError, match="positive integer"):
                await m.dec("k", 0)
            with pytest.raises(CounterError, match="already exists"):
                await m.create("k", 10)
            with pytest.raises(CounterError, match="without '/'"):
                await m.dec("a/b")
            assert await m.value("k") == 10
        finally:
            await m.close()

    run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_malformed_state_is_a_clear_error_and_left_untouched(dcs, kind: str) -> None:
    async def go() -> None:
        mws = [make(dcs, kind, dc) for dc in DCS]
        try:
            for m in mws:
                m.start()
            client = await dcs.store("US-W").connect()
            await client.write({state_key("bad"): "not a counter"})
            with pytest.raises(MalformedState, match="counters/bad/state in US-W"):
                await mws[1].dec("bad")
            with pytest.raises(MalformedState):
                await mws[1].inc("bad")
            await mws[0].create("bad-elsewhere", 9)
            await client.write({state_key("bad-elsewhere"): '{"v": 99}'})
            await mws[0].inc("bad-elsewhere")  # US-E changed it: the next rounds push it
            assert not await mws[0].syncer.sync_key("bad-elsewhere")
            await asyncio.sleep(0.4)  # more than one full sync round: none may overwrite
            got = await client.read([state_key("bad"), state_key("bad-elsewhere")],
                                    consistent=True)
            assert got.values == ("not a counter", '{"v": 99}')
            assert mws[0].syncer.stats.errors > 0
        finally:
            for m in mws:
                await m.close()

    run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_unreachable_data_centre_is_unavailable_and_changes_nothing(dcs, kind: str) -> None:
    dead = f"redis://127.0.0.1:{free_port()}?timeout_ms=300"

    async def go() -> None:
        # this DC's own store is down
        down = KINDS[kind](Placement.from_urls("US-E", DCS, dict.fromkeys(DCS, dead)), FAST)
        try:
            with pytest.raises(Unavailable, match="cannot reach US-E's store"):
                await down.dec("k")
        finally:
            await down.close()
        # a peer is down: local work goes on, the transfer and the sync fail cleanly
        live = dcs.store("US-E")
        place = Placement("US-E", DCS, lambda d: live if d == "US-E" else _opened(dead))
        m = KINDS[kind](place, Options(sync_ms=10_000, policy_ms=10_000, threshold=0))
        try:
            await m.create("k", 3)  # one right per DC; pushing it to the peers fails
            before = await stored(dcs, "US-E", "k")
            assert not await m.syncer.sync_key("k")
            assert await stored(dcs, "US-E", "k") == before
            assert await m.dec("k") == 2
            with pytest.raises(InsufficientRights, match=HINT_EXHAUSTED):
                await m.dec("k", allow_global=True)  # nobody reachable can give
            state, _ = await stored(dcs, "US-E", "k")
            assert state is not None and state.value() == 2
            assert m.transfers == []
        finally:
            await m.close()

    run(go())


def _opened(url: str) -> Store:
    from replicalab.stores import open_store
    return open_store(url)


# -- transfers and synchronisation ------------------------------------------------------------

@pytest.mark.parametrize("kind", list(KINDS))
def test_global_decrement_obtains_rights_from_the_richest(dcs, kind: str) -> None:
    async def go() -> None:
        opts = Options(sync_ms=10_000, policy_ms=10_000, threshold=0)
        mws = [make(dcs, kind, dc, opts) for dc in DCS]
        try:
            await mws[0].create("k", 30)  # 10 rights each
            for m in mws:
                await m.syncer.sync_key("k")
            await mws[2].dec("k", 9)  # EU: 1 left, so US-E (10) and US-W (10) tie
            await mws[2].syncer.sync_key("k")
            await mws[0].dec("k", 10)
            assert await mws[0].dec("k", 3, allow_global=True) == 8
            (key, donor, given, on_demand), = mws[0].transfers
            assert (key, donor, given, on_demand) == ("k", "US-W", 5, True)  # half of 10 - 0
            # the donor's store has the transfer, and this DC merged it at once
            w, _ = await stored(dcs, "US-W", "k")
            e, _ = await stored(dcs, "US-E", "k")
            assert w is not None and e is not None
            assert w.transferred("US-W", "US-E") == e.transferred("US-W", "US-E") == 5
            assert e.local_rights("US-E") == 2
        finally:
            for m in mws:
                await m.close()

    run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_background_policy_refills_a_poor_replica(dcs, kind: str) -> None:
    async def go() -> None:
        mws = [make(dcs, kind, dc) for dc in DCS]
        try:
            for m in mws:
                m.start()
            await mws[0].create("k", 60)  # 20 each, threshold 5
            await mws[1].dec("k", 18)  # US-W drops to 2: below the threshold
            for _ in range(100):
                await asyncio.sleep(0.02)
                if mws[1].transfers:
                    break
            (_, donor, given, on_demand), *_ = mws[1].transfers
            assert donor in ("US-E", "EU") and given == 9 and not on_demand  # (20 - 2) / 2
            state = await mws[1].durable("k")
            assert state is not None and state.local_rights("US-W") >= 11
        finally:
            for m in mws:
                await m.close()

    run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_sync_converges_every_data_centre(dcs, kind: str) -> None:
    async def go() -> None:
        mws = [make(dcs, kind, dc) for dc in DCS]
        try:
            for m in mws:
                m.start()
            await mws[0].create("k", 90)
            for m in mws:
                await m.inc("k", 5)
                await m.dec("k", 2)
            for _ in range(100):
                await asyncio.sleep(0.03)
                states = [(await stored(dcs, dc, "k"))[0] for dc in DCS]
                if all(s == states[0] for s in states):
                    break
            assert all(s is not None and s.value() == 90 + 15 - 6 for s in states)
            assert states[0] == states[1] == states[2]
            # a duplicated, late exchange changes nothing
            await mws[1].syncer.sync_key("k")
            assert (await stored(dcs, "EU", "k"))[0] == states[0]
        finally:
            for m in mws:
                await m.close()

    run(go())


def test_news_from_one_peer_goes_on_to_the_others(dcs) -> None:
    """US-E learns EU's decrement from EU; its next round carries it to US-W, without a full
    round and without EU ever exchanging with US-W (a partitioned pair)."""
    async def go() -> None:
        mws = [make(dcs, "client", dc) for dc in DCS]
        try:
            await mws[0].create("k", 90)
            for m in mws:
                m.syncer.full_every = 0
            await mws[0].syncer.sync_key("k")  # every DC has the counter
            await mws[2].dec("k", 3)  # EU, not synchronised yet
            mws[0].syncer.touch("k")
            await mws[0].syncer.round()  # US-E <-> EU and US-E <-> US-W
            assert "k" in mws[0].syncer.dirty  # it learnt something: goes on next round
            await mws[0].syncer.round()
            west = (await stored(dcs, "US-W", "k"))[0]
            assert west is not None and west.value() == 87
        finally:
            for m in mws:
                await m.close()

    run(go())


# -- conditions and durability ----------------------------------------------------------------

@pytest.mark.parametrize("pair", [("client", "client"), ("server", "server+batch"),
                                  ("client", "server+batch")])
def test_two_middlewares_racing_on_one_store_lose_no_update(dcs, pair: tuple[str, str]) -> None:
    async def go() -> None:
        opts = Options(sync_ms=10_000, policy_ms=10_000, threshold=0, retries=200)
        a, b = (make(dcs, kind, "US-E", opts) for kind in pair)
        try:
            await a.create("k", 3000)

            async def hammer(m: Middleware) -> int:
                acked = 0
                for _ in range(40):
                    await m.dec("k")
                    acked += 1
                return acked

            done = await asyncio.gather(*(hammer(m) for m in (a, b) for _ in range(3)))
            state, _ = await stored(dcs, "US-E", "k")
            assert state is not None
            assert sum(done) == 240
            assert state.down is not None and state.down.u[0] == 240  # no lost decrement
            assert state.value() == 3000 - 240
        finally:
            await a.close()
            await b.close()

    run(go())


class GatedStore:
    """A store whose writes wait for ``gate`` (or fail with Unavailable when ``broken``)."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.info = inner.info
        self.runtime = inner.runtime
        self.gate = asyncio.Event()
        self.gate.set()
        self.broken = False
        self.writes_started = 0

    async def connect(self, region: str | None = None) -> Client:
        return GatedClient(await self.inner.connect(region), self)  # type: ignore[return-value]

    async def close(self) -> None:
        pass


class GatedClient:
    def __init__(self, inner: Client, store: GatedStore) -> None:
        self.inner = inner
        self.store = store

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        return await self.inner.read(keys, consistent=consistent)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        self.store.writes_started += 1
        await self.store.gate.wait()
        if self.store.broken:
            raise Unavailable("the test broke this store")
        return await self.inner.write(values, expect=expect)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        return await self.inner.delete(keys)

    async def close(self) -> None:
        pass


def gated(topo: topology.DataCentres, dc: str) -> tuple[Placement, GatedStore]:
    g = GatedStore(topo.store(dc))

    def store_of(d: str) -> Store:
        return g if d == dc else topo.store(d, from_dc=dc)  # type: ignore[return-value]

    return Placement(dc, DCS, store_of), g


@pytest.mark.parametrize("batch_ms", [0.0, 5.0])
def test_server_acknowledges_only_after_the_durable_write(dcs, batch_ms: float) -> None:
    async def go() -> None:
        opts = Options(sync_ms=10_000, policy_ms=10_000, threshold=0)
        place, g = gated(dcs, "US-E")
        m = ServerMiddleware(place, opts, batch_ms=batch_ms)
        await m.create("k", 30)
        assert await m.dec("k") == 29
        g.gate.clear()  # the next write hangs, as if the store were slow
        pending = [asyncio.ensure_future(m.dec("k")) for _ in range(4)]
        for _ in range(200):
            await asyncio.sleep(0.005)
            if g.writes_started >= 3:
                break
        assert g.writes_started >= 3  # the serialiser applied the ops and is writing
        assert not any(p.done() for p in pending)  # ...but nobody is acknowledged yet
        await m.close()  # crash between the cache update and the durable write
        results = await asyncio.gather(*pending, return_exceptions=True)
        assert all(isinstance(r, Unavailable) for r in results)
        # the restarted middleware finds exactly the acknowledged decrement in the store,
        # so no later merge can hand back the rights of a lost acknowledged decrement
        again = ServerMiddleware(Placement.from_topology(dcs, "US-E"), opts, batch_ms=batch_ms)
        try:
            assert await again.value("k") == 29
            assert await again.dec("k") == 28
        finally:
            await again.close()

    run(go())


def test_server_write_with_unknown_outcome_fails_the_batch(dcs) -> None:
    async def go() -> None:
        opts = Options(sync_ms=10_000, policy_ms=10_000, threshold=0)
        place, g = gated(dcs, "US-E")
        m = ServerMiddleware(place, opts, batch_ms=2)
        try:
            await m.create("k", 30)
            g.broken = True
            results = await asyncio.gather(*(m.dec("k") for _ in range(5)),
                                           return_exceptions=True)
            assert all(isinstance(r, Unavailable) for r in results)
            state, _ = await stored(dcs, "US-E", "k")
            assert state is not None and state.value() == 30
            g.broken = False
            assert await m.dec("k") == 29  # re-read from the store, not the failed cache
        finally:
            await m.close()

    run(go())


def test_state_is_never_written_without_a_condition(dcs) -> None:
    async def go() -> None:
        client = await dcs.store("US-E").connect()
        state = counter(initial=9)
        text = await write_state(client, "k", state, None)
        with pytest.raises(ConditionFailed):
            await write_state(client, "k", state.dec("US-E"), None)  # it exists now
        with pytest.raises(ConditionFailed):
            await write_state(client, "k", state.dec("US-E"), state.dec("EU").to_text())
        await write_state(client, "k", state.dec("US-E"), text)
        got = await read_state(client, "k")
        assert got.state == state.dec("US-E")

    run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_no_invariant_violation_under_concurrent_clients_everywhere(dcs, kind: str) -> None:
    out = run(_concurrent_clients(dcs, kind, initial=150, clients_per_dc=(5, 2, 1), ops=60))
    assert out["transfers"] > 0


async def _concurrent_clients(topo: topology.DataCentres, kind: str, initial: int,
                              clients_per_dc: tuple[int, ...], ops: int,
                              opts: Options = FAST, key: str = "stock") -> dict[str, Any]:
    """Run ``clients_per_dc[i]`` clients in DC i decrementing (80%, global) and
    incrementing (20%); assert the invariant and the accounting; return counts."""
    mws = {dc: make(topo, kind, dc, opts) for dc in topo.dcs}
    acked = dict.fromkeys(topo.dcs, 0)
    incs = dict.fromkeys(topo.dcs, 0)
    try:
        for m in mws.values():
            m.start()
        await mws[topo.dcs[0]].create(key, initial)
        await asyncio.sleep(opts.sync_ms * 3 / 1000)

        async def client(dc: str, i: int) -> None:
            for j in range(ops):
                if (i + j) % 5 == 0:
                    with contextlib.suppress(Contended):
                        await mws[dc].inc(key)
                        incs[dc] += 1
                    continue
                # Contended: the client-based design gave up under contention; it did
                # not happen, which the accounting below checks
                with contextlib.suppress(InsufficientRights, Contended):
                    value = await mws[dc].dec(key, allow_global=True)
                    assert value >= 0
                    acked[dc] += 1

        await asyncio.gather(*(client(dc, i) for dc, c in zip(topo.dcs, clients_per_dc,
                                                               strict=True)
                               for i in range(c)))
        for _ in range(200):
            await asyncio.sleep(opts.sync_ms / 1000)
            states = [(await stored(topo, dc, key))[0] for dc in topo.dcs]
            if all(s == states[0] for s in states):
                break
        final = states[0]
        assert final is not None and final.down is not None
        assert all(s == final for s in states)
        for i, dc in enumerate(topo.dcs):
            assert final.down.u[i] == acked[dc]  # every acknowledged decrement, nothing more
            assert final.local_rights(dc) >= 0
        assert final.value() == initial + sum(incs.values()) - sum(acked.values()) >= 0
        assert sum(acked.values()) <= initial + sum(incs.values())
        transfers = sum(len(m.transfers) for m in mws.values())
        return {"acked": acked, "transfers": transfers, "value": final.value()}
    finally:
        for m in mws.values():
            await m.close()


# -- upper and two-sided bounds: increments spend rights to increment ------------------------

def test_rights_rules_work_in_the_increment_direction() -> None:
    seats = BoundedCounter.create(DCS, initial=0, upper=90, lower=None, holder="US-W")
    assert rights.directions(seats) == ("inc",)
    assert rights.directions(counter()) == ("dec",)
    two = BoundedCounter.create(DCS, initial=10, lower=0, upper=40)
    assert rights.directions(two) == ("dec", "inc")
    assert rights.rights_of(seats, "US-W", "inc") == 90 and rights.rights_of(seats, "US-W") == 0
    req = rights.plan_background(seats, "k", "EU", threshold=10, direction="inc")
    assert req is not None and (req.donor, req.amount, req.direction) == ("US-W", 45, "inc")
    assert rights.plan_background(seats, "k", "EU", threshold=10) is None  # no dec rights
    after, given = rights.serve(seats, req)
    assert given == 45 and after.local_rights("EU", "inc") == 45
    assert rights.serve(after, req) == (after, 0)  # idempotent in this direction too
    assert after.value() == seats.value() == 0  # a transfer moves rights, not the value


@pytest.mark.parametrize("kind", list(KINDS))
def test_upper_bound_increments_are_local_until_rights_run_out(dcs, kind: str) -> None:
    async def go() -> None:
        opts = Options(sync_ms=10_000, policy_ms=10_000, threshold=0)
        mws = [make(dcs, kind, dc, opts) for dc in DCS]
        try:
            await mws[0].create("seats", 0, lower=0, upper=30)  # 10 rights to inc per DC
            for m in mws:
                await m.syncer.sync_key("seats")
            assert await mws[2].inc("seats", 10) == 10
            with pytest.raises(InsufficientRights) as err:
                await mws[2].inc("seats")
            assert HINT_GLOBAL in str(err.value) and "rights to inc" in str(err.value)
            assert await mws[2].inc("seats", 4, allow_global=True) == 14
            (key, donor, given, on_demand), = mws[2].transfers
            assert (key, given, on_demand) == ("seats", 5, True)  # half of 10 - 0
            assert donor in ("US-E", "US-W")
            with pytest.raises(InsufficientRights) as err:
                await mws[2].inc("seats", 17, allow_global=True)  # only 16 seats are left
            assert HINT_EXHAUSTED in str(err.value)
            assert await mws[2].dec("seats", 14) == 0  # decrements spend the other side
            with pytest.raises(InsufficientRights):
                await mws[2].dec("seats")
            state, _ = await stored(dcs, "EU", "seats")
            assert state is not None and state.value() == 0 and state.up is not None
        finally:
            for m in mws:
                await m.close()

    run(go())


@pytest.mark.parametrize("kind", list(KINDS))
def test_two_sided_counter_keeps_both_bounds_under_concurrent_clients(dcs, kind: str) -> None:
    async def go() -> None:
        lower, upper, initial = 0, 24, 12
        mws = {dc: make(dcs, kind, dc) for dc in DCS}
        incs = dict.fromkeys(DCS, 0)
        decs = dict.fromkeys(DCS, 0)
        try:
            for m in mws.values():
                m.start()
            await mws["US-E"].create("seats", initial, lower=lower, upper=upper)
            await asyncio.sleep(0.1)

            async def client(dc: str, i: int) -> None:
                for j in range(40):
                    # each DC leans one way for a while, so both bounds are reached
                    up = (j // 10 + i + DCS.index(dc)) % 2 == 0
                    with contextlib.suppress(InsufficientRights, Contended):
                        if up:
                            assert await mws[dc].inc("seats", allow_global=True) <= upper
                            incs[dc] += 1
                        else:
                            assert await mws[dc].dec("seats", allow_global=True) >= lower
                            decs[dc] += 1

            await asyncio.gather(*(client(dc, i) for dc in DCS for i in range(3)))
            for _ in range(200):
                await asyncio.sleep(0.03)
                states = [(await stored(dcs, dc, "seats"))[0] for dc in DCS]
                if all(s == states[0] for s in states):
                    break
            final = states[0]
            assert final is not None and final.up is not None and final.down is not None
            assert all(s == final for s in states)
            for i, dc in enumerate(DCS):  # every acknowledged operation, nothing more
                assert final.up.u[i] == incs[dc] and final.down.u[i] == decs[dc]
            assert final.value() == initial + sum(incs.values()) - sum(decs.values())
            assert lower <= final.value() <= upper
            assert sum(incs.values()) > upper - initial and sum(decs.values()) > initial
        finally:
            for m in mws.values():
                await m.close()

    run(go())


def test_background_policy_refills_rights_to_increment(dcs) -> None:
    async def go() -> None:
        mws = [make(dcs, "server+batch", dc) for dc in DCS]
        try:
            for m in mws:
                m.start()
            await mws[0].create("budget", 0, lower=None, upper=60)  # spend <= budget
            await mws[1].inc("budget", 18)  # US-W: 2 rights to increment left
            for _ in range(100):
                await asyncio.sleep(0.02)
                if mws[1].transfers:
                    break
            (_, donor, given, on_demand), *_ = mws[1].transfers
            assert donor in ("US-E", "EU") and given == 9 and not on_demand
        finally:
            for m in mws:
                await m.close()

    run(go())


def test_baselines_say_they_keep_a_lower_bound_only(dcs) -> None:
    async def go() -> None:
        for dep in (WeakDeployment(dcs), StrongDeployment(dcs)):
            await dep.open()
            svc = await dep.service("EU")
            try:
                with pytest.raises(CounterError, match="lower bound only"):
                    await svc.create("seats", 0, upper=10)
            finally:
                await svc.close()
                await dep.close()

    run(go())


# -- the server process protocol ---------------------------------------------------------------

def test_counter_server_over_tcp() -> None:
    async def go() -> None:
        port = free_port()
        started = asyncio.Event()
        task = asyncio.ensure_future(serve_async(
            "US-E", "sim://primary?clock=real&regions=lan", {}, port, started=started,
            options=Options(sync_ms=50, policy_ms=50)))
        await asyncio.wait_for(started.wait(), 10)
        svc = await RemoteCounterService.connect("127.0.0.1", port)
        try:
            assert (svc.dc, svc.name) == ("US-E", "server-based+batch")
            await svc.create("k", 5)
            values = await asyncio.gather(*(svc.dec("k") for _ in range(5)))
            assert sorted(values) == [0, 1, 2, 3, 4]
            with pytest.raises(InsufficientRights, match="counter exhausted") as err:
                await svc.dec("k", allow_global=True)
            assert (err.value.available, err.value.needed) == (0, 1)
            assert await svc.inc("k", 3) == 3
            assert await svc.value("k") == 3
            with pytest.raises(UnknownCounter):
                await svc.dec("missing")
            with pytest.raises(CounterError, match="positive integer"):
                await svc.dec("k", -1)
            await svc.create("seats", 0, lower=0, upper=2)
            assert await svc.inc("seats", 2, allow_global=True) == 2
            with pytest.raises(InsufficientRights, match=r"rights to inc.*counter exhausted"):
                await svc.inc("seats")
        finally:
            await svc.close()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with pytest.raises(Unavailable, match="no counter server"):
            await RemoteCounterService.connect("127.0.0.1", port, timeout_s=2)

    run(go())


# -- real stores -------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["redis", "postgresql"])
def real_dcs(request):
    kind = request.param
    # PostgreSQL runs as its own user, which must be able to reach the cluster root
    root = Path(tempfile.mkdtemp(prefix=f"replicalab-mw-{kind[:5]}-"))
    root.chmod(0o755)
    try:
        try:
            t = topology.start(kind, root, f"mw-{kind[:5]}")
        except ValueError as err:
            server_missing(f"{kind} data centres", err)
        yield t
        t.down()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["client", "server+batch"])
def test_real_stores_keep_the_invariant_and_transfer_rights(real_dcs, kind: str) -> None:
    opts = Options(sync_ms=200, policy_ms=100, throttle_ms=200, threshold=5, retries=50)
    out = run(_concurrent_clients(real_dcs, kind, initial=90, clients_per_dc=(4, 2, 1),
                                  ops=40, opts=opts, key=f"stock-{kind}"))
    assert out["transfers"] > 0
    assert sum(out["acked"].values()) > 0


@pytest.mark.integration
def test_real_stores_keep_a_sum_invariant_with_compensation(real_dcs) -> None:
    """Seed 004 §VI-B on the real stores: x + y >= 50 under concurrent clients in every DC,
    judged on the members' final values (test_counters_joint.joint_scenario)."""
    from test_counters_joint import joint_scenario

    opts = Options(sync_ms=200, policy_ms=100, throttle_ms=200, threshold=5, retries=50)
    out = run(joint_scenario(real_dcs, lambda dc: ServerMiddleware(
        Placement.from_topology(real_dcs, dc), opts, batch_ms=2, batch_max=64), (3, 2, 1), 25,
        x0=8, y0=82))
    assert out["compensations"] > 0 and out["done"] > 0
