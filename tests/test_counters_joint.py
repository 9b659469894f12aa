"""Invariants over several counters (seed 004 §VI-B): x + y >= k kept by a Bounded Counter
of the sum, with compensation. The invariant is judged from the members' own final values,
never from the sum counter; the real-store run is in test_counters_middleware.py (its
Redis and PostgreSQL data centres)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from typing import Any

import pytest

from replicalab.cluster import datacentres as topology
from replicalab.counters.crdt import BoundViolation, CounterError, InsufficientRights
from replicalab.counters.joint import CompensationFailed, JointCounters, SumInvariant
from replicalab.counters.middleware import Options
from replicalab.counters.server_mw import ServerMiddleware
from replicalab.counters.service import Contended, Placement, read_state

FAST = Options(sync_ms=30, policy_ms=30, throttle_ms=30, threshold=5)
XY = SumInvariant("xy", ("x", "y"), lower=50)


def run(coro: Any) -> Any:
    """Run ``coro`` with a hard bound on its wall time (no test may hang)."""
    return asyncio.run(asyncio.wait_for(coro, 60))


@pytest.fixture
def dcs(tmp_path: Path):
    t = topology.start("sim", tmp_path, "joint")
    yield t
    t.down()


def test_the_sum_goes_first_towards_its_bound_and_last_away_from_it():
    j = JointCounters(None, [XY, SumInvariant("cap", ("x", "z"), upper=100)])  # type: ignore[arg-type]
    assert j.steps("x", "dec") == ["xy", "x", "cap"]
    assert j.steps("x", "inc") == ["cap", "x", "xy"]
    assert j.steps("y", "dec") == ["xy", "y"] and j.steps("z", "inc") == ["cap", "z"]
    with pytest.raises(CounterError, match="holds a sum"):
        j.steps("xy", "dec")


@pytest.mark.parametrize("invariants, word", [
    ([SumInvariant("s", ("x",), lower=0)], "two or more"),
    ([SumInvariant("s", ("x", "x"), lower=0)], "distinct"),
    ([SumInvariant("s", ("x", "y"))], "lower or an upper"),
    ([SumInvariant("x", ("x", "y"), lower=0)], "cannot be one of its members"),
    ([XY, SumInvariant("xy", ("x", "z"), lower=0)], "distinct names"),
    ([XY, SumInvariant("t", ("xy", "z"), lower=0)], "sum of sums"),
])
def test_bad_invariants_are_refused(invariants, word):
    with pytest.raises(CounterError, match=word):
        JointCounters(None, invariants)  # type: ignore[arg-type]


def test_initial_values_must_keep_the_sums(dcs):
    async def go() -> None:
        m = ServerMiddleware(Placement.from_topology(dcs, "US-E"), FAST, batch_ms=0)
        try:
            j = JointCounters(m, [XY])
            with pytest.raises(BoundViolation, match="xy = 40"):
                await j.create({"x": 10, "y": 30})
            with pytest.raises(CounterError, match="'y'"):
                await j.create({"x": 10})
        finally:
            await m.close()

    run(go())


def test_a_refused_member_is_compensated_on_the_sum(dcs):
    async def go() -> None:
        opts = Options(sync_ms=60_000, policy_ms=60_000, threshold=0)
        m = ServerMiddleware(Placement.from_topology(dcs, "US-E"), opts, batch_ms=0)
        try:
            j = JointCounters(m, [XY])
            await j.create({"x": 3, "y": 90})  # xy = 93: 43 of room; x has 1 right here
            assert await j.dec("x") == 2
            with pytest.raises(InsufficientRights):
                await j.dec("x")  # xy went down first, then x refused: xy is put back
            assert j.stats.compensations == 1
            assert (await m.value("x"), await m.value("xy")) == (2, 92)
        finally:
            await m.close()

    run(go())


async def joint_scenario(topo: Any, make: Any, clients_per_dc: tuple[int, ...], ops: int,
                         x0: int = 30, y0: int = 60, seed: int = 7) -> dict[str, Any]:
    """Clients in every DC decrement x or y (globally; one in five increments instead) under
    x >= 0, y >= 0, x + y >= 50; after they stop and the DCs agree, check the invariants on
    the members' own values and that nothing leaked into the sum. Returns counts."""
    mws = {dc: make(dc) for dc in topo.dcs}
    joints = {dc: JointCounters(m, [XY]) for dc, m in mws.items()}
    net = {"x": 0, "y": 0}  # acknowledged increments minus decrements, per member
    try:
        for m in mws.values():
            m.start()
        await joints[topo.dcs[0]].create({"x": x0, "y": y0})
        await asyncio.sleep(0.3)

        async def client(dc: str, rng: random.Random) -> None:
            for _ in range(ops):
                key = rng.choice(("x", "y"))
                up = rng.random() < 0.2
                # Contended: the update did not happen, and neither did its compensated
                # steps; the members' final values below check that
                with contextlib.suppress(InsufficientRights, Contended):
                    await (joints[dc].inc if up else joints[dc].dec)(key, allow_global=True)
                    net[key] += 1 if up else -1

        rng = random.Random(seed)
        await asyncio.gather(*(client(dc, random.Random(rng.random()))
                               for dc, c in zip(topo.dcs, clients_per_dc, strict=True)
                               for _ in range(c)))
        for _ in range(200):
            await asyncio.sleep(0.05)
            states = {k: [(await read_state(await topo.store(dc).connect(), k)).state
                          for dc in topo.dcs] for k in ("x", "y", "xy")}
            if all(s[0] is not None and all(v == s[0] for v in s) for s in states.values()):
                break
        value = {k: s[0].value() for k, s in states.items()}
        assert all(all(v == s[0] for v in s) for s in states.values()), "did not converge"
        assert value["x"] >= 0 and value["y"] >= 0
        assert value["x"] + value["y"] >= 50  # the joint invariant, on the members
        assert value["x"] == x0 + net["x"] and value["y"] == y0 + net["y"]
        assert value["xy"] == value["x"] + value["y"]  # every step undone or kept in pairs
        stats = [j.stats for j in joints.values()]
        return {"value": value, "compensations": sum(s.compensations for s in stats),
                "refused": sum(s.refused for s in stats), "done": sum(s.done for s in stats)}
    finally:
        for m in mws.values():
            await m.close()


