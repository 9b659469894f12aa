"""The CLT agent: echoes pings, and on the coordinator's word pings its peers in rounds.

One asyncio process per node. Every inbound connection echoes PING frames as PONG frames
with the same round and payload. The coordinator (a JSON control connection) sends
``configure`` (peers, rate, payload, duration, timeout), ``start`` and, if it must, ``stop``;
the agent then opens one persistent TCP connection per peer and runs an open-loop schedule:
round ``r`` is due at ``t0 + r / rate``, a late round is sent at once and keeps its intended
start, so queueing shows up in the latency instead of thinning the samples (no coordinated
omission). A ping whose echo has not arrived ``timeout`` after its intended start is a
censored observation, reported with no end time. At the end the agent sends its rows back.

Every ping and echo carries the sender's hybrid logical clock; send and receive events of
traced pings go to a JSONL trace log (``hlc.trace`` format). ``skew_ms`` offsets this agent's
physical clock (HLC and reported times) on purpose, to give trace alignment work to do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from replicalab.clt import records as rec_mod
from replicalab.clt.protocol import (
    JSON,
    PING,
    PONG,
    FrameProtocol,
    blob_frame,
    echo_frame,
    json_frame,
    mono_us,
    parse_echo,
    split_address,
)
from replicalab.hlc.clock import HLC, Timestamp

NODE_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
CONNECT_TIMEOUT_S = 5.0
TRACE_FLUSH_S = 0.5


@dataclass(frozen=True)
class Target:
    """A connection this agent pings: ``label`` names it in the rows (the peer's node name, or
    ``peer/tag`` for calibration links), ``traced`` puts its messages in the trace log."""

    label: str
    node: str
    host: str
    port: int
    traced: bool = True


class Tracer:
    """Collects this node's HLC trace events as JSONL lines; writes them to ``path`` every
    half second (so a live run can be followed) or keeps them for the coordinator."""

    def __init__(self, node: str, path: Path | None) -> None:
        self.node = node
        self.path = path
        self.seq = 0
        self.lines: list[str] = []
        self.count = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")

    def event(self, kind: str, pt_us: int, ts: Timestamp, msg: str, vars_json: str) -> None:
        """Record one event; ``vars_json`` is the event's variables as a JSON object."""
        self.seq += 1
        self.count += 1
        self.lines.append(f'{{"node":"{self.node}","seq":{self.seq},"pt_us":{pt_us},'
                          f'"l_us":{ts.l},"c":{ts.c},"kind":"{kind}","msg":"{msg}",'
                          f'"vars":{vars_json}}}\n')

    def flush(self) -> None:
        """Append the pending lines to the file (no-op when the log goes to the coordinator)."""
        if self.path is not None and self.lines:
            with self.path.open("a", encoding="utf-8") as fh:
                fh.writelines(self.lines)
            self.lines.clear()

    def take(self) -> bytes:
        """Return and forget the lines kept for the coordinator."""
        data = "".join(self.lines).encode()
        self.lines.clear()
        return data


