"""One lock per test run, shared by every test and exclusive for a test marked ``alone``."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

ENV = "REPLICALAB_TEST_LOCKS"


def make_lock_dir() -> Callable[[], None]:
    """Make the run's lock directory and name it in ``$REPLICALAB_TEST_LOCKS`` (workers
    started later inherit it); return the function that removes it."""
    folder = tempfile.mkdtemp(prefix="replicalab-test-locks-")
    os.environ[ENV] = folder

    def remove() -> None:
        os.environ.pop(ENV, None)
        shutil.rmtree(folder, ignore_errors=True)

    return remove


@contextlib.contextmanager
def suite_lock(alone: bool) -> Iterator[None]:
    """Hold this test run's lock shared (any test) or exclusive (a test marked ``alone``):
    an ``alone`` test starts once every test running on another worker has ended, and no
    other starts until it ends. A turnstile lock taken before the shared one keeps the
    workers' stream of shared holders from starving a waiting exclusive one. The lock files
    live in ``$REPLICALAB_TEST_LOCKS``, a directory the run's controller makes before it
    starts the workers (:func:`make_lock_dir`); without it, no lock."""
    folder = os.environ.get(ENV)
    if not folder:
        yield
        return
    with open(Path(folder) / "turn", "a") as turn, open(Path(folder) / "run", "a") as held:
        fcntl.flock(turn, fcntl.LOCK_EX)
        try:
            fcntl.flock(held, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turn, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)
