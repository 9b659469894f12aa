"""What a front end does around a command: SIGTERM taken as Ctrl-C, and every process a
command started and did not hand over stopped however it ends (``cluster/process.py``)."""

from __future__ import annotations

from replicalab.cluster.process import install_signal_handlers, signals_held, stop_all

__all__ = ["install_signal_handlers", "signals_held", "stop_all"]
