"""Thread sweeps (seed 000, multiple threads): how long N closed-loop clients take to finish
a fixed number of requests, for each variant (put, conditional put, eventual read, consistent
read), on one item or spread over many items chosen at random.

Each point of the sweep (variant, item count, clients) runs alone, one after the other: its
clients share a counter of the requests left and each issues the next request as soon as its
previous one completes. The conditional put is conditioned on a fictitious attribute that
must not exist, as in the seed (a condition on the previous value would almost always fail
under many threads). While a read point runs, background writers keep writing new values to
the same items, so reads cannot be served from a cache.

Every request's key names its point (item ``p<point>-<item>``), so the checker finds each
point's requests in the history alone and a saved run can be re-checked.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replicalab.errors import ParameterError
from replicalab.history import History, encode_value
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import ABSENT, Client, Feature, Store, Unavailable
from replicalab.workloads.base import Flag, ProbeOptions, Workload, envelope
from replicalab.workloads.recorder import Recorder

DOMAIN = "sweep"
WRITER_BASE = 100_000
"""Background writers are processes WRITER_BASE + w, apart from the measured clients."""
MAX_CLIENTS = 10_000
MAX_FAILED_IN_ROW = 100
"""A point stops (and the run with it, its history saved) after this many requests in a
row failed or went unanswered: a store that stopped answering would otherwise take
``total`` timeouts to get through."""
VARIANTS = {
    "put": ("write", "none", None),
    "conditional put": ("cas", "none", Feature.CONDITIONAL_WRITE),
    "eventual read": ("read", "eventual", Feature.EVENTUAL_READ),
    "consistent read": ("read", "consistent", Feature.CONSISTENT_READ),
}
_ITEM = re.compile(r"^sweep/p(\d+)-\d+/")


def _ints(text: str, parameter: str) -> tuple[int, ...]:
    try:
        values = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ParameterError(parameter, f"{text!r}: give comma-separated whole numbers, "
                                        "e.g. 1,2,5,10") from None
    if not values:
        raise ParameterError(parameter, "is empty: give comma-separated whole numbers, e.g. "
                                        "1,2,5,10")
    return values


@dataclass(frozen=True)
class SweepConfig:
    """What the sweep runs: clients per point, requests per point, item counts, variants,
    and the number of background writers during read points."""

    clients: tuple[int, ...] = (1, 2, 5, 10, 20, 50, 100, 200)
    total: int = 10_000
    items: tuple[int, ...] = (1, 1000)
    variants: tuple[str, ...] = tuple(VARIANTS)
    writers: int = 5

    @classmethod
    def parse(cls, clients: str, total: int, items: str, variants: str, writers: int
              ) -> SweepConfig:
        """Return a config from the CLI's comma-separated texts (ValueError if malformed)."""
        names = tuple(v.strip() for v in variants.split(",") if v.strip())
        return cls(clients=_ints(clients, "clients"), total=total,
                   items=_ints(items, "items"), variants=names, writers=writers)

    def check(self) -> None:
        """Raise ValueError naming the first invalid option and its fix."""
        for n in self.clients:
            if not 1 <= n <= MAX_CLIENTS:
                raise ParameterError("clients", f"{n}: each must be between 1 and "
                                                f"{MAX_CLIENTS}")
        for n in self.items:
            if not 1 <= n <= 1_000_000:
                raise ParameterError("items", f"{n}: each must be between 1 and 1000000")
        if self.total < 1:
            raise ParameterError("total", f"{self.total} must be at least 1")
        if self.writers < 0:
            raise ParameterError("writers", f"{self.writers} must not be negative")
        for v in self.variants:
            if v not in VARIANTS:
                raise ParameterError("variants", f"{v!r}: use some of {', '.join(VARIANTS)}")
        if not self.variants:
            raise ParameterError("variants", f"is empty: use some of {', '.join(VARIANTS)}")

    def points(self) -> list[tuple[str, int, int]]:
        """Return every (variant, items, clients) point in the order they run."""
        return [(v, i, c) for v in self.variants for i in self.items for c in self.clients]

    def planned_ops(self) -> int:
        """Return the number of measured requests the sweep issues."""
        return self.total * len(self.points())


def skipped(cfg: SweepConfig, features: frozenset[Feature]) -> dict[str, str]:
    """Return {variant: why} for the variants a store with ``features`` cannot run."""
    out = {}
    for v in cfg.variants:
        need = VARIANTS[v][2]
        if need is not None and need not in features:
            out[v] = f"the store does not declare {need.value}"
    return out


