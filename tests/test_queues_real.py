"""Visibility-timeout queues on real Redis Streams and PostgreSQL, started by replicalab:
the contract (receipts valid for one delivery, leases, dead letters), strong leases under
concurrent receivers, redelivery after a slow consumer and after a SIGKILLed one, and
durability of acknowledged sends across a crash of the server (with and without the
settings it needs).

Run as a script (``python tests/test_queues_real.py URL VISIBILITY_S``) this file is the
consumer process the SIGKILL test starts: it receives one message, prints it as one JSON
line and "processes" it until it is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from replicalab.checkers.deliveries import check_deliveries
from replicalab.cluster import base, process
from replicalab.cluster.ports import free_port, is_free, wait_listening
from replicalab.queues.backends import open_backends
from replicalab.queues.base import Delivery, QueueClient, QueueUnavailable, StaleReceipt
from replicalab.queues.postgres import PostgresQueue, open_postgres_queue
from replicalab.queues.record import QueueLog
from replicalab.queues.redis import RedisQueue, check_timeout_s, open_redis_queue
from replicalab.queues.runner import run_workload
from replicalab.queues.spec import QueueSpec
from replicalab.queues.strategies import make_strategy
from replicalab.queues.worker import Ctx, Reader, Worker
from replicalab.stores import open_store
from servers import running_cluster, server_missing

integration = pytest.mark.integration

AnyQueue = RedisQueue | PostgresQueue


def _with(url: str, **params: Any) -> str:
    extra = "&".join(f"{k}={v}" for k, v in params.items())
    return url + ("&" if "?" in url else "?") + extra


def _open(url: str) -> AnyQueue:
    return open_redis_queue(url, 1) if url.startswith("redis") else open_postgres_queue(url, 1)


def _queue_url(cluster: tuple[Any, Path], **params: Any) -> str:
    """Return the cluster's URL (primary first) naming a fresh queue."""
    c, _ = cluster
    return _with(c.url, queue=f"t{uuid.uuid4().hex[:10]}", **params)


def _run(url: str, body: Callable[[AnyQueue], Awaitable[Any]]) -> Any:
    """Open the queue at ``url``, empty it, run ``body(queue)`` and close it."""
    async def go() -> Any:
        q = _open(url)
        try:
            await q.purge()
            return await body(q)
        finally:
            await q.close()

    return asyncio.run(go())


async def _receive_within(c: QueueClient, vis_s: float, within_s: float,
                          n: int = 1) -> list[Delivery]:
    """Poll until a receive returns something or ``within_s`` passes; return it."""
    deadline = time.monotonic() + within_s
    while True:
        got = await c.receive(n, vis_s)
        if got or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.02)


# -- the contract --------------------------------------------------------------------------

async def _contract(q: AnyQueue) -> None:
    a, b = await q.connect(), await q.connect()
    sent = [await a.send(f"m{i}") for i in range(3)]
    assert len(set(sent)) == 3
    first = await a.receive(10, 1.0)
    assert [d.body for d in first] == ["m0", "m1", "m2"]
    assert [d.id for d in first] == sent and all(d.receive_count == 1 for d in first)
    assert len({d.receipt for d in first}) == 3
    # invisible while leased (1 s: room for a stall of the shared machine)
    assert await b.receive(10, 1.0) == []
    assert await q.depth() == (0, 3)
    # m0 deleted, m1 extended to 10 s, m2 left to expire
    await a.delete(first[0].receipt)
    await a.change_visibility(first[1].receipt, 10.0)
    time.sleep(1.1)
    again = await _receive_within(b, 5.0, 1.0, n=10)
    assert [(d.body, d.receive_count) for d in again] == [("m2", 2)]
    assert again[0].id == first[2].id and again[0].receipt != first[2].receipt
    # the first delivery's receipt is stale now: refused, and the message is untouched
    with pytest.raises(StaleReceipt):
        await a.delete(first[2].receipt)
    with pytest.raises(StaleReceipt):
        await a.change_visibility(first[2].receipt, 0)
    assert await a.receive(10, 0.4) == []  # still leased by b, not released by the stale 0
    assert await q.depth() == (0, 2)
    # a deleted message's receipt is stale too; a made-up one as well
    with pytest.raises(StaleReceipt):
        await a.delete(first[0].receipt)
    with pytest.raises(StaleReceipt):
        await a.delete("not-a-receipt")
    # visibility 0 releases at once: the next receive gets it with a new receipt
    await b.change_visibility(again[0].receipt, 0)
    third = await a.receive(10, 5.0)
    assert [(d.body, d.receive_count) for d in third] == [("m2", 3)]
    await a.delete(third[0].receipt)
    # m1 was extended to 10 s: still leased now (its first lease of 1 s has ended), its
    # receipt still valid
    assert await b.receive(10, 0.4) == []
    await a.delete(first[1].receipt)
    assert await q.depth() == (0, 0)
    assert await q.dead_letters() == []


