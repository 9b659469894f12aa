"""Cells of the chart from measurements (pure: no I/O): the value shown, its colour against
the goal or the documented promise, the evidence behind it and the runs that produced it.

Colours: ``green`` meets the goal/promise, ``yellow`` meets it with a caveat (a documented
weakness seen, or the lab's limit), ``red`` misses it, ``grey`` not measured (the reason is
in the cell).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments.plan import READ_GOAL_P99_MS, WRITE_GOAL_P99_MS

GRADES = ("green", "yellow", "red", "grey")


@dataclass
class Cell:
    """One cell: store row, property column, value, colour and its evidence."""

    store: str
    prop: str
    value: str
    grade: str
    promise: str
    source: str
    caveat: str = ""
    details: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    counterexample: str = ""
    reason: str = ""
    figures: dict[str, Any] = field(default_factory=dict)
    # a bar chart of fractions the report draws under the evidence: {"title": str,
    # "bars": [[label, fraction or None], ...]} (any property may give one)
    chart: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the cell as saved in scorecard.json."""
        return asdict(self)


def not_measured(store: str, prop: str, p: Promise, reason: str) -> Cell:
    """Return a grey cell that says why it holds no measurement."""
    return Cell(store, prop, f"n/a: {reason}", "grey", p.text, p.source, reason=reason)


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3g} ms" if x < 10 else f"{x:.0f} ms"


# --- latency ------------------------------------------------------------------------------

_READS = ("eventual read", "consistent read")
_WRITES = ("put", "conditional put")


def latency_cell(store: str, m: dict[str, Any], p: Promise) -> Cell:
    """Grade p99s against seed 001's goals: green if every read and write from every region
    meets them, yellow if only consistent reads miss somewhere, red otherwise."""
    details, misses, worst_read, worst_write = [], [], 0.0, 0.0
    for region, variants in m["regions"].items():
        for v, x in variants.items():
            goal = READ_GOAL_P99_MS if v in _READS else WRITE_GOAL_P99_MS
            details.append(f"from {region}, {v}: p50 {_ms(x['p50_ms'])}, p99 "
                           f"{_ms(x['p99_ms'])}, p99.9 {_ms(x['p999_ms'])} ({x['count']} ops; "
                           f"goal p99 < {goal:g} ms)")
            if x["p99_ms"] >= goal:
                misses.append((region, v))
            if v in _READS:
                worst_read = max(worst_read, x["p99_ms"])
            else:
                worst_write = max(worst_write, x["p99_ms"])
    if not misses:
        grade, caveat = "green", ""
    elif all(v == "consistent read" for _, v in misses):
        grade = "yellow"
        caveat = ("consistent reads miss the 50 ms goal from "
                  + ", ".join(sorted({r for r, _ in misses})) + "; eventual reads meet it")
    else:
        grade = "red"
        caveat = "misses: " + "; ".join(f"{v} from {r}" for r, v in misses)
    n = min((x["count"] for vs in m["regions"].values() for x in vs.values()), default=0)
    if n < 1000:
        caveat = (caveat + "; " if caveat else "") + (
            f"p99.9 from {n} operations per variant is the largest few samples")
    value = f"worst p99: read {_ms(worst_read)}, write {_ms(worst_write)}"
    return Cell(store, "latency", value, grade, p.text, p.source, caveat, details, m["runs"],
                figures={"regions": m["regions"]})


# --- durability ---------------------------------------------------------------------------

def _lost(r: dict[str, Any]) -> str:
    if not r["checked"]:
        why = "; ".join(r.get("complaints", [])) or "no read succeeded"
        return (f"none readable: the store did not come back within 30 s after the restart "
                f"({r['acknowledged']:,} acknowledged writes; {why})")
    return f"{r['lost']:,} of {r['acknowledged']:,} acknowledged writes lost"


