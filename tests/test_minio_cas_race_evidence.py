"""MinIO's conditional PUT racing a plain PUT, judged again from the recording
(``docs/data/minio-cas-race-*.json``, written by ``benchmarks/minio_cas_race.py`` on a real
MinIO server): deterministic, no server, milliseconds.

Every race is a history of four operations on one register (the ``v0`` PUT before it, U's
plain PUT of ``v1``, C's cas ``v0 -> v2`` made of a GET and a PUT with ``If-Match``, R's
read after both). Each is judged by trying every order of its operations against a register
written out here (a brute-force oracle of its own, sharing nothing with the checker) and by
the checker, which must agree; the recording's
claim is then what the judgements say: on a bucket without versioning no race loses an
update, on a versioned one (every bucket of a site-replicated MinIO) some do, and in each of
those the object's versions show why: U's version is older than C's although U's PUT was
acknowledged after C's."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from replicalab.checkers.linearizability import checker, search
from replicalab.checkers.linearizability.checker import check
from replicalab.checkers.linearizability.ops import LinOp
from replicalab.checkers.linearizability.registry import get_model

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
RECORDINGS = sorted(p.name for p in DATA.glob("minio-cas-race-*.json"))
MODEL = get_model("cas-register")


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def history(race: dict) -> list[LinOp]:
    """Return a race as LinOps: the initial write of v0 (done before the race), U, C, R."""
    ops = [LinOp(0, 0, "write", None, "v0", "ok", -2, -1)]
    for i, o in enumerate(race["ops"], start=1):
        value = tuple(o["value"]) if o["f"] == "cas" else o["value"]
        ops.append(LinOp(i, i, o["f"], None, value, o["outcome"], o["invoke_ns"],
                         o["complete_ns"]))
    return ops


def linearizable(race: dict) -> bool:
    """Return whether some order of the race's operations that respects real time (an op
    that completed before another was invoked comes first) is a run of one register that
    starts holding v0: a write sets it, a read returns it, a successful cas finds its
    expected value and sets the new one, a failed cas takes no effect (left out)."""
    ops = [o for o in race["ops"] if o["outcome"] == "ok"]
    for order in itertools.permutations(ops):
        if any(later["complete_ns"] < earlier["invoke_ns"]
               for i, earlier in enumerate(order) for later in order[i + 1:]):
            continue
        value, legal = "v0", True
        for o in order:
            if o["f"] == "write":
                value = o["value"]
            elif o["f"] == "read":
                legal = o["value"] == value
            else:
                legal = o["value"][0] == value
                value = o["value"][1]
            if not legal:
                break
        if legal:
            return True
    return False


def test_there_is_a_recording_with_both_modes():
    assert RECORDINGS
    for name in RECORDINGS:
        doc = _load(name)
        assert doc["command"].startswith("python benchmarks/minio_cas_race.py"), name
        assert set(doc["modes"]) == {"unversioned", "versioned"}, name
        for m in doc["modes"].values():
            assert m["races"] == len(m["all"]) >= 100, name


@pytest.mark.parametrize("core", ["native", "python"])
@pytest.mark.parametrize("name", RECORDINGS)
def test_each_race_judged_by_the_oracle_and_the_checker_alike(name, core, monkeypatch):
    if core == "python":  # the reference pipeline, as the other checker tests swap it in
        monkeypatch.setattr(checker, "search_core", search.search_part)
    for mode, m in _load(name)["modes"].items():
        lost = 0
        for race in m["all"]:
            oracle = linearizable(race)
            assert check(history(race), MODEL).verdict.json() is oracle, (mode, race)
            lost += not oracle
        assert lost == m["lost_updates"], (name, mode)


@pytest.mark.parametrize("name", RECORDINGS)
def test_versioning_loses_updates_and_no_versioning_does_not(name):
    modes = _load(name)["modes"]
    unversioned = [r for r in modes["unversioned"]["all"] if not linearizable(r)]
    versioned = [r for r in modes["versioned"]["all"] if not linearizable(r)]
    assert modes["unversioned"]["c_succeeded_after_reading_v0"] > 0  # the race was run
    assert unversioned == []
    assert versioned, "no lost update recorded on the versioned bucket"


@pytest.mark.parametrize("name", RECORDINGS)
def test_a_lost_update_is_a_version_older_than_the_one_acknowledged_before_it(name):
    """In each lost update the plain PUT (U, the 1,002-byte body) completed after the
    conditional one (C), yet its version is older: MinIO ordered the versions by when each
    PUT arrived, not by when it took effect, and checked C's If-Match against v0."""
    for race in _load(name)["modes"]["versioned"]["all"]:
        if linearizable(race):
            continue
        by = {o["p"]: o for o in race["ops"]}
        assert by["C"]["complete_ns"] < by["U"]["complete_ns"], race
        newest_first = [v["size"] for v in race["versions"]]
        assert newest_first == [2, 1002, 2], race  # C's v2, then U's v1, then v0
