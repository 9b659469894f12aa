"""Changes that undo themselves on the host: each is armed with a timer that runs on the
host, so a change outlives no controller that dies (SIGKILL included) by more than its
length plus :data:`MARGIN_S`.

A change is a pair of shell lines, ``do`` and ``undo``, and a tag. :func:`install` starts
the timer (``sleep; undo``, detached, its pid in ``<dir>/<tag>.timer``) *before* it runs
``do``, in one SSH command: there is no moment when the change is in place without its
timer. :func:`remove` is the controller's own heal: it stops the timer, then runs ``undo``.
"""

from __future__ import annotations

import re
import shlex

from replicalab.hosts.base import Host

MARGIN_S = 3.0
"""How long after a change's planned end its timer on the host undoes it (s): the
controller's heal comes first when the controller lives."""

_TAG = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def timer_dir(host: Host) -> str:
    """Return the directory of the host's change timers."""
    return f"{host.spec.root}/timers"


def _paths(host: Host, tag: str) -> tuple[str, str]:
    if not _TAG.match(tag):
        raise ValueError(f"change tag {tag!r}: letters, digits, _.- only")
    base = f"{timer_dir(host)}/{tag}"
    return base + ".timer", base + ".log"


def install(host: Host, tag: str, do: str, undo: str, for_s: float,
            margin_s: float = MARGIN_S) -> int:
    """Arm ``undo`` to run on the host ``for_s + margin_s`` seconds from now, then run
    ``do``; return the timer's pid on the host. When ``do`` fails, ``undo`` runs at once
    and HostError says why."""
    pid_file, log = _paths(host, tag)
    timer = f"sleep {for_s + margin_s:.3f}; {undo}; rm -f {shlex.quote(pid_file)}"
    q_pid, q_log = shlex.quote(pid_file), shlex.quote(log)
    line = (f"mkdir -p {shlex.quote(timer_dir(host))} || exit 1; "
            f"setsid sh -c {shlex.quote(timer)} >>{q_log} 2>&1 </dev/null & "
            f"echo $! > {q_pid}; "
            f"if ! ( {do} ); then kill -- -$(cat {q_pid}) 2>/dev/null; ( {undo} ) >/dev/null 2>&1; "
            f"rm -f {q_pid}; exit 1; fi; cat {q_pid}")
    out = host.run(line).out.strip()
    return int(out.splitlines()[-1])


def remove(host: Host, tag: str, undo: str) -> None:
    """Stop the change's timer (if it has not fired) and run ``undo`` now."""
    pid_file, _ = _paths(host, tag)
    q = shlex.quote(pid_file)
    host.run(f"if [ -f {q} ]; then kill -- -$(cat {q}) 2>/dev/null; rm -f {q}; fi; {undo}")


def pending(host: Host) -> list[str]:
    """Return the tags of the host's changes whose timers have not fired yet."""
    q = shlex.quote(timer_dir(host))
    out = host.run(f"ls {q} 2>/dev/null | sed -n 's/\\.timer$//p'", check=False).out
    return [x for x in out.split() if x]
