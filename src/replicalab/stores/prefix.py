"""A store seen through a key prefix: what a probe of a store replicalab did not start uses.

Every element ``domain/item/attribute`` a workload names is sent to the store as
``<prefix>domain/item/attribute`` (the prefix becomes part of the domain), so a probe
writes nothing outside its prefix, and the history keeps the workload's own names (the
results of a seeded run do not depend on the prefix). Every key a client writes, or asks to
exist or not, is remembered; :meth:`PrefixedStore.cleanup` removes them all at the end,
through the adapter's optional ``remove_keys(keys) -> int`` when it has one (an adapter
that creates more than the elements, e.g. ZooKeeper's parent znodes, removes that too),
else through ``delete`` on a client. Only keys this store wrote are removed: a prefix
shared with other data never loses anything else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.errors import ParameterError
from replicalab.runtime import Runtime
from replicalab.stores.base import (
    Client,
    MicroOp,
    ReadResult,
    Store,
    StoreInfo,
    Unsupported,
    WriteResult,
)

_BAD_PREFIX = re.compile(r"^/|//|[\s\x00-\x1f]")
_DELETE_BATCH = 100


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if keys can live under it (ValueError naming the fix)."""
    if _BAD_PREFIX.search(prefix):
        raise ParameterError("prefix", f"{prefix!r}: a key prefix may not start with '/', "
                                       "hold '//' or spaces; use e.g. replicalab/test-1/")
    return prefix


class PrefixedClient:
    """A client whose keys are put under the store's prefix."""

    def __init__(self, store: PrefixedStore, inner: Client) -> None:
        self._store = store
        self._inner = inner
        self._p = store.prefix

    def _keys(self, keys: Sequence[str]) -> list[str]:
        return [self._p + k for k in keys]

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """Return the values of ``keys`` (read under the prefix)."""
        return await self._inner.read(self._keys(keys), consistent=consistent)

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Write ``values`` under the prefix (if ``expect`` holds there), remembering every
        key for :meth:`PrefixedStore.cleanup` before it is sent (an unknown outcome may
        have written it)."""
        p = self._p
        mine = {p + k: v for k, v in values.items()}
        cond = {p + k: v for k, v in expect.items()} if expect else None
        self._store.written.update(mine)
        if cond:
            self._store.written.update(cond)
        return await self._inner.write(mine, expect=cond)

    async def transact(self, ops: list[MicroOp], *, gap_ns: int = 0) -> list[MicroOp]:
        """Run the transaction ``ops`` with its keys under the prefix (every key remembered
        for clean-up before it is sent); return the ops as the caller named them."""
        inner = getattr(self._inner, "transact", None)
        if inner is None:
            raise Unsupported(f"{self._store.info.url} has no transactions")
        p = self._p
        mine = [(f, p + k, v) for f, k, v in ops]
        self._store.written.update(k for _, k, _ in mine)
        got = await (inner(mine, gap_ns=gap_ns) if gap_ns else inner(mine))
        return [(f, k, r[2]) for (f, k, _), r in zip(ops, got, strict=True)]

    async def list(self, prefix: str, *, consistent: bool = True) -> list[str]:
        """Return the keys under ``prefix`` (under the store's prefix), named as the caller
        names them; Unsupported when the inner store cannot list."""
        inner = getattr(self._inner, "list", None)
        if inner is None:
            raise Unsupported(f"{self._store.info.url} cannot list keys")
        p = self._p
        return [k[len(p):] for k in await inner(p + prefix, consistent=consistent)
                if k.startswith(p)]

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Delete ``keys`` under the prefix."""
        return await self._inner.delete(self._keys(keys))

    async def close(self) -> None:
        """Close the underlying session."""
        await self._inner.close()


class PrefixedStore:
    """``inner`` with every key under ``prefix`` (see the module doc)."""

    def __init__(self, inner: Store, prefix: str) -> None:
        self.inner = inner
        self.prefix = check_prefix(prefix)
        self.written: set[str] = set()
        self.info: StoreInfo = inner.info
        self.runtime: Runtime = inner.runtime

    async def connect(self, region: str | None = None) -> PrefixedClient:
        """Return a client of the inner store whose keys are put under the prefix."""
        return PrefixedClient(self, await self.inner.connect(region))

    async def cleanup(self) -> int:
        """Remove every key written through this store; return how many the store still
        held (with an adapter that has no ``remove_keys``: how many were deleted, existing
        or not). StoreError/ValueError from the adapter when it cannot."""
        keys = sorted(self.written)
        if not keys:
            return 0
        remove = getattr(self.inner, "remove_keys", None)
        if remove is not None:
            removed = int(await remove(keys))
        else:
            client = await self.inner.connect()
            try:
                for i in range(0, len(keys), _DELETE_BATCH):
                    await client.delete(keys[i:i + _DELETE_BATCH])
            finally:
                await client.close()
            removed = len(keys)
        self.written.clear()
        return removed

    async def close(self) -> None:
        """Close the inner store."""
        await self.inner.close()
