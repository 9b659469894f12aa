"""Transactionality: isolation observed against isolation promised (issue 27, seed 001's
"atomically modify an object's state, without interference from competing writers").

Per way the store runs transactions (its kind record's ``transactions``: PostgreSQL's
SERIALIZABLE and REPEATABLE READ, etcd's Txn, ZooKeeper's multi, Redis's WATCH/MULTI/EXEC,
Cassandra's reads plus a logged batch; a ``sim://`` store runs the micro-operations one by
one), ``probe --workload list-append`` runs on a hot key set with a few concurrent clients
for the plan's ``txn_s``, and the Elle-style checker (``checkers/txn``) finds Adya's
anomalies in the history. The grade compares them with the promised model:

* red: an anomaly the promised model forbids (any cycle under serializable; G0, G1,
  G-single, G-nonadjacent or a lost update under snapshot isolation; a real-time cycle
  under strict serializability);
* yellow: anomalies the promise allows (write skew, G2-item, under snapshot isolation;
  anything where no isolation is promised), a store that promises no isolation even when
  the run saw none, or a cycle search that stopped before it finished;
* green: no anomaly where isolation is promised.

A store with several ways (PostgreSQL's two levels) gets one cell: each way graded, the
worst grade is the cell's, its value one sentence per way. A store without transactions
gets a grey cell saying so.

This replaces the earlier conditional-increments and torn-write figures: a lost update
is one of the anomaly classes the checker reports (``lost-update``), a torn multi-key write
shows as an aborted or intermediate read or a read-skew cycle, and the list-append run
covers every kind through the one capability (``transact``) where the old runs needed
conditional writes and multi-element reads.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from replicalab.checkers.txn import check_history, result_json, verdict
from replicalab.checkers.txn.models import canonical
from replicalab.cluster.kinds import Promise, StoreKind, TxnVariant, isolation_promise
from replicalab.experiments import cells, measure
from replicalab.experiments.plan import Plan, Subject
from replicalab.experiments.promises import kind_promise
from replicalab.experiments.property import Context, NotMeasured, Property
from replicalab.history import load_history
from replicalab.workloads.base import ProbeOptions
from replicalab.workloads.runner import ProbeSpec
from replicalab.workloads.txn import TxnConfig

MODEL = "list-append"
TXN_LENGTH = (1, 4)  # micro-operations per transaction: reads and appends, half each

WORDS = {"G0": "dirty write (G0)", "G1a": "aborted read (G1a)",
         "G1b": "intermediate read (G1b)", "G1c": "circular information flow (G1c)",
         "G-single-item": "read skew (G-single-item)", "G-single": "read skew (G-single)",
         "G-nonadjacent-item": "G-nonadjacent cycle", "G-nonadjacent": "G-nonadjacent cycle",
         "G2-item": "write skew (G2-item)", "lost-update": "lost update",
         "internal": "internal inconsistency", "future-read": "future read",
         "dirty-update": "dirty update", "garbage-read": "read of a value nobody wrote",
         "incompatible-order": "incompatible version orders",
         "duplicate-elements": "duplicate elements",
         "cyclic-versions": "cyclic version order"}
"""Anomaly classes in a newcomer's words, Elle's name beside."""
CYCLES = ("G0", "G1c", "G-single-item", "G-single", "G-nonadjacent-item", "G-nonadjacent",
          "G2-item")
"""The cycle classes (their process and real-time variants aside)."""
_ORDER = ("G0", "G1a", "G1b", "G1c", "internal", "future-read", "dirty-update",
          "garbage-read", "incompatible-order", "duplicate-elements", "lost-update",
          "G-single-item", "G-single", "G-nonadjacent-item", "G-nonadjacent", "G2-item")
MODEL_WORDS = {"strict-serializable": "strict serializable", "serializable": "serializable",
               "snapshot-isolation": "snapshot isolation", "repeatable-read": "repeatable read",
               "read-committed": "read committed", "none": "no isolation"}
_RANK = {"grey": 0, "green": 1, "yellow": 2, "red": 3}


def anomaly_words(name: str) -> str:
    """Return an anomaly class (``G2-item``, ``G-single-realtime``) in words."""
    for suffix, how in (("-realtime", " in real-time order"), ("-process", " in one "
                                                                           "client's order")):
        if name.endswith(suffix):
            return WORDS.get(name.removesuffix(suffix), name) + how
    return WORDS.get(name, name)


def _severity(name: str) -> tuple[int, int]:
    base = _base(name)
    return (_ORDER.index(base) if base in _ORDER else len(_ORDER), name != base)


def with_params(url: str, params: str) -> str:
    """Return ``url`` with the query parameters ``params`` (``a=1&b=2``) appended."""
    if not params:
        return url
    return url + ("&" if urlsplit(url).query or url.endswith("?") else "?") + params


def ways(kind: StoreKind | None, url: str) -> tuple[TxnVariant, ...]:
    """Return the ways to run transactions on this store and what each promises: the kind
    record's, or for a sim:// store (or a kind that records no ways) the isolation its
    URL promises (``cluster.kinds.isolation_promise``)."""
    if kind is not None and kind.transactions:
        return kind.transactions
    try:
        model, source = isolation_promise(url)
    except ValueError:
        model, source = "none", "its store kind record (no isolation recorded)"
    label = "micro-operations one by one" if url.startswith("sim://") else "transactions"
    promise = ("no isolation: each micro-operation is a call of its own, as an application "
               "without transactions runs them" if model == "none" else MODEL_WORDS.get(
                   model, model))
    return (TxnVariant(label, "", model, promise, source),)


def _promise(kind: StoreKind | None) -> Promise:
    if kind is None:
        v = ways(None, "sim://")[0]
        return Promise(f"{v.label}: {v.promise}", v.source)
    return kind_promise(kind, "transactionality")


# --- measuring ----------------------------------------------------------------------------

def txn_config(plan: Plan, region: str | None) -> TxnConfig:
    """Return the list-append run the plan asks for: a hot key set, a few clients."""
    return TxnConfig(keys=plan.txn_keys, clients=plan.txn_clients, min_length=TXN_LENGTH[0],
                     max_length=TXN_LENGTH[1], read_fraction=0.5, region=region)


def checked(h: Any) -> dict[str, Any]:
    """Return the checker's verdict on a list-append history as the cell keeps it:
    validity, anomaly counts per class, the models ruled out (weakest first) and still
    possible, the first anomaly of each class explained, and what a stopped search left."""
    r = result_json(check_history(h, MODEL))
    first = {t: {"txns": ans[0]["txns"], "explanation": ans[0]["explanation"]}
             for t, ans in r["anomalies"].items() if ans}
    return {"valid": r["valid"], "anomaly_types": r["anomaly_types"], "counts": r["counts"],
            "not": r["not"], "also_not": r["also_not"], "possible": r["possible"],
            "first": first, "unfinished": r["unfinished"], "check_s": r["check_s"],
            "engine": r["engine"]}


def _measure(ctx: Context) -> dict[str, Any]:
    t = ctx.target
    assert t is not None
    label = ctx.subject.label
    if "transactions" not in ctx.features:
        raise NotMeasured(f"{label} offers no transactions (its adapter does not declare "
                          "the transactions feature), so there is no isolation to measure")
    plan, cfg = ctx.plan, txn_config(ctx.plan, t.writer_region)
    out: dict[str, Any] = {"runs": [], "variants": [],
                           "workload": {"name": MODEL, "clients": cfg.clients,
                                        "keys": cfg.keys, "length": list(TXN_LENGTH),
                                        "duration_s": plan.txn_s, "region": cfg.region}}
    for v in ways(ctx.subject.kind, t.url):
        run = measure.probe(ProbeSpec(store=with_params(t.url, v.url_params), workload=MODEL,
                                      options=ProbeOptions(duration_s=plan.txn_s,
                                                           seed=ctx.seed), config=cfg),
                            ctx.out, ctx.progress(f"list-append transactions, {v.label}"))
        if run.error:
            raise ValueError(f"the list-append run at {v.label} stopped: {run.error}")
        # the saved history is checked again here: the run's results keep the verdict but
        # neither every class's count nor the explained cycles a cell shows (native: ms)
        h, _ = load_history(run.run_dir)
        txns = run.results["transactions"]
        out["variants"].append({
            "label": v.label, "url_params": v.url_params, "model": v.model,
            "promise": v.promise, "source": v.source,
            "txns": {k: txns[k] for k in ("ok", "fail", "info")},
            "check": checked(h), "run": measure.rel(run, ctx.base)})
        out["runs"].append(measure.rel(run, ctx.base))
    return out


# --- grading (pure) -----------------------------------------------------------------------

def judge(v: dict[str, Any]) -> tuple[str, str, str]:
    """Return (grade, sentence, caveat) for one way's run ``v`` (a ``variants`` entry):
    red when the anomalies rule out the promised model, yellow when they are allowed (or
    nothing is promised, or the search stopped), green when none appeared, grey when no
    transaction committed."""
    c, ok, model = v["check"], v["txns"]["ok"], v["model"]
    promised = MODEL_WORDS.get(model, model)
    counts = {k: n for k, n in c["counts"].items() if n}
    if ok == 0:
        return ("grey", f"no transaction committed ({v['txns']['fail']:,} aborted, "
                f"{v['txns']['info']:,} unknown): nothing to judge", "no committed transaction")
    of = f"in {ok:,} committed transactions"
    ruled_out = {canonical(m) for m in set(c["not"]) | set(c["also_not"])}
    if model != "none" and canonical(model) in ruled_out:
        bad = sorted((k for k in counts if _breaks(k, model)), key=_severity) or sorted(
            counts, key=_severity)
        return ("red", f"NOT {promised}: {_list(bad, counts)} {of}",
                f"{promised} forbids {', '.join(anomaly_words(k) for k in _headline(bad))}")
    if counts:
        found = _list(sorted(counts, key=_severity), counts)
        if model == "none":
            return ("yellow", f"no isolation, as documented: {found} {of}",
                    "no isolation promised: these anomalies are expected")
        return ("yellow", f"{found} {of}, as {promised} allows",
                f"{promised} allows " + ", ".join(
                    anomaly_words(k) for k in _headline(sorted(counts, key=_severity))))
    if c["valid"] == "unknown":
        sizes = ", ".join(str(u["size"]) for u in c["unfinished"])
        return ("yellow", f"no anomaly found {of}, but the cycle search stopped early",
                f"the cycle search did not finish on components of {sizes} transactions")
    if model == "none":
        return ("yellow", f"no anomaly {of}, though no isolation is promised",
                "no isolation promised: a clean run is luck, not a guarantee")
    extra = " (real-time order included)" if model == "strict-serializable" else ""
    return ("green", f"{promised} as promised: no anomaly {of}{extra}", "")


def _breaks(anomaly: str, model: str) -> bool:
    """Return whether ``anomaly`` alone rules out ``model``."""
    not_, also, _ = verdict([anomaly])
    return canonical(model) in {canonical(m) for m in not_ + also}


def _base(name: str) -> str:
    return name.removesuffix("-realtime").removesuffix("-process")


def _headline(names: list[str]) -> list[str]:
    """Return ``names`` without the process and real-time variants of a class also in it
    (the same kind of cycle; the details list them)."""
    return [k for k in names if k == _base(k) or _base(k) not in names]


def _list(names: list[str], counts: dict[str, int], most: int = 3) -> str:
    """Return the classes ``names`` (most severe first) with their counts in words."""
    names = _headline(names)
    shown = [f"{anomaly_words(k)} {counts[k]:,} time{'s' if counts[k] != 1 else ''}"
             for k in names[:most]]
    more = len(names) - most
    return ", ".join(shown) + (f" and {more} more class{'es' if more > 1 else ''}"
                               if more > 0 else "")


def details(v: dict[str, Any], workload: dict[str, Any]) -> list[str]:
    """Return the evidence lines of one way's run: what ran, outcomes, anomaly counts per
    class, the weakest models ruled out, the checker's time and any unfinished search."""
    c, t = v["check"], v["txns"]
    how = f" ({v['url_params']})" if v["url_params"] else ""
    lines = [f"{v['label']}{how}, promises {MODEL_WORDS.get(v['model'], v['model'])}: "
             f"{workload['name']}, {workload['clients']} clients on {workload['keys']} hot "
             f"keys, {workload['length'][0]}-{workload['length'][1]} micro-operations each, "
             f"{workload['duration_s']:g} s: {t['ok']:,} committed, {t['fail']:,} aborted "
             f"by the store (conflicts it refused), {t['info']:,} unknown"]
    counts = {k: n for k, n in c["counts"].items() if n}
    lines.append("anomalies by class: " + (", ".join(
        f"{k} {counts[k]:,}" for k in sorted(counts, key=_severity)) if counts else "none")
        + " (a cycle class counts at most one cycle per strongly connected component)")
    if c["not"]:
        lines.append(f"weakest models ruled out: {', '.join(c['not'])}"
                     + (f" (so also {', '.join(c['also_not'])})" if c["also_not"] else ""))
    else:
        strongest = c["possible"][-1] if c["possible"] else "none"
        lines.append(f"no consistency model ruled out: the history is consistent with "
                     f"{strongest}")
    for u in c["unfinished"]:
        lines.append(f"cycle search stopped on a component of {u['size']} transactions "
                     f"({u.get('limit', '')}): it might still hold "
                     f"{', '.join(u.get('classes', u.get('might_hold', [])))}")
    lines.append(f"checked in {c['check_s']:.2f} s ({c['engine']} engine)")
    return lines


