"""The staleness window a replication path allows: how long after the writer saw its ack a
write may stay invisible at a reader's replica, from the emulated links as configured.

Redis and PostgreSQL ship a write from the primary (the writer's node) to a replica one
primary -> replica delay after it is applied; a ZooKeeper server applies it when the leader's
COMMIT arrives, so a reader's server sees it d(leader -> reader) - d(leader -> writer) after
the writer's server answered. Each delay is what Toxiproxy applies: whole milliseconds, each
message within +-jitter. The slack is what the store adds after the link on a quiet machine,
stated here, never fitted to a run. ``checkers/visibility.judge_window`` judges each write
against the window; the slack is also the noise a verdict can bear.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SLACK_MS = {"redis": 2.0, "postgres": 5.0, "zookeeper": 5.0}
"""What each store adds after the link on a quiet machine (ms): Redis applies a replicated
write in the event-loop turn it arrives; a PostgreSQL standby's WAL receiver hands it to the
startup process, which replays it; a ZooKeeper follower applies a COMMIT in its commit
processor thread."""


def delay_ms(links: Sequence[Mapping[str, Any]], src: str, dst: str) -> tuple[int, int]:
    """Return (delay, jitter) in whole ms that Toxiproxy applies from region src to dst."""
    if src == dst:
        return 0, 0
    for x in links:
        if (x["src_region"], x["dst_region"]) == (src, dst):
            return round(x["upstream_ms"]), round(x["jitter_ms"])
        if (x["src_region"], x["dst_region"]) == (dst, src):
            return round(x["downstream_ms"]), round(x["jitter_ms"])
    raise ValueError(f"no replication link between {src} and {dst}")


def window_ms(kind: str, links: Sequence[Mapping[str, Any]], writer: str, reader: str,
              leader: str | None = None) -> tuple[float, float]:
    """Return [lo, hi] ms after the writer's ack in which its write becomes visible at the
    reader's replica (``links``: the replication links as ``cluster.state.Link`` fields;
    ``leader``: ZooKeeper's leader region); ValueError for a kind without a rule."""
    if kind in ("redis", "postgres"):  # the primary is the writer's node
        d, j = delay_ms(links, writer, reader)
        return d - j - 1.0, d + j + SLACK_MS[kind]
    if kind == "zookeeper":
        if leader is None:
            raise ValueError("a ZooKeeper window needs the leader's region")
        to_reader, to_writer = delay_ms(links, leader, reader), delay_ms(links, leader, writer)
        d, j = to_reader[0] - to_writer[0], to_reader[1] + to_writer[1]
        return d - j - 1.0, d + j + SLACK_MS[kind]
    raise ValueError(f"no staleness window rule for {kind!r} (redis, postgres, zookeeper)")


def write_path_ms(kind: str, links: Sequence[Mapping[str, Any]], writer: str,
                  leader: str | None = None) -> float:
    """Return the least a write takes from its invoke to its ack over the links (ms): 0 for
    Redis and PostgreSQL (the primary is the writer's node); for ZooKeeper the forward to
    the leader, the fastest quorum round trip and the COMMIT back, each at its least
    (delay - jitter). A write slower than that had its ack come back late, after the write
    was on its way to the reader."""
    if kind != "zookeeper":
        return 0.0
    if leader is None:
        raise ValueError("a ZooKeeper write path needs the leader's region")

    def least(src: str, dst: str) -> float:
        d, j = delay_ms(links, src, dst)
        return max(d - j, 0.0) if src != dst else 0.0

    regions = {x["src_region"] for x in links} | {x["dst_region"] for x in links}
    quorum = min((least(leader, r) + least(r, leader) for r in regions if r != leader),
                 default=0.0)
    return least(writer, leader) + quorum + least(leader, writer)
