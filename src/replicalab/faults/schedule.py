"""Fault schedules: ``--fault "at=30s crash node=2 for=20s"`` or a TOML file of [[fault]]
tables, checked before a run starts (a fault the run cannot hold, an unknown table or a
wrongly typed value is refused with one line naming the fix).

Targets: a node (``node=N``) or a region (``region=NAME``) of a store's cluster (a
``power-loss`` with neither acts on every node, for 1 s unless ``for=`` says); for queue
runs, a consumer (``consumer=K``: ``crash``, ``pause``, ``skew ms=±X`` of its clock) or the
central store (``store=central``: ``errors`` — its operations fail at once and do not
happen — or ``timeouts`` — they happen but their replies are lost, the caller hears an
error after ``ms=``, default 1000). A skew without ``at=``/``for=`` lasts the whole run."""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replicalab.errors import ParameterError
from replicalab.runtime.durations import parse_seconds

ACTIONS = ("crash", "pause", "partition", "slow", "skew", "errors", "timeouts", "power-loss")
POWER_OFF_S = 1.0
"""How long the power stays off when a power-loss fault gives no for= (s)."""
CONSUMER_ACTIONS = ("crash", "pause", "skew")
"""What a queue run can do to one of its consumers (``consumer=K``)."""
STORE_ACTIONS = ("errors", "timeouts")
"""What a queue run can do to its central store (``store=central``)."""
STORE_TARGETS = ("central",)
DEFAULT_TIMEOUT_MS = 1000.0  # timeouts: how long a caller waits for the reply it never gets
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
    extra_ms: float = 0.0  # slow: added one-way delay; skew: clock offset; timeouts: wait
    consumer: int | None = None  # queue runs: the consumer acted on
    store: str | None = None  # queue runs: "central", the central store

    @property
    def target(self) -> str:
        """Return ``n2``, ``region US-W``, ``consumer 1``, ``central store`` or ``every
        node`` (a power loss with no target)."""
        if self.node is None and self.region is None and self.consumer is None \
                and self.store is None:
            return "every node"
        if self.consumer is not None:
            return f"consumer {self.consumer}"
        if self.store is not None:
            return f"{self.store} store"
        return f"n{self.node}" if self.node is not None else f"region {self.region}"

    @property
    def label(self) -> str:
        """Return a short description for reports, e.g. ``crash n2``, ``skew consumer 2
        +800 ms``."""
        extra = {"slow": f" +{self.extra_ms:g} ms", "skew": f" {self.extra_ms:+g} ms",
                 "timeouts": f" after {self.extra_ms:g} ms"}.get(self.action, "")
        return f"{self.action} {self.target}{extra}"

    @property
    def end_s(self) -> float:
        """Return when the fault ends (s from the run's start; ``inf``: never)."""
        return self.at_s + self.for_s

    def to_json(self) -> dict[str, Any]:
        """Return the fault's fields as JSON-ready data (a fault lasting the whole run has
        ``for_s`` null)."""
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        if math.isinf(self.for_s):
            d["for_s"] = None
        return d


def _seconds(text: str, what: str) -> float:
    m = _DURATION.fullmatch(str(text).strip())
    value = float(m.group(1)) * _UNIT_S[m.group(2)] if m else parse_seconds(str(text))
    if value is None:
        raise ValueError(f"{what}={text!r} is not a duration like 500ms, 30s, 2m or 1m30s")
    return value


def _build(fields: dict[str, Any], source: str) -> Fault:
    action = fields.pop("action", None)
    if action not in ACTIONS:
        raise ValueError(f"{source}: action {action!r} must be one of {', '.join(ACTIONS)}")
    known = {"at", "for", "node", "region", "ms", "consumer", "store"}
    unknown = set(fields) - known
    if unknown:
        raise ValueError(f"{source}: unknown field {sorted(unknown)[0]!r}; use at=, for=, "
                         "node=, region=, consumer= or store=, and ms= for slow, skew, "
                         "timeouts")
    targets = [t for t in ("node", "region", "consumer", "store") if t in fields]
    if action == "power-loss":  # the whole machine room by default, back on at once
        fields.setdefault("for", f"{POWER_OFF_S:g}s")
        if len(targets) > 1 or set(targets) - {"node", "region"}:
            raise ValueError(f"{source}: a power loss takes node=N or region=NAME, or no "
                             "target (every node)")
    elif len(targets) != 1:
        raise ValueError(f"{source}: name exactly one target, node=N, region=NAME, "
                         "consumer=K or store=central")
    target = targets[0] if targets else "node"
    _check_target(action, target, fields, source)
    if action == "skew":  # a clock that is off for the whole run, unless told otherwise
        fields.setdefault("at", "0s")
        fields.setdefault("for", "inf")
    if "at" not in fields or "for" not in fields:
        raise ValueError(f"{source}: give both at= (when) and for= (how long)")
    node, consumer = (_index(fields, k, source) for k in ("node", "consumer"))
    extra = _ms(action, fields, source)
    for_s = math.inf if fields["for"] == "inf" else _seconds(fields["for"], "for")
    fault = Fault(action, _seconds(fields["at"], "at"), for_s, node, fields.get("region"),
                  extra, consumer, fields.get("store"))
    if fault.for_s <= 0 or fault.at_s < 0 or min(node or 0, consumer or 0) < 0 or (
            extra < 0 and action != "skew"):
        raise ValueError(f"{source}: at= must be >= 0, for= positive, node=, consumer= and "
                         "ms= not negative (a skew's ms= may be)")
    return fault


