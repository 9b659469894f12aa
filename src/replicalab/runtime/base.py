"""The Runtime protocol shared by real and virtual time."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000


class Task(Protocol):
    """A spawned coroutine: awaitable for its result, cancellable."""

    def done(self) -> bool: ...
    def cancel(self) -> bool: ...
    def __await__(self) -> Any: ...


class Runtime(Protocol):
    """Clock, sleep, spawn, gather, timeouts and timers, in integer nanoseconds."""

    virtual: bool

    def now_ns(self) -> int:
        """Return the current time in ns (monotonic; 0 at the start of a virtual run)."""
        ...

    def sleep_ns(self, ns: int) -> Awaitable[None]:
        """Return an awaitable that resumes the caller after ``ns`` nanoseconds."""
        ...

    def spawn(self, coro: Coroutine[Any, Any, T]) -> Task:
        """Start ``coro`` concurrently and return its task."""
        ...

    async def gather(self, *aws: Awaitable[Any]) -> list[Any]:
        """Run awaitables concurrently; return their results in order."""
        ...

    async def timeout(self, aw: Coroutine[Any, Any, T], ns: int) -> T:
        """Return ``aw``'s result, or raise :class:`TimeoutError` after ``ns`` nanoseconds."""
        ...

    def call_later(self, ns: int, fn: Callable[..., Any], *args: Any) -> Any:
        """Schedule plain callback ``fn(*args)`` in ``ns`` nanoseconds; return a cancel handle."""
        ...

    def schedule(self, ns: int, fn: Callable[..., Any], *args: Any) -> None:
        """Schedule ``fn(*args)`` in ``ns`` nanoseconds for good (no cancel handle: cheaper)."""
        ...

    def continue_after(self, ns: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` in ``ns`` nanoseconds; call it last (virtual time may run it
        at once, with the clock moved on, when nothing else would happen first)."""
        ...

    def future(self) -> Any:
        """Return a new unresolved future of this runtime (awaitable for its result)."""
        ...

    def resolve_later(self, ns: int, fut: Any, value: Any) -> None:
        """Set ``fut``'s result ``value`` in ``ns`` nanoseconds, unless it is done by then."""
        ...

    def reject_later(self, ns: int, fut: Any, exc: BaseException) -> None:
        """Set ``fut``'s exception ``exc`` in ``ns`` nanoseconds, unless it is done by then."""
        ...

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` to completion on this runtime and return its result."""
        ...
