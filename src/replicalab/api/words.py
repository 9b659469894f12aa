"""Words for numbers in what replicalab says: ``1 store``, ``3 stores``, ``1 op``; a
duration as ``3m05s``."""

from __future__ import annotations

_IRREGULAR = {"process": "processes", "proxy": "proxies", "entry": "entries"}


def plural(n: int, noun: str, many: str | None = None) -> str:
    """Return ``n`` (with thousands separators) and ``noun``, in the plural unless ``n`` is
    1: ``1 redis node``, ``3 redis nodes``, ``1,200 operations``; ``many`` overrides the
    plural form (the last word of ``noun`` is made plural otherwise)."""
    if n == 1:
        return f"{n:,} {noun}"
    if many is None:
        head, _, last = noun.rpartition(" ")
        if last in _IRREGULAR:
            last = _IRREGULAR[last]
        elif last.endswith(("s", "x", "ch", "sh")):
            last += "es"
        elif last.endswith("y") and last[-2:-1] not in tuple("aeiou"):
            last = last[:-1] + "ies"
        else:
            last += "s"
        many = f"{head} {last}" if head else last
    return f"{n:,} {many}"


def fmt_s(seconds: float) -> str:
    """Return a duration as ``45s``, ``3m05s`` or ``1h02m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
