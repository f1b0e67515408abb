#!/usr/bin/env bash
# Issue 7's figures for a whole matrix on this host: the cold build and run (from an empty
# build cache, in slices that each fit one device call, the cache kept between them), then
# warm reruns of everything with one worker and with one worker per GPU.
#
#   [LIMIT=S] scripts/gpu-matrix-timing.sh cold MATRIX KEYWORD NAME    # one slice; run each slice once
#   scripts/gpu-matrix-timing.sh warm MATRIX KEYWORD NAME    # after the slices, same machine
#
# Cold slices use the host's cores as the plugin sizes them (cores and RAM) and record their
# expectations with --tile-update (nothing changes unless a verdict does). Warm reruns time 20
# launcher calls per case (kernel_ms), so per-case overhead = case duration - kernel time.
# Everything goes to $OUT/NAME.tgz, re-packed after every step.
set -uo pipefail
phase=$1 matrix=$2
out=${OUT:-$PWD/gpu-out}
export TILECONFORM_CACHE_DIR=/tmp/tc-matrix
. "$(dirname "$0")/gpu-env.sh"
pytest=(python3 -m pytest "${plugins[@]}" -q --tile-matrix "$matrix" --tile-device hardware)
if [ "$phase" = cold ]; then
  keyword=$3 name=$4
  work=/tmp/gpu-work/$name
  mkdir -p "$work"
  { nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
    nvcc --version | tail -1; echo "cpus $(nproc), $(free -g | awk '/Mem/{print $2}') GB"; } > "$work/$name-device.txt"
  timer=()
  if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -v); fi  # peak RSS of the largest process
  # LIMIT=S: interrupt pytest after S seconds (it still writes its report): a device call's end
  if [ -n "${LIMIT:-}" ]; then timer=(timeout -s INT "$LIMIT" "${timer[@]}"); fi
  start=$(date +%s%N)
  "${timer[@]}" "${pytest[@]}" -p no:xdist -k "$keyword" --tile-update \
    --tile-report "$work/$name-cold.json" > "$work/$name-cold.log" 2>&1
  echo "cold -k '$keyword': exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$work/$name-times.txt"
  cp "$matrix" "$work/"
else
  keyword=$3 name=$4
  work=/tmp/gpu-work/$name
  mkdir -p "$work"
  for workers in 1 auto; do
    start=$(date +%s%N)
    "${pytest[@]}" -k "$keyword" -n "$workers" --tile-timing-iters 20 --tile-report "$work/$name-warm-n$workers.json" \
      > "$work/$name-warm-n$workers.log" 2>&1
    echo "warm -k '$keyword' -n $workers: exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$work/$name-times.txt"
  done
fi
if [ "$phase" = warm ]; then python3 benchmarks/case_overhead.py "$work/$name-warm-n1.json" | tee "$work/$name-overhead.json"; fi
tar -czf "$out/$name.tgz" -C "$work" .
tail -n 3 "$work/$name-"*.log | tail -n 12
