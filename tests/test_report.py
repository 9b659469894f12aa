"""Unit tests of the HTML/PNG report (no browser needed)."""

from __future__ import annotations

import html
import io
import json
import math
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from replicalab.checkers.stats import wilson
from replicalab.report import render_report
from replicalab.report.plots import freshness_xmax_ms, periods_figure, staleness_figure

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MALICIOUS = "sim://x?<script>alert(1)</script>"
WORKLOADS = ("staleness", "monotonic-writes", "inter-element")
FIGURE = re.compile(r'<figure id="([^"]+)">(.*?)</figure>', re.DOTALL)


def _wilson(fresh: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lo, hi = wilson(fresh, total)
    return fresh / np.maximum(total, 1), lo, hi


def _staleness(rng: np.random.Generator, reads_per_ms: float) -> dict[str, Any]:
    """SimpleDB-like freshness: ~33 % fresh until 450 ms, fresh after ~510 ms, rare late stale."""
    t = np.arange(3000.0)
    p_true = np.interp(t, [0, 450, 510, 1000, 3000], [0.334, 0.334, 0.99, 0.999, 1.0])
    total = rng.poisson(reads_per_ms, t.size)
    fresh = rng.binomial(total, p_true)
    # A few reads long after the write (network jitter), one of them stale.
    t = np.append(t, [4200.0, 9000.0])
    total, fresh = np.append(total, [2, 1]), np.append(fresh, [1, 1])
    p, lo, hi = _wilson(fresh, total)

    def by_range(a: float, b: float) -> dict[str, Any]:
        sel = (t >= a) & (t < b)
        f, n = int(fresh[sel].sum()), int(total[sel].sum())
        rp, rlo, rhi = _wilson(np.array([f]), np.array([n]))
        return {
            "from_ms": a,
            "to_ms": b,
            "fresh": f,
            "total": n,
            "p": rp[0],
            "lo": rlo[0],
            "hi": rhi[0],
        }

    starts = np.arange(24) * 300.0
    first = rng.normal(516.0, 13.0, starts.size).tolist()
    last = (600 + rng.exponential(150.0, starts.size)).tolist()
    first[5] = last[5] = None
    stale = int(total.sum() - fresh.sum())
    return {
        "freshness": {
            "bucket_ms": 1,
            "t_ms": t.tolist(),
            "fresh": fresh.tolist(),
            "total": total.tolist(),
            "p": p.tolist(),
            "lo": lo.tolist(),
            "hi": hi.tolist(),
        },
        "fresh_by_range": [by_range(0, 450), by_range(450, 500), by_range(500, 1000)],
        "periods": {
            "period_s": 300.0,
            "start_s": starts.tolist(),
            "first_ge_99_ms": first,
            "last_lt_100_ms": last,
            "first_ge_99_median_ms": 516.17,
            "first_ge_99_cv": 0.0258,
            "last_lt_100_median_ms": 702.5,
            "last_lt_100_cv": 0.21,
        },
        "k_staleness": {"k": [0, 1, 2], "count": [int(fresh.sum()), stale - 4, 4]},
        "read_your_writes": {
            "applicable": True,
            "reads": 15000,
            "violations": 3365,
            "fraction": 0.2243,
        },
        "successive_reads": {
            "window_ms": [0, 450],
            "pairs": 475575,
            "stale_stale": 0.3994,
            "stale_fresh": 0.2108,
            "fresh_stale": 0.2336,
            "fresh_fresh": 0.1563,
            "counts": {
                "stale_stale": 189926,
                "stale_fresh": 100194,
                "fresh_stale": 111118,
                "fresh_fresh": 74337,
            },
            "pearson": 0.0281,
        },
    }


def _curve(rng: np.random.Generator, v2: np.ndarray) -> dict[str, Any]:
    t = np.arange(0.0, 1000.0, 10.0)
    v0 = np.where(t < 100, 0.02, 0.0005)
    v2 = np.minimum(v2, 1 - v0)
    return {
        "t_ms": t.tolist(),
        "total": rng.poisson(150, t.size).tolist(),
        "versions": {"v0": v0.tolist(), "v1": (1 - v0 - v2).tolist(), "v2": v2.tolist()},
    }


def _monotonic_writes(rng: np.random.Generator) -> dict[str, Any]:
    t = np.arange(0.0, 1000.0, 10.0)
    return {
        "variant": "two-then-one",
        "window_ms": [50, 400],
        "curves": {
            "A1": _curve(rng, np.interp(t, [0, 450, 520, 1000], [0.335, 0.335, 1.0, 1.0])),
            "A<2>": _curve(rng, np.zeros(t.size)),
        },
        "version_fraction": {
            "A1": {"v0": 0.00097, "v1": 0.66339, "v2": 0.33564},
            "A<2>": {"v0": 0.0008, "v1": 0.9992},
        },
    }


def _inter_element() -> dict[str, Any]:
    def entry(placement: str, write: str, read: str, abcd: list[float] | None) -> dict[str, Any]:
        fractions = dict(zip("ABCD", abcd, strict=True)) if abcd else None
        counts = {k: round(v * 20000) for k, v in fractions.items()} if fractions else None
        return {
            "placement": placement,
            "write": write,
            "read": read,
            "abcd": fractions,
            "counts": counts,
        }

    table3 = [
        entry("same-item", "two-calls", "two-single", [0.34459, 0.65142, 0.00138, 0.00262]),
        entry("same-item", "two-calls", "one-multi", [0.33593, 0.66246, 0.0, 0.00161]),
        entry("same-item", "one-call", "two-single", [0.1205, 0.2182, 0.22554, 0.43576]),
        entry("same-item", "one-call", "one-multi", [0.33859, 0.0, 0.0, 0.66141]),
        entry("diff-domains", "two-calls", "two-single", [0.14097, 0.24882, 0.2074, 0.40282]),
        entry("diff-domains", "two-calls", "one-multi", None),
    ]
    current = table3[2]
    return {
        "combination": {k: current[k] for k in ("placement", "write", "read")},
        "window_ms": [0, 450],
        "abcd": current["abcd"],
        "counts": current["counts"],
        "table3": table3,
    }


def make_results(
    workload: str = "staleness", *, reads_per_ms: float = 40.0, **overrides: Any
) -> dict:
    """Return a plausible results dict for ``workload`` (seeded), with ``overrides`` applied."""
    rng = np.random.default_rng(2010)
    specific = {
        "staleness": lambda: _staleness(rng, reads_per_ms),
        "monotonic-writes": lambda: _monotonic_writes(rng),
        "inter-element": _inter_element,
    }[workload]()
    results = {
        "schema_version": 1,
        "workload": workload,
        "store": "sim://simpledb?replicas=3",
        "consistency": "eventual",
        "seed": 42,
        "duration_s": 7200.0,
        "ops": {"reads": 120000, "writes": 2400, "failed": 12, "info": 3},
        "latency": {
            "read/eventual": {
                "count": 120000,
                "mean_ms": 22.4,
                "p50_ms": 21.0,
                "p90_ms": 27.5,
                "p99_ms": 48.2,
                "p999_ms": 130.7,
                "max_ms": 410.0,
            },
            "write/none": {
                "count": 2400,
                "mean_ms": 110.3,
                "p50_ms": 104.0,
                "p90_ms": 131.0,
                "p99_ms": 220.9,
                "p999_ms": 480.1,
                "max_ms": 902.4,
            },
        },
        "faults": [
            {"start_ms": 1_800_000.0, "end_ms": 2_400_000.0, "label": "partition n1 | n2,n3"}
        ],
        "notes": ["variant 'three' skipped: store has fewer than 3 attributes"],
        **specific,
    }
    results.update(overrides)
    return results


def render(tmp_path: Path, results: dict) -> str:
    return render_report(results, tmp_path).read_text(encoding="utf-8")


Rendered = Callable[..., tuple[str, Path]]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Rendered:
    """Return ``get(workload)`` -> (report text, run dir), rendering each default results once."""
    cache: dict[str, tuple[str, Path]] = {}

    def get(workload: str = "staleness") -> tuple[str, Path]:
        if workload not in cache:
            run_dir = tmp_path_factory.mktemp(workload)
            cache[workload] = (render(run_dir, make_results(workload)), run_dir)
        return cache[workload]

    return get


def figures(page: str) -> dict[str, str]:
    return dict(FIGURE.findall(page))


def outside_json(page: str) -> str:
    """Return the page without the embedded results (where raw ``<`` is inert script data)."""
    return re.sub(r'<script type="application/json".*?</script>', "", page, flags=re.S)


def embedded_json(page: str) -> Any:
    match = re.search(
        r'<script type="application/json" id="results-data">(.*?)</script>', page, re.S
    )
    assert match, "results-data script missing"
    return json.loads(match[1])


def test_render_report_writes_report_html_and_returns_its_path(tmp_path: Path) -> None:
    out = render_report(make_results(), tmp_path)
    assert out == tmp_path / "report.html"
    assert out.is_file()
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_staleness_report_embeds_inline_svg_staleness_figure(rendered: Rendered) -> None:
    page = rendered()[0]
    fig = figures(page)["fig-staleness"]
    assert fig.startswith("<svg")
    assert "<path" in fig
    assert "<figcaption>" in fig
    assert "<?xml" not in page
    assert "<!DOCTYPE svg" not in page


@pytest.mark.parametrize("workload", WORKLOADS)
def test_report_references_nothing_on_the_network(rendered: Rendered, workload: str) -> None:
    page = rendered(workload)[0].lower()
    for needle in (
        'src="http',
        "src='http",
        'href="http',
        "href='http",
        "<link",
        "@import",
        "url(http",
    ):
        assert needle not in page, needle
    assert "<script src" not in page
    assert "<style>" in page


@pytest.mark.parametrize("workload", WORKLOADS)
def test_store_derived_strings_are_html_escaped(tmp_path: Path, workload: str) -> None:
    evil_note = "error from node <img src=x onerror=alert(2)>"
    page = render(
        tmp_path,
        make_results(
            workload,
            store=MALICIOUS,
            notes=[evil_note],
            faults=[{"start_ms": 0.0, "end_ms": 10.0, "label": "<b>crash</b>"}],
        ),
    )
    markup = outside_json(page)
    assert html.escape(MALICIOUS) in markup
    assert MALICIOUS not in page
    assert html.escape(evil_note) in markup
    assert "<img" not in markup
    assert html.escape("<b>crash</b>") in markup
    assert "<b>" not in markup


def test_attribute_names_are_escaped_in_captions_and_tables(rendered: Rendered) -> None:
    page = rendered("monotonic-writes")[0]
    assert "A&lt;2&gt;" in page
    assert "A<2>" not in outside_json(page)


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_figure_has_a_valid_png(rendered: Rendered, workload: str) -> None:
    page, run_dir = rendered(workload)
    ids = figures(page)
    assert ids
    pngs = {p.stem: p for p in (run_dir / "figures").glob("*.png")}
    assert set(pngs) == {fig_id.removeprefix("fig-") for fig_id in ids}
    for png in pngs.values():
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC), png
        assert len(data) > 1000, png


