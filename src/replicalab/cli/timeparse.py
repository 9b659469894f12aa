"""Durations on the command line: ``300``, ``300s``, ``500ms``, ``5m``, ``1h``."""

from __future__ import annotations

import re

_UNITS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration_s(text: str, flag: str) -> float:
    """Return ``text`` as seconds (> 0); ValueError names the flag and the accepted forms."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h|d)?\s*", text)
    value = float(m.group(1)) * _UNITS[m.group(2) or "s"] if m else 0.0
    if not m or value <= 0:
        raise ValueError(f"{flag} {text!r} must be a positive duration like 500ms, 30s, 5m or 1h")
    return value
