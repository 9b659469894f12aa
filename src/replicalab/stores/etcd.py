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

Transactions (``transact``): a read phase, one linearizable txn of ranges over every key the
transaction touches (one revision), the micro-operations played out on those values, then,
if it writes, one txn guarded by the mod-revision of every key read (``mod_revision ==``
what was read, 0 for an absent key) putting the new values; a failed guard raises
TxnAborted. Read-only transactions end after the read phase (one revision: a snapshot).

A cluster with authentication: ``etcd://USER:PASSWORD@HOST:PORT`` (or ``ETCDCTL_USER=
USER:PASSWORD``, or ``ETCDCTL_USER`` + ``ETCDCTL_PASSWORD``, as for etcdctl). Each client
asks its member for a token (``/v3/auth/authenticate``) and sends it with every request;
a token the server no longer knows (it expired) is renewed once and the request sent again
(the server refused it before doing anything). TLS: ``tls=1`` (``https://``), verifying the
members against the system CAs or ``tls_ca=PATH``; ``tls_cert``/``tls_key``: a client
certificate.
"""

from __future__ import annotations

import base64
import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from replicalab.runtime import RealRuntime

# an import list: every adapter names the same parts of the Store contract (duplicates lists it)
from replicalab.stores.base import (
    ABSENT,
    ALL_FEATURES,
    ConditionFailed,
    Feature,
    MicroOp,
    ReadResult,
    StoreError,
    StoreInfo,
    TxnAborted,
    Unavailable,
    Unsupported,
    WriteResult,
    redact_url,
)
from replicalab.stores.txnops import check_ops, keys_of, play
from replicalab.stores.url import Credentials, Endpoint, parse_store_url

MAX_TXN_OPS = 128  # etcd's default --max-txn-ops
# gRPC codes meaning "no answer, outcome unknown": CANCELLED, DEADLINE_EXCEEDED, UNAVAILABLE
_UNKNOWN_CODES = {1, 4, 14}
_TOKEN_GONE = "invalid auth token"  # what etcd answers for an expired or unknown token
# etcd checks a bcrypt hash for every authenticate, about 0.1 s of CPU each and one at a time:
# ten clients logging in together on a busy machine took longer than the operations' timeout
AUTH_TIMEOUT_S = 10.0


def _env_credentials(creds: Credentials) -> Credentials:
    """Return ``creds`` with etcdctl's ``ETCDCTL_USER`` (``user`` or ``user:password``) and
    ``ETCDCTL_PASSWORD`` filling what the URL left out."""
    user, _, password = os.environ.get("ETCDCTL_USER", "").partition(":")
    return creds.with_env(user, password or os.environ.get("ETCDCTL_PASSWORD"))


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode("ascii")


def _text(b64: str) -> str:
    return base64.b64decode(b64).decode()


class EtcdStore:
    """An opened etcd cluster (its members' client endpoints)."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "endpoints", (), "etcd://127.0.0.1:2379", tls_scheme="")
        self.url = u
        self.shown_url = redact_url(url)
        self.credentials = _env_credentials(u.credentials)
        if self.credentials.user and self.credentials.password is None:
            raise ValueError(f"etcd:// URL names user {self.credentials.user!r} without a "
                             "password; use etcd://USER:PASSWORD@HOST:PORT or set "
                             "ETCDCTL_PASSWORD")
        self._verify = u.tls.context() if u.tls is not None else None
        self.regions = u.regions
        self.members = list(u.nodes)
        self.read_policy = u.read
        self.timeout_s = u.timeout_s
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        self.info = StoreInfo(
            url=self.shown_url, kind="etcd",
            features=ALL_FEATURES | {Feature.TRANSACTIONS},
            regions=u.region_names(),
            params={"read": self.read_policy, "timeout_ms": round(self.timeout_s * 1000),
                    "auth": self.credentials.user is not None, "tls": self._verify is not None,
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
        m = self.url.via(self._member_for(region), region)  # client links: the WAN
        http = self._client(m)
        client = EtcdClient(self, http, m.name)
        try:
            if self.credentials.user:
                await client.authenticate()
            r = await http.post("/v3/maintenance/status", json={})
            r.raise_for_status()
        except (httpx.HTTPError, StoreError) as err:
            raise ValueError(f"cannot reach etcd at {m.host}:{m.port} (member {m.name} of "
                             f"{self.shown_url}): {_describe(err)}") from None
        return client

    def _client(self, m: Endpoint) -> httpx.AsyncClient:
        scheme = "https" if self._verify is not None else "http"
        http = httpx.AsyncClient(base_url=f"{scheme}://{m.host}:{m.port}",
                                 timeout=self.timeout_s,
                                 verify=self._verify if self._verify is not None else True)
        self._http.append(http)
        return http

    async def remove_keys(self, keys: Sequence[str]) -> int:
        """Delete ``keys`` through member n0 (txns of at most --max-txn-ops deletes); return
        how many existed."""
        m = self.members[0]
        client = EtcdClient(self, self._client(m), m.name)
        if self.credentials.user:
            await client.authenticate()
        removed = 0
        for i in range(0, len(keys), MAX_TXN_OPS):
            data = await client._call("/v3/kv/txn", {"success": [
                {"request_delete_range": {"key": _b64(k)}} for k in keys[i:i + MAX_TXN_OPS]]})
            removed += sum(int(r.get("response_delete_range", {}).get("deleted", 0))
                           for r in data.get("responses", []))
        return removed

    async def close(self) -> None:
        """Close every connection this store opened."""
        for http in self._http:
            await http.aclose()
        self._http.clear()


def _describe(err: BaseException) -> str:
    if isinstance(err, httpx.HTTPStatusError):
        return f"HTTP {err.response.status_code} {err.response.text.strip()[:200]}"
    text = str(err)
    return f"{type(err).__name__}: {text}" if text and isinstance(err, httpx.HTTPError) else (
        text or type(err).__name__)


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
    token: str = ""

    async def authenticate(self) -> None:
        """Get a token for the store's user from this client's member (StoreError with the
        server's message when refused)."""
        creds = self.store.credentials
        self.token = ""
        data = await self._call("/v3/auth/authenticate",
                                {"name": creds.user, "password": creds.password}, renew=False,
                                timeout_s=max(self.store.timeout_s, AUTH_TIMEOUT_S))
        self.token = str(data.get("token", ""))
        if not self.token:
            raise StoreError(f"{self.member}: etcd gave no token for user {creds.user!r}")

    async def _call(self, path: str, body: dict[str, Any], renew: bool = True,
                    timeout_s: float | None = None) -> dict[str, Any]:
        headers = {"Authorization": self.token} if self.token else None
        try:
            r = await self.http.post(path, json=body, headers=headers,
                                     timeout=httpx.USE_CLIENT_DEFAULT if timeout_s is None
                                     else timeout_s)
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
            if renew and self.token and _TOKEN_GONE in str(msg):
                await self.authenticate()
                return await self._call(path, body, renew=False)
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

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run ``ops`` as one transaction: read every key at one revision, play the ops out,
        commit the writes in one txn guarded by the mod-revisions read (``gap_ns`` per
        micro-operation between the two); return the ops with reads filled. TxnAborted when
        the guard fails."""
        check_ops(ops)
        keys = keys_of(ops)
        _check_ops(len(keys), "transaction")
        data = await self._call("/v3/kv/txn", {"success": [
            {"request_range": {"key": _b64(k)}} for k in keys]})
        resps = data.get("responses", [])
        if len(resps) != len(keys):
            raise StoreError(f"{self.member}: txn answered {len(resps)} ranges for "
                             f"{len(keys)} keys")
        stored: dict[str, str | None] = {}
        revs: dict[str, str] = {}
        for k, resp in zip(keys, resps, strict=True):
            kvs = resp.get("response_range", {}).get("kvs", [])
            stored[k] = _text(kvs[0].get("value", "")) if kvs else None
            revs[k] = str(kvs[0].get("mod_revision", "0")) if kvs else "0"
        played = play(ops, stored)
        if gap_ns and len(ops) > 1:
            await self.store.runtime.sleep_ns(gap_ns * (len(ops) - 1))
        if not played.writes:
            return played.ops
        compare = [{"key": _b64(k), "target": "MOD", "result": "EQUAL", "mod_revision": r}
                   for k, r in revs.items()]
        data = await self._call("/v3/kv/txn", {"compare": compare, "success": [
            {"request_put": {"key": _b64(k), "value": _b64(v)}}
            for k, v in played.writes.items()]})
        if not data.get("succeeded", False):
            raise TxnAborted(f"{self.member}: a key read changed before the commit")
        return played.ops

    async def close(self) -> None:
        """Connections are closed by the store."""


def open_etcd(url: str, seed: int) -> EtcdStore:
    """Return an etcd store for ``url``."""
    return EtcdStore(url, seed)