@pytest.mark.parametrize("workload", WORKLOADS)
def test_every_figure_has_svg_and_caption_and_ids_are_unique(
    rendered: Rendered, workload: str
) -> None:
    page = rendered(workload)[0]
    for fig_id, body in figures(page).items():
        assert body.startswith("<svg"), fig_id
        assert "<figcaption>" in body, fig_id
    duplicates = [i for i, n in Counter(re.findall(r'\bid="([^"]+)"', page)).items() if n > 1]
    assert duplicates == []


ODD_NOTES = ["</script><script>alert(3)</script>", "<!--<script>", "skipped A", "skipped B"]
EXTRA_RANGE = {"from_ms": 0, "to_ms": 450, "fresh": 168908, "total": 505821, "p": 0.33393,
               "lo": 0.3326, "hi": 0.3352}


@pytest.fixture(scope="module")
def odd(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str]:
    """(results, report text) of one run with every edge the tests below look at: notes
    that try to end the script, a NaN and an infinity, a password in the store URL, Table
    1's [0, 450) row, read-your-writes not applicable. (One render: each costs over a
    second of matplotlib; each test asserts its own edge.)"""
    results = make_results(notes=ODD_NOTES, store="redis://app:s3cr3t@127.0.0.1:6379/0")
    results["periods"]["first_ge_99_cv"] = math.nan
    results["fresh_by_range"][-1]["to_ms"] = math.inf
    results["fresh_by_range"].append(EXTRA_RANGE)
    results["read_your_writes"] = {"applicable": False, "reads": 0, "violations": 0,
                                   "fraction": 0.0}
    return results, render(tmp_path_factory.mktemp("odd"), results)


