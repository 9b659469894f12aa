"""What all probe workloads share: common options, the result envelope, and the Workload
object each workload module exports as ``WORKLOAD``."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import MISSING, dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from replicalab.errors import ParameterError
from replicalab.history import History
from replicalab.runtime import Runtime
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Feature, Store

if TYPE_CHECKING:
    from replicalab.workloads.recorder import Recorder

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class ProbeOptions:
    """Options every probe takes (times in seconds, rates per second)."""

    consistency: str = "eventual"
    duration_s: float = 300.0
    write_interval_s: float = 3.0
    read_rate: float = 50.0
    period_s: float = 300.0
    seed: int = 1

    def check(self) -> None:
        """Raise ParameterError naming the first invalid option and its fix."""
        if self.consistency not in ("eventual", "consistent"):
            raise ParameterError("consistency", f"{self.consistency!r}: use eventual or "
                                                "consistent")
        for name in ("duration_s", "write_interval_s", "read_rate", "period_s"):
            if not getattr(self, name) > 0:
                raise ParameterError(name.removesuffix("_s"),
                                     f"must be positive (got {getattr(self, name)})")


def deadline(rt: Runtime, duration_s: float) -> int:
    """Return the runtime time in ns at which a run of ``duration_s`` ends."""
    return rt.now_ns() + int(duration_s * NS_PER_S)


def envelope(workload: str, store: str, opts: ProbeOptions, h: History) -> dict[str, Any]:
    """Return the fields every results.json starts with."""
    client = h.column("process") >= 0
    types = np.where(client, h.types(), -1)
    f = h.column("f")
    ok = types == 1
    return {
        "schema_version": SCHEMA_VERSION,
        "workload": workload,
        "store": store,
        "consistency": opts.consistency,
        "seed": opts.seed,
        "duration_s": opts.duration_s,
        "ops": {
            "reads": int((ok & (f == h.f_code("read"))).sum()),
            "writes": int((ok & ((f == h.f_code("write")) | (f == h.f_code("cas")))).sum()),
            "failed": int((types == 2).sum()),
            "info": int((types == 3).sum()),
        },
        "faults": [],
        "notes": [],
    }


def _s(seconds: float) -> str:
    return f"{seconds:,.0f} s" if seconds >= 100 else f"{seconds:.3g} s"


def duration_text(results: dict[str, Any]) -> str:
    """Return how long the run ran, beside the time it was given when it ended sooner (cut
    short, or done by count: ``--txns``): "7.1 s of the 300 s allowed"; simulated seconds
    said so; the time given alone for a run saved before runs recorded it."""
    asked, ran = float(results["duration_s"]), results.get("ran_s")
    sim = " simulated" if results.get("runtime") == "virtual" else ""
    if ran is None:
        return f"{_s(asked)}{sim} allowed"
    if ran < 0.99 * asked:
        cut = " (cut short)" if results.get("partial") else ""
        return f"{_s(ran)}{sim} of the {_s(asked)} allowed{cut}"
    return f"{_s(ran)}{sim}"


@dataclass(frozen=True)
class Flag:
    """One ``replicalab probe`` option a workload reads.

    ``name`` is the Python name (``write_mode`` is ``--write-mode``); ``type`` is str, int or
    float; ``field`` is the config field it sets (default: ``name``); a ``duration`` flag is
    text such as ``60s`` that the command line hands over in seconds; ``default`` is the text
    ``--help`` shows (default: the config field's default).
    """

    name: str
    type: type
    help: str
    field: str = ""
    duration: bool = False
    default: str | None = None

    @property
    def option(self) -> str:
        """Return the flag as typed on the command line, e.g. ``--write-mode``."""
        return "--" + self.name.replace("_", "-")

    @property
    def target(self) -> str:
        """Return the name of the config field this flag sets."""
        return self.field or self.name


def _no_rows(_results: dict[str, Any]) -> list[tuple[str, str]]:
    return []


@dataclass(frozen=True)
class Workload:
    """One probe workload, found by name in ``workloads.registry``.

    ``config`` is a frozen dataclass whose defaults make a valid probe and whose ``check()``
    raises ValueError naming the bad option; ``generate`` drives clients until the run ends;
    ``check`` is pure and turns a history into results; ``required_features`` names what the
    store must declare; ``done_fraction``, if given, tells progress for workloads that end
    after a number of requests rather than after ``--duration`` (None: by time after all).

    What the command line and the report read: ``flags`` are the ``probe`` options it takes
    (``from_flags``, if given, builds the config from their values, None for a flag not
    given; otherwise each given value sets its config field); ``summary_rows`` are its
    (measure, value) rows of the terminal summary, to which the probe adds latency per
    operation (unless ``per_op_latency_rows`` is False) and faults; the report registers
    the workload's section of the HTML report in ``report/sections.py`` (workloads may not
    name ``report/``; a workload from outside replicalab may name its own section here,
    ``report_section``: ``"module:function"``, ``function(page, results)``);
    ``legacy_config`` turns a config.json saved before workloads had one config each into
    this one's config fields.

    What a batch of runs (``probe --repeats/--sweep``) reads: ``figures`` are one run's
    headline figures by name (a number, None, or a (count, total) pair that is pooled over
    the runs), beside those every probe has (``checkers.spread.common_figures``); ``series``
    are per-run lists of points plotted one point each (seed 003's Figure 3).
    """

    name: str
    config: type
    generate: Callable[[Store, History, ProbeOptions, Any, Recorder], Coroutine[Any, Any, None]]
    check: Callable[[History, str, ProbeOptions, Any, frozenset[Feature]], dict[str, Any]]
    required_features: Callable[[ProbeOptions, Any], set[Feature]] = lambda _o, _c: set()
    done_fraction: Callable[[History, Any], float | None] | None = None
    flags: tuple[Flag, ...] = ()
    from_flags: Callable[[dict[str, Any]], Any] | None = None
    summary_rows: Callable[[dict[str, Any]], list[tuple[str, str]]] = _no_rows
    per_op_latency_rows: bool = True
    report_section: str = ""
    legacy_config: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    figures: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    series: Callable[[dict[str, Any]], dict[str, list[float | None]]] | None = None

    def make_config(self, given: dict[str, Any]) -> Any:
        """Return the config from the values of this workload's flags (None: not given)."""
        if self.from_flags is not None:
            return self.from_flags(given)
        targets = {f.name: f.target for f in self.flags}
        return self.config(**{targets[k]: v for k, v in given.items() if v is not None})

    def default_text(self, flag: Flag) -> str | None:
        """Return the default of ``flag`` as ``--help`` shows it (None: no default)."""
        if flag.default is not None:
            return flag.default
        known = {f.name: f for f in fields(self.config)}
        spec = known.get(flag.target)
        if spec is None or spec.default is MISSING or spec.default is None:
            return None
        value = spec.default
        if flag.duration:
            return f"{value:g}s"
        if isinstance(value, tuple):
            return ",".join(str(v) for v in value)
        return str(value)


def config_from_json(cls: type, d: dict[str, Any]) -> Any:
    """Return a ``cls`` config from its ``asdict`` form (JSON lists back to tuples)."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {', '.join(unknown)}")
    return cls(**{k: tuple(v) if isinstance(v, list) and str(known[k].type).startswith("tuple")
                  else v for k, v in d.items()})
