"""Quorum latency per round (pure): when would a node have heard from k of the n nodes?

In round r node X pinged every peer (and itself with the self-loop). Waiting for a quorum of
k nodes means waiting for the k-th fastest response. Without the self-loop X's own vote is
free and immediate (latency 0), as a leader voting for itself; with it, X's vote costs the
self-ping like any other (the seed's Q2/3: two of three responses, self included). A timed
out ping is +inf, so a round with fewer than k responses has an infinite (censored) quorum
latency: timeouts are counted, never dropped.
"""

from __future__ import annotations

import numpy as np

from replicalab.clt.records import Records


def response_matrix(rec: Records, node: str, peers: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Return (rounds, rtt_us[rounds x peers]) of ``node``'s pings to ``peers``; +inf where a
    ping timed out or is missing."""
    mine = rec.node == node
    rounds = np.unique(rec.round[mine])
    mat = np.full((len(rounds), len(peers)), np.inf)
    rtt = rec.rtt_us
    for j, peer in enumerate(peers):
        m = mine & (rec.remote == peer)
        mat[np.searchsorted(rounds, rec.round[m]), j] = rtt[m]
    return rounds, mat


def quorum_latency(rec: Records, node: str, nodes: list[str], k: int, self_loop: bool
                   ) -> np.ndarray:
    """Return per round of ``node`` the µs until k of the ``len(nodes)`` nodes responded
    (+inf when fewer than k did within the timeout). ValueError if k is not in 1..n."""
    n = len(nodes)
    if not 1 <= k <= n:
        raise ValueError(f"quorum size {k} must be between 1 and the {n} nodes of the run")
    peers = [x for x in nodes if x != node or self_loop]
    _, mat = response_matrix(rec, node, peers)
    if mat.shape[0] == 0:
        return np.array([])
    ordered = np.sort(mat, axis=1)
    if self_loop:
        return ordered[:, k - 1]
    if k == 1:
        return np.zeros(mat.shape[0])
    return ordered[:, k - 2]


def majority(n: int) -> int:
    """Return the majority quorum size of ``n`` nodes: floor(n/2) + 1."""
    return n // 2 + 1


def pooled(rec: Records, nodes: list[str], k: int, self_loop: bool) -> np.ndarray:
    """Return the quorum latencies (µs) of every node's rounds, concatenated."""
    parts = [quorum_latency(rec, x, nodes, k, self_loop) for x in nodes
             if np.any(rec.node == x)]
    return np.concatenate(parts) if parts else np.array([])