async def _dead_letter(q: AnyQueue) -> None:
    assert q.max_receives == 2
    c = await q.connect()
    mid = await c.send("poison")
    for count in (1, 2):
        got = await _receive_within(c, 0.2, 1.0)
        assert [(d.id, d.receive_count) for d in got] == [(mid, count)]
    time.sleep(0.25)
    fresh = await c.send("fresh")
    # a third receive would exceed max_receives: the poison moves to the dead letters on the
    # way, and the batch of one is filled with the next message
    now = await c.receive(1, 5.0)
    assert [(d.id, d.body, d.receive_count) for d in now] == [(fresh, "fresh", 1)]
    dead = await q.dead_letters()
    assert [(d.id, d.body, d.receive_count) for d in dead] == [(mid, "poison", 2)]
    assert await q.depth() == (0, 1)
    with pytest.raises(StaleReceipt):
        await c.delete(got[0].receipt)
    await c.delete(now[0].receipt)
    assert await c.receive(10, 0.2) == []


async def _concurrent(q: AnyQueue, receivers: int = 4, messages: int = 80) -> None:
    """Receivers on their own connections race for the messages with a lease long enough
    never to end: each message must reach exactly one of them."""
    producer = await q.connect()
    for i in range(messages):
        await producer.send(f"c{i}")
    clients = [await q.connect() for _ in range(receivers)]
    got: list[list[Delivery]] = [[] for _ in clients]

    async def drain(k: int) -> None:
        for _ in range(messages):  # bounded: each round takes at least one or stops
            batch = await clients[k].receive(3, 30.0)
            if not batch:
                return
            got[k] += batch

    await asyncio.gather(*(drain(k) for k in range(receivers)))
    ids = [d.id for per in got for d in per]
    assert len(ids) == messages and len(set(ids)) == messages
    assert all(d.receive_count == 1 for per in got for d in per)
    assert sum(1 for per in got if per) >= 2, "the receivers did not run concurrently"
    assert await q.depth() == (0, messages)


async def _slow_consumer(q: AnyQueue) -> None:
    """A consumer slower than its 0.3 s lease: the message is delivered to another one, and
    the slow consumer's delete afterwards is refused (counted as stale)."""
    slow, fast = await q.connect(), await q.connect()
    mid = await slow.send("job")
    (lease,) = await slow.receive(1, 0.3)
    t0 = time.monotonic()
    (other,) = await _receive_within(fast, 5.0, 2.0)  # the slow one is still "processing"
    waited_s = time.monotonic() - t0
    assert other.id == mid and other.receive_count == 2
    assert 0.1 < waited_s < 3.0
    await asyncio.sleep(0.3)  # the slow consumer finishes, later than its lease
    with pytest.raises(StaleReceipt):
        await slow.delete(lease.receipt)
    await fast.delete(other.receipt)
    assert await q.depth() == (0, 0)


async def _deep_expiry(q: AnyQueue, messages: int = 300) -> None:
    """The one expired lease among many held ones, at the end of the pending list, comes
    back within a few receives (Redis scans the pending list a slice per receive)."""
    c = await q.connect()
    for i in range(messages):
        await c.send(f"x{i}")
    held: list[Delivery] = []
    for _ in range(messages):
        got = await c.receive(10, 30.0)
        if not got:
            break
        held += got
    assert len(held) == messages
    await c.change_visibility(held[-1].receipt, 0)
    got = await _receive_within(c, 30.0, 2.0)
    assert [(d.id, d.receive_count) for d in got] == [(held[-1].id, 2)]
    assert await q.depth() == (0, messages)


