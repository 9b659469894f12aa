"""A probe as asked for, by the command line or from Python: options as given (text such as
``"5m"`` or numbers of seconds), turned into the :class:`ProbeSpec` the runner runs.

``replicalab probe`` and :func:`replicalab.api.probe` both build their spec here, so the same
options give the same spec, and the same seed the same history and results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from replicalab.api.durations import seconds
from replicalab.api.errors import ParameterError
from replicalab.cluster.state import load, names
from replicalab.faults.schedule import check_within, load_faults, parse_fault
from replicalab.stores import open_store
from replicalab.workloads import registry
from replicalab.workloads.base import Flag, ProbeOptions
from replicalab.workloads.runner import ProbeSpec

COMMON_DEFAULTS: dict[str, Any] = {"consistency": "eventual", "duration": "5m",
                                   "write_interval": "3s", "read_rate": 50.0, "period": "5m"}
"""The options every probe takes, with the defaults of ``replicalab probe``."""


def flags_by_name() -> dict[str, list[tuple[str, Flag]]]:
    """Return every workload flag by name, with the workloads that declare it (installed
    packages' workloads included)."""
    out: dict[str, list[tuple[str, Flag]]] = {}
    for name in registry.names(installed=True):
        for flag in registry.get(name).flags:
            out.setdefault(flag.name, []).append((name, flag))
    return out


def convert(flag: Flag, value: Any) -> Any:
    """Return ``value`` (text when workloads disagree on the type) as ``flag`` takes it."""
    if value is None:
        return None
    if flag.duration:
        return seconds(value, flag.name)
    if flag.type is int and not isinstance(value, int):
        try:
            return int(value)
        except ValueError:
            raise ParameterError(flag.name, f"{value!r}: give one whole number, e.g. 10"
                                 ) from None
    if flag.type is float and not isinstance(value, int | float):
        try:
            return float(value)
        except ValueError:
            raise ParameterError(flag.name, f"{value!r}: give a number, e.g. 2.5") from None
    return value


def workload_config(workload: str, given: dict[str, Any]) -> Any:
    """Return the config of ``workload`` from the values of every workload flag (None: not
    given); ValueError for a flag given that this workload does not take, with why."""
    known = flags_by_name()
    for name, value in given.items():
        if value is not None and name not in known:
            raise ValueError(f"{name!r} is not an option of any workload; the workload options "
                             f"are {', '.join(sorted(known))}")
    for name, uses in known.items():
        users = [w for w, _ in uses]
        if given.get(name) is not None and workload not in users:
            raise ParameterError(name, f"has no effect with {{workload}} {workload} (it "
                                       f"applies to {' and '.join(users)}); drop it",
                                 {"workload": "workload"})
    wl = registry.get(workload)
    return wl.make_config({f.name: convert(f, given.get(f.name)) for f in wl.flags})


def number(value: Any, name: str) -> float:
    """Return ``value`` (a number, or text from a sweep) as a float (ParameterError naming
    the parameter ``name``)."""
    try:
        return float(value)
    except ValueError:
        raise ParameterError(name, f"{value!r}: give a number, e.g. 50") from None


def with_url_parameter(url: str, key: str, value: str) -> str:
    """Return ``url`` with query parameter ``key`` set to ``value`` (a simulated store's
    parameter, for --sweep); ValueError for a key a probe cannot take from a real store."""
    if not url.startswith("sim://"):
        raise ParameterError("sweep", f"{key}: not a probe or workload option; parameters "
                                      "of the store URL can be swept on sim:// stores only")
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key]
    return urlunsplit(parts._replace(query=urlencode([*query, (key, value)], safe=",")))


def fault_options(store: str, texts: list[str], path: Path | None,
                  cluster: str | None) -> dict[str, Any]:
    """Return the ProbeSpec fields for faults (ValueError if they cannot be carried out)."""
    plan = [parse_fault(t) for t in texts] + (load_faults(path) if path else [])
    if not plan:
        return {}
    if store.startswith("sim://") and cluster is None:
        return {"faults": tuple(plan)}  # the simulated store's own nodes take them
    if cluster is None:
        # the cluster's URL, or it with parameters added (a consistency level, a timeout)
        matches = [n for n in names()
                   if store == (u := load(n).url) or store.startswith(u + "&")]
        if not matches:
            raise ParameterError("cluster", "is missing: faults need a cluster started by "
                                            "`replicalab cluster up`; pass its URL as "
                                            "{store} or name it with {cluster}",
                                 {"store": "store", "cluster": "cluster"})
        cluster = matches[0]
    return {"cluster": cluster, "faults": tuple(plan)}


@dataclass(frozen=True)
class ProbeRequest:
    """The options of one probe, from which each of its runs is built: the common options
    as given (``common``: consistency, duration, write_interval, read_rate, period; text such
    as ``"5m"`` or seconds), the workload's flags, the key prefix and faults."""

    store: str = "sim://simpledb"
    workload: str = "staleness"
    seed: int = 1
    common: dict[str, Any] = field(default_factory=lambda: dict(COMMON_DEFAULTS))
    flags: dict[str, Any] = field(default_factory=dict)
    prefix: str | None = None
    keep: bool = False
    fault: list[str] = field(default_factory=list)
    faults: Path | None = None
    cluster: str | None = None

    def spec(self, point: dict[str, str] | None = None) -> ProbeSpec:
        """Return the probe with ``point``'s values (a batch's sweep point: a common
        option, a workload flag or a store URL parameter) in place of the options given;
        ValueError naming the first bad option."""
        values = {**COMMON_DEFAULTS, **self.common}
        flags, url = dict(self.flags), self.store
        for key, text in (point or {}).items():
            if key in values:
                values[key] = text
            elif key in flags_by_name():
                flags[key] = text
            else:
                url = with_url_parameter(url, key, text)
        if url != self.store:
            open_store(url, self.seed)  # a parameter the simulated store does not take
        opts = ProbeOptions(
            consistency=values["consistency"],
            duration_s=seconds(values["duration"], "duration"),
            write_interval_s=seconds(values["write_interval"], "write_interval"),
            read_rate=number(values["read_rate"], "read_rate"),
            period_s=seconds(values["period"], "period"), seed=self.seed)
        spec = ProbeSpec(store=url, workload=registry.get(self.workload), options=opts,
                         config=workload_config(self.workload, flags),
                         key_prefix=self.prefix, keep_keys=self.keep,
                         **fault_options(url, self.fault, self.faults, self.cluster))
        check_within(spec.faults, opts.duration_s)
        return spec
