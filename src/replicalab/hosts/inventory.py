"""The inventory: which machines replicalab may use and how it reaches them (a TOML file).

```toml
known_hosts = "~/.ssh/known_hosts"   # optional: the hosts' keys ("" : ssh's own file)
wan = "real"                         # or "emulated": Toxiproxy on the hosts' peer links

[[host]]
name = "db1"            # how replicalab names the host
address = "10.0.0.11"   # what ssh and the servers use
region = "US-E"         # a region of the cluster's region set
user = "admin"          # ssh user (default root)
port = 22               # ssh port
key = "~/.ssh/id_ed25519"  # private key ("" : ssh's defaults and agent)
sudo = true             # run commands through `sudo -n` (for a user that is not root)
root = "/var/tmp/replicalab"  # where replicalab keeps its files on the host
```
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from replicalab.errors import ParameterError

DEFAULT_ROOT = "/var/tmp/replicalab"
"""Where replicalab keeps its files on a host the inventory gives no ``root`` for."""

WAN_KINDS = ("real", "emulated")


@dataclass(frozen=True)
class HostSpec:
    """One machine of the inventory (see the module docstring for the fields)."""

    name: str
    address: str
    region: str = ""
    user: str = "root"
    port: int = 22
    key: str = ""
    sudo: bool = False
    root: str = DEFAULT_ROOT

    @property
    def where(self) -> str:
        """Return ``user@address:port``, how error messages name the host's SSH end."""
        return f"{self.user}@{self.address}:{self.port}"


@dataclass
class Inventory:
    """The hosts of one inventory file and how to reach them."""

    path: Path
    hosts: list[HostSpec]
    known_hosts: str = ""
    wan: str = "real"
    toxiproxy: str = "toxiproxy-server"  # the Toxiproxy binary on the hosts (wan = emulated)
    emulated_set: str = ""  # the set of emulated hosts it describes ("" : real machines)
    extra: dict[str, Any] = field(default_factory=dict)

    def host(self, name: str) -> HostSpec:
        """Return the host called ``name`` (ValueError listing the hosts)."""
        for h in self.hosts:
            if h.name == name:
                return h
        raise ValueError(f"inventory {self.path} has no host {name!r}; it has "
                         f"{', '.join(h.name for h in self.hosts)}")

    def to_json(self) -> dict[str, Any]:
        """Return the inventory as JSON-ready data (its path and hosts)."""
        return {"inventory": str(self.path), "wan": self.wan, "set": self.emulated_set,
                "hosts": [{f.name: getattr(h, f.name) for f in fields(h)}
                          for h in self.hosts]}

    def addresses(self) -> list[str]:
        """Return every host's address, in inventory order."""
        return [h.address for h in self.hosts]


_TOP = {"known_hosts", "wan", "toxiproxy", "emulated_set", "host"}
_TYPES = {"name": str, "address": str, "region": str, "user": str, "port": int, "key": str,
          "sudo": bool, "root": str}


def _expand(path: str) -> str:
    return str(Path(path).expanduser()) if path else ""


def _host(table: Any, i: int, source: Path) -> HostSpec:
    where = f"inventory {source} host {i + 1}"
    if not isinstance(table, dict):
        raise ValueError(f"{where}: write each host as a [[host]] table")
    unknown = sorted(set(table) - set(_TYPES))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; a host has "
                         f"{', '.join(_TYPES)}")
    for key, example in (("name", "db1"), ("address", "10.0.0.11")):
        if not table.get(key):
            raise ValueError(f"{where}: give its {key} (e.g. {key} = \"{example}\")")
    for key, value in table.items():
        want = _TYPES[key]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise ValueError(f"{where}: {key} must be a {want.__name__}, not {value!r}")
    if not 1 <= table.get("port", 22) <= 65535:
        raise ValueError(f"{where}: port {table['port']} is not a TCP port")
    return HostSpec(**{**table, "key": _expand(table.get("key", "")),
                       "root": table.get("root") or DEFAULT_ROOT})


def load(path: Path | str) -> Inventory:
    """Return the inventory in TOML file ``path`` (ValueError naming the problem and fix)."""
    path = Path(path).expanduser()
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ParameterError("hosts", f"{path}: no such inventory file; `replicalab hosts "
                                      "up` writes one for emulated hosts, docs/hosts.md "
                                      "shows one for real machines") from None
    except (IsADirectoryError, UnicodeDecodeError):
        raise ParameterError("hosts", f"{path} is not a text file; pass an inventory TOML "
                                      "file") from None
    except tomllib.TOMLDecodeError as err:
        raise ParameterError("hosts", f"{path} is not valid TOML: {err}") from None
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise ValueError(f"inventory {path}: unknown key {unknown[0]!r}; it holds "
                         f"{', '.join(sorted(_TOP - {'host'}))} and [[host]] tables")
    tables = data.get("host", [])
    if not isinstance(tables, list) or not tables:
        raise ValueError(f"inventory {path} lists no host; add [[host]] tables "
                         "(name, address, region, user, port, key, sudo)")
    hosts = [_host(t, i, path) for i, t in enumerate(tables)]
    for attr in ("name", "address"):
        seen = [getattr(h, attr) for h in hosts]
        dup = next((x for x in seen if seen.count(x) > 1), None)
        if dup is not None:
            raise ValueError(f"inventory {path}: two hosts have {attr} {dup!r}")
    wan = data.get("wan", "real")
    if wan not in WAN_KINDS:
        raise ValueError(f"inventory {path}: wan = {wan!r}; use \"real\" (the machines' own "
                         "network) or \"emulated\" (Toxiproxy on the hosts' peer links)")
    return Inventory(path.absolute(), hosts, _expand(str(data.get("known_hosts", ""))), wan,
                     str(data.get("toxiproxy", "toxiproxy-server")),
                     str(data.get("emulated_set", "")))


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def dumps(inv: Inventory, header: str = "") -> str:
    """Return ``inv`` as the TOML text :func:`load` reads."""
    lines = [f"# {x}" for x in header.splitlines()]
    lines += [f"known_hosts = {_toml(inv.known_hosts)}", f"wan = {_toml(inv.wan)}",
              f"toxiproxy = {_toml(inv.toxiproxy)}"]
    if inv.emulated_set:
        lines.append(f"emulated_set = {_toml(inv.emulated_set)}")
    for h in inv.hosts:
        lines += ["", "[[host]]"]
        lines += [f"{f.name} = {_toml(getattr(h, f.name))}" for f in fields(h)]
    return "\n".join(lines) + "\n"


def save(inv: Inventory, header: str = "") -> Path:
    """Write ``inv`` to its path and return the path."""
    inv.path.parent.mkdir(parents=True, exist_ok=True)
    inv.path.write_text(dumps(inv, header))
    return inv.path
