#!/usr/bin/env bash
# Cold build of a matrix slice with 1, 4, 8, 16 ... parallel compiles, each from an empty cache:
# wall time, and the peak RAM of the largest compile (GNU time's maximum resident set of the
# pytest process tree). Compile only (--tile-device compile), one pytest process.
#
#   [JOBS_LIST="1 4 8 16"] scripts/gpu-cold-scaling.sh MATRIX KEYWORD NAME
#
# Parallel efficiency for N jobs is wall(1) / (N x wall(N)). A 16-case slice takes about
# 400 s with one job on an H200 host: split JOBS_LIST over calls if needed.
set -uo pipefail
matrix=$1 keyword=$2 name=$3
out=${OUT:-$PWD/gpu-out}
work=/tmp/gpu-work/$name
mkdir -p "$out" "$work"
. "$(dirname "$0")/gpu-env.sh"
echo "cpus $(nproc), $(nvcc --version | tail -1)" > "$work/$name-device.txt"
for jobs in ${JOBS_LIST:-1 4 8 16}; do
  export TILECONFORM_CACHE_DIR=/tmp/tc-scaling-$jobs
  rm -rf "$TILECONFORM_CACHE_DIR"
  start=$(date +%s)
  /usr/bin/time -v python3 -m pytest "${plugins[@]}" -q -p no:xdist --tile-matrix "$matrix" -k "$keyword" \
    --tile-device compile --tile-build-jobs "$jobs" > "$work/$name-j$jobs.log" 2>&1
  status=$?
  peak=$(grep "Maximum resident" "$work/$name-j$jobs.log" | awk '{print $NF}')
  echo "jobs $jobs: exit $status in $(( $(date +%s) - start )) s, peak RSS ${peak} kB" | tee -a "$work/$name-times.txt"
  tar -czf "$out/$name.tgz" -C "$work" .
done