def durability_cell(store: str, m: dict[str, Any], p: Promise) -> Cell:
    """Grade lost acknowledged writes: red if a setting documented to lose nothing lost
    some (or a count could not be checked), yellow if the lab's setting loses writes as
    documented while a safe alternative lost none, green if every setting lost none."""
    details, broken, lossy, unchecked = [], [], [], []
    killed = m.get("killed", "the leader")
    for v in m["variants"]:
        for key, what, keeps in (("kill", f"kill -9 of {killed}", v["keeps_on_kill"]),
                                 ("power_loss", "power loss of every node",
                                  v["keeps_on_power_loss"])):
            r = v[key]
            details.append(f"{v['label']}, {what}: {_lost(r)}"
                           f" (documented: {'none lost' if keeps else 'may lose'})")
            if not r["checked"] and keeps:
                unchecked.append(f"{v['label']}, {what}")
            elif not r["checked"]:
                lossy.append(f"{v['label']} (did not come back after a {what})")
            elif r["lost"] and keeps:
                broken.append(f"{v['label']}, {what}")
            elif r["lost"]:
                lossy.append(v["label"])
    parts = []
    for v in m["variants"]:
        k, pl = v["kill"], v["power_loss"]
        parts.append(f"{v['label'].split(' (')[0]}: kill "
                     f"{k['lost'] if k['checked'] else 'no restart'} / power "
                     f"{pl['lost'] if pl['checked'] else 'no restart'}")
    value = "lost: " + "; ".join(parts)
    if broken or unchecked:
        grade = "red"
        caveat = "; ".join([f"lost writes its documentation says it keeps: {b}" for b in broken]
                           + [f"did not come back, so nothing could be read back: {u}"
                              for u in unchecked])
    elif lossy:
        grade = "yellow"
        caveat = ("loses acknowledged writes as documented under "
                  + ", ".join(dict.fromkeys(lossy)) + "; the safe setting lost none")
        if any(not v[k]["checked"] for v in m["variants"] for k in ("kill", "power_loss")):
            caveat += " (a setting whose documentation warns of loss did not restart at all)"
    else:
        grade, caveat = "green", ""
    return Cell(store, "durability", value, grade, p.text, p.source, caveat, details,
                m["runs"], figures={"variants": m["variants"]})


# --- availability -------------------------------------------------------------------------

def availability_cell(store: str, m: dict[str, Any], p: Promise,
                      local_reads_promised: bool) -> Cell:
    """Grade availability by time during each fault: green if reads and writes stayed above
    95 %, red if eventual reads at a cut-off replica fell below 50 % where local reads are
    promised, yellow otherwise (an outage the documentation announces)."""
    details, values, low, red = [], [], [], []
    for f in m["faults"]:
        e, c = f["eventual"], f["consistent"]
        writes = e["writes"]
        rec = [x["recovery_ms"] for x in (e, c) if x["recovery_ms"] is not None]
        details.append(f"{f['fault']} ({f['window']}), readers in {f['region']}: eventual "
                       f"reads {pct(e['reads'])}, consistent reads {pct(c['reads'])}; writes "
                       f"from {e.get('writer_region', f['region'])} {pct(writes)} of the "
                       f"time while it lasted (whole run {pct(e.get('reads_run'))}, "
                       f"{pct(c.get('reads_run'))}, {pct(e.get('writes_run'))}); recovered "
                       f"{_ms(max(rec)) if rec else 'n/a'} after the heal")
        values.append(f"{f['fault'].split(' ')[0] if 'cut' not in f['fault'] else 'cut-off'}:"
                      f" r {pct(e['reads'])}/{pct(c['reads'])} w {pct(writes)}")
        for name, x in (("eventual reads", e["reads"]), ("consistent reads", c["reads"]),
                        ("writes", writes)):
            if x is not None and x < 0.95:
                low.append(f"{name} {pct(x)} ({f['fault']})")
        if ("cut off" in f["fault"] and local_reads_promised and e["reads"] is not None
                and e["reads"] < 0.5):
            red.append(f"eventual reads at the cut-off replica {pct(e['reads'])}")
    for n in m.get("notes", []):
        details.append(n)
    grade = "red" if red else "yellow" if low else "green"
    caveat = "; ".join(red) if red else ("below 95 %: " + "; ".join(low)) if low else ""
    bars = [[f"{f['fault']} ({f['window']}): {name}", v] for f in m["faults"]
            for name, v in (("eventual reads", f["eventual"]["reads"]),
                            ("consistent reads", f["consistent"]["reads"]),
                            ("writes", f["eventual"]["writes"]))]
    return Cell(store, "availability", "; ".join(values), grade, p.text, p.source, caveat,
                details, m["runs"], figures={"faults": m["faults"]},
                chart={"title": "Availability by time during each fault", "bars": bars})


# --- consistency --------------------------------------------------------------------------

