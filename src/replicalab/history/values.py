"""Probe values: unique and ordered per key, so a checker knows each write's version."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProbeValue:
    """Writer id, per-writer sequence number (the version) and the writer's clock in ns."""

    writer: int
    seq: int
    t_ns: int


def encode_value(writer: int, seq: int, t_ns: int) -> str:
    """Return the string a probe writes: ``"<seq>.<writer>@<t_ns>"`` (seq first: it orders)."""
    return f"{seq}.{writer}@{t_ns}"


def decode_value(value: str | None) -> ProbeValue | None:
    """Return the ProbeValue in ``value``, or None for absent/foreign values."""
    if not value:
        return None
    try:
        head, t = value.split("@", 1)
        seq, writer = head.split(".", 1)
        return ProbeValue(int(writer), int(seq), int(t))
    except ValueError:
        return None