def test_results_json_is_embedded_escaped_and_round_trips(odd: tuple[dict, str]) -> None:
    results, page = odd
    assert "<\\/script>" in page
    assert "<!--<script>" not in page
    assert embedded_json(page)["notes"] == results["notes"]
    assert (
        embedded_json(page)["fresh_by_range"][0]["total"] == results["fresh_by_range"][0]["total"]
    )


def test_non_finite_numbers_become_null_in_embedded_json(odd: tuple[dict, str]) -> None:
    data = embedded_json(odd[1])
    assert data["periods"]["first_ge_99_cv"] is None
    assert data["fresh_by_range"][-2]["to_ms"] is None
    assert "[500, ∞)" in odd[1]


def test_store_password_is_redacted(odd: tuple[dict, str]) -> None:
    assert "s3cr3t" not in odd[1]
    assert "redis://app:***@127.0.0.1:6379/0" in odd[1]


def test_header_summarises_the_run(rendered: Rendered) -> None:
    page = rendered()[0]
    summary = page.split("</dl>")[0]
    for text in (
        "staleness",
        "sim://simpledb?replicas=3",
        "eventual",
        "42",
        "7,200 s allowed",  # results saved before runs recorded ran_s: the time asked
        "122,415: 120,000 reads, 2,400 writes, 12 failed, 3 indeterminate",
    ):
        assert text in summary, text


