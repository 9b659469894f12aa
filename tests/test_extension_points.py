"""Every extension point is one module plus one registry line: a toy of each kind is defined
here, in the test module only, and plugged in by one line each (``plug_in``); then the real
command line, in a process of its own, lists it in ``--help`` and runs it end to end (run
directory, results, terminal summary, report). Nothing in src/ names a toy.

Toys: a workload (``echo-toy``: write a value, read it back), a placement policy
(``toy-last``: move an object to the region of every k-th access), a store adapter
(``toymem://``: a dict in virtual time), a queue backend (``toyq://``: an in-memory
visibility-timeout queue in virtual time), a linearizability model (``toy-stack``: a
LIFO stack, ``replicalab check --model toy-stack``), a store kind (``toykv``: a tiny TCP
key-value server run as real local processes by its own cluster driver, its adapter and its
documented promises; ``probe``, ``compare``, ``scorecard --kinds`` and the conformance suite
run it), a scorecard property (``toy-echo``: the echo workload graded on each store) and a
protocol model (``toy-mm1``: an M/M/1 queue, ``model validate`` checks it against its
discrete-event twin).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

import replicalab
from replicalab.checkers.linearizability import registry as lin_registry
from replicalab.checkers.linearizability.model import Model
from replicalab.checkers.linearizability.ops import LinOp
from replicalab.cluster import kinds as store_kinds
from replicalab.cluster import process
from replicalab.cluster.kinds import Promise, StoreKind
from replicalab.cluster.ports import wait_listening
from replicalab.cluster.state import Cluster, Node, store_url
from replicalab.experiments import cells, measure
from replicalab.experiments import properties as scorecard_properties
from replicalab.experiments.property import Context, Property
from replicalab.history import History, encode_value
from replicalab.models import registry as model_registry
from replicalab.models.base import Curve, point
from replicalab.models.registry import ModelSpec
from replicalab.placement import policies
from replicalab.placement.policies import PolicyBase
from replicalab.queues import registry as queue_registry
from replicalab.queues.base import DeadLetter, Delivery, QueueInfo, StaleReceipt
from replicalab.runtime import RealRuntime, VirtualRuntime
from replicalab.stores import (
    ABSENT,
    ConditionFailed,
    Feature,
    ReadResult,
    StoreInfo,
    Unavailable,
    WriteResult,
)
from replicalab.stores import registry as store_registry
from replicalab.stores.base import ALL_FEATURES  # every feature but transactions
from replicalab.stores.url import Endpoint, parse_store_url
from replicalab.workloads import registry as workload_registry
from replicalab.workloads.base import Flag, ProbeOptions, Workload, envelope
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.runner import ProbeSpec

TESTS = Path(__file__).resolve().parent
SRC = Path(replicalab.__file__).resolve().parent
TOY_NAMES = ("echo-toy", "toy-last", "toymem", "toyq", "toy-stack", "toykv", "toy-echo",
             "toy-mm1", "test_extension_points")
OP_NS = 1_000_000  # every toy store or queue call takes 1 ms of virtual time


def plug_in() -> None:
    """The one line per extension point that makes each toy available."""
    workload_registry.register("echo-toy", __name__)
    policies.register(ToyLast)
    store_registry.register("toymem", ToyStore)
    queue_registry.register("toyq", ToyQueue)
    lin_registry.register_model(ToyStack)
    store_kinds.register(TOYKV)
    scorecard_properties.register(TOY_ECHO)
    model_registry.register(TOY_MM1)


# ---------------------------------------------------------------- the toy workload


@dataclass(frozen=True)
class EchoConfig:
    """How many write-then-read rounds the client makes."""

    rounds: int = 10

    def check(self) -> None:
        """Raise ValueError for fewer than one round."""
        if self.rounds < 1:
            raise ValueError(f"--rounds {self.rounds} must be at least 1")


KEY = "echo/item/value"


async def echo_generate(store: Any, h: History, opts: ProbeOptions, cfg: EchoConfig,
                        rec: Recorder) -> None:
    """Write a unique value, then read it back consistently, ``rounds`` times."""
    client = await store.connect()
    for seq in range(1, cfg.rounds + 1):
        await rec.write(client, 0, {KEY: encode_value(0, seq, store.runtime.now_ns())})
        await rec.read(client, 0, (KEY,), True)


def echo_check(h: History, store_url: str, opts: ProbeOptions, cfg: EchoConfig,
               features: frozenset[Feature]) -> dict[str, Any]:
    """Return how many reads returned the value written just before them."""
    out = envelope("echo-toy", store_url, opts, h)
    last, echoed, reads = None, 0, 0
    for i in range(len(h)):
        if h.process[i] != 0 or h.types()[i] != 1:
            continue
        if h.f[i] == h.f_code("write"):
            last = h.values[i][0]
        elif h.f[i] == h.f_code("read"):
            reads += 1
            echoed += h.values[i][0] == last
    out["config"] = asdict(cfg)
    out["echo"] = {"reads": reads, "echoed": echoed}
    return out


def echo_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the toy's terminal summary row."""
    e = results["echo"]
    return [("reads that echoed the last write", f"{e['echoed']} of {e['reads']}")]


