"""MinIO for the tests: built in the background while the other tests run.

Building MinIO and mc from the Go module proxy takes minutes on 2 cores, so ``make test``
starts ``scripts/install-servers.sh minio`` in the background (low priority, one package at
a time) before pytest and records the builder's pid in ``.replicalab/minio-build.pid``; the
MinIO tests are ordered last (conftest.py) and wait here for the binaries while that builder
runs. A builder that ends without them fails the waiting test under CI=true (the log is
named) and skips it elsewhere.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from replicalab.cluster import process
from servers import server_missing

CHECKOUT = Path(__file__).resolve().parents[1]
BIN = CHECKOUT / ".replicalab" / "bin"
PID_FILE = CHECKOUT / ".replicalab" / "minio-build.pid"
LOG = CHECKOUT / ".replicalab" / "minio-build.log"
WAIT_S = 1800.0  # a cold build beside the suite on 2 cores; the builder's own end stops it


def _built() -> bool:
    return all(os.access(BIN / name, os.X_OK) for name in ("minio", "mc"))


def _builder() -> int | None:
    try:
        pid = int(PID_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if process.alive(pid) else None


def wait_for_minio() -> float:
    """Return the seconds waited for the background build of minio and mc (0 when they
    were there); fail (CI) or skip when there is no builder or it ended without them."""
    t0 = time.monotonic()
    deadline = t0 + WAIT_S
    while not _built():
        if _builder() is None:
            if _built():
                break
            server_missing("MinIO (minio and mc in .replicalab/bin)",
                           f"not built and no build running; see {LOG} or run "
                           "scripts/install-servers.sh minio")
        if time.monotonic() >= deadline:
            server_missing("MinIO", f"its build ran over {WAIT_S:.0f} s; see {LOG}")
        time.sleep(2.0)
    return time.monotonic() - t0
