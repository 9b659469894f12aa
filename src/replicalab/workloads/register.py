"""Jepsen's register test: clients read, write and compare-and-set a few keys; the history
is checked for linearizability with the ``kv`` model (one register per key).

Each client loops until the run ends: it picks a key (among those with fewer than
``per_key`` clients on them, so no key's history gets more concurrent than the checker
can search), an operation by the mix, and issues it:

* read — an eventual or a consistent read (``--consistency``) from its reader session;
* write — a new value, unique in the run (``<seq>.<client>@<t_ns>``, as every probe
  writes, so lost acknowledged writes are counted too);
* cas — compare-and-set from the value the client last saw on that key or the last value
  any client wrote there (half and half) to a new unique value; with nothing known yet,
  a write.

A client whose operation ended ``info`` (outcome unknown) carries on as a new process
(process + clients), as in Jepsen: the unknown operation stays open forever in the
history and its old process never issues another. It first waits ``info_backoff_s``:
every open write multiplies the orders the checker must consider, and a crashed node
refusing connections would otherwise yield one per client per pause. A client whose
session is refused at the start (a scheduled crash may begin before a slow machine has
connected every client) tries again after the same pause, and issues nothing if the run
ends first. Stores without
conditional writes (``sim://quorum``) get writes in place of cas, and the results say so.

Reads and writes may come from different places: ``writer_region`` places the session
that writes and cas-es, ``reader_region`` the session that reads (e.g. reads at a
partitioned follower while writes go through the leader's region).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from replicalab.errors import ParameterError
from replicalab.history import History, OpType, encode_value
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Client, Feature, Store
from replicalab.workloads.base import Flag, ProbeOptions, Workload, deadline, envelope
from replicalab.workloads.recorder import Recorder

DOMAIN = "register"
OPS = ("read", "write", "cas")
MAX_CLIENTS = 1000
MAX_KEYS = 10_000
_IDLE_NS = 1_000_000
"""How long a client waits for a key to free up when every key is at ``per_key``."""


def parse_mix(text: str) -> dict[str, float]:
    """Return the operation mix ``read=50,write=25,cas=25`` as fractions summing to 1."""
    weights: dict[str, float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in OPS:
            raise ParameterError("mix", f"{text!r}: give op=weight pairs of read, write and "
                                        "cas, e.g. read=50,write=25,cas=25")
        try:
            w = float(value)
        except ValueError:
            raise ParameterError("mix", f"{text!r}: weight {value!r} of {name} is not a "
                                        "number") from None
        if w < 0 or not math.isfinite(w):
            raise ParameterError("mix", f"{text!r}: weight of {name} must be a non-negative "
                                        "number")
        weights[name] = weights.get(name, 0.0) + w
    total = sum(weights.values())
    if total <= 0:
        raise ParameterError("mix", f"{text!r}: give at least one positive weight, "
                                    "e.g. read=50,write=25,cas=25")
    if weights.get("write", 0) + weights.get("cas", 0) <= 0:
        raise ParameterError("mix", f"{text!r}: without writes or cas there is nothing to "
                                    "check; give write or cas a positive weight")
    return {name: weights.get(name, 0.0) / total for name in OPS}


@dataclass(frozen=True)
class RegisterConfig:
    """Keys, clients, operation mix, placement and pacing of the register test.

    ``rate`` is operations per second per client (Jepsen's stagger: a random pause of
    0..2/rate s after each operation; 0 = back to back); ``ops`` ends the run after that
    many client operations (0 = after ``--duration``); ``per_key`` bounds the clients on one
    key at a time (0 = clients / keys rounded up); ``check_timeout_s`` bounds the
    linearizability search (then the verdict is "unknown"); ``timeline_ops`` bounds the
    operations drawn per key in the report's timeline; ``info_backoff_s`` is how long a
    client waits after an operation whose outcome is unknown.
    """

    keys: int = 5
    clients: int = 10
    mix: str = "read=50,write=25,cas=25"
    writer_region: str | None = None
    reader_region: str | None = None
    rate: float = 10.0
    ops: int = 0
    per_key: int = 0
    check_timeout_s: float = 60.0
    timeline_ops: int = 60
    info_backoff_s: float = 1.0

    def check(self) -> None:
        """Raise ValueError naming the first invalid option and its fix."""
        if not 1 <= self.keys <= MAX_KEYS:
            raise ParameterError("keys", f"{self.keys}: give 1 to {MAX_KEYS:,}")
        if not 1 <= self.clients <= MAX_CLIENTS:
            raise ParameterError("clients", f"{self.clients}: give 1 to {MAX_CLIENTS:,}")
        parse_mix(self.mix)
        if self.rate < 0 or not math.isfinite(self.rate):
            raise ParameterError("op_rate", f"{self.rate}: give operations per second per "
                                            "client, or 0 for back to back")
        if self.ops < 0:
            raise ParameterError("ops", f"{self.ops} must not be negative (0: run for "
                                        "{duration})", {"duration": "duration"})
        if self.per_key < 0 or (self.per_key and self.per_key * self.keys < self.clients):
            raise ValueError(f"per_key {self.per_key} x keys {self.keys} must hold all "
                             f"{self.clients} clients (0: clients / keys rounded up)")
        if not self.check_timeout_s > 0:
            raise ParameterError("check_timeout", f"must be positive (got "
                                                  f"{self.check_timeout_s})")
        if self.info_backoff_s < 0:
            raise ValueError(f"info_backoff_s {self.info_backoff_s} must not be negative")
        if self.timeline_ops < 2:
            raise ValueError(f"timeline_ops {self.timeline_ops} must be at least 2")

    @property
    def key_bound(self) -> int:
        """Return the most clients that work on one key at a time."""
        return self.per_key or -(-self.clients // self.keys)


def key_name(tag: str, k: int) -> str:
    """Return the element of key ``k`` in the run tagged ``tag``."""
    return f"{DOMAIN}/{tag}-k{k}/v"


def required_features(opts: ProbeOptions, cfg: RegisterConfig) -> set[Feature]:
    """Return the store features the run needs (cas falls back to writes without them)."""
    return {Feature.CONSISTENT_READ if opts.consistency == "consistent"
            else Feature.EVENTUAL_READ}


class _Keys:
    """Which keys have room for another client, and what was last written to each."""

    def __init__(self, names: list[str], bound: int) -> None:
        self.names = names
        self.bound = bound
        self.busy = [0] * len(names)
        self.last_written: list[str | None] = [None] * len(names)

    def take(self, rng: np.random.Generator) -> int | None:
        free = [k for k, n in enumerate(self.busy) if n < self.bound]
        if not free:
            return None
        k = free[int(rng.integers(len(free)))]
        self.busy[k] += 1
        return k


@dataclass
class _Run:
    """What the clients of one run share."""

    rt: Runtime
    h: History
    rec: Recorder
    keys: _Keys
    mix: np.ndarray
    cas_ok: bool
    consistent: bool
    cfg: RegisterConfig
    seed: int
    stop_ns: int
    left: int
    """Operations still to issue (unused when ``cfg.ops`` is 0)."""


async def _client(run: _Run, c: int, writer: Client, reader: Client) -> None:
    """Run client ``c`` until the run's end or until its operation budget is spent."""
    rt, h, rec, keys, cfg, stop_ns = run.rt, run.h, run.rec, run.keys, run.cfg, run.stop_ns
    rng = np.random.default_rng([run.seed, c])
    process = c
    seen: dict[int, str | None] = {}
    seq = 0
    gap_ns = 2 * NS_PER_S / cfg.rate if cfg.rate > 0 else 0.0
    while rt.now_ns() < stop_ns and not (cfg.ops and run.left <= 0):
        k = keys.take(rng)
        if k is None:
            await rt.sleep_ns(_IDLE_NS)
            continue
        run.left -= 1
        key = keys.names[k]
        op = OPS[int(rng.choice(3, p=run.mix))]
        # cas from what this client last saw there or from the key's latest write, half
        # and half: the first is often stale (eventual reads), the second often current
        mine, latest = seen.get(k), keys.last_written[k]
        expect = mine if mine is not None and (latest is None or rng.random() < 0.5) else latest
        if op == "cas" and (not run.cas_ok or expect is None):
            op = "write"
        # Both runtimes run a coroutine up to its first await at once, so the row the
        # recorder creates next is row len(h): its completion tells info apart from fail.
        row = len(h)
        if op == "read":
            res = await rec.read(reader, process, (key,), run.consistent)
            if res is not None:
                seen[k] = res.values[0]
        else:
            seq += 1
            value = encode_value(c, seq, rt.now_ns())
            keys.last_written[k] = value
            if await rec.write(writer, process, {key: value},
                               expect={key: expect} if op == "cas" else None):
                seen[k] = value
        keys.busy[k] -= 1
        if h.type[row] == OpType.INFO:
            process += cfg.clients  # the unknown op stays open: its process never returns
            # back off as a reconnecting client would: a node refusing connections would
            # otherwise turn every pause into one more open op for the checker to place
            backoff = min(int(cfg.info_backoff_s * NS_PER_S), stop_ns - rt.now_ns())
            if backoff > 0:
                await rt.sleep_ns(backoff)
            continue
        if gap_ns:
            pause = int(rng.uniform(0.0, gap_ns))
            if pause > 0 and rt.now_ns() + pause < stop_ns:
                await rt.sleep_ns(pause)


