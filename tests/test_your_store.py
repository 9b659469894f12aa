"""Adapters from outside the package: an entry point adds a URL scheme with no edit to
replicalab, and the conformance suite (replicalab.testing) passes on a good adapter and
fails, naming the broken promise, on broken ones.

The outside package is docs/examples/your-store (the worked example of docs/your-store.md),
installed the way pip lays it out: the module plus a ``*.dist-info`` whose
``entry_points.txt`` comes from the example's own pyproject.toml.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from replicalab.runtime import RealRuntime
from replicalab.stores import (
    ABSENT,
    ConditionFailed,
    ReadResult,
    StoreError,
    StoreInfo,
    Unavailable,
    WriteResult,
    registry,
)
from replicalab.stores.base import ALL_FEATURES
from replicalab.stores.registry import open_store, schemes
from replicalab.testing import run_conformance

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "docs" / "examples" / "your-store"
CLI = [sys.executable, "-m", "replicalab.cli.main"]


def install_example(site: Path) -> None:
    """Lay out the example package in ``site`` as pip would: module + dist-info."""
    meta = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    shutil.copy(EXAMPLE / "replicalab_mystore.py", site)
    info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {meta['name']}\n"
                                   f"Version: {meta['version']}\n")
    groups = meta["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
        for group, eps in groups.items()))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("site")
    install_example(d)
    return d


class FileLock:
    """Stalls a SQLite file: another connection holds its exclusive lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: sqlite3.Connection | None = None

    async def start(self, url: str) -> str:
        return url

    def freeze(self, store: Any) -> None:
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("BEGIN EXCLUSIVE")

    def thaw(self, store: Any) -> None:
        assert self.db is not None
        self.db.execute("ROLLBACK")
        self.db.close()

    async def stop(self) -> None:
        return None


