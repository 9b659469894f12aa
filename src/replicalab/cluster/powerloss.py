"""Mount, command and unmount the power-loss file system (:mod:`replicalab.cluster.powerfs`),
one per node: the node's data directory is the mount, ``<data dir>.disk`` the disk.

A power loss of a node is: SIGKILL its server, drop what its file system never synced
(``lose-unsynced``), and mount the file system again, so that nothing the kernel cached for
the old mount is served to the restarted server.
"""

from __future__ import annotations

import ctypes.util
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from replicalab.cluster import process

MOUNT_WAIT_S = 15.0
INSTALL = "run scripts/install-servers.sh (apt-get install fuse3; pip install mfusepy)"


@dataclass
class Mount:
    """One mounted power-loss file system: where, its disk, its control socket, its pid."""

    mount: str
    backing: str
    control: str
    pid: int = 0

    def to_json(self) -> dict[str, Any]:
        """Return the mount as saved in cluster.json."""
        return asdict(self)


def unavailable_reason() -> str:
    """Return why a power-loss file system cannot be mounted here ("" if it can). The FUSE
    device is ``$REPLICALAB_FUSE_DEVICE`` if set (default /dev/fuse)."""
    device = os.environ.get("REPLICALAB_FUSE_DEVICE", "/dev/fuse")
    if not os.path.exists(device):
        return (f"{device} is missing (FUSE is not available on this machine or container; "
                "a container needs --device /dev/fuse)")
    if shutil.which("fusermount3") is None:
        return f"fusermount3 is not installed; {INSTALL}"
    if ctypes.util.find_library("fuse3") is None:
        return f"libfuse3 is not installed; {INSTALL}"
    try:
        import mfusepy  # noqa: F401  (the binding the file system runs on)
    except (ImportError, OSError) as err:
        return f"the Python FUSE binding cannot load ({err}); {INSTALL}"
    return ""


def check_available() -> None:
    """Raise ValueError naming the fix if no power-loss file system can be mounted."""
    why = unavailable_reason()
    if why:
        raise ValueError(f"power loss needs FUSE: {why}")


def is_mounted(path: str | Path) -> bool:
    """Return True if ``path`` is a mount point now (from /proc/self/mountinfo)."""
    target = os.path.abspath(path)
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return os.path.ismount(target)
    return any(line.split()[4] == target for line in lines if len(line.split()) > 4)


def mount(backing: Path, mountpoint: Path, log: Path) -> Mount:
    """Mount a power-loss file system showing ``backing`` on ``mountpoint`` (both created);
    return it once mounted (ValueError naming the log if it did not mount)."""
    check_available()
    backing, mountpoint = backing.absolute(), mountpoint.absolute()
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    backing.chmod(0o755)
    control = f"replicalab-powerfs-{os.getpid()}-{secrets.token_hex(6)}"
    pid = process.start([sys.executable, "-m", "replicalab.cluster.powerfs", str(backing),
                         str(mountpoint), "--control", control], log, label="powerfs")
    m = Mount(str(mountpoint), str(backing), control, pid)
    deadline = time.monotonic() + MOUNT_WAIT_S
    while time.monotonic() < deadline:
        if is_mounted(mountpoint) and _answers(m):
            return m
        if not process.alive(pid):
            break
        time.sleep(0.05)
    unmount(m)
    raise ValueError(f"the power-loss file system did not mount on {mountpoint}; see {log}")


def _answers(m: Mount) -> bool:
    try:
        command(m, "stats")
    except OSError:
        return False
    return True


def command(m: Mount, line: str, timeout_s: float = 30.0) -> str:
    """Send one control command; return the answer line (OSError if nobody answers)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect("\0" + m.control)
        s.sendall(line.encode() + b"\n")
        answer = s.recv(256).decode(errors="replace").strip()
    if not answer.startswith("ok"):
        raise OSError(f"power-loss file system on {m.mount}: {answer or 'no answer'}")
    return answer


def _counts(answer: str) -> tuple[int, int]:
    _, pages, files = answer.split()
    return int(pages), int(files)


def lose_unsynced(m: Mount) -> tuple[int, int]:
    """Drop every page not synced; return (pages, files) dropped."""
    return _counts(command(m, "lose-unsynced"))


def sync_all(m: Mount) -> tuple[int, int]:
    """Write every dirty page to the disk; return (pages, files) written."""
    return _counts(command(m, "sync-all"))


def dirty(m: Mount) -> tuple[int, int]:
    """Return (dirty pages, files with unsynced data)."""
    return _counts(command(m, "stats"))


def unmount(m: Mount) -> None:
    """Unmount (lazily if a process still holds a file) and stop the daemon."""
    if is_mounted(m.mount):
        done = subprocess.run(["fusermount3", "-u", m.mount], capture_output=True,
                              check=False)
        if done.returncode != 0 and is_mounted(m.mount):
            subprocess.run(["fusermount3", "-u", "-z", m.mount], capture_output=True,
                           check=False)
    if m.pid:
        process.stop(m.pid, timeout_s=5.0)


def power_loss(m: Mount, log: Path) -> tuple[Mount, tuple[int, int]]:
    """Drop what was never synced and mount the disk again (the node's server must be dead
    already); return the new mount and (pages, files) lost."""
    try:
        lost = lose_unsynced(m)
    except OSError:
        lost = (-1, -1)  # the daemon is gone: its memory, the unsynced data, went with it
    unmount(m)
    return mount(Path(m.backing), Path(m.mount), log), lost
