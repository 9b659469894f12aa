"""The power-loss file system: unsynced data is gone after a power loss, synced data stays,
and a kill -9 alone loses nothing (the file system, like a kernel, still holds it)."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from replicalab.cluster import powerloss
from replicalab.cluster.powerfs import PAGE_BYTES, PageCache
from replicalab.faults.schedule import parse_fault
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec, run_probe
from servers import server_missing


@pytest.fixture
def fs(tmp_path: Path):
    why = powerloss.unavailable_reason()
    if why:
        server_missing("the power-loss file system", why)
    m = powerloss.mount(tmp_path / "disk", tmp_path / "mnt", tmp_path / "fs.log")
    box = {"m": m}
    yield box
    powerloss.unmount(box["m"])
    assert not powerloss.is_mounted(tmp_path / "mnt")


def _power_loss(box: dict, tmp_path: Path) -> tuple[int, int]:
    box["m"], lost = powerloss.power_loss(box["m"], tmp_path / "fs.log")
    return lost


def test_unsynced_write_is_gone_after_power_loss(fs, tmp_path):
    p = tmp_path / "mnt" / "unsynced"
    p.write_bytes(b"acknowledged but never synced")
    assert p.read_bytes() == b"acknowledged but never synced"  # readers see it before
    assert (tmp_path / "disk" / "unsynced").stat().st_size == 0  # not on the disk
    pages, files = _power_loss(fs, tmp_path)
    assert (pages, files) == (1, 1)
    assert p.read_bytes() == b""  # the file was created (metadata), its data is gone


def test_synced_write_is_kept_after_power_loss(fs, tmp_path):
    p = tmp_path / "mnt" / "synced"
    with p.open("wb") as f:
        f.write(b"x" * (3 * PAGE_BYTES + 5))
        f.flush()
        os.fsync(f.fileno())
        f.write(b"tail never synced")
    _power_loss(fs, tmp_path)
    assert p.read_bytes() == b"x" * (3 * PAGE_BYTES + 5)


def _synced_file(p: Path, data: bytes) -> None:
    with p.open("wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def test_msynced_mmap_pages_survive_power_loss_and_the_others_do_not(fs, tmp_path):
    """Cassandra's commit log writes through a shared mapping of a preallocated segment and
    msyncs what it has written: msync'ed pages are on the disk, dirty pages of the mapping
    that were never msync'ed are not."""
    p = tmp_path / "mnt" / "CommitLog-1.log"
    _synced_file(p, b"\0" * (3 * PAGE_BYTES))  # the preallocated segment, synced
    fd = os.open(p, os.O_RDWR)
    try:
        with mmap.mmap(fd, 3 * PAGE_BYTES) as mm:
            mm[0:7] = b"entry-1"
            mm.flush(0, PAGE_BYTES)  # msync(MS_SYNC) of the first page
            mm[PAGE_BYTES:PAGE_BYTES + 7] = b"entry-2"  # written, never msync'ed
            assert p.read_bytes()[PAGE_BYTES:PAGE_BYTES + 7] == b"entry-2"  # readers see it
    finally:
        os.close(fd)  # close(2) writes the dirty pages back to the file system, unsynced
    assert (tmp_path / "disk" / p.name).read_bytes()[:7] == b"entry-1"
    _power_loss(fs, tmp_path)
    data = p.read_bytes()
    assert len(data) == 3 * PAGE_BYTES
    assert data[:7] == b"entry-1"
    assert data[PAGE_BYTES:PAGE_BYTES + 7] == b"\0" * 7


def test_a_rename_without_a_directory_fsync_is_undone_by_power_loss(fs, tmp_path):
    d = tmp_path / "mnt"
    _synced_file(d / "state", b"version 1")
    _synced_file(d / "state.tmp", b"version 2")
    os.rename(d / "state.tmp", d / "state")  # both files synced; the directory is not
    assert (d / "state").read_bytes() == b"version 2" and not (d / "state.tmp").exists()
    _power_loss(fs, tmp_path)
    # the rename is lost: the old file is back under its name, the new one under its own
    assert (d / "state").read_bytes() == b"version 1"
    assert (d / "state.tmp").read_bytes() == b"version 2"


