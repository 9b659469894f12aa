"""How many `replicalab` processes and report renders the test suite makes, and their CPU.

    git apply benchmarks/suite_commands.patch   # logs each command and each report to /tmp
    rm -f /tmp/cmdlog.jsonl /tmp/reportlog.jsonl
    CI=true python -m pytest -q -n 4 --dist loadgroup
    python benchmarks/suite_commands.py
    git apply -R benchmarks/suite_commands.patch

The patch appends one JSON line per `replicalab` process at its exit (its argv, its own CPU
seconds from getrusage, and which heavy modules it had loaded) to /tmp/cmdlog.jsonl, and one
per report page (the CPU seconds from the page's start to report.html written, its figures,
the test that asked) to /tmp/reportlog.jsonl. Processes that the CLI ran in-process (a test
worker calling the Typer app) log with an empty argv and the worker's whole CPU: left out.
A process killed by a signal logs nothing. (With the patch applied, cli/ is over its line
limit: tests/test_layering.py fails; that failure is the patch's.)
"""

from __future__ import annotations

import collections
import json
from pathlib import Path


def main() -> None:
    """Print commands by verb and reports by test file, CPU seconds first."""
    cmds = [json.loads(line) for line in Path("/tmp/cmdlog.jsonl").read_text().splitlines()]
    cmds = [c for c in cmds if c["argv"]]
    print(f"{len(cmds)} replicalab processes, {sum(c['cpu'] for c in cmds):.1f} CPU s")
    count: collections.Counter[str] = collections.Counter()
    cpu: collections.Counter[str] = collections.Counter()
    for c in cmds:
        count[c["argv"][0]] += 1
        cpu[c["argv"][0]] += c["cpu"]
    for verb, s in cpu.most_common():
        print(f"  {s:7.1f} s {count[verb]:4d}  {verb}")
    mods = collections.Counter(m for c in cmds for m in c["mods"])
    print("  loaded: " + ", ".join(f"{m} {n}" for m, n in mods.most_common()))
    reports = [json.loads(line)
               for line in Path("/tmp/reportlog.jsonl").read_text().splitlines()]
    print(f"{len(reports)} reports, {sum(r['figs'] for r in reports)} figures, "
          f"{sum(r['cpu'] for r in reports):.1f} CPU s")


if __name__ == "__main__":
    main()