def key(point: int, item: int, attribute: str = "v") -> str:
    """Return the element a request of ``point`` on ``item`` addresses."""
    return f"{DOMAIN}/p{point:03d}-{item:07d}/{attribute}"


class _Pool:
    """Client connections, opened on first use and reused by later points."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.clients: list[Client] = []

    async def take(self, n: int) -> list[Client]:
        while len(self.clients) < n:
            self.clients.append(await self.store.connect())
        return self.clients[:n]

    async def close(self) -> None:
        for c in self.clients:
            await c.close()


async def _point(store: Store, rec: Recorder, pool: _Pool, cfg: SweepConfig, index: int,
                 variant: str, items: int, clients: int, rng: np.random.Generator) -> None:
    """Run one point: ``clients`` closed-loop clients finishing ``cfg.total`` requests."""
    rt = store.runtime
    f, cons, _ = VARIANTS[variant]
    conns = await pool.take(clients + (cfg.writers if f == "read" else 0))
    picks = rng.integers(0, items, cfg.total).tolist()
    left = [cfg.total]
    stop = [False]
    failed_in_row = [0]
    seq = itertools.count(1)

    async def client(pid: int, conn: Client) -> None:
        while left[0] > 0:
            left[0] -= 1
            item = picks[left[0]]
            if f == "read":
                ok = await rec.read(conn, pid, (key(index, item),),
                                    cons == "consistent") is not None
            else:
                values = {key(index, item): encode_value(pid, next(seq), rt.now_ns())}
                expect = {key(index, item, "never"): ABSENT} if f == "cas" else None
                ok = await rec.write(conn, pid, values, expect=expect)
            failed_in_row[0] = 0 if ok else failed_in_row[0] + 1
            if failed_in_row[0] >= MAX_FAILED_IN_ROW:
                stop[0] = True
                raise Unavailable(f"{MAX_FAILED_IN_ROW} requests in a row failed at point "
                                  f"{index} ({variant}, {items} items, {clients} clients)")

    async def writer(w: int, conn: Client) -> None:
        pid = WRITER_BASE + w
        wpicks = rng.integers(0, items, 4096).tolist()
        for n in itertools.count():
            if stop[0]:
                return
            item = wpicks[n % len(wpicks)]
            await rec.write(conn, pid, {key(index, item): encode_value(pid, next(seq),
                                                                       rt.now_ns())})

    async def measured() -> None:
        await rt.gather(*(client(p, conns[p]) for p in range(clients)))
        stop[0] = True

    background = [writer(w, conns[clients + w]) for w in range(cfg.writers)] if f == "read" \
        else []
    await rt.gather(measured(), *background)


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: SweepConfig,
                   rec: Recorder) -> None:
    """Run every point of ``cfg`` the store can run, one after the other."""
    rng = np.random.default_rng(opts.seed)
    skip = skipped(cfg, store.info.features)
    pool = _Pool(store)
    try:
        for index, (variant, items, clients) in enumerate(cfg.points()):
            if variant not in skip:
                await _point(store, rec, pool, cfg, index, variant, items, clients, rng)
    finally:
        await pool.close()


def measured_count(h: History) -> int:
    """Return how many measured requests (not background writes) ``h`` holds."""
    proc = h.column("process")
    return int(((proc >= 0) & (proc < WRITER_BASE)).sum())


def done_fraction(h: History, cfg: SweepConfig) -> float:
    """Return the share of the sweep's measured requests issued so far (0..1)."""
    return min(1.0, measured_count(h) / max(1, cfg.planned_ops()))


def _point_of(h: History) -> np.ndarray:
    """Return each op's sweep point index (-1 where its key is not a sweep key)."""
    out = np.full(len(h), -1, np.int64)
    for i, ks in enumerate(h.keys):
        m = _ITEM.match(ks[0]) if ks else None
        if m:
            out[i] = int(m[1])
    return out


