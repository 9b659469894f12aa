"""``clt local``: N agents as local processes on 127.0.0.1, optionally behind WAN links.

With a region set, nodes are spread over its regions in order (node i in region i mod R) and
every directed pair (a pings b) goes through its own Toxiproxy proxy in front of b, whose
latency toxics carry half the a->b RTT each way (the integer halves of the RTT rounded to a
whole ms: Toxiproxy takes whole milliseconds). Pairs inside one region get a zero-latency
proxy (the intra-region 0.427 ms cannot be expressed in whole ms; they run at loopback
speed plus the proxy). The self-loop never goes through a proxy. To measure what the proxy
itself adds, node 1 also pings node 2 directly, through a zero-latency proxy and through a
proxy injecting a 10 ms RTT, in the same rounds (calibration links ``n2/direct``,
``n2/proxy0``, ``n2/proxy10``): the last shows what an emulated link adds beyond its
injected latency (loopback, agents, proxy and the latency toxic's timer overshoot).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replicalab.clt import analysis, runner
from replicalab.cluster import process, toxiproxy
from replicalab.cluster.ports import allocate, wait_listening
from replicalab.errors import ParameterError
from replicalab.regions import RegionSet, region_set

MAX_NODES = 32


@dataclass
class LocalSetup:
    """What ``clt local`` built: agents, regions, injected RTTs and the processes it owns."""

    agents: list[runner.AgentSpec]
    regions: dict[str, str]
    injected_rtt_ms: dict[str, float]
    skews_ms: dict[str, float]
    pids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_skews(text: str | None, n: int) -> list[float]:
    """Return one clock skew (ms) per node from 'S1,S2,...' (missing values are 0)."""
    if not text:
        return [0.0] * n
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ParameterError("skew_ms", f"{text!r} must be comma-separated numbers of ms, "
                                        "one per node, e.g. 0,20,-15") from None
    if len(vals) > n:
        raise ParameterError("skew_ms", f"gives {len(vals)} values for {n} nodes")
    return vals + [0.0] * (n - len(vals))


def check_nodes(n: int) -> None:
    """Raise ParameterError naming ``nodes`` unless 1 <= ``n`` <= MAX_NODES."""
    if not 1 <= n <= MAX_NODES:
        raise ParameterError("nodes", f"{n} must be between 1 and {MAX_NODES}")


def toxic_halves_ms(rtt_ms: float) -> tuple[int, int]:
    """Return whole-ms (a->b, b->a) one-way delays summing to the RTT rounded to a ms."""
    total = round(rtt_ms)
    return total // 2, total - total // 2


def layout(n: int, rs: RegionSet | None) -> tuple[dict[str, str], dict[str, float]]:
    """Return node -> region (round robin) and 'a->b' -> injected RTT in ms (whole ms)."""
    nodes = [f"n{i + 1}" for i in range(n)]
    if rs is None:
        return {x: "local" for x in nodes}, {}
    regions = {x: rs.regions[i % len(rs.regions)] for i, x in enumerate(nodes)}
    injected = {}
    for a in nodes:
        for b in nodes:
            if a != b:
                rtt = 0.0 if regions[a] == regions[b] else \
                    rs.rtt_ms[rs.index(regions[a])][rs.index(regions[b])]
                injected[analysis.pair_key(a, b)] = float(sum(toxic_halves_ms(rtt)))
    return regions, injected


def run_local(n: int, regions_name: str | None, cfg: runner.RunConfig, run_dir: Path,
              skews_ms: list[float] | None = None, jitter_ms: float = 0.0,
              progress: Callable[[float], None] | None = None
              ) -> tuple[runner.Outcome, LocalSetup]:
    """Start ``n`` agents (and Toxiproxy with regions), run, stop everything started; return
    the run's outcome and the setup. ValueError names a bad setting or a failed start."""
    check_nodes(n)
    rs = region_set(regions_name) if regions_name else None
    skews = skews_ms or [0.0] * n
    region_of, injected = layout(n, rs)
    names = list(region_of)
    pairs = [(a, b) for a in names for b in names if a != b]
    calibrate = rs is not None and n >= 2
    n_proxies = (len(pairs) + (2 if calibrate else 0)) if rs is not None else 0
    ports = allocate(n + (1 + n_proxies if rs is not None else 0))
    agent_ports, rest = ports[:n], ports[n:]
    logs = run_dir / "logs"
    agents = [runner.AgentSpec(x, "127.0.0.1", p, region_of[x])
              for x, p in zip(names, agent_ports, strict=True)]
    setup = LocalSetup(agents, region_of, injected, dict(zip(names, skews, strict=True)))
    toxi: toxiproxy.Toxiproxy | None = None
    try:
        for a, skew in zip(agents, skews, strict=True):
            setup.pids.append(process.start(
                [sys.executable, "-m", "replicalab.clt.agent", "--listen",
                 f"127.0.0.1:{a.port}", "--skew-ms", repr(skew)], logs / f"agent-{a.node}.log"))
        for a in agents:
            if not wait_listening(a.port, 30):
                raise ValueError(f"agent {a.node} did not start on 127.0.0.1:{a.port}; see "
                                 f"{logs / f'agent-{a.node}.log'}")
        route: runner.Route | None = None
        extra: dict[str, list[dict[str, Any]]] = {}
        if rs is not None:
            api_port, proxy_ports = rest[0], rest[1:]
            setup.pids.append(toxiproxy.start_server(run_dir, api_port, logs / "toxiproxy.log"))
            toxi = toxiproxy.Toxiproxy(api_port)
            by_name = {a.node: a for a in agents}
            listen: dict[tuple[str, str], int] = {}
            for (a, b), port in zip(pairs, proxy_ports, strict=False):
                name = f"clt_{a}_{b}"
                toxi.create(name, port, by_name[b].port)
                up, down = toxic_halves_ms(injected[analysis.pair_key(a, b)])
                toxi.set_latency(name, downstream_ms=down, upstream_ms=up, jitter_ms=jitter_ms)
                listen[(a, b)] = port
            route = lambda x, y: ("127.0.0.1", listen[(x.node, y.node)])  # noqa: E731
            if calibrate:
                a, b = agents[0], agents[1]
                toxi.create("clt_calibration0", proxy_ports[-2], b.port)
                toxi.create("clt_calibration10", proxy_ports[-1], b.port)
                half = analysis.CALIBRATION_RTT_MS / 2
                toxi.set_latency("clt_calibration10", downstream_ms=half, upstream_ms=half,
                                 jitter_ms=0)
                extra[a.node] = [
                    {"label": f"{b.node}/{tag}", "node": b.node, "host": "127.0.0.1",
                     "port": port, "traced": False}
                    for tag, port in ((analysis.DIRECT, b.port),
                                      (analysis.PROXIED, proxy_ports[-2]),
                                      (analysis.PROXIED_10, proxy_ports[-1]))]
            if any(region_of[a] == region_of[b] for a, b in pairs):
                setup.notes.append("pairs in one region get a zero-latency proxy: Toxiproxy "
                                   "takes whole ms, the intra-region RTT is 0.427 ms")
            if jitter_ms:
                setup.notes.append(f"Toxiproxy jitter ±{jitter_ms:g} ms on each direction")
        plan = runner.plan_targets(agents, cfg, route, extra)
        outcome = runner.run(agents, cfg, plan, run_dir / "traces", agents_share_disk=True,
                             progress=progress)
    finally:
        if toxi is not None:
            toxi.close()
        process.stop_many(setup.pids)  # agents and Toxiproxy at once
    return outcome, setup
