"""Open a rendered report in headless Chromium with networking off and check what it shows."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from replicalab.report import render_report
from test_report import make_results

pytestmark = pytest.mark.browser

# Every request goes to a dead proxy (discard port); "<-loopback>" removes Chromium's implicit
# loopback bypass, so even 127.0.0.1 is unreachable. file:// is not proxied, so the report loads.
OFFLINE_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-server=127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
]


def _chromium() -> str:
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None
    )
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("chromium not found but CI=true: install it (apt-get install -y chromium)")
    pytest.skip("chromium not found (apt-get install -y chromium)")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return render_report(make_results("staleness"), tmp_path_factory.mktemp("run"))


def _run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    return subprocess.run(
        [_chromium(), *OFFLINE_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
        check=False,
    )


def test_offline_dom_has_rendered_staleness_svg(report: Path, tmp_path: Path) -> None:
    proc = _run_chromium(tmp_path, "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert re.search(r'<body[^>]*data-rendered="1"', dom), "load script did not mark the page"
    figure = re.search(r'<figure id="fig-staleness">(.*?)</figure>', dom, re.S)
    assert figure, "staleness figure missing from the DOM"
    assert "<svg" in figure[1]
    assert len(re.findall(r"<path\b", figure[1])) > 10


def test_offline_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "shot.png"
    proc = _run_chromium(
        tmp_path, f"--screenshot={shot}", "--window-size=1200,2000", report.as_uri()
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert shot.is_file()
    assert shot.stat().st_size > 20_000
    pixels = imread(shot)
    assert pixels.shape[:2] == (2000, 1200)
    # A page with text, tables and plots has many distinct grey levels and real contrast.
    grey = pixels[..., :3].mean(axis=2)
    assert grey.std() > 0.05
    assert len(np.unique(np.round(grey, 2))) > 20


def test_offline_flags_really_block_the_network(tmp_path: Path) -> None:
    """Guard for the two tests above: a page fetching from a live local server must fail."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}/probe"
        page = tmp_path / "probe.html"
        page.write_text(
            f'<!DOCTYPE html><body><img src="{url}" onerror="document.body.dataset.net=\'off\'">'
        )
        proc = _run_chromium(tmp_path, "--dump-dom", page.as_uri())
        server.shutdown()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert 'data-net="off"' in proc.stdout
    assert hits == []
