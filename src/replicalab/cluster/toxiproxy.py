"""Toxiproxy: one proxy per directed link, latency toxics from the region matrix.

The server binary is built by ``scripts/install-servers.sh`` into ``.replicalab/bin``
(or found on PATH as ``toxiproxy-server``). A proxy's *downstream* is what the upstream
server sends back to the connecting client; *upstream* is what the client sends. For a
link where node B connects to node A, downstream carries A→B and upstream B→A.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicalab.cluster import process
from replicalab.cluster.ports import wait_listening

if TYPE_CHECKING:
    import httpx


def binary(root: Path) -> Path:
    """Return the toxiproxy-server executable (ValueError saying how to install it).

    Looked for in $REPLICALAB_TOXIPROXY, ``<root>/bin``, the checkout's ``.replicalab/bin``
    (where scripts/install-servers.sh builds it), then PATH.
    """
    checkout = Path(__file__).resolve().parents[3] / ".replicalab" / "bin"
    for candidate in (os.environ.get("REPLICALAB_TOXIPROXY"), root / "bin" / "toxiproxy-server",
                      checkout / "toxiproxy-server"):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    found = shutil.which("toxiproxy-server")
    if found:
        return Path(found)
    raise ValueError("toxiproxy-server is not installed; run scripts/install-servers.sh "
                     "(or make test), which builds it from the Go module proxy")


def start_server(root: Path, api_port: int, log: Path) -> int:
    """Start a Toxiproxy server with its API on 127.0.0.1:``api_port``; return its pid."""
    pid = process.start([str(binary(root)), "-host", "127.0.0.1", "-port", str(api_port)], log)
    if not wait_listening(api_port, 15):
        process.stop(pid)
        raise ValueError(f"Toxiproxy did not start on port {api_port}; see {log}")
    return pid


class Toxiproxy:
    """A client of one Toxiproxy server's HTTP API."""

    def __init__(self, api_port: int, host: str = "127.0.0.1") -> None:
        # plain HTTP on loopback (or to a host's Toxiproxy): no TLS context (loading the CA
        # bundle took 0.8 s on a busy machine, which delayed every fault action) and no
        # proxy from the environment. httpx is loaded here, not with the module: its import
        # (its own command line's too) is most of what a command touching a cluster loads
        import httpx

        self.http = httpx.Client(base_url=f"http://{host}:{api_port}", timeout=5.0,
                                 verify=False, trust_env=False)

    def close(self) -> None:
        """Close the HTTP client."""
        self.http.close()

    def _ok(self, r: httpx.Response) -> Any:
        if r.status_code >= 400:
            raise ValueError(f"Toxiproxy refused {r.request.method} {r.request.url.path}: "
                             f"{r.text.strip()}")
        return r.json() if r.content else None

    def create(self, name: str, listen_port: int, upstream_port: int,
               upstream_host: str = "127.0.0.1", listen_host: str = "127.0.0.1") -> None:
        """Create proxy ``name`` from listen_host:listen_port (127.0.0.1 unless the link
        needs an address of its own, as MinIO's site links do) to
        upstream_host:upstream_port (a server on a loopback address of its own, such as a
        Cassandra node, gives its host)."""
        self._ok(self.http.post("/proxies", json={
            "name": name, "listen": f"{listen_host}:{listen_port}",
            "upstream": f"{upstream_host}:{upstream_port}", "enabled": True}))

    def delete(self, name: str) -> None:
        """Remove proxy ``name`` (and its connections)."""
        self._ok(self.http.delete(f"/proxies/{name}"))

    def set_latency(self, name: str, downstream_ms: float, upstream_ms: float,
                    jitter_ms: float) -> None:
        """Set (replace) the latency toxics of ``name``: one per direction, in ms."""
        for stream, ms in (("downstream", downstream_ms), ("upstream", upstream_ms)):
            toxic = f"latency_{stream}"
            self.http.delete(f"/proxies/{name}/toxics/{toxic}")
            if ms > 0:
                self._ok(self.http.post(f"/proxies/{name}/toxics", json={
                    "name": toxic, "type": "latency", "stream": stream, "toxicity": 1.0,
                    "attributes": {"latency": round(ms),
                                   "jitter": round(jitter_ms)}}))

    def set_enabled(self, name: str, enabled: bool) -> None:
        """Enable or disable proxy ``name`` (disabled: connections refused and cut)."""
        self._ok(self.http.post(f"/proxies/{name}", json={"enabled": enabled}))

    def add_timeout(self, name: str) -> None:
        """Make ``name`` swallow all data without closing (a partition, not a refusal)."""
        for stream in ("downstream", "upstream"):
            self._ok(self.http.post(f"/proxies/{name}/toxics", json={
                "name": f"partition_{stream}", "type": "timeout", "stream": stream,
                "toxicity": 1.0, "attributes": {"timeout": 0}}))

    def remove_timeout(self, name: str) -> None:
        """Undo :meth:`add_timeout`."""
        for stream in ("downstream", "upstream"):
            self.http.delete(f"/proxies/{name}/toxics/partition_{stream}")

    def set_reset(self, name: str, on: bool) -> None:
        """Make ``name`` reset every new connection before any byte passes (or stop it)."""
        if on:
            self._ok(self.http.post(f"/proxies/{name}/toxics", json={
                "name": "hold", "type": "reset_peer", "stream": "upstream", "toxicity": 1.0,
                "attributes": {"timeout": 0}}))
        else:
            self.http.delete(f"/proxies/{name}/toxics/hold")

    def proxies(self) -> dict[str, Any]:
        """Return the server's proxies and their toxics."""
        return self._ok(self.http.get("/proxies"))