def consistency_cell(store: str, m: dict[str, Any], p: Promise,
                     strong_promised: bool) -> Cell:
    """Grade staleness, session guarantees and linearizability: red if the register test
    finds reads promised linearizable not to be, yellow if eventual reads were stale or
    broke a session guarantee (documented) or consistent reads were not shown linearizable
    where nothing promised it, green if every read was fresh and linearizable."""
    e, c, s = m["eventual"], m["consistent"], m["session"]
    re_, rc = m["register_eventual"], m["register_consistent"]
    verdict = {True: "linearizable", False: "NOT linearizable"}
    details = [
        f"eventual reads at the {s['region']} replica: {pct(e['stale_fraction'])} stale of "
        f"{e['reads']:,}, window {_ms(e['stale_window_ms'])} (median per write)",
        f"consistent reads there: {pct(c['stale_fraction'])} stale of {c['reads']:,}",
        f"one client in {s['region']}: read-your-writes violated {s['ryw_violations']} of "
        f"{s['ryw_reads']} reads, monotonic reads violated {s['mr_violations']} of "
        f"{s['mr_pairs']} pairs",
        f"register test, eventual reads: {verdict.get(re_['valid'], re_['valid'])} "
        f"({re_['ops']:,} ops)",
        f"register test, consistent reads: {verdict.get(rc['valid'], rc['valid'])} "
        f"({rc['ops']:,} ops)"]
    value = (f"stale {pct(e['stale_fraction'])} (window {_ms(e['stale_window_ms'])}) / "
             f"{pct(c['stale_fraction'])}; lin {'yes' if re_['valid'] is True else 'no'} / "
             f"{'yes' if rc['valid'] is True else 'no'}")
    counter = rc["explanation"] if rc["valid"] is False else re_["explanation"]
    weak_bad = ((e["stale_fraction"] or 0) > 0 or re_["valid"] is not True
                or s["ryw_violations"] or s["mr_violations"])
    if strong_promised and rc["valid"] is False:
        grade = "red"
        caveat = "consistent reads were promised linearizable and were not"
    elif rc["valid"] is not True:
        grade = "yellow"
        caveat = ("consistent reads not shown linearizable (" + (
            "not promised)" if not strong_promised else f"verdict {rc['valid']})"))
    elif weak_bad:
        grade = "yellow"
        caveat = "eventual reads were stale or not linearizable, as documented"
    else:
        grade, caveat = "green", ""
    if (c["stale_fraction"] or 0) > 0:
        # the staleness checker counts a read that missed a write still in flight; the
        # register test (linearizability) is the judge of consistent reads
        caveat += ("; " if caveat else "") + ("consistent reads counted stale missed a write "
                                              "still in flight (allowed; the register test "
                                              "judges them)")
    return Cell(store, "consistency", value, grade, p.text, p.source, caveat, details,
                m["runs"], counterexample=counter or "", figures={
                    k: m[k] for k in ("eventual", "consistent", "session", "register_eventual",
                                      "register_consistent")})


# --- geography ----------------------------------------------------------------------------

def geography_cell(store: str, latency: dict[str, Any], node_regions: tuple[str, ...],
                   nearest_rtt_ms: dict[str, float], p: Promise) -> Cell:
    """Return where replicas sit, whether eventual reads are served locally from each
    region (p50 under half the nearest remote RTT) and how many WAN round trips a write
    pays (put p50 over the nearest remote RTT). Green if reads are local everywhere."""
    details, local, trips = [], [], []
    for region, variants in latency["regions"].items():
        rtt = nearest_rtt_ms.get(region)
        ev, put = variants.get("eventual read"), variants.get("put")
        if rtt is None or ev is None or put is None:
            continue
        is_local = ev["p50_ms"] < rtt / 2
        local.append(is_local)
        n = put["p50_ms"] / rtt
        trips.append(n)
        details.append(f"{region}: eventual read p50 {_ms(ev['p50_ms'])} "
                       f"({'local' if is_local else 'remote'}), put p50 {_ms(put['p50_ms'])} = "
                       f"{n:.2f} x the nearest remote RTT ({rtt:g} ms)")
    where = ", ".join(f"{r} x{node_regions.count(r)}" for r in dict.fromkeys(node_regions))
    details.insert(0, f"replicas: {where or 'one place'}")
    value = (f"replicas {where}; reads local in {sum(local)}/{len(local)} regions; writes "
             f"{min(trips):.1f}-{max(trips):.1f} RTT" if trips else f"replicas {where}")
    grade = "green" if local and all(local) else "yellow"
    caveat = "" if grade == "green" else "eventual reads are not local in every region"
    caveat += ("; " if caveat else "") + ("the lab delays replication links, not client "
                                          "links: a client far from the primary would add "
                                          "its own round trip")
    return Cell(store, "geography", value, grade, p.text, p.source, caveat, details,
                latency["runs"], figures={"nearest_rtt_ms": nearest_rtt_ms})
