"""The toy key-value server: ``python -m replicalab_toyplug.server PORT`` serves on
127.0.0.1:PORT until killed. One JSON request per line (read, write with conditions,
delete), one JSON answer per line; one event loop, so every request is atomic."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


def answer(data: dict[str, str], req: dict[str, Any]) -> dict[str, Any]:
    """Apply one request to ``data``; return the answer."""
    if req["op"] == "read":
        return {"values": [data.get(k) for k in req["keys"]]}
    if req["op"] == "write":
        for key, want in (req.get("expect") or {}).items():
            if data.get(key) != want:  # want None: the key must not exist
                return {"failed": f"{key} is {data.get(key)!r}"}
        data.update(req["values"])
        return {"ok": True}
    for key in req["keys"]:
        data.pop(key, None)
    return {"ok": True}


async def serve(port: int) -> None:
    """Serve on 127.0.0.1:``port`` forever."""
    data: dict[str, str] = {}

    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write((json.dumps(answer(data, json.loads(line))) + "\n").encode())
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(session, "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
