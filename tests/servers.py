"""Real clusters shared by the integration tests, and the rule for a server that cannot start.

One cluster per kind on dc3 serves every test file that asks for it (:class:`Shared`,
behind the fixtures in conftest.py); pytest-xdist puts the tests of one cluster on one
worker, one after another, so each kind starts once per run, and stops as soon as that
worker's next test does not ask for it. Under CI=true a server that cannot start fails the
test; elsewhere it skips, naming what is missing.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, TypeVar

import pytest

from replicalab.cluster import base
from replicalab.cluster.state import Cluster

T = TypeVar("T")


def in_ci() -> bool:
    """Return True when running under CI=true, where every server must start."""
    return os.environ.get("CI") == "true"


def server_missing(what: str, err: object) -> NoReturn:
    """Fail under CI=true (make test installs every server there); skip elsewhere."""
    if in_ci():
        pytest.fail(f"{what} could not start under CI=true: {err}")
    pytest.skip(f"{what} could not start here ({err}); `make servers` installs it")


def need_module(name: str) -> ModuleType:
    """Return the imported module ``name``; when it is missing, fail under CI=true (the test
    extra installs it there) and skip elsewhere, naming it."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        if in_ci():
            pytest.fail(f"Python module {name} is missing under CI=true ({err}); "
                        "pip install -e '.[test]'")
        pytest.skip(f"Python module {name} is not installed here; pip install -e '.[test]'",
                    allow_module_level=True)


def shared_root(prefix: str) -> Path:
    """Return a new directory readable by other users (PostgreSQL runs as `postgres`, and
    pytest's temporary directories are mode 0700)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    root.chmod(0o755)
    return root


@contextmanager
def running_cluster(kind: str, nodes: int = 3, regions: str = "dc3",
                    name: str | None = None) -> Iterator[tuple[Cluster, Path]]:
    """Yield (cluster, root) for a cluster brought up for the tests, and bring it down."""
    name = name or f"it-{kind}"
    root = shared_root(f"replicalab-{name}-")
    try:
        try:
            c = base.up(kind, nodes, regions, name=name, root=root)
        except ValueError as err:
            server_missing(f"a {kind} cluster", err)
        try:
            yield c, root
        finally:
            if (root / "clusters" / name).exists():
                base.down(name, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


class Shared:
    """What one test process shares between consecutive tests (a cluster of each kind, the
    local Ray instance): each started when a test first asks for it, stopped as soon as the
    next test to run does not ask for it.

    A session fixture would keep it until the worker's last test, and a worker that
    finishes its cluster's tests early goes on for minutes: idle, a dc3 Cassandra takes
    8.7 % of a core, etcd 7.7 %, ZooKeeper 2.8 % (benchmarks/idle_servers.py)."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[ExitStack, Any]] = {}
        self._failed: dict[str, BaseException] = {}

    def get(self, key: str, start: Callable[[ExitStack], T]) -> T:
        """Return what ``start`` made for ``key``, calling it now if nothing runs under that
        key (``start`` registers its own stopping on the ExitStack it is given); a start
        that failed (or skipped) fails (or skips) every later test of the key the same way,
        without a second attempt, as pytest does for a session fixture."""
        if key in self._failed:
            raise self._failed[key]
        if key not in self._open:
            stack = ExitStack()
            try:
                value = start(stack)
            except KeyboardInterrupt:
                stack.close()
                raise
            except BaseException as err:  # pytest's fail and skip outcomes are BaseException
                stack.close()
                self._failed[key] = err
                raise
            self._open[key] = (stack, value)
        return self._open[key][1]

    def keep_only(self, keys: set[str]) -> None:
        """Stop everything shared whose key is not in ``keys``."""
        for key in [k for k in self._open if k not in keys]:
            stack, _ = self._open.pop(key)
            stack.close()
