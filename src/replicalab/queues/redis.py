"""``redis://`` — a visibility-timeout queue on a Redis Streams consumer group.

URL: ``redis://127.0.0.1:P/?queue=NAME&max_receives=10&timeout_ms=2000`` (the URL
``replicalab cluster up redis`` prints is accepted as is, plus these parameters; every
command goes to the primary, the node before ``?``).

Keys (the ``{NAME}`` hash tag keeps one queue in one slot): the stream ``rq:{NAME}:s``
with the consumer group ``replicalab``, the hash ``rq:{NAME}:r`` of message id -> receipt
of its current delivery, the dead-letter stream ``rq:{NAME}:dlq`` and ``rq:{NAME}:cursor``,
where the last receive's scan of the pending list stopped.

How the contract maps onto Streams:

* ``send`` = ``XADD``; the message id is the entry id. The send is acknowledged when XADD
  answers, so it survives a crash of the server only with ``appendonly yes`` (and a power
  loss only with ``appendfsync always``); see docs/queues.md.
* ``receive`` = one Lua script (atomic: no other command runs in between, so two receivers
  never get the same message while its lease holds): first ``XAUTOCLAIM`` of pending
  entries whose lease ran out, then ``XREADGROUP ... >`` of new entries for the rest.
* **Per-delivery visibility in the pending list.** XAUTOCLAIM takes one ``min-idle-time``
  for all entries, but every delivery has its own timeout. The pending list already holds,
  per entry, the time of its last delivery; the script sets it with ``XCLAIM ... IDLE
  (H - T) JUSTID`` so that the entry's idle time reaches the horizon ``H`` (12 h, SQS's
  maximum visibility timeout) exactly when its lease of ``T`` ms ends. ``XAUTOCLAIM ... H``
  then returns exactly the entries whose lease has ended, and ``change_visibility`` is the
  same XCLAIM with a new ``T`` (``T = 0``: idle = H, claimable at once). JUSTID leaves the
  delivery counter alone; XAUTOCLAIM (without JUSTID) increments it, so the pending list's
  delivery counter *is* ``receive_count``. All times are the Redis server's clock (the
  idle times of the pending list), one clock for every client process.
* **Receipts.** ``<id>/<receive_count>/<nonce>``, stored in the receipt hash when the
  delivery is made. ``delete`` (``XACK`` + ``XDEL``) and ``change_visibility`` are Lua
  scripts that act only when the stored receipt is the one given, else StaleReceipt and
  nothing changes. A receipt stays valid until the next delivery of its message (as SQS).
* **Dead letters.** A pending entry claimed for the ``max_receives + 1``-th time is moved
  (``XADD`` to the dead-letter stream, ``XACK`` + ``XDEL``) instead of being delivered.

Client: the project's RESP client (:class:`replicalab.stores.resp.RespConnection`), one
connection per client session. Chosen over redis-py's asyncio client because every
operation here is one ``EVALSHA`` whose reply is a plain array: the lean client sends it
and parses the reply with hiredis without a connection pool, returns Redis error replies
as values (so a ``NOSCRIPT`` after a server restart is one ``if``), and is the client the
``redis://`` store adapter already uses, with the same failure behaviour (a lost
connection is reopened by the next call; no retries).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import secrets
from typing import Any, Generic, Protocol, TypeVar

from replicalab.queues.base import (
    DeadLetter,
    Delivery,
    QueueError,
    QueueInfo,
    QueueUnavailable,
    StaleReceipt,
)
from replicalab.runtime import RealRuntime
from replicalab.stores.base import StoreError, redact_url
from replicalab.stores.resp import RespConnection, RespError
from replicalab.stores.url import parse_store_url

GROUP = "replicalab"
HORIZON_MS = 12 * 3600 * 1000
"""Longest visibility timeout (SQS's 12 h) and the idle time at which a lease ends (ms)."""
DEFAULT_MAX_RECEIVES = 10
QUEUE_PARAMS = ("queue", "max_receives")

# KEYS: stream, receipts, dead letters, scan cursor. ARGV: group, consumer, n, visibility
# ms, max_receives, horizon ms, then n nonces. Returns {id, body, receipt, receive_count}...
# The scan of the pending list resumes where the previous receive left it (the cursor key),
# so an expired entry deep in a long pending list is reached within a few receives.
_RECEIVE = """
local s, r, dlq, cur = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local g, c = ARGV[1], ARGV[2]
local n, vis, maxr, horizon = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]),
  tonumber(ARGV[6])
local out, nonce = {}, 7
local function deliver(id, body, count)
  local receipt = id .. '/' .. count .. '/' .. ARGV[nonce]
  nonce = nonce + 1
  redis.call('XCLAIM', s, g, c, 0, id, 'IDLE', horizon - vis, 'JUSTID')
  redis.call('HSET', r, id, receipt)
  out[#out + 1] = {id, body, receipt, count}
end
local cursor, rounds = redis.call('GET', cur) or '0-0', 0
repeat
  local got = redis.call('XAUTOCLAIM', s, g, c, horizon, cursor, 'COUNT', n - #out)
  cursor = got[1]
  for _, e in ipairs(got[2]) do
    local id, body = e[1], e[2][2]
    local count = redis.call('XPENDING', s, g, id, id, 1)[1][4]
    if count > maxr then
      redis.call('XADD', dlq, '*', 'id', id, 'b', body, 'n', count - 1)
      redis.call('XACK', s, g, id)
      redis.call('XDEL', s, id)
      redis.call('HDEL', r, id)
    else
      deliver(id, body, count)
    end
  end
  -- pending entries whose stream entry is gone (trimmed by hand): forget their receipts
  for _, id in ipairs(got[3] or {}) do redis.call('HDEL', r, id) end
  rounds = rounds + 1
until cursor == '0-0' or #out >= n or rounds >= 16
redis.call('SET', cur, cursor)
if #out < n then
  local got = redis.call('XREADGROUP', 'GROUP', g, c, 'COUNT', n - #out, 'STREAMS', s, '>')
  if got then
    for _, e in ipairs(got[1][2]) do deliver(e[1], e[2][2], 1) end
  end
end
return out
"""

# KEYS: stream, receipts. ARGV: group, id, receipt. Returns 1 if deleted, 0 if stale.
_DELETE = """
if redis.call('HGET', KEYS[2], ARGV[2]) ~= ARGV[3] then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[2])
return 1
"""

# KEYS: stream, receipts. ARGV: group, consumer, id, receipt, idle ms. 1 = done, 0 = stale.
_CHANGE = """
if redis.call('HGET', KEYS[2], ARGV[3]) ~= ARGV[4] then return 0 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[3], 'IDLE', ARGV[5], 'JUSTID')
return 1
"""

# KEYS: stream. ARGV: group, horizon ms. Returns {visible, in flight}.
_DEPTH = """
local len = redis.call('XLEN', KEYS[1])
local pending = redis.call('XPENDING', KEYS[1], ARGV[1])[1]
local expired = #redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', ARGV[2], '-', '+', 100000)
return {len - pending + expired, pending - expired}
"""


def _sha(script: str) -> str:
    return hashlib.sha1(script.encode()).hexdigest()


def reason(err: BaseException, where: str) -> str:
    """Return the first line of ``err`` without the ``where`` (host:port) it may repeat."""
    text = (str(err).strip().splitlines() or [type(err).__name__])[0]
    return text.rsplit(f"{where}: ", 1)[-1]


def unreachable(server: str, host: str, port: int, err: BaseException) -> ValueError:
    """Return the one-line error for a queue whose ``server`` (Redis, PostgreSQL) at
    ``host:port`` did not answer, with the reason and where to look."""
    where = f"{host}:{port}"
    return ValueError(f"cannot reach {server} at {where} ({reason(err, where)}); is the "
                      "cluster up? (`replicalab cluster status`)")


class _Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


class ClientSessions(Generic[C]):
    """What a server-backed queue (Redis, PostgreSQL) keeps of the sessions it opened: all
    of them (closed together) and one kept for its own calls (dead letters, depth, purge)."""

    _clients: list[C]
    _admin: C | None

    async def connect(self) -> C:
        """Return a new client session."""
        raise NotImplementedError

    async def _admin_client(self) -> C:
        if self._admin is None:
            self._admin = await self.connect()
        return self._admin

    async def close(self) -> None:
        """Close every connection this queue opened (the data stays on the server)."""
        for c in self._clients:
            await c.close()
        self._clients.clear()
        self._admin = None


def check_timeout_s(timeout_s: float) -> int:
    """Return the visibility timeout ``timeout_s`` in whole ms (ValueError outside 0..12 h)."""
    if not 0 <= timeout_s <= HORIZON_MS / 1000:
        raise ValueError(f"visibility timeout {timeout_s!r} s must be between 0 and "
                         f"{HORIZON_MS // 1000} s (12 h, as SQS)")
    return round(timeout_s * 1000)


def queue_params(query: dict[str, str], scheme: str) -> tuple[str, int]:
    """Return (queue name, max_receives) from a queue URL's parameters (ValueError names a
    bad one)."""
    name = query.get("queue", "default")
    if not name or not all(ch.isalnum() or ch in "-_." for ch in name):
        raise ValueError(f"parameter queue={name!r} of {scheme}:// must be letters, digits, "
                         "'-', '_' or '.'")
    text = query.get("max_receives", str(DEFAULT_MAX_RECEIVES))
    try:
        max_receives = int(text)
    except ValueError:
        max_receives = 0
    if max_receives < 1:
        raise ValueError(f"parameter max_receives={text!r} of {scheme}:// must be a whole "
                         "number >= 1")
    return name, max_receives


class RedisQueue(ClientSessions["RedisQueueClient"]):
    """An opened queue on one Redis server (the primary of a ``cluster up`` deployment)."""

    def __init__(self, url: str, seed: int) -> None:
        u = parse_store_url(url, "replicas", QUEUE_PARAMS,
                            "redis://127.0.0.1:6379/?queue=jobs&max_receives=5")
        self.name, self.max_receives = queue_params(u.query, "redis")
        self.node = u.nodes[0]
        self.timeout_s = u.timeout_s
        self.seed = seed
        tag = "{" + self.name + "}"
        self.stream, self.receipts, self.dlq, self.cursor = (
            f"rq:{tag}:s", f"rq:{tag}:r", f"rq:{tag}:dlq", f"rq:{tag}:cursor")
        self.runtime = RealRuntime()
        self.info = QueueInfo(
            url=redact_url(url), kind="redis", max_receives=self.max_receives,
            params={"queue": self.name, "server": f"{self.node.host}:{self.node.port}",
                    "stream": self.stream, "dead_letters": self.dlq, "group": GROUP,
                    "clock": "Redis server (pending-list idle times)",
                    "timeout_ms": round(self.timeout_s * 1000)})
        self._numbers = itertools.count()
        self._admin: RedisQueueClient | None = None
        self._clients: list[RedisQueueClient] = []
        self._group_ready = False

    def _client(self) -> RedisQueueClient:
        c = RedisQueueClient(self, f"{os.getpid()}-{next(self._numbers)}")
        self._clients.append(c)
        return c

    async def _ensure_group(self, c: RedisQueueClient) -> None:
        if self._group_ready:
            return
        # from id 0: messages sent before the first receiver are delivered too
        reply = await c.call("XGROUP", "CREATE", self.stream, GROUP, "0", "MKSTREAM")
        if isinstance(reply, RespError) and not str(reply).startswith("BUSYGROUP"):
            raise QueueError(f"cannot create consumer group on {self.stream}: {reply}")
        self._group_ready = True

    async def connect(self) -> RedisQueueClient:
        """Return a new client session (its own connection; ValueError if the server cannot
        be reached)."""
        c = self._client()
        try:
            await self._ensure_group(c)
        except QueueUnavailable as err:
            raise unreachable("Redis", self.node.host, self.node.port, err) from None
        return c

    async def dead_letters(self) -> list[DeadLetter]:
        """Return the dead-letter stream's messages, oldest first."""
        c = await self._admin_client()
        out = []
        for _, fields in await c.checked("XRANGE", self.dlq, "-", "+"):
            f = dict(zip(fields[::2], fields[1::2], strict=True))
            out.append(DeadLetter(f["id"], f["b"], int(f["n"])))
        return out

    async def depth(self) -> tuple[int, int]:
        """Return (visible, in flight): entries never delivered or whose lease ended, and
        entries whose lease holds."""
        c = await self._admin_client()
        visible, in_flight = await c.script(_DEPTH, [self.stream], [GROUP, HORIZON_MS])
        return int(visible), int(in_flight)

    async def purge(self) -> None:
        """Delete the queue's stream, receipts and dead letters (tests and benchmarks start
        from an empty queue)."""
        c = await self._admin_client()
        await c.checked("DEL", self.stream, self.receipts, self.dlq, self.cursor)
        self._group_ready = False
        await self._ensure_group(c)


class RedisQueueClient:
    """One client session: one connection, one consumer name in the group (a label only:
    receipts, not consumer names, decide who may delete)."""

    def __init__(self, queue: RedisQueue, consumer: str) -> None:
        self.q = queue
        self.consumer = consumer
        self.conn = RespConnection(queue.node.host, queue.node.port, queue.timeout_s)

    async def call(self, *args: str | int) -> Any:
        """Send one command; return its reply (a Redis error reply as a RespError value).
        QueueUnavailable when the server does not answer."""
        try:
            reply, _, _ = await self.conn.call(*args)
        except (StoreError, TimeoutError, OSError) as err:
            raise QueueUnavailable(f"Redis at {self.q.node.host}:{self.q.node.port}: "
                                   f"{err}") from None
        return reply

    async def checked(self, *args: str | int) -> Any:
        """Like :meth:`call`, with an error reply raised as QueueError."""
        reply = await self.call(*args)
        if isinstance(reply, RespError):
            raise QueueError(f"Redis refused {args[0]}: {reply}")
        return reply

    async def script(self, source: str, keys: list[str], args: list[str | int]) -> Any:
        """Run a Lua script by its SHA1, loading it when the server does not know it (first
        use, or after a restart); return its reply."""
        head = [len(keys), *keys, *args]
        reply = await self.call("EVALSHA", _sha(source), *head)
        if isinstance(reply, RespError) and str(reply).startswith("NOSCRIPT"):
            reply = await self.call("EVAL", source, *head)
        if isinstance(reply, RespError):
            if "NOGROUP" in str(reply):
                # the stream was deleted under us (purge elsewhere, or a server that lost
                # its data in a restart): recreate the group and try once more
                self.q._group_ready = False
                await self.q._ensure_group(self)
                reply = await self.call("EVALSHA", _sha(source), *head)
                if isinstance(reply, RespError) and str(reply).startswith("NOSCRIPT"):
                    reply = await self.call("EVAL", source, *head)
            if isinstance(reply, RespError):
                raise QueueError(f"Redis script failed: {reply}")
        return reply

    async def send(self, body: str) -> str:
        """Append ``body`` to the stream; return its entry id once Redis acknowledged it."""
        return str(await self.checked("XADD", self.q.stream, "*", "b", body))

    async def receive(self, max_messages: int, visibility_timeout_s: float) -> list[Delivery]:
        """Return up to ``max_messages`` deliveries (redeliveries of expired leases first),
        each leased for ``visibility_timeout_s`` s by the server's clock."""
        if max_messages < 1:
            raise ValueError(f"max_messages {max_messages} must be at least 1")
        vis_ms = check_timeout_s(visibility_timeout_s)
        nonces = [secrets.token_hex(4) for _ in range(max_messages)]
        q = self.q
        rows = await self.script(_RECEIVE, [q.stream, q.receipts, q.dlq, q.cursor],
                                 [GROUP, self.consumer, max_messages, vis_ms,
                                  q.max_receives, HORIZON_MS, *nonces])
        return [Delivery(str(i), str(b), str(r), int(n)) for i, b, r, n in rows]

    @staticmethod
    def _id_of(receipt: str) -> str:
        mid, sep, _ = receipt.partition("/")
        if not sep:
            raise StaleReceipt(f"{receipt!r} is not a receipt of this queue")
        return mid

    async def delete(self, receipt: str) -> None:
        """Acknowledge and delete the message of this delivery; StaleReceipt (nothing
        changed) when ``receipt`` is not its current delivery's."""
        q = self.q
        done = await self.script(_DELETE, [q.stream, q.receipts],
                                 [GROUP, self._id_of(receipt), receipt])
        if done != 1:
            raise StaleReceipt(f"receipt {receipt} is not the current delivery's")

    async def change_visibility(self, receipt: str, timeout_s: float) -> None:
        """Lease the message of this delivery for ``timeout_s`` s from now (0 = visible
        now); StaleReceipt (nothing changed) when ``receipt`` is not current."""
        vis_ms = check_timeout_s(timeout_s)
        q = self.q
        done = await self.script(_CHANGE, [q.stream, q.receipts],
                                 [GROUP, self.consumer, self._id_of(receipt), receipt,
                                  HORIZON_MS - vis_ms])
        if done != 1:
            raise StaleReceipt(f"receipt {receipt} is not the current delivery's")

    async def close(self) -> None:
        """Close the connection."""
        self.conn.close()


def open_redis_queue(url: str, seed: int) -> RedisQueue:
    """Return the queue a ``redis://`` URL names (ValueError naming a bad parameter); no
    connection is made until :meth:`RedisQueue.connect`."""
    return RedisQueue(url, seed)
