"""The CLT coordinator: configure the agents, start the rounds, collect every agent's rows.

The coordinator holds one control connection per agent. It tells each agent whom to ping
(every other agent, itself with ``self_loop``, plus calibration links) and the schedule,
starts them together, and waits for each agent's rows. An agent that cannot be reached
before the run raises :class:`AgentUnreachable`; one that goes silent during the run costs
only its own rows (the outcome lists it in ``errors``). SIGINT asks every agent to stop
early and still collects what they measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from replicalab.clt import records as rec_mod
from replicalab.clt.protocol import (
    BLOB,
    JSON,
    FrameProtocol,
    json_frame,
    parse_blob,
    split_address,
)
from replicalab.errors import ParameterError

REPLY_TIMEOUT_S = 15.0
_SPEC = re.compile(r"(?:(?P<name>[A-Za-z0-9_.-]+)=)?(?P<addr>[^@=]+)(?:@(?P<region>[^@=]+))?")


class AgentUnreachable(ValueError):
    """An agent could not be reached or configured; the message names it and the fix."""


@dataclass(frozen=True)
class AgentSpec:
    """One agent: its node name, control address and region (for the same/cross groups)."""

    node: str
    host: str
    port: int
    region: str = "default"


@dataclass(frozen=True)
class RunConfig:
    """The measurement: rounds per second, payload, length and ping timeout."""

    rate_hz: float = 100.0
    payload_bytes: int = 1024
    duration_s: float = 10.0
    timeout_s: float = 1.0
    self_loop: bool = False
    seed: int = 1
    trace_every: int = 1
    start_delay_s: float = 0.5

    def check(self) -> None:
        """Raise ParameterError naming a bad setting (as ``clt_run`` names it)."""
        if not 0 < self.rate_hz <= 10_000:
            raise ParameterError("rate", f"{self.rate_hz:g} must be in (0, 10000] rounds per "
                                         "second")
        if not 0 <= self.payload_bytes <= 16 << 20:
            raise ParameterError("payload", f"{self.payload_bytes} must be 0..16 MiB")
        if self.timeout_s <= 0:
            raise ParameterError("timeout", "must be positive")
        if self.trace_every < 0:
            raise ParameterError("trace_every", "must be >= 0 (0 turns the trace log off)")
        if self.duration_s * self.rate_hz > 50_000_000:
            raise ParameterError("duration", "x {rate} exceeds 50 million rounds; shorten the "
                                             "run", {"rate": "rate"})


@dataclass
class Outcome:
    """What a run produced: rows of every agent that answered, per-agent facts, problems."""

    records: rec_mod.Records
    agents: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    traces: dict[str, Path] = field(default_factory=dict)
    wall_s: float = 0.0
    interrupted: bool = False


def parse_agents(text: str) -> list[AgentSpec]:
    """Return agents from ``[name=]host:port[@region],...`` (names n1.. by default)."""
    specs = []
    for i, item in enumerate(x for x in text.split(",") if x.strip()):
        m = _SPEC.fullmatch(item.strip())
        if not m:
            raise ParameterError("agents", f"item {item!r} must look like "
                                           "[name=]HOST:PORT[@region]")
        host, port = split_address(m["addr"])
        specs.append(AgentSpec(m["name"] or f"n{i + 1}", host, port, m["region"] or "default"))
    if not specs:
        raise ParameterError("agents", "needs at least one HOST:PORT, e.g. 127.0.0.1:7101")
    names = [s.node for s in specs]
    if len(set(names)) != len(names):
        raise ParameterError("agents", f"has duplicate node names: {', '.join(names)}")
    return specs


Route = Callable[[AgentSpec, AgentSpec], tuple[str, int]]


def plan_targets(agents: list[AgentSpec], cfg: RunConfig, route: Route | None = None,
                 extra: dict[str, list[dict[str, Any]]] | None = None
                 ) -> dict[str, list[dict[str, Any]]]:
    """Return per node the connections it pings: every other agent (through ``route``,
    default direct), itself with ``self_loop`` (always direct), then ``extra`` links."""
    plan: dict[str, list[dict[str, Any]]] = {}
    for a in agents:
        targets = []
        for b in agents:
            if b.node == a.node and not cfg.self_loop:
                continue
            host, port = (b.host, b.port) if route is None or b is a else route(a, b)
            targets.append({"label": b.node, "node": b.node, "host": host, "port": port,
                            "traced": cfg.trace_every > 0})
        plan[a.node] = targets + list((extra or {}).get(a.node, []))
    return plan


class _Control:
    """One control connection: frames in a queue."""

    def __init__(self, spec: AgentSpec) -> None:
        self.spec = spec
        self.queue: asyncio.Queue[tuple[int, bytes] | None] = asyncio.Queue()
        self.proto: FrameProtocol | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()

        def make() -> FrameProtocol:
            return FrameProtocol(lambda kind, body, _now: self.queue.put_nowait((kind, body)),
                                 lambda _exc: self.queue.put_nowait(None))
        _, self.proto = await asyncio.wait_for(
            loop.create_connection(make, self.spec.host, self.spec.port), 5.0)

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proto is not None
        self.proto.send(json_frame(msg))

    async def recv(self, timeout_s: float) -> tuple[int, bytes]:
        """Return the next frame; TimeoutError, or ConnectionError when the agent hung up."""
        item = await asyncio.wait_for(self.queue.get(), timeout_s)
        if item is None:
            raise ConnectionError(f"agent {self.spec.node} closed the connection")
        return item

    def close(self) -> None:
        if self.proto is not None and self.proto.transport is not None:
            self.proto.transport.close()


def _where(spec: AgentSpec) -> str:
    return f"agent {spec.node} at {spec.host}:{spec.port}"


async def _expect(ctl: _Control, op: str, timeout_s: float) -> dict[str, Any]:
    import json
    kind, body = await ctl.recv(timeout_s)
    if kind != JSON:
        raise ConnectionError(f"{_where(ctl.spec)} sent an unexpected frame")
    msg = json.loads(body)
    if msg.get("op") == "error":
        raise AgentUnreachable(f"{msg.get('message')}; check that every agent can reach the "
                               "others at the addresses given to --agents")
    if msg.get("op") != op:
        raise ConnectionError(f"{_where(ctl.spec)} answered {msg.get('op')!r}, not {op!r}")
    return msg


async def _connect_all(agents: list[AgentSpec]) -> list[_Control]:
    controls = [_Control(a) for a in agents]
    results = await asyncio.gather(*(c.open() for c in controls), return_exceptions=True)
    bad = [(c.spec, r) for c, r in zip(controls, results, strict=True)
           if isinstance(r, BaseException)]
    if bad:
        for c in controls:
            c.close()
        spec, err = bad[0]
        reason = getattr(err, "strerror", None) or type(err).__name__
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise AgentUnreachable(f"{_where(spec)} is unreachable ({reason}){more}; start it with "
                               f"`replicalab clt agent --listen {spec.host}:{spec.port}` or fix "
                               "--agents")
    return controls


async def _collect(ctl: _Control, deadline: float, out: Outcome, trace_dir: Path | None
                   ) -> None:
    """Wait for one agent's results and add them to ``out`` (errors recorded, not raised)."""
    try:
        while True:
            kind, body = await ctl.recv(max(0.1, deadline - time.monotonic()))
            if kind == BLOB:
                break
        header, data = parse_blob(body)
        n = int(header["rows_bytes"])
        rows = rec_mod.from_bytes(ctl.spec.node, header["names"], data[:n])
        out.records = rec_mod.concat([out.records, rows])
        out.agents[ctl.spec.node] = {k: header[k] for k in (
            "rounds_sent", "rounds_planned", "skew_ms", "bad_echoes", "trace_events")}
        if header.get("trace_path"):
            out.traces[ctl.spec.node] = Path(header["trace_path"])
        elif trace_dir is not None and len(data) > n:
            path = trace_dir / f"{ctl.spec.node}.jsonl"
            path.write_bytes(data[n:])
            out.traces[ctl.spec.node] = path
    except (TimeoutError, ConnectionError, ValueError, KeyError) as err:
        out.errors.append(f"{_where(ctl.spec)} sent no results ({err or type(err).__name__}); "
                          "its rows are missing, the other agents' rows are kept")


