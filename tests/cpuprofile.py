"""Where the suite's CPU goes, per test: ``pytest -p cpuprofile`` (with ``REPLICALAB_CPU_LOG``
naming a file) appends one line per test phase with the CPU seconds the test process spent
and the CPU seconds of the children it waited for (commands the test ran), beside the wall
time.

The suite is bound by CPU on a 2-core machine (``vmstat`` shows under 2 % idle while it
runs), so a test's wall time says little of what it costs the others: a test waiting out
a WAN delay costs nothing, one starting the CLI twenty times costs twenty interpreter
start-ups. Servers started in the background (clusters) are not children waited for and
are not counted here: ``benchmarks/suite_cpu.py`` sums the log and names them apart.
"""

from __future__ import annotations

import json
import os
import resource
import time

import pytest

_LOG = os.environ.get("REPLICALAB_CPU_LOG")


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Time one test's setup, call and teardown together (CPU s, children's CPU s, wall s)."""
    if not _LOG:
        yield
        return
    own0, kids0 = _cpu()
    wall0 = time.perf_counter()
    yield
    own1, kids1 = _cpu()
    line = {"test": item.nodeid, "cpu_s": round(own1 - own0, 3),
            "children_cpu_s": round(kids1 - kids0, 3),
            "wall_s": round(time.perf_counter() - wall0, 3),
            "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
    with open(_LOG, "a") as f:
        f.write(json.dumps(line) + "\n")


def _machine_cpu_s() -> float:
    """Return the CPU seconds every core of the machine has spent busy since boot."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def pytest_sessionstart(session):
    """Note the machine's busy CPU seconds at the start (the controller's line only)."""
    if _LOG and "PYTEST_XDIST_WORKER" not in os.environ:
        session.config._cpu_start = (_machine_cpu_s(), time.perf_counter())


def pytest_sessionfinish(session):
    """Write the machine's busy CPU seconds and the wall seconds the whole session took."""
    start = getattr(session.config, "_cpu_start", None)
    if start:
        with open(_LOG, "a") as f:
            f.write(json.dumps({"session": True,
                                "machine_cpu_s": round(_machine_cpu_s() - start[0], 1),
                                "wall_s": round(time.perf_counter() - start[1], 1)}) + "\n")
