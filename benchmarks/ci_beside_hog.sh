#!/usr/bin/env bash
# The suite beside a CPU hog, as issue 38 asks: a fresh clone of this checkout's HEAD in
# /tmp/hog$N, CI=true .ci/run beside one `python3 -c 'while True: pass'` (bounded: 40 min),
# the hog stopped at the end; start, commit, result and wall seconds in /tmp/hog$N.log.
#   benchmarks/ci_beside_hog.sh N
set -u
N=${1:?give a run number}
SRC=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "/tmp/hog$N"
git clone -q "$SRC" "/tmp/hog$N"
cd "/tmp/hog$N" || exit 2
timeout 2400 python3 -c 'while True: pass' &
HOG=$!
start=$(date +%s)
echo "start $(date -u +%H:%M:%S) commit $(git rev-parse --short HEAD) load $(cut -d' ' -f1-3 /proc/loadavg)" > "/tmp/hog$N.log"
CI=true PYTEST_ADDOPTS=--durations=30 bash .ci/run >> "/tmp/hog$N.log" 2>&1
rc=$?
kill "$HOG" 2>/dev/null
echo "rc=$rc total $(( $(date +%s) - start )) s end $(date -u +%H:%M:%S)" >> "/tmp/hog$N.log"
exit $rc