async def run_async(agents: list[AgentSpec], cfg: RunConfig,
                    plan: dict[str, list[dict[str, Any]]], trace_dir: Path | None = None,
                    agents_share_disk: bool = False,
                    progress: Callable[[float], None] | None = None) -> Outcome:
    """Run one measurement and return its outcome (AgentUnreachable before any round)."""
    cfg.check()
    controls = await _connect_all(agents)
    out = Outcome(rec_mod.concat([]))
    t_begin = time.monotonic()
    try:
        if trace_dir is not None:
            trace_dir.mkdir(parents=True, exist_ok=True)
        for ctl in controls:
            trace_path = (str((trace_dir / f"{ctl.spec.node}.jsonl").resolve())
                          if trace_dir is not None and agents_share_disk and cfg.trace_every
                          else None)
            ctl.send({"op": "configure", "node": ctl.spec.node, "targets": plan[ctl.spec.node],
                      "trace_path": trace_path, **asdict(cfg),
                      "trace_every": max(1, cfg.trace_every)})
        for ctl in controls:
            try:
                await _expect(ctl, "ready", REPLY_TIMEOUT_S)
            except (TimeoutError, ConnectionError) as err:
                raise AgentUnreachable(f"{_where(ctl.spec)} did not get ready ({err or 'timed out'}"
                                       "); check its log and that the agents can reach each "
                                       "other") from None
        for ctl in controls:
            ctl.send({"op": "start", "delay_s": cfg.start_delay_s})
        loop = asyncio.get_running_loop()
        def stop() -> None:
            out.interrupted = True
            for c in controls:
                c.send({"op": "stop"})
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, stop)
        total_s = cfg.start_delay_s + cfg.duration_s + cfg.timeout_s
        deadline = time.monotonic() + total_s + 10.0 + 0.1 * cfg.duration_s
        tasks = [asyncio.create_task(_collect(c, deadline, out, trace_dir)) for c in controls]
        started = time.monotonic()
        while not all(t.done() for t in tasks):
            if progress is not None:
                progress(min(1.0, (time.monotonic() - started) / total_s))
            await asyncio.wait(tasks, timeout=0.5)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)
    finally:
        for ctl in controls:
            ctl.close()
    out.wall_s = time.monotonic() - t_begin
    return out


def run(agents: list[AgentSpec], cfg: RunConfig, plan: dict[str, list[dict[str, Any]]],
        trace_dir: Path | None = None, agents_share_disk: bool = False,
        progress: Callable[[float], None] | None = None) -> Outcome:
    """Blocking :func:`run_async`."""
    return asyncio.run(run_async(agents, cfg, plan, trace_dir, agents_share_disk, progress))
