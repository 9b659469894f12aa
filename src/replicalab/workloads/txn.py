"""Transactions over a small set of keys, Elle style: what ``list-append`` and ``rw-register``
share (Fekete et al.'s knobs: contention, transaction length, spacing of operations).

``clients`` clients each loop until the run ends (``--duration``, or ``txns`` transactions
issued in all): a transaction of ``min_length``..``max_length`` micro-operations, each a
read (with probability ``read_fraction``) or an append (list-append) / write (rw-register)
of a value unique per key (1, 2, 3, ... per key, across all clients), on a key chosen among
``keys`` active keys, uniformly or exponentially (key i with weight 2^-i: a few hot keys).
A key that has taken ``max_writes_per_key`` appends/writes is retired and a fresh key takes
its place, so lists stay short while contention stays what ``keys`` says (Elle does the
same). ``layout`` puts each key in its own item (``spread``) or every key in one item
(``one-item``: one partition, for Cassandra's lightweight transactions). ``spacing_s`` is the
pause between a transaction's micro-operations (an interactive
transaction that holds its snapshot and locks that long; for ``sim://``, the time between
the separate calls).

Each transaction is one ``txn`` row of the history (``history.txn``): ``ok`` with its reads
filled, ``fail`` if the store said it did not commit (serialization failure, failed guard),
``info`` if unknown. A client whose transaction ended ``info`` carries on as a new process
(process + clients), as in Jepsen: the unknown transaction may still commit later.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import numpy as np

from replicalab.errors import ParameterError
from replicalab.history import History
from replicalab.runtime.base import NS_PER_S
from replicalab.stores import Feature, Store
from replicalab.stores.base import MicroOp
from replicalab.workloads.base import Flag, ProbeOptions, Workload, deadline, envelope
from replicalab.workloads.recorder import Recorder

KEY_DISTS = ("uniform", "exponential")
LAYOUTS = ("spread", "one-item")
MAX_CLIENTS = 256
MAX_LENGTH = 64  # etcd takes 128 ops per Txn: a read phase and guards of 64 keys fit


@dataclass(frozen=True)
class TxnConfig:
    """The shape of the transactions (see the module doc); ``txns`` 0 = run for
    ``--duration``."""

    keys: int = 8
    min_length: int = 1
    max_length: int = 4
    read_fraction: float = 0.5
    key_dist: str = "uniform"
    clients: int = 4
    spacing_s: float = 0.0
    txns: int = 0
    max_writes_per_key: int = 32
    layout: str = "spread"
    region: str | None = None

    def check(self) -> None:
        """Raise ValueError naming the first bad option and its fix."""
        if not 1 <= self.keys <= 100_000:
            raise ParameterError("keys", f"{self.keys}: use 1 to 100,000 active keys")
        if not 1 <= self.min_length <= self.max_length <= MAX_LENGTH:
            raise ParameterError("min_length", f"{self.min_length} / {{max_length}} "
                                               f"{self.max_length}: need 1 <= min <= max <= "
                                               f"{MAX_LENGTH}", {"max_length": "max_length"})
        if not 0.0 <= self.read_fraction <= 1.0:
            raise ParameterError("read_fraction", f"{self.read_fraction}: use 0 to 1")
        if self.key_dist not in KEY_DISTS:
            raise ParameterError("key_dist", f"{self.key_dist!r}: use uniform or exponential")
        if not 1 <= self.clients <= MAX_CLIENTS:
            raise ParameterError("clients", f"{self.clients}: use 1 to {MAX_CLIENTS}")
        if self.spacing_s < 0:
            raise ParameterError("spacing", f"{self.spacing_s}: must not be negative")
        if self.txns < 0:
            raise ParameterError("txns", f"{self.txns}: use 0 (run for {{duration}}) or more",
                                 {"duration": "duration"})
        if self.layout not in LAYOUTS:
            raise ParameterError("layout", f"{self.layout!r}: use spread (a key per item) or "
                                           "one-item (every key in one item: one partition)")
        if self.max_writes_per_key < 1:
            raise ParameterError("max_writes_per_key", f"{self.max_writes_per_key}: use 1 or "
                                                       "more")


@dataclass
class KeySpace:
    """The active keys and the next value of each key (shared by a run's clients)."""

    size: int
    max_writes: int
    active: list[int] = field(default_factory=list)
    writes: dict[int, int] = field(default_factory=dict)
    next_key: int = 0

    def __post_init__(self) -> None:
        self.active = list(range(self.size))
        self.next_key = self.size

    def take_value(self, slot: int) -> tuple[int, int]:
        """Return (key, a value new to that key) for a write to active ``slot``, retiring
        the key once it has taken ``max_writes`` writes."""
        key = self.active[slot]
        n = self.writes.get(key, 0) + 1
        self.writes[key] = n
        if n >= self.max_writes:
            self.active[slot] = self.next_key
            self.next_key += 1
        return key, n


def slot_weights(cfg: TxnConfig) -> np.ndarray:
    """Return the probability of each active key slot (uniform, or 2^-i exponential)."""
    if cfg.key_dist == "uniform":
        return np.full(cfg.keys, 1.0 / cfg.keys)
    w = np.exp2(-np.arange(cfg.keys, dtype=float))
    return w / w.sum()


def make_txn(rng: np.random.Generator, cfg: TxnConfig, space: KeySpace, weights: np.ndarray,
             write_f: str) -> list[MicroOp]:
    """Return one transaction: reads ``("r", key, None)`` and ``(write_f, key, value)``
    writes, history keys being the key numbers as text."""
    n = int(rng.integers(cfg.min_length, cfg.max_length + 1))
    slots = rng.choice(cfg.keys, size=n, p=weights)
    reads = rng.random(n) < cfg.read_fraction
    ops: list[MicroOp] = []
    for slot, is_read in zip(slots.tolist(), reads.tolist(), strict=True):
        if is_read:
            ops.append(("r", str(space.active[slot]), None))
        else:
            key, value = space.take_value(slot)
            ops.append((write_f, str(key), value))
    return ops


def element_of(domain: str, layout: str = "spread") -> Callable[[str], str]:
    """Return the function mapping a history key to the store element holding it: an item
    per key (``spread``), or every key an attribute of one item (``one-item``: one
    partition, for stores whose transactions keep to one, e.g. Cassandra's ``txn=lwt``)."""
    if layout == "one-item":
        return lambda key: f"{domain}/all/k{key}"
    return lambda key: f"{domain}/k{key}/v"


async def _client(store: Store, rec: Recorder, process: int, cfg: TxnConfig,
                  opts: ProbeOptions, space: KeySpace, domain: str, write_f: str,
                  end_ns: int, issued: list[int]) -> None:
    rt = store.runtime
    rng = np.random.default_rng([opts.seed, process])
    weights = slot_weights(cfg)
    to_el = element_of(domain, cfg.layout)
    gap_ns = int(cfg.spacing_s * NS_PER_S)
    client = await store.connect(cfg.region)
    try:
        while rt.now_ns() < end_ns and (cfg.txns == 0 or issued[0] < cfg.txns):
            issued[0] += 1
            ops = make_txn(rng, cfg, space, weights, write_f)
            outcome, _ = await rec.transact(client, process, ops, gap_ns, to_el)
            if outcome == "info":
                process += cfg.clients  # the unknown transaction stays open as in Jepsen
    finally:
        await client.close()


async def generate_txns(store: Store, h: History, opts: ProbeOptions, cfg: TxnConfig,
                        rec: Recorder, domain: str, write_f: str) -> None:
    """Drive ``cfg.clients`` clients issuing transactions until the run ends."""
    rt = store.runtime
    space = KeySpace(cfg.keys, cfg.max_writes_per_key)
    end = deadline(rt, opts.duration_s)  # with ``txns``, whichever comes first
    issued = [0]
    await rt.gather(*(_client(store, rec, p, cfg, opts, space, domain, write_f, end, issued)
                      for p in range(cfg.clients)))


def done_fraction(h: History, cfg: TxnConfig) -> float | None:
    """Return the share of ``txns`` issued so far (None when the run is timed: progress
    by time)."""
    if not cfg.txns:
        return None
    return min(1.0, len(h) / cfg.txns)  # every row of the run is a transaction


def required_features(opts: ProbeOptions, cfg: TxnConfig) -> set[Feature]:
    """Return what the workload needs: transactions."""
    return {Feature.TRANSACTIONS}


def txn_counts(h: History) -> dict[str, int]:
    """Return the transactions by outcome: ok, fail, info (client processes only)."""
    proc, types, f = h.column("process"), h.types(), h.column("f")
    txn = (proc >= 0) & (f == h.f_code("txn"))
    return {"ok": int((txn & (types == 1)).sum()), "fail": int((txn & (types == 2)).sum()),
            "info": int((txn & (types == 3)).sum())}


def verdict(h: History, model: str) -> dict[str, Any]:
    """Return the transactional checker's verdict on ``h``: Elle's result map (``valid``,
    ``anomaly_types``, ``not``/``also_not``, ``anomalies`` with their cycles explained,
    ``unfinished`` searches, ``check_s`` seconds) plus ``anomalous``: ``any``, how many
    distinct transactions take part in some anomaly (every one on a cycle of ww, wr and rw
    edges, exact; every one an anomaly found names), and per anomaly class the distinct
    transactions of the anomalies the checker kept (a lower bound: one cycle per class and
    strongly connected component, a few anomalies per class)."""
    from replicalab.checkers.txn import check_history, result_json  # native when built

    r = check_history(h, model)
    per_class = {name: len({t for a in found for t in a.txns})
                 for name, found in r.anomalies.items()}
    return {**result_json(r), "anomalous": {**per_class, "any": r.anomalous_txns}}


def isolation(store_url: str) -> dict[str, Any]:
    """Return the isolation of a transactional run: ``requested`` (the URL's ``isolation``
    parameter, None without one), ``promised`` (the model the store's kind record promises
    for this URL: ``serializable``, ``none``, ...) and its documentation ``source``."""
    from replicalab.cluster.kinds import isolation_promise

    asked = parse_qs(urlsplit(store_url).query).get("isolation", [None])[-1]
    try:
        model, source = isolation_promise(store_url)
    except ValueError:
        model, source = "none", ""
    return {"requested": asked, "promised": model, "source": source}


def isolation_words(iso: dict[str, Any]) -> str:
    """Return a run's isolation in words: "serializable requested, serializable promised",
    "none promised"."""
    promised = f"{iso['promised'].replace('-', ' ')} promised"
    return (f"{iso['requested']} requested, {promised}" if iso.get("requested")
            else promised)


def txn_results(name: str, model: str, h: History, store_url: str, opts: ProbeOptions,
                cfg: TxnConfig) -> dict[str, Any]:
    """Return the results of a transactional run: transactions by outcome (with the
    anomalous ones by class; no read and write counts, no ``consistency``), the isolation
    asked for and promised (``isolation``) and the isolation checker's verdict as
    ``results["txn"]`` (``counts``: anomalies found per class, the numbers ``replicalab
    check --json`` gives)."""
    out = envelope(name, store_url, opts, h)
    # its reads and writes are inside transactions: counted as transactions, read at the
    # isolation asked for, never the probe's consistency (eventual by default)
    del out["consistency"], out["ops"]
    out["config"] = {k: v for k, v in {**asdict(opts), **asdict(cfg)}.items()
                     if k != "consistency"}
    out["isolation"] = isolation(store_url)
    out["txn"] = verdict(h, model)
    out["transactions"] = {**txn_counts(h), "anomalous": out["txn"]["anomalous"]}
    return out


def anomaly_rate_per_1000(results: dict[str, Any]) -> dict[str, float]:
    """Return anomalous transactions per 1,000 committed ones, by anomaly class (and
    ``any``)."""
    ok = results["transactions"]["ok"]
    by_class = results["transactions"].get("anomalous", {})
    return {k: 1000.0 * v / ok for k, v in by_class.items()} if ok else {}


def anomaly_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the rows that say what the checker found: anomalies per class as ``check
    --json`` counts them (one per cycle or finding; a cycle class at most one cycle per
    strongly connected component of the dependency graph), the committed transactions that
    take part in some anomaly (exact), and the models ruled out or still possible."""
    t, v = results["transactions"], results["txn"]
    counts = {k: n for k, n in v.get("counts", {}).items() if n}
    if counts:
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        text = ", ".join(f"{k} {n:,}" for k, n in top[:4]) + (
            f" (+{len(top) - 4} more classes)" if len(top) > 4 else "")
    else:
        text = "none" if v.get("valid") is not None else "not checked"
    rows = [("anomalies found, by class", text)]
    ok, anomalous = t["ok"], t.get("anomalous", {}).get("any", 0)
    if counts and ok:
        rows.append(("committed transactions in an anomaly",
                     f"{anomalous:,} of {ok:,} ({1000.0 * anomalous / ok:.1f} per 1,000)"))
    if v.get("valid") == "unknown":
        sizes = ", ".join(str(u["size"]) for u in v.get("unfinished", []))
        rows.append(("cycle search", f"stopped on components of {sizes} transactions: "
                                     "the verdict is unknown"))
    if v.get("not"):
        rows.append(("ruled out", ", ".join(v["not"])))
    elif v.get("possible"):
        rows.append(("consistent with", v["possible"][-1]))
    return rows


def summary_rows(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Return the terminal summary rows: the isolation asked for and promised, the
    transactions by outcome, then what the checker found (:func:`anomaly_rows`)."""
    t = results["transactions"]
    rows = []
    if "isolation" in results:
        rows.append(("isolation", isolation_words(results["isolation"])))
    rows.append(("transactions committed / failed / unknown",
                 f"{t['ok']:,} / {t['fail']:,} / {t['info']:,}"))
    return rows + anomaly_rows(results)


def figures(results: dict[str, Any]) -> dict[str, Any]:
    """Return a run's headline figures for a batch: committed txns, and the anomalous txns
    among them by class (and ``any``) as (count, committed) pairs pooled over runs."""
    t = results["transactions"]
    ok = t["ok"]
    out: dict[str, Any] = {"txns ok": ok, "txns aborted": (t["fail"], ok + t["fail"])}
    for k, n in t.get("anomalous", {}).items():
        out[f"anomalous txns {k}"] = (n, ok)
    return out


def config_from_flags(given: dict[str, Any]) -> TxnConfig:
    """Return the config from the ``probe`` flags given (None: not given); ``length`` sets
    both ``min_length`` and ``max_length`` (transactions of exactly that many operations)."""
    values = {k: v for k, v in given.items() if v is not None}
    length = values.pop("length", None)
    if length is not None:
        if "min_length" in values or "max_length" in values:
            raise ParameterError("length", "sets both {min_length} and {max_length}; give "
                                           "either {length} or those two",
                                 {"length": "length", "min_length": "min_length",
                                  "max_length": "max_length"})
        values["min_length"] = values["max_length"] = int(length)
    if "spacing" in values:
        values["spacing_s"] = values.pop("spacing")
    return TxnConfig(**values)


def flags(write_word: str) -> tuple[Flag, ...]:
    """Return the ``probe`` flags of a transactional workload."""
    return (
        Flag("keys", int, "active keys (fewer = more contention)"),
        Flag("length", int, "micro-operations per transaction (sets --min-length and "
                            "--max-length)", default="1..4"),
        Flag("min_length", int, "fewest micro-operations per transaction"),
        Flag("max_length", int, "most micro-operations per transaction"),
        Flag("read_fraction", float, f"share of micro-operations that read (the rest "
                                     f"{write_word})"),
        Flag("key_dist", str, "uniform or exponential (hot keys)"),
        Flag("clients", int, "concurrent clients"),
        Flag("spacing", float, "pause between a transaction's micro-operations, e.g. 5ms",
             field="spacing_s", duration=True),
        Flag("txns", int, "stop after this many transactions (0: run for --duration)"),
        Flag("max_writes_per_key", int, f"{write_word}s a key takes before a fresh key "
                                        "replaces it"),
        Flag("layout", str, "spread (an item per key) or one-item (every key in one item, "
                            "one partition: Cassandra's txn=lwt)"),
    )




def make_workload(name: str, model: str, domain: str, write_f: str, write_word: str,
                  report_section: str = "") -> Workload:
    """Return the Workload object of one transactional workload."""

    async def generate(store: Store, h: History, opts: ProbeOptions, cfg: TxnConfig,
                       rec: Recorder) -> None:
        await generate_txns(store, h, opts, cfg, rec, domain, write_f)

    def check(h: History, store_url: str, opts: ProbeOptions, cfg: TxnConfig,
              features: frozenset[Feature] = frozenset()) -> dict[str, Any]:
        return txn_results(name, model, h, store_url, opts, cfg)

    generate.__doc__ = f"Drive ``clients`` clients issuing {name} transactions."
    check.__doc__ = f"Return the {name} run's transaction counts and isolation verdict."
    return Workload(name, TxnConfig, generate, check, required_features,
                    done_fraction=done_fraction, flags=flags(write_word),
                    from_flags=config_from_flags,
                    summary_rows=summary_rows, per_op_latency_rows=True,
                    report_section=report_section, figures=figures)

