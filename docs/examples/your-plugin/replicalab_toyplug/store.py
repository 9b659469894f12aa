"""The ``toykv://`` adapter: ``toykv://127.0.0.1:P0?standby=127.0.0.1:P1,...&regions=SET
&node_regions=R0,R1,...&client_links=...`` (what ``replicalab cluster up toykv`` prints).

n0 holds the one copy of the data: every read is current, a write of several elements is
one request (atomic), a conditional write is checked and applied in one step. A client
placed in a region reaches n0 through that region's client link (a Toxiproxy proxy
carrying the WAN delay), as the Store contract asks; a call unanswered within
``timeout_ms`` raises Unavailable and the next call reconnects.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.runtime import RealRuntime
from replicalab.stores import (
    ABSENT,
    ConditionFailed,
    ReadResult,
    StoreInfo,
    Unavailable,
    WriteResult,
)
from replicalab.stores.base import ALL_FEATURES, redact_url
from replicalab.stores.url import Endpoint, parse_store_url


class ToyClient:
    """One connection to n0, through the client's region."""

    def __init__(self, at: Endpoint, timeout_s: float) -> None:
        self.at, self.timeout_s = at, timeout_s
        self.conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def _call(self, req: dict[str, Any]) -> dict[str, Any]:
        async def roundtrip() -> dict[str, Any]:
            if self.conn is None:
                self.conn = await asyncio.open_connection(self.at.host, self.at.port)
            reader, writer = self.conn
            writer.write((json.dumps(req) + "\n").encode())
            await writer.drain()
            line = await reader.readline()
            if not line:
                raise ConnectionError("the server closed the connection")
            return json.loads(line)  # type: ignore[no-any-return]

        try:
            return await asyncio.wait_for(roundtrip(), self.timeout_s)
        except (TimeoutError, OSError) as err:
            await self.close()
            raise Unavailable(f"toykv n0: {type(err).__name__}: {err}") from None

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` (None = absent), from n0."""
        got = await self._call({"op": "read", "keys": list(keys)})
        return ReadResult(tuple(got["values"]), "n0")

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` in one request, only if every ``expect`` holds."""
        want = {k: None if v is ABSENT else v for k, v in (expect or {}).items()}
        got = await self._call({"op": "write", "values": dict(values), "expect": want})
        if "failed" in got:
            raise ConditionFailed(got["failed"])
        return WriteResult("n0")

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` in one request."""
        await self._call({"op": "delete", "keys": list(keys)})
        return WriteResult("n0")

    async def close(self) -> None:
        """Close the connection (the next call opens another)."""
        if self.conn is not None:
            self.conn[1].close()
            self.conn = None


class ToyKV:
    """A toy cluster opened from its URL."""

    def __init__(self, url: str, seed: int) -> None:
        self.url = parse_store_url(url, "standby", example="toykv://127.0.0.1:PORT")
        self.runtime = RealRuntime()
        self.info = StoreInfo(url=redact_url(url), kind="toykv", features=ALL_FEATURES,
                              regions=self.url.region_names(),
                              params={"timeout_ms": self.url.timeout_s * 1000},
                              eventual_read_served_by="n0, the one copy")

    async def connect(self, region: str | None = None) -> ToyClient:
        """Return a client placed in ``region`` (ValueError for one the store lacks)."""
        at = self.url.via(self.url.nodes[0], self.url.placed(region))
        return ToyClient(at, self.url.timeout_s)

    async def close(self) -> None:
        """Nothing shared to release."""


def open_toykv(url: str, seed: int) -> ToyKV:
    """The adapter the kind's record names: return the store for a ``toykv://`` URL."""
    return ToyKV(url, seed)
