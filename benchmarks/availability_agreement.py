"""Does the scorecard's availability cell say what ``compare``'s probe, run alone, measures?
Checked on a fault whose availability is neither 0 nor 100 %: on etcd, US-W cut off for 8 s
(the writer in US-E keeps a quorum with EU, but a write in flight at the cut times out and
the figure lands between), or the leader crashed for 8 s (``--fault leader``).

The scorecard's figure is read from a saved ``scorecard.json`` (its availability cell, the
fault's consistent-read run: the one whose placement is ``compare``'s, writer in the first
region and reader in the second, or in the cut-off region). The run alone is not built with
the scorecard's code: this script writes out the ``replicalab compare`` command for the same
fault (``--fault "at=5s partition region=US-W for=8s" --duration 20s``, or ``crash
node=LEADER``), then the ``replicalab probe`` command line of the staleness probe that
compare runs for consistent reads, field by field as ``experiments/compare.py`` sets them
(separate clients, writer in the first region, reader in the second, a write a second, 50
reads a second, 1 s periods, seed 1), and runs that command with the CLI on a cluster it
starts, ``--repeats`` times (finding the leader again before each run: a fault may move
it). Both read the history the same way (``availability.by_f.{read,write}.during_faults``).

Real runs differ: leader elections take a randomized time, a write in flight at the cut may
or may not time out. One run's resolution is the spacing of one client's operations as a
share of the fault (a consistent read each ~170 ms over 8 s is ~2 points, a write each
second 12.5 points). The verdict: the scorecard's figure lies within the range of the runs
alone, widened by one resolution step.

    python benchmarks/availability_agreement.py --scorecard docs/data/scorecard-2026-11-27.json \\
        --kind etcd --fault US-W --repeats 3
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from replicalab.cluster import base
from replicalab.cluster.etcd import transfer_leadership
from replicalab.regions import region_set

AT_S, FOR_S, DURATION_S = 5.0, 8.0, 20.0  # the full scorecard's fault timing
EXE = [sys.executable, "-m", "replicalab.cli.main"]


def scorecard_figure(sc: dict[str, Any], kind: str, fault_name: str) -> dict[str, Any]:
    """Return the fault ``fault_name`` ("leader", or a region cut off) of ``kind``'s
    availability cell: its label, the window, and the consistent-read run's reads/writes
    shares (0-1) during the fault; ValueError naming the fix if the cell is missing."""
    cell = next((c for c in sc["cells"] if c["store"] == kind and c["prop"] == "availability"),
                None)
    if cell is None or cell["grade"] == "grey":
        raise ValueError(f"the scorecard has no measured availability cell for {kind!r}; "
                         f"run `replicalab scorecard --kinds {kind} --only availability`")
    fault = next((f for f in cell["figures"]["faults"]
                  if ("crashed_node" in f if fault_name == "leader"
                      else f.get("cut_region") == fault_name)), None)
    if fault is None:
        raise ValueError(f"{kind}'s availability cell has no fault {fault_name!r}; pass "
                         "--fault leader or a region the scorecard cut off")
    if fault["window"] != f"{AT_S:g}s-{AT_S + FOR_S:g}s":
        raise ValueError(f"the scorecard's fault window is {fault['window']}, not the full "
                         f"run's {AT_S:g}s-{AT_S + FOR_S:g}s; pass a full (not --quick) run")
    c = fault["consistent"]
    if c.get("leader_before") is None:
        raise ValueError("the scorecard does not say where the leader sat before the fault "
                         "(a run from before the leader was recorded per fault); re-run it")
    return {"fault": fault["fault"], "window": fault["window"], "reads": c["reads"],
            "leader": c["leader_before"],
            "writes": c["writes"], "recovery_ms": c.get("recovery_ms"), "run": c["run"]}


def fault_text(fault_name: str, leader: int) -> str:
    """Return the --fault text of ``fault_name`` ("leader": crash node ``leader``; else cut
    off that region), at the full scorecard's timing."""
    what = f"crash node={leader}" if fault_name == "leader" else f"partition region={fault_name}"
    return f"at={AT_S:g}s {what} for={FOR_S:g}s"


def compare_command(kind: str, regions: str, fault: str) -> str:
    """Return the ``replicalab compare`` command this agreement re-runs by hand."""
    return (f"replicalab compare --kinds {kind} --regions {regions} --fault \"{fault}\" "
            f"--duration {DURATION_S:g}s")


def probe_argv(url: str, cluster: str, regions: str, fault: str, out: Path) -> list[str]:
    """Return the ``replicalab probe`` arguments of the staleness probe the compare command
    above runs for consistent reads (experiments/compare.py ``_staleness_one``), written out
    here by hand."""
    rs = region_set(regions).regions
    return ["probe", "--store", url, "--cluster", cluster, "--workload", "staleness",
            "--placement", "separate-clients", "--writer-region", rs[0],
            "--reader-region", rs[1 % len(rs)], "--consistency", "consistent",
            "--duration", f"{DURATION_S:g}s", "--write-interval", "1s", "--read-rate", "50",
            "--period", "1s", "--seed", "1",
            "--fault", fault,
            "--out", str(out), "--json"]


def resolution(by_f: dict[str, Any]) -> float:
    """Return one operation's spacing as a share of the fault: the fault's length over the
    number of operations one client completes in that time before the fault (1 if none)."""
    t, ops = by_f["t_s"], by_f["ok_ops"]
    before = [n for ts, n in zip(t, ops, strict=False) if 1.0 <= ts < AT_S]  # after warm-up
    rate = sum(before) / len(before) if before else 0.0
    return 1.0 if rate <= 0 else min(1.0, 1.0 / (rate * FOR_S))