def echo_section(page: Any, results: Mapping[str, Any]) -> None:
    """Add the toy's report section."""
    page.heading("Echo toy")
    page.para(f"{results['echo']['echoed']} of {results['echo']['reads']} reads echoed the "
              "last write.")


WORKLOAD = Workload("echo-toy", EchoConfig, echo_generate, echo_check,
                    lambda _o, _c: {Feature.CONSISTENT_READ},
                    flags=(Flag("rounds", int, "write-then-read rounds"),),
                    summary_rows=echo_rows,
                    report_section="test_extension_points:echo_section")


# ---------------------------------------------------------------- the toy placement policy


class ToyLast(PolicyBase):
    """Move an object to the region of every ``k``-th access to it (no fast path)."""

    name = "toy-last"
    PARAMS = {"k": int}  # noqa: RUF012 - the registry reads the class attribute
    color = "#bcbd22"

    def __init__(self, regions: Any, owner: Sequence[int], k: int = 4) -> None:
        super().__init__(regions, owner)
        self.k = k
        self.params = {"k": k}
        self.seen = [0] * len(self.owner)

    def hit(self, obj: int, region: int, t_ms: float) -> int | None:
        """Return the access's region on every k-th access, unless it owns the object."""
        self.seen[obj] += 1
        if self.seen[obj] % self.k == 0 and region != self.owner[obj]:
            return region
        return None


# ---------------------------------------------------------------- the toy store adapter


class ToyClient:
    """A session of the dict store: one call at a time, each 1 ms of virtual time."""

    def __init__(self, store: ToyStore) -> None:
        self.store = store

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        await self.store.runtime.sleep_ns(OP_NS)
        return ReadResult(tuple(self.store.data.get(k) for k in keys), "dict")

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        await self.store.runtime.sleep_ns(OP_NS)
        for key, want in (expect or {}).items():
            have = self.store.data.get(key)
            if (want is ABSENT and have is not None) or (want is not ABSENT and have != want):
                raise ConditionFailed(f"{key} is {have!r}")
        self.store.data.update(values)
        return WriteResult("dict")

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        await self.store.runtime.sleep_ns(OP_NS)
        for k in keys:
            self.store.data.pop(k, None)
        return WriteResult("dict")

    async def close(self) -> None:
        return None


class ToyStore:
    """``toymem://NAME``: one dict, every read current, in virtual time."""

    def __init__(self, url: str, seed: int) -> None:
        self.runtime = VirtualRuntime()
        self.data: dict[str, str] = {}
        self.info = StoreInfo(url=url, kind="toymem", features=ALL_FEATURES,
                              eventual_read_served_by="the one dict")

    async def connect(self, region: str | None = None) -> ToyClient:
        return ToyClient(self)

    async def close(self) -> None:
        return None