def _both(fn: Callable[[AnyQueue], Awaitable[Any]], **params: Any):
    """Return the two tests (Redis, PostgreSQL) that run ``fn`` on a fresh queue of the
    shared dc3 cluster's primary."""

    @integration
    def on_redis(redis_dc3):
        _run(_queue_url(redis_dc3, **params), fn)

    @integration
    def on_postgres(postgres_dc3):
        _run(_queue_url(postgres_dc3, **params), fn)

    return on_redis, on_postgres


test_contract_redis, test_contract_postgres = _both(_contract)
test_dead_letter_redis, test_dead_letter_postgres = _both(_dead_letter, max_receives=2)
test_concurrent_receivers_redis, test_concurrent_receivers_postgres = _both(_concurrent)
test_slow_consumer_redis, test_slow_consumer_postgres = _both(_slow_consumer)
test_deep_expiry_redis, test_deep_expiry_postgres = _both(_deep_expiry)


# -- a consumer killed with SIGKILL mid-processing ------------------------------------------

async def _consume_one(url: str, vis_s: float) -> None:
    """The consumer process: receive one message, say so, process it "forever" (60 s)."""
    q = _open(url)
    c = await q.connect()
    got = await _receive_within(c, vis_s, 20.0)
    print(json.dumps({"id": got[0].id, "receipt": got[0].receipt,
                      "receive_count": got[0].receive_count}) if got else "{}", flush=True)
    await asyncio.sleep(60)


def _sigkill(url: str, tmp_path: Path) -> None:

    vis_s = 1.0

    async def produce(q: AnyQueue) -> str:
        return await (await q.connect()).send("job")

    mid = _run(url, produce)
    log = tmp_path / "consumer.log"
    pid = process.start([sys.executable, __file__, url, str(vis_s)], log, label="consumer")
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and process.alive(pid):
            text = log.read_text() if log.exists() else ""
            line = next((x for x in text.splitlines() if x.startswith("{")), "")
            if line:
                break
            time.sleep(0.05)
        held = json.loads(line or "{}")
        assert held.get("id") == mid, f"the consumer did not report the message: {log}"
        process.kill9(pid)  # mid-processing, holding the lease
        killed_at = time.monotonic()
        assert not process.alive(pid)
    finally:
        process.stop(pid, 1.0)

    async def take_over() -> Delivery:
        q = _open(url)
        try:
            c = await q.connect()
            got = await _receive_within(c, 5.0, vis_s + 2.0)
            assert got, "the killed consumer's message never came back"
            await c.delete(got[0].receipt)
            return got[0]
        finally:
            await q.close()

    again = asyncio.run(take_over())
    waited_s = time.monotonic() - killed_at
    assert again.id == mid and again.receive_count == 2
    assert again.receipt != held["receipt"]
    assert waited_s < vis_s + 2.0


@integration
def test_sigkill_consumer_redis(redis_dc3, tmp_path):
    _sigkill(_queue_url(redis_dc3), tmp_path)


@integration
def test_sigkill_consumer_postgres(postgres_dc3, tmp_path):
    _sigkill(_queue_url(postgres_dc3), tmp_path)


# -- central (seed 000, case 3) processes a redelivered message once ---------------------------

SLOW = dict(messages=2, consumers=4, producers=1, batch=1, visibility_s=2.0, process_ms=3000,
            process_sigma=0.0, slow_fraction=0.0, empty_poll_ms=20, max_duration_s=60, seed=5)
"""Every processing (3 s) outlasts its visibility timeout (2 s); idle consumers take the
message over. ``central-lease``'s claim lasts half the timeout, renewed every third of
that: 1 s, which no stall of this machine reaches (the longest a noise floor measured here
beside a CPU hog: 0.27 s). With 0.5 s and 0.8 s until 2026-11-30, a lease of 0.25 s ran
out beside the hog while its owner slept out its processing, another consumer took the
message over, and both committed: the hole in leases without fencing that ``central``
closes, not a bug this test is for (``tests/test_queues_nemesis_real.py`` stalls a lease
holder on purpose)."""