def run_alone(argv: list[str]) -> dict[str, Any]:
    """Run the probe command with the CLI; return its availability figures."""
    p = subprocess.run([*EXE, *argv], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise ValueError(f"the probe failed ({p.returncode}): {p.stderr.strip()[-400:]}")
    res = json.loads(p.stdout)
    av = res["availability"]["by_f"]
    return {"reads": av["read"]["during_faults"], "writes": av["write"]["during_faults"],
            "read_resolution": resolution(av["read"]),
            "write_resolution": resolution(av["write"]), "run": res["run_dir"]}


def pct(x: float | None) -> str:
    """Return a share (0-1) as a percentage with one decimal."""
    return "n/a" if x is None else f"{100 * x:.1f} %"


def verdict(score: float, alone: list[float], step: float) -> bool:
    """Return whether ``score`` lies within the runs alone's range widened by ``step``."""
    return min(alone) - step - 1e-9 <= score <= max(alone) + step + 1e-9


def main(argv: list[str] | None = None) -> int:
    """Run the agreement and print a Markdown report; return 0 if both figures agree,
    1 if not, 2 on bad input."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scorecard", type=Path, required=True,
                    help="a full scorecard's run directory or its scorecard.json")
    ap.add_argument("--kind", default="etcd",
                    help="etcd (its leader is moved where the scorecard's run had it)")
    ap.add_argument("--fault", default="US-W",
                    help="leader (crash the leader) or a region to cut off (default US-W)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("runs"),
                    help="directory that receives the runs alone")
    a = ap.parse_args(argv)
    file = a.scorecard / "scorecard.json" if a.scorecard.is_dir() else a.scorecard
    try:
        sc = json.loads(file.read_text())
        score = scorecard_figure(sc, a.kind, a.fault)
    except (OSError, ValueError, KeyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if a.kind != "etcd":
        print(f"error: --kind {a.kind}: only etcd's leader can be moved where the scorecard "
              "had it; pass --kind etcd", file=sys.stderr)
        return 2
    regions = sc["regions"]
    reader = region_set(regions).regions[1]
    if a.fault not in ("leader", reader):
        print(f"error: --fault {a.fault}: compare's reader sits in {reader}; pass --fault "
              f"{reader} or --fault leader", file=sys.stderr)
        return 2
    name = f"agree-{a.kind}"
    t0 = time.monotonic()
    rows = []
    c = base.up(a.kind, 3, regions, name=name)
    try:
        a.out.mkdir(parents=True, exist_ok=True)
        for i in range(a.repeats):
            # the same fault means the leader where the scorecard's run had it (earlier
            # faults had moved it there); etcd's MoveLeader puts it back there
            lead = base.find_leader(name)
            if lead.index != score["leader"]:
                transfer_leadership(c, score["leader"])
                lead = base.find_leader(name)
            if not lead.is_leader or lead.index != score["leader"]:
                raise ValueError(f"{a.kind}: could not make n{score['leader']} the leader")
            fault = fault_text(a.fault, lead.index)
            args = probe_argv(c.url, name, regions, fault, a.out)
            r = run_alone(args)
            r.update(leader=lead.index, leader_region=lead.region,
                     compare=compare_command(a.kind, regions, fault),
                     probe="replicalab " + shlex.join(args[:-3]))
            rows.append(r)
            print(f"run {i + 1}: reads {pct(r['reads'])}, writes {pct(r['writes'])} "
                  f"(leader n{lead.index} in {lead.region})", file=sys.stderr)
    finally:
        base.down(name)
    wall_s = time.monotonic() - t0
    read_step = max(r["read_resolution"] for r in rows)
    write_step = max(r["write_resolution"] for r in rows)
    ok_r = verdict(score["reads"], [r["reads"] for r in rows], read_step)
    ok_w = verdict(score["writes"], [r["writes"] for r in rows], write_step)
    print(f"{a.kind}, {score['fault']} ({score['window']} of a {DURATION_S:g} s probe), "
          f"consistent-read probe (writer in {region_set(regions).regions[0]}, reader in "
          f"{region_set(regions).regions[1]}); {a.repeats} runs alone in {wall_s:.0f} s\n")
    print("| run | leader (at the start) | reads served during the fault | writes served "
          "during the fault |")
    print("|---|---|---|---|")
    lead_region = region_set(regions).regions[score["leader"]]
    print(f"| scorecard ({file.name}) | n{score['leader']} ({lead_region}) | "
          f"{pct(score['reads'])} | "
          f"{pct(score['writes'])} |")
    for i, r in enumerate(rows, 1):
        print(f"| alone {i} | n{r['leader']} ({r['leader_region']}) | {pct(r['reads'])} | "
              f"{pct(r['writes'])} |")
    print(f"\nresolution of one run: reads {pct(read_step)}, writes {pct(write_step)} "
          "(one operation's spacing over the fault)")
    print(f"reads: scorecard {pct(score['reads'])} vs alone "
          f"{pct(min(r['reads'] for r in rows))}-{pct(max(r['reads'] for r in rows))}: "
          f"{'agree' if ok_r else 'DISAGREE'}")
    print(f"writes: scorecard {pct(score['writes'])} vs alone "
          f"{pct(min(r['writes'] for r in rows))}-{pct(max(r['writes'] for r in rows))}: "
          f"{'agree' if ok_w else 'DISAGREE'}")
    print(f"\ncompare's command (run {len(rows)}): {rows[-1]['compare']}")
    print(f"the probe written out from it: {rows[-1]['probe']}")
    return 0 if ok_r and ok_w else 1


if __name__ == "__main__":
    sys.exit(main())