# ---------------------------------------------------------------- the toy queue backend


@dataclass
class _Message:
    id: str
    body: str
    visible_ns: int = 0
    receipt: str = ""
    count: int = 0


class ToyQueueClient:
    """A session of the in-memory queue; every call takes 1 ms of virtual time."""

    def __init__(self, queue: ToyQueue) -> None:
        self.q = queue

    async def send(self, body: str, **_: Any) -> str:
        await self.q.runtime.sleep_ns(OP_NS)
        mid = f"m{next(self.q.ids)}"
        self.q.messages[mid] = _Message(mid, body)
        return mid

    async def receive(self, max_messages: int, visibility_timeout_s: float) -> list[Delivery]:
        await self.q.runtime.sleep_ns(OP_NS)
        now, out = self.q.runtime.now_ns(), []
        for m in list(self.q.messages.values()):
            if len(out) == max_messages:
                break
            if m.visible_ns > now:
                continue
            m.count += 1
            if m.count > self.q.info.max_receives:
                self.q.dead.append(DeadLetter(m.id, m.body, m.count - 1))
                del self.q.messages[m.id]
                continue
            m.receipt = f"{m.id}.{m.count}"
            m.visible_ns = now + int(visibility_timeout_s * 1e9)
            out.append(Delivery(m.id, m.body, m.receipt, m.count))
        return out

    def _current(self, receipt: str) -> _Message:
        m = self.q.messages.get(receipt.partition(".")[0])
        if m is None or m.receipt != receipt:
            raise StaleReceipt(receipt)
        return m

    async def delete(self, receipt: str) -> None:
        await self.q.runtime.sleep_ns(OP_NS)
        del self.q.messages[self._current(receipt).id]

    async def change_visibility(self, receipt: str, timeout_s: float) -> None:
        await self.q.runtime.sleep_ns(OP_NS)
        self._current(receipt).visible_ns = self.q.runtime.now_ns() + int(timeout_s * 1e9)

    async def close(self) -> None:
        return None


class ToyQueue:
    """``toyq://NAME``: messages in a dict, in virtual time."""

    def __init__(self, url: str, seed: int) -> None:
        self.runtime = VirtualRuntime()
        self.info = QueueInfo(url=url, kind="toyq", max_receives=10)
        self.messages: dict[str, _Message] = {}
        self.dead: list[DeadLetter] = []
        self.ids = itertools.count(1)

    async def connect(self) -> ToyQueueClient:
        return ToyQueueClient(self)

    async def dead_letters(self) -> list[DeadLetter]:
        return list(self.dead)

    async def depth(self) -> tuple[int, int]:
        now = self.runtime.now_ns()
        hidden = sum(m.visible_ns > now for m in self.messages.values())
        return len(self.messages) - hidden, hidden

    async def close(self) -> None:
        return None


# ---------------------------------------------------------------- the toy linearizability model


class ToyStack(Model):
    """A LIFO stack: ``push`` a value, ``pop`` the newest one (nil when empty)."""

    name = "toy-stack"
    summary = "a stack: push x, pop (returns the newest, nil when empty)"
    ops = ("push", "pop")

    def init(self) -> tuple[Any, ...]:
        return ()

    def step(self, state: tuple[Any, ...], op: LinOp) -> tuple[bool, tuple[Any, ...]]:
        if op.f == "push":
            return True, (*state, op.value)
        if op.outcome == "info":  # what it popped is unknown: the newest value, if any
            return True, state[:-1]
        if op.value is None:
            return not state, state
        return bool(state) and state[-1] == op.value, state[:-1]


# ---------------------------------------------------------------- the toy store kind