def test_fresh_by_range_table_shows_percent_and_counts_like_table_1(odd: tuple[dict, str]) -> None:
    assert "[0, 450)" in odd[1]
    assert "33.39% (168,908/505,821)" in odd[1]


def test_successive_reads_table_and_monotonic_read_violations(rendered: Rendered) -> None:
    page = rendered()[0]
    assert "39.94% (189,926)" in page
    assert "23.36% (111,118)" in page
    assert "Monotonic-read violations (fresh then stale): 23.36% (111,118 of 475,575 pairs)" in page
    assert "0.0281" in page


def test_staleness_report_shows_periods_k_staleness_and_read_your_writes(
    rendered: Rendered,
) -> None:
    page = rendered()[0]
    assert {"fig-staleness", "fig-periods", "fig-k-staleness", "fig-latency"} <= set(figures(page))
    assert "516.2" in page and "0.0258" in page
    assert "3,365 of 15,000 reads (22.430%)" in page


def test_read_your_writes_not_applicable_is_stated(odd: tuple[dict, str]) -> None:
    assert "Not applicable" in odd[1]


def test_monotonic_writes_report_has_one_versions_figure_per_attribute(rendered: Rendered) -> None:
    page, run_dir = rendered("monotonic-writes")
    assert {"fig-versions", "fig-versions-2"} <= set(figures(page))
    assert "66.339%" in page and "0.097%" in page
    assert (run_dir / "figures" / "versions.png").is_file()


def test_inter_element_report_has_abcd_figure_and_table_3_grid(rendered: Rendered) -> None:
    page = rendered("inter-element")[0]
    assert "fig-abcd" in figures(page)
    for meaning in (
        "X and Y both fresh",
        "X fresh, Y stale",
        "X stale, Y fresh",
        "X and Y both stale",
    ):
        assert meaning in page
    assert '<td colspan="4" class="na">N/A</td>' in page
    assert '<td class="num current">12.050</td>' in page
    assert "43.576%" in page


