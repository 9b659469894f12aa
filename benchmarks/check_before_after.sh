#!/usr/bin/env bash
# The etcd end-to-end row of BENCHMARKS.md, the code of commit BEFORE (default 2a55586)
# against this checkout, alternately, N pairs (default 4): bench_check_command.py --cases
# etcd --repeats 9 each time, the older code from `git archive` on PYTHONPATH (with a
# one-line shim: the console script now calls cli.main.entry), the same native build.
#   benchmarks/check_before_after.sh [BEFORE] [N]
set -eu
BEFORE=${1:-2a55586}
N=${2:-4}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$BEFORE" src | tar -x -C "$tmp"
grep -q "^def entry" "$tmp/src/replicalab/cli/main.py" || echo "entry = main" >> "$tmp/src/replicalab/cli/main.py"
echo "| run (UTC) | code | load | command ms | our check ms | Porcupine check ms | command / Porcupine | check / Porcupine | etcd_000 alone ms |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
for _ in $(seq "$N"); do
  for code in before after; do
    if [ "$code" = before ]; then export PYTHONPATH="$tmp/src"; else unset PYTHONPATH; fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    row=$(.venv/bin/python benchmarks/bench_check_command.py --repeats 9 --cases etcd 2>&1 \
          | grep -E "102 histories|etcd_000 alone" | awk -F'|' '{print $8, $10, $12, $13, $14}' | tr '\n' ' ')
    set -- $row
    echo "| $(date -u +%H:%M) | $code | $load | $1 | $2 | $3 | $4 | $5 | $6 |"
  done
done