def test_a_rename_followed_by_a_directory_fsync_survives_power_loss(fs, tmp_path):
    d = tmp_path / "mnt"
    (d / "sub").mkdir()
    _synced_file(d / "sub" / "state", b"version 1")
    _synced_file(d / "sub" / "state.tmp", b"version 2")
    os.rename(d / "sub" / "state.tmp", d / "sub" / "state")
    dfd = os.open(d / "sub", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    _synced_file(d / "other.tmp", b"x")
    os.rename(d / "other.tmp", d / "other")  # another directory's rename stays volatile
    _power_loss(fs, tmp_path)
    assert (d / "sub" / "state").read_bytes() == b"version 2"
    assert sorted(x.name for x in (d / "sub").iterdir()) == ["state"]
    assert (d / "other.tmp").exists() and not (d / "other").exists()
    stash = tmp_path / "disk.powerfs-renames"
    assert not stash.exists() or not any(stash.iterdir())  # nothing kept any more


def test_kill9_alone_keeps_unsynced_writes(fs, tmp_path):
    p = tmp_path / "mnt" / "killed"
    writer = subprocess.Popen([sys.executable, "-c", (
        "import os, time\n"
        f"fd = os.open({str(p)!r}, os.O_WRONLY | os.O_CREAT | os.O_APPEND)\n"
        "for i in range(100): os.write(fd, b'%03d\\n' % i)\n"
        "print('written', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "written"
        writer.send_signal(signal.SIGKILL)
        writer.wait(10)
    finally:
        writer.kill()
    assert p.read_bytes() == b"".join(b"%03d\n" % i for i in range(100))
    assert powerloss.dirty(fs["m"]) == (1, 1)  # still unsynced: a power loss would drop it


def test_page_cache_overlays_truncates_and_syncs(tmp_path):
    disk = tmp_path / "f"
    disk.write_bytes(b"a" * 10)
    fd = os.open(disk, os.O_RDWR)
    try:
        c, ino = PageCache(), os.fstat(fd).st_ino
        c.write(fd, ino, b"BB", 4)
        c.write(fd, ino, b"C", PAGE_BYTES + 2)  # a hole in between reads as zeros
        assert c.read(fd, ino, 8, 0) == b"aaaaBBaa"
        assert c.size(ino) == PAGE_BYTES + 3
        assert c.read(fd, ino, 4, PAGE_BYTES) == b"\0\0C"
        c.truncate(ino, 6)
        assert c.read(fd, ino, 100, 0) == b"aaaaBB"
        assert c.sync(fd, ino) == 1
        assert disk.read_bytes() == b"aaaaBB" and c.size(ino) is None
        c.write(fd, ino, b"zz", 0)
        assert c.lose() == (1, 1) and disk.read_bytes() == b"aaaaBB"
    finally:
        os.close(fd)


def test_power_loss_fault_parses_with_every_node_by_default():
    f = parse_fault("at=20s power-loss")
    assert (f.action, f.at_s, f.for_s, f.target) == ("power-loss", 20.0, 1.0, "every node")
    g = parse_fault("at=5s power-loss node=1 for=3s")
    assert (g.node, g.for_s, g.label) == (1, 3.0, "power-loss n1")
    with pytest.raises(ValueError, match="node=N or region=NAME, or no target"):
        parse_fault("at=5s power-loss consumer=1")


def test_a_simulated_store_refuses_a_power_loss(tmp_path):
    spec = ProbeSpec(store="sim://primary?regions=dc3", workload="staleness",
                     options=ProbeOptions(duration_s=30),
                     faults=(parse_fault("at=5s power-loss"),))
    with pytest.raises(ValueError, match="keeps no disk"):
        run_probe(spec, tmp_path)
    assert not any(tmp_path.iterdir())  # refused before a run directory was made
