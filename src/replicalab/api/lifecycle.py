"""What a front end does around a command: SIGTERM taken as Ctrl-C, every process a command
started and did not hand over stopped however it ends (``cluster/process.py``), an
interrupted command ended at once without tearing the interpreter down (``exit_now``), and
how many interrupts the process has received (``interrupts()``: a run caught one if the
count grew)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from replicalab.cluster.process import exit_now, install_signal_handlers, signals_held, stop_all
from replicalab.runtime.interrupts import count as interrupts

__all__ = ["exit_now", "install_signal_handlers", "interrupts", "run_to_exit", "signals_held",
           "stop_all"]


def run_to_exit(main: Callable[[], None]) -> None:
    """Run a command's ``main``; when it leaves with an exit status and no other thread
    runs, leave as :func:`exit_now` does — the exit hooks run and the output is flushed,
    but the interpreter is not torn down. Freeing what a command loaded is work nobody
    waits for: 2 % of ``check`` on a directory of histories, more for a command that
    loaded numpy and pyarrow. Returns only if ``main`` does (it raises SystemExit)."""
    try:
        main()
    except SystemExit as done:
        code = done.code
        threading = sys.modules.get("threading")
        if ((code is None or isinstance(code, int))
                and (threading is None or threading.active_count() == 1)):
            exit_now(code or 0)
        raise
