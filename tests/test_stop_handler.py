"""The stop handler of spawned workers (load workers, reader processes): the first SIGINT or
SIGTERM stops the run by a KeyboardInterrupt the event loop raises from a callback of its
own, wherever the signal landed; later ones do nothing."""

from __future__ import annotations

import asyncio
import signal
import sys
import weakref

import pytest

from replicalab.runtime.interrupts import stop_handler


class _Tracked:
    pass


def test_a_signal_landing_in_a_weakref_callback_still_stops_the_loop():
    # the fresh-clone run of 2026-11-29 beside a CPU hog: SIGTERM landed in a weakref
    # callback of a load worker, Python printed "Exception ignored ... KeyboardInterrupt"
    # and the worker ran on; here the handler is called where the signal landed then
    stopping = [False]
    once = stop_handler(stopping)
    dropped: list[object] = []
    ran_on = []

    async def main() -> None:
        t = _Tracked()
        ref = weakref.ref(t, lambda _: once(signal.SIGTERM, None))
        del t  # the callback runs here, as the signal handler would have
        assert ref() is None
        for _ in range(100):
            await asyncio.sleep(0)
        ran_on.append(True)

    hook, sys.unraisablehook = sys.unraisablehook, dropped.append
    try:
        with pytest.raises(KeyboardInterrupt):
            asyncio.run(main())
    finally:
        sys.unraisablehook = hook
    assert stopping == [True] and not dropped and not ran_on


def test_without_a_loop_it_stops_at_once_and_only_the_first_signal_counts():
    stopping = [False]
    once = stop_handler(stopping)
    with pytest.raises(KeyboardInterrupt):
        once(signal.SIGINT, None)
    once(signal.SIGTERM, None)  # the second: the run is stopping already
    assert stopping == [True]
