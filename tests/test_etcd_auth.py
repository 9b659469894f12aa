"""etcd logins get their own time limit: etcd checks a bcrypt hash for every authenticate
(about 0.1 s of CPU, one at a time), so ten clients logging in together on a busy machine took
longer than the URL's operation timeout and the run stopped before its first operation."""

from __future__ import annotations

import asyncio
import json

import httpx

from replicalab.stores.etcd import AUTH_TIMEOUT_S, EtcdClient, EtcdStore


def test_login_waits_for_the_auth_limit_operations_for_the_urls_timeout():
    seen: dict[str, float] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        seen[request.url.path] = request.extensions["timeout"]["read"]
        if request.url.path == "/v3/auth/authenticate":
            assert json.loads(request.content) == {"name": "prober", "password": "pw"}
            return httpx.Response(200, json={"token": "t0"})
        assert request.headers["Authorization"] == "t0"
        return httpx.Response(200, json={"kvs": []})

    async def run() -> None:
        store = EtcdStore("etcd://prober:pw@127.0.0.1:2379?timeout_ms=50", 1)
        async with httpx.AsyncClient(base_url="http://127.0.0.1:2379", timeout=store.timeout_s,
                                     transport=httpx.MockTransport(answer)) as http:
            client = EtcdClient(store, http, "n0")
            await client.authenticate()
            await client._call("/v3/kv/range", {"key": "eA=="})

    asyncio.run(run())
    assert seen == {"/v3/auth/authenticate": AUTH_TIMEOUT_S, "/v3/kv/range": 0.05}
