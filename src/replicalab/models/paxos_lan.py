"""Multi-Paxos phase 2 in a LAN, with the leader's message-processing queue; Flexible Paxos.

Seed 002, "Modeling Paxos Performance" parts 1, 1.5 and 2. Only phase 2 is modelled (a stable
leader). Per round the leader deserializes the client request, serializes one broadcast to
the followers it talks to, deserializes their replies (all of them: replies after the quorum
are dead weight) and serializes the reply to the client. A follower's reply RTT ``r_l`` folds
in its own processing: ``r_l ~ N(mu_l + mu_ms + mu_md, sigma_l^2 + sigma_ms^2 + sigma_md^2)``.

* Part 1 (``network_only_latency_ms``): one synchronous client, no queueing,
  ``L_r = m_s + r_(q-1) + m_d`` with ``r_(q-1)`` the (q-1)-th fastest of the replies.
* Part 2 (``curve``): open-loop rounds at rate R and a G/G/1 queue at the leader,
  ``L = 2 mu_ms + 2 mu_md + r_(q-1) + w + r_c`` with Marchal's waiting time ``w``;
  ``curve(..., refined=True)`` adds what the message-level twin shows the formula misses
  (a round's replies queue behind each other; a third of the rounds arrive together).
* ``simulate_queue``: the seed's message-level pipeline simulation, vectorized with numpy
  (``simulate_queue_reference`` is the same simulation as a plain event loop).
* FPaxos: ``q2`` below a majority; ``talk_to="all"`` still sends to all N-1 followers,
  ``talk_to="quorum"`` sends only to |q2|-1 of them and waits for all of those.

Times are ms (``_ms``), rates requests (rounds) per second (``_rps``); the simulation works in
integer ns internally so that queue arithmetic is exact.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replicalab.models.base import Curve, CurvePoint, point, require
from replicalab.models.orderstats import NormalRtt, order_stat_mean_ms
from replicalab.regions import LAN_RTT_MS, LAN_SD_MS
from replicalab.runtime.base import NS_PER_MS

# Default per-message costs. The seed took its pipeline figures from "the early Paxi
# implementation" without printing them; these are chosen so that one pipeline handles a
# few thousand rounds/s (5.6k at N=3, 3.8k at N=5, 2.4k at N=9), the range of a Go Paxos on
# one core, and so that the 3 -> 5 node loss of max throughput, (3 md + 2 ms)/(5 md + 2 ms),
# is 30.8 %, inside the 30-35 % the seed measured. Standard deviations are 20 % of the means,
# the ratio the seed's part 1 used (0.002 of 0.01 ms).
DEFAULT_MU_MS_MS = 0.030
DEFAULT_SIGMA_MS_MS = 0.006
DEFAULT_MU_MD_MS = 0.040
DEFAULT_SIGMA_MD_MS = 0.008

WARMUP_FRACTION = 0.05  # rounds dropped from the statistics while the queue fills from empty
_NEG = np.iinfo(np.int64).min // 4  # "server free since forever" in ns


def _finite(x: float) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _whole(x: int) -> bool:
    return isinstance(x, int | np.integer) and not isinstance(x, bool)


@dataclass(frozen=True)
class PaxosLanParams:
    """One LAN Multi-Paxos / FPaxos deployment (times in ms).

    ``n`` nodes; ``q2`` phase-2 quorum including the leader (default majority n//2+1);
    ``talk_to`` "all" (send phase 2 to all n-1 followers) or "quorum" (only to q2-1);
    ``mu_l_ms``/``sigma_l_ms`` LAN RTT (seed 002 AWS: 0.427 / 0.0476); ``mu_ms_ms``/
    ``sigma_ms_ms`` serialization and ``mu_md_ms``/``sigma_md_ms`` deserialization+processing
    per message; ``client_rtt_ms`` client <-> leader RTT (default ``mu_l_ms``); ``n_p``
    parallel pipelines at the leader; ``sigma_r_factor`` inter-round spread sigma_r/mu_r;
    ``arrivals`` the gap distribution: "normal" (the seed's, clipped at 0) or "gamma" (same
    mean and sd, never negative; what the WAN and PigPaxos twins use).
    """

    n: int = 5
    q2: int | None = None
    talk_to: str = "all"
    mu_l_ms: float = LAN_RTT_MS
    sigma_l_ms: float = LAN_SD_MS
    mu_ms_ms: float = DEFAULT_MU_MS_MS
    sigma_ms_ms: float = DEFAULT_SIGMA_MS_MS
    mu_md_ms: float = DEFAULT_MU_MD_MS
    sigma_md_ms: float = DEFAULT_SIGMA_MD_MS
    client_rtt_ms: float | None = None
    n_p: int = 1
    sigma_r_factor: float = 2.0
    arrivals: str = "normal"

    def __post_init__(self) -> None:
        require(_whole(self.n) and self.n >= 2,
                f"n={self.n} must be a whole number of nodes >= 2 (phase 2 needs followers)")
        if self.q2 is None:
            object.__setattr__(self, "q2", self.n // 2 + 1)
        q2 = self.q2
        require(_whole(q2) and 2 <= q2 <= self.n,  # type: ignore[operator]
                f"q2={q2} must be a whole number of nodes in 2..n={self.n} (phase-2 quorum "
                "including the leader; q2 larger than n can never be reached)")
        require(self.talk_to in ("all", "quorum"),
                f"talk_to={self.talk_to!r} must be 'all' (send phase 2 to all n-1 followers) "
                "or 'quorum' (send only to q2-1 followers)")
        for name in ("mu_l_ms", "mu_ms_ms", "mu_md_ms"):
            v = getattr(self, name)
            require(_finite(v) and v > 0, f"{name}={v} must be a positive number of ms")
        for name in ("sigma_l_ms", "sigma_ms_ms", "sigma_md_ms"):
            v = getattr(self, name)
            require(_finite(v) and v >= 0,
                    f"{name}={v} must be a standard deviation >= 0 ms (0 for constant)")
        if self.client_rtt_ms is None:
            object.__setattr__(self, "client_rtt_ms", self.mu_l_ms)
        c = self.client_rtt_ms
        require(_finite(c) and c >= 0,  # type: ignore[arg-type]
                f"client_rtt_ms={c} must be a round-trip time >= 0 ms")
        require(_whole(self.n_p) and self.n_p >= 1,
                f"n_p={self.n_p} must be a whole number of pipelines >= 1")
        require(_finite(self.sigma_r_factor) and self.sigma_r_factor >= 0,
                f"sigma_r_factor={self.sigma_r_factor} must be >= 0 (sigma_r = factor * "
                "mean inter-round gap; the seed uses 2)")
        require(self.arrivals in ("normal", "gamma"),
                f"arrivals={self.arrivals!r} must be 'normal' (the seed's gaps, clipped at 0) "
                "or 'gamma' (same mean and sd)")

    @property
    def quorum(self) -> int:
        """Return |q2|, the phase-2 quorum size including the leader."""
        return int(self.q2)  # type: ignore[arg-type]

    @property
    def client_ms(self) -> float:
        """Return the client <-> leader RTT in ms."""
        return float(self.client_rtt_ms)  # type: ignore[arg-type]

    @property
    def contacted(self) -> int:
        """Return how many followers the leader sends phase 2 to."""
        return self.n - 1 if self.talk_to == "all" else self.quorum - 1

    @property
    def needed(self) -> int:
        """Return how many follower replies complete the quorum (q2 - 1; the leader votes)."""
        return self.quorum - 1


def label(p: PaxosLanParams) -> str:
    """Return a short legend label such as 'Paxos N=5' or 'FPaxos N=9 |q2|=3 (to all)'."""
    if p.quorum == p.n // 2 + 1 and p.talk_to == "all":
        base = f"Paxos N={p.n}"
    else:
        base = f"{'Paxos' if p.quorum == p.n // 2 + 1 else 'FPaxos'} N={p.n} |q2|={p.quorum}"
        base += f" (to {p.talk_to})"
    return base if p.n_p == 1 else f"{base}, {p.n_p} pipelines"


# ---------------------------------------------------------------- closed forms


def reply_rtt(p: PaxosLanParams) -> NormalRtt:
    """Return the distribution of one follower reply's RTT (ms), follower processing included."""
    return NormalRtt(p.mu_l_ms + p.mu_ms_ms + p.mu_md_ms,
                     math.sqrt(p.sigma_l_ms ** 2 + p.sigma_ms_ms ** 2 + p.sigma_md_ms ** 2))


def quorum_reply_ms(p: PaxosLanParams) -> float:
    """Return E[r_(q-1)] (ms): mean RTT of the reply that completes the quorum."""
    return order_stat_mean_ms(reply_rtt(p), p.needed, p.contacted)


def messages_per_round(p: PaxosLanParams) -> int:
    """Return M, the messages the leader deserializes per round: the client request plus one
    reply per contacted follower (N with talk-to-all, |q2| with talk-to-quorum)."""
    return p.contacted + 1


def round_service_ms(p: PaxosLanParams) -> float:
    """Return the leader's work per round in ms: ``M * mu_md + 2 * mu_ms``."""
    return messages_per_round(p) * p.mu_md_ms + 2 * p.mu_ms_ms


def max_throughput_rps(p: PaxosLanParams) -> float:
    """Return R_max = n_p / (M * mu_md + 2 * mu_ms) in rounds per second, where M is
    ``messages_per_round`` (the seed's ``n_p / (N mu_md + 2 mu_ms)`` for talk-to-all)."""
    return p.n_p * 1000.0 / round_service_ms(p)


def utilisation(p: PaxosLanParams, load_rps: float) -> float:
    """Return the leader's utilisation (0..1, >= 1 saturated) at ``load_rps`` rounds/s."""
    return load_rps * round_service_ms(p) / (1000.0 * p.n_p)


def network_only_latency_ms(p: PaxosLanParams) -> float:
    """Return part 1's round latency in ms (one synchronous client, no queues):
    ``mu_ms + E[r_(q-1)] + mu_md``."""
    return p.mu_ms_ms + quorum_reply_ms(p) + p.mu_md_ms


def throughput_one_client_rps(p: PaxosLanParams) -> float:
    """Return part 1's throughput of one synchronous client in rounds/s: 1 / latency."""
    return 1000.0 / network_only_latency_ms(p)


def _std_pdf(x: float) -> float:
    return math.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def _std_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def clipped_gap_mean(sigma_r_factor: float) -> float:
    """Return E[max(0, X)] for X ~ N(1, factor^2): the mean of a unit gap clipped at 0."""
    f = sigma_r_factor
    return 1.0 if f == 0 else _std_cdf(1 / f) + f * _std_pdf(1 / f)


def _clipped_moments(f: float) -> tuple[float, float, float]:
    """Return (P(gap = 0), E[gap], E[gap^2]) of max(0, X), X ~ N(1, f^2), f > 0."""
    a = 1 / f
    m1 = _std_cdf(a) + f * _std_pdf(a)
    m2 = (1 + f * f) * _std_cdf(a) + f * _std_pdf(a)
    return _std_cdf(-a), m1, m2


def arrival_ca2(sigma_r_factor: float, arrivals: str = "normal") -> float:
    """Return C_a^2, the squared coefficient of variation of the inter-round gaps.

    "normal": gaps ``N(mu_r, (f mu_r)^2)`` clipped at 0 (then rescaled to mean mu_r); for
    f = 2 a third of the draws clip, so C_a^2 is 1.137, not the seed's sigma_r^2/mu_r^2 = 4.
    "gamma": C_a^2 = f^2 exactly.
    """
    f = sigma_r_factor
    if arrivals == "gamma" or f == 0:
        return f * f
    _, m1, m2 = _clipped_moments(f)
    return m2 / (m1 * m1) - 1.0


def batch_probability(p: PaxosLanParams) -> float:
    """Return P(gap = 0): the share of rounds arriving together with the previous one
    (Phi(-1/f) for clipped normal gaps: 0.309 for the seed's f = 2; 0 for gamma gaps)."""
    f = p.sigma_r_factor
    return 0.0 if p.arrivals == "gamma" or f == 0 else _std_cdf(-1 / f)


def service_cs2(p: PaxosLanParams) -> float:
    """Return the seed's C_s^2 = (M^2 sigma_md^2 + 2^2 sigma_ms^2) / (M mu_md + 2 mu_ms)^2."""
    m = messages_per_round(p)
    return ((m * p.sigma_md_ms) ** 2 + (2 * p.sigma_ms_ms) ** 2) / round_service_ms(p) ** 2


def marchal_wait_ms(load_rps: float, service_ms: float, ca2: float, cs2: float) -> float:
    """Return Marchal's G/G/1 mean waiting time in ms (inf when utilisation >= 1):
    ``w = p^2 (1 + Cs2)(Ca2 + Cs2 p^2) / (2 R (1 - p)(1 + Cs2 p^2))``, p = R * service."""
    rate_per_ms = load_rps / 1000.0
    rho = rate_per_ms * service_ms
    if rho <= 0:
        return 0.0
    if rho >= 1:
        return math.inf
    return (rho * rho * (1 + cs2) * (ca2 + cs2 * rho * rho)
            / (2 * rate_per_ms * (1 - rho) * (1 + cs2 * rho * rho)))


def queue_wait_ms(p: PaxosLanParams, load_rps: float, *, refined: bool = False) -> float:
    """Return the mean queue wait w (ms) of a round at the leader (inf when saturated).

    Seed (``refined=False``): Marchal G/G/1 with the round (M deserializations, 2
    serializations) as one job and C_a^2 from ``arrival_ca2``.

    ``refined=True``, clipped normal gaps: a share p0 = ``batch_probability`` of the gaps is
    exactly 0, so rounds arrive in batches (geometric size X, E[X] = 1/(1-p0)). A round then
    waits for its batch (Marchal G/G/1 over batches: rate R(1-p0), work X rounds, gaps the
    positive ones) plus the rounds ahead of it in its batch, E[X(X-1)]/(2E[X]) = p0/(1-p0)
    rounds (the batch-arrival G^X/G/1 decomposition). Marchal alone misses this: with the
    seed's f = 2 it is most of the wait below 50 % load.

    n_p pipelines: the messages of a round spread over the pipelines, so they act as one queue
    n_p times as fast (service time / n_p, same C_s^2); not Allen-Cunneen G/G/c, which would
    serve each whole round on one pipeline.
    """
    service = round_service_ms(p) / p.n_p
    cs2 = service_cs2(p)
    p0 = batch_probability(p) if refined else 0.0
    if p0 == 0.0:
        return marchal_wait_ms(load_rps, service, arrival_ca2(p.sigma_r_factor, p.arrivals),
                               cs2)
    _, m1, m2 = _clipped_moments(p.sigma_r_factor)
    batch_ca2 = m2 * (1 - p0) / (m1 * m1) - 1  # CV^2 of the positive gaps
    mean_x = 1 / (1 - p0)
    batch_cs2 = cs2 * (1 - p0) + p0  # CV^2 of a geometric sum of rounds' work
    wait = marchal_wait_ms(load_rps * (1 - p0), service * mean_x, batch_ca2, batch_cs2)
    return wait + p0 / (1 - p0) * service


def quorum_burst_ms(p: PaxosLanParams, draws: int = 200_000, seed: int = 0) -> float:
    """Return the mean time (ms) from the broadcast leaving an otherwise idle leader until the
    reply completing the quorum is deserialized and the client reply serialized, when the
    first q2-1 replies queue behind each other (Monte Carlo, ``draws`` rounds, seeded).

    The seed's closed form counts this as ``E[r_(q-1)] + mu_md + mu_ms``: as if the quorum
    reply found the pipeline empty. Replies come back within a few sigma_l of each other
    while each takes mu_md to deserialize, so the (q-1)-th usually waits for the earlier
    ones; the gap grows with q. With n_p > 1 they spread over the pipelines as in
    ``simulate_queue``.
    """
    require(_whole(draws) and draws >= 100, f"draws={draws} must be at least 100 rounds")
    rng = np.random.default_rng(seed)
    k, m = p.needed, p.contacted
    rd = reply_rtt(p)
    arrive = np.sort(np.maximum(rd.sample(rng, (draws, m)), 0.0), axis=1)[:, :k]
    svc = np.maximum(rng.normal(p.mu_md_ms, p.sigma_md_ms, (draws, k)), 0.0)
    svc[:, k - 1] += np.maximum(rng.normal(p.mu_ms_ms, p.sigma_ms_ms, draws), 0.0)
    free = np.full((draws, p.n_p), -np.inf)
    done = np.zeros(draws)
    for j in range(k):  # Lindley over the k replies, reply j on pipeline (j + 1) mod n_p
        c = (j + 1) % p.n_p
        free[:, c] = np.maximum(arrive[:, j], free[:, c]) + svc[:, j]
        done = np.maximum(done, free[:, c])
    return float(done.mean())


def quorum_part_ms(p: PaxosLanParams, *, refined: bool = False) -> float:
    """Return the time (ms) from the broadcast leaving to the client reply serialized, on an
    idle leader: ``E[r_(q-1)] + mu_md + mu_ms`` (seed) or ``quorum_burst_ms`` (refined)."""
    if refined:
        return quorum_burst_ms(p)
    return quorum_reply_ms(p) + p.mu_md_ms + p.mu_ms_ms


def latency_ms(p: PaxosLanParams, load_rps: float, *, refined: bool = False) -> float:
    """Return part 2's mean client latency in ms at ``load_rps`` (inf when saturated). Seed:
    ``L = 2 mu_ms + 2 mu_md + E[r_(q-1)] + w + client_rtt``; refined: see ``curve``."""
    return _latency(p, load_rps, quorum_part_ms(p, refined=refined), refined)


def _latency(p: PaxosLanParams, load_rps: float, quorum_ms: float, refined: bool) -> float:
    # request deserialized and broadcast serialized, the quorum part, queue wait, and the
    # client's round trip
    return (p.mu_md_ms + p.mu_ms_ms + quorum_ms
            + queue_wait_ms(p, load_rps, refined=refined) + p.client_ms)


def _check_loads(loads_rps: Sequence[float]) -> list[float]:
    loads = [float(x) for x in loads_rps]
    require(len(loads) > 0, "loads_rps is empty; pass offered loads in rounds/s")
    for x in loads:
        require(math.isfinite(x) and x > 0,
                f"load {x} must be a positive, finite offered load in rounds/s")
    return loads


def curve(p: PaxosLanParams, loads_rps: Sequence[float], *, refined: bool = False,
          label_: str | None = None) -> Curve:
    """Return the closed-form mean latency (ms) vs offered load (rounds/s); loads at or
    above ``max_throughput_rps`` give saturated points (latency None, never NaN).

    ``refined=False`` is the seed's formula. ``refined=True`` keeps its structure and fixes
    the two terms that put it 3-19 % below the message-level twin (N = 3..9): the quorum
    term becomes ``quorum_burst_ms`` (a round's replies queue behind each other) and the
    wait adds the rounds that arrive in the same instant (``queue_wait_ms``).
    """
    quorum_ms = quorum_part_ms(p, refined=refined)
    pts = []
    for x in _check_loads(loads_rps):
        pts.append(point(x, _latency(p, x, quorum_ms, refined), utilisation(p, x),
                         wait_ms=queue_wait_ms(p, x, refined=refined), quorum_ms=quorum_ms))
    name = label_ or f"{label(p)} ({'refined model' if refined else 'model'})"
    return Curve(name, pts, max_throughput_rps(p),
                 {"model": "closed form, seed 002 part 2 (Marchal G/G/1)"
                           + (", refined: intra-round burst, batch arrivals" if refined else ""),
                  "ca2": arrival_ca2(p.sigma_r_factor, p.arrivals), "cs2": service_cs2(p)})


def refined_curve(p: PaxosLanParams, loads_rps: Sequence[float]) -> Curve:
    """Return ``curve(p, loads_rps, refined=True)`` (for callers that take two arguments,
    such as the model validation)."""
    return curve(p, loads_rps, refined=True)


def closed_loop_throughput_rps(p: PaxosLanParams, clients: int, *, refined: bool = False
                               ) -> float:
    """Return the throughput (rounds/s) of ``clients`` synchronous clients without think time,
    solving the response-time law X = clients / L(X) with the closed-form L (an approximation:
    L assumes open-loop arrivals)."""
    require(_whole(clients) and clients >= 1,
            f"clients={clients} must be a whole number of clients >= 1")
    quorum_ms = quorum_part_ms(p, refined=refined)
    lo, hi = 0.0, max_throughput_rps(p)
    for _ in range(100):
        mid = (lo + hi) / 2
        if mid * _latency(p, mid, quorum_ms, refined) / 1000.0 < clients:
            lo = mid
        else:
            hi = mid
    return lo


# ------------------------------------------------------------ queue simulation


def round_gaps_ms(rng: np.random.Generator, load_rps: float, sigma_r_factor: float,
                  size: int, arrivals: str = "normal") -> np.ndarray:
    """Return ``size`` inter-round gaps in ms with mean mu_r = 1000/load_rps.

    "normal": ``N(mu_r, (factor mu_r)^2)`` clipped at 0 (the seed's truncation), rescaled by
    the clipped mean so that the offered load really is ``load_rps``; "gamma": mean mu_r and
    sd factor * mu_r.
    """
    mean_ms = 1000.0 / load_rps
    f = sigma_r_factor
    if f == 0:
        return np.full(size, mean_ms)
    if arrivals == "gamma":
        shape = 1.0 / (f * f)
        return rng.gamma(shape, mean_ms / shape, size)
    g = np.maximum(rng.normal(1.0, f, size), 0.0)
    return g * (mean_ms / clipped_gap_mean(f))


def _clipped_ns(rng: np.random.Generator, mean_ms: float, sd_ms: float,
                size: int | tuple[int, ...]) -> np.ndarray:
    x = rng.normal(mean_ms, sd_ms, size) if sd_ms > 0 else np.full(size, mean_ms)
    return np.rint(np.maximum(x, 0.0) * NS_PER_MS).astype(np.int64)


# Each pipeline keeps its own clock: pipeline c's times are shifted by c * _LANE (2^52 ns, 52
# days), so one sorted array and one Lindley scan serve all pipelines, with no interaction.
_LANE = 1 << 52


@dataclass(frozen=True)
class _Draws:
    """All random inputs of a queue simulation, in ns, and the job layout.

    Jobs 0..R-1 are the rounds' requests (deserialize request + serialize broadcast), entering
    at arrival ``t``; then the replies, row-major (round i, j-th fastest), entering at the
    broadcast time ``b_i`` plus ``r[i, j]``; the reply completing the quorum also serializes
    the client reply. Job x enters at ``base[src[x]] + add[x]`` where ``base`` is
    ``concat(b, t)`` and ``add`` holds the RTT plus the job's pipeline offset.
    """

    t: np.ndarray
    client: np.ndarray
    r: np.ndarray
    svc: np.ndarray
    src: np.ndarray
    add: np.ndarray
    needed: int


def _pipelines(rounds: int, m: int, n_p: int) -> np.ndarray:
    """Return each job's pipeline: round i's request goes to pipeline i mod n_p and its j-th
    reply (arrival order) to (i + 1 + j) mod n_p, dealing messages out evenly."""
    i = np.arange(rounds)
    req = i % n_p
    rep = (i[:, None] + 1 + np.arange(m)) % n_p
    return np.concatenate([req, rep.ravel()])


def _draw(p: PaxosLanParams, load_rps: float, rounds: int, seed: int) -> _Draws:
    rng = np.random.default_rng(seed)
    t = np.rint(np.cumsum(round_gaps_ms(rng, load_rps, p.sigma_r_factor, rounds, p.arrivals))
                * NS_PER_MS).astype(np.int64)
    client = _clipped_ns(rng, p.client_ms, p.sigma_l_ms, rounds)
    rd = reply_rtt(p)
    m = p.contacted
    r = np.sort(_clipped_ns(rng, rd.mean_ms, rd.sd_ms, (rounds, m)), axis=1)
    s_a = (_clipped_ns(rng, p.mu_md_ms, p.sigma_md_ms, rounds)
           + _clipped_ns(rng, p.mu_ms_ms, p.sigma_ms_ms, rounds))
    s_r = _clipped_ns(rng, p.mu_md_ms, p.sigma_md_ms, (rounds, m))
    s_r[:, p.needed - 1] += _clipped_ns(rng, p.mu_ms_ms, p.sigma_ms_ms, rounds)
    i = np.arange(rounds)
    src = np.concatenate([rounds + i, np.repeat(i, m)])
    add = np.concatenate([np.zeros(rounds, dtype=np.int64), r.ravel()])
    if p.n_p > 1:
        add += _pipelines(rounds, m, p.n_p).astype(np.int64) * _LANE
    return _Draws(t, client, r, np.concatenate([s_a, s_r.ravel()]), src, add, p.needed)


def _lindley(at: np.ndarray, enter: np.ndarray, svc: np.ndarray,
             exits: np.ndarray) -> np.ndarray:
    """Return exit times (ns) of the jobs at sorted positions ``at`` (ascending: a union of
    runs of consecutive positions) through a FIFO queue; each run starts from the stored
    exit of the position before it.

    Lindley's recursion exit_i = max(enter_i, exit_(i-1)) + s_i in closed form:
    exit_i = C_i + max_(j<=i)(enter_j - C_(j-1)), C the cumulative service. One cumulative
    sum serves all runs: a run's starting exit dominates every earlier term (that work was
    done before it).
    """
    cum = np.cumsum(svc)
    before = cum - svc
    u = enter - before
    first = np.ones(at.size, dtype=bool)
    first[1:] = at[1:] != at[:-1] + 1
    st = np.flatnonzero(first)
    prev = at[st] - 1
    x0 = np.where(prev >= 0, exits[np.maximum(prev, 0)], _NEG)
    u[st] = np.maximum(u[st], x0 - before[st])
    return cum + np.maximum.accumulate(u)


def _merge(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge position intervals [lo, hi) that overlap or touch; return sorted (lo, hi)."""
    o = np.argsort(lo, kind="stable")
    lo, hi = lo[o], np.maximum.accumulate(hi[o])
    new = np.ones(lo.size, dtype=bool)
    new[1:] = lo[1:] > hi[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], lo.size) - 1
    return lo[starts], hi[ends]


def _ranges(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Return the concatenation of arange(lo_i, hi_i)."""
    lengths = hi - lo
    offsets = np.cumsum(lengths) - lengths
    return np.repeat(lo - offsets, lengths) + np.arange(int(lengths.sum()))


def _sort_by_time(jb: np.ndarray, e: np.ndarray, kind: str = "stable"
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Return (jobs, entries) sorted by entry time, ties by job id (as the reference loop).

    ``stable`` (timsort) is fastest on the nearly sorted input of later passes and keeps
    tied jobs in their previous (already id-sorted) order; ``quicksort`` on the first.
    """
    o = np.argsort(e, kind=kind)  # type: ignore[call-overload]
    jb, e = jb[o], e[o]
    same = e[1:] == e[:-1]
    if np.any(same & (jb[1:] < jb[:-1])):  # rounds arriving together tie often
        tie = np.flatnonzero(same)
        at = np.concatenate([tie, tie + 1])
        at.sort()
        at = at[np.append(True, at[1:] != at[:-1])]
        jb[at] = jb[at[np.lexsort((jb[at], e[at]))]]
    return jb, e


def _lindley_all(enter: np.ndarray, svc: np.ndarray) -> np.ndarray:
    """Return the exits (ns) of all jobs, in entry order, through an initially idle FIFO."""
    cum = np.cumsum(svc)
    u = enter - cum
    u += svc
    np.maximum.accumulate(u, out=u)
    u += cum
    return u


_STEP = 16  # positions a run is first extended by when its last exit changed
_GROW = 3   # extensions per pass before the rest of a run is left to the next pass
_FULL = 8   # re-run everything while more than 1/_FULL of the jobs would move


class _Queue:
    """The leader's pipelines as one array of jobs sorted by (keyed) entry time: ``job`` the
    job id at each position, ``T`` its entry, ``E`` its exit, ``pos`` each job's position."""

    job: np.ndarray
    T: np.ndarray
    E: np.ndarray
    pos: np.ndarray

    def __init__(self, d: _Draws) -> None:
        self.d = d
        self.rounds = d.t.size
        self.jobs = d.svc.size
        # [b | t]: b starts as the requests queueing (each on its pipeline) behind each other
        # only, a lower bound: more work can only delay them
        key = d.t + d.add[:self.rounds]
        o = np.argsort(key, kind="stable")
        b = np.empty_like(key)
        b[o] = _lindley_all(key[o], d.svc[:self.rounds][o]) - d.add[:self.rounds][o]
        self.base = np.concatenate([b, d.t])
        self.job = np.arange(self.jobs)
        self.full_pass("quicksort")

    def broadcasts(self) -> np.ndarray:
        """Return each round's broadcast time b (ns): its request job's exit."""
        return self.E[self.pos[:self.rounds]] - self.d.add[:self.rounds]

    def entries(self, jb: np.ndarray) -> np.ndarray:
        """Return the (keyed) entry times in ns of jobs ``jb`` under the current b."""
        return self.base[self.d.src[jb]] + self.d.add[jb]

    def full_pass(self, kind: str = "stable") -> None:
        """Re-sort every job (from the previous order) and run the whole queue."""
        self.job, self.T = _sort_by_time(self.job, self.entries(self.job), kind)
        self.E = _lindley_all(self.T, self.d.svc[self.job])
        self.pos = np.empty(self.jobs, dtype=np.int64)
        self.pos[self.job] = np.arange(self.jobs)

    def rerun(self, moved: np.ndarray, dirty: np.ndarray) -> np.ndarray:
        """Move the replies of the ``moved`` rounds to their new entry times and re-run only
        the position ranges they cross, plus the ranges starting at the ``dirty`` positions;
        return the new dirty positions.

        A run whose last exit differs from the stored one pushes its successors, so it is
        extended (doubling) a few times; if it still differs, the position after it becomes
        dirty: the stored exits from there on wait for the next pass. Letting changes run
        ahead to the end of their busy period would redo the same stretch on every pass.
        """
        m = self.d.r.shape[1]
        jobs, T = self.jobs, self.T
        ids = (self.rounds + moved[:, None] * m + np.arange(m)).ravel()
        new = self.entries(ids)
        old_at = self.pos[ids]
        land = np.searchsorted(T, new, "left")
        # the range from the old position to every position the new entry can take; ties
        # are ordered by job id (as in the reference loop), so include equal entries
        top = land + 1
        more = np.flatnonzero(T[np.minimum(land, jobs - 1)] == new)
        top[more] = np.searchsorted(T, new[more], "right")
        lo = np.concatenate([np.minimum(old_at, land), dirty])
        hi = np.concatenate([np.maximum(old_at + 1, top), dirty + _STEP])
        lo, hi = _merge(lo, np.minimum(hi, jobs))
        for attempt in range(_GROW + 1):
            at = _ranges(lo, hi)
            jb = self.job[at]
            jb, e = _sort_by_time(jb, self.entries(jb))
            ex = _lindley(at, e, self.d.svc[jb], self.E)
            last = np.append(at[1:] != at[:-1] + 1, True)
            tail = np.flatnonzero(last)
            bad = tail[(ex[tail] != self.E[at[tail]]) & (at[tail] + 1 < jobs)]
            self.job[at], T[at], self.E[at] = jb, e, ex
            self.pos[jb] = at
            grow = np.searchsorted(lo, at[bad], "right") - 1
            lo, hi = lo[grow], hi[grow]
            if not lo.size or attempt == _GROW:
                break
            lo, hi = _merge(lo, np.minimum(jobs, hi + np.maximum(hi - lo, _STEP)))
        return hi


def _solve(d: _Draws) -> tuple[np.ndarray, int]:
    """Run the leader's pipeline(s); return (exit ns per job id, keyed by pipeline; passes).

    The broadcast leaves when the request's job exits and replies enter at that time plus
    their RTT, so arrivals depend on exits. We iterate to the fixed point: start from a lower
    bound (requests queueing behind requests only), run the queue, move the replies of rounds
    whose broadcast time changed, repeat. The true run is the unique fixed point (a reply enters
    strictly after its broadcast, so by induction over time every pass fixes one more
    generation). While many rounds move we re-run everything; later only the position
    ranges the moved replies cross, and the stretches just after them (``_Queue.rerun``).
    """
    q = _Queue(d)
    rounds, m = d.r.shape
    passes = 1
    dirty = np.zeros(0, dtype=np.int64)
    while True:
        b = q.broadcasts()
        moved = np.flatnonzero(b != q.base[:rounds])
        if moved.size == 0 and dirty.size == 0:
            return q.E[q.pos], passes
        q.base[:rounds] = b
        passes += 1
        if moved.size * m * _FULL > q.jobs:
            q.full_pass()
            dirty = dirty[:0]
        else:
            dirty = q.rerun(moved, dirty)


def _finish(p: PaxosLanParams, d: _Draws, exits: np.ndarray, load_rps: float,
            passes: int, wall_s: float) -> CurvePoint:
    rounds, m = d.r.shape
    exits = exits - (d.add - np.concatenate([np.zeros(rounds, np.int64), d.r.ravel()]))
    replies = exits[rounds:].reshape(rounds, m)[:, :d.needed]
    done = replies.max(axis=1)  # n_p > 1: an earlier vote may leave its pipeline last
    lat_ms = (done - d.t + d.client) / NS_PER_MS
    kept = lat_ms[int(rounds * WARMUP_FRACTION):]
    busy_ms = d.svc.sum() / NS_PER_MS
    span_ms = (exits.max() - d.t[0]) / NS_PER_MS
    nominal = utilisation(p, load_rps)
    return point(load_rps, float(kept.mean()), nominal, float(np.percentile(kept, 99)),
                 measured_utilisation=busy_ms / (p.n_p * span_ms), rounds=float(rounds),
                 passes=float(passes), wall_s=wall_s)


def _check_run(load_rps: float, rounds: int) -> None:
    require(math.isfinite(load_rps) and load_rps > 0,
            f"load_rps={load_rps} must be a positive, finite offered load in rounds/s")
    require(_whole(rounds) and rounds >= 100,
            f"rounds={rounds} must be a whole number of rounds >= 100")


def simulate_queue(p: PaxosLanParams, load_rps: float, rounds: int = 200_000,
                   seed: int = 1) -> CurvePoint:
    """Return the message-level pipeline simulation at ``load_rps`` rounds/s: mean and p99
    client latency (ms) over ``rounds`` rounds (first 5 % dropped as warm-up), nominal
    utilisation, and in ``extra`` the measured utilisation and fixed-point passes.

    The leader's pipeline is FIFO and shared by incoming and outgoing messages; rounds
    arrive with ``round_gaps_ms`` spacing; a round is: request deserialization and broadcast
    serialization (one job), replies entering at broadcast + RTT each needing
    deserialization, the quorum-completing one also serializing the client reply; latency =
    that exit - arrival + client RTT. With n_p > 1 each message is dealt to one pipeline
    (``_pipelines``), each a FIFO of its own. Saturated loads (utilisation >= 1) are not
    simulated: they return a saturated point.
    """
    _check_run(load_rps, rounds)
    if utilisation(p, load_rps) >= 1:
        return point(load_rps, math.inf, utilisation(p, load_rps))
    t0 = time.perf_counter()
    d = _draw(p, load_rps, rounds, seed)
    exits, passes = _solve(d)
    return _finish(p, d, exits, load_rps, passes, time.perf_counter() - t0)


def simulate_queue_reference(p: PaxosLanParams, load_rps: float, rounds: int = 2_000,
                             seed: int = 1) -> CurvePoint:
    """Return the same simulation as ``simulate_queue`` (same draws, same result) computed by
    a plain-Python event loop over messages: the slow, obviously correct peer used by tests
    and benchmarks."""
    _check_run(load_rps, rounds)
    if utilisation(p, load_rps) >= 1:
        return point(load_rps, math.inf, utilisation(p, load_rps))
    t0 = time.perf_counter()
    d = _draw(p, load_rps, rounds, seed)
    m = d.r.shape[1]
    t, r, svc = d.t.tolist(), d.r.tolist(), d.svc.tolist()
    lane = (d.add // _LANE).tolist()
    exits = [0] * len(svc)
    free = [_NEG] * p.n_p
    heap = [(t[i], i) for i in range(rounds)]  # (enter ns, job id): ties by job id
    heapq.heapify(heap)
    while heap:
        enter, jid = heapq.heappop(heap)
        c = lane[jid]
        free[c] = exits[jid] = max(enter, free[c]) + svc[jid]
        if jid < rounds:  # the broadcast leaves: its replies come back after their RTTs
            for j, rtt in enumerate(r[jid]):
                heapq.heappush(heap, (exits[jid] + rtt, rounds + jid * m + j))
    keyed = np.array(exits, dtype=np.int64) + (d.add // _LANE) * _LANE
    return _finish(p, d, keyed, load_rps, 0, time.perf_counter() - t0)


def queue_curve(p: PaxosLanParams, loads_rps: Sequence[float], rounds: int = 200_000,
                seed: int = 1) -> Curve:
    """Return ``simulate_queue`` over ``loads_rps`` (rounds/s) as a Curve (latency ms)."""
    pts = [simulate_queue(p, x, rounds, seed + i)
           for i, x in enumerate(_check_loads(loads_rps))]
    return Curve(f"{label(p)} (queue sim)", pts, max_throughput_rps(p),
                 {"model": "message-level pipeline simulation (seed 002 part 2)",
                  "rounds": rounds, "seed": seed})


# ------------------------------------------------------------------ validation


VALIDATION_FRACTIONS = (0.1, 0.25, 0.4, 0.55, 0.7, 0.75, 0.88, 0.95)


def validation_grid() -> list[tuple[str, PaxosLanParams, list[float]]]:
    """Return (label, params, loads in rounds/s) for N in 3, 5, 7, 9 with default costs and
    FPaxos N=9 |q2|=3 both ways, loads from 10 % to 95 % of each maximum throughput."""
    cases = [PaxosLanParams(n=n) for n in (3, 5, 7, 9)]
    cases += [PaxosLanParams(n=9, q2=3, talk_to="all"), PaxosLanParams(n=9, q2=3,
                                                                       talk_to="quorum")]
    return [(label(p), p, [f * max_throughput_rps(p) for f in VALIDATION_FRACTIONS])
            for p in cases]
