"""Real time: a thin layer over asyncio with the machine-wide monotonic clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from replicalab.runtime import interrupts

T = TypeVar("T")


class RealRuntime:
    """Runtime backed by asyncio; ``now_ns`` is ``time.monotonic_ns`` (shared by all processes)."""

    virtual = False

    def now_ns(self) -> int:
        """Return ``time.monotonic_ns()``."""
        return time.monotonic_ns()

    def sleep_ns(self, ns: int) -> Awaitable[None]:
        """Return an awaitable sleeping ``ns`` nanoseconds of wall time."""
        return asyncio.sleep(max(ns, 0) / 1e9)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Start ``coro`` as an asyncio task."""
        return asyncio.get_running_loop().create_task(coro)

    async def gather(self, *aws: Awaitable[Any]) -> list[Any]:
        """Return the results of ``aws`` run concurrently."""
        return list(await asyncio.gather(*aws))

    async def timeout(self, aw: Coroutine[Any, Any, T], ns: int) -> T:
        """Return ``aw``'s result or raise TimeoutError after ``ns`` ns."""
        return await asyncio.wait_for(aw, max(ns, 0) / 1e9)

    def call_later(self, ns: int, fn: Callable[..., Any], *args: Any) -> asyncio.TimerHandle:
        """Schedule ``fn(*args)`` after ``ns`` ns on the running loop."""
        return asyncio.get_running_loop().call_later(max(ns, 0) / 1e9, fn, *args)

    def future(self) -> asyncio.Future[Any]:
        """Return a new unresolved future of the running loop."""
        return asyncio.get_running_loop().create_future()

    def schedule(self, ns: int, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` after ``ns`` ns, for good (no handle)."""
        asyncio.get_running_loop().call_later(max(ns, 0) / 1e9, fn, *args)

    def continue_after(self, ns: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` after ``ns`` ns (the caller's last action; see the virtual
        runtime, which may run it at once)."""
        asyncio.get_running_loop().call_later(max(ns, 0) / 1e9, fn, *args)

    def resolve_later(self, ns: int, fut: asyncio.Future[Any], value: Any) -> None:
        """Set ``fut``'s result ``value`` after ``ns`` ns (nothing if it is done by then:
        a caller's timeout cancels it)."""
        asyncio.get_running_loop().call_later(max(ns, 0) / 1e9, _settle, fut, value, None)

    def reject_later(self, ns: int, fut: asyncio.Future[Any], exc: BaseException) -> None:
        """Set ``fut``'s exception ``exc`` after ``ns`` ns (nothing if it is done by then)."""
        asyncio.get_running_loop().call_later(max(ns, 0) / 1e9, _settle, fut, None, exc)

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` with ``asyncio.run`` and return its result."""
        try:
            return asyncio.run(main)
        except KeyboardInterrupt:
            interrupts.note()  # the command may save and go on: it was still interrupted
            raise


def _settle(fut: asyncio.Future[Any], value: Any, exc: BaseException | None) -> None:
    if fut.done():
        return
    if exc is None:
        fut.set_result(value)
    else:
        fut.set_exception(exc)
