"""Shared fixtures: run a probe on the simulated store without going through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeRun, ProbeSpec, run_probe


@pytest.fixture
def probe(tmp_path: Path):
    """Return a function running a probe into tmp_path and returning its ProbeRun."""

    def run(store: str = "sim://simpledb", workload: str = "staleness", **kw) -> ProbeRun:
        opts = {k: kw.pop(k) for k in list(kw) if k in ProbeOptions.__dataclass_fields__}
        spec = ProbeSpec(store=store, workload=workload, options=ProbeOptions(**opts), **kw)
        return run_probe(spec, tmp_path / "runs")

    return run
