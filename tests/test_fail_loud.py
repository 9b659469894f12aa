"""Tests fail loud: under CI=true a real-store test whose server cannot start fails; outside
CI it skips, naming what is missing.

Each case runs pytest in a subprocess on a real counter test with redis-server taken off
PATH (every PATH entry holding it is dropped; the test needs nothing else from PATH before
it looks for the server), and reads the outcome from the subprocess's summary line.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from servers import need_module, server_missing

TESTS = Path(__file__).resolve().parent

# one real-store test of each fixture the issue names: the kill -9 durability test and the
# Redis half of the middleware's real_dcs fixture
CASES = [
    ("test_counters_kill.py", "kill9"),
    ("test_counters_middleware.py", "real_stores and redis and client"),
]


def _path_without(binary: str) -> str:
    """Return $PATH minus every directory that holds ``binary``."""
    keep = [d for d in os.environ.get("PATH", "").split(os.pathsep)
            if d and not (Path(d) / binary).exists()]
    return os.pathsep.join(keep)


def _run_pytest(test_file: str, select: str, ci: bool) -> tuple[str, int, str]:
    """Return (outcome words of the summary line, exit code, full output) of one pytest
    subprocess."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("CI", "PYTEST_XDIST_WORKER", "PYTEST_CURRENT_TEST")}
    env["PATH"] = _path_without("redis-server")
    if ci:
        env["CI"] = "true"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q",
         "-rfs", str(TESTS / test_file), "-k", select],
        capture_output=True, text=True, env=env, cwd=TESTS.parent, timeout=120, check=False)
    out = done.stdout + done.stderr
    summary = re.findall(r"(\d+) (failed|passed|skipped|error)", out.splitlines()[-1])
    words = {w for _, w in summary}
    return ("/".join(sorted(words)) or "none"), done.returncode, out


def test_path_without_redis_really_hides_it():
    assert shutil.which("redis-server", path=_path_without("redis-server")) is None


@pytest.mark.parametrize(("test_file", "select"), CASES)
def test_a_missing_redis_fails_under_ci_and_skips_elsewhere(test_file: str, select: str):
    outcome, code, out = _run_pytest(test_file, select, ci=True)
    # a test fails; a module fixture that fails is reported as an error: both fail the run
    assert outcome in ("failed", "error") and code == 1, out
    assert "could not start under CI=true" in out and "redis-server is not installed" in out
    outcome, code, out = _run_pytest(test_file, select, ci=False)
    assert outcome == "skipped" and code == 0, out
    assert "redis-server is not installed" in out


def test_server_missing_and_need_module_follow_ci(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="x could not start under CI=true"):
        server_missing("x", "gone")
    with pytest.raises(pytest.fail.Exception, match="no_such_module_here is missing"):
        need_module("no_such_module_here")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="x could not start here"):
        server_missing("x", "gone")
    with pytest.raises(pytest.skip.Exception, match="no_such_module_here is not installed"):
        need_module("no_such_module_here")
    assert need_module("json").dumps([]) == "[]"
