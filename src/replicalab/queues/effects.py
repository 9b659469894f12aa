"""The effect of processing a message, written to a store a downstream observer reads.

Every strategy's commit is a store write: the message's item ``<domain>/<tag>`` holds an
``effects`` element, a list of entries ``<consumer>.<gen>.<receipt>`` (``#t<token>`` added
by ``central``), one per commit that landed. An unfenced commit (``none``, ``tag``,
``central-lease``, ``central-detect``) appends its entry by compare-and-set (write the list
with the entry added, expecting the list read before; the first try expects nothing there);
``central`` writes its entry in the same conditional write that moves its claim from busy
to done (``fenced.py``), so the effect and the fence are one atomic step. A commit whose
outcome is unknown is retried; an entry names its delivery, so a retry recognises an
earlier try that landed and never appends twice.

At the end of a run :func:`read_back` reads every message's list back with consistent
reads, as an observer of the results would, and records one ``effect`` row per message
(``count`` = entries, ``note`` = the entries): the delivery checker counts committed
results from those rows; the consumers' own ``commit`` rows are kept to cross-check.

The store is the central store for the central strategies, else one opened on the queue's
own server (``backends.py``): ``sim://simpledb`` on ``sim://sqs``'s virtual clock, the
Redis or PostgreSQL server of a ``redis://`` or ``postgresql://`` queue; a queue backend
that names no server (one added through the entry-point group) gets
:class:`LocalEffectStore`, kept by the run's process on the queue's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from replicalab.queues.record import OBSERVER, QueueLog
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS, NS_PER_S
from replicalab.stores.base import (
    ABSENT,
    Client,
    ConditionFailed,
    Feature,
    ReadResult,
    Store,
    StoreError,
    StoreInfo,
    WriteResult,
)

SEP = ";"
RETRY_FIRST_NS = 100 * NS_PER_MS  # wait before re-sending a commit whose outcome is unknown
RETRY_MAX_NS = NS_PER_S  # ... doubling up to this
READ_BACK_CLIENTS = 8  # concurrent readers of the read-back (one call at a time each)
READ_BACK_TRIES = 5  # a read that fails is tried again this often before "unreadable"


def effects_key(domain: str, tag: str) -> str:
    """Return the element holding message ``tag``'s effect list."""
    return f"{domain}/{tag}/effects"


def entries(value: str | None) -> list[str]:
    """Return the entries of an effect list's stored value (None: no effect)."""
    return [e for e in (value or "").split(SEP) if e]


def joined(items: Iterable[str]) -> str:
    """Return the stored value of an effect list."""
    return SEP.join(items)


async def append_effect(rt: Runtime, log: QueueLog, process: int, client: Client, key: str,
                        entry: str, tag: str, msg_id: str, receipt: str,
                        retry_ns: int) -> bool | None:
    """Append ``entry`` to the effect list at ``key`` by compare-and-set; return True once it
    is certainly there, None when its outcome stayed unknown for ``retry_ns``.

    Rows: each write is an ``effect_write``, each read an ``effect_read`` (effect-store
    operations); the caller's ``commit`` row spans them."""
    deadline = rt.now_ns() + retry_ns
    wait_ns = RETRY_FIRST_NS
    expected: list[str] | None = None  # None: first try, expect no list
    while True:
        if rt.now_ns() > deadline:
            return None
        new = joined([*(expected or []), entry])
        j = log.invoke("effect_write", process, rt.now_ns(), tag=tag, msg_id=msg_id,
                       receipt=receipt, note=entry)
        unknown = False
        try:
            await client.write({key: new},
                               expect={key: ABSENT if expected is None else joined(expected)})
        except ConditionFailed:
            log.done(j, rt.now_ns(), "fail", note="list changed: read and try again")
        except StoreError as err:
            log.done(j, rt.now_ns(), "info", note=str(err))
            unknown = True
        else:
            log.done(j, rt.now_ns())
            return True
        if unknown:
            if rt.now_ns() + wait_ns > deadline:
                return None
            await rt.sleep_ns(wait_ns)
            wait_ns = min(2 * wait_ns, RETRY_MAX_NS)
        current = await _read(rt, log, process, client, key, tag, msg_id, receipt)
        if current is None:
            if rt.now_ns() + wait_ns > deadline:
                return None
            await rt.sleep_ns(wait_ns)
            wait_ns = min(2 * wait_ns, RETRY_MAX_NS)
            continue
        if entry in current:
            return True  # an earlier try landed
        expected = current or None


