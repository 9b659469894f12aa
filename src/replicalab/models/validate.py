"""Model vs discrete-event twin over a grid: latency and capacity, where and why they diverge."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from replicalab.models.base import Curve

UTILISATION_LIMIT = 0.8


@dataclass(frozen=True)
class Divergence:
    """Model vs twin for one grid entry: the worst relative gap in mean latency below 80 %
    utilisation, and the gap between the model's maximum throughput and the one the twin
    measured on its own runs (req/s; ``twin_bottleneck`` is the node that saturated first,
    ``twin_work_ms`` its measured work per request per worker, ``model_work_ms`` the work
    per request the model's maximum implies)."""

    label: str
    points_compared: int
    worst_gap: float | None  # |twin - model| / twin, fraction
    worst_load_rps: float | None
    worst_utilisation: float | None
    latency_ok: bool
    model_capacity_rps: float
    twin_capacity_rps: float
    capacity_gap: float | None  # |twin - model| / twin, fraction
    capacity_ok: bool
    twin_bottleneck: str | None
    twin_work_ms: float | None
    model_work_ms: float | None
    ok: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return dict(self.__dict__)


def _latency_gap(model: Curve, twin: Curve) -> tuple[int, tuple[float, float, float] | None]:
    """Return (points compared, (worst gap, its load, its model utilisation) or None)."""
    worst: tuple[float, float, float] | None = None
    n = 0
    for m, t in zip(model.points, twin.points, strict=True):
        if m.latency_ms is None or t.latency_ms is None or m.utilisation >= UTILISATION_LIMIT:
            continue
        n += 1
        gap = abs(t.latency_ms - m.latency_ms) / t.latency_ms
        if worst is None or gap > worst[0]:
            worst = (gap, m.offered_rps, m.utilisation)
    return n, worst


def _latency_why(worst: tuple[float, float, float] | None, tolerance: float) -> str:
    if worst is None:
        return "no load below 80 % utilisation with a latency from both"
    if worst[0] <= tolerance:
        return ""
    if worst[2] >= 0.5:
        return ("latency gap grows with load: the closed-form queue (Marchal G/G/1) and the "
                "simulated message queues disagree near saturation")
    return ("latency gap at low load: the network/quorum part differs (order statistic, "
            "client placement or message pattern)")


def _capacity_why(gap: float | None, model_rps: float, twin_rps: float,
                  measured: dict[str, Any], tolerance: float) -> str:
    if gap is None:
        return "the twin found no load its queues sustain"
    if gap <= tolerance:
        return ""
    node = measured.get("bottleneck", "?")
    work = measured.get("work_ms")
    did = f"does {work:.4f} ms of work per request per worker" if work is not None else \
        "saturates"
    if twin_rps < model_rps:
        return (f"the twin saturates first: its node {node} {did}, more than the model "
                "counts for its busiest node")
    return (f"the twin's queues sustain more than the model's maximum: its busiest node "
            f"{node} {did}, less than the model counts")


def compare(label: str, model: Curve, twin: Curve, tolerance: float) -> Divergence:
    """Return model vs twin for one grid entry: the largest latency gap at loads the model
    puts below 80 % utilisation and the capacity gap, with a one-line reason for each gap
    beyond ``tolerance`` (fractions of the twin's figure)."""
    n, worst = _latency_gap(model, twin)
    latency_ok = worst is not None and worst[0] <= tolerance
    measured = twin.extra.get("capacity") or {}
    m_rps, t_rps = float(model.max_throughput_rps), float(twin.max_throughput_rps)
    cap_gap = abs(t_rps - m_rps) / t_rps if t_rps > 0 else None
    capacity_ok = cap_gap is not None and cap_gap <= tolerance
    why = "; ".join(w for w in (_latency_why(worst, tolerance),
                                _capacity_why(cap_gap, m_rps, t_rps, measured, tolerance)) if w)
    work = measured.get("work_ms")
    return Divergence(
        label, n, None if worst is None else round(worst[0], 6),
        None if worst is None else worst[1], None if worst is None else round(worst[2], 6),
        latency_ok, round(m_rps, 3), round(t_rps, 3),
        None if cap_gap is None else round(cap_gap, 6), capacity_ok,
        measured.get("bottleneck"), None if work is None else round(float(work), 6),
        round(1000.0 / m_rps, 6) if m_rps > 0 else None,
        latency_ok and capacity_ok, why or "agree")


def validate_entry(model: str, index: int, rounds: int, seed: int, tolerance: float
                   ) -> Divergence:
    """Return model vs twin for entry ``index`` of model ``model``'s validation grid (one
    independent job of ``model validate``: the twin is seeded, so where it runs does not
    change the result)."""
    from replicalab.models.registry import MODELS

    spec = MODELS[model]
    label, params, loads = spec.grid()[index]
    return compare(label, spec.curve(params, loads), spec.twin(params, loads, seed, rounds),
                   tolerance)


def validate_cost(model: str, index: int) -> float:
    """Return a rough relative cost of one grid entry (loads x nodes): ``model validate``
    starts the dearest first, so that its workers finish together."""
    from replicalab.models.registry import MODELS

    _label, params, loads = MODELS[model].grid()[index]
    return float(len(loads) * getattr(params, "n", 5))


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


def comparison_table(rows: Sequence[dict[str, Any]], tolerance: float,
                     caption: str | None = None) -> dict[str, Any]:
    """Return a table ({caption, header, rows}) of ``Divergence.to_json()`` rows (each may
    carry a ``model`` name): latency gap, capacity from the model and measured by the twin,
    their deviation, the twin's bottleneck and the verdict with its reason."""
    header = ["model", "grid entry", "points", "worst latency gap", "at load (req/s)",
              "capacity model (req/s)", "capacity twin (req/s)", "capacity gap",
              "twin bottleneck", "verdict"]
    out = []
    for r in rows:
        def pct(v: float | None) -> str:
            return "n/a" if v is None else f"{100 * v:.1f}%"

        load = "" if r["worst_load_rps"] is None else f"{r['worst_load_rps']:,.0f}"
        out.append([r.get("model", ""), r["label"], r["points_compared"], pct(r["worst_gap"]),
                    load, f"{r['model_capacity_rps']:,.0f}", f"{r['twin_capacity_rps']:,.0f}",
                    pct(r["capacity_gap"]), r["twin_bottleneck"] or "",
                    "ok" if r["ok"] else f"diverges: {r['why']}"])
    return {"caption": caption or (f"Model vs twin: mean latency below 80 % utilisation and "
                                   f"maximum throughput (the twin's measured by its own runs), "
                                   f"tolerance {100 * tolerance:g} %"),
            "header": header, "rows": out}
