"""Durations as people write them: ``500ms``, ``30s``, ``5m``, ``1h``, ``2d`` and compounds
such as ``1m30s`` or ``1h05m``, read the same way by the command line and fault schedules."""

from __future__ import annotations

import re

UNIT_S = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3}
"""Seconds per unit, largest first."""

_PART = re.compile(r"([0-9]*\.?[0-9]+)\s*(ms|s|m|h|d)")
_WHOLE = re.compile(r"(?:[0-9]*\.?[0-9]+\s*(?:ms|s|m|h|d)\s*)+")
_ORDER = list(UNIT_S)


def parse_seconds(text: str) -> float | None:
    """Return ``text`` in seconds when it is one number with a unit or a compound of them,
    largest unit first and each unit once (``1m30s`` is 90.0, ``1h05m`` 3900.0), else None
    (a bare number, ``30s1m``, ``1m1m``, or no duration at all)."""
    t = text.strip()
    if not t or not _WHOLE.fullmatch(t):
        return None
    total, last = 0.0, -1
    for number, unit in _PART.findall(t):
        rank = _ORDER.index(unit)
        if rank <= last:
            return None  # units out of order or repeated: ambiguous, refused
        last = rank
        total += float(number) * UNIT_S[unit]
    return total
