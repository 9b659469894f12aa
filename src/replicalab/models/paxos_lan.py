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
* ``paxos_lan_queue.simulate_queue``: the seed's message-level pipeline simulation,
  vectorized with numpy (``simulate_queue_reference`` is the same simulation as a plain
  event loop), in a module of its own.
* FPaxos: ``q2`` below a majority; ``talk_to="all"`` still sends to all N-1 followers,
  ``talk_to="quorum"`` sends only to |q2|-1 of them and waits for all of those.

Times are ms (``_ms``), rates requests (rounds) per second (``_rps``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from replicalab.models import queueing
from replicalab.models.base import Curve, point, require
from replicalab.models.orderstats import NormalRtt, order_stat_mean_ms
from replicalab.regions import LAN_RTT_MS, LAN_SD_MS

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
    """Return Marchal's G/G/1 mean waiting time in ms (inf when utilisation >= 1) at
    ``load_rps`` rounds per second (:func:`replicalab.models.queueing.marchal_wait_ms`)."""
    return queueing.marchal_wait_ms(rate_per_ms=load_rps / 1000.0, service_ms=service_ms,
                                    ca2=ca2, cs2=cs2)


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


def check_loads(loads_rps: Sequence[float]) -> list[float]:
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
    for x in check_loads(loads_rps):
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


# ------------------------------------------------------------ arrival process


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