def test_concurrent_clients_keep_the_sum_invariant_and_compensate(dcs):
    out = run(joint_scenario(dcs, lambda dc: ServerMiddleware(
        Placement.from_topology(dcs, dc), FAST, batch_ms=2, batch_max=64), (3, 2, 2), 40,
        x0=8, y0=82))
    # the joint bound was reached (at most 40 of the 90 units sold), and x ran out while the
    # sum still had room: those updates were refused by x after the sum had gone down, and
    # compensated
    assert out["value"]["x"] + out["value"]["y"] <= 52
    assert out["refused"] > 0 and out["compensations"] > 0


class _RefusesToUndo:
    """A counter service that refuses increments of one counter: an undo that cannot be
    done (with real counters: its rights were moved away between the step and the undo)."""

    def __init__(self, inner: Any, counter: str) -> None:
        self.inner, self.counter = inner, counter

    async def dec(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        return await self.inner.dec(key, n, allow_global=allow_global)

    async def inc(self, key: str, n: int = 1, *, allow_global: bool = False) -> int:
        if key == self.counter:
            raise InsufficientRights(f"no rights to inc {key}", 0, n)
        return await self.inner.inc(key, n, allow_global=allow_global)


def test_a_compensation_that_is_refused_says_what_it_left(dcs):
    async def go() -> None:
        opts = Options(sync_ms=60_000, policy_ms=60_000, threshold=0)
        m = ServerMiddleware(Placement.from_topology(dcs, "US-E"), opts, batch_ms=0)
        try:
            await JointCounters(m, [XY]).create({"x": 0, "y": 90})
            j = JointCounters(_RefusesToUndo(m, "xy"), [XY])  # type: ignore[arg-type]
            with pytest.raises(CompensationFailed) as err:
                await j.dec("x")  # xy -1 done, x refused (0), xy +1 refused
            assert err.value.left == ("xy",) and j.stats.failed_compensations == 1
            # what it left is on the safe side: the sum counter is below x + y
            assert (await m.value("xy"), await m.value("x") + await m.value("y")) == (89, 90)
        finally:
            await m.close()

    run(go())
