"""The checks every store adapter must pass, run against a live store from its URL.

Each check exercises one promise of the Store contract (``stores/base.py``) through the
adapter's own ``open_store`` path, on keys under a fresh prefix that is removed at the end
(``stores/prefix.py``). A check that needs a feature the store does not declare is skipped,
saying so; a failure names the promise, what was done and what came back.

=====================  ===================================================================
check                  promise
=====================  ===================================================================
describes-itself       ``info`` has a kind, only known features, no password in its URL
absent-reads-none      a key never written reads as None, one value per key asked
consistent-read        a consistent read sees every write acknowledged before it began
eventual-read          an eventual read returns only written values and converges
multi-read             several keys in one call come back in the order asked
conditional-write      a false condition raises ConditionFailed and changes nothing; a true
                       one writes; of concurrent writes expecting one value, one wins
atomic-multi-write     writes of several elements in one call are all-or-nothing: racing
                       writers never leave (or let a snapshot read see) a mix
delete                 a deleted element reads as None
timeout-is-unknown     a store that stops answering makes calls raise Unavailable (outcome
                       unknown) within a bounded time, and the adapter recovers after
txn-own-writes         (transactions) a transaction's reads see its own earlier appends and
                       writes; a later transaction sees them committed
txn-atomic             (transactions promising snapshot isolation or stronger) a concurrent
                       reading transaction never sees half of a two-key append; a refused
                       one raises TxnAborted and leaves nothing behind
client-region          (stores in several regions) a client is placed in the region it is
                       connected in: a region the store does not have is refused, and a
                       call served by a node of another region pays at least half their
                       round trip (the WAN the client's links carry)
=====================  ===================================================================
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replicalab.cluster.kinds import isolation_promise
from replicalab.regions import RegionSet, region_set
from replicalab.runtime.base import NS_PER_S
from replicalab.stores.base import (
    ABSENT,
    ConditionFailed,
    Feature,
    Store,
    StoreError,
    TxnAborted,
    Unavailable,
    Unsupported,
    redact_url,
)
from replicalab.stores.prefix import PrefixedStore
from replicalab.stores.registry import open_store
from replicalab.testing.stall import Staller, staller_for

CONVERGE_S = 30.0
"""How long an eventual read may take to return an acknowledged write (store time)."""
STALL_LIMIT_S = 30.0
"""How long a call to a stalled store may hang before it must raise Unavailable."""
RECOVER_S = 30.0
"""How long the adapter may take to answer again once the store is back."""


class Failed(AssertionError):
    """A check found the adapter breaking a promise (the message says which and how)."""


class Skipped(Exception):
    """A check does not apply (a feature the store does not declare)."""


@dataclass
class CheckResult:
    """One check's outcome: ``passed``, ``failed`` or ``skipped``, and why."""

    name: str
    status: str
    detail: str
    elapsed_s: float = 0.0

    def line(self) -> str:
        """Return ``PASS name: detail (1.2 s)`` (FAIL/SKIP likewise; store time)."""
        return f"{self.status.upper()[:4]:4} {self.name}: {self.detail} ({self.elapsed_s:.1f} s)"


@dataclass
class ConformanceReport:
    """Every check's result for one store URL (password masked)."""

    url: str
    kind: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def failed(self) -> list[CheckResult]:
        """Return the failed checks."""
        return [r for r in self.results if r.status == "failed"]

    @property
    def ok(self) -> bool:
        """Return True when no check failed."""
        return not self.failed

    def text(self) -> str:
        """Return one line per check, then a summary line."""
        n = {s: sum(r.status == s for r in self.results) for s in ("passed", "failed",
                                                                    "skipped")}
        return "\n".join([*(r.line() for r in self.results),
                          f"{self.kind} adapter at {self.url}: {n['passed']} passed, "
                          f"{n['failed']} failed, {n['skipped']} skipped"])