def serve_toykv(port: int) -> None:
    """Run the toy key-value server on 127.0.0.1:``port`` until killed: one JSON request
    per line (read, write with conditions, delete), one JSON answer per line; one event
    loop, so every request is atomic."""
    data: dict[str, str] = {}

    def answer(req: dict[str, Any]) -> dict[str, Any]:
        if req["op"] == "read":
            return {"values": [data.get(k) for k in req["keys"]]}
        if req["op"] == "write":
            for key, want in (req.get("expect") or {}).items():
                if data.get(key) != want:  # want None: the key must not exist
                    return {"failed": f"{key} is {data.get(key)!r}"}
            data.update(req["values"])
            return {"ok": True}
        for k in req["keys"]:
            data.pop(k, None)
        return {"ok": True}

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write((json.dumps(answer(json.loads(line))) + "\n").encode())
            await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(session, "127.0.0.1", port)
        await server.serve_forever()

    asyncio.run(main())


class ToyKVClient:
    """One connection to the toy server (through the client link of the client's region);
    a call unanswered within the store's timeout raises Unavailable and the next call
    reconnects."""

    def __init__(self, store: ToyKV, at: Endpoint) -> None:
        self.store, self.at = store, at
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
            return await asyncio.wait_for(roundtrip(), self.store.timeout_s)
        except (TimeoutError, OSError) as err:
            await self.close()
            raise Unavailable(f"toykv: {type(err).__name__}: {err}") from None

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        return ReadResult(tuple((await self._call({"op": "read", "keys": list(keys)}))
                                ["values"]), "n0")

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        want = {k: None if v is ABSENT else v for k, v in (expect or {}).items()}
        got = await self._call({"op": "write", "values": dict(values), "expect": want})
        if "failed" in got:
            raise ConditionFailed(got["failed"])
        return WriteResult("n0")

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        await self._call({"op": "delete", "keys": list(keys)})
        return WriteResult("n0")

    async def close(self) -> None:
        if self.conn is not None:
            self.conn[1].close()
            self.conn = None


class ToyKV:
    """``toykv://127.0.0.1:PORT?standby=...&regions=SET&node_regions=...``: the adapter of
    the toy server (one copy of the data on n0: every read is current; a write of several
    keys is one request, so atomic). A client placed in a region reaches n0 through that
    region's client link (stores/url.py), paying the WAN."""

    def __init__(self, url: str, seed: int) -> None:
        self.url = parse_store_url(url, "standby")
        self.timeout_s = self.url.timeout_s
        self.runtime = RealRuntime()
        self.info = StoreInfo(url=url, kind="toykv", features=ALL_FEATURES,
                              regions=self.url.region_names(),
                              eventual_read_served_by="the one server, n0")

    async def connect(self, region: str | None = None) -> ToyKVClient:
        return ToyKVClient(self, self.url.via(self.url.nodes[0], self.url.placed(region)))

    async def close(self) -> None:
        return None


class ToyKVDriver:
    """Starts toy servers as local processes (``python -c``, this module's server); n0 is
    the primary every client talks to, the others stand by."""

    kind = "toykv"
    ports_per_node = 1

    def check_installed(self) -> None:
        """The server is this module: nothing to install."""

    def start_node(self, c: Cluster, node: Node, root: Path) -> None:
        boot = (f"import sys; sys.path.insert(0, {str(TESTS)!r}); import test_extension_points"
                f" as t; t.serve_toykv({node.port})")
        Path(node.data_dir).mkdir(parents=True, exist_ok=True)
        node.pid = process.start([sys.executable, "-c", boot],
                                 Path(node.data_dir) / "server.log")
        if not wait_listening(node.port, 20):
            raise ValueError(f"toykv n{node.index} did not listen on port {node.port}")

    def start(self, c: Cluster, links: Any, root: Path) -> None:
        for node in c.nodes:
            node.role = "primary" if node.index == 0 else "standby"
            self.start_node(c, node, root)

    def url(self, c: Cluster) -> str:
        return store_url(c, "toykv", "standby")  # clients in any region reach n0

    def status(self, c: Cluster) -> list[dict[str, str]]:
        return [{"node": f"n{n.index}", "region": n.region, "role": n.role} for n in c.nodes]


