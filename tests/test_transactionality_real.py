"""The transactionality property on a real PostgreSQL cluster: both isolation levels run
and graded in one cell (SERIALIZABLE shows no anomaly; REPEATABLE READ nothing worse than
the write skew snapshot isolation allows)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from replicalab.cluster import kinds
from replicalab.experiments.measure import Target
from replicalab.experiments.plan import QUICK, Subject
from replicalab.experiments.properties import get
from replicalab.experiments.property import Context
from replicalab.history import load_history
from replicalab.history.core import TYPE_NAMES
from replicalab.history.txn import decode_txn
from replicalab.regions import region_set
from replicalab.stores import open_store

pytestmark = pytest.mark.integration

FORBIDDEN_UNDER_SI = {"G0", "G1a", "G1b", "G1c", "G-single", "G-nonadjacent", "lost-update",
                      "internal"}


def _evidence(base: Path, v: dict) -> str:
    """Return what a failed isolation claim needs to be judged: the run's counts, each
    class's first anomaly explained, and every transaction it names with its micro-ops,
    outcome and times (ms from the run's start)."""
    h, _ = load_history(base / v["run"])
    t0 = int(h.invoke_ns[0]) if len(h) else 0
    lines = [f"{v['label']}: {v['txns']} ; {v['check']['counts']}"]
    for cls, first in v["check"]["first"].items():
        lines += [f"{cls}:", *(f"  {e}" for e in first["explanation"])]
        for name in first["txns"]:
            i = int(name.removeprefix("T"))
            outcome = TYPE_NAMES[h.type[i]] if h.type[i] else "in flight"
            done = (f"{(int(h.complete_ns[i]) - t0) / 1e6:.1f}" if h.complete_ns[i] >= 0
                    else "-")
            lines.append(f"  {name} process {h.process[i]} {outcome} "
                         f"[{(int(h.invoke_ns[i]) - t0) / 1e6:.1f}, {done}] ms: "
                         f"{decode_txn(h.keys[i], h.values[i])}")
    return "\n".join(lines)


def test_postgres_cell_grades_serializable_and_repeatable_read(postgres_dc3, tmp_path: Path):
    cluster, root = postgres_dc3
    kind = kinds.POSTGRES
    target = Target("postgres", cluster.url, cluster.name, region_set("dc3").regions,
                    cluster_root=str(root))
    features = frozenset(f.value for f in open_store(cluster.url, 1).info.features)
    ctx = Context(Subject("postgres", kind), dataclasses.replace(QUICK, txn_s=8.0), 1, "dc3",
                  tmp_path / "runs", tmp_path, root, lambda what: None, target=target,
                  features=features)
    prop = get("transactionality")
    cell = prop.grade(ctx, prop.measure(ctx), prop.promise_for(kind))

    ser, rr = cell.figures["variants"]
    assert (ser["label"], ser["model"]) == ("SERIALIZABLE", "serializable")
    assert (rr["label"], rr["model"]) == ("REPEATABLE READ", "snapshot-isolation")
    assert "isolation=serializable" in ser["url_params"]
    assert ser["txns"]["ok"] > 100 and ser["txns"]["fail"] > 0  # the hot keys conflicted
    assert ser["check"]["valid"] is True, _evidence(tmp_path, ser)
    assert rr["txns"]["ok"] > 100
    found = {k.removesuffix("-realtime").removesuffix("-process")
             for k, n in rr["check"]["counts"].items() if n}
    assert not found & FORBIDDEN_UNDER_SI, rr["check"]
    assert cell.grade == ("yellow" if "G2-item" in found else "green")
    assert cell.value.startswith("SERIALIZABLE: serializable as promised: no anomaly in ")
    assert "; REPEATABLE READ: " in cell.value
    assert cell.source == "https://www.postgresql.org/docs/current/transaction-iso.html"
    assert len(cell.runs) == 2 and all((tmp_path / r / "history.parquet").exists()
                                       for r in cell.runs)
