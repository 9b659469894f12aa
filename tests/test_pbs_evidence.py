"""PBS against Cassandra, judged again from the recorded evidence (``docs/data/pbs-cassandra-
*.json``, written by ``benchmarks/pbs_cassandra.py``): deterministic, no server, milliseconds.

Every recording is judged again from its own data (the legs it calibrated, every write's
visibility, its noise floor) and must give the verdict it records for the shipped model
(``against.pbs_prediction``: legs deconvolved from the round trips, their warm-up left out,
plus the delay the machine added as the run's noise floor measured it). That model was
chosen on heldout-3, heldout-8 and heldout-9 (CHOSEN_ON: the conclusive recordings, each of
which refuted the one before it), so they score nothing any more; the model is scored on the first
recording made after it was chosen (MODEL_CHOSEN_UTC) that the machine did not make
inconclusive, inside the binomial band of the writes at every sampled t. On every recording
with power, a prediction shifted by 5 ms either way, a step at the one-way delay and a
constant 1.0 fall outside it (``benchmarks/mutations.py`` runs this file against
those three mutants of the model)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from replicalab.checkers import visibility as V
from replicalab.experiments import against
from replicalab.runtime.noise import NoiseFloor

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
SELECTION = "pbs-cassandra-2026-11-29-selection.json"
RECORDINGS = sorted(p.name for p in DATA.glob("pbs-cassandra-*.json"))
HELDOUT = sorted((n for n in RECORDINGS if "-heldout-" in n),
                 key=lambda n: int(n.rsplit("-", 1)[1].split(".")[0]))
"""Recordings held out of a choice, in order: each one attempted when the machine looked
quiet, every attempt kept; the first made after a model was chosen whose verdict is not
"inconclusive" scores that model."""
CHOSEN_ON = ("pbs-cassandra-2026-11-29-heldout-3.json",
             "pbs-cassandra-2026-11-29-heldout-8.json",
             "pbs-cassandra-2026-11-29-heldout-9.json")
"""The runs the shipped model was chosen on: heldout-3 refuted the model before the one
before it and the deconvolved legs were judged on it; heldout-8 refuted the deconvolved legs
by their tail, and their warm-up and the machine's added delay were judged on both;
heldout-9 refuted a warm-up of 10 round trips by its early tail, and 20 was chosen on all
three (``benchmarks/pbs_variants.py --drop 10 20 30 --machine all``)."""
MODEL_CHOSEN_UTC = "2026-11-30T00:41:21Z"
"""When the shipped model was committed: only recordings started later score it."""
TRIALS = 100_000
MODEL = against.PBS_MODEL


def _load(name: str) -> dict:
    return {**json.loads((DATA / name).read_text()), "name": name}


@functools.cache
def _shipped_of(name: str) -> against.PbsPrediction:
    doc = _load(name)
    cal = doc["calibration"]
    floor = NoiseFloor.from_json(doc["noise"]) if doc.get("noise") else None
    return against.pbs_prediction(cal["write_rt_ms"], cal["read_rt_ms"], cal["hop_ms"], floor,
                                  trials=TRIALS)


def _shipped(doc: dict) -> against.PbsPrediction:
    """The shipped model's prediction from a recording's legs and noise floor (what the
    command predicts), with its bootstrap spread (computed once per recording)."""
    return _shipped_of(doc["name"])


@dataclass(frozen=True)
class _Wrong:
    """A wrong prediction carrying the shipped one's spread (at the t it was taken from), so
    that it is judged as leniently as the shipped model is."""

    curve: Callable[[np.ndarray], np.ndarray]
    shipped: against.PbsPrediction
    shift_ms: float = 0.0

    def __call__(self, t):
        return self.curve(np.asarray(t, dtype=float))

    def spread(self, t):
        return self.shipped.spread(np.asarray(t, dtype=float) - self.shift_ms)


def _misread(doc: dict) -> str | None:
    """Why the recording's reads were not the path the model was calibrated for (None:
    they were, or the recording predates the reads' median): its traced reads at the
    reader's coordinator (``read_paths``, recorded from 2026-11-29 13:30 UTC on), else the
    reads' median against the reader's own replica at calibration."""
    return against.misread(1, doc.get("read_p50_ms"), doc["calibration"]["read_overhead_ms"],
                           traced=doc.get("read_paths", ()))


TRACED_FROM_UTC = "2026-11-29T13:30:00Z"
"""From then on every recording traces where the reader's reads went, before and after its
probe (heldout-2 and -6 read another data centre's replica, which their files could only
show by the reads' latency)."""


def _judge(doc: dict, predict) -> tuple[V.Judgement, str]:
    floor = NoiseFloor.from_json(doc["noise"]) if doc.get("noise") else None
    got = against.judge_pbs(predict, V.Visibility.from_json(doc["visibility"]), floor,
                            _misread(doc))
    return got.judgement, got.verdict


def test_the_recordings_are_there_and_complete():
    assert SELECTION in RECORDINGS and HELDOUT, RECORDINGS
    for name in RECORDINGS:
        doc = _load(name)
        assert doc["command"].startswith("python benchmarks/pbs_cassandra.py"), name
        assert {"date_utc", "machine", "params", "one_way_ms", "calibration", "noise",
                "visibility"} <= set(doc), name
        assert doc["machine"]["load_1m"]["samples"] > 0 and doc["noise"]["stall_samples"] > 0
        assert doc["visibility"]["writes"] >= 500, name
        assert doc["shipped_model"]["model"] == MODEL, name
        assert doc["shipped_model"]["judge"] == against.PBS_JUDGE, name
        if doc["date_utc"] > TRACED_FROM_UTC:
            paths = doc["read_paths"]
            assert len(paths) == 2 and all(p["trace"] and p["intended"] for p in paths), name


@pytest.mark.parametrize("name", RECORDINGS)
def test_each_recording_judged_again_gives_its_recorded_verdict(name):
    doc = _load(name)
    j, verdict = _judge(doc, _shipped(doc))
    assert verdict == doc["shipped_model"]["verdict"], (name, j.line())
    assert [p.to_json() for p in j.points] == doc["shipped_model"]["points"]


def test_the_shipped_model_agrees_with_the_first_conclusive_run_it_was_not_chosen_on():
    """Held-out attempts the machine made inconclusive (it added more than 5 ms at p99, or
    the reads went to another replica) say nothing either way; the first conclusive one
    recorded after the model was chosen must agree."""
    assert all(_load(n)["date_utc"] < MODEL_CHOSEN_UTC for n in CHOSEN_ON)
    later = [n for n in HELDOUT if _load(n)["date_utc"] > MODEL_CHOSEN_UTC]
    for name in later:
        doc = _load(name)
        j, verdict = _judge(doc, _shipped(doc))
        if verdict == "inconclusive":
            assert (_misread(doc) is not None or NoiseFloor.from_json(doc["noise"]).added_p99_ms
                    > against.PBS_NOISE_TOLERANCE_MS), name
            continue
        assert j.has_power, (name, j.line())
        assert verdict == "agrees", (name, j.line(), doc["noise"])
        return
    pytest.fail(f"no conclusive held-out recording after {MODEL_CHOSEN_UTC} among {later}: "
                "python benchmarks/pbs_cassandra.py --label heldout-N on a quiet machine")


EVIDENCE = [n for n in RECORDINGS if _misread(_load(n)) is None]
"""The recordings whose reads took the path the model was calibrated for."""


@pytest.mark.parametrize("name", EVIDENCE)
@pytest.mark.parametrize("wrong", ["5 ms late", "5 ms early", "a step at the one-way delay",
                                   "a constant 1.0"])
def test_wrong_predictions_fall_outside_the_band(name, wrong):
    doc = _load(name)
    shipped = _shipped(doc)
    predict = {"5 ms late": _Wrong(lambda t: shipped(t - 5.0), shipped, 5.0),
               "5 ms early": _Wrong(lambda t: shipped(t + 5.0), shipped, -5.0),
               "a step at the one-way delay": _Wrong(
                   lambda t: (t >= doc["one_way_ms"]).astype(float), shipped),
               "a constant 1.0": _Wrong(lambda t: np.ones(len(t)), shipped)}[wrong]
    j = V.judge(predict, V.Visibility.from_json(doc["visibility"]))
    if not j.has_power:
        pytest.fail(f"{name}: no power to judge ({j.transition_points} t in the transition)")
    assert not j.within, (name, wrong, j.line())


def test_reads_served_by_another_replica_say_nothing_of_the_model():
    """At R = 1 the reader's coordinator reads its own replica; reads taking far longer than
    that replica did at calibration went elsewhere (heldout-2: 168 ms against 2.9 ms), and
    their curve cannot score the model either way. Reads as fast as calibrated, or a read
    quorum that must wait for a remote replica anyway, are not refused."""
    assert against.misread(1, 168.4, 2.9) is not None
    assert against.misread(1, 2.9 + against.PBS_NOISE_TOLERANCE_MS, 2.9) is None
    assert against.misread(2, 168.4, 2.9) is None and against.misread(1, None, 2.9) is None
    doc = _load("pbs-cassandra-2026-11-29-heldout-2.json")
    assert _judge(doc, _shipped(doc))[1] == "inconclusive"
    assert against.pbs_verdict([], None, why="reads elsewhere") == "inconclusive"
