"""Durations as people write them: ``300s``, ``500ms``, ``5m``, ``1h``, ``7d``, ``1m30s``.

One parser for the command line and the Python API. Text without a unit (``"300"``) is read
in the caller's bare unit with a :class:`FutureWarning` (the command line turns it into its
deprecation note); in Python a number (``300``, ``2.5``) is simply seconds.
"""

from __future__ import annotations

import re
import warnings

from replicalab.api.errors import ParameterDeprecation, ParameterError
from replicalab.runtime.durations import UNIT_S, parse_seconds


def parse_duration(text: str, flag: str, bare_unit: str = "s") -> float:
    """Return ``text`` as seconds (> 0): a number with a unit (ms, s, m, h, d), a compound
    such as ``1m30s`` (:func:`replicalab.runtime.durations.parse_seconds`), or a bare number
    in ``bare_unit`` with a FutureWarning (:class:`ParameterDeprecation`);
    :class:`ParameterError` names ``flag`` and the accepted forms."""
    bare = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*", text)
    value = (float(bare.group(1)) * UNIT_S[bare_unit] if bare else parse_seconds(text)) or 0.0
    if value <= 0:
        raise ParameterError(flag, f"{text!r} must be a positive duration like 500ms, 30s, "
                                   "5m, 1h or 1m30s")
    if bare:
        warnings.warn(ParameterDeprecation(
            flag, f"{text.strip()}: a number without a unit is read as {text.strip()}"
                  f"{bare_unit}; write the unit (bare numbers are deprecated)"), stacklevel=2)
    return value


def seconds(value: str | float, name: str) -> float:
    """Return ``value`` in seconds (> 0): a number is seconds, text is parsed as
    :func:`parse_duration` does (``"1h"``); :class:`ParameterError` names ``name``."""
    if isinstance(value, bool):
        raise ParameterError(name, f"{value!r} must be a duration like 30s or a number of "
                                   "seconds")
    if isinstance(value, int | float):
        if not value > 0:
            raise ParameterError(name, f"{value!r} must be positive (seconds)")
        return float(value)
    return parse_duration(str(value), name)
