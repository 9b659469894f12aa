"""``replicalab.export`` and ``replicalab.read_history``: Jepsen's conventions (independent
``[k v]`` tuples, plain integer values numbered per key, keywords, ``:index`` per event,
``:process :nemesis``) and a lossless way back (any History, EDN and JSON lines); bad input
names the API's parameters, the command line its options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import replicalab
from replicalab.api.errors import ParameterError
from replicalab.history import History, save_history
from replicalab.history.read import read_events
from replicalab.history.txn import encode_txn

VALUES = st.one_of(st.none(), st.sampled_from(["1.0@5", "2.1@9", "x", "", "3.0@12"]))
KEYS = st.sampled_from(["d/i/a", "d/i/b", "register/0-k1/v", "5"])


@st.composite
def histories(draw: st.DrawFn) -> History:
    """Histories of register ops (one key or several, cas with and without expected
    values), nemesis faults, final reads and transactions, every outcome, rows recorded in
    order of their invoke times (as every run records them)."""
    h = History()
    t = 0
    free = {p: 0 for p in (0, 1, 2, -2, -1)}  # a process runs one op at a time
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["read", "write", "cas", "multi", "nemesis", "txn"]))
        process = -1 if kind == "nemesis" else draw(st.sampled_from([0, 1, 2, -2]))
        if process not in free:
            continue  # its last op never completed
        t = max(t, free[process]) + draw(st.integers(0, 50))
        if kind == "txn":
            keys, values = encode_txn(draw(st.lists(st.tuples(
                st.sampled_from(["append", "w", "r"]), st.sampled_from(["5", "x"]),
                st.integers(1, 9)), min_size=1, max_size=3).map(
                lambda ms: [(f, k, None if f == "r" else v) for f, k, v in ms])))
            row = h.invoke(process, "txn", keys, values, "none", t)
        elif kind == "nemesis":
            row = h.invoke(-1, "crash", ("n2",), ("crash node=2",), "none", t)
        elif kind == "multi":
            keys = tuple(draw(st.lists(KEYS, min_size=2, max_size=3, unique=True)))
            row = h.invoke(process, "write", keys, tuple(draw(VALUES) for _ in keys), "none", t)
        else:
            key = draw(KEYS)
            expects = (draw(VALUES),) if kind == "cas" and draw(st.booleans()) else ()
            value = None if kind == "read" and draw(st.booleans()) else draw(VALUES)
            row = h.invoke(process, kind, (key,), (value,),
                           draw(st.sampled_from(["none", "eventual", "consistent"])), t,
                           expects)
        outcome = draw(st.sampled_from(["ok", "fail", "info", "invoke"]))
        done = t + draw(st.integers(0, 30))
        if outcome == "ok":
            seen = None
            if h.op(row).f == "read":
                seen = (draw(VALUES),)
            h.ok(row, done, seen, draw(st.sampled_from(["", "n1"])))
        elif outcome == "fail":
            h.fail(row, done, "condition failed", draw(st.sampled_from(["", "n2"])))
        elif outcome == "info":
            h.info(row, done, draw(st.sampled_from(["", "timed out"])))
        if outcome == "invoke":
            del free[process]
        else:
            free[process] = done
    return h


@settings(max_examples=60, deadline=None)
@given(histories(), st.sampled_from(["edn", "jsonl"]))
def test_any_history_exported_reads_back_the_same(tmp_path_factory, h: History, fmt: str):
    d = tmp_path_factory.mktemp("run")
    save_history(h, d, {"workload": "staleness"})
    done = replicalab.export(d, fmt)
    assert done.path == d / f"history.{fmt}" and done.events == sum(
        1 + (op.type != "invoke") for op in h)
    back = replicalab.read_history(done.path)
    assert list(back) == list(h)


def test_jepsen_conventions_on_a_register_run(tmp_path: Path):
    """A register run on the simulated primary/backup store, asynchronous replication,
    eventual reads in another region than the writes, a partition: every event as Jepsen
    writes it, values numbered per key, and the export checked as the run directory is,
    with the same verdict and explanation (not linearizable: stale reads)."""
    run = replicalab.probe("sim://primary?replication=async&regions=dc3", workload="register",
                           duration="5s", consistency="eventual", out=tmp_path, progress=False,
                           writer_region="US-E", reader_region="EU", keys=2, clients=4,
                           faults=["at=2s partition node=0 for=1s"])
    done = replicalab.export(run, "edn", tmp_path / "h.edn")
    evs = [ev for ev, _ in read_events(done.path)]
    assert [ev["index"] for ev in evs] == list(range(len(evs)))
    assert [ev["time"] for ev in evs] == sorted(ev["time"] for ev in evs)
    assert {str(ev["type"]) for ev in evs} <= {"invoke", "ok", "fail", "info"}
    assert any(ev["process"] == "nemesis" for ev in evs)
    numbers: dict[str, dict[int, str]] = {}
    for ev in evs:
        if ev["process"] == "nemesis":
            continue
        assert isinstance(ev["process"], int) and "key" not in ev
        key, v = ev["value"]
        recorded = ev.get("replicalab/value")
        pairs = zip(v, recorded, strict=True) if ev["f"] == "cas" and isinstance(v, list) \
            else [(v, recorded)]
        for plain, orig in pairs:
            assert plain is None or (isinstance(plain, int) and plain >= 1)
            if plain is not None:  # one number per recorded value of a key, and back
                assert numbers.setdefault(key, {}).setdefault(plain, orig) == orig
    for per_key in numbers.values():
        assert sorted(per_key) == list(range(1, len(per_key) + 1))
        assert len(set(per_key.values())) == len(per_key)
    from_dir, from_edn = replicalab.check(run), replicalab.check(done.path, model="kv")
    assert from_dir.valid is False and from_edn.valid is False
    assert from_dir.ops == from_edn.ops
    ce_dir, ce_edn = from_dir.to_json()["counterexample"], from_edn.to_json()["counterexample"]
    assert [c["explanation"].split(" at ")[0] for c in ce_dir or ()] == \
        [c["explanation"].split(" at ")[0] for c in ce_edn or ()]


def test_bad_input_names_the_parameter_and_the_command_its_option(tmp_path: Path):
    h = History()
    h.ok(h.invoke(0, "write", ("k",), ("1.0@0",), "none", 0), 5)
    run_dir = tmp_path / "run"
    save_history(h, run_dir, {})
    with pytest.raises(ParameterError, match=r"^format 'xml': use edn or jsonl") as err:
        replicalab.export(run_dir, "xml")
    assert err.value.parameter == "format"
    replicalab.export(run_dir, "jsonl", tmp_path / "h.jsonl")
    with pytest.raises(ParameterError, match="exists; pass force=True to replace it, or out "):
        replicalab.export(run_dir, "jsonl", tmp_path / "h.jsonl")
    with pytest.raises(ParameterError, match="never writes over what a run saved: pass out "):
        replicalab.export(run_dir, "jsonl", run_dir / "history.parquet", force=True)
    assert replicalab.export(run_dir, "jsonl", tmp_path / "h.jsonl", force=True).events == 2
    p = subprocess.run([sys.executable, "-m", "replicalab.cli.main", "export", str(run_dir),
                        "--format", "jsonl", "--out", str(tmp_path / "h.jsonl")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "exists; pass --force to replace it, or --out with another file" in p.stderr
    first = json.loads((tmp_path / "h.jsonl").read_text().splitlines()[0])
    assert first["value"] == ["k", 1] and first["replicalab/value"] == "1.0@0"
