"""A live-migration run: clients in every region, a policy moving objects, static peers.

Clients in each region read and write objects drawn with locality (region z mostly uses
the z-th slice of the object ids, as the seed's ``locality`` workload). Every object id
exists twice, with the same random home region: ``o<id>`` is managed by the policy and may
move, ``s<id>`` stays where it was placed. Each access picks one of the two at random, so
both see the same traffic at the same time over the same links, and the run measures the
policy against static placement side by side.

The policy runs centrally, in this process, fed every completed access to a managed object.
In a deployment the owner region plays that part: every access goes through the owner, so
it sees the same stream; one decision-maker per object means two regions never race to move
the same object (and if they did, the directory's conditional writes would let one win).
When it names a new region, a migration starts from the current owner's region (its first
two steps are local there), at most ``max_inflight`` at a time.

Every client operation is recorded in a :class:`~replicalab.history.History` (read/write,
latency from the client's invoke to its acknowledgement, including redirects and waits on a
migration), every migration as a ``cas`` op of process :data:`MIGRATOR`. After the clients
stop, every object is read once more; :func:`~replicalab.placement.live_check.lost_writes`
checks the whole history.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from replicalab.errors import ParameterError
from replicalab.history import History, encode_value
from replicalab.placement.live import Conns, LiveOptions, Migration, Router, migrate, seed_objects
from replicalab.placement.live_check import LostWrites, lost_writes
from replicalab.placement.live_deploy import Deployment
from replicalab.placement.policies import Policy
from replicalab.runtime.base import NS_PER_MS, NS_PER_S
from replicalab.stores import StoreError, Unavailable

MIGRATOR = -2
"""History process id of migrations (as Jepsen's nemesis is -1)."""
FINAL = -3
"""History process id of the final read of every object."""


PolicyFactory = Callable[[list[str], list[int]], Policy]
"""(region names, initial owner index per object) -> policy."""


@dataclass(frozen=True)
class LiveConfig:
    """One run: ``objects`` ids (each a managed and a static object), ``clients`` per
    region with ``think_ms`` between accesses, ``write_share`` of accesses writes, region z's
    ids drawn from N(slice centre, ``locality_sd`` x slice width); latency compared from
    ``settle_share`` of the duration on; ``window_s`` the time-series step (virtual or real
    seconds); ``seed`` fixes homes and traffic."""

    duration_s: float = 30.0
    objects: int = 30
    clients: int = 2
    think_ms: float = 20.0
    write_share: float = 0.5
    locality_sd: float = 0.5
    settle_share: float = 0.5
    window_s: float = 1.0
    max_inflight: int = 4
    seed: int = 1
    live: LiveOptions = field(default_factory=LiveOptions)

    def check(self) -> None:
        """Raise ValueError naming the first invalid field and its fix."""
        if not self.duration_s > 0:
            raise ParameterError("duration", f"{self.duration_s:g} s must be positive, e.g. "
                                             "30s")
        if not self.window_s > 0:
            raise ValueError(f"window {self.window_s:g} s must be positive")
        if self.objects < 1 or self.clients < 1 or self.max_inflight < 1:
            raise ValueError("objects, clients and max_inflight must be at least 1")
        if not 0 <= self.write_share <= 1 or not 0 <= self.settle_share < 1:
            raise ValueError("write_share must be in [0, 1] and settle_share in [0, 1)")
        if self.think_ms < 0 or self.locality_sd <= 0:
            raise ValueError("think_ms must not be negative and locality_sd must be positive")
        self.live.check()


@dataclass
class LiveResult:
    """What a run measured (latencies in ms, times in s from the start of the workload).

    ``managed_*`` / ``static_*``: acknowledged accesses invoked from ``settled_from_s`` on,
    to objects the policy manages and to their static twins; ``ratio`` managed / static
    mean; ``migrations_per_1k`` moves per 1,000 acknowledged accesses to managed objects;
    ``final_share`` the share of managed objects each region owns at the end."""

    deployment: dict[str, Any]
    config: dict[str, Any]
    policy: str
    windows: list[dict[str, float]]
    settled_from_s: float
    managed_mean_ms: float
    static_mean_ms: float
    managed_p99_ms: float
    static_p99_ms: float
    ratio: float
    migrations: dict[str, int]
    migrations_moved: int
    migrations_per_1k: float
    lost_writes: int
    unknown_reads: int
    ops: dict[str, int]
    redirects: int
    recoveries: int
    final_share: list[float]

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return asdict(self)


def homes_for(regions: list[str], objects: int, seed: int) -> list[int]:
    """Return each object id's home region index, uniformly at random (seeded)."""
    rng = np.random.default_rng([seed, 7])
    return [int(x) for x in rng.integers(len(regions), size=objects)]


def draw_object(rng: np.random.Generator, region: int, n_regions: int, objects: int,
                sd_share: float) -> int:
    """Return an object id drawn by region index ``region``: normal around the centre of
    its slice of the ids, sd ``sd_share`` of a slice, wrapped around the id range."""
    width = objects / n_regions
    x = rng.normal((region + 0.5) * width, sd_share * width)
    return math.floor(x) % objects


@dataclass
class _Run:
    deploy: Deployment
    cfg: LiveConfig
    policy: Policy
    names: list[str]
    homes: list[int]
    history: History = field(default_factory=History)
    owner: list[int] = field(default_factory=list)
    inflight: set[int] = field(default_factory=set)
    migrations: list[Migration] = field(default_factory=list)
    migrators: dict[str, Conns] = field(default_factory=dict)
    routers: list[Router] = field(default_factory=list)
    tasks: list[Any] = field(default_factory=list)
    t0_ns: int = 0
    end_ns: int = 0
    progress: Callable[[float], None] | None = None

    def home_of(self, item: str) -> str:
        return self.names[self.homes[int(item[1:])]]

    async def client(self, number: int, region: int, conns: Conns) -> None:
        rt, cfg, h = self.deploy.runtime, self.cfg, self.history
        router = Router(conns, rt, self.home_of, cfg.live)
        self.routers.append(router)
        rng = np.random.default_rng([cfg.seed, 11, number])
        seq = 0
        n = len(self.names)
        # bounded: the loop ends at end_ns, and every access ends within its deadline
        while rt.now_ns() < self.end_ns:
            obj = draw_object(rng, region, n, cfg.objects, cfg.locality_sd)
            item = f"{'o' if rng.random() < 0.5 else 's'}{obj}"
            writing = rng.random() < cfg.write_share
            now = rt.now_ns()
            if writing:
                seq += 1
                value = encode_value(number, seq, now)
                i = h.invoke(number, "write", (item,), (value,), "consistent", now)
            else:
                i = h.invoke(number, "read", (item,), (None,), "consistent", now)
            try:
                if writing:
                    served = await router.write(item, value)
                    h.ok(i, rt.now_ns(), node=served)
                else:
                    seen, served = await router.read(item)
                    h.ok(i, rt.now_ns(), (seen,), node=served)
            except Unavailable as err:
                h.info(i, rt.now_ns(), str(err))
            except StoreError as err:
                h.fail(i, rt.now_ns(), str(err))
            else:
                if item[0] == "o":
                    self.hit(obj, region, rt.now_ns())
            if self.progress is not None and number == 0:
                self.progress((rt.now_ns() - self.t0_ns) / max(1, self.end_ns - self.t0_ns))
            if cfg.think_ms:
                await rt.sleep_ns(int(cfg.think_ms * NS_PER_MS))

    def hit(self, obj: int, region: int, now_ns: int) -> None:
        target = self.policy.hit(obj, region, (now_ns - self.t0_ns) / NS_PER_MS)
        if (target is None or target == self.owner[obj] or obj in self.inflight
                or len(self.inflight) >= self.cfg.max_inflight or now_ns >= self.end_ns):
            return
        self.inflight.add(obj)
        self.tasks.append(self.deploy.runtime.spawn(self.move(obj, target)))

    async def move(self, obj: int, target: int) -> None:
        rt, h = self.deploy.runtime, self.history
        item = f"o{obj}"
        source = self.names[self.owner[obj]]
        i = h.invoke(MIGRATOR, "cas", (item,), (f"{source}->{self.names[target]}",),
                     "consistent", rt.now_ns())
        try:
            m = await migrate(self.migrators[source], rt, self.home_of(item), item, source,
                              self.names[target])
        except StoreError as err:
            # left frozen or pending: the next access finishes or undoes it
            h.info(i, rt.now_ns(), str(err))
        else:
            self.migrations.append(m)
            if m.outcome == "moved":
                self.owner[obj] = target
                h.ok(i, rt.now_ns(), node=m.outcome)
            else:
                h.fail(i, rt.now_ns(), m.outcome)
            self.policy.moved(obj, self.owner[obj])
        finally:
            self.inflight.discard(obj)

    async def final_reads(self, conns: Conns) -> None:
        rt = self.deploy.runtime
        router = Router(conns, rt, self.home_of, self.cfg.live)
        self.routers.append(router)
        items = [f"{g}{obj}" for obj in range(self.cfg.objects) for g in "os"]
        await rt.gather(*(self.final_read(router, item) for item in items))

    async def final_read(self, router: Router, item: str) -> None:
        rt, h = self.deploy.runtime, self.history
        i = h.invoke(FINAL, "read", (item,), (None,), "consistent", rt.now_ns())
        try:
            seen, served = await router.read(item)
        except StoreError as err:
            h.info(i, rt.now_ns(), str(err))
        else:
            h.ok(i, rt.now_ns(), (seen,), node=served)
            if item[0] == "o":
                self.owner[int(item[1:])] = self.names.index(served)


async def run_live(deploy: Deployment, cfg: LiveConfig, policy_name: str,
                   make: PolicyFactory, progress: Callable[[float], None] | None = None,
                   history: History | None = None) -> tuple[LiveResult, History]:
    """Run the workload of the module docstring on ``deploy`` with the policy ``make``
    builds; return its results and history. ``progress(fraction)`` is called as it runs;
    ``history`` (default: a new one) receives the ops as they happen, so a caller keeps
    what was recorded if the run is interrupted."""
    cfg.check()
    names = list(deploy.regions.regions)
    homes = homes_for(names, cfg.objects, cfg.seed)
    run = _Run(deploy, cfg, make(names, list(homes)), names, homes,
               history=history if history is not None else History(), owner=list(homes),
               progress=progress)
    rt = deploy.runtime
    # every session at once: on WAN links each connection check costs a round trip
    places = [z for z in range(len(names)) for _ in range(cfg.clients)]
    opened = await rt.gather(*(deploy.conns(names[z]) for z in [0, *range(len(names)),
                                                                  *places]))
    setup = opened[0]
    run.migrators = dict(zip(names, opened[1:1 + len(names)], strict=True))
    clients = [(n, z, c) for n, (z, c) in enumerate(zip(places, opened[1 + len(names):],
                                                         strict=True))]
    await seed_objects(setup, {f"{g}{i}": names[homes[i]] for i in range(cfg.objects)
                               for g in "os"})
    run.t0_ns = rt.now_ns()
    run.end_ns = run.t0_ns + int(cfg.duration_s * NS_PER_S)
    await rt.gather(*(run.client(n, z, c) for n, z, c in clients))
    for task in list(run.tasks):  # migrations still running end within their calls' timeouts
        if not task.done():
            await task
    await run.final_reads(setup)
    return summarize(run, policy_name), run.history


def _windows(run: _Run) -> list[dict[str, float]]:
    h, cfg = run.history, run.cfg
    types, inv, done = h.types(), h.column("invoke_ns"), h.column("complete_ns")
    proc = h.column("process")
    step = int(cfg.window_s * NS_PER_S)
    n = max(1, math.ceil((run.end_ns - run.t0_ns) / step))
    out = []
    client = (types == 1) & (proc >= 0)
    managed = np.array([k[0][0] == "o" for k in h.keys], dtype=bool)
    lat_ms = (done - inv) / NS_PER_MS
    slot = (inv - run.t0_ns) // step
    moved = [m for m in run.migrations if m.outcome == "moved"]
    for w in range(n):
        sel = client & (slot == w)
        a, b = lat_ms[sel & managed], lat_ms[sel & ~managed]
        out.append({"t_s": w * cfg.window_s,
                    "managed_mean_ms": float(a.mean()) if len(a) else float("nan"),
                    "static_mean_ms": float(b.mean()) if len(b) else float("nan"),
                    "accesses": int(sel.sum()),
                    "migrations": sum(1 for m in moved
                                      if (m.end_ns - run.t0_ns) // step == w)})
    return out


def settled_latency_ms(h: History, from_ns: int) -> dict[str, tuple[float, float, int]]:
    """Return {"managed"|"static": (mean ms, p99 ms, count)} over the acknowledged client
    accesses invoked at or after ``from_ns`` to managed (``o``) and static (``s``) objects
    (nan when there are none)."""
    types, inv, done = h.types(), h.column("invoke_ns"), h.column("complete_ns")
    sel = (types == 1) & (h.column("process") >= 0) & (inv >= from_ns)
    managed = np.array([k[0][0] == "o" for k in h.keys], dtype=bool)
    lat_ms = (done - inv) / NS_PER_MS
    out = {}
    for name, lat in (("managed", lat_ms[sel & managed]), ("static", lat_ms[sel & ~managed])):
        out[name] = ((float(lat.mean()), float(np.percentile(lat, 99)), len(lat)) if len(lat)
                     else (float("nan"), float("nan"), 0))
    return out


def summarize(run: _Run, policy_name: str) -> LiveResult:
    """Return the results of a finished run."""
    h, cfg = run.history, run.cfg
    settle_ns = run.t0_ns + int(cfg.settle_share * cfg.duration_s * NS_PER_S)
    settled = settled_latency_ms(h, settle_ns)
    managed, static = settled["managed"][0], settled["static"][0]
    types = h.types()
    clientish = h.column("process") >= 0
    managed_ops = int(sum(1 for i in np.flatnonzero(clientish & (types == 1)).tolist()
                          if h.keys[i][0][0] == "o"))
    check: LostWrites = lost_writes(h)
    outcomes: dict[str, int] = {}
    for m in run.migrations:
        outcomes[m.outcome] = outcomes.get(m.outcome, 0) + 1
    crashed = sum(1 for i in range(len(h)) if h.process[i] == MIGRATOR and h.type[i] == 3)
    if crashed:
        outcomes["unknown"] = crashed
    ops = {name: int(((types == code) & clientish).sum())
           for code, name in ((1, "ok"), (2, "fail"), (3, "info"))}
    counts = np.bincount(np.array(run.owner), minlength=len(run.names))
    return LiveResult(
        deployment=run.deploy.describe(),
        config={**asdict(cfg), "live": asdict(cfg.live)},
        policy=policy_name,
        windows=_windows(run),
        settled_from_s=cfg.settle_share * cfg.duration_s,
        managed_mean_ms=managed, static_mean_ms=static,
        managed_p99_ms=settled["managed"][1], static_p99_ms=settled["static"][1],
        ratio=managed / static if static > 0 else float("nan"),
        migrations=outcomes,
        migrations_moved=outcomes.get("moved", 0),
        migrations_per_1k=1000.0 * outcomes.get("moved", 0) / max(1, managed_ops),
        lost_writes=len(check.lost), unknown_reads=len(check.unknown),
        ops=ops,
        redirects=sum(r.redirects for r in run.routers),
        recoveries=sum(r.recoveries for r in run.routers),
        final_share=[float(c) / cfg.objects for c in counts])