def counterexample(variants: list[dict[str, Any]]) -> str:
    """Return the first anomaly of the worst way explained step by step: of the classes
    that break the promise (all, where none is promised), a cycle class first, the most
    severe first; "" when there is none."""
    graded = sorted(((judge(v)[0], i, v) for i, v in enumerate(variants)),
                    key=lambda x: (-_RANK[x[0]], x[1]))
    for _, _, v in graded:
        first = v["check"]["first"]
        if not first:
            continue
        names = sorted(first, key=lambda k: (v["model"] != "none" and not _breaks(k, v["model"]),
                                             _base(k) not in CYCLES, _severity(k)))
        k = names[0]
        return (f"{v['label']}, {anomaly_words(k)} among {', '.join(first[k]['txns'])}: "
                + "; ".join(first[k]["explanation"]))
    return ""


def headline(v: dict[str, Any]) -> str:
    """Return one way's run in at most a few words naming what decides its grade (see
    :func:`judge`): the anomaly class that breaks the promise and how often, Elle's name
    (its words are in the evidence), or the committed transactions where none appeared."""
    c, ok, model = v["check"], v["txns"]["ok"], v["model"]
    promised = MODEL_WORDS.get(model, model)
    counts = {k: n for k, n in c["counts"].items() if n}
    if ok == 0:
        return "no transaction committed"
    ruled_out = set(c["not"]) | set(c["also_not"])
    if model != "none" and model in ruled_out:
        bad = sorted((k for k in counts if _breaks(k, model)), key=_severity) or sorted(
            counts, key=_severity)
        return f"NOT {promised}: {bad[0]} {_times(counts[bad[0]])}" if bad else \
            f"NOT {promised}"
    if counts:
        top = sorted(counts, key=_severity)[0]
        if model == "none":
            return f"{top} {_times(counts[top])}; no isolation, as documented"
        return f"{top} {_times(counts[top])}, as {promised} allows"
    if c["valid"] == "unknown":
        return "no anomaly found; the cycle search stopped early"
    if model == "none":
        return "no anomaly, though no isolation is promised"
    return f"{promised} as promised: no anomaly in {ok:,} transactions"