async def generate(store: Store, h: History, opts: ProbeOptions, cfg: RegisterConfig,
                   rec: Recorder) -> None:
    """Drive ``cfg.clients`` clients until ``opts.duration_s`` has passed (or ``cfg.ops``
    operations were issued) on the store's runtime."""
    rt = store.runtime
    tag = format(rt.now_ns(), "x")  # keys of this run only: a shared cluster keeps old ones
    run = _Run(rt=rt, h=h, rec=rec,
               keys=_Keys([key_name(tag, k) for k in range(cfg.keys)], cfg.key_bound),
               mix=np.array([parse_mix(cfg.mix)[o] for o in OPS]),
               cas_ok=Feature.CONDITIONAL_WRITE in store.info.features,
               consistent=opts.consistency == "consistent", cfg=cfg, seed=opts.seed,
               stop_ns=deadline(rt, opts.duration_s), left=cfg.ops)

    backoff_ns = max(int(cfg.info_backoff_s * NS_PER_S), _IDLE_NS)
    sessions: list[tuple[Client, Client] | None] = [None] * cfg.clients

    async def session(c: int) -> None:
        writer = await _connect(store, cfg.writer_region, run.stop_ns, backoff_ns)
        reader = (writer if cfg.reader_region == cfg.writer_region or writer is None
                  else await _connect(store, cfg.reader_region, run.stop_ns, backoff_ns))
        if writer is None or reader is None:
            if writer is not None:
                await writer.close()
            return  # the run ended before this client could connect: it issues nothing
        sessions[c] = writer, reader
        await _client(run, c, writer, reader)

    # all at once: a session to a WAN follower takes a round trip to the leader, and the
    # fault schedule's clock is already running
    try:
        await rt.gather(*(session(c) for c in range(cfg.clients)))
    finally:
        await rt.gather(*(c.close() for s in sessions if s is not None
                          for c in ((s[0],) if s[1] is s[0] else s)))