_TOY_DOC = "tests/test_extension_points.py (the toy's own rules)"
TOYKV = StoreKind(
    name="toykv", schemes=("toykv",), aliases=("toy-kv",), driver=ToyKVDriver, adapter=ToyKV,
    local_reads=False, strong_reads=True, promises={
        "consistency": Promise("one copy of the data: every read returns the last write",
                               _TOY_DOC),
        "availability": Promise("nothing is served without n0", _TOY_DOC),
        "transactionality": Promise("a request is applied whole: conditional and "
                                    "multi-key writes are atomic", _TOY_DOC)})


# ---------------------------------------------------------------- the toy scorecard property


def _echo_measure(ctx: Context) -> dict[str, Any]:
    """Run the echo workload once on the store and keep its counts."""
    assert ctx.target is not None
    run = measure.probe(ProbeSpec(store=ctx.target.url, workload="echo-toy",
                                  options=ProbeOptions(duration_s=30, seed=ctx.seed),
                                  config=EchoConfig(rounds=20)),
                        ctx.out, ctx.progress("echo rounds"))
    return {**run.results["echo"], "runs": [measure.rel(run, ctx.base)]}


def _echo_grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    grade = "green" if m["echoed"] == m["reads"] else "red"
    return cells.Cell(ctx.subject.label, "toy-echo", f"{m['echoed']} of {m['reads']} echoed",
                      grade, p.text, p.source, runs=m["runs"], figures=m,
                      chart={"title": "Reads that echoed", "bars": [
                          ["echoed", m["echoed"] / m["reads"] if m["reads"] else None]]})


TOY_ECHO = Property("toy-echo", "reads that echo the write before them", _echo_measure,
                    _echo_grade, lambda subject, plan, regions, asked: 1,
                    promise=lambda kind: Promise("a consistent read returns the write just "
                                                 "before it", _TOY_DOC))


# ---------------------------------------------------------------- the toy protocol model


@dataclass(frozen=True)
class MM1Params:
    """One server, Poisson arrivals, exponential service of mean ``service_ms``."""

    service_ms: float = 1.0

    def __post_init__(self) -> None:
        if not self.service_ms > 0:
            raise ValueError(f"service_ms {self.service_ms} must be positive")


def mm1_curve(p: MM1Params, loads: list[float]) -> Curve:
    """Return the closed form: mean time in system s / (1 - rho) at each load (req/s)."""
    pts = [point(lam, p.service_ms / (1 - rho) if rho < 1 else math.inf, rho)
           for lam in loads for rho in [lam * p.service_ms / 1000]]
    return Curve(f"M/M/1 s={p.service_ms:g} ms", pts, 1000 / p.service_ms)


def _mm1_sojourn_ms(p: MM1Params, lam: float, n: int, rng: np.random.Generator
                    ) -> tuple[np.ndarray, float]:
    """Simulate ``n`` requests through one FIFO server (each departs at max(arrival, last
    departure) + service): return their times in system (ms) and the last departure (ms)."""
    arrive = np.cumsum(rng.exponential(1000 / lam, n))
    service = rng.exponential(p.service_ms, n)
    done, last = np.empty(n), 0.0
    for i in range(n):
        last = max(arrive[i], last) + service[i]
        done[i] = last
    return done - arrive, last


def mm1_twin(p: MM1Params, loads: list[float], seed: int, rounds: int) -> Curve:
    """Return the discrete-event twin's curve: mean time in system measured per load, and
    the throughput its server sustains measured under ten times its capacity."""
    rng = np.random.default_rng(seed)
    pts = []
    for lam in loads:
        t, _ = _mm1_sojourn_ms(p, lam, rounds, rng)
        pts.append(point(lam, float(t.mean()), lam * p.service_ms / 1000))
    _, end_ms = _mm1_sojourn_ms(p, 10_000 / p.service_ms, rounds, rng)
    return Curve(f"M/M/1 twin s={p.service_ms:g} ms", pts, rounds / end_ms * 1000)


