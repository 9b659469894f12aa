"""List-after-write (seed 003's staleness probe, on a listing): one writer creates a new
object every interval; readers list the objects and see the newest one listed. A read is
fresh when the newest object it lists is the latest created before it began, so every
result of the staleness probe (freshness by time since the write, periods, k-staleness,
monotonic reads) reads the same way for listings: when does a new object show up in a
LIST at another site?

The probe runs the staleness probe's clients on a view of the store in which a write of the
probe's key creates the object ``law/n<seq>/v`` (value: the probe's value) and a read of it
is one ``list("law/")`` whose newest object stands for the value read. The store must list
keys (its client has ``list(prefix, consistent=...)``: the ``s3://`` adapter); any other is
refused in one line. Placements: same-client and separate-clients.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from replicalab.errors import ParameterError
from replicalab.history import History
from replicalab.stores import Feature, Store
from replicalab.stores.base import ReadResult, StoreError, StoreInfo, Unsupported, WriteResult
from replicalab.workloads import staleness
from replicalab.workloads.base import ProbeOptions, Workload
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.staleness import StalenessConfig

DOMAIN = "law"


def _seq(key: str) -> int | None:
    """Return the sequence number of a listed object ``law/n<seq>/v`` (None otherwise)."""
    parts = key.rsplit("/", 3)
    if len(parts) != 3 or parts[0] != DOMAIN or parts[2] != "v" or not parts[1][1:].isdigit():
        return None
    return int(parts[1][1:])


class ListingStore:
    """``inner`` seen through listings (see the module doc); the versions created so far
    are shared by its clients, as the writer and readers share one process."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.info: StoreInfo = inner.info
        self.runtime = inner.runtime
        self.created: dict[int, str] = {}

    async def connect(self, region: str | None = None) -> ListingClient:
        """Return a client of ``inner`` placed in ``region`` (ValueError when the store
        cannot list keys)."""
        client = await self.inner.connect(region)
        listing = getattr(client, "list", None)
        try:
            if listing is None:
                raise Unsupported("no list()")
            await listing(f"{DOMAIN}/", consistent=True)
        except Unsupported:
            await client.close()
            raise ValueError(f"{self.info.url} cannot list keys: the list-after-write probe "
                             "needs a store that lists (s3://)") from None
        return ListingClient(self, client)

    async def close(self) -> None:
        """Close the inner store."""
        await self.inner.close()


class ListingClient:
    """A write creates the next object; a read lists them and returns the newest's value."""

    def __init__(self, store: ListingStore, inner: Any) -> None:
        self.store = store
        self.inner = inner

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        """Create the next object holding the value written."""
        ((_, value),) = values.items()
        created = self.store.created
        n = len(created) + 1
        created[n] = value  # before the PUT: an unknown outcome may still list
        return await self.inner.write({f"{DOMAIN}/n{n:09d}/v": value})

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        """List the objects (at home when ``consistent``, else at this client's site) and
        return the value of the newest one listed (None when none is)."""
        names = await self.inner.list(f"{DOMAIN}/", consistent=consistent)
        seqs = [n for n in map(_seq, names) if n is not None]
        if seqs and max(seqs) not in self.store.created:
            raise StoreError(f"listed object n{max(seqs)} was never written by this probe")
        return ReadResult((self.store.created[max(seqs)] if seqs else None,))

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        """Not used by the probe."""
        raise Unsupported("the list-after-write view deletes nothing")

    async def close(self) -> None:
        """Close the inner client."""
        await self.inner.close()


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: StalenessConfig,
                   rec: Recorder) -> None:
    """Run the staleness probe's clients on the listing view of ``store``."""
    if cfg.placement == "separate-processes":
        raise ParameterError("placement", "separate-processes: the list-after-write probe's "
                                          "readers share the writer's process; use "
                                          "separate-clients")
    await staleness.generate(ListingStore(store), h, opts, cfg, rec)  # type: ignore[arg-type]


def required_features(opts: ProbeOptions, cfg: StalenessConfig | None = None) -> set[Feature]:
    """Return what the probe needs besides listing: the reads it is asked for."""
    return staleness.required_features(opts, cfg)


WORKLOAD = Workload("list-after-write", StalenessConfig, generate, staleness.check,
                    required_features, flags=staleness.FLAGS,
                    from_flags=staleness.from_flags, summary_rows=staleness.summary_rows,
                    figures=staleness.figures, series=staleness.series)
