"""``zk://`` — ZooKeeper (kazoo, threaded, bridged to asyncio), in real time.

URL: ``zk://127.0.0.1:P?servers=127.0.0.1:P1,127.0.0.1:P2&node_regions=US-E,US-W,EU
&regions=dc3&read=nearest|random&timeout_ms=2000`` (what ``replicalab cluster up zookeeper``
prints; the host:port before ``?`` is server n0, ``servers`` lists n1, n2, ...).

Mapping: element ``domain/item/attribute`` = znode ``/replicalab/domain/item/attribute``
holding the value as UTF-8; the parents are plain empty znodes created on first write.

A store replicalab did not start: ``zk://USER:PASSWORD@HOST:PORT/CHROOT`` adds the digest
credentials to every session (``addauth digest USER:PASSWORD``; or the environment's
``REPLICALAB_ZK_DIGEST=USER:PASSWORD``) and roots every path at ``/CHROOT``; ``tls=1`` with
``tls_ca``/``tls_cert``/``tls_key`` connects over TLS (ZooKeeper's secure client port).
``remove_keys`` deletes elements and then the parent znodes left empty, up to
``/replicalab``.

Which server answers: a client session is connected to ONE server, chosen at ``connect``:
``nearest`` = a server in the client's region (else the one with the lowest RTT from it, else
n0), ``random`` = one at random per client. Every call goes to that server. A plain
(eventual) read is answered from that server's copy, which may be behind the leader (a write
is visible there once the leader's COMMIT has reached it). A consistent read sends ``sync`` to
the leader through that server first and then reads: the server has then applied everything
the leader had committed when the sync reached it. Writes are forwarded by the server to the
leader and acknowledged once committed by a quorum and applied on the client's server.

Writes of several elements are one ``multi`` transaction (atomic). A conditional write first
syncs and reads the expected elements with their versions, then commits one transaction whose
``check``/``set_data(version=...)``/``create`` ops make the compare and the set atomic at the
leader ("must not exist" = ``create``, or ``create`` + ``delete`` when the element is not also
written). A multi-element read is several reads pipelined on one session: NOT a snapshot (a
commit may be applied between two of them).

Transactions (``transact``): ``sync``, read every key the transaction touches with its
version, play the micro-operations out on those values, then commit one ``multi`` holding,
for every key touched, a guard on the version read: ``set_data(version)`` for a key it
writes, ``check(version)`` for a key it only reads, ``create`` for an absent key it writes,
``create`` + ``delete`` for an absent key it only reads. Read-only transactions commit their
checks too (the reads alone are no snapshot). Any guard failing raises TxnAborted: the
leader applied none of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    OperationTimeoutError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
    SessionMovedError,
    ZookeeperStoppedError,
)
from kazoo.handlers.threading import KazooTimeoutError

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
    WriteResult,
    parse_element,
    redact_url,
)
from replicalab.stores.txnops import check_ops, keys_of, play
from replicalab.stores.url import Endpoint, parse_store_url

ROOT = "/replicalab"
_RETRIES = 5  # races with other writers on elements the caller did not put conditions on

_UNKNOWN = (ConnectionLoss, OperationTimeoutError, SessionExpiredError, SessionMovedError,
            ConnectionClosedError, ZookeeperStoppedError, KazooTimeoutError)

# kazoo logs every dropped connection; the errors reach the caller as Unavailable instead
_KAZOO_LOG = logging.getLogger("replicalab.stores.zookeeper.kazoo")
_KAZOO_LOG.setLevel(logging.ERROR)


def znode(key: str) -> str:
    """Return the znode path of element ``domain/item/attribute``."""
    e = parse_element(key)
    return f"{ROOT}/{e.domain}/{e.item}/{e.attribute}"


class ZkStore:
    """An opened ZooKeeper ensemble."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "servers", ("session_ms",), "zk://127.0.0.1:2181",
                            tls_scheme="")
        self.url = u
        self.shown_url = redact_url(url)
        user, _, password = os.environ.get("REPLICALAB_ZK_DIGEST", "").partition(":")
        creds = u.credentials.with_env(user, password)
        if creds.user and creds.password is None:
            raise ValueError(f"zk:// URL names user {creds.user!r} without a password; use "
                             "zk://USER:PASSWORD@HOST:PORT or set REPLICALAB_ZK_DIGEST")
        self._auth = ([("digest", f"{creds.user}:{creds.password}")] if creds.user else [])
        self.chroot = f"/{creds.database.strip('/')}" if creds.database else ""
        self._tls = ({"use_ssl": True, "ca": u.tls.ca, "certfile": u.tls.cert,
                      "keyfile": u.tls.key, "verify_certs": True} if u.tls is not None else {})
        self.regions = u.regions
        self.nodes = list(u.nodes)
        self.read_policy = u.read
        self.timeout_s = u.timeout_s
        self.session_s = u.number("session_ms", 10_000.0) / 1000
        if not self.session_s > 0:
            raise ValueError("zk:// session_ms must be positive")
        self.rng = random.Random(seed)
        self.runtime = RealRuntime()
        self.info = StoreInfo(
            url=self.shown_url, kind="zookeeper",
            features=ALL_FEATURES | {Feature.TRANSACTIONS},
            regions=u.region_names(),
            params={"read": self.read_policy, "timeout_ms": round(self.timeout_s * 1000),
                    "session_ms": round(self.session_s * 1000),
                    "auth": bool(self._auth), "chroot": self.chroot, "tls": bool(self._tls),
                    "nodes": {n.name: f"{n.host}:{n.port} ({n.region})" for n in self.nodes},
                    "consistent_read": "sync() through the client's server, then read",
                    "multi_read_snapshot": False,
                    "multi_write": "one multi transaction (atomic)",
                    "conditional_write": "sync + read versions, then one multi transaction "
                                         "with version checks (atomic compare-and-set)"},
            eventual_read_served_by=f"the one server the client's session is connected to "
                                    f"({self.read_policy}); it may be behind the leader")
        self._clients: list[ZkClient] = []
        self._parents: set[str] = set()

    def server_for(self, region: str | None) -> Endpoint:
        """Return the server a client in ``region`` connects to."""
        return self.url.pick(self.nodes, region, self.rng)

    async def connect(self, region: str | None = None) -> ZkClient:
        """Return a client session connected to one server (see the module doc)."""
        region = self.url.placed(region)
        node = self.url.via(self.server_for(region), region)  # client links: the WAN
        kz = self._kazoo(node)
        try:
            await asyncio.to_thread(kz.start, max(self.timeout_s, 1.0))
        except (KazooException, KazooTimeoutError, OSError) as err:
            await asyncio.to_thread(_shutdown, kz)
            raise ValueError(f"cannot reach ZooKeeper at {node.host}:{node.port} (server "
                             f"{node.name} of {self.shown_url}): {type(err).__name__}"
                             f"{': ' + str(err) if str(err) else ''}") from None
        client = ZkClient(self, kz, node.name)
        self._clients.append(client)
        return client

    def _kazoo(self, node: Endpoint) -> KazooClient:
        return KazooClient(hosts=f"{node.host}:{node.port}{self.chroot}",
                           timeout=self.session_s, randomize_hosts=False, command_retry=None,
                           logger=_KAZOO_LOG, auth_data=self._auth or None,
                           connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 1.5,
                                             "max_delay": 1.0}, **self._tls)

    async def remove_keys(self, keys: Sequence[str]) -> int:
        """Delete the znodes of ``keys``, then every parent left with no data and no
        children, deepest first, up to and including ``/replicalab``; return how many
        elements existed. The deletes of one level go out together (one round trip)."""
        client = await self.connect()
        kz = client.kz

        async def drop(path: str, only_if_empty: bool) -> int:
            try:
                if only_if_empty:
                    data, stat = await client._call(kz.get_async, path)
                    if data or stat.numChildren:
                        return 0
                    await client._call(kz.delete_async, path, stat.version)
                else:
                    await client._call(kz.delete_async, path)
            except (NoNodeError, NotEmptyError, BadVersionError):
                return 0
            return 1

        paths = list(dict.fromkeys(znode(k) for k in keys))
        removed = sum(await asyncio.gather(*(drop(p, False) for p in paths)))
        parents: set[str] = set()
        for path in paths:
            parent = path.rsplit("/", 1)[0]
            while parent and parent != "/":
                parents.add(parent)
                parent = parent.rsplit("/", 1)[0]
        for depth in sorted({p.count("/") for p in parents}, reverse=True):
            await asyncio.gather(*(drop(p, True) for p in parents if p.count("/") == depth))
        self._parents.clear()
        return removed

    async def close(self) -> None:
        """Close every session this store opened."""
        clients, self._clients = self._clients, []
        await asyncio.gather(*(asyncio.to_thread(_shutdown, c.kz) for c in clients))


