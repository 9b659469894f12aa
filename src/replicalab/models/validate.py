"""Model vs discrete-event twin over a grid: where and why they diverge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from replicalab.models.base import Curve

UTILISATION_LIMIT = 0.8


@dataclass(frozen=True)
class Divergence:
    """The worst relative gap in mean latency between model and twin for one grid entry."""

    label: str
    points_compared: int
    worst_gap: float | None  # |twin - model| / twin, fraction
    worst_load_rps: float | None
    worst_utilisation: float | None
    ok: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return dict(self.__dict__)


def compare(label: str, model: Curve, twin: Curve, tolerance: float) -> Divergence:
    """Return the largest model/twin latency gap at loads the model puts below 80 %
    utilisation, with a one-line reason where the gap exceeds ``tolerance``."""
    worst: tuple[float, float, float] | None = None
    n = 0
    for m, t in zip(model.points, twin.points, strict=True):
        if m.latency_ms is None or t.latency_ms is None or m.utilisation >= UTILISATION_LIMIT:
            continue
        n += 1
        gap = abs(t.latency_ms - m.latency_ms) / t.latency_ms
        if worst is None or gap > worst[0]:
            worst = (gap, m.offered_rps, m.utilisation)
    if worst is None:
        return Divergence(label, 0, None, None, None, False,
                          "no load below 80 % utilisation with a latency from both")
    ok = worst[0] <= tolerance
    if ok:
        why = "agree"
    elif worst[2] >= 0.5:
        why = ("gap grows with load: the closed-form queue (Marchal G/G/1) and the simulated "
               "message queues disagree near saturation")
    else:
        why = ("gap at low load: the network/quorum part differs (order statistic, client "
               "placement or message pattern)")
    return Divergence(label, n, round(worst[0], 6), worst[1], round(worst[2], 6), ok, why)


def validate(grid: Sequence[tuple[str, Any, list[float]]],
             model: Callable[[Any, list[float]], Curve],
             twin: Callable[[Any, list[float], int, int], Curve],
             rounds: int, seed: int, tolerance: float = 0.10,
             progress: Callable[[float], None] | None = None) -> list[Divergence]:
    """Run model and twin for every (label, params, loads) and return their divergences."""
    out = []
    for i, (label, params, loads) in enumerate(grid):
        out.append(compare(label, model(params, loads), twin(params, loads, seed, rounds),
                           tolerance))
        if progress is not None:
            progress((i + 1) / len(grid))
    return out