class Ctx:
    """What a check works with: the store (keys under a fresh prefix), its runtime, and
    fresh keys and values."""

    def __init__(self, store: PrefixedStore, url: str, staller: Staller | None,
                 nonce: str, opener: Callable[[str, int], Store] = open_store) -> None:
        self.store = store
        self.opener = opener
        self.nonce = nonce
        self.rt = store.runtime
        self.features = store.info.features
        self.url = url
        self.staller = staller
        self._n = 0

    def key(self, item: str, attr: str = "a") -> str:
        """Return a fresh element name in this run's domain."""
        self._n += 1
        return f"conformance/{item}-{self._n}/{attr}"

    def value(self, tag: str = "v") -> str:
        """Return a value never used before in this run."""
        self._n += 1
        return f"{tag}{self._n}-{self.nonce}"

    def need(self, *features: Feature) -> None:
        """Skip the check unless the store declares every one of ``features``."""
        missing = [f.value for f in features if f not in self.features]
        if missing:
            raise Skipped(f"the store does not declare {', '.join(missing)}")

    @property
    def consistent(self) -> bool:
        """Return True when reads can ask for the latest value (else eventual reads)."""
        return Feature.CONSISTENT_READ in self.features

    async def settled(self, client: Any, keys: Sequence[str], want: Sequence[str | None]
                      ) -> tuple[str | None, ...]:
        """Return what ``keys`` read as: one consistent read, or eventual reads until they
        show ``want`` (at most CONVERGE_S of store time)."""
        if self.consistent:
            return tuple((await client.read(list(keys), consistent=True)).values)
        deadline = self.rt.now_ns() + int(CONVERGE_S * NS_PER_S)
        got: tuple[str | None, ...] = ()
        while self.rt.now_ns() < deadline:
            got = tuple((await client.read(list(keys), consistent=False)).values)
            if got == tuple(want):
                break
            await self.rt.sleep_ns(NS_PER_S // 20)
        return got


Check = Callable[[Ctx], Awaitable[str]]


async def _outcome(aw: Awaitable[Any]) -> Any:
    """Return the result of ``aw`` or the StoreError it raised (for racing calls)."""
    try:
        return await aw
    except StoreError as err:
        return err


def _values(got: Any, n: int, what: str) -> tuple[str | None, ...]:
    values = getattr(got, "values", None)
    if not isinstance(values, tuple) or len(values) != n:
        raise Failed(f"{what} returned {got!r}; read() must return a ReadResult whose values "
                     f"is a tuple of {n} (one per key asked, None for absent)")
    return values


async def describes_itself(ctx: Ctx) -> str:
    info = ctx.store.info
    if not isinstance(info.kind, str) or not info.kind:
        raise Failed(f"info.kind is {info.kind!r}; give the store kind as a short name")
    unknown = [f for f in info.features if not isinstance(f, Feature)]
    if unknown:
        raise Failed(f"info.features holds {unknown!r}; use members of "
                     "replicalab.stores.Feature")
    password = urlsplit(ctx.url).password
    if password and password in str(info.to_json()):
        raise Failed("info (saved in every run's config.json) shows the URL's password; "
                     "pass the URL through replicalab.stores.base.redact_url")
    return f"kind {info.kind}, features {', '.join(sorted(f.value for f in info.features))}"


async def absent_reads_none(ctx: Ctx) -> str:
    client = await ctx.store.connect()
    keys = [ctx.key("absent")]
    modes = [c for c, f in ((False, Feature.EVENTUAL_READ), (True, Feature.CONSISTENT_READ))
             if f in ctx.features] or [False]
    for consistent in modes:
        got = _values(await client.read(keys, consistent=consistent), 1, "a read of one key")
        if got != (None,):
            raise Failed(f"a key never written read as {got[0]!r} "
                         f"({'consistent' if consistent else 'eventual'} read); an absent "
                         "element must read as None")
    await client.close()
    return "a key never written reads as None"


async def consistent_read(ctx: Ctx) -> str:
    ctx.need(Feature.CONSISTENT_READ)
    pairs, rounds = 5, 2

    async def pair(n: int) -> None:
        # a writer and a reader of their own key; the pairs run side by side
        writer, reader = await ctx.store.connect(), await ctx.store.connect()
        key = ctx.key("consistent")
        for i in range(rounds):
            value = ctx.value()
            await writer.write({key: value})
            got = _values(await reader.read([key], consistent=True), 1,
                          "a consistent read")[0]
            if got != value:
                raise Failed(f"pair {n + 1}, round {i + 1}: a write of {value!r} was "
                             f"acknowledged, then a consistent read by another client "
                             f"returned {got!r}; a consistent read must see every write "
                             "acknowledged before it began")
        await writer.close()
        await reader.close()

    await ctx.rt.gather(*(pair(n) for n in range(pairs)))
    return (f"{pairs * rounds} writes each seen by the next consistent read of another "
            "client")


ROUNDS_PER_WRITER = 5
"""Atomic multi-write: writes of both elements per racing client."""


async def eventual_read(ctx: Ctx) -> str:
    ctx.need(Feature.EVENTUAL_READ)
    writer, reader = await ctx.store.connect(), await ctx.store.connect()
    key = ctx.key("eventual")
    first, second = ctx.value(), ctx.value()
    await writer.write({key: first})
    await writer.write({key: second})
    t0 = ctx.rt.now_ns()
    deadline = t0 + int(CONVERGE_S * NS_PER_S)
    seen: list[str | None] = []
    while True:
        got = _values(await reader.read([key], consistent=False), 1, "an eventual read")[0]
        if got not in (None, first, second):
            raise Failed(f"an eventual read returned {got!r}, which was never written "
                         f"(writes: {first!r}, {second!r})")
        seen.append(got)
        if got == second:
            break
        if ctx.rt.now_ns() >= deadline:
            raise Failed(f"{len(seen)} eventual reads over {CONVERGE_S:g} s never returned "
                         f"the last acknowledged write {second!r} (last: {got!r}); eventual "
                         "reads must converge")
        await ctx.rt.sleep_ns(NS_PER_S // 20)
    await writer.close()
    await reader.close()
    took_ms = (ctx.rt.now_ns() - t0) / 1e6
    return f"returned only written values and the last write after {took_ms:.0f} ms"


async def multi_read(ctx: Ctx) -> str:
    ctx.need(Feature.MULTI_READ)
    client = await ctx.store.connect()
    item = ctx.key("multi").rsplit("/", 1)[0]
    keys = [f"{item}/{a}" for a in ("x", "y", "z")]
    values = [ctx.value() for _ in keys]
    await client.write(dict(zip(keys, values, strict=True)))
    order = [2, 0, 1]
    asked = [keys[i] for i in order] + [ctx.key("multi-absent")]
    want = [values[i] for i in order] + [None]
    got = await ctx.settled(client, asked, want)
    if list(got) != want:
        raise Failed(f"reading {asked} in one call returned {list(got)}, expected {want}: "
                     "values must come back in the order the keys were asked, None for "
                     "absent")
    await client.close()
    return "four keys in one call came back in the order asked"


async def conditional_write(ctx: Ctx) -> str:
    ctx.need(Feature.CONDITIONAL_WRITE)
    client = await ctx.store.connect()
    key = ctx.key("cas")
    v1, v2, wrong = ctx.value(), ctx.value(), ctx.value("never-")

    async def expect_failure(values: dict[str, str], expect: dict[str, Any], what: str
                             ) -> None:
        try:
            await client.write(values, expect=expect)
        except ConditionFailed:
            return
        except StoreError as err:
            raise Failed(f"{what} raised {type(err).__name__} ({err}); a false condition "
                         "must raise ConditionFailed (the write certainly did not "
                         "happen)") from None
        raise Failed(f"{what} succeeded; a write whose condition is false must raise "
                     "ConditionFailed and change nothing")

    await client.write({key: v1}, expect={key: ABSENT})
    got = (await ctx.settled(client, [key], [v1]))[0]
    if got != v1:
        raise Failed(f"a write of {v1!r} expecting the key absent succeeded, but the key "
                     f"reads {got!r}")
    await expect_failure({key: v2}, {key: ABSENT}, "a write expecting an existing key to be "
                                                  "absent")
    await expect_failure({key: v2}, {key: wrong}, f"a write expecting {wrong!r} (the key "
                                                  f"holds {v1!r})")
    got = (await ctx.settled(client, [key], [v1]))[0]
    if got != v1:
        raise Failed(f"after two writes with false conditions the key reads {got!r}, not "
                     f"{v1!r}: a failed condition must change nothing")
    await client.write({key: v2}, expect={key: v1})
    got = (await ctx.settled(client, [key], [v2]))[0]
    if got != v2:
        raise Failed(f"a write of {v2!r} expecting {v1!r} (true) succeeded, but the key "
                     f"reads {got!r}")
    racers = [await ctx.store.connect() for _ in range(5)]
    news = [ctx.value() for _ in racers]
    outcomes = await ctx.rt.gather(*(_outcome(c.write({key: n}, expect={key: v2}))
                                     for c, n in zip(racers, news, strict=True)))
    won = [n for n, o in zip(news, outcomes, strict=True) if not isinstance(o, StoreError)]
    odd = [o for o in outcomes if isinstance(o, StoreError) and
           not isinstance(o, ConditionFailed | Unavailable)]
    if odd:
        raise Failed(f"racing conditional writes raised {type(odd[0]).__name__} ({odd[0]}); "
                     "a lost race must raise ConditionFailed")
    if len(won) > 1:
        raise Failed(f"{len(won)} of 5 concurrent writes expecting {v2!r} all succeeded; "
                     "the compare and the set must be one atomic step (only one can win)")
    for c in racers:
        await c.close()
    if won:
        got = (await ctx.settled(client, [key], [won[0]]))[0]
        if got != won[0]:
            raise Failed(f"the one racing conditional write that succeeded wrote "
                         f"{won[0]!r}, but the key reads {got!r}")
    await client.close()
    return ("false conditions raise ConditionFailed and change nothing; of 5 racing "
            f"conditional writes {len(won)} won")


async def atomic_multi_write(ctx: Ctx) -> str:
    ctx.need(Feature.ATOMIC_MULTI_WRITE)
    item = ctx.key("atomic").rsplit("/", 1)[0]
    keys = [f"{item}/left", f"{item}/right"]
    writers = [await ctx.store.connect() for _ in range(4)]
    snapshot = (Feature.MULTI_READ in ctx.features
                and ctx.store.info.params.get("multi_read_snapshot", True) is not False)
    mixed: list[tuple[str | None, ...]] = []
    done = [False]

    async def write(c: Any) -> None:
        for _ in range(ROUNDS_PER_WRITER):
            v = ctx.value()
            await c.write(dict.fromkeys(keys, v))

    async def watch() -> None:
        reader = await ctx.store.connect()
        while not done[0]:
            got = _values(await reader.read(keys, consistent=ctx.consistent), 2,
                          "a read of two keys")
            if got[0] != got[1]:
                mixed.append(got)
            await ctx.rt.sleep_ns(0)
        await reader.close()

    async def writers_then_stop() -> None:
        try:
            await ctx.rt.gather(*(write(c) for c in writers))
        finally:
            done[0] = True

    await ctx.rt.gather(writers_then_stop(), *([watch()] if snapshot else []))
    if mixed:
        raise Failed(f"a read of {keys} in one call saw {list(mixed[0])} while 4 clients "
                     "each wrote one value to both in one call: a multi-element write must "
                     "be atomic (and a multi-element read one snapshot, or declare "
                     "params['multi_read_snapshot'] = False)")
    final = (tuple((await writers[0].read(keys, consistent=True)).values) if ctx.consistent
             else await _converged_pair(ctx, writers[0], keys))
    if final[0] != final[1] or final[0] is None:
        raise Failed(f"4 clients each wrote one value to both of {keys} in one call, "
                     f"{ROUNDS_PER_WRITER} times; afterwards they read {list(final)}: a "
                     "multi-element write must be atomic (all of it or none)")
    for c in writers:
        await c.close()
    return (f"{4 * ROUNDS_PER_WRITER} racing two-element writes left both elements equal"
            + (", and no snapshot read saw a mix" if snapshot else ""))


async def _converged_pair(ctx: Ctx, client: Any, keys: list[str]) -> tuple[str | None, ...]:
    """Return two keys read eventually until they stop changing (two equal reads 0.5 s
    apart, at most CONVERGE_S)."""
    deadline = ctx.rt.now_ns() + int(CONVERGE_S * NS_PER_S)
    last = tuple((await client.read(keys, consistent=False)).values)
    while ctx.rt.now_ns() < deadline:
        await ctx.rt.sleep_ns(NS_PER_S // 2)
        got = tuple((await client.read(keys, consistent=False)).values)
        if got == last and got[0] == got[1]:
            return got
        last = got
    return last


async def delete(ctx: Ctx) -> str:
    ctx.need(Feature.DELETE)
    client = await ctx.store.connect()
    key, value = ctx.key("delete"), ctx.value()
    await client.write({key: value})
    await ctx.settled(client, [key], [value])
    await client.delete([key])
    got = (await ctx.settled(client, [key], [None]))[0]
    if got is not None:
        raise Failed(f"an element written then deleted reads {got!r}; it must read None")
    await client.close()
    return "a deleted element reads as None"


async def timeout_is_unknown(ctx: Ctx) -> str:
    staller = ctx.staller
    if staller is None:
        raise Skipped("the URL names no HOST:PORT to stall and no staller was given "
                      "(run_conformance(url, staller=...))")
    url = await staller.start(ctx.url)
    try:
        if url == ctx.url:  # stalled from inside (the simulator): the store in hand
            return await _stall(ctx, staller, ctx.store)
        inner = ctx.opener(url, 7)
        store = PrefixedStore(inner, ctx.store.prefix)
        try:
            return await _stall(ctx, staller, store)
        finally:
            try:
                await ctx.rt.timeout(store.cleanup(), int(RECOVER_S * NS_PER_S))
            finally:
                await inner.close()
    finally:
        await staller.stop()


async def _stall(ctx: Ctx, staller: Staller, store: PrefixedStore) -> str:
    rt = ctx.rt
    writer, reader = await store.connect(), await store.connect()
    key = ctx.key("stall")
    await writer.write({key: ctx.value()})
    staller.freeze(store.inner)
    t0 = rt.now_ns()

    async def call(aw: Awaitable[Any]) -> Any:
        try:
            return await rt.timeout(_outcome(aw), int(STALL_LIMIT_S * NS_PER_S))
        except TimeoutError:
            return TimeoutError()

    try:
        outcomes = await rt.gather(call(writer.write({key: ctx.value("stalled-")})),
                                   call(reader.read([key], consistent=ctx.consistent)))
    finally:
        staller.thaw(store.inner)
    waited_s = (rt.now_ns() - t0) / NS_PER_S
    for what, o in zip(("a write", "a read"), outcomes, strict=True):
        if isinstance(o, TimeoutError):
            raise Failed(f"{what} to a store that stopped answering had not returned after "
                         f"{STALL_LIMIT_S:g} s; an adapter must give up after its timeout and "
                         "raise Unavailable")
        if not isinstance(o, StoreError):
            raise Failed(f"{what} to a store that stopped answering returned {o!r}; it must "
                         "raise Unavailable (nothing came back)")
        if not isinstance(o, Unavailable):
            raise Failed(f"{what} to a store that stopped answering raised "
                         f"{type(o).__name__} ({o}); an unanswered call has an unknown "
                         "outcome and must raise Unavailable")
    deadline = rt.now_ns() + int(RECOVER_S * NS_PER_S)
    last: BaseException | None = None
    while rt.now_ns() < deadline:
        try:
            await writer.write({key: ctx.value("after-")})
            break
        except StoreError as err:
            last = err
            await rt.sleep_ns(NS_PER_S // 5)
    else:
        raise Failed(f"the store answered again, but writes through the same client still "
                     f"failed {RECOVER_S:g} s later ({last}); the adapter must reconnect")
    await writer.close()
    await reader.close()
    return (f"a stalled write and read raised Unavailable after {waited_s:.1f} s; writes "
            "went through again once the store answered")


def _need_transact(client: Any) -> None:
    if not callable(getattr(getattr(client, "_inner", client), "transact", None)):
        raise Failed("the store declares Feature.TRANSACTIONS but its client has no "
                     "transact(ops) method; add it (stores/base.py, TxnClient) or stop "
                     "declaring the feature (declare ALL_FEATURES for every other one)")


async def txn_own_writes(ctx: Ctx) -> str:
    ctx.need(Feature.TRANSACTIONS)
    client = await ctx.store.connect()
    _need_transact(client)
    item = ctx.key("txn").rsplit("/", 1)[0]  # one item: stores whose txns keep to one
    lst, reg = f"{item}/list", f"{item}/reg"
    got = await client.transact([("r", lst, None), ("append", lst, 1), ("r", lst, None),
                                 ("append", lst, 2), ("r", lst, None), ("w", reg, 7),
                                 ("r", reg, None)])
    want = [("r", lst, None), ("append", lst, 1), ("r", lst, [1]), ("append", lst, 2),
            ("r", lst, [1, 2]), ("w", reg, 7), ("r", reg, 7)]
    if [tuple(op) for op in got] != want:
        raise Failed(f"transaction [r, append 1, r, append 2, r] on a fresh key, then "
                     f"[w 7, r] on another, returned {got!r}; want {want!r} (reads see the "
                     "transaction's own earlier writes; a key never written reads None)")
    later = None
    deadline = ctx.rt.now_ns() + int(CONVERGE_S * NS_PER_S)
    while ctx.rt.now_ns() < deadline:  # a store reading replicas may show it late
        later = await client.transact([("r", lst, None), ("r", reg, None)])
        if later == [("r", lst, [1, 2]), ("r", reg, 7)]:
            break
        await ctx.rt.sleep_ns(NS_PER_S // 20)
    else:
        raise Failed(f"after the transaction committed, a new one read {later!r}; want "
                     f"[('r', {lst!r}, [1, 2]), ('r', {reg!r}, 7)]")
    await client.close()
    return "reads inside a transaction see its own appends and writes; later ones too"


ATOMIC_ROUNDS = 30
"""Two-key appends each of 4 writers makes while a reader watches (txn-atomic)."""


async def txn_atomic(ctx: Ctx) -> str:
    ctx.need(Feature.TRANSACTIONS)
    try:
        promise, _ = isolation_promise(ctx.url)
    except ValueError:
        promise = "serializable"  # an outside store: the contract says atomic
    if promise in ("none", "read-committed", "read-uncommitted"):
        raise Skipped(f"the store's transactions promise {promise}: a reader may see half "
                      "of a transaction")
    a, b = ctx.key("txn-atomic-a"), ctx.key("txn-atomic-b")  # two items, two partitions
    writers = [await ctx.store.connect() for _ in range(4)]
    reader = await ctx.store.connect()
    try:
        await reader.transact([("r", a, None), ("r", b, None)])
    except Unsupported:  # transactions keep to one item (Cassandra's txn=lwt)
        item = ctx.key("txn-atomic").rsplit("/", 1)[0]
        a, b = f"{item}/a", f"{item}/b"
    torn: list[Any] = []
    aborted = [0]
    committed: list[int] = []
    done = [False]

    async def write(n: int, c: Any) -> None:
        for r in range(ATOMIC_ROUNDS):
            v = n * ATOMIC_ROUNDS + r + 1
            try:
                await c.transact([("append", a, v), ("append", b, v)])
                committed.append(v)
            except TxnAborted:
                aborted[0] += 1

    async def watch() -> None:
        while not done[0]:
            try:
                got = await reader.transact([("r", a, None), ("r", b, None)])
            except TxnAborted:
                continue
            if (got[0][2] or []) != (got[1][2] or []):
                torn.append(got)
            await ctx.rt.sleep_ns(0)

    async def writers_then_stop() -> None:
        try:
            await ctx.rt.gather(*(write(n, c) for n, c in enumerate(writers)))
        finally:
            done[0] = True

    await ctx.rt.gather(writers_then_stop(), watch())
    if torn:
        raise Failed(f"a transaction reading {a} and {b} saw {torn[0]!r} while 4 clients "
                     "each appended one value to both in one transaction: a transaction at "
                     f"{promise} is all-or-nothing to its readers")
    final = await reader.transact([("r", a, None), ("r", b, None)])
    la, lb = final[0][2] or [], final[1][2] or []
    if la != lb or sorted(la) != sorted(committed):
        raise Failed(f"after 4 clients appended to both {a} and {b} in one transaction each, "
                     f"they read {la!r} and {lb!r}; committed were {sorted(committed)!r} "
                     "(every committed transaction in both, no aborted one in either)")
    for c in (*writers, reader):
        await c.close()
    return (f"{len(committed)} committed two-key appends ({aborted[0]} aborted): no reader "
            "saw half of one, both keys hold exactly the committed ones")


REGION_CALLS = 3
"""Calls of each kind (write, consistent read, eventual read) a client placed in each region
makes in client-region; the median of each kind and serving node is judged."""


def _node_regions(ctx: Ctx) -> tuple[dict[str, str], RegionSet] | None:
    """Return {node name: region} and the region set of the store's nodes, from its info's
    ``params`` (``nodes``: name -> region, ``regions``: the set, as the simulator gives
    them) or from its URL (``node_regions=R0,R1,...`` for nodes n0, n1, ... and
    ``regions=SET``, as ``cluster up`` prints it); None when neither says."""
    params = ctx.store.info.params
    query = {k: v[-1] for k, v in parse_qs(urlsplit(ctx.url).query).items()}
    try:
        rs = region_set(str(params.get("regions") or query.get("regions", "")))
    except ValueError:
        return None
    nodes = params.get("nodes")
    if isinstance(nodes, dict) and nodes and all(r in rs.regions for r in nodes.values()):
        return {str(n): str(r) for n, r in nodes.items()}, rs
    listed = [r for r in query.get("node_regions", "").split(",") if r]
    if listed and all(r in rs.regions for r in listed):
        return {f"n{i}": r for i, r in enumerate(listed)}, rs
    return None


async def client_region(ctx: Ctx) -> str:
    regions = tuple(dict.fromkeys(ctx.store.info.regions))
    if len(regions) < 2:
        raise Skipped("the store has one region: nowhere else to place a client")
    placement = _node_regions(ctx)
    if placement is None:
        raise Skipped("the store names no region per node (params['nodes'] or the URL's "
                      "node_regions and regions)")
    where, rs = placement
    try:
        stray = await ctx.store.connect(region="no-such-region")
    except ValueError:
        pass
    else:
        await stray.close()
        raise Failed("connect(region='no-such-region') returned a client; a region the "
                     f"store does not have ({', '.join(regions)}) must raise ValueError: "
                     "an adapter that ignores the client's region places every client "
                     "nowhere")
    kinds = [("write", None), *((what, consistent) for what, consistent, f in (
        ("consistent read", True, Feature.CONSISTENT_READ),
        ("eventual read", False, Feature.EVENTUAL_READ)) if f in ctx.features)]

    async def placed(region: str) -> dict[tuple[str, str], list[int]]:
        client = await ctx.store.connect(region=region)
        took: dict[tuple[str, str], list[int]] = {}
        for _ in range(REGION_CALLS):
            key = ctx.key("region")
            for what, consistent in kinds:
                t0 = ctx.rt.now_ns()
                if consistent is None:
                    node = (await client.write({key: ctx.value()})).node
                else:
                    node = (await client.read([key], consistent=consistent)).node
                took.setdefault((what, node), []).append(ctx.rt.now_ns() - t0)
        await client.close()
        return took

    seen = await ctx.rt.gather(*(placed(r) for r in regions))
    crossed = []
    for region, took in zip(regions, seen, strict=True):
        for (what, node), ns in took.items():
            there = where.get(node)
            if there is None or there == region:
                continue  # an unnamed node, or one in the client's own region
            rtt_ms = rs.one_way_ms(region, there)[0] + rs.one_way_ms(there, region)[0]
            median_ms = statistics.median(ns) / 1e6
            if median_ms < rtt_ms / 2:
                raise Failed(f"a client placed in {region} had its {what}s served by {node} "
                             f"(in {there}) in {median_ms:.1f} ms (median of {len(ns)}), "
                             f"under half the {rtt_ms:.0f} ms round trip between the two "
                             "regions: a client placed in a region must reach the nodes of "
                             "other regions through its region's links (the URL's "
                             "client_links), paying the WAN")
            crossed.append(f"{what}s {region}->{there} {median_ms:.0f} ms")
    if not crossed:
        return (f"clients placed in {len(regions)} regions were served inside their own "
                "region; an unknown region was refused")
    return (f"clients placed in {len(regions)} regions paid the round trip to nodes "
            f"elsewhere ({'; '.join(crossed[:4])}{'; ...' if len(crossed) > 4 else ''}); "
            "an unknown region was refused")


CHECKS: dict[str, Check] = {
    "describes-itself": describes_itself,
    "absent-reads-none": absent_reads_none,
    "consistent-read": consistent_read,
    "eventual-read": eventual_read,
    "multi-read": multi_read,
    "conditional-write": conditional_write,
    "atomic-multi-write": atomic_multi_write,
    "delete": delete,
    "timeout-is-unknown": timeout_is_unknown,
    "txn-own-writes": txn_own_writes,
    "txn-atomic": txn_atomic,
    "client-region": client_region,
}
"""Every check, by name, in the order they run."""


def run_conformance(url: str, *, only: Sequence[str] = (), seed: int = 1,
                    staller: Staller | str | None = "auto",
                    opener: Callable[[str, int], Store] = open_store) -> ConformanceReport:
    """Run the checks (all, or those named in ``only``) against the store at ``url`` and
    return their results; every key written is removed at the end.

    ``staller``: how the timeout check stalls the store ("auto": a TCP relay for URLs with
    ``HOST:PORT``, the simulator's own crash for ``sim://``; None skips that check).
    ``opener``: how the store is opened (default: the registry, entry points included).
    ValueError when ``url`` cannot be opened, its store does not answer (one message, not
    the same connection error from every check) or ``only`` names an unknown check.
    """
    unknown = [n for n in only if n not in CHECKS]
    if unknown:
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; the checks are "
                         f"{', '.join(CHECKS)}")
    inner = opener(url, seed)
    nonce = f"{os.getpid():x}{time.time_ns() % 10**9:x}"
    store = PrefixedStore(inner, f"replicalab/conformance-{nonce}/")
    chosen = staller_for(url) if staller == "auto" else staller
    ctx = Ctx(store, url, chosen if not isinstance(chosen, str) else None, nonce, opener)
    report = ConformanceReport(redact_url(url), str(inner.info.kind))

    unreachable: list[str] = []

    async def main() -> None:
        try:
            # a store that does not answer fails every check the same way: say it once
            client = await store.connect()
        except (StoreError, ValueError, OSError) as err:
            unreachable.append(str(err))
            await store.close()
            return
        await client.close()
        try:
            for name, check in CHECKS.items():
                if only and name not in only:
                    continue
                report.results.append(await _run_one(ctx, name, check))
        finally:
            try:
                await ctx.rt.timeout(store.cleanup(), int(RECOVER_S * NS_PER_S))
            finally:
                await store.close()

    store.runtime.run(main())
    if unreachable:
        raise ValueError(f"{redact_url(url)} does not answer, so no check can run "
                         f"({unreachable[0]}); start the store or fix the URL, then re-run")
    return report


async def _run_one(ctx: Ctx, name: str, check: Check) -> CheckResult:
    t0 = ctx.rt.now_ns()
    try:
        result = CheckResult(name, "passed", await check(ctx))
    except Skipped as why:
        result = CheckResult(name, "skipped", str(why))
    except Failed as err:
        result = CheckResult(name, "failed", str(err))
    except (StoreError, ValueError, TimeoutError) as err:
        result = CheckResult(name, "failed", f"a call raised {type(err).__name__}: {err} "
                                             "(nothing in this check should fail that way)")
    result.elapsed_s = (ctx.rt.now_ns() - t0) / NS_PER_S
    return result


def assert_conforms(url: str, **kwargs: Any) -> ConformanceReport:
    """Run :func:`run_conformance` and raise AssertionError listing every failed check
    (with the full report) if any failed; return the report otherwise."""
    report = run_conformance(url, **kwargs)
    if not report.ok:
        failed = "; ".join(f"{r.name}: {r.detail}" for r in report.failed)
        raise AssertionError(f"{len(report.failed)} conformance check(s) failed for "
                             f"{report.url}: {failed}\n{report.text()}")
    return report
