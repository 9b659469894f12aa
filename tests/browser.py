"""Headless Chromium with networking off, shared by the browser tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# Every request goes to a dead proxy (discard port); "<-loopback>" removes Chromium's implicit
# loopback bypass, so even 127.0.0.1 is unreachable. file:// is not proxied, so files load.
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


def chromium() -> str:
    """Return the Chromium executable (fail under CI=true, skip elsewhere, when missing)."""
    found = shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").is_file() else None)
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("chromium not found but CI=true: install it (apt-get install -y chromium)")
    pytest.skip("chromium not found (apt-get install -y chromium)")


def run_chromium(tmp_path: Path, *args: str, allow_port: int | None = None
                 ) -> subprocess.CompletedProcess[str]:
    """Run Chromium offline (only 127.0.0.1:``allow_port`` reachable, if given)."""
    flags = [f"--proxy-bypass-list=<-loopback>;127.0.0.1:{allow_port}"
             if allow_port and f.startswith("--proxy-bypass-list") else f
             for f in OFFLINE_FLAGS]
    return subprocess.run([chromium(), *flags, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, "HOME": str(tmp_path)})


def fetch_from_live_server(tmp_path: Path,
                           run: Callable[[Path], subprocess.CompletedProcess[str]]
                           ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Open, with ``run(page)``, a page that fetches from a live local server; return the
    Chromium result and the paths that server saw (none when the network is really off)."""
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
        page = tmp_path / "probe.html"
        page.write_text('<!DOCTYPE html><body><img src="http://127.0.0.1:'
                        f'{server.server_port}/x" onerror="document.body.dataset.net=\'off\'">')
        proc = run(page)
        server.shutdown()
    return proc, hits