def _shutdown(kz: KazooClient) -> None:
    try:
        kz.stop()
    finally:
        kz.close()


@dataclass(frozen=True)
class _Op:
    """One op of a transaction and what its failure means."""

    kind: str  # create | set | check | delete
    key: str
    path: str
    data: bytes = b""
    version: int = -1
    conditional: bool = False  # part of the caller's condition: failure = ConditionFailed


@dataclass
class ZkClient:
    """One ZooKeeper session, connected to one server."""

    store: ZkStore
    kz: KazooClient
    name: str

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run kazoo's ``fn`` (an ``*_async`` method) without blocking the event loop."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()

        def settle(ok: bool, value: Any) -> None:
            if fut.done():
                return
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(value)

        def done(result: Any) -> None:  # runs on kazoo's callback thread
            ok = result.successful()
            value = result.value if ok else result.exception
            with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits
                loop.call_soon_threadsafe(settle, ok, value)

        try:
            fn(*args, **kwargs).rawlink(done)
            return await asyncio.wait_for(fut, self.store.timeout_s)
        except TimeoutError:
            raise Unavailable(f"{self.name}: no answer within "
                              f"{self.store.timeout_s * 1000:.0f} ms") from None
        except _UNKNOWN as err:
            raise Unavailable(f"{self.name}: {type(err).__name__} {err}".rstrip()) from None

    async def _get(self, path: str) -> tuple[str | None, int]:
        """Return (value, version) of ``path``; (None, -1) if it does not exist."""
        try:
            data, stat = await self._call(self.kz.get_async, path)
        except NoNodeError:
            return None, -1
        return data.decode(), stat.version

    async def _sync(self, path: str) -> None:
        await self._call(self.kz.sync_async, path)

    async def sync(self, key: str | None = None) -> None:
        """Make this session's server catch up with the leader (ZooKeeper ``sync``)."""
        await self._sync(znode(key) if key else ROOT)

    async def _parents(self, paths: Sequence[str]) -> None:
        """Create the item znodes (parents) of ``paths`` that this store has not seen."""
        for parent in dict.fromkeys(p.rsplit("/", 1)[0] for p in paths):
            if parent not in self.store._parents:
                await self._call(self.kz.ensure_path_async, parent)
                self.store._parents.add(parent)

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` from this session's server (after ``sync`` if
        ``consistent``); several keys are several reads, not a snapshot."""
        paths = [znode(k) for k in keys]
        try:
            if consistent:
                await self._sync(paths[0])
            got = await asyncio.gather(*(self._get(p) for p in paths))
        except KazooException as err:
            raise StoreError(f"{self.name}: {type(err).__name__} {err}".rstrip()) from None
        return ReadResult(tuple(v for v, _ in got), self.name)

    async def _commit(self, spec: list[_Op]) -> list[Any]:
        """Commit ``spec`` as one multi transaction; return kazoo's per-op results."""
        txn = self.kz.transaction()
        for op in spec:
            if op.kind == "create":
                txn.create(op.path, op.data)
            elif op.kind == "set":
                txn.set_data(op.path, op.data, op.version)
            elif op.kind == "check":
                txn.check(op.path, op.version)
            else:
                txn.delete(op.path, op.version)
        return list(await self._call(txn.commit_async))

    @staticmethod
    def _failure(ops: list[_Op], results: list[Any]) -> tuple[_Op, Exception] | None:
        """Return the op that made a transaction fail and its error (None if it succeeded)."""
        for op, res in zip(ops, results, strict=False):
            if isinstance(res, Exception) and not isinstance(
                    res, RolledBackError | RuntimeInconsistency):
                return op, res
        if any(isinstance(r, Exception) for r in results):
            return ops[0], RuntimeInconsistency()
        return None

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` in one transaction (compare-and-set if ``expect``)."""
        paths = {k: znode(k) for k in (*values, *(expect or {}))}
        try:
            if expect:
                await self._cas(values, expect, paths)
            elif len(values) == 1:
                ((k, v),) = values.items()
                await self._put_one(paths[k], v.encode())
            else:
                await self._put_many(values, paths)
        except KazooException as err:
            raise StoreError(f"{self.name}: {type(err).__name__} {err}".rstrip()) from None
        return WriteResult(self.name)

    async def _put_one(self, path: str, data: bytes) -> None:
        for _ in range(_RETRIES):
            try:
                await self._call(self.kz.set_async, path, data)
                return
            except NoNodeError:
                pass
            await self._parents([path])
            try:
                await self._call(self.kz.create_async, path, data)
                return
            except NodeExistsError:
                continue
        raise StoreError(f"{self.name}: {path} kept appearing and disappearing; gave up "
                         f"after {_RETRIES} tries")

    async def _put_many(self, values: Mapping[str, str], paths: Mapping[str, str]) -> None:
        missing: set[str] = set()
        for _ in range(_RETRIES):
            if missing:
                await self._parents([paths[k] for k in missing])

            ops = [_Op("create" if k in missing else "set", k, paths[k], v.encode())
                   for k, v in values.items()]
            results = await self._commit(ops)
            bad = self._failure(ops, results)
            if bad is None:
                return
            op, err = bad
            if isinstance(err, NoNodeError):
                missing.add(op.key)
            elif isinstance(err, NodeExistsError):
                missing.discard(op.key)
            else:
                raise StoreError(f"{self.name}: transaction failed at {op.key}: "
                                 f"{type(err).__name__}")
        raise StoreError(f"{self.name}: elements kept changing existence; gave up after "
                         f"{_RETRIES} tries")

    async def _cas(self, values: Mapping[str, str], expect: Mapping[str, Any],
                   paths: Mapping[str, str]) -> None:
        for _ in range(_RETRIES):
            # sync first so the versions read below are the leader's, not a stale copy's
            await self._sync(next(iter(paths.values())))
            keys = list(paths)
            got = dict(zip(keys, await asyncio.gather(*(self._get(paths[k]) for k in keys)),
                           strict=True))
            for k, want in expect.items():
                have, _ = got[k]
                if (want is ABSENT and have is not None) or (
                        want is not ABSENT and have != want):
                    raise ConditionFailed(f"{self.name}: {k} is {have!r}, expected {want!r}")
            creates = [paths[k] for k in keys
                       if got[k][0] is None and (k in values or expect.get(k) is ABSENT)]
            await self._parents(creates)

            ops = []
            for k, want in expect.items():
                if k in values:
                    continue
                if want is ABSENT:  # assert absence atomically: create and delete it
                    ops += [_Op("create", k, paths[k], conditional=True),
                            _Op("delete", k, paths[k], conditional=True)]
                else:
                    ops.append(_Op("check", k, paths[k], version=got[k][1], conditional=True))
            for k, v in values.items():
                data = v.encode()
                if k in expect:
                    kind = "create" if expect[k] is ABSENT else "set"
                    ops.append(_Op(kind, k, paths[k], data, got[k][1], conditional=True))
                else:
                    ops.append(_Op("create" if got[k][0] is None else "set", k, paths[k],
                                   data))
            results = await self._commit(ops)
            bad = self._failure(ops, results)
            if bad is None:
                return
            op, err = bad
            if op.conditional and isinstance(err, BadVersionError | NoNodeError
                                             | NodeExistsError):
                raise ConditionFailed(f"{self.name}: {op.key} changed before the "
                                      f"compare-and-set ({type(err).__name__})")
            if not isinstance(err, NoNodeError | NodeExistsError):
                raise StoreError(f"{self.name}: transaction failed at {op.key}: "
                                 f"{type(err).__name__}")
        raise StoreError(f"{self.name}: unconditioned elements kept changing existence; "
                         f"gave up after {_RETRIES} tries")

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run ``ops`` as one transaction: sync, read every key with its version, play the
        ops out, commit one multi guarded by every version read (``gap_ns`` per
        micro-operation between the two); return the ops with reads filled. TxnAborted when
        a guard fails."""
        check_ops(ops)
        keys = keys_of(ops)
        paths = {k: znode(k) for k in keys}
        try:
            await self._sync(paths[keys[0]])
            got = dict(zip(keys, await asyncio.gather(*(self._get(paths[k]) for k in keys)),
                           strict=True))
            played = play(ops, {k: v for k, (v, _) in got.items()})
            if gap_ns and len(ops) > 1:
                await self.store.runtime.sleep_ns(gap_ns * (len(ops) - 1))
            # an absent key is guarded by creating it (and deleting it again if only read)
            await self._parents([paths[k] for k in keys if got[k][0] is None])
            spec: list[_Op] = []
            for k in keys:
                value, version = got[k]
                if k in played.writes:
                    data = played.writes[k].encode()
                    spec.append(_Op("create", k, paths[k], data, conditional=True)
                                if value is None else
                                _Op("set", k, paths[k], data, version, conditional=True))
                elif value is None:  # still absent: create and delete it in the same multi
                    spec += [_Op("create", k, paths[k], conditional=True),
                             _Op("delete", k, paths[k], conditional=True)]
                else:
                    spec.append(_Op("check", k, paths[k], version=version, conditional=True))
            results = await self._commit(spec)
        except KazooException as err:
            raise StoreError(f"{self.name}: {type(err).__name__} {err}".rstrip()) from None
        bad = self._failure(spec, results)
        if bad is not None:
            op, err = bad
            if isinstance(err, BadVersionError | NoNodeError | NodeExistsError):
                raise TxnAborted(f"{self.name}: {op.key} changed before the commit "
                                 f"({type(err).__name__})")
            raise StoreError(f"{self.name}: transaction failed at {op.key}: "
                             f"{type(err).__name__}")
        return played.ops

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` in one transaction (elements already absent are skipped)."""
        left = list(dict.fromkeys(keys))
        paths = {k: znode(k) for k in left}
        try:
            for _ in range(len(left) + 1):
                if not left:
                    break

                ops = [_Op("delete", k, paths[k]) for k in left]
                results = await self._commit(ops)
                bad = self._failure(ops, results)
                if bad is None:
                    break
                op, err = bad
                if not isinstance(err, NoNodeError):
                    raise StoreError(f"{self.name}: delete failed at {op.key}: "
                                     f"{type(err).__name__}")
                left.remove(op.key)
        except KazooException as err:
            raise StoreError(f"{self.name}: {type(err).__name__} {err}".rstrip()) from None
        return WriteResult(self.name)

    async def close(self) -> None:
        """Sessions are closed by the store."""


def open_zk(url: str, seed: int) -> ZkStore:
    """Return a ZooKeeper store for ``url``."""
    return ZkStore(url, seed)
