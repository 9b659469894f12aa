"""Faults on a simulated store, in virtual time: the same schedule as on a real cluster.

Node ``N`` is the scheme's N-th node (``sim://primary``: n0 is the primary; ``sim://quorum``:
r0, r1, ...); a region fault acts on every node placed there. What each action means here:

* crash — the node stops answering (requests to it time out, messages to it are lost);
  when the fault ends it restarts with the state it had and the scheme catches it up;
* pause — its queue stalls for the fault's duration (SIGSTOP): nothing is lost, work waits;
* partition — a region is cut off from every other region, clients included (a node
  target is cut off from everyone, which in the simulator is the same as a crash);
* slow — ``ms`` more one-way delay on every message to or from the node.

``sim://simpledb`` models a managed service whose nodes are created per domain as the
workload touches them, so it has no node to aim at: faults are refused there.
"""

from __future__ import annotations

from dataclasses import dataclass

from replicalab.errors import ParameterError
from replicalab.faults.nemesis import run_schedule
from replicalab.faults.schedule import Fault, check_cluster_faults
from replicalab.history import History
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_MS
from replicalab.sim.network import Network, Node

FAULTABLE = ("primary", "quorum")


@dataclass
class SimNemesis:
    """Acts on the nodes of one simulated store's network."""

    net: Network
    scheme: str

    @classmethod
    def of(cls, store: object) -> SimNemesis:
        """Return the nemesis of a ``SimStore`` (ValueError for a scheme without nodes to
        aim at)."""
        scheme = getattr(store, "scheme", None)
        name = getattr(scheme, "name", "")
        if name not in FAULTABLE:
            raise ValueError(f"faults on sim://{name or '?'} are not supported: its nodes are "
                             "not addressable; use sim://primary or sim://quorum (or a real "
                             "cluster)")
        return cls(scheme.net, name)  # type: ignore[union-attr]

    @property
    def nodes(self) -> list[Node]:
        """Return the nodes in the order faults number them."""
        return list(self.net.nodes.values())

    def _targets(self, f: Fault) -> list[Node]:
        if f.node is not None:
            return [self.nodes[f.node]]
        return [n for n in self.nodes if n.region == f.region]

    def check(self, faults: list[Fault]) -> None:
        """Raise ValueError if a fault names a node or region the store does not have."""
        check_cluster_faults(faults)
        nodes = self.nodes
        regions = sorted({n.region for n in nodes})
        for f in faults:
            if f.action == "power-loss":
                raise ParameterError("faults", f"{f.label!r}: sim://{self.scheme} keeps no "
                                               "disk, so a power loss is not modelled; use "
                                               "crash, or a real cluster started with "
                                               "{power_loss_fs}",
                                     {"power_loss_fs": "cluster_up(power_loss_fs=True)"})
            if f.node is not None and f.node >= len(nodes):
                raise ValueError(f"fault {f.label!r}: sim://{self.scheme} has nodes "
                                 f"{', '.join(n.name for n in nodes)} (node=0.."
                                 f"{len(nodes) - 1})")
            if f.region is not None and f.region not in regions:
                raise ValueError(f"fault {f.label!r}: sim://{self.scheme} has nodes in "
                                 f"{', '.join(regions)}; pick one of them")

    def start(self, f: Fault) -> None:
        """Begin fault ``f``."""
        self._switch(f, True)

    def end(self, f: Fault) -> None:
        """End fault ``f``: restart, heal or restore (a pause ends by itself)."""
        self._switch(f, False)

    def _switch(self, f: Fault, on: bool) -> None:
        """Begin (``on``) or end fault ``f``: each action and its undoing side by side."""
        net = self.net
        if f.action == "partition" and f.node is None:
            (net.cut_region if on else net.heal_region)(f.region)  # type: ignore[arg-type]
            return
        for node in self._targets(f):
            if f.action in ("crash", "partition"):
                (net.crash if on else net.restart)(node)
            elif f.action == "pause":
                if on:
                    net.pause(node, int(f.for_s * 1e9))
            else:
                extra_ns = int(f.extra_ms * NS_PER_MS)
                net.slow(node, extra_ns if on else -extra_ns)

    async def run(self, faults: list[Fault], h: History, rt: Runtime, t0_ns: int,
                  stop_ns: int) -> None:
        """Carry out ``faults`` on schedule in the store's own (virtual) time."""

        async def act(f: Fault, ending: bool) -> None:
            (self.end if ending else self.start)(f)

        await run_schedule(faults, h, rt, t0_ns, stop_ns, act)
