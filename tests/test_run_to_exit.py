"""``lifecycle.run_to_exit``, how the ``replicalab`` command leaves: with the command's exit
status, its output flushed (a pipe buffers it) and its exit hooks run, without tearing the
interpreter down; a command that leaves a thread running ends the ordinary way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
from replicalab.api import lifecycle

def main():
    atexit.register(lambda: Path({hook!r}).write_text("ran"))
    if {thread}:
        threading.Thread(target=time.sleep, args=(0.2,)).start()
    sys.stdout.write("answer without a newline")
    sys.exit({code})

lifecycle.run_to_exit(main)
print("not reached")
"""


@pytest.mark.parametrize("thread", [False, True])
@pytest.mark.parametrize("code", [0, 3])
def test_the_command_leaves_with_its_status_its_output_and_its_exit_hooks(
        tmp_path: Path, code: int, thread: bool):
    hook = tmp_path / "hook"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe buffers
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(hook=str(hook), code=code,
                                                                thread=thread)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == code, done.stderr
    assert done.stdout == "answer without a newline" and done.stderr == ""
    assert hook.read_text() == "ran"
