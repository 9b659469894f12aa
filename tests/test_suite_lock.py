"""The test run's lock: an ``alone`` test waits for the running tests and keeps new ones
out until it ends; shared holders run together."""

from __future__ import annotations

import threading

from suitelock import ENV, suite_lock

WAIT_S = 10.0  # a bound on each wait, never a delay: every step waits for an event


def _hold(alone: bool, entered: threading.Event, leave: threading.Event) -> threading.Thread:
    def body() -> None:
        with suite_lock(alone):
            entered.set()
            assert leave.wait(WAIT_S)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t


def test_an_alone_test_waits_for_running_tests_and_keeps_new_ones_out(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV, str(tmp_path))
    a_in, a_out = threading.Event(), threading.Event()
    b_in, b_out = threading.Event(), threading.Event()
    x_in, x_out = threading.Event(), threading.Event()
    c_in, c_out = threading.Event(), threading.Event()
    a = _hold(False, a_in, a_out)
    b = _hold(False, b_in, b_out)
    assert a_in.wait(WAIT_S) and b_in.wait(WAIT_S)  # shared holders run together
    x = _hold(True, x_in, x_out)
    assert not x_in.wait(0.3)  # two tests still run
    c = _hold(False, c_in, c_out)  # a new test arrives while the alone one waits
    a_out.set()
    a.join(WAIT_S)
    assert not x_in.wait(0.3)  # one still runs
    b_out.set()
    b.join(WAIT_S)
    assert x_in.wait(WAIT_S)  # now it runs
    assert not c_in.wait(0.3)  # ... alone: the newcomer waits
    x_out.set()
    x.join(WAIT_S)
    assert c_in.wait(WAIT_S)
    c_out.set()
    c.join(WAIT_S)


def test_without_a_lock_directory_there_is_no_lock(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with suite_lock(True), suite_lock(True):
        pass