class _Run:
    """One measurement run: schedule, connections and the arrays the rows come from."""

    def __init__(self, agent: Agent, cfg: dict[str, Any], targets: list[Target]) -> None:
        self.agent = agent
        self.node: str = cfg["node"]
        self.rate_hz = float(cfg["rate_hz"])
        self.n_rounds = max(1, round(float(cfg["duration_s"]) * self.rate_hz))
        self.timeout_us = int(float(cfg["timeout_s"]) * 1e6)
        self.trace_every = int(cfg.get("trace_every", 1))
        self._flush_at = 0
        self.payload = random.Random(f"{cfg.get('seed', 1)}:{self.node}").randbytes(
            int(cfg["payload_bytes"]))
        self.targets = targets
        self.links: list[FrameProtocol] = []
        n = self.n_rounds * len(targets)
        self.intended = np.zeros(self.n_rounds, np.int64)
        self.sent = np.zeros(n, np.int64)
        self.end = np.full(n, rec_mod.TIMEOUT, np.int64)
        self.outstanding = 0
        self.rounds_sent = 0
        self.bad_echoes = 0
        self.stopping = False
        self.tracer = Tracer(self.node, Path(cfg["trace_path"]) if cfg.get("trace_path")
                             else None)
        # Reported times are wall-clock µs (plus the deliberate skew) anchored on the monotonic
        # clock once, so an NTP step during the run cannot bend the measured latencies.
        self.anchor_us = agent.physical_us() - mono_us()

    async def connect(self) -> str | None:
        """Open one connection per target; return None or the first failure as a message."""
        loop = asyncio.get_running_loop()
        for ci, t in enumerate(self.targets):
            def make(ci: int = ci, t: Target = t) -> FrameProtocol:
                return FrameProtocol(lambda kind, body, now: self._on_frame(ci, t, kind, body,
                                                                            now))
            try:
                _, proto = await asyncio.wait_for(
                    loop.create_connection(make, t.host, t.port), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as err:
                reason = getattr(err, "strerror", None) or type(err).__name__
                return (f"agent {self.node} cannot reach {t.label} at {t.host}:{t.port} "
                        f"({reason})")
            proto.send(json_frame({"op": "hello", "node": self.node, "traced": t.traced}))
            self.links.append(proto)
        return None

    def _on_frame(self, ci: int, t: Target, kind: int, body: bytes, now_us: int) -> None:
        if kind != PONG:
            return
        r, l_us, c, payload = parse_echo(body)
        if r >= self.n_rounds:
            return
        idx = r * len(self.targets) + ci
        rtt_us = now_us - int(self.intended[r])
        if self.end[idx] != rec_mod.TIMEOUT or self.sent[idx] == 0 or rtt_us > self.timeout_us:
            return  # a duplicate, or too late: it stays a censored observation
        if len(payload) != len(self.payload):
            self.bad_echoes += 1
        self.end[idx] = now_us
        self.outstanding -= 1
        ts = self.agent.hlc.update(Timestamp(l_us, c))
        if t.traced and r % self.trace_every == 0:
            self.tracer.event("recv", self.agent.hlc.physical_us(), ts,
                              f"{t.node}->{self.node}#{r}.e", f'{{"rtt_us":{rtt_us}}}')

    async def rounds(self, t0_us: int) -> None:
        """Send every round on schedule, then wait for the last echoes (up to the timeout).

        A clock thread sleeps to each round's intended time and hands the round to the event
        loop: the loop itself sleeps in whole milliseconds (epoll, rounded up), which would
        make sends up to ~1.5 ms late, while a thread's sleep is accurate to ~0.1 ms and
        costs no CPU while waiting.
        """
        period_us = 1e6 / self.rate_hz
        self.intended[:] = t0_us + np.round(np.arange(self.n_rounds) * period_us).astype(
            np.int64)
        self._flush_at = t0_us
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._clock_thread, loop)
        if self.rounds_sent:
            deadline = int(self.intended[self.rounds_sent - 1]) + self.timeout_us
            while self.outstanding > 0 and mono_us() < deadline and not self.stopping:
                await asyncio.sleep(0.01)
        self.tracer.flush()

    def _clock_thread(self, loop: asyncio.AbstractEventLoop) -> None:
        for r in range(self.n_rounds):
            wait_us = int(self.intended[r]) - mono_us()
            if wait_us > 0:
                time.sleep(wait_us / 1e6)
            if self.stopping:
                return
            loop.call_soon_threadsafe(self._send_round, r)

    def _send_round(self, r: int) -> None:
        if self.stopping:
            return
        n = len(self.targets)
        hlc = self.agent.hlc
        tracer = self.tracer
        traced_round = r % self.trace_every == 0
        for ci, (t, link) in enumerate(zip(self.targets, self.links, strict=True)):
            ts = hlc.now()
            if t.traced and traced_round:
                tracer.event("send", hlc.physical_us(), ts, f"{self.node}->{t.node}#{r}",
                             f'{{"round":{r}}}')
            self.sent[r * n + ci] = mono_us()
            self.outstanding += 1
            link.send(echo_frame(PING, r, ts.l, ts.c, self.payload))
        self.rounds_sent = r + 1
        intended = int(self.intended[r])
        if intended - self._flush_at > TRACE_FLUSH_S * 1e6:
            tracer.flush()
            self._flush_at = intended

    def result_rows(self) -> rec_mod.Records:
        """Return the rows of the rounds that were sent."""
        n = len(self.targets)
        k = self.rounds_sent * n
        rounds = np.repeat(np.arange(self.rounds_sent, dtype=np.int64), n)
        intended = np.repeat(self.intended[:self.rounds_sent], n)
        end = self.end[:k].copy()
        done = end != rec_mod.TIMEOUT
        end[done] += self.anchor_us
        labels = np.array([t.label for t in self.targets] * self.rounds_sent, dtype=str)
        return rec_mod.make(np.full(k, self.node), rounds, labels, intended + self.anchor_us,
                            end, self.sent[:k] - intended)

    def close(self) -> None:
        """Close every peer connection."""
        for link in self.links:
            if link.transport is not None:
                link.transport.close()


