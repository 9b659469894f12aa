"""Virtual and real time behind one API: ordering, gather, timeouts, determinism."""

from __future__ import annotations

import os
import signal
import time

import pytest

from replicalab.history import History
from replicalab.runtime import RealRuntime, VirtualRuntime


def test_virtual_sleep_jumps_time_and_orders_wakeups():
    rt = VirtualRuntime()
    seen: list[tuple[str, int]] = []

    async def sleeper(name: str, ns: int) -> str:
        await rt.sleep_ns(ns)
        seen.append((name, rt.now_ns()))
        return name

    async def main() -> list[str]:
        return await rt.gather(sleeper("late", 3_000_000_000), sleeper("early", 1_000),
                               sleeper("tie-a", 5_000), sleeper("tie-b", 5_000))

    t0 = time.perf_counter()
    assert rt.run(main()) == ["late", "early", "tie-a", "tie-b"]
    assert time.perf_counter() - t0 < 1.0  # three simulated seconds, no real waiting
    assert seen == [("early", 1_000), ("tie-a", 5_000), ("tie-b", 5_000),
                    ("late", 3_000_000_000)]


def test_virtual_timeout_raises_and_cancels_the_inner_task():
    rt = VirtualRuntime()
    finished = []

    async def slow() -> None:
        await rt.sleep_ns(10_000)
        finished.append(True)

    async def main() -> int:
        with pytest.raises(TimeoutError):
            await rt.timeout(slow(), 1_000)
        assert rt.now_ns() == 1_000
        await rt.sleep_ns(20_000)
        return await rt.timeout(_value(rt), 5_000)

    assert rt.run(main()) == 42
    assert finished == []


async def _value(rt) -> int:
    await rt.sleep_ns(100)
    return 42


def test_call_later_and_cancelled_timers():
    rt = VirtualRuntime()
    fired = []

    async def main() -> None:
        rt.call_later(500, fired.append, "a")
        handle = rt.call_later(600, fired.append, "b")
        handle.cancel()
        await rt.sleep_ns(1_000)

    rt.run(main())
    assert fired == ["a"]


def test_future_wakes_waiter():
    rt = VirtualRuntime()

    async def main() -> str:
        fut = rt.future()
        rt.call_later(2_000, fut.set_result, "done")
        value = await fut
        assert rt.now_ns() == 2_000
        return value

    assert rt.run(main()) == "done"


def test_deadlock_is_reported_not_hung():
    rt = VirtualRuntime()

    async def main() -> None:
        await rt.future()

    with pytest.raises(RuntimeError, match="deadlock"):
        rt.run(main())


def test_exception_in_task_reaches_the_awaiter():
    rt = VirtualRuntime()

    async def boom() -> None:
        await rt.sleep_ns(1)
        raise ValueError("bad")

    async def main() -> None:
        await rt.gather(boom())

    with pytest.raises(ValueError, match="bad"):
        rt.run(main())


async def _workload(rt) -> list[int]:
    """Code written once, run under both runtimes."""
    out = []
    start = rt.now_ns()
    for i in range(3):
        await rt.sleep_ns(2_000_000)
        out.append(i)
    with pytest.raises(TimeoutError):
        await rt.timeout(rt.sleep_ns(1_000_000_000), 1_000_000)
    assert rt.now_ns() - start >= 7_000_000
    return out


@pytest.mark.parametrize("rt", [VirtualRuntime(), RealRuntime()], ids=["virtual", "real"])
def test_same_code_runs_in_both_runtimes(rt):
    assert rt.run(_workload(rt)) == [0, 1, 2]


def test_real_runtime_uses_monotonic_clock():
    rt = RealRuntime()
    a = rt.now_ns()
    b = time.monotonic_ns()
    assert 0 <= b - a < 1_000_000_000


def test_ctrl_c_stops_the_virtual_loop_between_events_not_inside_one():
    rt = VirtualRuntime()
    h = History()

    async def main() -> None:
        for _ in range(1000):
            i = h.invoke(0, "read", ("k",), (None,), "eventual", rt.now_ns())
            os.kill(os.getpid(), signal.SIGINT)  # arrives in the middle of this event
            h.ok(i, rt.now_ns(), ("v",))  # still runs: the loop stops after the event
            await rt.sleep_ns(1000)

    with pytest.raises(KeyboardInterrupt):
        rt.run(main())
    assert len(h) == 1 and list(h.column("type")) == [1]  # one op, whole and completed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored
