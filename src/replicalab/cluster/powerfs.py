"""The power-loss file system: a FUSE passthrough that keeps written data in memory until
the file is fsync'ed, and on command drops whatever was never synced (Jepsen's LazyFS idea,
written here from scratch).

Run as its own process, one per node (``python -m replicalab.cluster.powerfs BACKING MOUNT
--control NAME``; :mod:`replicalab.cluster.powerloss` starts, commands and stops it). The
mount shows the files of ``BACKING`` (the "disk"); a ``write`` lands in a page of this
process's memory (the "page cache"), reads see it, and only ``fsync``/``fdatasync`` of that
file (or the ``sync-all`` command) writes its pages to ``BACKING``. The control socket (an
abstract Unix socket, so its name has no path-length limit) takes one line:

* ``lose-unsynced``: drop every page not yet synced and forget sizes not yet synced, and
  undo every rename whose directory was not fsync'ed since; answers ``ok <pages> <files>``
  (what was dropped);
* ``sync-all``: write every dirty page to the disk and make every rename durable (what a
  clean shutdown or the kernel's writeback would have done long before a test); answers
  ``ok <pages> <files>``;
* ``stats``: ``ok <dirty pages> <files with dirty pages>``.

Renames are volatile too: a rename reaches the disk at once (so every reader sees it), but
until the directory of its new name is fsync'ed (``fsyncdir``) a power loss undoes it: the
file is back under its old name and a file it replaced is back under the new one (kept,
hard-linked, beside the disk in ``<disk>.powerfs-renames`` until then). That is what POSIX
promises, and what ext4 does for a rename still in its running journal transaction; a
program that renames a file into place must fsync the directory to keep the rename.

Limits (see docs/power-loss.md): the other metadata operations (create, mkdir, unlink,
truncate, chmod, fallocate) reach the disk at once, as on a file system that journals its
metadata synchronously; file data and renames are volatile. Data that was synced is never torn
(a real disk may tear a sector). Locks are the kernel's own (flock/fcntl are not passed
through). A file is identified by its inode on the disk, so renames keep its dirty pages.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import socket
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

PAGE_BYTES = 4096


@dataclass
class Dirty:
    """The unsynced state of one file (by inode): its dirty pages and its size as written."""

    pages: dict[int, bytearray] = field(default_factory=dict)
    size: int = 0


class PageCache:
    """Dirty pages per inode over file descriptors of the disk (pure bookkeeping + pread/
    pwrite; thread-safe through one lock: FUSE calls come from several threads)."""

    def __init__(self) -> None:
        self.files: dict[int, Dirty] = {}
        self.lock = threading.Lock()

    def _page(self, fd: int, d: Dirty, index: int, disk_size: int) -> bytearray:
        page = d.pages.get(index)
        if page is None:
            start = index * PAGE_BYTES
            data = os.pread(fd, PAGE_BYTES, start) if start < disk_size else b""
            page = bytearray(data.ljust(PAGE_BYTES, b"\0"))
            d.pages[index] = page
        return page

    def write(self, fd: int, ino: int, data: bytes, offset: int) -> int:
        """Keep ``data`` at ``offset`` in memory; return the bytes taken."""
        with self.lock:
            disk_size = os.fstat(fd).st_size
            d = self.files.get(ino)
            if d is None:
                d = self.files[ino] = Dirty(size=disk_size)
            pos, end = offset, offset + len(data)
            while pos < end:
                index, within = divmod(pos, PAGE_BYTES)
                n = min(PAGE_BYTES - within, end - pos)
                # a page past what the disk holds (or past the size as written) starts as
                # zeros, not as stale bytes of a longer version of the file
                page = self._page(fd, d, index, min(disk_size, d.size))
                page[within:within + n] = data[pos - offset:pos - offset + n]
                pos += n
            d.size = max(d.size, end)
            return len(data)

    def read(self, fd: int, ino: int, size: int, offset: int) -> bytes:
        """Return up to ``size`` bytes at ``offset`` as written (dirty pages over the disk)."""
        with self.lock:
            d = self.files.get(ino)
            if d is None:
                return os.pread(fd, size, offset)
            end = min(offset + size, d.size)
            if end <= offset:
                return b""
            out = bytearray(os.pread(fd, end - offset, offset).ljust(end - offset, b"\0"))
            for index in range(offset // PAGE_BYTES, (end - 1) // PAGE_BYTES + 1):
                page = d.pages.get(index)
                if page is None:
                    continue
                lo, hi = max(offset, index * PAGE_BYTES), min(end, (index + 1) * PAGE_BYTES)
                out[lo - offset:hi - offset] = page[lo - index * PAGE_BYTES:hi - index * PAGE_BYTES]
            return bytes(out)

    def size(self, ino: int) -> int | None:
        """Return the file's size as written if it has unsynced state, else None."""
        with self.lock:
            d = self.files.get(ino)
            return None if d is None else d.size

    def truncate(self, ino: int, length: int) -> None:
        """Apply a truncate (already done on the disk) to the unsynced state."""
        with self.lock:
            d = self.files.get(ino)
            if d is None:
                return
            last = (length + PAGE_BYTES - 1) // PAGE_BYTES
            for index in [i for i in d.pages if i >= last]:
                del d.pages[index]
            tail = length % PAGE_BYTES
            if tail and (length // PAGE_BYTES) in d.pages:
                d.pages[length // PAGE_BYTES][tail:] = bytes(PAGE_BYTES - tail)
            d.size = length

    def extend(self, ino: int, length: int) -> None:
        """Apply a size extension (already done on the disk) to the unsynced state."""
        with self.lock:
            d = self.files.get(ino)
            if d is not None:
                d.size = max(d.size, length)

    def sync(self, fd: int, ino: int) -> int:
        """Write ``ino``'s dirty pages through ``fd`` to the disk; return pages written."""
        with self.lock:
            d = self.files.pop(ino, None)
            return 0 if d is None else self._flush(fd, d)

    @staticmethod
    def _flush(fd: int, d: Dirty) -> int:
        for index, page in sorted(d.pages.items()):
            start = index * PAGE_BYTES
            if start < d.size:
                os.pwrite(fd, bytes(page[:min(PAGE_BYTES, d.size - start)]), start)
        if os.fstat(fd).st_size != d.size:
            os.ftruncate(fd, d.size)
        return len(d.pages)

    def forget(self, ino: int) -> None:
        """Drop ``ino``'s unsynced state (the file is gone)."""
        with self.lock:
            self.files.pop(ino, None)

    def lose(self) -> tuple[int, int]:
        """Drop every unsynced page; return (pages, files) dropped."""
        with self.lock:
            pages = sum(len(d.pages) for d in self.files.values())
            files = len(self.files)
            self.files.clear()
            return pages, files

    def stats(self) -> tuple[int, int]:
        """Return (dirty pages, files with unsynced state)."""
        with self.lock:
            return sum(len(d.pages) for d in self.files.values()), len(self.files)


def _disk_flags(flags: int) -> int:
    """Return the flags to open the disk file with: read-write where the caller writes
    (a partial page is read before it is changed), no O_APPEND (the kernel gives every
    write its offset), no O_DIRECT (this process decides when data reaches the disk; for
    O_SYNC/O_DSYNC files the kernel follows each write with an fsync)."""
    if flags & os.O_ACCMODE == os.O_WRONLY:
        flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
    return flags & ~(os.O_APPEND | getattr(os, "O_DIRECT", 0))


@dataclass
class Renames:
    """Renames not yet durable, oldest first: (old path, new path, the hard link that keeps
    a file the rename replaced, or None), all on the disk. Thread-safe through one lock."""

    stash_dir: str
    pending: list[tuple[str, str, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    made: int = 0

    def rename(self, old: str, new: str) -> None:
        """Rename ``old`` to ``new`` on the disk, remembering how to undo it."""
        with self.lock:
            stash = None
            if os.path.lexists(new) and not os.path.isdir(new):
                os.makedirs(self.stash_dir, exist_ok=True)
                self.made += 1
                stash = os.path.join(self.stash_dir, f"{self.made}")
                os.link(new, stash, follow_symlinks=False)
            try:
                os.rename(old, new)
            except OSError:
                if stash is not None:
                    os.unlink(stash)
                raise
            self.pending.append((old, new, stash))

    def commit(self, directory: str | None = None) -> list[int]:
        """Make durable the renames into ``directory`` (every one when None); return the
        inodes of replaced files that lost their last name with it (their unsynced data
        can go)."""
        with self.lock:
            keep, done = [], []
            for entry in self.pending:
                if directory is None or os.path.dirname(entry[1]) == directory:
                    done.append(entry)
                else:
                    keep.append(entry)
            self.pending = keep
        gone = []
        for _, _, stash in done:
            if stash is not None:
                with contextlib.suppress(FileNotFoundError):
                    st = os.lstat(stash)
                    os.unlink(stash)
                    if st.st_nlink <= 1:
                        gone.append(st.st_ino)
        return gone

    def undo(self) -> int:
        """Undo every pending rename, newest first; return how many were undone (a file
        unlinked since its rename cannot come back)."""
        with self.lock:
            pending, self.pending = self.pending, []
        undone = 0
        for old, new, stash in reversed(pending):
            if os.path.lexists(new) and not os.path.lexists(old):
                os.rename(new, old)
                undone += 1
            if stash is not None:
                if not os.path.lexists(new):
                    os.rename(stash, new)
                else:
                    os.unlink(stash)
        return undone


def _make_operations(root: str, cache: PageCache, renames: Renames | None = None) -> Any:
    """Return the mfusepy Operations object of a passthrough over ``root`` with ``cache``."""
    import mfusepy as fuse

    renamed = renames if renames is not None else Renames(root + ".powerfs-renames")

    class PowerFS(fuse.Operations):
        use_ns = True

        def __init__(self) -> None:
            self.fds: dict[int, int] = {}  # fh -> inode on the disk
            self.open_count: dict[int, int] = {}
            self.unlinked: set[int] = set()

        def _path(self, path: str) -> str:
            return os.path.join(root, path.lstrip("/"))

        def _owner(self, path: str) -> None:
            # the daemon runs as root: a file made for another user (PostgreSQL runs as
            # `postgres`) must belong to that user, as on a local disk
            uid, gid, _ = fuse.fuse_get_context()
            if uid or gid:
                os.lchown(path, uid, gid)

        def _track(self, fd: int) -> int:
            ino = os.fstat(fd).st_ino
            self.fds[fd] = ino
            self.open_count[ino] = self.open_count.get(ino, 0) + 1
            return fd

        # --- metadata: straight to the disk ----------------------------------------------
        def access(self, path: str, amode: int) -> int:
            if not os.access(self._path(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
            out = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid",
                                                "st_size", "st_atime_ns", "st_mtime_ns",
                                                "st_ctime_ns", "st_ino", "st_blocks")}
            out["st_atime"], out["st_mtime"], out["st_ctime"] = (
                st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)
            size = cache.size(st.st_ino)
            if size is not None:
                out["st_size"] = size
            return out

        def chmod(self, path: str, mode: int) -> int:
            os.chmod(self._path(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            os.lchown(self._path(path), uid, gid)
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            os.utime(self._path(path), ns=times) if times else os.utime(self._path(path))
            return 0

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(self._path(path))]

        def readlink(self, path: str) -> str:
            return os.readlink(self._path(path))

        def mknod(self, path: str, mode: int, dev: int) -> int:
            os.mknod(self._path(path), mode, dev)
            self._owner(self._path(path))
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            os.mkdir(self._path(path), mode)
            self._owner(self._path(path))
            return 0

        def rmdir(self, path: str) -> int:
            os.rmdir(self._path(path))
            return 0

        def symlink(self, target: str, source: str) -> int:
            os.symlink(source, self._path(target))
            self._owner(self._path(target))
            return 0

        def link(self, target: str, source: str) -> int:
            os.link(self._path(source), self._path(target))
            return 0

        def _gone(self, path: str) -> None:
            """Forget the unsynced data of the file at ``path`` if this removes its last
            name (at its last close if it is still open)."""
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                return
            if st.st_nlink <= 1:
                if self.open_count.get(st.st_ino):
                    self.unlinked.add(st.st_ino)
                else:
                    cache.forget(st.st_ino)

        def unlink(self, path: str) -> int:
            p = self._path(path)
            self._gone(p)
            os.unlink(p)
            return 0

        def rename(self, old: str, new: str) -> int:
            # the file it replaces keeps a name in the stash (it comes back if the rename is
            # lost), so its unsynced data is not forgotten here but when the rename is
            # durable and the stash let go
            if not os.path.lexists(self._path(new)):
                self._gone(self._path(new))
            renamed.rename(self._path(old), self._path(new))
            return 0

        def statfs(self, path: str) -> dict[str, int]:
            st = os.statvfs(self._path(path))
            return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize",
                                                 "f_favail", "f_ffree", "f_files", "f_flag",
                                                 "f_frsize", "f_namemax")}

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            if fh is not None:
                os.ftruncate(fh, length)
                ino = self.fds.get(fh) or os.fstat(fh).st_ino
            else:
                os.truncate(self._path(path), length)
                ino = os.lstat(self._path(path)).st_ino
            cache.truncate(ino, length)
            return 0

        def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
            if mode:
                raise fuse.FuseOSError(errno.EOPNOTSUPP)
            os.posix_fallocate(fh, offset, size)
            cache.extend(self.fds[fh], offset + size)
            return 0

        # --- data: through the page cache ------------------------------------------------
        def open(self, path: str, flags: int) -> int:
            fd = self._track(os.open(self._path(path), _disk_flags(flags)))
            if flags & os.O_TRUNC:
                cache.truncate(self.fds[fd], 0)
            return fd

        def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
            p = self._path(path)
            fd = self._track(os.open(p, _disk_flags(flags) | os.O_CREAT, mode))
            self._owner(p)
            if flags & os.O_TRUNC:
                cache.truncate(self.fds[fd], 0)
            return fd

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return cache.read(fh, self.fds[fh], size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            return cache.write(fh, self.fds[fh], data, offset)

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            cache.sync(fh, self.fds[fh])
            return 0

        def _let_go(self, inos: list[int]) -> None:
            """Forget the unsynced data of files that have no name left (at their last
            close if still open)."""
            for ino in inos:
                if self.open_count.get(ino):
                    self.unlinked.add(ino)
                else:
                    cache.forget(ino)

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            self._let_go(renamed.commit(self._path(path).rstrip("/")))  # renames into it
            return 0  # the other metadata is on the disk already

        def flush(self, path: str, fh: int) -> int:
            return 0  # close(2) does not sync

        def release(self, path: str, fh: int) -> int:
            ino = self.fds.pop(fh, None)
            if ino is not None:
                self.open_count[ino] -= 1
                if not self.open_count[ino]:
                    del self.open_count[ino]
                    if ino in self.unlinked:
                        self.unlinked.discard(ino)
                        cache.forget(ino)
            os.close(fh)
            return 0

        def lose(self) -> tuple[int, int]:
            """Drop the unsynced pages and undo the renames not made durable; return the
            (pages, files) dropped."""
            renamed.undo()
            return cache.lose()

        def sync_all(self) -> tuple[int, int]:
            """Write every dirty page to the disk and make every rename durable; return
            (pages, files)."""
            self._let_go(renamed.commit())
            pages = files = 0
            with cache.lock:
                inos = list(cache.files)
            for ino in inos:
                fd = next((f for f, i in list(self.fds.items()) if i == ino), None)
                if fd is None:
                    fd = self._reopen(ino)
                    if fd is None:
                        cache.forget(ino)
                        continue
                    try:
                        pages += cache.sync(fd, ino)
                    finally:
                        os.close(fd)
                else:
                    pages += cache.sync(fd, ino)
                files += 1
            return pages, files

        def _reopen(self, ino: int) -> int | None:
            """Return a new fd of the disk file with inode ``ino`` (closed files keep dirty
            pages, as in a kernel's page cache), or None if it has no name any more."""
            for folder, _, files in os.walk(root):
                for name in files:
                    p = os.path.join(folder, name)
                    try:
                        if os.lstat(p).st_ino == ino:
                            return os.open(p, os.O_WRONLY)
                    except OSError:
                        continue
            return None

    return PowerFS()


def serve_control(name: str, cache: PageCache, ops: Any) -> threading.Thread:
    """Answer control commands on the abstract Unix socket ``name`` in a daemon thread."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("\0" + name)
    srv.listen(4)

    def answer(line: str) -> str:
        act = {"lose-unsynced": ops.lose, "sync-all": ops.sync_all, "stats": cache.stats}
        if line in act:
            pages, files = act[line]()
            return f"ok {pages} {files}"
        return f"error unknown command {line!r}; use lose-unsynced, sync-all or stats"

    def loop() -> None:
        while True:
            conn, _ = srv.accept()
            with conn:
                conn.settimeout(10)
                try:
                    line = conn.recv(256).decode(errors="replace").strip()
                    conn.sendall((answer(line) + "\n").encode())
                except OSError:
                    continue

    t = threading.Thread(target=loop, name="powerfs-control", daemon=True)
    t.start()
    return t


def main(argv: list[str] | None = None) -> None:
    """Mount the power-loss file system and serve it until unmounted."""
    p = argparse.ArgumentParser(prog="python -m replicalab.cluster.powerfs",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("backing", help="directory holding the files (the disk)")
    p.add_argument("mount", help="empty directory to mount on")
    p.add_argument("--control", required=True, help="abstract Unix socket name for commands")
    a = p.parse_args(argv)
    import mfusepy as fuse

    cache = PageCache()
    ops = _make_operations(os.path.abspath(a.backing), cache)
    serve_control(a.control, cache, ops)
    # allow_other: PostgreSQL runs as another user; default_permissions: the kernel checks
    # modes and owners as on a local disk. No kernel_cache: a file's pages are read anew
    # from here after every open; and a power loss remounts, so nothing the kernel cached
    # (pages, attributes, names) outlives it.
    try:
        fuse.FUSE(ops, a.mount, foreground=True, allow_other=True, default_permissions=True,
                  fsname="replicalab-powerfs", negative_timeout=0)
    except RuntimeError as err:  # libfuse's exit status after a signal: not a crash
        print(f"powerfs: FUSE loop ended ({err})", file=sys.stderr)


if __name__ == "__main__":
    main()
