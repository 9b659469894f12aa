"""Port allocation: below the ephemeral range (where outgoing connections take their local
ports), free, and never handed to two callers at once, even in different processes."""

from __future__ import annotations

import socket
import subprocess
import sys

from replicalab.cluster import ports


def test_ports_come_from_below_the_ephemeral_range_and_are_free():
    got = ports.allocate(50)
    assert len(set(got)) == 50
    low = ports._ephemeral_low()
    assert all(ports.LOWEST <= p < low for p in got)
    assert all(ports.is_free(p) for p in got)


def test_a_port_handed_out_is_not_handed_out_again_while_held():
    first = set(ports.allocate(200))
    second = set(ports.allocate(200))
    assert not first & second


def test_a_bound_port_is_never_handed_out(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        # make the draw land on the busy port twice, then draw as usual (a fixed "free"
        # neighbour may be some other test's server on a busy machine)
        draws = iter([busy, busy])
        real = ports.random.randrange
        monkeypatch.setattr(ports, "LOWEST", 1024)
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 65535)
        monkeypatch.setattr(ports.random, "randrange",
                            lambda lo, hi: next(draws, None) or real(lo, hi))
        (p,) = ports.allocate(1)
        assert p != busy


def test_processes_allocating_at_once_get_disjoint_ports():
    code = ("from replicalab.cluster import ports\n"
            "print(' '.join(map(str, ports.allocate(100))))")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    sets = [set(map(int, p.communicate(timeout=60)[0].split())) for p in procs]
    assert all(len(s) == 100 for s in sets)
    assert len(set().union(*sets)) == 4 * 100
