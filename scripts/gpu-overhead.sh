#!/usr/bin/env bash
# The per-case overhead at DeepSeek-V3 prefill size on a GPU host (BENCHMARKS.md): the cases of
# benchmarks/dsv3-prefill.yaml (GEMM 1 and GEMM 2 at 16,384 tokens, PDL on and off) through every
# hardware stage (run, 8 graph replays, 3 repeats) and TIMING timed calls, then
# benchmarks/case_overhead.py: each case's duration minus kernel_ms x its kernel runs.
#
#   [TIMING=5] scripts/gpu-overhead.sh      (reports go to $OUT, default ./gpu-out)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
timing=${TIMING:-5}
. "$(dirname "$0")/gpu-env.sh"
start=$(date +%s)
python3 -m pytest "${plugins[@]}" -q -rA -p no:xdist --tile-matrix benchmarks/dsv3-prefill.yaml \
  --tile-device hardware --tile-timing-iters "$timing" --tile-report "$OUT/overhead-dsv3.json" \
  > "$OUT/overhead-dsv3.log" 2>&1
echo "exit $? in $(( $(date +%s) - start )) s"
tail -14 "$OUT/overhead-dsv3.log"
python3 benchmarks/case_overhead.py "$OUT/overhead-dsv3.json" --json "$OUT/overhead-dsv3-summary.json"
