"""The staleness windows the docs quote, judged again from their recordings
(``docs/data/staleness-<kind>-*.json``, written by ``benchmarks/staleness_windows.py``):
deterministic, no server.

Each write became visible at the US-W replica inside the window its replication path allows,
counted from the ack the US-E writer saw (``checkers/visibility.judge_window``): Redis and
PostgreSQL ship it one primary -> replica delay later; ZooKeeper's reader server applies it
when the leader's COMMIT arrives, d(leader -> reader) - d(leader -> writer) after the
writer's server answered. Each one-way delay is what Toxiproxy applies (whole milliseconds,
+-jitter); the slack is what the store adds on a quiet machine, stated here, never fitted.
The rule is ``experiments/windows.py``'s. A write outside its window counts only where the
recording's noise floor measured the machine adding as much while it ran, and when the
machine added more than the window's slack at p99 the verdict is "inconclusive", named. The
median is the gross check: a wrong path (visible at the ack, or a hop too many) puts it
outside on every recording."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from replicalab.checkers import visibility as V
from replicalab.experiments import windows
from replicalab.runtime.noise import NoiseFloor

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
RECORDINGS = sorted(p.name for p in DATA.glob("staleness-*.json"))
def _load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _leader(doc: dict) -> str | None:
    return next((n["region"] for n in doc["nodes"] if n["index"] == doc["leader"]), None)


def window_ms(doc: dict) -> tuple[float, float]:
    """The window the recording's replication links (and leader) allow."""
    return windows.window_ms(doc["kind"], doc["links"], doc["writer_region"],
                             doc["reader_region"], _leader(doc))


def _judge(doc: dict, lo: float, hi: float) -> V.WindowJudgement:
    floor = NoiseFloor.from_json(doc["noise"]) if doc.get("noise") else None
    path = windows.write_path_ms(doc["kind"], doc["links"], doc["writer_region"], _leader(doc))
    return V.judge_window(V.Visibility.from_json(doc["visibility"]), lo, hi, floor,
                          windows.SLACK_MS[doc["kind"]], path)


def test_every_store_has_a_recording():
    kinds = {_load(n)["kind"] for n in RECORDINGS}
    assert kinds == {"redis", "postgres", "zookeeper"}, RECORDINGS
    for name in RECORDINGS:
        doc = _load(name)
        assert doc["command"].startswith("python benchmarks/staleness_windows.py"), name
        assert doc["noise"]["echo_via"].startswith("toxiproxy"), name
        assert doc["machine"]["load_1m"]["samples"] > 0 and doc["visibility"]["writes"] >= 60


@pytest.mark.parametrize("name", RECORDINGS)
def test_every_write_became_visible_inside_the_window_the_links_allow(name):
    doc = _load(name)
    lo, hi = window_ms(doc)
    got = _judge(doc, lo, hi)
    assert got.median_inside, got.line()
    # every write inside, or the machine's measured noise named as the reason it is not
    assert got.verdict in ("exact", "inconclusive"), got.line()
    assert got.verdict == doc["judged"]["verdict"], got.line()


@pytest.mark.parametrize("name", RECORDINGS)
def test_a_wrong_path_misses(name):
    doc = _load(name)
    lo, hi = window_ms(doc)
    d = windows.delay_ms(doc["links"], doc["writer_region"], doc["reader_region"])[0]
    for wrong in ((-1.0, 1.0), (lo + d, hi + d)):  # visible at the ack; a hop too many
        got = _judge(doc, *wrong)
        assert not got.median_inside, got.line()


def test_a_miss_larger_than_any_noise_the_run_measured_is_missed_not_inconclusive():
    """A write 251.6 ms past the window while the machine added at most 10 ms to any one
    measurement is a miss no noise explains ("missed"), even on a noisy run (p99 over what the
    window can bear); one 8 ms past it on that run is "inconclusive"."""
    def judged(miss_ms: float) -> V.WindowJudgement:
        return V.WindowJudgement(0.0, 100.0, 20, 50.0, (), ((3, miss_ms, 0.5),),
                                 noise_p99_ms=6.0, bearable_ms=5.0, median_late_ack_ms=50.0,
                                 noise_max_ms=10.0)
    assert judged(251.6).verdict == "missed" and "inconclusive" not in judged(251.6).line()
    assert judged(8.0).verdict == "inconclusive"
    quiet = V.WindowJudgement(0.0, 100.0, 20, 50.0, (), ((3, 8.0, 0.5),), 4.0, 5.0, 50.0, 10.0)
    assert quiet.verdict == "missed"
