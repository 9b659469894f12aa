"""The noise floor (``runtime/noise.py``): a stall the test makes in the event loop is measured
as long as it was, with its time; the loopback echo answers and measures its round trips; the
floor survives its JSON; a late measurement is matched with the noise that was there."""

from __future__ import annotations

import asyncio
import threading
import time

from replicalab.runtime.noise import EchoServer, NoiseFloor, NoiseMonitor


def _measure(block_s: float) -> tuple[NoiseFloor, int, int]:
    """Run the monitor for ~0.6 s with one blocking stall of ``block_s`` in the loop; return
    the floor and the monotonic ns around the stall."""
    echo = EchoServer()

    async def main() -> tuple[NoiseFloor, int, int]:
        mon = NoiseMonitor(echo.port, "loopback")
        mon.start()
        await asyncio.sleep(0.25)
        t0 = time.monotonic_ns()
        time.sleep(block_s)  # the loop cannot run: a stall of the client process
        t1 = time.monotonic_ns()
        await asyncio.sleep(0.25)
        return await mon.stop(), t0, t1

    try:
        return asyncio.run(main())
    finally:
        echo.close()


def test_a_stall_is_measured_as_long_as_it_was_and_when():
    floor, t0, t1 = _measure(0.08)
    assert floor.stall_max_ms >= 75, floor
    assert floor.stall_samples >= 40 and floor.echo_samples >= 10, floor
    assert floor.echo_via == "loopback" and 0 < floor.echo_min_ms < 20, floor
    assert floor.added_p99_ms >= floor.stall_p99_ms and floor.cores >= 1
    # the stall is an event at its time: a measurement spanning it is explained by it,
    # one before the monitor started is not
    assert floor.added_between_ms(t0, t1) >= 75
    assert floor.added_between_ms(t0 - 2 * 10**9, t0 - 10**9) == 0.0
    again = NoiseFloor.from_json(floor.to_json())
    assert again == floor and "the machine added" in again.line()


def test_stop_ends_the_instruments_whenever_it_comes():
    """Stopped at any moment, even while an echo's reply is arriving, the monitor returns at
    once: before Python 3.12, ``asyncio.wait_for`` could swallow the cancellation when its
    read completed at the same moment, and a run waited for ever on the echo's loop (a
    scorecard latency run hung 14 min after its last operation)."""
    echo = EchoServer()

    async def main() -> float:
        worst_s = 0.0
        for i in range(60):
            mon = NoiseMonitor(echo.port, "loopback", tick_ms=1.0, echo_every_ms=0.0)
            mon.start()
            await asyncio.sleep(0.002 * (i % 7))
            t0 = time.perf_counter()
            floor = await asyncio.wait_for(mon.stop(), 5.0)
            worst_s = max(worst_s, time.perf_counter() - t0)
            assert floor.stall_samples >= 0
            await asyncio.sleep(0.01)
            assert all(t.done() for t in mon._tasks), i  # nothing left running
        return worst_s

    got: list[float] = []
    # in a thread of its own: a monitor that cannot stop hangs that loop, not the suite
    runner = threading.Thread(target=lambda: got.append(asyncio.run(main())), daemon=True)
    runner.start()
    runner.join(timeout=60)
    echo.close()
    assert not runner.is_alive(), "stop() did not return: the monitor's loop went on"
    assert got and got[0] < 2.0, got
