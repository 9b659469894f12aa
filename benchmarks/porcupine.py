"""Porcupine as the benchmarks' peer: built from the Go module proxy with
``porcupine_driver`` (a temporary directory, its own module cache, which also holds
Porcupine's test corpora), and histories written as the driver reads them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replicalab.checkers.linearizability.ops import UNRECORDED, LinOp

DRIVER = Path(__file__).parent / "porcupine_driver"
VERSION = "v1.3.1"
F_CODE = {"read": 0, "write": 1, "cas": 2}
KV_F = {"read": 0, "write": 1, "append": 2}
ANY = -1
"""A cas whose expected value was not recorded (the driver takes it as legal anywhere)."""


def build(tmp: Path, own_cache: bool = True) -> tuple[Path, Path]:
    """Return (the driver binary, Porcupine's module directory) built and fetched in
    ``tmp`` (Porcupine's sources and test data, and the EDN reader, from the Go module
    proxy); ``own_cache`` False uses Go's own module cache (kept between runs) instead of
    one in ``tmp``."""
    go = shutil.which("go")
    if go is None:
        raise SystemExit("Go is not installed; install it (make servers does) to build "
                         "Porcupine")
    src = tmp / "driver"
    src.mkdir()
    for name in ("main.go", "go.mod", "go.sum"):
        shutil.copy(DRIVER / name, src / name)
    env = {**os.environ, "GOFLAGS": "-modcacherw -mod=mod"}
    if own_cache:
        env["GOMODCACHE"] = str(tmp / "mod")
    binary = tmp / "porcupine_driver"
    p = subprocess.run([go, "build", "-o", str(binary), "."], cwd=src, env=env,
                       capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"building Porcupine failed: {p.stderr.strip().splitlines()[-1:]}")
    cache = Path(env.get("GOMODCACHE") or subprocess.run(
        [go, "env", "GOMODCACHE"], capture_output=True, text=True, env=env).stdout.strip())
    return binary, cache / "github.com" / "anishathalye" / f"porcupine@{VERSION}"


def check_edn(binary: Path, paths: Sequence[Path], timeout_s: float = 600.0
              ) -> dict[Path, dict[str, Any]]:
    """Return Porcupine's record ({"valid": "true"/"false"/"unknown", "ops", "check_ns"}) of
    each Jepsen EDN history file in ``paths``, read by the driver itself (``-edn``)."""
    p = subprocess.run([str(binary), "-edn", *map(str, paths)], capture_output=True,
                       text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise SystemExit(f"the Porcupine driver failed: {p.stderr.strip()}")
    return {Path(r["name"]): r for r in map(json.loads, p.stdout.splitlines())}


def _live(ops: Sequence[LinOp], reads: tuple[str, ...] = ("read",)) -> list[LinOp]:
    """Jepsen's drops, as our checker applies them: fail ops, reads that were not ok."""
    return [o for o in ops if o.outcome != "fail" and not (o.f in reads and o.outcome != "ok")]


def register_ops(ops: Sequence[LinOp]) -> list[list[int]]:
    """Return register ops as the driver reads them: [process, f, key, a, b, outcome,
    call, return], values interned per key (0 = nil)."""
    rows = []
    keys: dict[Any, int] = {}
    values: dict[Any, dict[Any, int]] = {}
    for o in _live(ops):
        k = keys.setdefault(o.key, len(keys))
        ids = values.setdefault(o.key, {None: 0})

        def intern(v: Any, ids: dict[Any, int] = ids) -> int:
            return ids.setdefault(v, len(ids))

        if o.f == "cas":
            expected, new = o.value
            a, b = (ANY if expected is UNRECORDED else intern(expected)), intern(new)
        else:
            a, b = intern(o.value), 0
        rows.append([o.process, F_CODE[o.f], k, a, b, 0 if o.outcome == "ok" else 1,
                     o.invoke_ns, o.complete_ns])
    return rows


def kv_ops(ops: Sequence[LinOp]) -> list[dict[str, Any]]:
    """Return kv ops (read / write / append of strings) as the driver's kv model reads
    them (nil is "")."""
    return [{"p": o.process, "f": KV_F[o.f], "k": str(o.key), "v": "" if o.f == "read" else
             (o.value or ""), "out": (o.value or "") if o.f == "read" else "",
             "o": 0 if o.outcome == "ok" else 1, "c": o.invoke_ns, "r": o.complete_ns}
            for o in _live(ops)]


def run(binary: Path, histories: Sequence[tuple[str, str, Sequence[LinOp]]],
        repeats: int, timeout_s: float, tmp: Path) -> dict[str, list[dict[str, Any]]]:
    """Return name -> one driver record per repeat ({"valid": "true"/"false"/"unknown",
    "check_ns": CheckOperationsTimeout's time, ...}) for ``histories`` given as (name,
    model "register" or "kv", ops)."""
    doc = {"repeats": repeats, "timeout_s": timeout_s, "histories": [
        {"name": name, "model": model, "ops": register_ops(ops)} if model == "register" else
        {"name": name, "model": model, "kv_ops": kv_ops(ops)}
        for name, model, ops in histories]}
    path = tmp / "histories.json"
    path.write_text(json.dumps(doc))
    p = subprocess.run([str(binary), str(path)], capture_output=True, text=True,
                       timeout=len(histories) * repeats * 2 * (timeout_s + 30) + 60)
    if p.returncode != 0:
        raise SystemExit(f"the Porcupine driver failed: {p.stderr.strip()}")
    out: dict[str, list[dict[str, Any]]] = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        out.setdefault(r["name"], []).append(r)
    return out