def _workload(queue_url: str, strategy: str, central: str | None) -> dict[str, Any]:
    """Run the queue workload (queues/runner.py) and return the delivery checker's
    summary, whose results are the effects found on the queue's own server (or the central
    store) and agree with the consumers' record."""
    o = run_workload(QueueSpec(queue=queue_url, strategy=strategy, central=central, **SLOW))
    assert not o.notes, o.notes
    server = queue_url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0].rsplit("@", 1)[-1]
    assert o.effects_info is not None and server in o.effects_info["url"]
    s = check_deliveries(o.log.columns(), o.dead_letters)["summary"]
    assert s["results_from"] == "effect store" and s["effects_agree_with_log"], s
    return s


def _slow_consumers_central(cluster: tuple[Any, Path], strategy: str) -> dict[str, Any]:
    s = _workload(_queue_url(cluster, max_receives=4), strategy, cluster[0].url)
    assert s["messages"] == 2 and s["lost"] == 0
    assert s["duplicate_processing"] == 0 and s["duplicate_results"] == 0
    assert s["exactly_once"]
    if strategy == "central-lease":  # the lease leaves the visibility timeout as it is
        assert s["duplicate_deliveries"] >= 2, "the slow consumers caused no redelivery"
        assert s["stale_deletes_refused"] >= 1  # a slow consumer's delete came too late
    else:  # central extends the visibility while it processes: nothing comes back
        assert s["duplicate_deliveries"] == 0 and s["stale_deletes_refused"] == 0
    return s


@integration
def test_slow_consumers_redelivered_none_processes_twice_central_once_redis(redis_dc3):
    none = _workload(_queue_url(redis_dc3, max_receives=4), "none", None)
    assert none["duplicate_deliveries"] >= 2 and none["duplicate_processing"] >= 2
    # every processing wrote its effect to the Redis server: an observer sees them twice
    assert none["duplicate_results"] == none["duplicate_processing"]
    central = _slow_consumers_central(redis_dc3, "central-lease")
    assert central["store_ops"] > 0
    _slow_consumers_central(redis_dc3, "central")


@integration
def test_slow_consumers_redelivered_central_once_postgres(postgres_dc3):
    none = _workload(_queue_url(postgres_dc3, max_receives=4), "none", None)
    assert none["duplicate_processing"] >= 2
    assert none["duplicate_results"] == none["duplicate_processing"]  # in the PostgreSQL table
    _slow_consumers_central(postgres_dc3, "central-lease")
    _slow_consumers_central(postgres_dc3, "central")


async def _central_consumer(url: str, central: str, domain: str, process_ms: float,
                            vis_s: float, within_s: float) -> QueueLog:
    """Run one consumer thread of the workload with the central strategy (claims in
    ``domain`` of store ``central``) until it has deleted a message or ``within_s`` passed;
    return its record."""
    spec = QueueSpec(queue=url, strategy="central", central=central, consumers=1, messages=1,
                     batch=1, visibility_s=vis_s, process_ms=process_ms, process_sigma=0.0,
                     slow_fraction=0.0, empty_poll_ms=20)
    q, store = open_backends(spec)
    assert store is not None
    log = QueueLog()
    ctx = Ctx(spec, q.runtime, q, log, make_strategy("central", vis_s), store, domain, "t")
    w = Worker(ctx, 0, 0, Reader(0), await q.connect(), await store.connect())
    task = asyncio.ensure_future(w.run())
    try:
        deadline = time.monotonic() + within_s
        while not ctx.deleted and time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.02)
    finally:
        ctx.stopping = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await w.client.close()
        for c in w.stores:
            await c.close()
        await q.close()
        await store.close()
    return log


async def _claim_of(central: str, key: str) -> str | None:
    store = open_store(central, 1)
    try:
        c = await store.connect()
        return (await c.read([key], consistent=True)).values[0]
    finally:
        await store.close()


