"""Shared by the register and linearizability tests: a register workload's history on a
simulated store, its clients alone (no final reads, no check)."""

from __future__ import annotations

from replicalab.faults.schedule import parse_fault
from replicalab.faults.sim import SimNemesis
from replicalab.history import History
from replicalab.stores import open_store
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.recorder import Recorder
from replicalab.workloads.register import RegisterConfig, generate


def register_history(url: str, cfg: RegisterConfig, duration_s: float = 10.0, seed: int = 1,
                     consistency: str = "eventual", faults: tuple[str, ...] = ()) -> History:
    """Return the history of ``cfg``'s register clients on ``url`` for ``duration_s``
    (virtual) seconds, with the ``faults`` schedule applied by the simulated nemesis."""
    store = open_store(url, seed)
    h = History()
    rec = Recorder(h, store.runtime)
    opts = ProbeOptions(duration_s=duration_s, seed=seed, consistency=consistency)

    async def main() -> None:
        jobs = [generate(store, h, opts, cfg, rec)]
        if faults:
            t0 = store.runtime.now_ns()
            jobs.append(SimNemesis.of(store).run([parse_fault(f) for f in faults], h,
                                                 store.runtime, t0, t0 + int(duration_s * 1e9)))
        await store.runtime.gather(*jobs)

    store.runtime.run(main())
    return h