class Agent:
    """The agent's state: its clock, inbound echo service and the current run."""

    def __init__(self, skew_ms: float = 0.0) -> None:
        self.skew_us = round(skew_ms * 1000)
        self.hlc = HLC(self.physical_us)
        self.run: _Run | None = None
        self.echoes = 0
        self._tasks: set[asyncio.Task[Any]] = set()

    def physical_us(self) -> int:
        """Return this agent's physical clock in µs: wall clock plus the deliberate skew."""
        return time.time_ns() // 1000 + self.skew_us

    def protocol(self) -> FrameProtocol:
        """Return the protocol of a new inbound connection (peer pings or coordinator)."""
        state: dict[str, Any] = {"peer": "?", "traced": False}
        proto: FrameProtocol

        def on_frame(kind: int, body: bytes, _now: int) -> None:
            if kind == PING:
                self._echo(proto, state, body)
            elif kind == JSON:
                msg = json.loads(body)
                if msg.get("op") == "hello":
                    state["peer"] = str(msg.get("node", "?"))
                    state["traced"] = bool(msg.get("traced"))
                else:
                    state["control"] = True
                    self._spawn(self._control(proto, msg))

        def on_lost(_exc: Exception | None) -> None:
            # A coordinator that goes away ends its run: agents never ping on unattended.
            if state.get("control") and self.run is not None:
                self.run.stopping = True

        proto = FrameProtocol(on_frame, on_lost)
        return proto

    def _echo(self, proto: FrameProtocol, state: dict[str, Any], body: bytes) -> None:
        r, l_us, c, payload = parse_echo(body)
        self.echoes += 1
        recv = self.hlc.update(Timestamp(l_us, c))
        run = self.run
        traced = state["traced"] and run is not None and r % run.trace_every == 0
        if traced and run is not None:
            run.tracer.event("recv", self.hlc.physical_us(), recv, f"{state['peer']}->"
                             f"{run.node}#{r}", "{}")
        ts = self.hlc.now()
        if traced and run is not None:
            run.tracer.event("send", self.hlc.physical_us(), ts,
                             f"{run.node}->{state['peer']}#{r}.e", "{}")
        proto.send(echo_frame(PONG, r, ts.l, ts.c, payload))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _control(self, proto: FrameProtocol, msg: dict[str, Any]) -> None:
        op = msg.get("op")
        if op == "configure":
            await self._configure(proto, msg)
        elif op == "start" and self.run is not None:
            run = self.run
            t0 = mono_us() + int(float(msg.get("delay_s", 0.2)) * 1e6)
            proto.send(json_frame({"op": "started", "node": run.node, "rounds": run.n_rounds}))
            await run.rounds(t0)
            self._send_results(proto, run)
        elif op == "stop" and self.run is not None:
            self.run.stopping = True
        elif op == "ping":
            proto.send(json_frame({"op": "pong"}))
        else:
            proto.send(json_frame({"op": "error", "message": f"unexpected control op {op!r}"}))

    async def _configure(self, proto: FrameProtocol, msg: dict[str, Any]) -> None:
        if self.run is not None:
            self.run.stopping = True
            self.run.close()
        node = str(msg.get("node", ""))
        if not NODE_NAME.fullmatch(node):
            proto.send(json_frame({"op": "error", "message": f"bad node name {node!r}"}))
            return
        targets = [Target(str(t["label"]), str(t["node"]), str(t["host"]), int(t["port"]),
                          bool(t.get("traced", True))) for t in msg["targets"]]
        self.run = _Run(self, msg, targets)
        problem = await self.run.connect()
        if problem:
            proto.send(json_frame({"op": "error", "message": problem}))
            return
        proto.send(json_frame({"op": "ready", "node": node, "skew_ms": self.skew_us / 1000}))

    def _send_results(self, proto: FrameProtocol, run: _Run) -> None:
        rows = run.result_rows()
        names, data = rec_mod.to_bytes(rows)
        trace = run.tracer.take() if run.tracer.path is None else b""
        header = {"op": "results", "node": run.node, "names": names, "rows_bytes": len(data),
                  "rounds_sent": run.rounds_sent, "rounds_planned": run.n_rounds,
                  "skew_ms": self.skew_us / 1000, "bad_echoes": run.bad_echoes,
                  "trace_events": run.tracer.count,
                  "trace_path": str(run.tracer.path) if run.tracer.path else None}
        proto.send(blob_frame(header, data + trace))
        run.close()


async def serve(host: str, port: int, skew_ms: float = 0.0, announce: bool = True) -> None:
    """Serve as an agent on host:port until cancelled."""
    agent = Agent(skew_ms)
    # The clock thread must get the GIL soon after it wakes; the default 5 ms switch
    # interval would let a busy event loop delay a round by up to that much.
    sys.setswitchinterval(0.0002)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(agent.protocol, host, port)
    if announce:
        print(f"clt agent listening on {host}:{port} (clock skew {skew_ms:g} ms)", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Entry point of ``python -m replicalab.clt.agent`` (what ``clt local`` starts)."""
    p = argparse.ArgumentParser(prog="python -m replicalab.clt.agent")
    p.add_argument("--listen", default="127.0.0.1:7100")
    p.add_argument("--skew-ms", type=float, default=0.0)
    args = p.parse_args(argv)
    host, port = split_address(args.listen)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(host, port, args.skew_ms))


if __name__ == "__main__":
    main(sys.argv[1:])