def _sigkill_central(cluster: tuple[Any, Path], tmp_path: Path) -> None:
    """A central-strategy consumer process claims the message, starts a 60 s processing and
    is SIGKILLed; another consumer gets the redelivery, takes the expired claim over and
    processes the message: once, with one committed result."""
    url, central = _queue_url(cluster), cluster[0].url
    domain, tag, vis_s = f"claims-{uuid.uuid4().hex[:8]}", "k1", 1.0
    key = f"{domain}/{tag}/owner"

    async def produce(q: AnyQueue) -> str:
        return await (await q.connect()).send(f"{tag}|payload")

    mid = _run(url, produce)
    log = tmp_path / "central-consumer.log"
    pid = process.start([sys.executable, __file__, url, str(vis_s), central, domain], log,
                        label="central-consumer")
    try:
        deadline, claim = time.monotonic() + 30, None
        while time.monotonic() < deadline and process.alive(pid):
            claim = asyncio.run(_claim_of(central, key))
            if claim and "|busy|" in claim:
                break
            time.sleep(0.05)
        assert claim and "|busy|" in claim, f"the consumer never claimed the message: {log}"
        process.kill9(pid)  # mid-processing: claimed, not committed, not deleted
    finally:
        process.stop(pid, 1.0)
    rec = asyncio.run(_central_consumer(url, central, domain, 50, 5.0, vis_s + 4.0)).cols
    rows = list(zip(rec["kind"], rec["outcome"], rec["msg_id"], rec["count"], strict=True))
    assert ("deliver", "ok", mid, 2) in rows, rows  # the redelivery after the kill
    assert ("claim", "fail") in [r[:2] for r in rows]  # the dead consumer's claim was there
    assert ("claim_takeover", "ok") in [r[:2] for r in rows]  # ... expired: taken over
    assert [r[:2] for r in rows if r[0] in ("process", "commit", "delete")] == [
        ("process", "ok"), ("commit", "ok"), ("delete", "ok")]
    final = asyncio.run(_claim_of(central, key))
    assert final is not None and "|done|" in final


@integration
def test_sigkill_consumer_central_processes_once_redis(redis_dc3, tmp_path):
    _sigkill_central(redis_dc3, tmp_path)


@integration
def test_sigkill_consumer_central_processes_once_postgres(postgres_dc3, tmp_path):
    _sigkill_central(postgres_dc3, tmp_path)


# -- bad input: one clear error, before any connection ---------------------------------------

@pytest.mark.parametrize(("url", "says"), [
    ("redis://127.0.0.1/?queue=a", "needs a port"),
    ("redis://127.0.0.1:6379/?queue=a&max_receives=0", "max_receives='0'"),
    ("redis://127.0.0.1:6379/?queue=a%20b", "queue='a b'"),
    ("redis://127.0.0.1:6379/?queue=a&visibility=3", "unknown parameter 'visibility'"),
    ("postgresql://postgres@127.0.0.1:5432/postgres?queue=a&max_receives=x",
     "max_receives='x'"),
    ("postgresql://postgres@127.0.0.1:5432/postgres?synchronous_commit=maybe",
     "synchronous_commit='maybe'"),
])
def test_bad_urls_are_refused_in_one_line(url, says):
    with pytest.raises(ValueError, match=re.escape(says)) as err:
        _open(url)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("scheme", ["redis", "postgresql"])
def test_an_unreachable_server_is_named(scheme):
    port = free_port()  # nothing listens there
    url = (f"redis://127.0.0.1:{port}/?queue=a" if scheme == "redis"
           else f"postgresql://postgres@127.0.0.1:{port}/postgres?queue=a")

    async def go() -> None:
        q = _open(url)
        try:
            await q.connect()
        finally:
            await q.close()

    with pytest.raises(ValueError, match=f"cannot reach .* at 127.0.0.1:{port}"):
        asyncio.run(go())


def test_visibility_timeouts_outside_sqs_range_are_refused():
    assert check_timeout_s(0) == 0 and check_timeout_s(43_200) == 43_200_000
    for bad in (-0.001, 43_200.001):
        with pytest.raises(ValueError, match="between 0 and 43200 s"):
            check_timeout_s(bad)


# -- durability of acknowledged sends across a crash of the server ---------------------------

