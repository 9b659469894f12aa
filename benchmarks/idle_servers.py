"""CPU that a cluster's processes take while no client uses it, in % of one core.

    python benchmarks/idle_servers.py KIND [--nodes 3] [--wait-s 20] [--sample-s 30]

Brings a cluster up on dc3 links (its own state directory), waits ``--wait-s`` past the
start (elections, first gossip, compaction settle), reads every one of its processes' CPU
ticks from /proc/<pid>/stat (the nodes, their wrappers and children, Toxiproxy) twice,
``--sample-s`` apart, and brings it down. The figure behind tests/servers.py's ``Shared``:
a shared cluster kept to the end of the test session costs this for every idle second.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _ticks(pids: list[int]) -> dict[int, tuple[int, str]]:
    out = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[pid] = (int(fields[11]) + int(fields[12]), cmd[:70])
    return out


def main() -> None:
    """Print each process's share of one core while the cluster idles, and their sum."""
    ap = argparse.ArgumentParser()
    ap.add_argument("kind")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--wait-s", type=float, default=20.0)
    ap.add_argument("--sample-s", type=float, default=30.0)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="replicalab-idle-"))
    root.chmod(0o755)  # PostgreSQL's user reaches its data
    os.environ["REPLICALAB_STATE_DIR"] = str(root)
    from replicalab.cluster import base, process

    c = base.up(a.kind, a.nodes, "dc3", name=f"idle-{a.kind}", root=root)
    try:
        time.sleep(a.wait_s)
        pids = [p for top in [n.pid for n in c.nodes] + [c.toxiproxy_pid] if top
                for p in [top, *process.descendants(top)]]
        before = _ticks(pids)
        time.sleep(a.sample_s)
        after = _ticks(pids)
    finally:
        base.down(c.name, root)
    total = 0.0
    for pid, (t, cmd) in sorted(after.items(), key=lambda kv: before.get(kv[0], (0,))[0]
                                - kv[1][0]):
        share = 100 * (t - before.get(pid, (t,))[0]) / TICK / a.sample_s
        total += share
        print(f"{share:6.2f} %  {cmd}")
    print(f"{total:6.2f} %  all of {a.kind} ({a.nodes} nodes, idle {a.sample_s:.0f} s "
          f"after {a.wait_s:.0f} s)")


if __name__ == "__main__":
    main()