async def _connect(store: Store, region: str | None, stop_ns: int,
                   backoff_ns: int) -> Client | None:
    """Return a session placed in ``region``, connecting again every ``backoff_ns`` while
    the node refuses (a scheduled crash may begin before a slow machine got every client
    connected); None if the run ended first. The store answered before the run began
    (the runner's preflight), so a refusal here is the fault's, not a wrong address."""
    rt = store.runtime
    while True:
        try:
            return await store.connect(region)
        except ValueError:
            wait = min(backoff_ns, stop_ns - rt.now_ns())
            if wait <= 0:
                return None
            await rt.sleep_ns(wait)


def check(h: History, store_url: str, opts: ProbeOptions, cfg: RegisterConfig,
          features: frozenset[Feature] = frozenset()) -> dict[str, Any]:
    """Return the register results: the linearizability verdict of the ``kv`` model, per
    key, with counterexamples, explanations and the timeline data of the report."""
    from replicalab.workloads.register_check import linearizability_results

    out = envelope("register", store_url, opts, h)
    out["config"] = {**asdict(opts), **asdict(cfg)}
    if Feature.CONDITIONAL_WRITE not in features and parse_mix(cfg.mix)["cas"] > 0:
        out["notes"].append("the store has no conditional writes: cas operations were "
                            "issued as writes")
    out.update(linearizability_results(h, cfg.check_timeout_s, cfg.timeline_ops))
    return out


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: the verdict, keys not linearizable or unknown,
    operations checked, and why each failing key failed."""
    lin = results["linearizability"]
    rows = [("linearizable (kv model)", {True: "yes", False: "NO"}.get(lin["valid"],
                                                                      str(lin["valid"]))),
            ("keys not linearizable / unknown",
             f"{lin['keys_not_linearizable']:,} / {lin['keys_unknown']:,} of {lin['keys']:,}"),
            ("operations checked", f"{lin['ops']:,}")]
    rows += [(f"why {part['key']}", part["explanation"]) for part in lin["parts"]
             if part.get("explanation")]
    return rows


WORKLOAD = Workload(
    "register", RegisterConfig, generate, check, required_features,
    flags=(Flag("writer_region", str, "region of every client's writes and cas"),
           Flag("reader_region", str, "region of every client's reads"),
           Flag("ops", int, "stop after this many operations",
                default="run for --duration"),
           Flag("clients", int, "clients"),
           Flag("keys", int, "keys (one register each)"),
           Flag("mix", str, "operation mix"),
           Flag("op_rate", float, "operations per second per client (0: back to back)",
                field="rate"),
           Flag("check_timeout", str, "time limit of the linearizability check (then: "
                "unknown)", field="check_timeout_s", duration=True)),
    summary_rows=summary_rows)
