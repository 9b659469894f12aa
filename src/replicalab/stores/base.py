"""The Store contract: an async client of one replicated store, addressed SimpleDB-style.

An element is ``domain/item/attribute``. An item is what one call can write atomically;
a domain is the unit that shares replicas. Reads take ``consistent=True|False``; writes may
be conditional on the current values (``ABSENT`` = must not exist). A failed condition
raises :class:`ConditionFailed`; an unknown outcome (timeout, crash) :class:`Unavailable`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from replicalab.runtime import Runtime


class Feature(StrEnum):
    """What a store can express; workloads skip variants a store does not declare."""

    EVENTUAL_READ = "eventual-read"
    CONSISTENT_READ = "consistent-read"
    CONDITIONAL_WRITE = "conditional-write"
    ATOMIC_MULTI_WRITE = "atomic-multi-write"
    MULTI_READ = "multi-read"
    DELETE = "delete"
    TRANSACTIONS = "transactions"


ALL_FEATURES: frozenset[Feature] = frozenset(Feature) - {Feature.TRANSACTIONS}
"""Every single-object feature: what a store that can express all read/write operations
declares. Transactions are an optional capability on top, declared separately."""

MicroOp = tuple[str, str, Any]
"""One micro-operation of a transaction, Elle's shape ``(f, key, value)``: list-append uses
``("append", key, int)`` and ``("r", key, None | list[int])``; rw-register ``("w", key, int)``
and ``("r", key, None | int)``."""


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()
"""Expected value meaning "this element must not exist" in a conditional write."""


class StoreError(Exception):
    """Base of store errors; the message names the problem and the fix."""


class ConditionFailed(StoreError):
    """A conditional write found other current values: it certainly did not happen."""


class Unavailable(StoreError):
    """No answer in time or the node is down: the outcome is unknown."""


class Overloaded(StoreError):
    """The store refused the call at once because it is over its capacity (an HTTP 503
    ServiceUnavailable, SimpleDB's answer when jammed): it certainly did not happen."""


class TxnAborted(StoreError):
    """The transaction certainly did not commit (serialization failure, failed guard,
    WATCH conflict): recorded as ``fail``. Any other error during ``transact`` is ``info``."""


class Unsupported(StoreError):
    """The store cannot express this operation (e.g. a multi-element read across domains)."""


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Values read, in the order of the keys asked (None = absent), and the serving node.

    ``sent_ns``/``received_ns``: when an adapter can stamp the request leaving and its reply
    arriving at the socket (monotonic ns; 0 = not stamped), the recorder narrows the op's
    interval to them, keeping the client's own overhead out of it.
    """

    values: tuple[str | None, ...]
    node: str = ""
    sent_ns: int = 0
    received_ns: int = 0


@dataclass(frozen=True, slots=True)
class WriteResult:
    """The node that accepted the write (empty if unknown), and the wire stamps as in
    :class:`ReadResult`."""

    node: str = ""
    sent_ns: int = 0
    received_ns: int = 0


@dataclass(frozen=True, slots=True)
class Element:
    """A parsed ``domain/item/attribute`` address."""

    domain: str
    item: str
    attribute: str


def redact_url(url: str) -> str:
    """Return ``url`` with any password in its userinfo replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{hostport}"))


def short_url(url: str) -> str:
    """Return ``url`` as a progress line names the store: a ``sim://`` URL whole (short,
    and its parameters say which simulation), else its scheme, host and port only (no
    user, password, database or parameters: the run's summary names them once)."""
    parts = urlsplit(url)
    if parts.scheme == "sim" or not parts.hostname:
        return redact_url(url)
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def parse_element(key: str) -> Element:
    """Return the Element for ``key`` or raise ValueError explaining the expected form.

    The last two parts are the item and the attribute; everything before them is the
    domain, which may hold ``/`` (a key prefix, e.g. ``replicalab/<run>/probe``, is part of
    the domain)."""
    parts = key.rsplit("/", 2)
    if len(parts) != 3 or not all(parts) or "" in parts[0].split("/"):
        raise ValueError(f"element {key!r} is not of the form domain/item/attribute")
    return Element(*parts)


class Client(Protocol):
    """One client session of a store (a connection; in the simulator, a placed client)."""

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the current values of ``keys`` as seen by one call."""
        ...

    async def write(
        self, values: Mapping[str, str], *, expect: Mapping[str, Any] | None = None
    ) -> WriteResult:
        """Write ``values`` in one call, optionally only if ``expect`` holds at the store."""
        ...

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` in one call."""
        ...

    async def close(self) -> None:
        """Release the session."""
        ...

    # Optional, for stores declaring ``Feature.TRANSACTIONS``:
    # ``async def transact(self, ops: list[MicroOp]) -> list[MicroOp]`` applies the
    # micro-operations as one transaction at the isolation the URL names and returns them
    # with reads filled in; raises ``TxnAborted`` when it certainly did not commit.


class TxnClient(Client, Protocol):
    """A client session of a store that declares ``Feature.TRANSACTIONS``."""

    async def transact(self, ops: list[MicroOp]) -> list[MicroOp]:
        """Apply ``ops`` as one transaction; return them with reads filled in.

        Raises :class:`TxnAborted` if the transaction certainly did not commit."""
        ...


@dataclass
class StoreInfo:
    """Static description of an opened store, saved in the run config (no credentials)."""

    url: str
    kind: str
    features: frozenset[Feature]
    regions: tuple[str, ...] = ("local",)
    params: dict[str, Any] = field(default_factory=dict)
    eventual_read_served_by: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict of this description."""
        return {
            "url": self.url,
            "kind": self.kind,
            "features": sorted(f.value for f in self.features),
            "regions": list(self.regions),
            "params": self.params,
            "eventual_read_served_by": self.eventual_read_served_by,
        }


class Store(Protocol):
    """An opened store: its description, the runtime it runs in, and client sessions."""

    info: StoreInfo
    runtime: Runtime

    async def connect(self, region: str | None = None) -> Client:
        """Return a new client session placed in ``region`` (simulator) or connected (real)."""
        ...

    async def close(self) -> None:
        """Release everything the store holds."""
        ...

    # Optional: ``async def remove_keys(self, keys: Sequence[str]) -> int`` deletes ``keys``
    # and whatever the adapter created for them (e.g. parent znodes), returning how many
    # existed; a probe's clean-up uses it when present, else ``Client.delete``.
