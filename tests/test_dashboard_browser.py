"""Load the dashboard in headless Chromium with networking off (except the dashboard's own
port) and check that the comparison table is filled and the charts are drawn."""

from __future__ import annotations

import asyncio
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser import fetch_from_live_server, run_chromium
from replicalab.cluster.ports import allocate
from replicalab.report.dashboard import make_server
from replicalab.watch.config import parse_backends
from replicalab.watch.db import SampleDB
from replicalab.watch.watcher import SuiteOptions, Watcher

pytestmark = pytest.mark.browser


def _run(tmp_path: Path, port: int, *args: str) -> subprocess.CompletedProcess[str]:
    return run_chromium(tmp_path, *args, allow_port=port)


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    path = tmp_path_factory.mktemp("watch") / "samples.sqlite"
    (dead,) = allocate(1)
    specs = parse_backends({"backends": {
        "quorum": {"url": "sim://quorum?n=3&r=1&w=1", "durability": "replicated x3",
                   "availability": "good", "transactional": "none", "geo": "none"},
        "simpledb": {"url": "sim://simpledb", "durability": "excellent?",
                     "availability": "very good?", "transactional": "excellent",
                     "geo": "fair"},
        "down": {"url": f"redis://127.0.0.1:{dead}?timeout_ms=300"}}})
    db = SampleDB(path)
    opts = SuiteOptions(interval_s=0.2, timeout_s=1.0, records=200, max_rounds=4)
    asyncio.run(Watcher(specs, db, opts).run())
    db.close()
    server = make_server(path, 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def _dom(tmp_path: Path, port: int) -> str:
    # virtual time lets the page's fetch of /api/stats finish before the DOM is dumped
    proc = _run(tmp_path, port, "--virtual-time-budget=10000", "--dump-dom",
                f"http://127.0.0.1:{port}/")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _section(dom: str, table_id: str) -> str:
    m = re.search(rf'<table id="{table_id}">.*?<tbody>(.*?)</tbody>', dom, re.S)
    assert m, f"table {table_id} missing"
    return m[1]


def test_dashboard_table_filled_and_charts_drawn_offline(dashboard: int, tmp_path: Path
                                                          ) -> None:
    dom = _dom(tmp_path, dashboard)
    assert re.search(r'<body[^>]*data-rendered="1"', dom), "the page never rendered its data"
    rows = re.findall(r"<tr>(.*?)</tr>", _section(dom, "compare"), re.S)
    cells = {re.findall(r"<td[^>]*>(.*?)</td>", r)[0]: re.findall(r"<td[^>]*>(.*?)</td>", r)
             for r in rows}
    assert set(cells) == {"down", "quorum", "simpledb"}
    sdb = cells["simpledb"]
    assert float(sdb[1]) > 0 and float(sdb[2]) > float(sdb[1])  # writes slower than reads
    assert sdb[3:7] == ["excellent?", "very good?", "excellent", "fair"]
    assert sdb[8] == "available" and cells["quorum"][8] == "available"
    assert cells["down"][8] == "unavailable" and cells["down"][1] == "–"
    assert len(re.findall(r"<tr>", _section(dom, "stats"))) == 6
    series = re.search(r'<div id="series" class="chart">(.*?)</div>', dom, re.S)
    assert series and "<svg" in series[1]
    paths = re.findall(r'<path d="M([^"]*)"[^>]*class="series"', series[1])
    assert len(paths) == 4  # read and write of the two reachable backends
    assert all(d.count("L") >= 1 for d in paths)  # each a line through several slices
    assert len(re.findall(r'class="bar"', dom)) >= 4


def test_flags_block_every_other_local_port(dashboard: int, tmp_path: Path) -> None:
    """Guard for the test above: with the same flags, another local server is unreachable."""
    proc, hits = fetch_from_live_server(
        tmp_path, lambda page: _run(tmp_path, dashboard, "--dump-dom", page.as_uri()))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-net="off"' in proc.stdout
    assert hits == []
