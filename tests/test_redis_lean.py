"""The ``redis://`` adapter on the lean RESP client (issue 14, item 6): every operation against
a real Redis, wire stamps that narrow a probe's op interval, and the failure paths (a server
that never answers, one that hangs up, an error reply) as unknown or failed outcomes."""

from __future__ import annotations

import asyncio
import contextlib
import socket

import pytest

from replicalab.history import History
from replicalab.runtime import RealRuntime
from replicalab.stores import ABSENT, ConditionFailed, Unavailable, open_store
from replicalab.stores.resp import RespConnection, RespError
from replicalab.workloads.recorder import Recorder

pytestmark = pytest.mark.integration

KEY = "lean/item/a"


def run(coro):
    return RealRuntime().run(coro)


def test_every_operation_on_a_real_cluster(redis_dc3):
    c, _ = redis_dc3

    async def go() -> None:
        store = open_store(c.url + "&wait=2&wait_ms=500", 1)
        client = await store.connect("US-W")
        try:
            await client.write({KEY: "v1"})  # WAIT 2: both replicas have it when acked
            assert (await client.read([KEY], consistent=True)).values == ("v1",)
            assert (await client.read([KEY], consistent=False)).values == ("v1",)
            await client.write({"lean/item/b": "x", "lean/item/c": "y"})  # MSET
            got = await client.read(["lean/item/b", "lean/item/c", "lean/item/none"],
                                    consistent=True)
            assert got.values == ("x", "y", None)
            await client.write({KEY: "v2"}, expect={KEY: "v1"})  # EVAL: compare and set
            with pytest.raises(ConditionFailed):
                await client.write({KEY: "v3"}, expect={KEY: "v1"})
            with pytest.raises(ConditionFailed):
                await client.write({KEY: "v3"}, expect={KEY: ABSENT})
            await client.write({"lean/item/new": "n"}, expect={"lean/item/new": ABSENT})
            await client.delete([KEY, "lean/item/new"])
            assert (await client.read([KEY], consistent=True)).values == (None,)
            res = await client.read([KEY], consistent=True)
            assert res.node == "n0" and 0 < res.sent_ns < res.received_ns
        finally:
            await store.close()

    run(go())


def test_wire_stamps_narrow_the_recorded_interval(redis_dc3):
    c, _ = redis_dc3
    store = open_store(c.url, 1)
    h = History()
    stamps = []

    async def go() -> None:
        client = await store.connect()
        rec = Recorder(h, store.runtime)
        try:
            for _ in range(200):
                before = store.runtime.now_ns()
                res = await rec.read(client, 0, (KEY,), True)
                stamps.append((before, res.sent_ns, res.received_ns, store.runtime.now_ns()))
        finally:
            await store.close()

    run(go())
    inv, comp = h.column("invoke_ns"), h.column("complete_ns")
    for i, (before, sent, received, after) in enumerate(stamps):
        # the history holds the wire interval, inside what the caller saw
        assert before <= inv[i] == sent < received == comp[i] <= after


@contextlib.asynccontextmanager
async def _server(behaviour: str):
    """A TCP server on 127.0.0.1 that swallows requests ("silent") or answers each with a
    RESP error and then hangs up ("hangup")."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read(1024)
        if behaviour == "hangup" and data:
            writer.write(b"-ERR no\r\n")
            await writer.drain()
            writer.close()
            return
        await reader.read()  # silent: never answer

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


def test_no_answer_times_out_and_the_connection_is_replaced():
    async def go() -> None:
        async with _server("silent") as port:
            conn = RespConnection("127.0.0.1", port, timeout_s=0.2)
            with pytest.raises(TimeoutError, match="no reply within 200 ms"):
                await conn.call("GET", "k")
            first = conn._proto
            assert first is not None and first.dead  # a late reply cannot be misread
            with pytest.raises(TimeoutError):
                await conn.call("GET", "k")
            assert conn._proto is not first  # the next call opened a new connection
            conn.close()

    run(go())


def test_an_error_reply_fails_and_a_hangup_is_unavailable():
    async def go() -> None:
        async with _server("hangup") as port:
            conn = RespConnection("127.0.0.1", port, timeout_s=1.0)
            reply, sent, received = await conn.call("GET", "k")
            assert isinstance(reply, RespError) and "no" in str(reply) and sent < received
            for _ in range(50):  # the server closed the connection after answering
                if conn._proto is None or conn._proto.dead:
                    break
                await asyncio.sleep(0.01)
            assert conn._proto is not None and conn._proto.dead
            conn.close()
        with socket.socket() as s:  # nothing listens on this port any more
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(Unavailable, match="cannot connect"):
            await RespConnection("127.0.0.1", port, timeout_s=1.0).call("PING")

    run(go())


def test_adapter_maps_failures_to_unknown_and_failed_outcomes():
    async def go() -> None:
        async with _server("silent") as port:
            store = open_store(f"redis://127.0.0.1:{port}?timeout_ms=200", 1)
            with pytest.raises(ValueError, match="cannot reach Redis"):
                await store.connect()
            await store.close()
        async with _server("hangup") as port:
            store = open_store(f"redis://127.0.0.1:{port}?timeout_ms=500", 1)
            with pytest.raises(ValueError, match="cannot reach Redis"):
                await store.connect()  # PING answered with an error
            await store.close()

    run(go())
    h = History()

    async def partitioned() -> None:
        async with _server("silent") as port:
            from replicalab.stores.redis import RedisClient, RedisStore
            store = RedisStore(f"redis://127.0.0.1:{port}?timeout_ms=200", 1)
            conn = store._conn(store.nodes[0])
            client = RedisClient(store, conn, "n0", conn, "n0")
            rec = Recorder(h, store.runtime)
            assert await rec.read(client, 0, (KEY,), True) is None
            assert await rec.write(client, 0, {KEY: "v"}) is False
            await store.close()

    run(partitioned())
    assert list(h.column("type")) == [3, 3]  # info: the outcome is unknown
    assert all("no reply within 200 ms" in e for e in h.error)
