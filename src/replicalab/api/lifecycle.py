"""What a front end does around a command: SIGTERM taken as Ctrl-C, every process a command
started and did not hand over stopped however it ends (``cluster/process.py``), an
interrupted command ended at once without tearing the interpreter down (``exit_now``), and
how many interrupts the process has received (``interrupts()``: a run caught one if the
count grew)."""

from __future__ import annotations

from replicalab.cluster.process import exit_now, install_signal_handlers, signals_held, stop_all
from replicalab.runtime.interrupts import count as interrupts

__all__ = ["exit_now", "install_signal_handlers", "interrupts", "signals_held", "stop_all"]