async def _read(rt: Runtime, log: QueueLog, process: int, client: Client, key: str, tag: str,
                msg_id: str, receipt: str) -> list[str] | None:
    """Return the entries at ``key`` by a consistent read (``effect_read`` row), None when
    the read failed."""
    i = log.invoke("effect_read", process, rt.now_ns(), tag=tag, msg_id=msg_id,
                   receipt=receipt)
    try:
        got = await client.read([key], consistent=True)
    except StoreError as err:
        log.done(i, rt.now_ns(), "info", note=str(err))
        return None
    found = entries(got.values[0])
    log.done(i, rt.now_ns(), count=len(found))
    return found


async def _connect(rt: Runtime, store: Store) -> Client:
    """Return a client of ``store``, trying again (100 ms, 200 ms, ...) while it refuses:
    right after a run's consumers let go of their connections a loaded PostgreSQL closed a
    new one once in a while ("connection socket closed"), which cost the whole read-back."""
    for attempt in range(READ_BACK_TRIES - 1):
        with contextlib.suppress(StoreError, ValueError):
            return await store.connect()
        await rt.sleep_ns(RETRY_FIRST_NS << attempt)
    return await store.connect()  # the last try: its error is the one reported


async def read_back(rt: Runtime, store: Store, domain: str, tags: Iterable[str],
                    log: QueueLog) -> int:
    """Read every message's effect list back (consistent reads, a few clients at once) and
    record one ``effect`` row per message read (``count`` entries, ``note`` the entries;
    ``info`` when it stayed unreadable); return how many could not be read."""
    todo = sorted(set(tags))
    clients = [await _connect(rt, store)
               for _ in range(min(READ_BACK_CLIENTS, len(todo)) or 1)]
    failed = 0

    async def reader(c: Client, mine: list[str]) -> None:
        nonlocal failed
        for tag in mine:
            t0 = rt.now_ns()
            for attempt in range(READ_BACK_TRIES):
                try:
                    got = await c.read([effects_key(domain, tag)], consistent=True)
                except StoreError as err:
                    if attempt + 1 == READ_BACK_TRIES:
                        log.record("effect", OBSERVER, t0, rt.now_ns(), "info", tag=tag,
                                   note=f"unreadable: {err}")
                        failed += 1
                    else:
                        await rt.sleep_ns(RETRY_FIRST_NS)
                    continue
                found = entries(got.values[0])
                log.record("effect", OBSERVER, t0, rt.now_ns(), tag=tag, count=len(found),
                           note=joined(found))
                break

    try:
        tasks = [rt.spawn(reader(c, todo[k::len(clients)])) for k, c in enumerate(clients)]
        for t in tasks:
            await t
    finally:
        for c in clients:
            # the read-back is recorded; a failing close changes nothing
            with contextlib.suppress(StoreError, OSError, asyncio.CancelledError):
                await c.close()
    return failed


class LocalEffectStore:
    """The effect store of a queue backend that names no store server (an outside
    ``replicalab.queues`` backend): a dict kept by the run's process on the queue's clock,
    with consistent reads and conditional writes, each call atomic."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.state: dict[str, str] = {}
        self.info = StoreInfo(url="local://effects", kind="local",
                              features=frozenset({Feature.CONSISTENT_READ,
                                                  Feature.CONDITIONAL_WRITE,
                                                  Feature.ATOMIC_MULTI_WRITE,
                                                  Feature.MULTI_READ}),
                              params={"where": "the run's own process (the queue backend "
                                      "names no store server)"})

    async def connect(self, region: str | None = None) -> LocalEffectClient:
        """Return a client session."""
        return LocalEffectClient(self)

    async def close(self) -> None:
        """Nothing to release."""


class LocalEffectClient:
    """A session with a :class:`LocalEffectStore`."""

    def __init__(self, store: LocalEffectStore) -> None:
        self.store = store

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values at ``keys`` (None: absent)."""
        return ReadResult(tuple(self.store.state.get(k) for k in keys), "local")

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` if every expected value holds (ABSENT: must not exist), else
        raise ConditionFailed."""
        state = self.store.state
        for k, want in (expect or {}).items():
            if (k in state) if want is ABSENT else state.get(k) != want:
                raise ConditionFailed(f"{k}: expected value not found")
        state.update(values)
        return WriteResult("local")

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Remove ``keys``."""
        for k in keys:
            self.store.state.pop(k, None)
        return WriteResult("local")

    async def close(self) -> None:
        """Nothing to release."""
