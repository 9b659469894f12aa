"""Every grading rule docs/scorecard.md states, one row each, on measurements built by hand
(no run): the colour the rule gives, the rule's words found in the docs, and the cell's
value read as a sentence (its figure with its denominator, no shorthand)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from replicalab.cluster.kinds import Promise
from replicalab.experiments import cells
from replicalab.experiments.promises import sim_rules

DOCS = (Path(__file__).resolve().parents[1] / "docs" / "scorecard.md").read_text()
P = Promise("a promise", "a source")

# --- measurements by hand -------------------------------------------------------------------


def _lat(p99: float, n: int = 50) -> dict[str, Any]:
    return {"p50_ms": p99 / 2, "p99_ms": p99, "p999_ms": p99, "count": n}


def latency(ev: float = 5, cons: float = 5, put: float = 20, cput: float = 20,
            n: int = 50) -> dict[str, Any]:
    one = {"eventual read": _lat(ev, n), "consistent read": _lat(cons, n), "put": _lat(put, n),
           "conditional put": _lat(cput, n)}
    # the slow variant from US-W only: the others meet every goal
    fast = {k: _lat(5, n) for k in one}
    return {"regions": {"US-E": fast, "US-W": one, "EU": fast}, "runs": ["latency"]}


def _variant(label: str, kill: int | None, power: int | None, keeps: bool) -> dict[str, Any]:
    def r(lost: int | None) -> dict[str, Any]:
        return ({"checked": False, "lost": 0, "acknowledged": 40, "complaints": ["no read"]}
                if lost is None else {"checked": True, "lost": lost, "acknowledged": 1000})
    return {"label": label, "keeps_on_kill": keeps, "keeps_on_power_loss": keeps,
            "kill": r(kill), "power_loss": r(power)}


def durability(lab: tuple[int | None, int | None], safe: tuple[int | None, int | None]
               ) -> dict[str, Any]:
    return {"variants": [_variant("appendonly no (the lab's setting)", *lab, keeps=False),
                         _variant("appendfsync always", *safe, keeps=True)],
            "killed": "the primary", "runs": ["d"]}


def _fault(what: dict[str, Any], ev: float | None, cons: float | None, w: float | None,
           recovery_ms: float | None = 12.0) -> dict[str, Any]:
    def x(reads: float | None) -> dict[str, Any]:
        return {"reads": reads, "writes": w, "reads_run": reads, "writes_run": w,
                "writer_region": "US-W", "recovery_ms": recovery_ms}
    label = (f"{what['cut_region']} cut off" if "cut_region" in what
             else f"{what['crashed_role']} n{what['crashed_node']} down")
    return {"fault": label, "region": "US-W", "window": "5s-13s", **what,
            "eventual": x(ev), "consistent": {**x(cons), "writes": w}}


CUT = {"cut_region": "US-W"}
CRASH = {"crashed_node": 0, "crashed_role": "leader"}


def availability(*faults: dict[str, Any]) -> dict[str, Any]:
    return {"faults": list(faults), "runs": ["a"]}


def consistency(ev_stale: float = 0.0, cons_stale: float = 0.0, ryw: int = 0,
                lin_ev: Any = True, lin_cons: Any = True) -> dict[str, Any]:
    def reg(valid: Any) -> dict[str, Any]:
        return {"valid": valid, "ops": 300, "explanation": "" if valid else "a read of 3"}
    return {"eventual": {"reads": 200, "stale_fraction": ev_stale, "stale_window_ms": 30.0},
            "consistent": {"reads": 200, "stale_fraction": cons_stale, "stale_window_ms": None},
            "session": {"region": "US-W", "ryw_reads": 40, "ryw_violations": ryw,
                        "mr_pairs": 39, "mr_violations": 0},
            "register_eventual": reg(lin_ev), "register_consistent": reg(lin_cons),
            "runs": ["c"]}


def geography(local_everywhere: bool) -> dict[str, Any]:
    eu = 1.0 if local_everywhere else 200.0  # p50 100 ms: over half EU's nearest RTT
    return {"regions": {r: {"eventual read": _lat(1.0 if r != "EU" else eu),
                            "put": _lat(160.0)} for r in ("US-E", "US-W", "EU")},
            "runs": ["latency"]}


NEAR = {"US-E": 80.0, "US-W": 83.0, "EU": 93.0}

# --- the documented rules ---------------------------------------------------------------------

Case = tuple[str, str, Callable[[], cells.Cell], str]
CASES: list[Case] = [
    # (property, the rule's words in docs/scorecard.md, the cell, the colour)
    ("latency", "green: every p99 under seed 001's goals",
     lambda: cells.latency_cell("s", latency(), P), "green"),
    ("latency", "yellow: only consistent reads miss",
     lambda: cells.latency_cell("s", latency(cons=120), P), "yellow"),
    ("latency", "red: an eventual read or a write misses",
     lambda: cells.latency_cell("s", latency(ev=60), P), "red"),
    ("latency", "red: an eventual read or a write misses",
     lambda: cells.latency_cell("s", latency(cput=600), P), "red"),
    ("durability", "green: nothing lost anywhere",
     lambda: cells.durability_cell("s", durability((0, 0), (0, 0)), P), "green"),
    ("durability", "yellow: only settings documented to lose writes lost some",
     lambda: cells.durability_cell("s", durability((1000, 1000), (0, 0)), P), "yellow"),
    ("durability", "(or did not come back)",
     lambda: cells.durability_cell("s", durability((0, None), (0, 0)), P), "yellow"),
    ("durability", "red: a setting documented to keep acknowledged writes lost some",
     lambda: cells.durability_cell("s", durability((0, 0), (0, 3)), P), "red"),
    ("durability", "or did not come back, so nothing could be read",
     lambda: cells.durability_cell("s", durability((0, 0), (None, 0)), P), "red"),
    ("availability", "green: reads and writes served at least 95 % of the time",
     lambda: cells.availability_cell("s", availability(_fault(CUT, 1, 0.97, 0.99),
                                                       _fault(CRASH, 1, 1, 0.96)), P, True),
     "green"),
    ("availability", "red: eventual reads in a cut-off region served under 50 %",
     lambda: cells.availability_cell("s", availability(_fault(CUT, 0.3, 0, 0)), P, True),
     "red"),
    ("availability", "yellow: anything else under 95 %",
     lambda: cells.availability_cell("s", availability(_fault(CUT, 1, 0, 0)), P, True),
     "yellow"),
    # the same outage where the store does not promise local reads (sim://quorum with r=2)
    ("availability", "where the store promises local reads",
     lambda: cells.availability_cell("s", availability(_fault(CUT, 0.024, 0.024, 0)), P,
                                     sim_rules({"scheme": "quorum", "n": 3, "r": 2},
                                               ("US-E", "US-W", "EU")).local_reads),
     "yellow"),
    # a crash is not a cut: eventual reads lost to a crash are an announced outage
    ("availability", "yellow: anything else under 95 %",
     lambda: cells.availability_cell("s", availability(_fault(CRASH, 0.2, 0.2, 0.2)), P, True),
     "yellow"),
    ("consistency", "green: everything fresh and linearizable",
     lambda: cells.consistency_cell("s", consistency(), P, True), "green"),
    ("consistency", "a consistent read counted stale because it missed a write still in "
     "flight does not count",
     lambda: cells.consistency_cell("s", consistency(cons_stale=0.04), P, True), "green"),
    ("consistency", "or eventual reads stale, not linearizable or breaking a session",
     lambda: cells.consistency_cell("s", consistency(ev_stale=0.1, lin_ev=False), P, True),
     "yellow"),
    ("consistency", "or eventual reads stale, not linearizable or breaking a session",
     lambda: cells.consistency_cell("s", consistency(ryw=2), P, False), "yellow"),
    ("consistency", "yellow: consistent reads not shown linearizable where nothing "
     "promised it", lambda: cells.consistency_cell("s", consistency(lin_cons=False), P, False),
     "yellow"),
    ("consistency", "(or the check did not decide)",
     lambda: cells.consistency_cell("s", consistency(lin_cons="unknown"), P, True), "yellow"),
    ("consistency", "red: consistent reads promised linearizable",
     lambda: cells.consistency_cell("s", consistency(lin_cons=False), P, True), "red"),
    ("geography", "green: eventual reads local from every region",
     lambda: cells.geography_cell("s", geography(True), ("US-E", "US-W", "EU"), NEAR, P),
     "green"),
    ("geography", "yellow otherwise",
     lambda: cells.geography_cell("s", geography(False), ("US-E", "US-W", "EU"), NEAR, P),
     "yellow"),
]


def _row(prop: str) -> str:
    # the docs' table row of ``prop`` (its colour rule is the last column)
    row = re.search(rf"^\| {prop} \|.*$", DOCS, re.M)
    assert row, f"docs/scorecard.md has no row for {prop}"
    return " ".join(row[0].split())


@pytest.mark.parametrize(("prop", "rule", "make", "grade"), CASES,
                         ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_each_documented_rule_gives_its_colour(prop: str, rule: str,
                                                make: Callable[[], cells.Cell], grade: str):
    assert " ".join(rule.split()) in _row(prop), f"the rule {rule!r} is not in the docs"
    cell = make()
    assert (cell.prop, cell.grade) == (prop, grade), (cell.value, cell.caveat)


@pytest.mark.parametrize("prop", ["latency", "durability", "availability", "consistency",
                                  "geography"])
def test_every_colour_a_rule_names_is_tested(prop: str):
    row = _row(prop).split("|")[-2]
    named = set(re.findall(r"\b(green|yellow|red)\b", row))
    tested = {c[3] for c in CASES if c[0] == prop}
    assert named and named <= tested


# --- cells read as sentences ------------------------------------------------------------------

SHORTHAND = re.compile(r"\blin (yes|no)\b|\br \d|\bw \d|\bn/a\b|leader/primary|cut-off:|"
                       r"\bkill \d|\bpower \d|\bx\d\b")


@pytest.mark.parametrize(("make", "needles"), [
    (lambda: cells.latency_cell("s", latency(), P),
     ["from 3 regions (US-E, US-W, EU)", "50 operations of each kind", "goal under 50 ms"]),
    (lambda: cells.durability_cell("s", durability((1000, None), (0, 0)), P),
     ["a kill -9 of the primary lost 1,000 of 1,000 acknowledged writes",
      "did not come back, so none of 40 acknowledged writes could be read",
      "appendfsync always: a kill -9 of the primary lost 0 of 1,000"]),
    (lambda: cells.availability_cell("s", availability(
        _fault(CUT, 1, 0, 0, recovery_ms=None), _fault(CRASH, 1, 0.5, 0.25)), P, True),
     ["while US-W was cut off (8 s): eventual reads in US-W served 100% of the time",
      "consistent reads 0%", "while leader n0 was down (8 s)", "writes from US-W 25.0%"]),
    (lambda: cells.consistency_cell("s", consistency(ev_stale=0.095, lin_ev=False), P, True),
     ["19 of 200 stale (9.5%) for up to 30 ms after a write", "none of 200 stale",
      "eventual reads NOT linearizable, consistent reads linearizable"]),
    (lambda: cells.geography_cell("s", geography(False), ("US-E", "US-W", "EU"), NEAR, P),
     ["one replica in each of US-E, US-W, EU", "served locally in 2 of 3 regions",
      "round trips to the nearest other region"]),
], ids=["latency", "durability", "availability", "consistency", "geography"])
def test_a_cell_reads_as_a_sentence_with_figure_and_denominator(
        make: Callable[[], cells.Cell], needles: list[str]):
    cell = make()
    for needle in needles:
        assert needle in cell.value, cell.value
    assert not SHORTHAND.search(cell.value), cell.value


def test_recovery_is_said_in_words():
    cell = cells.availability_cell("s", availability(
        _fault(CUT, 1, 0, 0, recovery_ms=None), _fault(CRASH, 1, 0, 0, recovery_ms=0),
        _fault(CRASH, 1, 0, 0, recovery_ms=450.0)), P, True)
    assert "a client was still not served again when the run ended" in cell.details[0]
    assert "no client failed, so there was nothing to recover from" in cell.details[1]
    assert "every client was served again 450 ms after the heal" in cell.details[2]
    assert not any("n/a" in d for d in cell.details)


@pytest.mark.parametrize(("params", "regions", "local", "role", "leaderless"), [
    ({"scheme": "primary", "nodes": {"n0": "US-E", "n1": "US-W", "n2": "EU"}},
     ("US-E", "US-W", "EU"), True, "primary", False),
    ({"scheme": "primary", "nodes": {"n0": "US-E", "n1": "US-W"}}, ("US-E", "US-W", "EU"),
     False, "primary", False),
    ({"scheme": "quorum", "n": 3, "r": 1}, ("US-E", "US-W", "EU"), True, "replica", True),
    ({"scheme": "quorum", "n": 3, "r": 2}, ("US-E", "US-W", "EU"), False, "replica", True),
    ({"scheme": "simpledb"}, ("local",), False, "primary", False),
])
def test_a_simulated_scheme_promises_what_its_rules_say(params, regions, local, role,
                                                        leaderless):
    rules = sim_rules(params, regions)
    assert (rules.local_reads, rules.leader_role, rules.leaderless) == (local, role, leaderless)


# --- headlines: what the chart's cell shows ---------------------------------------------------

@pytest.mark.parametrize(("prop", "rule", "make", "grade"), CASES,
                         ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(CASES)])
def test_every_cell_has_a_headline_of_at_most_twelve_words(prop: str, rule: str,
                                                            make: Callable[[], cells.Cell],
                                                            grade: str):
    cell = make()
    assert cell.headline and len(cell.headline.split()) <= cells.HEADLINE_WORDS, cell.headline
    assert cell.headline != cell.value  # the sentences are the evidence's


def _two_misses() -> dict[str, Any]:
    # issue 40's Redis row: EU's consistent read is the slowest read (95 ms, a miss that
    # alone would be yellow); the red comes from the eventual reads in US-E (85 ms)
    m = latency()
    m["regions"]["EU"]["consistent read"] = _lat(95)
    m["regions"]["US-E"]["eventual read"] = _lat(85)
    return m


@pytest.mark.parametrize(("make", "grade", "headline"), [
    (lambda: cells.latency_cell("s", _two_misses(), P), "red",
     "eventual reads from US-E: p99 85 ms, goal 50 ms"),
    (lambda: cells.latency_cell("s", latency(cons=120), P), "yellow",
     "consistent reads from US-W: p99 120 ms, goal 50 ms"),
    (lambda: cells.latency_cell("s", latency(cput=600), P), "red",
     "conditional puts from US-W: p99 600 ms, goal 500 ms"),
    (lambda: cells.durability_cell("s", durability((0, 0), (0, 3)), P), "red",
     "appendfsync always: power loss lost 3 of 1,000 writes"),
    (lambda: cells.durability_cell("s", durability((0, 0), (None, 0)), P), "red",
     "appendfsync always: no restart after kill -9"),
    (lambda: cells.durability_cell("s", durability((1000, 20), (0, 0)), P), "yellow",
     "appendonly no: kill -9 lost 1,000 of 1,000 writes, as documented"),
    (lambda: cells.availability_cell("s", availability(_fault(CUT, 0.3, 0, 0)), P, True),
     "red", "eventual reads in US-W served 30.0% while US-W cut off"),
    (lambda: cells.availability_cell("s", availability(_fault(CUT, 1, 0.6, 0.8),
                                                       _fault(CRASH, 1, 1, 0.4)), P, True),
     "yellow", "writes from US-W served 40.0% while leader n0 down"),
    (lambda: cells.consistency_cell("s", consistency(lin_cons=False), P, True), "red",
     "consistent reads NOT linearizable, though promised"),
    (lambda: cells.consistency_cell("s", consistency(ev_stale=0.095, lin_ev=False), P, True),
     "yellow", "eventual reads in US-W: 9.5% stale, up to 30 ms"),
    (lambda: cells.geography_cell("s", geography(False), ("US-E", "US-W", "EU"), NEAR, P),
     "yellow", "eventual reads served locally in 2 of 3 regions"),
], ids=["latency-red", "latency-yellow", "latency-write", "durability-red",
        "durability-no-restart", "durability-yellow", "availability-red",
        "availability-yellow", "consistency-red", "consistency-yellow", "geography"])
def test_the_headline_names_the_figure_that_decides_the_grade(
        make: Callable[[], cells.Cell], grade: str, headline: str):
    cell = make()
    assert (cell.grade, cell.headline) == (grade, headline)
