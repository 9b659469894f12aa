"""Availability of a cut-off region: the scorecard's cells beside ``compare --fault``.

Reads the staleness runs saved by ``replicalab compare --fault "at=5s partition
region=US-W for=8s" --duration 20s`` and by ``replicalab scorecard --only availability``
(full timing: the same fault window), re-checks each history with the current checker, and
prints per store the read availability (eventual / consistent) during the fault and over the
whole run from both, and their differences in percentage points.

Run: .venv/bin/python benchmarks/availability_agreement.py COMPARE_DIR SCORECARD_DIR
     [--region US-W]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from replicalab.checkers.accounting import availability
from replicalab.history.io import load_history


def _runs(root: Path, region: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Return (store scheme, consistency) -> read availability of the staleness runs under
    root whose only fault cuts off ``region``."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for d in sorted((root / "runs").glob("*-staleness-*")):
        h, config = load_history(d)
        spec = config["spec"]
        faults = spec.get("faults") or []
        if len(faults) != 1 or faults[0].get("action") != "partition" or \
                faults[0].get("region") != region:
            continue
        reads = availability(h)["by_f"].get("read", {})
        store = spec["store"].split("://", 1)[0]
        out[(store, spec["options"]["consistency"])] = {
            "during": reads.get("during_faults"), "run": reads.get("overall")}
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("compare_dir", type=Path)
    ap.add_argument("scorecard_dir", type=Path)
    ap.add_argument("--region", default="US-W")
    args = ap.parse_args()
    cmp_, sc = _runs(args.compare_dir, args.region), _runs(args.scorecard_dir, args.region)
    print(f"reads from the cut-off region {args.region}: % of client time served "
          "(compare | scorecard | difference in points)")
    print(f"{'store':<12}{'reads':<12}{'during the fault':<28}{'whole run':<28}")
    for key in sorted(set(cmp_) & set(sc)):
        a, b = cmp_[key], sc[key]
        cells = []
        for k in ("during", "run"):
            diff = (abs(a[k] - b[k]) * 100 if a[k] is not None and b[k] is not None
                    else None)
            cells.append(f"{_pct(a[k])} | {_pct(b[k])} | "
                         f"{'n/a' if diff is None else f'{diff:.1f}'}")
        print(f"{key[0]:<12}{key[1]:<12}{cells[0]:<28}{cells[1]:<28}")


if __name__ == "__main__":
    main()
