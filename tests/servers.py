"""Real clusters shared by the integration tests, and the rule for a server that cannot start.

One cluster per kind on dc3 serves every test file that asks for it (session fixtures in
conftest.py); pytest-xdist puts the tests of one cluster on one worker, so each kind starts
once per run. Under CI=true a server that cannot start fails the test; elsewhere it skips,
naming what is missing.
"""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from replicalab.cluster import base
from replicalab.cluster.state import Cluster


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