@dataclass
class OwnRedis:
    """A single redis-server of one test, restarted with the flags the test needs."""

    port: int
    data_dir: Path
    pid: int = 0

    def start(self, *flags: str) -> None:
        """Start redis-server on the same port and data directory with ``flags``."""
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                "--dir", str(self.data_dir), "--protected-mode", "no", "--daemonize", "no",
                *flags]
        self.pid = process.start(argv, self.data_dir / "server.log", label="redis-queue")
        if not wait_listening(self.port, 20):
            raise ValueError(f"redis-server did not listen on {self.port}; see "
                             f"{self.data_dir}/server.log")
        self.wait_answering(20.0)

    def wait_answering(self, timeout_s: float) -> None:
        """Return once the server answers PING (listening is not enough: after a restart
        it may still be loading its AOF, or a half-closed socket of the killed server may
        reset the first connection)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with redis.Redis(port=self.port, socket_timeout=1.0) as r:
                    if r.ping():
                        return
            except redis.RedisError as err:  # LOADING, connection reset or refused
                if time.monotonic() > deadline:
                    raise ValueError(f"redis-server on {self.port} did not answer within "
                                     f"{timeout_s:g} s ({err}); see "
                                     f"{self.data_dir}/server.log") from None
            time.sleep(0.05)  # a poll interval, not a wait for an effect

    def crash_and_restart(self, *flags: str) -> None:
        """SIGKILL the server (as the nemesis's crash does) and start it again once the
        killed one is gone and its port free (a restart 15 ms after the kill found the old
        socket still bound on a busy machine: the new server aborted, and the old socket,
        still listening, fooled the wait)."""
        process.kill9(self.pid)
        deadline = time.monotonic() + 20.0
        while (process.alive(self.pid) or not is_free(self.port)) \
                and time.monotonic() < deadline:
            time.sleep(0.02)  # a poll interval, not a wait for an effect
        self.start(*flags)

    def stop(self) -> None:
        """Stop the server."""
        if self.pid:
            process.stop(self.pid, 2.0)
            self.pid = 0


@pytest.fixture
def own_redis(tmp_path) -> Iterator[OwnRedis]:
    """A redis-server of this test alone (milliseconds to start), stopped at its end."""
    if shutil.which("redis-server") is None:
        server_missing("redis-server", "not installed")
    r = OwnRedis(free_port(), tmp_path)
    try:
        yield r
    finally:
        r.stop()


AOF = ("--appendonly", "yes", "--appendfsync", "always", "--save", "")
NO_AOF = ("--appendonly", "no", "--save", "")


async def _send_all(url: str, bodies: list[str], purge: bool = False) -> list[str]:
    q = _open(url)
    try:
        if purge:
            await q.purge()
        c = await q.connect()
        return [await c.send(b) for b in bodies]
    finally:
        await q.close()


async def _drain_all(url: str) -> list[str]:
    """Receive and delete everything the queue holds; return the bodies in order."""
    q = _open(url)
    try:
        c = await q.connect()
        bodies: list[str] = []
        for _ in range(1000):
            got = await c.receive(10, 30.0)
            if not got:
                break
            for d in got:
                bodies.append(d.body)
                await c.delete(d.receipt)
        return bodies
    finally:
        await q.close()


@integration
def test_redis_aof_always_keeps_every_acknowledged_send(own_redis):
    own_redis.start(*AOF)
    url = f"redis://127.0.0.1:{own_redis.port}/?queue=durable"
    bodies = [f"d{i}" for i in range(50)]
    asyncio.run(_send_all(url, bodies, purge=True))
    own_redis.crash_and_restart(*AOF)
    assert asyncio.run(_drain_all(url)) == bodies
    own_redis.stop()


@integration
def test_redis_without_persistence_loses_every_send_and_the_queue_recovers(own_redis):
    own_redis.start(*NO_AOF)  # what `cluster up redis` runs
    url = f"redis://127.0.0.1:{own_redis.port}/?queue=gone"

    async def crash_and_use() -> list[str]:
        q = _open(url)
        try:
            c = await q.connect()
            for i in range(10):
                await c.send(f"g{i}")
            own_redis.crash_and_restart(*NO_AOF)
            try:
                left = await c.receive(10, 30.0)
            except QueueUnavailable:  # the connection died with the server: no retry inside
                left = await c.receive(10, 30.0)  # reopened; the stream and group are gone
            await c.send("after")  # the same session carries on
            return [d.body for d in left]
        finally:
            await q.close()

    assert asyncio.run(crash_and_use()) == []
    assert asyncio.run(_drain_all(url)) == ["after"]
    own_redis.stop()


@integration
def test_redis_without_aof_loses_sends_after_the_last_snapshot(own_redis):

    own_redis.start(*NO_AOF)
    url = f"redis://127.0.0.1:{own_redis.port}/?queue=volatile"
    before = [f"b{i}" for i in range(20)]
    after = [f"a{i}" for i in range(20)]
    asyncio.run(_send_all(url, before, purge=True))
    redis.Redis(port=own_redis.port).save()  # an RDB snapshot, as `save 60 1000` would take
    asyncio.run(_send_all(url, after))  # acknowledged, in memory only
    own_redis.crash_and_restart(*NO_AOF)
    left = asyncio.run(_drain_all(url))
    assert left == before, "only the snapshot survives the crash"
    own_redis.stop()


@pytest.fixture(scope="module")
def own_postgres():
    """(cluster, root) of a single PostgreSQL server of this module (crashed by its tests,
    so not the shared one)."""

    with running_cluster("postgres", nodes=1, name="it-queue-pg") as c:
        yield c


def _crash_postgres(cluster: tuple[Any, Path]) -> None:
    """SIGKILL the server and start it again (crash recovery replays its WAL), as the
    nemesis's crash fault does."""

    c, root = cluster
    node = c.nodes[0]
    process.kill9(node.pid)
    base.driver("postgres").start_node(c, node, root)


@integration
def test_postgres_synchronous_commit_keeps_every_acknowledged_send(own_postgres):
    url = _with(own_postgres[0].url, queue="durable", synchronous_commit="local")
    bodies = [f"d{i}" for i in range(50)]
    asyncio.run(_send_all(url, bodies, purge=True))
    _crash_postgres(own_postgres)
    assert asyncio.run(_drain_all(url)) == bodies


@integration
def test_postgres_asynchronous_commit_loses_acknowledged_sends(own_postgres):

    c, _ = own_postgres
    port = c.nodes[0].port
    # An async commit's WAL waits in shared memory for the WAL writer, and a crash of the
    # processes loses only what no process has written (a write() is in the kernel's cache
    # and survives). The WAL writer is woken whenever an async commit fills a page and may
    # then write the rest too: with a 10 s wal_writer_delay, a busy machine once let it
    # write all 50 before the crash. Stopped (SIGSTOP) for the sends, it writes none of
    # them; a backend writes WAL itself only when wal_buffers (megabytes) fill.
    with psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres",
                         autocommit=True) as conn:
        row = conn.execute("SELECT pid FROM pg_stat_activity "
                           "WHERE backend_type = 'walwriter'").fetchone()
    assert row is not None, "no WAL writer in pg_stat_activity"
    walwriter = int(row[0])
    safe = _with(c.url, queue="volatile", synchronous_commit="local")
    unsafe = _with(c.url, queue="volatile", synchronous_commit="off")
    flushed = [f"f{i}" for i in range(5)]
    quick = [f"q{i}" for i in range(50)]
    asyncio.run(_send_all(safe, flushed, purge=True))  # flushed: everything before too
    os.kill(walwriter, signal.SIGSTOP)
    try:
        asyncio.run(_send_all(unsafe, quick))  # acknowledged before their WAL is written
        _crash_postgres(own_postgres)  # SIGKILL reaches a stopped process too
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(walwriter, signal.SIGCONT)
    left = asyncio.run(_drain_all(safe))
    assert left[:5] == flushed
    kept = left[5:]
    assert kept == quick[:len(kept)], "what survives is a prefix of the sends"
    print(f"synchronous_commit=off: {len(quick) - len(kept)} of {len(quick)} "
          "acknowledged sends lost in the crash")
    assert len(kept) < len(quick), "no acknowledged send was lost without the flush"


if __name__ == "__main__":
    if len(sys.argv) == 5:  # URL VISIBILITY_S CENTRAL_URL CLAIM_DOMAIN: a central consumer
        asyncio.run(_central_consumer(sys.argv[1], sys.argv[3], sys.argv[4], 60_000,
                                      float(sys.argv[2]), 120))
    else:
        asyncio.run(_consume_one(sys.argv[1], float(sys.argv[2])))
