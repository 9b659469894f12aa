"""What a client placed in a region must pay over the emulated WAN, from the links' configured
delays, and the one judgement live latency tests make of it: within [the least round trip
the links can give, the most they can give + a stated slack], the slack exceeded only by
what the run's own noise floor measured the machine to add (then said, not hidden)."""

from __future__ import annotations

from typing import Any

from replicalab.cluster.state import Cluster

SLACK_MS = 10.0
"""What the client, Toxiproxy and the server may add to a WAN round trip on a quiet machine
(ms): a Redis or PostgreSQL operation at loopback takes under 2 ms here, a Cassandra write at
ONE a few ms."""


def client_round_trip_ms(c: Cluster, client_region: str, node_region: str
                         ) -> tuple[float, float]:
    """Return (least, most) round trip in ms over the client link from ``client_region`` to
    the node of ``node_region``, as Toxiproxy applies its configured toxics: each direction
    ``round(delay) + [-round(jitter), +round(jitter))`` (whole milliseconds)."""
    link = next(x for x in c.links if x.kind == "client" and x.src_region == client_region
                and x.dst_region == node_region)
    j = round(link.jitter_ms)
    there, back = round(link.upstream_ms), round(link.downstream_ms)
    return float(there + back - 2 * j), float(there + back + 2 * j)


def judge_round_trip(p50_ms: float, bounds: tuple[float, float], noise: dict[str, Any] | None,
                     slack_ms: float = SLACK_MS, local_p50_ms: float = 0.0) -> str:
    """Return "within" or "inconclusive: the machine added X ms at p99" for a p50 that paid
    one round trip over ``bounds``; AssertionError for a hop too few (under the least round
    trip) or too many (over the most, plus the slack or what the machine added if more).

    ``local_p50_ms`` is the same operation's p50 measured in the same run by a client in the
    node's own region: the server's own time (a JVM store's write on a busy machine takes
    10-20 ms), which a remote client pays on top of the round trip. It moves the upper bound
    by what the store was seen to take, never by a guess; a second hop (another ~80 ms)
    still fails."""
    lo, hi = bounds
    hi = hi + max(0.0, local_p50_ms)
    added = float(noise["added_p99_ms"]) if noise else 0.0
    assert p50_ms >= lo, f"p50 {p50_ms} ms under the least round trip {lo} ms: a hop too few"
    if p50_ms <= hi + slack_ms:
        return "within"
    assert p50_ms <= hi + max(slack_ms, added), (
        f"p50 {p50_ms} ms over the most round trip + the local p50 {hi:g} ms + "
        f"{max(slack_ms, added):g} ms (slack, or the {added:g} ms the machine added at p99): "
        "a hop too many")
    return f"inconclusive: the machine added {added:g} ms at p99"


def judge_local(p50_ms: float, c: Cluster, client_region: str) -> float:
    """Return the bound (ms) a local answer's p50 was judged under: the least round trip from
    ``client_region`` to any other region's node. The WAN delays are Toxiproxy's sleeps, so
    an answer from another region cannot come sooner; a p50 under it says most answers were
    local, however busy the machine (a fixed 10 ms measured the machine, not the routing)."""
    bound = min(client_round_trip_ms(c, client_region, x.dst_region)[0] for x in c.links
                if x.kind == "client" and x.src_region == client_region
                and x.dst_region != client_region)
    assert p50_ms < bound, (f"p50 {p50_ms} ms not under the least round trip {bound} ms from "
                            f"{client_region}: answered from another region")
    return bound