TOY_MM1 = ModelSpec("toy-mm1", "A toy: one M/M/1 server", "replicalab model toy-mm1",
                    MM1Params, mm1_curve, mm1_twin,
                    lambda: [("s=1 ms", MM1Params(1.0), [100.0, 300.0, 500.0, 900.0])])


# ---------------------------------------------------------------- the command line, plugged


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``replicalab ARGS`` in a process of its own with the toys plugged in."""
    boot = ("import sys; import test_extension_points as t; t.plug_in(); "
            "from replicalab.cli.main import main; sys.argv = ['replicalab', *sys.argv[1:]]; "
            "main()")
    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", boot, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def run_json(*args: str, cwd: Path) -> dict[str, Any]:
    """Run a command with ``--json --out`` and return its JSON object, checking that the run
    directory holds results.json equal to it and a report."""
    p = cli(*args, "--json", "--out", str(cwd / "runs"), cwd=cwd)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    run_dir = Path(out["run_dir"])
    saved = json.loads((run_dir / "results.json").read_text())
    assert {k: v for k, v in out.items() if k in saved} == saved
    assert Path(out["report"]).is_file() and Path(out["report"]).parent == run_dir
    return out


def test_nothing_in_src_names_a_toy():
    """The toys are plugged in from here alone: no file of the package mentions them."""
    hits = [f"{p.relative_to(SRC)}: {name}" for p in SRC.rglob("*.py")
            for name in TOY_NAMES if name in p.read_text()]
    assert not hits


def test_help_lists_every_toy(tmp_path: Path):
    probe = cli("probe", "--help", cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr
    assert "echo-toy" in probe.stdout and "--rounds" in probe.stdout  # the workload, its flag
    assert "toymem://" in probe.stdout  # the store
    placement = cli("placement", "simulate", "--help", cwd=tmp_path)
    assert "toy-last (k)" in placement.stdout, placement.stdout
    queue = cli("queue", "run", "--help", cwd=tmp_path)
    assert "toyq://" in queue.stdout, queue.stdout


def test_the_toy_workload_runs_end_to_end_on_the_toy_store(tmp_path: Path):
    out = run_json("probe", "--workload", "echo-toy", "--rounds", "7", "--store",
                   "toymem://one", cwd=tmp_path)
    assert out["workload"] == "echo-toy" and out["echo"] == {"reads": 7, "echoed": 7}
    config = json.loads((Path(out["run_dir"]) / "config.json").read_text())
    assert config["store"]["kind"] == "toymem"  # the toy store served the run
    rows = dict(out["tables"][0]["rows"])
    assert rows["reads that echoed the last write"] == "7 of 7"
    report = Path(out["report"]).read_text()
    assert "<h2>Echo toy</h2>" in report and "7 of 7 reads echoed" in report
    again = cli("report", out["run_dir"], cwd=tmp_path)  # re-checked from the saved history
    assert again.returncode == 0 and "agrees with the saved results" in again.stdout


def test_a_shipped_workload_runs_on_the_toy_store(tmp_path: Path):
    out = run_json("probe", "--store", "toymem://two", "--duration", "1m", cwd=tmp_path)
    assert out["ops"]["reads"] > 1000 and out["fresh_by_range"][0]["p"] == 1.0
    assert "toymem://two" in Path(out["report"]).read_text()


def test_the_toy_policy_runs_in_the_simulator(tmp_path: Path):
    # k=3 moves objects towards their users; k=10**9 never moves one (static placement)
    out = run_json("placement", "simulate", "--policies", "toy-last:k=3,toy-last:k=1000000000",
                   "--requests", "3000", "--objects", "60", cwd=tmp_path)
    moving, still = out["policies"]
    assert moving["params"] == {"k": 3} and moving["migrations"] > 0 == still["migrations"]
    assert moving["mean_latency_ms"] < still["mean_latency_ms"]
    assert [row[0] for row in out["tables"][0]["rows"]] == ["toy-last:k=3",
                                                            "toy-last:k=1000000000"]
    assert "toy-last:k=3" in Path(out["report"]).read_text()


def test_the_toy_model_checks_a_history_from_the_command_line(tmp_path: Path):
    help_ = cli("check", "--help", cwd=tmp_path)
    assert help_.returncode == 0
    listed = re.sub(r"-\s+", "-", " ".join(help_.stdout.split()))  # click wraps at "-"
    assert "toy-stack (a stack: push x, pop" in listed
    events = ["{:process 0, :type :invoke, :f :push, :value 1}",
              "{:process 0, :type :ok, :f :push, :value 1}",
              "{:process 0, :type :invoke, :f :push, :value 2}",
              "{:process 0, :type :ok, :f :push, :value 2}",
              "{:process 1, :type :invoke, :f :pop, :value nil}",
              "{:process 1, :type :ok, :f :pop, :value 2}"]
    good = tmp_path / "good.edn"
    good.write_text("\n".join(events) + "\n")
    p = cli("check", str(good), "--model", "toy-stack", cwd=tmp_path)
    assert p.returncode == 0 and "(toy-stack model): linearizable" in p.stdout, p.stdout
    bad = tmp_path / "bad.edn"  # the pop returns the oldest value: a queue, not a stack
    bad.write_text("\n".join([*events[:5], events[5].replace(":value 2", ":value 1")]) + "\n")
    p = cli("check", str(bad), "--model", "toy-stack", "--json", cwd=tmp_path)
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)["results"][0]
    assert doc["model"] == "toy-stack" and doc["valid"] is False
    ce = doc["counterexample"][0]
    assert ce["minimal"] and [o["index"] for o in ce["ops"]] == [3, 5]  # push 2, pop -> 1
    assert "lines 3–4" in ce["explanation"] and "ms" not in ce["explanation"]


def test_the_toy_queue_runs_a_queue_workload(tmp_path: Path):
    out = run_json("queue", "run", "--queue", "toyq://q", "--messages", "40", "--consumers",
                   "3", "--process", "20ms", "--slow-fraction", "0", cwd=tmp_path)
    summary = out["summary"]
    assert out["queue"]["kind"] == "toyq"
    assert summary["messages"] == 40 and summary["lost"] == 0 and summary["processing"] >= 40
    assert dict(out["tables"][0]["rows"])["messages (acknowledged sends)"] == "40"
    assert "toyq://q" in Path(out["report"]).read_text()


def test_help_lists_the_toy_kind_property_and_model(tmp_path: Path):
    scorecard = cli("scorecard", "--help", cwd=tmp_path)
    assert "toykv" in scorecard.stdout and "toy-echo" in scorecard.stdout, scorecard.stdout
    assert "toykv" in cli("compare", "--help", cwd=tmp_path).stdout
    assert "toykv" in cli("cluster", "up", "--help", cwd=tmp_path).stdout
    assert "toy-mm1" in cli("model", "--help", cwd=tmp_path).stdout


def test_the_toy_kind_starts_and_the_probe_and_conformance_suite_run_it(tmp_path: Path):
    """``cluster up toykv`` starts real server processes through the toy driver; ``probe``
    runs a shipped workload on them; the conformance suite passes the toy adapter
    (including a stalled server: Unavailable, then reconnect); ``cluster down`` stops
    them."""
    from replicalab.cluster.state import state_root

    up = cli("cluster", "up", "toy-kv", "--nodes", "2", "--regions", "dc3", "--name", "toy",
             "--json", cwd=tmp_path)
    assert up.returncode == 0, up.stderr
    url = json.loads(up.stdout)["url"]
    try:
        assert url.startswith("toykv://127.0.0.1:")
        saved = json.loads((state_root() / "clusters" / "toy" / "cluster.json").read_text())
        assert saved["kind"] == "toykv"  # the alias resolved to the one name
        pids = [n["pid"] for n in saved["nodes"]]
        assert all(process.alive(p) for p in pids)
        out = run_json("probe", "--store", url, "--workload", "register", "--duration", "2s",
                       cwd=tmp_path)
        assert out["linearizability"]["valid"] is True and out["ops"]["writes"] > 0
        # in a process of its own, as every plugged-in command here: plugging the toys into
        # this worker would leak them into the tests that run after it
        conform = ("import json, sys; import test_extension_points as t; t.plug_in(); "
                   "from replicalab.testing.conformance import assert_conforms; "
                   "r = assert_conforms(sys.argv[1]); "
                   "print(json.dumps([x.name for x in r.results if x.status == 'passed']))")
        env = {**os.environ,
               "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
        p = subprocess.run([sys.executable, "-c", conform, url], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert set(json.loads(p.stdout)) >= {
            "consistent-read", "conditional-write", "atomic-multi-write", "timeout-is-unknown"}
    finally:
        down = cli("cluster", "down", "toy", cwd=tmp_path)
    assert down.returncode == 0, down.stderr
    assert not any(process.alive(p) for p in pids)


def test_compare_runs_the_toy_kind(tmp_path: Path):
    p = cli("compare", "--kinds", "toykv", "--regions", "dc3", "--duration", "3s", "--ops",
            "10", "--json", "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    (row,) = out["rows"]
    assert row["store"] == "toykv" and row["leader_region"] == "US-E"  # n0, its primary
    assert row["eventual_stale_fraction"] == 0.0  # one copy: no read is stale
    assert row["put p50_ms"] > 0 and Path(out["report"]).is_file()


def test_the_scorecard_grades_the_toy_kind_and_draws_the_toy_property(tmp_path: Path):
    """``scorecard --kinds toykv`` starts the toy's cluster and grades it against the toy
    record's promises; the toy property's cell is in scorecard.json and in the chart, for
    the toy kind and for a simulated store."""
    p = cli("scorecard", "--kinds", "toykv,sim://simpledb", "--quick", "--only",
            "transactionality,toy-echo", "--json", "--out", str(tmp_path / "runs"),
            cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["properties"] == ["transactionality", "toy-echo"]
    got = {(c["store"], c["prop"]): c for c in doc["cells"]}
    assert set(got) == {(s, prop) for s in ("toykv", "sim://simpledb")
                        for prop in ("transactionality", "toy-echo")}
    trans = got[("toykv", "transactionality")]
    assert trans["promise"] == TOYKV.promises["transactionality"].text
    # the toy offers no transactions: a grey cell that says so
    assert trans["grade"] == "grey" and "offers no transactions" in trans["reason"]
    for store in ("toykv", "sim://simpledb"):
        echo = got[(store, "toy-echo")]
        assert echo["grade"] == "green" and echo["figures"]["echoed"] == 20, echo
    saved = json.loads((Path(doc["run_dir"]) / "scorecard.json").read_text())
    assert [c["prop"] for c in saved["cells"]].count("toy-echo") == 2
    html = Path(doc["report"]).read_text()
    assert html.count('data-prop="toy-echo"') == 2 and "Reads that echoed" in html


def test_model_validate_checks_the_toy_model_against_its_twin(tmp_path: Path):
    p = cli("model", "validate", "--model", "toy-mm1", "--json", cwd=tmp_path)
    assert p.returncode == 0, p.stderr + p.stdout
    (row,) = json.loads(p.stdout)["rows"]
    assert row["model"] == "toy-mm1" and row["ok"] is True
    assert row["points_compared"] == 3  # the load at 90 % utilisation is not compared