def summarise_point(invoke_ns: np.ndarray, complete_ns: np.ndarray, types: np.ndarray
                    ) -> dict[str, Any]:
    """Return total time (s, first invoke to last completion), throughput (completed ops/s)
    and latency mean/percentiles (ms, completed ops) of one point's measured requests."""
    ok = types == 1
    n = len(invoke_ns)
    total_s = float(complete_ns.max() - invoke_ns.min()) / NS_PER_S if n else 0.0
    lat = (complete_ns[ok] - invoke_ns[ok]) / 1e6
    out: dict[str, Any] = {
        "requests": n, "ok": int(ok.sum()), "failed": int((types == 2).sum()),
        "info": int((types == 3).sum()), "total_s": round(total_s, 4),
        "throughput_per_s": round(float(ok.sum()) / total_s, 3) if total_s > 0 else None}
    for name, q in (("p50", 50), ("p99", 99), ("p999", 99.9)):
        out[f"{name}_ms"] = round(float(np.percentile(lat, q)), 4) if len(lat) else None
    out["mean_ms"] = round(float(lat.mean()), 4) if len(lat) else None
    return out


def shapes(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return, per variant and clients, the total time of the fewest-items point divided by
    that of the most-items point (> 1: one hot item is slower)."""
    out = []
    by = {(p["variant"], p["items"], p["clients"]): p for p in points}
    for variant in dict.fromkeys(p["variant"] for p in points):
        counts = sorted({p["items"] for p in points if p["variant"] == variant})
        if len(counts) < 2:
            continue
        few, many = counts[0], counts[-1]
        for c in sorted({p["clients"] for p in points if p["variant"] == variant}):
            a, b = by.get((variant, few, c)), by.get((variant, many, c))
            if a and b and a["total_s"] and b["total_s"]:
                out.append({"variant": variant, "clients": c, "few_items": few,
                            "many_items": many,
                            "time_ratio": round(a["total_s"] / b["total_s"], 4)})
    return out


def check(h: History, store_url: str, opts: ProbeOptions, cfg: SweepConfig,
          features: frozenset[Feature]) -> dict[str, Any]:
    """Return per-point total time (s), throughput (ops/s) and latency percentiles (ms),
    and the one-item / many-items time ratio per variant and clients."""
    out = envelope("sweep", store_url, opts, h)
    out["config"] = {**asdict(opts), "sweep": asdict(cfg)}
    skip = skipped(cfg, features)
    out["skipped"] = skip
    point = _point_of(h)
    proc = h.column("process")
    measured = (proc >= 0) & (proc < WRITER_BASE)
    inv, comp, types = h.column("invoke_ns"), h.column("complete_ns"), h.types()
    points = []
    for index, (variant, items, clients) in enumerate(cfg.points()):
        if variant in skip:
            continue
        sel = measured & (point == index)
        if not sel.any():
            continue  # the run stopped before this point
        bg = (proc >= WRITER_BASE) & (point == index) & (types == 1)
        points.append({"variant": variant, "items": items, "clients": clients,
                       "background_writes": int(bg.sum()),
                       **summarise_point(inv[sel], comp[sel], types[sel])})
    out["points"] = points
    out["shapes"] = shapes(points)
    return out


def from_flags(given: dict[str, Any]) -> SweepConfig:
    """Return the config of the given flags (comma-separated texts; ValueError if
    malformed)."""
    d = SweepConfig()

    def pick(name: str, default: Any) -> Any:
        return default if given.get(name) is None else given[name]

    def text(values: tuple[Any, ...]) -> str:
        return ",".join(str(v) for v in values)

    return SweepConfig.parse(pick("clients", text(d.clients)), pick("total", d.total),
                             pick("items", text(d.items)), pick("variants", text(d.variants)),
                             pick("writers", d.writers))


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: each point's time, throughput and latency, and
    the variants skipped."""
    rows = []
    for pt in results["points"]:
        rows.append((f"{pt['variant']}, {pt['items']:,} item(s), {pt['clients']} clients",
                     f"{pt['total_s']:.1f} s, {pt['throughput_per_s'] or 0:.1f}/s, "
                     f"p50 {pt['p50_ms'] or 0:.1f} / p99 {pt['p99_ms'] or 0:.1f} ms"))
    for v, why in results["skipped"].items():
        rows.append((f"{v} skipped", why))
    return rows


WORKLOAD = Workload(
    "sweep", SweepConfig, generate, check, done_fraction=done_fraction,
    flags=(Flag("clients", str, "closed-loop client counts, one point each"),
           Flag("total", int, "requests per point"),
           Flag("items", str, "item counts (requests pick one item at random)"),
           Flag("variants", str, "put, conditional put, eventual read, consistent read "
                "(comma-separated)"),
           Flag("writers", int, "background writers during read points")),
    from_flags=from_flags, summary_rows=summary_rows,
    legacy_config=lambda d: d["sweep"])
