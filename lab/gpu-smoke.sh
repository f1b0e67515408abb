#!/usr/bin/env bash
# The smoke matrix on this host's GPU through the case runner: cold (empty build cache), warm
# (20 timed launcher calls per case), the first verdict of one case twice from the filled cache
# (each a new pytest process), and crash isolation (an injected __trap() in one case; the
# cases after it must pass). Then the per-case overhead of the warm run.
#
#   lab/gpu-smoke.sh      (reports and logs go to $OUT, default ./gpu-out)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
rm -rf /tmp/tcsmoke
export TILECONFORM_CACHE_DIR=/tmp/tcsmoke
. "$(dirname "$0")/gpu-env.sh"
P=(python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-matrix matrices/smoke-sm90.yaml --tile-device hardware)
t(){ local s; s=$(date +%s%N); "$@"; echo "rc=$? $(( ($(date +%s%N)-s)/1000000 )) ms"; }
nproc; free -g | head -2
t "${P[@]}" --tile-report "$OUT/cold.json" > "$OUT/cold.log" 2>&1; tail -3 "$OUT/cold.log"
t "${P[@]}" --tile-timing-iters 20 --tile-report "$OUT/warm.json" > "$OUT/warm.log" 2>&1; tail -2 "$OUT/warm.log"
t "${P[@]}" -k bf16-128x128x64-c1x1x1-none --tile-report "$OUT/first.json" > "$OUT/first.log" 2>&1; tail -1 "$OUT/first.log"
t "${P[@]}" -k bf16-128x128x64-c1x1x1-none --tile-report "$OUT/first2.json" > "$OUT/first2.log" 2>&1; tail -1 "$OUT/first2.log"
# the fault comes from a test plugin (tests/helpers/plugins/tileconform_faults.py), not from the package
PYTHONPATH="$PWD/tests/helpers/plugins:$PYTHONPATH" t "${P[@]}" -p tileconform_faults \
  --tile-inject-fault sm90-bf16-128x128x64-c1x1x1-none --tile-report "$OUT/fault.json" > "$OUT/fault.log" 2>&1; tail -4 "$OUT/fault.log"
python3 benchmarks/case_overhead.py "$OUT/warm.json"