def _check_target(action: str, target: str, fields: dict[str, Any], source: str) -> None:
    """Raise ValueError when ``action`` cannot act on that kind of target."""
    if target == "consumer" and action not in CONSUMER_ACTIONS:
        raise ValueError(f"{source}: a consumer can be given {', '.join(CONSUMER_ACTIONS)}, "
                         f"not {action}")
    if target == "store":
        if action not in STORE_ACTIONS:
            raise ValueError(f"{source}: the central store can be given "
                             f"{' or '.join(STORE_ACTIONS)}, not {action}")
        if fields["store"] not in STORE_TARGETS:
            raise ValueError(f"{source}: store={fields['store']!r}: the store a queue run "
                             "can fail is store=central")
    elif action in STORE_ACTIONS:
        raise ValueError(f"{source}: {action} acts on the central store: write "
                         f"{action} store=central")
    if action == "skew" and target != "consumer":
        raise ValueError(f"{source}: skew shifts a consumer's clock: write skew consumer=K "
                         "ms=800")


def _index(fields: dict[str, Any], key: str, source: str) -> int | None:
    if key not in fields:
        return None
    try:
        return int(fields[key])
    except ValueError:
        raise ValueError(f"{source}: {key}={fields[key]!r} must be a {key} number") from None


def _ms(action: str, fields: dict[str, Any], source: str) -> float:
    """Return the fault's ms= (slow: added delay; skew: clock offset; timeouts: wait)."""
    if action in ("slow", "skew") and "ms" not in fields:
        what = ("extra one-way delay" if action == "slow"
                else "clock offset, e.g. ms=800 or ms=-800")
        raise ValueError(f"{source}: {action} needs ms= ({what})")
    try:
        extra = float(fields.get("ms", DEFAULT_TIMEOUT_MS if action == "timeouts" else 0.0))
    except ValueError:
        raise ValueError(f"{source}: ms={fields['ms']!r} must be a number of ms") from None
    if action == "skew" and extra == 0:
        raise ValueError(f"{source}: skew ms=0 changes nothing; give an offset such as ms=800")
    return extra


def parse_fault(text: str) -> Fault:
    """Return the Fault in ``"at=30s crash node=2 for=20s"`` (ParameterError naming
    ``faults``, a probe's parameter, and the problem)."""
    fields: dict[str, Any] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if sep:
            fields[key] = value
        elif "action" in fields:
            raise ParameterError("faults", f"{text!r}: two actions ({fields['action']}, {word})")
        else:
            fields["action"] = word
    try:
        return _build(fields, repr(text))
    except ValueError as err:
        raise ParameterError("faults", str(err)) from None


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
             "region": '"US-W"', "ms": "200", "consumer": "1", "store": '"central"'}


def load_faults(path: Path) -> list[Fault]:
    """Return the faults of a TOML file of ``[[fault]]`` tables (ParameterError naming
    ``faults_file`` for anything else in it: another table such as ``[[faults]]``; ValueError
    for a value of the wrong type)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ParameterError("faults_file", f"{path}: no such file") from None
    except IsADirectoryError:
        raise ParameterError("faults_file", f"{path} is a directory; pass a TOML file"
                             ) from None
    except UnicodeDecodeError:
        raise ParameterError("faults_file", f"{path} is not a text file; pass a TOML file"
                             ) from None
    except tomllib.TOMLDecodeError as err:
        raise ParameterError("faults_file", f"{path} is not valid TOML: {err}") from None
    other = sorted(set(data) - {"fault"})
    if other:
        raise ParameterError("faults_file", f"{path}: unknown key or table {other[0]!r}; the "
                                            "file holds only [[fault]] tables (action, at, "
                                            "for, node or region, ms)")
    tables = data.get("fault", [])
    if not isinstance(tables, list) or not all(isinstance(f, dict) for f in tables):
        raise ParameterError("faults_file", f"{path}: write each fault as a [[fault]] table "
                                            "(double brackets), not fault = ...")
    if not tables:
        raise ParameterError("faults_file", f"{path} holds no [[fault]] table; add one or "
                                            "drop {faults_file}",
                             {"faults_file": "faults_file"})
    faults = []
    for i, f in enumerate(tables):
        source = f"{path} fault {i + 1}"
        faults.append(_build({k: _toml_value(v, k, source) for k, v in f.items()}, source))
    return faults


def check_within(faults: list[Fault] | tuple[Fault, ...], duration_s: float) -> None:
    """Raise ParameterError naming ``duration`` for a fault that cannot happen inside a run
    of ``duration_s``: one that starts at or after the run's end (it would be silently
    dropped)."""
    for f in faults:
        if f.at_s >= duration_s:
            raise ParameterError("duration", f"{duration_s:g} s: fault {f.label!r} at "
                                             f"{f.at_s:g}s starts after the {duration_s:g} s "
                                             "probe ends; make at= smaller or {duration} "
                                             "longer", {"duration": "duration"})


def window(f: Fault) -> str:
    """Return the fault's window, e.g. ``20s-30s`` (``0s-end`` for a whole-run skew)."""
    end = "end" if math.isinf(f.for_s) else f"{f.end_s:g}s"
    return f"{f.at_s:g}s-{end}"


def check_cluster_faults(faults: list[Fault] | tuple[Fault, ...]) -> None:
    """Raise ValueError for a fault a store's cluster cannot take: a consumer or central-store
    fault belongs to a queue run."""
    for f in faults:
        if f.consumer is not None or f.store is not None:
            raise ValueError(f"fault {f.label!r} acts on a queue run's {f.target}; a store's "
                             "cluster takes node= or region= faults (use it with replicalab "
                             "queue run)")
