"""Cells of the chart from measurements (pure: no I/O): the value shown, its colour against
the goal or the documented promise, the evidence behind it and the runs that produced it.

Grades: ``green`` meets the goal/promise, ``yellow`` meets it with a caveat (a documented
weakness seen, or the lab's limit), ``red`` misses it, ``grey`` not measured (the reason is
in the cell).

Each cell has a ``headline`` of at most :data:`HEADLINE_WORDS` words naming the figure that
decides its grade ("eventual reads from US-E: p99 85 ms, goal 50 ms"), what the chart shows
in the cell; the ``value`` (one sentence per part, every figure with its denominator) and
the evidence lines are what the cell opens on.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from replicalab.cluster.kinds import Promise
from replicalab.experiments.plan import READ_GOAL_P99_MS, WRITE_GOAL_P99_MS

GRADES = ("green", "yellow", "red", "grey")
HEADLINE_WORDS = 12
"""The most words a cell's headline has."""


@dataclass
class Cell:
    """One cell: store row, property column, value, grade, its headline and evidence."""

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
    # grey because its run failed (a server that would not start, a store that stopped
    # answering), not because the property does not apply to this store: the scorecard
    # then exits non-zero
    failed: bool = False
    # at most HEADLINE_WORDS words naming the figure that decides the grade (the chart's
    # cell); "" only in cells saved before headlines
    headline: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the cell as saved in scorecard.json."""
        return asdict(self)


def not_measured(store: str, prop: str, p: Promise, reason: str, failed: bool = False
                 ) -> Cell:
    """Return a grey cell that says why it holds no measurement (``failed``: its run
    failed, rather than the property not applying to this store)."""
    return Cell(store, prop, f"not measured: {reason}", "grey", p.text, p.source,
                reason=reason, failed=failed,
                headline="not measured: the run failed" if failed else
                f"not measured: {_first_clause(reason)}")


def _first_clause(reason: str) -> str:
    # "the simulated store keeps no disk: neither ..." -> "the simulated store keeps no disk"
    return re.split(r":\s|;|\(| - ", reason, maxsplit=1)[0].strip()


def pct(x: float | None) -> str:
    """Return a fraction as a percentage with one decimal ("n/a" for None)."""
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _share(x: float | None) -> str:
    # a share of time as a reader says it: 0% and 100% whole, anything else to 0.1
    if x is None:
        return "not measured"
    return "0%" if x == 0 else "100%" if x == 1 else f"{100 * x:.1f}%"


def _ms(x: float | None) -> str:
    if x is None:
        return "n/a"
    return ("under 0.1 ms" if 0 <= x < 0.05 else f"{x:.3g} ms" if x < 10 else
            f"{x:.0f} ms")


def _place(region: str) -> str:
    # a one-region store's region is called "local": say so as a reader would
    return "the local region" if region == "local" else region


def _s(x: float) -> str:
    return f"{x:g} s"


def _n(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else many or one + 's'}"


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
            details.append(f"{v}s from {_place(region)}: p50 {_ms(x['p50_ms'])}, p99 "
                           f"{_ms(x['p99_ms'])}, p99.9 {_ms(x['p999_ms'])} over "
                           f"{_n(x['count'], 'operation')} (goal: p99 under {goal:g} ms)")
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
        by_v: dict[str, list[str]] = {}
        for r, v in misses:
            by_v.setdefault(v, []).append(r)
        caveat = "p99 over the goal: " + "; ".join(f"{v}s from {', '.join(rs)}"
                                                   for v, rs in by_v.items())
    n = min((x["count"] for vs in m["regions"].values() for x in vs.values()), default=0)
    if n < 1000:
        caveat = (caveat + "; " if caveat else "") + (
            f"a p99.9 of {_n(n, 'operation')} per variant is the largest few samples")
    headline = _latency_headline(m, misses, grade)
    regions = list(m["regions"])
    where = (f"from {_n(len(regions), 'region')} ({', '.join(regions)})"
             if len(regions) > 1 else f"from {_place(regions[0])}" if regions else "")
    value = (f"slowest p99 {where}, {n:,} operations of each kind: reads "
             f"{_ms(worst_read)} (goal under {READ_GOAL_P99_MS:g} ms), writes "
             f"{_ms(worst_write)} (goal under {WRITE_GOAL_P99_MS:g} ms)")
    return Cell(store, "latency", value, grade, p.text, p.source, caveat, details, m["runs"],
                figures={"regions": m["regions"]}, headline=headline)


def _goal(variant: str) -> float:
    return READ_GOAL_P99_MS if variant in _READS else WRITE_GOAL_P99_MS


def _latency_headline(m: dict[str, Any], misses: list[tuple[str, str]], grade: str) -> str:
    """Name the p99 that decides the grade: the worst miss against its goal (red: of an
    eventual read or a write; yellow: of a consistent read), else the closest to its goal."""
    deciding = [(r, v) for r, v in misses if grade == "yellow" or v != "consistent read"]
    pool = deciding or [(r, v) for r, vs in m["regions"].items() for v in vs]
    if not pool:
        return "no latency measured"
    region, v = max(pool, key=lambda rv: m["regions"][rv[0]][rv[1]]["p99_ms"] / _goal(rv[1]))
    p99 = _ms(m["regions"][region][v]["p99_ms"])
    where = "locally" if region == "local" else f"from {region}"
    if misses:
        return f"{v}s {where}: p99 {p99}, goal {_goal(v):g} ms"
    return f"all under goal; closest: {v}s {where}, p99 {p99}"


# --- durability ---------------------------------------------------------------------------

def _lost(r: dict[str, Any]) -> str:
    if not r["checked"]:
        why = "; ".join(r.get("complaints", [])) or "no read succeeded"
        return (f"none readable: the store did not come back within 30 s after the restart "
                f"({r['acknowledged']:,} acknowledged writes; {why})")
    return f"{r['lost']:,} of {r['acknowledged']:,} acknowledged writes lost"


def _lost_short(r: dict[str, Any]) -> str:
    if not r["checked"]:
        return (f"did not come back, so none of {r['acknowledged']:,} acknowledged writes "
                "could be read")
    return f"lost {r['lost']:,} of {r['acknowledged']:,} acknowledged writes"


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
    parts = [f"{v['label'].split(' (')[0]}: a kill -9 of {killed} {_lost_short(v['kill'])}"
             f", a power loss of every node {_lost_short(v['power_loss'])}"
             for v in m["variants"]]
    value = "; ".join(parts)
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
                m["runs"], figures={"variants": m["variants"]},
                headline=_durability_headline(m, grade))


def _durability_headline(m: dict[str, Any], grade: str) -> str:
    """Name the loss that decides the grade: the most a setting lost that its documentation
    says it keeps (red), or that it may lose (yellow); a setting that did not come back."""
    worst: tuple[float, str] | None = None
    for v in m["variants"]:
        name = v["label"].split(" (")[0]
        for key, what, keeps in (("kill", "kill -9", v["keeps_on_kill"]),
                                 ("power_loss", "power loss", v["keeps_on_power_loss"])):
            r = v[key]
            if (grade == "red") != keeps:
                continue  # red: only promised settings decide; yellow: the lossy ones
            if not r["checked"]:
                worst = max(worst or (-1.0, ""), (2.0, f"{name}: no restart after {what}"))
            elif r["lost"]:
                share = r["lost"] / max(r["acknowledged"], 1)
                worst = max(worst or (-1.0, ""), (share, f"{name}: {what} lost {r['lost']:,} "
                                                         f"of {r['acknowledged']:,} writes"))
    if grade == "green" or worst is None:
        return "no acknowledged write lost to kill -9 or power loss"
    return worst[1] + (", as documented" if grade == "yellow" else "")


# --- availability -------------------------------------------------------------------------

def _window_s(f: dict[str, Any]) -> tuple[float, float]:
    # "1.5s-4.5s" as saved in the fault's figures -> (start, end) in s
    a, b = f["window"].split("-")
    return float(a.rstrip("s")), float(b.rstrip("s"))


def _is_cut(f: dict[str, Any]) -> bool:
    return f.get("cut_region") is not None or "cut off" in f["fault"]


def _while(f: dict[str, Any]) -> str:
    # the fault as the clause after "while": "US-W was cut off", "primary n0 was down"
    if f.get("cut_region") is not None:
        return f"{f['cut_region']} was cut off"
    if f.get("crashed_nodes"):  # the first crash moved the leader: the second took the new one
        a, b = f["crashed_nodes"]
        return (f"{f.get('crashed_role', 'node')} was down (n{a} in the eventual-read run, "
                f"n{b}, the {f.get('crashed_role', 'node')} by then, in the consistent-read run)")
    if f.get("crashed_node") is not None:
        return f"{f.get('crashed_role', 'node')} n{f['crashed_node']} was down"
    return f["fault"]


def _recovery(e: dict[str, Any], c: dict[str, Any]) -> str:
    rec = [x["recovery_ms"] for x in (e, c)]
    if any(r is None for r in rec):
        return "a client was still not served again when the run ended"
    worst = max(rec)
    return ("no client failed, so there was nothing to recover from" if worst == 0 else
            f"every client was served again {_ms(worst)} after the heal")


def availability_cell(store: str, m: dict[str, Any], p: Promise,
                      local_reads_promised: bool) -> Cell:
    """Grade availability by time during each fault: green if reads and writes stayed above
    95 %, red if eventual reads at a cut-off replica fell below 50 % where local reads are
    promised, yellow otherwise (an outage the documentation announces)."""
    details, values, low, red = [], [], [], []
    for f in m["faults"]:
        e, c = f["eventual"], f["consistent"]
        writes = e["writes"]
        start_s, end_s = _window_s(f)
        writer = _place(e.get("writer_region", f["region"]))
        readers = _place(f["region"])
        what = _while(f)
        details.append(f"{what} from {_s(start_s)} to {_s(end_s)} into the run, readers in "
                       f"{readers}: eventual reads served {_share(e['reads'])} of that "
                       f"time, consistent reads {_share(c['reads'])}, writes from {writer} "
                       f"{_share(writes)}; over the whole run {_share(e.get('reads_run'))}, "
                       f"{_share(c.get('reads_run'))} and {_share(e.get('writes_run'))}; "
                       f"{_recovery(e, c)}")
        values.append(f"while {what} ({_s(end_s - start_s)}): eventual reads in "
                      f"{readers} served {_share(e['reads'])} of the time, consistent "
                      f"reads {_share(c['reads'])}, writes from {writer} {_share(writes)}")
        under = [f"{name} {_share(x)}" for name, x in (
            ("eventual reads", e["reads"]), ("consistent reads", c["reads"]),
            ("writes", writes)) if x is not None and x < 0.95]
        if under:
            low.append(f"while {what}, {', '.join(under)}")
        if (_is_cut(f) and local_reads_promised and e["reads"] is not None
                and e["reads"] < 0.5):
            red.append(f"eventual reads in cut-off {f['region']} were served "
                       f"{_share(e['reads'])} of the time, though its replica promises "
                       "local reads")
    for n in m.get("notes", []):
        details.append(n)
    if not values:
        values.append("no fault could be injected")
    grade = "red" if red else "yellow" if low else "green"
    caveat = ("; ".join(red) if red else
              ("served less than 95% of the time: " + "; ".join(low)) if low else "")
    bars = [[f"{f['fault']} ({f['window'].replace('s-', '-')}): {name}", v]
            for f in m["faults"]
            for name, v in (("eventual reads", f["eventual"]["reads"]),
                            ("consistent reads", f["consistent"]["reads"]),
                            ("writes", f["eventual"]["writes"]))]
    return Cell(store, "availability", "; ".join(values), grade, p.text, p.source, caveat,
                details, m["runs"], figures={"faults": m["faults"]},
                headline=_availability_headline(m, grade, local_reads_promised),
                chart={"title": "Share of the time served while each fault lasted",
                       "bars": bars})


def _short_fault(f: dict[str, Any]) -> str:
    # "US-W cut off", "primary n0 down"
    if f.get("cut_region") is not None:
        return f"{f['cut_region']} cut off"
    if f.get("crashed_node") is not None:
        return f"{f.get('crashed_role', 'node')} n{f['crashed_node']} down"
    return str(f["fault"])


def _availability_headline(m: dict[str, Any], grade: str, local_reads_promised: bool
                           ) -> str:
    """Name the share that decides the grade: the lowest eventual-read share in a cut-off
    region (red), the lowest share under 95 % (yellow), else the lowest of all."""
    shares = []
    for f in m["faults"]:
        e, c = f["eventual"], f["consistent"]
        region = _place(f["region"])
        writer = _place(e.get("writer_region", f["region"]))
        for what, x, red in ((f"eventual reads in {region}", e["reads"],
                              _is_cut(f) and local_reads_promised),
                             (f"consistent reads in {region}", c["reads"], False),
                             (f"writes from {writer}", e["writes"], False)):
            if x is not None and (grade != "red" or red):
                shares.append((x, what, _short_fault(f)))
    if not shares:
        return "no fault could be injected"
    x, what, fault = min(shares, key=lambda s: s[0])
    if grade == "green":
        return f"every fault: reads and writes served at least {_share(x)}"
    return f"{what} served {_share(x)} while {fault}"


# --- consistency --------------------------------------------------------------------------

_VERDICT = {True: "linearizable", False: "NOT linearizable"}


def _verdict(valid: Any) -> str:
    return _VERDICT.get(valid, "not decided within the checker's time limit")


def _stale(x: dict[str, Any]) -> str:
    n = x["reads"]
    if x["stale_fraction"] is None or not n:
        return "no read answered"
    stale = round(x["stale_fraction"] * n)
    if not stale:
        return f"none of {n:,} stale"
    text = f"{stale:,} of {n:,} stale ({pct(x['stale_fraction'])})"
    if x.get("stale_window_ms") is not None:
        w = _ms(x["stale_window_ms"])
        text += f" for {'' if w.startswith('under') else 'up to '}{w} after a write"
    return text


def consistency_cell(store: str, m: dict[str, Any], p: Promise,
                     strong_promised: bool) -> Cell:
    """Grade staleness, session guarantees and linearizability: red if the register test
    finds reads promised linearizable not to be, yellow if eventual reads were stale or
    broke a session guarantee (documented) or consistent reads were not shown linearizable
    where nothing promised it, green if every read was fresh and linearizable."""
    e, c, s = m["eventual"], m["consistent"], m["session"]
    re_, rc = m["register_eventual"], m["register_consistent"]
    details = [
        f"eventual reads at the replica in {_place(s['region'])}: {_stale(e)} (the time "
        "is the median over writes of the last stale read after each)",
        f"consistent reads there: {_stale(c)}",
        f"one client in {_place(s['region'])}: read-your-writes violated by "
        f"{s['ryw_violations']:,} of {_n(s['ryw_reads'], 'read')}, monotonic reads violated "
        f"by {s['mr_violations']:,} of {_n(s['mr_pairs'], 'pair')} of successive reads",
        f"register test, eventual reads: {_verdict(re_['valid'])} "
        f"({_n(re_['ops'], 'operation')} checked)",
        f"register test, consistent reads: {_verdict(rc['valid'])} "
        f"({_n(rc['ops'], 'operation')} checked)"]
    value = (f"eventual reads in {_place(s['region'])}: {_stale(e)}; consistent reads: "
             f"{_stale(c)}; register test: eventual reads {_verdict(re_['valid'])}, "
             f"consistent reads {_verdict(rc['valid'])}")
    counter = rc["explanation"] if rc["valid"] is False else re_["explanation"]
    weak_bad = ((e["stale_fraction"] or 0) > 0 or re_["valid"] is not True
                or s["ryw_violations"] or s["mr_violations"])
    if strong_promised and rc["valid"] is False:
        grade = "red"
        caveat = "consistent reads were promised linearizable and were not"
    elif rc["valid"] is not True:
        grade = "yellow"
        caveat = ("consistent reads not shown linearizable (" + (
            "nothing promised it)" if not strong_promised else
            f"the register test was {_verdict(rc['valid'])})"))
    elif weak_bad:
        grade = "yellow"
        what = [x for x, bad in (
            (f"stale in {round((e['stale_fraction'] or 0) * e['reads']):,} of "
             f"{_n(e['reads'], 'read')}", (e["stale_fraction"] or 0) > 0),
            ("not linearizable" if re_["valid"] is False else "not shown linearizable",
             re_["valid"] is not True)) if bad]
        seen = [f"eventual reads were {' and '.join(what)}"] if what else []
        if s["ryw_violations"]:
            seen.append(f"one client missed its own write in {s['ryw_violations']:,} of "
                        f"{_n(s['ryw_reads'], 'read')} (read-your-writes)")
        if s["mr_violations"]:
            seen.append(f"one client read an older value after a newer one in "
                        f"{s['mr_violations']:,} of {_n(s['mr_pairs'], 'pair')} "
                        "(monotonic reads)")
        caveat = "; ".join(seen) + ": documented for eventual reads"
    else:
        grade, caveat = "green", ""
    headline = _consistency_headline(m, grade, strong_promised)
    if (c["stale_fraction"] or 0) > 0:
        # the staleness checker counts a read that missed a write still in flight; the
        # register test (linearizability) is the judge of consistent reads
        caveat += ("; " if caveat else "") + ("consistent reads counted stale missed a write "
                                              "still in flight (allowed; the register test "
                                              "judges them)")
    return Cell(store, "consistency", value, grade, p.text, p.source, caveat, details,
                m["runs"], counterexample=counter or "", figures={
                    k: m[k] for k in ("eventual", "consistent", "session", "register_eventual",
                                      "register_consistent")}, headline=headline)


def _consistency_headline(m: dict[str, Any], grade: str, strong_promised: bool) -> str:
    """Name what decides the grade, in the order the rules look: consistent reads'
    register verdict, then eventual reads' staleness, linearizability, sessions."""
    e, s = m["eventual"], m["session"]
    re_, rc = m["register_eventual"], m["register_consistent"]
    if grade == "green":
        return "every read fresh; both register tests linearizable"
    if rc["valid"] is not True:
        verdict = ("NOT linearizable" if rc["valid"] is False
                   else "linearizability not decided in time")
        return (f"consistent reads {verdict}" + (", though promised" if grade == "red" else
                                                 "; none promised" if not strong_promised
                                                 else ""))
    if (e["stale_fraction"] or 0) > 0:
        where = _place(s["region"])
        return (f"eventual reads in {where}: {pct(e['stale_fraction'])} stale"
                + (f", up to {_ms(e['stale_window_ms'])}" if e.get("stale_window_ms")
                   is not None else ""))
    if re_["valid"] is not True:
        return f"eventual reads {_verdict(re_['valid'])}"
    if s["ryw_violations"]:
        return f"read-your-writes broken in {s['ryw_violations']:,} of {s['ryw_reads']:,} reads"
    return (f"monotonic reads broken in {s['mr_violations']:,} of {s['mr_pairs']:,} pairs")


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
        details.append(f"from {region}: eventual read p50 {_ms(ev['p50_ms'])} "
                       f"({'served locally' if is_local else 'served from another region'})"
                       f", put p50 {_ms(put['p50_ms'])} = {n:.2f} round trips to the nearest "
                       f"other region ({rtt:g} ms)")
    counts = {r: node_regions.count(r) for r in dict.fromkeys(node_regions)}
    if counts and set(counts.values()) == {1}:
        where = f"one replica in each of {', '.join(counts)}"
    else:
        where = ("replicas: " + ", ".join(f"{k} in {r}" for r, k in counts.items())
                 if counts else "replicas in one place")
    details.insert(0, where)
    value = (f"{where}; eventual reads served locally in {sum(local)} of "
             f"{_n(len(local), 'region')}; a write waits " + (
                 f"{min(trips):.1f} to {max(trips):.1f}" if f"{min(trips):.1f}" !=
                 f"{max(trips):.1f}" else f"{min(trips):.1f}")
             + " round trips to the nearest other region" if trips else where)
    grade = "green" if local and all(local) else "yellow"
    caveat = "" if grade == "green" else "eventual reads are not local in every region"
    headline = (f"eventual reads served locally in {sum(local)} of "
                f"{_n(len(local), 'region')}" if local else "no region measured")
    return Cell(store, "geography", value, grade, p.text, p.source, caveat, details,
                latency["runs"], figures={"nearest_rtt_ms": nearest_rtt_ms},
                headline=headline)
