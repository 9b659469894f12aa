"""``etcd://`` — an etcd 3.4 cluster through its v3 JSON gateway (httpx, async), in real time.

URL: ``etcd://127.0.0.1:P?endpoints=127.0.0.1:P1,127.0.0.1:P2&node_regions=US-E,US-W,EU
&regions=dc3&read=nearest|random&timeout_ms=2000`` (what ``replicalab cluster up etcd``
prints): the host is member n0, ``endpoints`` the other members in order. Each element
``domain/item/attribute`` is the etcd key of that name (one keyspace: every key shares the
same replicas, so any set of keys can be read or written in one call).

A client talks to one member for everything, as etcd clients do: ``nearest`` = a member in
the client's region (else the member with the smallest RTT from it, else n0), ``random`` =
a member chosen at random per client. An eventual read is a *serializable* range, answered
by that member from its local state (it may be behind the leader); a consistent read is a
*linearizable* range through the same member, which first asks the leader for its commit
index and the leader confirms its leadership with a quorum (ReadIndex). Writes go to the
member, which forwards them to the leader; they return once committed by a quorum and
applied at that member. Multi-element reads are one read-only txn of several ranges (one
revision); multi-element writes one txn of puts (atomic); conditional writes one txn
comparing each expected value (``value == expected``, or ``create_revision == 0`` for
``ABSENT``); deletes one deleterange (a txn of them for several keys).
"""

from __future__ import annotations

import base64
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from replicalab.runtime import RealRuntime
from replicalab.stores.base import (
    ABSENT,
    ALL_FEATURES,
    ConditionFailed,
    ReadResult,
    StoreError,
    StoreInfo,
    Unavailable,
    Unsupported,
    WriteResult,
)
from replicalab.stores.url import Endpoint, parse_store_url

MAX_TXN_OPS = 128  # etcd's default --max-txn-ops
# gRPC codes meaning "no answer, outcome unknown": CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE
_UNKNOWN_CODES = {1, 4, 14}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode()


class EtcdStore:
    """An opened etcd cluster (its members' client endpoints)."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "endpoints", (), "etcd://127.0.0.1:2379")
        self.url = u
        self.regions = u.regions
        self.members = list(u.nodes)
        self.read_policy = u.read
        self.timeout_s = u.timeout_s
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        self.info = StoreInfo(
            url=url, kind="etcd",
            features=ALL_FEATURES,
            regions=u.region_names(),
            params={"read": self.read_policy, "timeout_ms": round(self.timeout_s * 1000),
                    "members": {m.name: f"{m.host}:{m.port} ({m.region})"
                                for m in self.members}},
            eventual_read_served_by=f"the one member each client talks to ({self.read_policy}"
                                    "), from its local state (serializable range; it may be "
                                    "behind the leader)")
        self._http: list[httpx.AsyncClient] = []

    def _member_for(self, region: str | None) -> Endpoint:
        return self.url.pick(self.members, region, self.rng)

    async def connect(self, region: str | None = None) -> EtcdClient:
        """Return a client of one member (see the module doc for which); ValueError if that
        member cannot be reached."""
        region = self.url.placed(region)
        m = self._member_for(region)
        http = httpx.AsyncClient(base_url=f"http://{m.host}:{m.port}",
                                 timeout=self.timeout_s)
        self._http.append(http)
        try:
            r = await http.post("/v3/maintenance/status", json={})
            r.raise_for_status()
        except httpx.HTTPError as err:
            raise ValueError(f"cannot reach etcd at {m.host}:{m.port} ({type(err).__name__}"
                             f"{': ' + str(err) if str(err) else ''}); is the cluster up? "
                             "(`replicalab cluster status`)") from None
        return EtcdClient(self, http, m.name)

    async def close(self) -> None:
        """Close every connection this store opened."""
        for http in self._http:
            await http.aclose()
        self._http.clear()


def _check_ops(n: int, what: str) -> None:
    if n > MAX_TXN_OPS:
        raise Unsupported(f"etcd takes at most {MAX_TXN_OPS} operations per txn "
                          f"(--max-txn-ops); this {what} has {n}")


@dataclass
class EtcdClient:
    """One client session: an HTTP/1.1 keep-alive connection pool to one member."""

    store: EtcdStore
    http: httpx.AsyncClient
    member: str

    async def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            r = await self.http.post(path, json=body)
        except httpx.TransportError as err:
            raise Unavailable(f"{self.member}: {type(err).__name__} {err}".rstrip()) from None
        try:
            data: dict[str, Any] = r.json()
        except ValueError:
            data = {}
        if r.status_code != 200 or "error" in data:
            msg = data.get("message") or data.get("error") or r.text.strip()[:200]
            code = int(data.get("code", -1))
            if code in _UNKNOWN_CODES or r.status_code in (502, 503, 504):
                raise Unavailable(f"{self.member}: {msg}")
            raise StoreError(f"{self.member}: etcd refused {path}: {msg} (HTTP "
                             f"{r.status_code})")
        return data

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys``: serializable (local) or linearizable via the leader."""
        serializable = not consistent
        if len(keys) == 1:
            data = await self._call("/v3/kv/range",
                                    {"key": _b64(keys[0]), "serializable": serializable})
            kvs = data.get("kvs", [])
            return ReadResult((_text(kvs[0].get("value", "")) if kvs else None,), self.member)
        _check_ops(len(keys), "read")
        data = await self._call("/v3/kv/txn", {"success": [
            {"request_range": {"key": _b64(k), "serializable": serializable}} for k in keys]})
        values: list[str | None] = []
        for resp in data.get("responses", []):
            kvs = resp.get("response_range", {}).get("kvs", [])
            values.append(_text(kvs[0].get("value", "")) if kvs else None)
        if len(values) != len(keys):
            raise StoreError(f"{self.member}: txn answered {len(values)} ranges for "
                             f"{len(keys)} keys")
        return ReadResult(tuple(values), self.member)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` atomically (one txn), only if ``expect`` holds when given."""
        if not expect and len(values) == 1:
            ((k, v),) = values.items()
            await self._call("/v3/kv/put", {"key": _b64(k), "value": _b64(v)})
            return WriteResult(self.member)
        compare = []
        for k, want in (expect or {}).items():
            if want is ABSENT:
                compare.append({"key": _b64(k), "target": "CREATE", "result": "EQUAL",
                                "create_revision": "0"})
            else:
                compare.append({"key": _b64(k), "target": "VALUE", "result": "EQUAL",
                                "value": _b64(want)})
        _check_ops(max(len(values), len(compare)), "write")
        data = await self._call("/v3/kv/txn", {"compare": compare, "success": [
            {"request_put": {"key": _b64(k), "value": _b64(v)}} for k, v in values.items()]})
        if not data.get("succeeded", False):
            raise ConditionFailed(f"{self.member}: condition failed")
        return WriteResult(self.member)

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` in one call (one txn for several)."""
        if len(keys) == 1:
            await self._call("/v3/kv/deleterange", {"key": _b64(keys[0])})
        else:
            _check_ops(len(keys), "delete")
            await self._call("/v3/kv/txn", {"success": [
                {"request_delete_range": {"key": _b64(k)}} for k in keys]})
        return WriteResult(self.member)

    async def close(self) -> None:
        """Connections are closed by the store."""


def open_etcd(url: str, seed: int) -> EtcdStore:
    """Return an etcd store for ``url``."""
    return EtcdStore(url, seed)

