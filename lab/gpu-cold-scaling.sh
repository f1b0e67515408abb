#!/usr/bin/env bash
# Cold build of a matrix slice on 1, 4, 8, 16 ... cores, each from an empty cache: the pytest
# process is pinned to the first N cores (taskset), and the plugin sizes its units and parallel
# compiles from what it may use, as it would on an N-core host. Compile only
# (--tile-device compile), one pytest process. Per run: wall time, CPU seconds (user + sys) and
# the largest single process (GNU time reports the largest child, i.e. the largest compile step).
#
#   [CORES_LIST="1 4 8 16"] lab/gpu-cold-scaling.sh MATRIX KEYWORD NAME
#
# Parallel efficiency on N cores is wall(1) / (N x wall(N)). On the H200 host the whole sm90
# matrix takes about 5,000 CPU-seconds (4,954 on 16 cores); a unit of 36 SM90 cases about 295:
# size the slice (and split CORES_LIST over calls) to fit.
set -uo pipefail
matrix=$1 keyword=$2 name=$3
out=${OUT:-$PWD/gpu-out}
work=/tmp/gpu-work/$name
mkdir -p "$out" "$work"
. "$(dirname "$0")/gpu-env.sh"
echo "cpus $(nproc), $(nvcc --version | tail -1)" > "$work/$name-device.txt"
for cores in ${CORES_LIST:-1 4 8 16}; do
  export TILECONFORM_CACHE_DIR=/tmp/tc-scaling-$cores
  rm -rf "$TILECONFORM_CACHE_DIR"
  start=$(date +%s%N)
  taskset -c "0-$((cores - 1))" /usr/bin/time -v python3 -m pytest "${plugins[@]}" -q -p no:xdist \
    --tile-matrix "$matrix" -k "$keyword" --tile-device compile > "$work/$name-c$cores.log" 2>&1
  status=$?
  wall=$(( ($(date +%s%N) - start) / 1000000 ))
  user=$(grep "User time" "$work/$name-c$cores.log" | awk '{print $NF}')
  sys=$(grep "System time" "$work/$name-c$cores.log" | awk '{print $NF}')
  peak=$(grep "Maximum resident" "$work/$name-c$cores.log" | awk '{print $NF}')
  units=$(grep -m1 "translation unit" "$work/$name-c$cores.log")
  echo "cores $cores: exit $status in $wall ms, cpu ${user}+${sys} s, largest process ${peak} kB; $units" \
    | tee -a "$work/$name-times.txt"
  tar -czf "$out/$name.tgz" -C "$work" .
done
