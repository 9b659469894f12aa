"""Durations on the command line: ``300s``, ``500ms``, ``5m``, ``1h``, ``1m30s`` (and,
deprecated, a bare ``300`` read as seconds); the old ``--x-ms`` options that took bare
milliseconds."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from replicalab.api import durations
from replicalab.cli.errors import note as note_once
from replicalab.cli.errors import said


@contextmanager
def warnings_as_notes() -> Iterator[None]:
    """Turn the FutureWarnings raised inside (a bare number read as seconds by the API's
    parser) into the command line's deprecation notes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        try:
            yield
        finally:
            for w in caught:
                if issubclass(w.category, FutureWarning):
                    note_once(said(w.message))


def noted(fn: Callable[..., Any], *args: Any) -> Any:
    """Return ``fn(*args)`` with its FutureWarnings turned into notes."""
    with warnings_as_notes():
        return fn(*args)


def parse_duration(text: str, flag: str, bare_unit: str = "s") -> float:
    """Return ``text`` as seconds (> 0): a number with a unit (ms, s, m, h, d), a compound
    such as ``1m30s`` (:func:`replicalab.runtime.durations.parse_seconds`), or a bare
    number in ``bare_unit`` with a deprecation note; ValueError names the flag and the
    accepted forms (the parser is the Python API's: ``api/durations.py``)."""
    return float(noted(durations.parse_duration, text, flag, bare_unit))


def parse_duration_s(text: str, flag: str) -> float:
    """Return ``text`` as seconds (> 0); a bare number is seconds (deprecated, noted)."""
    return parse_duration(text, flag, "s")


def duration_ms(text: str | None, flag: str, old_ms: float | None, old_flag: str,
                default: str) -> float:
    """Return the milliseconds of a duration option that replaced a bare-milliseconds one:
    ``text`` given to ``flag`` (e.g. ``--think 20ms``), else ``old_ms`` given to the
    deprecated ``old_flag`` (``--think-ms 20``, noted), else ``default``."""
    if text is not None and old_ms is not None:
        raise ValueError(f"{old_flag} is the old name of {flag}; give only {flag}")
    if old_ms is not None:
        if old_ms < 0:
            raise ValueError(f"{old_flag} {old_ms:g} must not be negative")
        note_once(f"{old_flag} is deprecated; use {flag} {old_ms:g}ms")
        return old_ms
    chosen = default if text is None else text
    if chosen.strip() in ("0", "0ms", "0s"):
        return 0.0
    return parse_duration(chosen, flag) * 1000.0
