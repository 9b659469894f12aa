"""Shared result types and parameter handling of the performance models."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, TypeVar

from replicalab.history.rundir import finite_or_null

P = TypeVar("P")


@dataclass(frozen=True)
class CurvePoint:
    """One offered load and what the protocol gives at it.

    ``latency_ms`` is the mean client-observed latency (None when saturated: never NaN);
    ``utilisation`` is the busiest node's utilisation (0..1; >= 1 means saturated);
    ``p99_ms`` is optional (twins report it, closed forms may not).
    """

    offered_rps: float
    latency_ms: float | None
    utilisation: float
    saturated: bool
    p99_ms: float | None = None
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Curve:
    """Latency vs throughput of one protocol configuration."""

    label: str
    points: list[CurvePoint]
    max_throughput_rps: float
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-ready dict (no NaN or inf: those become None)."""
        return finite_or_null(dataclasses.asdict(self))


def point(offered_rps: float, latency_ms: float, utilisation: float,
          p99_ms: float | None = None, **extra: float) -> CurvePoint:
    """Return a CurvePoint, flagged saturated (latency None) when utilisation >= 1 or the
    latency is not finite."""
    saturated = utilisation >= 1.0 or not math.isfinite(latency_ms)
    return CurvePoint(offered_rps, None if saturated else latency_ms, utilisation, saturated,
                      None if saturated else p99_ms, dict(extra))


def from_dict(cls: type[P], data: dict[str, Any], what: str) -> P:
    """Return dataclass ``cls`` built from ``data`` (e.g. a TOML table).

    Raises ValueError naming an unknown key (listing the valid ones) or a value of the wrong
    type; the dataclass's own ``__post_init__`` validates ranges.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    for key in data:
        if key not in fields:
            raise ValueError(f"unknown parameter {key!r} for {what}; valid: "
                             f"{', '.join(sorted(fields))}")
    return cls(**data)


def require(ok: bool, message: str) -> None:
    """Raise ValueError(message) unless ``ok`` (messages name the parameter and its unit)."""
    if not ok:
        raise ValueError(message)


_SCALARS = (bool, int, float, str)


def describe(params: Any) -> dict[str, Any]:
    """Return a flat, JSON-ready view of a params dataclass (complex values as text)."""
    out = {}
    for f in dataclasses.fields(params):
        v = getattr(params, f.name)
        out[f.name] = v if isinstance(v, _SCALARS) or v is None else str(v)
    return out
