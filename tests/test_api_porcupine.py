"""Porcupine, a linearizability checker of the field (Go module proxy, through
``benchmarks/porcupine_driver``), reads the Jepsen EDN that ``replicalab.export`` writes
(its own EDN library: independent ``[k v]`` tuples, integer values, ``:nemesis`` left out)
and agrees with ``replicalab.check`` on every history: register and staleness runs on the
simulated stores, at least 10 linearizable and 10 not by Porcupine's verdict."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

import replicalab
from servers import server_missing

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
ASYNC_DC3 = "sim://primary?replication=async&regions=dc3"
REGIONS = {"writer_region": "US-E", "reader_region": "EU"}


def _porcupine_module():
    spec = importlib.util.spec_from_file_location("porcupine", BENCHMARKS / "porcupine.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, Path]:
    if shutil.which("go") is None:
        server_missing("Go (to build Porcupine)", "go is not on PATH")
    porcupine = _porcupine_module()
    try:  # Go's own module cache: a second run downloads nothing
        binary, _ = porcupine.build(tmp_path_factory.mktemp("porcupine"), own_cache=False)
    except SystemExit as err:
        server_missing("Porcupine's driver", err)
    return porcupine, binary


def _runs(out: Path) -> list[Path]:
    """Export 24 runs: register runs (2 keys, 4 clients, writes in US-E, reads in EU) and
    staleness runs, each with eventual and with consistent reads, some beside a partition."""
    made = []
    for seed in range(1, 7):
        for consistency in ("eventual", "consistent"):
            faults = ["at=2s partition node=0 for=1s"] if seed % 3 == 0 else []
            reg = replicalab.probe(ASYNC_DC3, workload="register", duration="5s", seed=seed,
                                   consistency=consistency, keys=2, clients=4, faults=faults,
                                   out=out / "runs", progress=False, **REGIONS)
            made.append(replicalab.export(reg, "edn", out / f"register-{consistency}-{seed}.edn")
                        .path)
            sta = replicalab.probe(ASYNC_DC3, workload="staleness", duration="20s", seed=seed,
                                   consistency=consistency, write_interval="500ms",
                                   read_rate=20, placement="separate-clients",
                                   out=out / "runs", progress=False, **REGIONS)
            made.append(replicalab.export(sta, "edn", out / f"staleness-{consistency}-{seed}.edn")
                        .path)
    return made


def test_porcupine_agrees_with_check_on_our_exported_histories(driver, tmp_path: Path):
    porcupine, binary = driver
    paths = _runs(tmp_path)
    theirs = porcupine.check_edn(binary, paths)
    verdicts = {"true": True, "false": False}
    rows = []
    for path in paths:
        ours = replicalab.check(path)  # the file's own model: kv, one register per key
        assert ours.model == "kv"
        rows.append((path.name, ours.valid, verdicts.get(theirs[path]["valid"], "unknown"),
                     ours.ops, theirs[path]["ops"]))
    disagree = [r for r in rows if r[1] != r[2]]
    assert not disagree, disagree
    assert sum(r[2] is True for r in rows) >= 10, rows
    assert sum(r[2] is False for r in rows) >= 10, rows
    # both checked the same operations: ours counts every op, Porcupine those Jepsen keeps
    # (failed ops and reads that did not complete ok left out)
    assert all(0 < theirs_ops <= ours_ops for *_, ours_ops, theirs_ops in rows)
