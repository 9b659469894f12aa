"""nftables rule sets replicalab installs on hosts, each in a table of its own (so removing
the table removes exactly it): a partition's drops between inventory addresses, and the
redirects that send a host's connections to a peer through its local Toxiproxy. Text only:
``hosts/expiry.py`` installs them with a timer."""

from __future__ import annotations

import ipaddress
import re
import shlex
from collections.abc import Sequence

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,30}$")


def _table(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"nftables table name {name!r}: lower-case letters, digits, _")
    return name


def _addresses(addresses: Sequence[str]) -> str:
    return ", ".join(str(ipaddress.IPv4Address(a)) for a in addresses)


def drop_between(table: str, peers: Sequence[str]) -> str:
    """Return an nft script making table ``inet <table>`` that drops every packet to or from
    ``peers`` (other hosts' addresses) and nothing else, so the controller's SSH, which
    comes from no inventory address, is never cut."""
    t = _table(table)
    return (f"table inet {t} {{\n"
            f"  set cut {{ type ipv4_addr; elements = {{ {_addresses(peers)} }} }}\n"
            "  chain input { type filter hook input priority -5; policy accept; "
            "ip saddr @cut drop; }\n"
            "  chain output { type filter hook output priority -5; policy accept; "
            "ip daddr @cut drop; }\n"
            "}\n")


def redirects(table: str, rules: Sequence[tuple[str, int, int]]) -> str:
    """Return an nft script making table ``ip <table>`` that redirects this host's own
    connections to ``(address, port)`` to local port ``to_port``, one per rule."""
    t = _table(table)
    lines = [f"    ip daddr {ipaddress.IPv4Address(a)} tcp dport {int(p)} redirect to :{int(to)}"
             for a, p, to in rules]
    return (f"table ip {t} {{\n  chain output {{\n    type nat hook output priority -100; "
            "policy accept;\n" + "\n".join(lines) + "\n  }\n}\n")


def install_line(script: str) -> str:
    """Return a shell line that loads ``script`` with ``nft -f``."""
    return f"printf %s {shlex.quote(script)} | nft -f /dev/stdin"


def delete_line(family: str, table: str) -> str:
    """Return a shell line deleting table ``family table`` (nothing when it is gone)."""
    return f"nft delete table {family} {_table(table)} 2>/dev/null; true"
