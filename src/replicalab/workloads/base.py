"""What all probe workloads share: common options and the result envelope."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from replicalab.history import History
from replicalab.runtime import Runtime

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
