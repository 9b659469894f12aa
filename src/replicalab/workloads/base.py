"""What all probe workloads share: common options, the result envelope, and the Workload
object each workload module exports as ``WORKLOAD``."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from replicalab.history import History
from replicalab.runtime import Runtime
from replicalab.stores import Feature, Store

if TYPE_CHECKING:
    from replicalab.workloads.recorder import Recorder

NS_PER_S = 1_000_000_000
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
        """Raise ValueError naming the first invalid option and its fix."""
        if self.consistency not in ("eventual", "consistent"):
            raise ValueError(f"--consistency {self.consistency!r}: use eventual or consistent")
        for name in ("duration_s", "write_interval_s", "read_rate", "period_s"):
            if not getattr(self, name) > 0:
                flag = "--" + name.removesuffix("_s").replace("_", "-")
                raise ValueError(f"{flag} must be positive (got {getattr(self, name)})")


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


@dataclass(frozen=True)
class Workload:
    """One probe workload, found by name in ``workloads.registry``.

    ``config`` is a frozen dataclass whose defaults make a valid probe and whose ``check()``
    raises ValueError naming the bad option; ``generate`` drives clients until the run ends;
    ``check`` is pure and turns a history into results; ``required_features`` names what the
    store must declare; ``done_fraction``, if given, tells progress for workloads that end
    after a number of requests rather than after ``--duration``.
    """

    name: str
    config: type
    generate: Callable[[Store, History, ProbeOptions, Any, Recorder], Coroutine[Any, Any, None]]
    check: Callable[[History, str, ProbeOptions, Any, frozenset[Feature]], dict[str, Any]]
    required_features: Callable[[ProbeOptions, Any], set[Feature]] = lambda _o, _c: set()
    done_fraction: Callable[[History, Any], float] | None = None


def config_from_json(cls: type, d: dict[str, Any]) -> Any:
    """Return a ``cls`` config from its ``asdict`` form (JSON lists back to tuples)."""
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) {', '.join(unknown)}")
    return cls(**{k: tuple(v) if isinstance(v, list) and str(known[k].type).startswith("tuple")
                  else v for k, v in d.items()})
