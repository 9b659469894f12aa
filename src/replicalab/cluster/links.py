"""What a cluster driver may ask of the links it is given (the implementation is
``base.LinkMaker``): typed here, below ``base.py``, so that drivers need not name the module
that finds them through the store kinds."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from replicalab.cluster.state import Node
    from replicalab.cluster.toxiproxy import Toxiproxy


class LinkMaker(Protocol):
    """Creates Toxiproxy proxies carrying the region matrix's one-way delays."""

    tp: Toxiproxy

    def link(self, name: str, src: str, src_region: str, dst: Node, kind: str = "replication",
             dst_port: int | None = None, dst_host: str = "127.0.0.1") -> int:
        """Create a proxy for ``src`` connecting to ``dst``; return the 127.0.0.1 port to
        connect to."""
        ...

    def peer(self, name: str, src: Node, dst: Node, dst_port: int | None = None
             ) -> tuple[str, int]:
        """Return (address, port) ``src``'s server dials to reach ``dst`` through a link
        (here on loopback, on src's host on hosts)."""
        ...
