"""A command held at its first piped progress line: its stderr is a pipe already full, so
that write waits until the test reads. A signal sent meanwhile lands at that point of the
run however late a busy machine lets the test send it (reading the line first and then
signalling raced the few seconds of work left after it)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

FILLER = b"."


def _full_pipe() -> tuple[int, int]:
    """Return (read end, write end) of a pipe with not a byte of room left."""
    r, w = os.pipe()
    os.set_blocking(w, False)
    for chunk in (FILLER * 4096, FILLER):  # then byte by byte, to the last one
        try:
            while True:
                os.write(w, chunk)
        except BlockingIOError:
            pass
    os.set_blocking(w, True)
    return r, w


class Parked:
    """``argv`` started with its stderr a full pipe (other ``Popen`` arguments as given)."""

    def __init__(self, argv: list[str], **popen: Any) -> None:
        self._r, w = _full_pipe()
        try:
            self.proc = subprocess.Popen(argv, stderr=w, **popen)
        finally:
            os.close(w)

    def writing(self) -> bool:
        """True while the process's main thread waits in write(2) on its fd 2 (Linux)."""
        try:
            nr, fd = Path(f"/proc/{self.proc.pid}/syscall").read_text().split()[:2]
        except (OSError, ValueError):
            return False
        return nr == "1" and int(fd, 16) == 2

    def wait_held(self, within_s: float = 120.0) -> None:
        """Return once the process waits at its first stderr write; AssertionError if it
        exits or does not get there within ``within_s`` seconds."""
        deadline = time.monotonic() + within_s
        while not self.writing():
            assert self.proc.poll() is None, f"exited {self.proc.returncode} before writing"
            assert time.monotonic() < deadline, f"no stderr write within {within_s:g} s"
            time.sleep(0.01)

    def finish(self, within_s: float = 120.0) -> str:
        """Read stderr until the process ends (killed if it has not within ``within_s``
        seconds); return what it wrote there, without the filler."""
        deadline = time.monotonic() + within_s
        got = b""
        try:
            while select.select([self._r], [], [], max(0.0, deadline - time.monotonic()))[0]:
                chunk = os.read(self._r, 65536)
                if not chunk:
                    break
                got += chunk
            self.proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        finally:
            os.close(self._r)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        return got.lstrip(FILLER).decode(errors="replace")

    def interrupt(self) -> str:
        """Send Ctrl-C (SIGINT) once the process waits at its first stderr write; return all
        it wrote there by the time it ended (:meth:`finish`)."""
        try:
            self.wait_held()
            self.proc.send_signal(signal.SIGINT)
        finally:
            err = self.finish()
        return err
