"""Fekete's experiment: how often transactions are anomalous, against the number of keys
(contention) and the transaction length, per store and isolation level.

For every ``--store LABEL=URL`` it runs one batch of ``replicalab probe --workload
list-append`` over ``--sweep keys=... --sweep length=...`` (the probe's own sweep machinery:
one run per point, each checked by the transactional checker), then reads every batch's
``batch.json`` and writes one PNG (anomalous transactions per 1,000 committed, against the
number of keys, one line per length, one panel per store/level) and a Markdown table of the
rate per anomaly class (over all points of each store/level).

Example (what docs/transactions.md records):

    python benchmarks/fekete_sweep.py --txns 1500 --clients 6 \\
        --store 'pg-rc=postgresql://...?isolation=read-committed&lock_timeout_ms=20' \\
        --store 'sim-primary=sim://primary' --png docs/img/fekete-sweep.png \\
        --table runs/fekete/table.md

``--from-batches DIR`` skips the runs and plots the batches already under DIR.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

CLASS_PREFIX = "anomalous txns "


def run_store(label: str, url: str, keys: str, lengths: str, txns: int, clients: int,
              out: Path, workload: str) -> Path:
    """Run one sweep batch for ``url`` under ``out/label``; return its batch.json path."""
    target = out / label
    target.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "replicalab.cli.main", "probe", "--workload", workload,
           "--store", url, "--txns", str(txns), "--clients", str(clients),
           "--duration", "30m", "--sweep", f"keys={keys}", "--sweep", f"length={lengths}",
           "--out", str(target), "--json"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{label}: probe failed ({done.returncode}): "
                         f"{(done.stderr or done.stdout).strip()[-400:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"{label}: {summary['runs_done']} runs in {time.perf_counter() - t0:.0f} s "
          f"-> {summary['batch_dir']}", file=sys.stderr)
    return Path(summary["batch_dir"]) / "batch.json"


def rates(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """Return one row per sweep point: keys, length, committed txns, and per anomaly class
    (and ``any``) the anomalous transactions per 1,000 committed."""
    rows = []
    for p in batch["points"]:
        merged = p["merged"]
        ok = int(sum(r["figures"].get("txns ok", 0) or 0 for r in p["runs"]))
        row: dict[str, Any] = {"keys": int(p["point"]["keys"]),
                               "length": int(p["point"]["length"]), "ok": ok, "classes": {}}
        for name, fig in merged.items():
            if name.startswith(CLASS_PREFIX) and fig.get("pooled", {}).get("p") is not None:
                row["classes"][name[len(CLASS_PREFIX):]] = 1000.0 * fig["pooled"]["p"]
        rows.append(row)
    return rows


def plot(results: dict[str, list[dict[str, Any]]], png: Path, title: str) -> None:
    """Write one panel per store/level: anomalous txns per 1,000 against keys, a line per
    transaction length."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    cols = min(3, n)
    rows_n = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.2 * cols, 3.4 * rows_n), squeeze=False,
                             sharey=True)
    for ax, (label, rows) in zip(axes.flat, results.items(), strict=False):
        for length in sorted({r["length"] for r in rows}):
            pts = sorted((r["keys"], r["classes"].get("any", 0.0)) for r in rows
                         if r["length"] == length)
            ax.plot([k for k, _ in pts], [max(v, 0.0) for _, v in pts], marker="o",
                    label=f"length {length}")
        ax.set_xscale("log", base=2)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("keys (fewer = more contention)")
        ax.grid(alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("anomalous txns per 1,000")
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)


def table(results: dict[str, list[dict[str, Any]]]) -> str:
    """Return the Markdown tables: per store/level, anomalous txns per 1,000 committed (any
    class) with a row per length and a column per key count, then the classes seen, each
    with its rate over all of that store's points."""
    out = []
    for label, rows in results.items():
        keys = sorted({r["keys"] for r in rows})
        lengths = sorted({r["length"] for r in rows})
        at = {(r["length"], r["keys"]): r for r in rows}
        out.append(f"**{label}** — anomalous txns per 1,000 committed (any class)\n")
        out.append("| length \\ keys | " + " | ".join(str(k) for k in keys) + " |")
        out.append("|---|" + "---|" * len(keys))
        for n in lengths:
            cells = [f"{at[(n, k)]['classes'].get('any', 0.0):.1f}" if (n, k) in at else "-"
                     for k in keys]
            out.append(f"| {n} | " + " | ".join(cells) + " |")
        ok = sum(r["ok"] for r in rows)
        per_class: dict[str, float] = {}
        for r in rows:
            for c, rate in r["classes"].items():
                if c != "any":
                    per_class[c] = per_class.get(c, 0.0) + rate * r["ok"] / 1000.0
        seen = ", ".join(f"{c} {1000.0 * n / ok:.1f}" for c, n in sorted(per_class.items())
                         if n) if ok else ""
        out.append(f"\n{ok:,} committed over {len(rows)} points; by class, per 1,000 over "
                   f"all points: {seen or 'none'}\n")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--store", action="append", default=[], help="LABEL=URL, repeatable")
    ap.add_argument("--keys", default="2,4,8,16,32")
    ap.add_argument("--lengths", default="1,2,4,8")
    ap.add_argument("--txns", type=int, default=1500, help="transactions per sweep point")
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--workload", default="list-append")
    ap.add_argument("--out", type=Path, default=Path("runs/fekete"))
    ap.add_argument("--from-batches", type=Path, default=None,
                    help="plot the batch.json files under this directory instead of running")
    ap.add_argument("--png", type=Path, default=Path("runs/fekete/fekete-sweep.png"))
    ap.add_argument("--table", type=Path, default=None, help="write the Markdown table here")
    args = ap.parse_args()
    batches: dict[str, Path] = {}
    if args.from_batches is not None:
        for path in sorted(args.from_batches.glob("*/*/batch.json")):
            batches[path.parent.parent.name] = path
    for spec in args.store:
        label, sep, url = spec.partition("=")
        if not sep:
            raise SystemExit(f"--store {spec!r}: give LABEL=URL")
        batches[label] = run_store(label, url, args.keys, args.lengths, args.txns,
                                   args.clients, args.out, args.workload)
    if not batches:
        raise SystemExit("nothing to plot: give --store LABEL=URL or --from-batches DIR")
    results = {label: rates(json.loads(path.read_text())) for label, path in batches.items()}
    plot(results, args.png, f"{args.workload}: anomalous transactions per 1,000 committed "
                            f"({args.clients} clients)")
    text = table(results)
    if args.table is not None:
        args.table.parent.mkdir(parents=True, exist_ok=True)
        args.table.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
