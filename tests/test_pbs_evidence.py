"""PBS against Cassandra, judged again from the recorded evidence (``docs/data/pbs-cassandra-
*.json``, written by ``benchmarks/pbs_cassandra.py``): deterministic, no server, milliseconds.

Every recording is judged again from its own data (the legs it calibrated, every write's
visibility, its noise floor) and must give the verdict it recorded. The shipped model
(``pbs.wars_from_round_trips`` + ``pbs.t_visibility_after_ack``) was chosen before the
held-out recordings (HELDOUT, made later) and is scored on the first of them the machine did
not make inconclusive, inside the binomial band of the writes at every sampled t; on every
recording with power, a prediction shifted by 5 ms either way, a step at the one-way delay
and a constant 1.0 fall outside it (``benchmarks/mutations.py`` runs this file against those
three mutants of the model)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from replicalab.checkers import visibility as V
from replicalab.experiments import against
from replicalab.models import pbs
from replicalab.runtime.noise import NoiseFloor

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
SELECTION = "pbs-cassandra-2026-11-29-selection.json"
RECORDINGS = sorted(p.name for p in DATA.glob("pbs-cassandra-*.json"))
HELDOUT = sorted((n for n in RECORDINGS if "-heldout-" in n),
                 key=lambda n: int(n.rsplit("-", 1)[1].split(".")[0]))
"""Recordings made after the model was chosen, in order: each one attempted when the machine
looked quiet, every attempt kept; the first whose verdict is not "inconclusive" scores it."""
TRIALS = 100_000


def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _shipped(doc: dict):
    """The shipped model's prediction from a recording's legs (what the command predicts)."""
    cal = doc["calibration"]
    wars = pbs.wars_from_round_trips(cal["write_rt_ms"], cal["read_rt_ms"])
    return lambda ts: pbs.t_visibility_after_ack(wars, 1, 1, ts, cal["hop_ms"], TRIALS, 1)


def _judge(doc: dict, predict) -> tuple[V.Judgement, str]:
    j = V.judge(predict, V.Visibility.from_json(doc["visibility"]))
    floor = NoiseFloor.from_json(doc["noise"]) if doc.get("noise") else None
    return j, against.pbs_verdict([j], floor)


def test_the_recordings_are_there_and_complete():
    assert SELECTION in RECORDINGS and HELDOUT, RECORDINGS
    for name in RECORDINGS:
        doc = _load(name)
        assert doc["command"].startswith("python benchmarks/pbs_cassandra.py"), name
        assert {"date_utc", "machine", "params", "one_way_ms", "calibration", "noise",
                "visibility"} <= set(doc), name
        assert doc["machine"]["load_1m"]["samples"] > 0 and doc["noise"]["stall_samples"] > 0
        assert doc["visibility"]["writes"] >= 500, name


@pytest.mark.parametrize("name", RECORDINGS)
def test_each_recording_judged_again_gives_its_recorded_verdict(name):
    doc = _load(name)
    j, verdict = _judge(doc, _shipped(doc))
    assert verdict == doc["shipped_model"]["verdict"], (name, j.line())
    assert [p.to_json() for p in j.points] == doc["shipped_model"]["points"]


def test_the_shipped_model_agrees_with_the_first_conclusive_run_it_was_not_chosen_on():
    """Held-out attempts the machine made inconclusive (it added more than 5 ms at p99) say
    nothing either way; the first conclusive one must agree."""
    chosen_at = _load(SELECTION)["date_utc"]
    for name in HELDOUT:
        doc = _load(name)
        assert doc["date_utc"] > chosen_at, name
        j, verdict = _judge(doc, _shipped(doc))
        if verdict == "inconclusive":
            assert NoiseFloor.from_json(doc["noise"]).added_p99_ms > against.PBS_NOISE_TOLERANCE_MS
            continue
        assert j.has_power, (name, j.line())
        assert verdict == "agrees", (name, j.line(), doc["noise"])
        return
    pytest.fail(f"no conclusive held-out recording among {HELDOUT}: every attempt was "
                "inconclusive (python benchmarks/pbs_cassandra.py --label heldout-N on a "
                "quieter machine)")


@pytest.mark.parametrize("name", RECORDINGS)
@pytest.mark.parametrize("wrong", ["5 ms late", "5 ms early", "a step at the one-way delay",
                                   "a constant 1.0"])
def test_wrong_predictions_fall_outside_the_band(name, wrong):
    doc = _load(name)
    shipped = _shipped(doc)
    predict = {"5 ms late": lambda t: shipped(np.asarray(t, dtype=float) - 5.0),
               "5 ms early": lambda t: shipped(np.asarray(t, dtype=float) + 5.0),
               "a step at the one-way delay": lambda t: (
                   np.asarray(t, dtype=float) >= doc["one_way_ms"]).astype(float),
               "a constant 1.0": lambda t: np.ones(len(t))}[wrong]
    j, _ = _judge(doc, predict)
    if not j.has_power:
        pytest.fail(f"{name}: no power to judge ({j.transition_points} t in the transition)")
    assert not j.within, (name, wrong, j.line())
