"""Durations on the command line: the API's deprecation of a bare number (``300`` read as
seconds) said as a note, and the old ``--x-ms`` options that took bare milliseconds."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

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
    with warnings_as_notes():
        return durations.parse_duration(chosen, flag) * 1000.0