def _times(n: int) -> str:
    return f"{n:,} time{'s' if n != 1 else ''}"


def isolation_cell(store: str, m: dict[str, Any], p: Promise) -> cells.Cell:
    """Grade each way's run against its promise (see :func:`judge`) into one cell: the
    worst grade, one sentence per way (prefixed with its label when there are several)."""
    judged = [(v, *judge(v)) for v in m["variants"]]
    several = len(judged) > 1
    value = "; ".join(f"{v['label']}: {s}" if several else s for v, _, s, _ in judged)
    grades = [g for _, g, _, _ in judged]
    real = [g for g in grades if g != "grey"]
    grade = max(real, key=_RANK.__getitem__) if real else "grey"
    caveat = "; ".join((f"{v['label']}: {c}" if several else c) for v, g, _, c in judged
                       if c and g != "green")
    lines = [line for v in m["variants"] for line in details(v, m["workload"])]
    # the worst way decides the grade: its headline, with its label when there are several
    worst = max(judged, key=lambda j: _RANK[j[1]])[0] if judged else None
    head = "no transactions run" if worst is None else headline(worst)
    if several and worst is not None:
        head = f"{worst['label']}: {head}"
    return cells.Cell(store, "transactionality", value, grade, p.text, p.source, caveat, lines,
                      m["runs"], counterexample=counterexample(m["variants"]),
                      reason=value if grade == "grey" else "",
                      figures={"variants": m["variants"], "workload": m["workload"]},
                      headline=head)


def _grade(ctx: Context, m: dict[str, Any], p: Promise) -> cells.Cell:
    return isolation_cell(ctx.subject.label, m, p)


def _steps(subject: Subject, plan: Plan, regions: int, asked: tuple[str, ...]) -> int:
    return len(ways(subject.kind, subject.label))  # one list-append run per way


PROPERTY = Property("transactionality", "isolation observed (list-append, Adya's anomalies) "
                    "against isolation promised", _measure, _grade, _steps, promise=_promise)
