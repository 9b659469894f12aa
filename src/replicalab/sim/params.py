"""Scheme parameters from URL query strings, validated with messages that name the fix."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

P = TypeVar("P")


def parse_params(cls: type[P], query: dict[str, list[str]], what: str) -> P:
    """Return ``cls`` filled from ``query``; ValueError names unknown or invalid parameters."""
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for name, raw in query.items():
        if name not in fields:
            raise ValueError(
                f"unknown parameter {name!r} for {what}; valid: {', '.join(sorted(fields))}")
        default = fields[name].default
        text = raw[-1]
        try:
            if isinstance(default, bool):
                if text.lower() not in ("1", "0", "true", "false", "yes", "no"):
                    raise ValueError
                values[name] = text.lower() in ("1", "true", "yes")
            elif isinstance(default, int):
                values[name] = int(text)
            elif isinstance(default, float):
                values[name] = float(text)
            else:
                values[name] = text
        except ValueError:
            kind = type(default).__name__
            raise ValueError(f"parameter {name}={text!r} for {what} must be a {kind}") from None
    params = cls(**values)
    check = getattr(params, "check", None)
    if check is not None:
        check(what)
    return params


def require(ok: bool, what: str, message: str) -> None:
    """Raise ValueError ``"<what>: <message>"`` unless ``ok``."""
    if not ok:
        raise ValueError(f"{what}: {message}")
