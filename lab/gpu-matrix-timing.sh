#!/usr/bin/env bash
# Issue 7's figures for a whole matrix on this host: the cold build and run (from an empty
# build cache, in slices that each fit one device call, the cache kept between them), then
# warm reruns of everything with one worker and with one worker per GPU.
#
#   [LIMIT=S] lab/gpu-matrix-timing.sh cold MATRIX KEYWORD NAME    # one slice; run each slice once
#   [WARM_RUNS="1 auto"] lab/gpu-matrix-timing.sh warm MATRIX KEYWORD NAME    # after the slices, same machine
#
# Cold slices use the host's cores as the plugin sizes them (cores and RAM) and record their
# expectations with --tile-update (nothing changes unless a verdict does). Warm reruns time 20
# launcher calls per case (kernel_ms), so per-case overhead = case duration - kernel time.
# WARM_RUNS names the warm reruns: N or auto (pytest -n N), inproc (no xdist: the cases run in
# the pytest process itself); a suffix @T runs it with OMP_NUM_THREADS=T. Around each rerun the
# host's state is kept (NAME-RUN-before/after.sys: the cgroup's CPU throttling, transparent
# hugepages, the kernel's compaction counters), to explain slow cases.
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
  snapshot() {
    { date +%s.%N; cat /sys/fs/cgroup/cpu.max /sys/fs/cgroup/cpu.stat 2>/dev/null
      cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag 2>/dev/null
      grep -E '^(compact_|thp_)' /proc/vmstat; } > "$work/$name-$1.sys"
  }
  for run in ${WARM_RUNS:-1 auto}; do
    workers=${run%@*} env=()
    if [ "$run" != "$workers" ]; then env=(env "OMP_NUM_THREADS=${run#*@}"); fi
    if [ "$workers" = inproc ]; then how=(-p no:xdist); else how=(-n "$workers"); fi
    label=${run/@/-omp}; label=${label/#[0-9a]/n&}
    snapshot "$label-before"
    start=$(date +%s%N)
    "${env[@]}" "${pytest[@]}" -k "$keyword" "${how[@]}" --tile-timing-iters 20 \
      --tile-report "$work/$name-warm-$label.json" > "$work/$name-warm-$label.log" 2>&1
    echo "warm -k '$keyword' $run: exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$work/$name-times.txt"
    snapshot "$label-after"
    python3 benchmarks/case_overhead.py "$work/$name-warm-$label.json" > "$work/$name-overhead-$label.json"
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(sys.argv[2], d['overhead'], d['overhead_mean_ms'], d['parts'].get('check'))" \
      "$work/$name-overhead-$label.json" "$label"
  done
fi
tar -czf "$out/$name.tgz" -C "$work" .
tail -n 3 "$work/$name-"*.log | tail -n 12
