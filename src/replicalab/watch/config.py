"""The backends file of ``replicalab watch``: one ``[backends.NAME]`` table per store.

```toml
[backends.redis]
url = "redis://127.0.0.1:6379"
durability = "weak (lost on restart without AOF)"
availability = "fair"
transactional = "good"
geo = "none"
records = 100000          # optional, default --records
read = "consistent"       # optional: consistent | eventual
staleness = true          # optional: also watch freshness, a writer and readers per region
```

``sim://`` backends run in real time (``clock=real`` is added when the URL has no clock).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from replicalab.errors import ParameterError
from replicalab.stores.base import redact_url
from replicalab.stores.registry import schemes

DECLARED = ("durability", "availability", "transactional", "geo")
_KEYS = {"url", "records", "read", "staleness", *DECLARED}


@dataclass(frozen=True)
class BackendSpec:
    """One backend: its name, store URL, declared properties (free text) and keyspace."""

    name: str
    url: str
    durability: str = ""
    availability: str = ""
    transactional: str = ""
    geo: str = ""
    records: int | None = None
    read: str = "consistent"
    staleness: bool = False  # watch freshness too (watch/staleness.py)


def real_time_url(url: str) -> str:
    """Return ``url`` with ``clock=real`` added to a ``sim://`` URL that names no clock
    (ValueError if it asks for virtual time, which cannot be watched on a wall clock)."""
    parts = urlsplit(url)
    if parts.scheme != "sim":
        return url
    clock = parse_qs(parts.query).get("clock", [""])[-1]
    if clock == "virtual":
        raise ValueError(f"{url!r} asks for virtual time; watch measures on the wall clock, "
                         "use clock=real")
    if clock:
        return url
    return url + ("&" if parts.query else "?") + "clock=real"


def _backend(name: str, table: Any, where: str) -> BackendSpec:
    if not isinstance(table, dict):
        raise ValueError(f"{where}: [backends.{name}] must be a table with url = \"...\"")
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ValueError(f"{where}: [backends.{name}] has unknown key(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(sorted(_KEYS))}")
    url = table.get("url")
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"{where}: [backends.{name}] needs url = \"SCHEME://...\", e.g. "
                         "\"sim://simpledb\" or \"redis://127.0.0.1:6379\"")
    scheme = urlsplit(url).scheme
    if scheme not in schemes():
        raise ValueError(f"{where}: backend {name!r} has unknown URL scheme {scheme!r}; use "
                         f"one of: {', '.join(s + '://' for s in schemes())}")
    records = table.get("records")
    if records is not None and (not isinstance(records, int) or records < 1):
        raise ValueError(f"{where}: [backends.{name}] records must be a positive integer")
    read = table.get("read", "consistent")
    if read not in ("consistent", "eventual"):
        raise ValueError(f"{where}: [backends.{name}] read must be consistent or eventual")
    staleness = table.get("staleness", False)
    if not isinstance(staleness, bool):
        raise ValueError(f"{where}: [backends.{name}] staleness must be true or false")
    declared = {}
    for key in DECLARED:
        value = table.get(key, "")
        if not isinstance(value, str):
            raise ValueError(f"{where}: [backends.{name}] {key} must be a string")
        declared[key] = value
    return BackendSpec(name=name, url=real_time_url(url), records=records, read=read,
                       staleness=staleness, **declared)


def parse_backends(data: dict[str, Any], where: str = "backends file") -> list[BackendSpec]:
    """Return the backends of a parsed TOML document (ValueError naming any problem)."""
    tables = data.get("backends")
    if not isinstance(tables, dict) or not tables:
        raise ValueError(f"{where} lists no backends; add a table like "
                         "[backends.sim] url = \"sim://simpledb\"")
    return [_backend(name, table, where) for name, table in tables.items()]


def backends_from_urls(urls: list[str]) -> list[BackendSpec]:
    """Return one backend per store URL of ``watch --store``, named by the URL without its
    credentials and parameters (``s3://127.0.0.1:9000/bucket``; a repeat gets ``#2``), no
    declared properties (ValueError naming an unknown scheme)."""
    out: list[BackendSpec] = []
    seen: dict[str, int] = {}
    for url in urls:
        parts = urlsplit(url)
        if "://" not in url or parts.scheme not in schemes():
            raise ParameterError("stores", f"{redact_url(url)!r}: unknown or missing URL "
                                           "scheme; use one of: "
                                           f"{', '.join(s + '://' for s in schemes())}")
        host = parts.netloc.rpartition("@")[2]
        name = f"{parts.scheme}://{host}{parts.path}".rstrip("/")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name += f"#{seen[name]}"
        out.append(BackendSpec(name=name, url=real_time_url(url)))
    return out


def load_backends(path: Path) -> list[BackendSpec]:
    """Return the backends listed in the TOML file ``path`` (ValueError naming any problem)."""
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"backends file {str(path)!r} does not exist; see "
                         "docs/examples/backends.toml") from None
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{path} is not valid TOML ({err})") from None
    return parse_backends(data, str(path))