def test_an_entry_point_adds_a_scheme_the_cli_probes(site: Path, tmp_path: Path):
    db = tmp_path / "data.db"
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = subprocess.run([*CLI, "probe", "--store", f"mystore://{db}", "--workload",
                          "register", "--ops", "150", "--duration", "20s", "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["ops"]["reads"] > 0 and out["ops"]["writes"] > 0
    assert out["linearizability"]["valid"] is True
    # every key went under the printed prefix and was removed at the end
    assert "keys: under replicalab/" in res.stderr
    config = json.loads((tmp_path / out["run_dir"] / "config.json").read_text())
    assert config["store"]["kind"] == "mystore"
    assert config["keys"]["written"] == 5 and config["keys"]["removed"] == 5
    assert sqlite3.connect(db).execute("SELECT count(*) FROM kv").fetchone() == (0,)


def test_a_store_without_transactions_refuses_a_transactional_workload_in_one_line(
        site: Path, tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = subprocess.run([*CLI, "probe", "--store", f"mystore://{tmp_path / 'd.db'}",
                          "--workload", "list-append", "--txns", "10"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "has no transactions; use one of postgresql://" in lines[0], \
        res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "runs").exists()


def test_without_the_package_the_scheme_is_unknown_and_the_error_says_how_to_add_it():
    with pytest.raises(ValueError, match=r"install a package that adds mystore:// in the "
                                         r"replicalab\.stores entry-point group"):
        open_store("mystore:///tmp/data.db")


def test_conformance_passes_on_the_example_adapter(site: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(registry, "_OPENERS", dict(registry._OPENERS))  # forget it after
    assert "mystore" in schemes()
    db = tmp_path / "data.db"
    url = f"mystore://{db}?timeout_ms=1000"
    assert type(open_store(url)).__name__ == "MyStore"
    report = run_conformance(url, staller=FileLock(db))
    assert report.ok, report.text()
    # the two transaction checks are skipped (the example declares no transactions), and
    # client-region (one file, one region)
    assert [r.status for r in report.results] == ["passed"] * 9 + ["skipped"] * 3, \
        report.text()
    assert sqlite3.connect(db).execute("SELECT count(*) FROM kv").fetchone() == (0,)


@pytest.mark.parametrize("url", ["sim://simpledb", "sim://primary?regions=dc3",
                                 "sim://quorum?n=3&r=2&w=2"])
def test_conformance_passes_on_the_simulated_store(url: str):
    report = run_conformance(url)
    assert report.ok, report.text()
    assert {r.name for r in report.results if r.status == "passed"} >= {
        "consistent-read", "eventual-read", "timeout-is-unknown"}, report.text()


# -- deliberately broken toys: one broken promise each --------------------------------------

class ToyClient:
    """A dict store client; ``bug`` names the promise it breaks."""

    def __init__(self, store: ToyStore) -> None:
        self.s = store

    async def _answer(self) -> None:
        if self.s.frozen:  # the store does not answer: give up after 0.1 s
            await asyncio.sleep(0.1)
            if self.s.bug == "timeout-error":
                raise StoreError("request timed out")
            raise Unavailable("no answer within 100 ms")

    async def read(self, keys: Sequence[str], *, consistent: bool) -> ReadResult:
        await self._answer()
        return ReadResult(tuple(self.s.data.get(k) for k in keys))

    async def write(self, values: Mapping[str, str], *,
                    expect: Mapping[str, Any] | None = None) -> WriteResult:
        await self._answer()
        if expect and self.s.bug != "ignores-condition":
            for k, want in expect.items():
                if (want is ABSENT) != (k not in self.s.data) or (
                        want is not ABSENT and self.s.data[k] != want):
                    raise ConditionFailed("condition failed")
        for k, v in values.items():
            self.s.data[k] = v
            if self.s.bug == "torn-writes":
                await asyncio.sleep(0)  # another client runs between two elements
        return WriteResult()

    async def delete(self, keys: Sequence[str]) -> WriteResult:
        for k in keys:
            self.s.data.pop(k, None)
        return WriteResult()

    async def close(self) -> None:
        return None


class ToyStore:
    def __init__(self, bug: str) -> None:
        self.bug = bug
        self.data: dict[str, str] = {}
        self.frozen = False
        self.runtime = RealRuntime()
        self.info = StoreInfo(url=f"toy://{bug}", kind="toy", features=ALL_FEATURES)

    async def connect(self, region: str | None = None) -> ToyClient:
        return ToyClient(self)

    async def close(self) -> None:
        return None


class ToyFreeze:
    async def start(self, url: str) -> str:
        return url

    def freeze(self, store: Any) -> None:
        store.frozen = True

    def thaw(self, store: Any) -> None:
        store.frozen = False

    async def stop(self) -> None:
        return None


@pytest.mark.parametrize(("bug", "check", "message"), [
    ("ignores-condition", "conditional-write", "must raise ConditionFailed and change nothing"),
    ("torn-writes", "atomic-multi-write", "a multi-element write must be atomic"),
    ("timeout-error", "timeout-is-unknown", "unknown outcome and must raise Unavailable"),
])
def test_conformance_fails_a_broken_adapter_naming_the_promise(bug: str, check: str,
                                                               message: str):
    stores: list[ToyStore] = []

    def opener(url: str, seed: int) -> ToyStore:
        if not stores:
            stores.append(ToyStore(bug))
        return stores[0]

    report = run_conformance(f"toy://{bug}", opener=opener, staller=ToyFreeze())
    failed = {r.name: r.detail for r in report.failed}
    assert list(failed) == [check], report.text()
    assert message in failed[check]
    assert f"FAIL {check}: " in report.text()
    with pytest.raises(AssertionError, match=f"1 conformance check\\(s\\) failed .*{check}"):
        from replicalab.testing import assert_conforms

        assert_conforms(f"toy://{bug}", opener=opener, staller=ToyFreeze())


def test_the_suite_names_an_unknown_check():
    with pytest.raises(ValueError, match=r"unknown check.*the checks are describes-itself"):
        run_conformance("sim://simpledb", only=["linearizable"])


def test_the_page_shows_the_example_as_it_is():
    page = (REPO / "docs" / "your-store.md").read_text()
    for name, lang in (("pyproject.toml", "toml"), ("replicalab_mystore.py", "python")):
        text = (EXAMPLE / name).read_text().rstrip()
        assert f"```{lang}\n{text}\n```" in page, f"docs/your-store.md shows an old {name}"
