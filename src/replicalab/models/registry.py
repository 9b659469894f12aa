"""The models the CLI offers: parameters, analytic curve, twin, validation grid, tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replicalab.models.base import Curve


def _no_tables(_params: Any) -> list[dict[str, Any]]:
    return []


@dataclass(frozen=True)
class ModelSpec:
    """One protocol model as the CLI sees it."""

    name: str
    title: str
    example: str
    params_cls: type
    curve: Callable[[Any, list[float]], Curve]
    twin: Callable[[Any, list[float], int, int], Curve]
    grid: Callable[[], list[tuple[str, Any, list[float]]]]
    tables: Callable[[Any], list[dict[str, Any]]] = field(default=_no_tables)


MODELS: dict[str, ModelSpec] = {}
