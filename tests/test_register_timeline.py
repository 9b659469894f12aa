"""The register workload's timeline: linearization points, the neighbourhood a long history
is cut to, and the SVG the report draws (hand-made results; no checker needed)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from replicalab.report.linearizability import timeline_svg
from replicalab.workloads.register_check import (
    TimelineOp,
    linearization_points,
    neighbourhood,
    part_results,
    short_value,
    timeline,
)

SVG = "{http://www.w3.org/2000/svg}"


def _op(row, process, f, value, inv, comp, **kw):
    return TimelineOp(row=row, process=process, f=f, type=kw.pop("type", "ok"), value=value,
                      expect=kw.pop("expect", None), invoke_ms=inv, complete_ms=comp, **kw)


def test_points_follow_the_order_inside_each_interval():
    inv = [0, 1, 5, 2]
    comp = [10, 3, 6, None]
    pts = linearization_points([1, 0, 3, 2], inv, comp)
    assert pts == {1: 1, 0: 1, 3: 2, 2: 5}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 200)), min_size=1, max_size=30),
       st.randoms(use_true_random=False))
def test_points_of_a_legal_order_lie_in_their_intervals_and_never_go_back(spans, rnd):
    inv = [a for a, _ in spans]
    comp = [a + d for a, d in spans]
    # a legal order: repeatedly take any op whose invoke is not after every remaining
    # op's completion (no remaining op must precede it in real time)
    left = set(range(len(spans)))
    order = []
    while left:
        first_end = min(comp[j] for j in left)
        cands = sorted(j for j in left if inv[j] <= first_end)
        j = rnd.choice(cands)
        order.append(j)
        left.remove(j)
    pts = linearization_points(order, inv, comp)
    assert all(inv[i] <= pts[i] <= comp[i] for i in order)
    assert [pts[i] for i in order] == sorted(pts[i] for i in order)


def test_neighbourhood_keeps_the_focus_and_what_overlaps_it_first():
    inv = [float(10 * i) for i in range(100)]
    comp = [t + 5 for t in inv]
    comp[50] = 560.0  # a long op overlapping the next five
    keep = neighbourhood(inv, comp, [50], 7)
    assert 50 in keep and len(keep) == 7
    assert keep == sorted(keep, key=lambda i: inv[i])
    # ops 51..55 overlap op 50's span [500, 560]; they come before any op outside it
    assert set(range(51, 56)) <= set(keep)
    # without focus: the first ops
    assert neighbourhood(inv, comp, [], 3) == [0, 1, 2]
    # an info op (never completes) as the only focus: the ops nearest its invoke
    comp2 = list(comp)
    comp2[10] = None
    assert neighbourhood(inv, comp2, [10], 4) == [8, 9, 10, 11]


def test_timeline_of_a_long_history_is_small():
    ops = [_op(i, i % 4, "write", f"{i}.{i % 4}@0", float(i), float(i) + 2.5)
           for i in range(5000)]
    ops[2500] = _op(2500, 0, "read", "1.1@0", 2500.0, 2501.0, offending=True)
    tl = timeline("register/x-k0/v", False, ops, 40)
    assert tl["ops_total"] == 5000 and tl["ops_shown"] == 40
    rows = [o["row"] for o in tl["ops"]]
    assert 2500 in rows and max(rows) - min(rows) < 60
    svg = timeline_svg(tl)
    assert len(svg) < 40 * 1200
    ET.fromstring(svg)


def test_svg_escapes_values_and_marks_offenders_points_and_faults():
    ops = [
        _op(0, 0, "write", "<script>alert(1)</script>", 0.0, 10.0, lin_ms=0.0, lin_rank=0),
        _op(1, 1, "read", "1.0@0", 12.0, 14.0, lin_ms=12.0, lin_rank=1),
        _op(2, 2, "cas", "2.2@0", 15.0, None, type="info", expect="1.0@0"),
        _op(3, 1, "read", None, 20.0, 22.0, offending=True),
        _op(4, -2, "read", "2.2@0", 30.0, 31.0, type="fail"),
    ]
    tl = timeline("register/<k>/v", False, ops, 10)
    svg = timeline_svg(tl, [{"start_ms": 13.0, "end_ms": 25.0, "label": "partition n1"},
                            {"start_ms": 900.0, "end_ms": 990.0, "label": "crash n0"}])
    root = ET.fromstring(svg)  # well-formed
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    groups = [g for g in root.findall(f"{SVG}g") if "op" in g.get("class").split()]
    assert len(groups) == 5
    offending = [g for g in groups if "offending" in g.get("class")]
    assert [g.get("data-row") for g in offending] == ["3"]
    assert len(root.findall(f"{SVG}circle[@class='lin-point']")) == 2
    assert root.find(f"{SVG}polyline") is not None
    shaded = root.findall(f"{SVG}rect[@class='nemesis']")
    assert len(shaded) == 1  # the crash lies outside the window
    titles = " ".join(t.text or "" for t in root.iter(f"{SVG}title"))
    assert "never (unknown outcome)" in titles and "cas 1.0@0 -> 2.2@0" in titles
    dashed = [r for r in root.iter(f"{SVG}rect") if r.get("stroke-dasharray")]
    assert len(dashed) == 1  # the info cas runs on to the edge
    lanes = re.findall(r">(p\d+|final)</text>", svg)
    assert lanes == ["p0", "p1", "p2", "final"]


def test_events_are_evenly_spaced_and_labels_that_would_overlap_are_left_out():
    # one lane, back to back: each op gets two event slots (36 px), room for "W 9.0" but
    # not for "W 123.0", whose label is left to the tooltip
    ops = [_op(i, 0, "write", f"{i}.0@0", 10.0 * i, 10.0 * i + 0.001) for i in range(200)]
    svg = timeline_svg(timeline("k", True, ops, 200))
    groups = re.findall(r'<g class="op"[^>]*>.*?</g>', svg)
    assert len(groups) == 200
    labelled = [i for i, g in enumerate(groups) if re.search(r">W [^<]+</text>", g)]
    assert labelled == [*range(10), 199]  # the last one has the lane's end to itself
    widths = {float(w) for w in re.findall(r'<rect x="[^"]+" y="[^"]+" width="([^"]+)" '
                                           r'height="12"', svg)}
    assert widths == {18.0}  # a 1 µs op is as wide as a long one: one slot invoke to end
    assert 'style="width:7298px;max-width:none"' in svg  # scrolls instead of squeezing


def test_short_value():
    assert short_value("12.3@456") == "12.3" and short_value(None) == "nil"
    assert short_value("foreign") == "foreign"


def register_results(**overrides) -> dict:
    """Return a hand-made results dict of a register run with one non-linearizable key."""
    ops = [
        _op(0, 0, "write", "1.0@5", 0.0, 2.0, lin_ms=0.0),
        _op(1, 1, "write", "1.1@9", 3.0, 5.0, lin_ms=3.0, offending=True),
        _op(2, 2, "read", "1.0@5", 6.0, 6.5, offending=True),
        _op(3, 0, "cas", "2.0@7", 7.0, 9.0, expect="1.1@9", lin_ms=7.0),
    ]
    tl = timeline("register/a-k0/v", False, ops, 50)
    explanation = ("process 2 read 1.0@5 at 6.0 ms although the write of 1.1@9 completed at "
                   "5.0 ms <b>after</b> the write of 1.0@5 completed")
    results = {
        "schema_version": 1, "workload": "register", "store": "sim://primary?regions=dc3",
        "consistency": "eventual", "seed": 1, "duration_s": 10.0,
        "ops": {"reads": 1, "writes": 3, "failed": 0, "info": 0},
        "config": {"clients": 3, "mix": "read=50,write=25,cas=25"},
        "latency": {}, "faults": [{"start_ms": 4.0, "end_ms": 8.0, "label": "partition n2"}],
        "notes": [], "availability": {"t_s": []}, "lost_writes": {"checked": False},
        "linearizability": {
            "model": "kv", "valid": False, "keys": 2, "ops": 9, "keys_not_linearizable": 1,
            "keys_unknown": 0, "timeout_s": 60.0, "parts_left_out": 0,
            "parts": [{"key": "register/a-k0/v", "valid": False, "ops": 4,
                       "counterexample": [o for o in tl["ops"] if o["offending"]],
                       "explanation": explanation},
                      {"key": "register/a-k1/v", "valid": True, "ops": 5,
                       "counterexample": None, "explanation": None}]},
        "timeline": [tl],
    }
    return {**results, **overrides}


def test_report_section_of_a_register_run(tmp_path):
    from replicalab.report import render_report

    text = render_report(register_results(), tmp_path).read_text()
    page = text.split('<script type="application/json"')[0]  # the markup, not the data
    assert "Linearizability: not linearizable" in page
    assert "register/a-k0/v: not linearizable" in page
    assert "&lt;b&gt;after&lt;/b&gt;" in page and "<b>after" not in page
    assert page.count('<figure id="fig-timeline-1"') == 1
    assert 'class="op offending"' in page and 'class="nemesis"' in page
    assert "Minimal counterexample on register/a-k0/v" in page


@dataclass(frozen=True)
class Op:
    """An operation as the checker's fixed API describes it (``LinOp``'s fields)."""

    index: int
    process: int
    f: str
    key: str | None
    value: object
    outcome: str
    invoke_ns: int
    complete_ns: int


def test_checker_ops_become_timeline_ops_with_points_and_the_counterexample():
    ms = 1_000_000
    ops = [Op(10, 0, "write", "k", "1.0@0", "ok", 100 * ms, 102 * ms),
           Op(11, 1, "cas", "k", ("1.0@0", "2.1@0"), "info", 103 * ms, 105 * ms),
           Op(12, 2, "read", "k", "1.0@0", "ok", 106 * ms, 107 * ms),
           Op(13, 0, "write", "k", "3.0@0", "fail", 108 * ms, 109 * ms)]
    tops = part_results(ops, linearization=[10, 12], counterexample=[11, 12],
                        t0_ns=100 * ms)
    assert [o.row for o in tops] == [10, 11, 12, 13]
    assert tops[1].f == "cas" and (tops[1].expect, tops[1].value) == ("1.0@0", "2.1@0")
    assert tops[1].complete_ms is None and tops[1].type == "info"  # may take effect later
    assert tops[3].complete_ms == 9.0 and tops[3].type == "fail"
    assert [o.lin_ms for o in tops] == [0.0, None, 6.0, None]
    assert [o.offending for o in tops] == [False, True, True, False]
