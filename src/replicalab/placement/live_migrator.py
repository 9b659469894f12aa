"""A migrator in a process of its own, so that a test can SIGKILL it mid-migration.

``python -m replicalab.placement.live_migrator SPEC.json`` reads a spec::

    {"at": "US-E", "urls": {"US-E": "redis://...", ...},   # as reached from "at"
     "moves": [{"item": "o1", "home": "US-E", "source": "US-E", "target": "EU",
                "halt": "commit"}, ...],
     "hold_s": 60}

and runs every move at once. A move with ``halt`` stops after that step (see
:data:`~replicalab.placement.live.STEPS`) and prints ``halted <item> <step>``; once every
move has finished or halted it prints ``ready`` and waits up to ``hold_s`` seconds for the
SIGKILL that a test sends, then exits. A move without ``halt`` prints ``done <item>
<outcome>``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from replicalab.placement.live import Conns, migrate
from replicalab.runtime import RealRuntime
from replicalab.stores import open_store


async def _run(spec: dict[str, Any]) -> None:
    rt = RealRuntime()
    clients = {}
    stores = []
    for region, url in spec["urls"].items():
        store = open_store(url)
        stores.append(store)
        clients[region] = await store.connect()
    conns = Conns(spec["at"], clients)
    hold_s = float(spec.get("hold_s", 60))
    halted = [0]

    async def one(move: dict[str, Any]) -> None:
        async def halt(step: str) -> None:
            if step == move.get("halt"):
                print(f"halted {move['item']} {step}", flush=True)
                halted[0] += 1
                await asyncio.sleep(hold_s)  # the test kills this process meanwhile

        m = await migrate(conns, rt, move["home"], move["item"], move["source"],
                          move["target"], halt)
        print(f"done {m.item} {m.outcome}", flush=True)

    tasks = [asyncio.create_task(one(m)) for m in spec["moves"]]
    deadline = rt.now_ns() + int(hold_s * 1e9)
    # bounded: every move halts or ends within a few store calls' timeouts
    while (sum(t.done() for t in tasks) + halted[0] < len(tasks)
           and rt.now_ns() < deadline):
        await asyncio.sleep(0.01)
    print("ready", flush=True)
    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), hold_s + 5)
    for store in stores:
        await store.close()


def main(argv: list[str] | None = None) -> int:
    """Run the spec named by ``argv[0]``; return the exit code (2 on a bad spec)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m replicalab.placement.live_migrator SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text())
    asyncio.run(_run(spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
