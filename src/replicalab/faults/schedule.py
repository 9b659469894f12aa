"""Fault schedules: ``--fault "at=30s crash node=2 for=20s"`` or a TOML file of [[fault]]
tables, checked before a run starts (a fault the run cannot hold, an unknown table or a
wrongly typed value is refused with one line naming the fix)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ACTIONS = ("crash", "pause", "partition", "slow", "power-loss")
POWER_OFF_S = 1.0
"""How long the power stays off when a power-loss fault gives no for= (s)."""
_DURATION = re.compile(r"([0-9]*\.?[0-9]+)(ms|s|m)?")
_UNIT_S = {"ms": 1e-3, "s": 1.0, "m": 60.0, None: 1.0}


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: what, on which node or region, when and for how long (s)."""

    action: str
    at_s: float
    for_s: float
    node: int | None = None
    region: str | None = None
    extra_ms: float = 0.0  # slow: added one-way delay

    @property
    def target(self) -> str:
        """Return ``n2``, ``region US-W`` or ``every node`` (a power loss with no target)."""
        if self.node is None and self.region is None:
            return "every node"
        return f"n{self.node}" if self.node is not None else f"region {self.region}"

    @property
    def label(self) -> str:
        """Return a short description for reports, e.g. ``crash n2``."""
        extra = f" +{self.extra_ms:g} ms" if self.action == "slow" else ""
        return f"{self.action} {self.target}{extra}"


def _seconds(text: str, what: str) -> float:
    m = _DURATION.fullmatch(str(text).strip())
    if not m:
        raise ValueError(f"{what}={text!r} is not a duration like 500ms, 30s or 2m")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


def _build(fields: dict[str, Any], source: str) -> Fault:
    action = fields.pop("action", None)
    if action not in ACTIONS:
        raise ValueError(f"{source}: action {action!r} must be one of {', '.join(ACTIONS)}")
    known = {"at", "for", "node", "region", "ms"}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"{source}: unknown field {sorted(unknown)[0]!r}; use at=, for=, "
                         "node= or region=, and ms= for slow")
    if action == "power-loss":  # the whole machine room by default, back on at once
        fields.setdefault("for", f"{POWER_OFF_S:g}s")
        if "node" in fields and "region" in fields:
            raise ValueError(f"{source}: name at most one target, node=N or region=NAME "
                             "(none: every node)")
    if "at" not in fields or "for" not in fields:
        raise ValueError(f"{source}: give both at= (when) and for= (how long)")
    if action != "power-loss" and ("node" in fields) == ("region" in fields):
        raise ValueError(f"{source}: name exactly one target, node=N or region=NAME")
    try:
        node = int(fields["node"]) if "node" in fields else None
    except ValueError:
        raise ValueError(f"{source}: node={fields['node']!r} must be a node number") from None
    if action == "slow" and "ms" not in fields:
        raise ValueError(f"{source}: slow needs ms= (extra one-way delay)")
    try:
        extra = float(fields.get("ms", 0.0))
    except ValueError:
        raise ValueError(f"{source}: ms={fields['ms']!r} must be a number of ms") from None
    fault = Fault(action, _seconds(fields["at"], "at"), _seconds(fields["for"], "for"), node,
                  fields.get("region"), extra)
    if fault.for_s <= 0 or fault.at_s < 0 or (node is not None and node < 0) or extra < 0:
        raise ValueError(f"{source}: at= must be >= 0, for= positive, node= and ms= not "
                         "negative")
    return fault


def parse_fault(text: str) -> Fault:
    """Return the Fault in ``"at=30s crash node=2 for=20s"`` (ValueError names the problem)."""
    fields: dict[str, Any] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
        elif "action" in fields:
            raise ValueError(f"--fault {text!r}: two actions ({fields['action']}, {word})")
        else:
            fields["action"] = word
    return _build(fields, f"--fault {text!r}")


def _toml_value(value: Any, key: str, source: str) -> str:
    """Return a TOML fault field as the text ``--fault`` would give (ValueError if its type
    cannot be one: a table, an array, a boolean)."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        kind = {bool: "a boolean", dict: "a table", list: "an array"}.get(
            type(value), type(value).__name__)
        raise ValueError(f"{source}: {key} is {kind}; write e.g. {key} = "
                         f"{_EXAMPLES.get(key, '...')}")
    return str(value)


_EXAMPLES = {"action": '"crash"', "at": '"30s"', "for": '"20s"', "node": "2",
             "region": '"US-W"', "ms": "200"}


def load_faults(path: Path) -> list[Fault]:
    """Return the faults of a TOML file of ``[[fault]]`` tables (ValueError for anything
    else in it: another table such as ``[[faults]]``, or a value of the wrong type)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"--faults {path}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"--faults {path} is a directory; pass a TOML file") from None
    except UnicodeDecodeError:
        raise ValueError(f"--faults {path} is not a text file; pass a TOML file") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"--faults {path} is not valid TOML: {err}") from None
    other = sorted(set(data) - {"fault"})
    if other:
        raise ValueError(f"--faults {path}: unknown key or table {other[0]!r}; the file holds "
                         "only [[fault]] tables (action, at, for, node or region, ms)")
    tables = data.get("fault", [])
    if not isinstance(tables, list) or not all(isinstance(f, dict) for f in tables):
        raise ValueError(f"--faults {path}: write each fault as a [[fault]] table (double "
                         "brackets), not fault = ...")
    if not tables:
        raise ValueError(f"--faults {path} holds no [[fault]] table; add one or drop --faults")
    faults = []
    for i, f in enumerate(tables):
        source = f"{path} fault {i + 1}"
        faults.append(_build({k: _toml_value(v, k, source) for k, v in f.items()}, source))
    return faults


def check_within(faults: list[Fault] | tuple[Fault, ...], duration_s: float) -> None:
    """Raise ValueError for a fault that cannot happen inside a run of ``duration_s``: one
    that starts at or after the run's end (it would be silently dropped)."""
    for f in faults:
        if f.at_s >= duration_s:
            raise ValueError(f"fault {f.label!r} at {f.at_s:g}s starts after the "
                             f"{duration_s:g} s probe ends; make at= smaller or --duration "
                             "longer")


def window(f: Fault) -> str:
    """Return the fault's window, e.g. ``20s-30s``."""
    return f"{f.at_s:g}s-{f.at_s + f.for_s:g}s"