@pytest.mark.parametrize("workload", WORKLOADS)
def test_latency_table_and_figure_are_in_every_report(rendered: Rendered, workload: str) -> None:
    page = rendered(workload)[0]
    assert "fig-latency" in figures(page)
    assert "read/eventual" in page and "write/none" in page
    assert "130.70" in page


def test_notes_are_a_bullet_list(odd: tuple[dict, str]) -> None:
    notes = re.search(r'<ul class="notes">(.*?)</ul>', odd[1])
    assert notes and notes[1].count("<li>") == len(ODD_NOTES)
    assert notes[1].endswith("<li>skipped A</li><li>skipped B</li>")


def test_unknown_workload_still_renders_summary_and_latency(tmp_path: Path) -> None:
    base = make_results()
    page = render(
        tmp_path,
        {k: base[k] for k in base if k not in ("freshness", "periods")} | {"workload": "x"},
    )
    assert "No views for workload &#x27;x&#x27;" in page
    assert "fig-latency" in figures(page)


def test_run_without_reads_or_latency_still_renders(tmp_path: Path) -> None:
    results = make_results(latency={}, faults=[], notes=[])
    empty = {k: [] for k in ("t_ms", "fresh", "total", "p", "lo", "hi")}
    results["freshness"] = {"bucket_ms": 1, **empty}
    results["k_staleness"] = {"k": [], "count": []}
    page = render(tmp_path, results)
    assert "fig-staleness" in figures(page)
    assert "No latency data recorded." in page
    assert "fig-k-staleness" not in page


def test_periods_figure_shades_each_fault() -> None:
    faults = [
        {"start_ms": 1_000_000.0, "end_ms": 1_300_000.0, "label": "partition"},
        {"start_ms": 3_000_000.0, "end_ms": 3_100_000.0, "label": "partition"},
        {"start_ms": 5_000_000.0, "end_ms": 5_050_000.0, "label": r"crash $\bad$"},
    ]
    fig = periods_figure(make_results()["periods"], faults)
    ax = fig.axes[0]
    spans = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
    assert spans == [(1000.0, 1300.0), (3000.0, 3100.0), (5000.0, 5050.0)]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels.count("fault: partition") == 1
    # "$" is escaped: as mathtext, \bad would make drawing fail.
    assert r"fault: crash \$\bad\$" in labels
    fig.savefig(io.BytesIO(), format="png")


def test_freshness_x_range_keeps_first_second_and_clips_rare_late_reads() -> None:
    assert freshness_xmax_ms([0, 10, 20], [5, 5, 5], 1) == 1000
    t = np.arange(3000.0)
    total = np.full(t.size, 40)
    xmax = freshness_xmax_ms(np.append(t, 60_000.0), np.append(total, 1), 1)
    assert 2900 <= xmax <= 3000
    ax = staleness_figure(make_results()["freshness"]).axes[0]
    assert ax.get_xlim() == (0.0, 3000.0)
    assert ax.get_ylim() == (-0.02, 1.02)


def test_sparse_freshness_buckets_are_merged_for_readability() -> None:
    dense = staleness_figure(make_results(reads_per_ms=150)["freshness"]).axes[0]
    sparse = staleness_figure(make_results(reads_per_ms=12)["freshness"]).axes[0]
    assert dense.get_lines()[0].get_label().endswith(", 1 ms buckets")
    assert sparse.get_lines()[0].get_label().endswith(", 10 ms buckets")
    assert len(sparse.get_lines()[0].get_xdata()) == 300


def test_rendering_never_imports_pyplot(tmp_path: Path) -> None:
    code = (
        "import json, sys, pathlib; from replicalab.report import render_report; "
        "render_report(json.load(sys.stdin), pathlib.Path(sys.argv[1])); "
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        input=json.dumps(make_results("inter-element")),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "figures" / "abcd.png").is_file()
